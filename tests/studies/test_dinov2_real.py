"""Study 2 (``benchmarks/dinov2_real.py``): its pooled measurements are the geometry analysis', its per-image ones
are the textbook formulas on each image alone, its position-table controls change the table and nothing else, its
random twin is not near-identity, every interval it reports contains its estimate, and its committed report
regenerates byte for byte from the committed JSON."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats
from timm.layers import resample_abs_pos_embed
from torch.utils.data import TensorDataset

from benchmarks import dinov2_real, dinov2_report
from pebench.analysis.geometry import geometry, rpi_permutation
from pebench.analysis.pretrained import TimmTask

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "results" / "dinov2-real"
MODEL = "vit_small_patch14_dinov2"


class _Images:
    """What the geometry analysis reads of a datamodule: ``val_dataset()`` in order and ``batch_size``."""

    def __init__(self, x: torch.Tensor) -> None:
        self.ds, self.batch_size = TensorDataset(x, torch.zeros(len(x), dtype=torch.long)), 4

    def val_dataset(self, resolution=None) -> TensorDataset:
        return self.ds


def _tiny(seed: int = 0, **options) -> TimmTask:
    torch.manual_seed(seed)
    return TimmTask(MODEL, {"depth": 2, "img_size": 56, **options}).eval()


def _images(n: int = 6, size: int = 56) -> torch.Tensor:
    return torch.randn(n, 3, size, size, generator=torch.Generator().manual_seed(1))


UNIT = [0, 0, 1, 2, 2, 3]  # four units: two with two crops, two with one
PERMS = [rpi_permutation(16, 0, k) for k in range(2)]


def test_pooled_measurements_are_the_geometry_analysis_and_leave_one_out_is_the_subset():
    task, x = _tiny(), _images()
    got = dinov2_real.measure(task, x, UNIT, PERMS, batch=4)
    want = geometry(task, _Images(x), probe_size=None, seed=0, rpi_permutations=2, null=False)
    for key in ("ssdc", "ssdc_rpi", "eed_percent"):
        np.testing.assert_allclose(got[f"{key}_pooled"], want[key], rtol=0, atol=1e-9, err_msg=key)
    # the jackknife's leave-one-unit-out set is the same estimator on the crops of the other units
    keep = [i for i, u in enumerate(UNIT) if u != 2]
    again = geometry(task, _Images(x[keep]), probe_size=None, seed=0, rpi_permutations=2, null=False)
    loo = got["pooled"]([0.0, 1.0, 3.0])
    for key in ("ssdc", "ssdc_rpi", "eed_percent"):
        np.testing.assert_allclose(loo[key], again[key], rtol=0, atol=1e-9, err_msg=key)
    # a repeated unit counts twice: unit 1 twice is crop 2 twice
    twice = geometry(task, _Images(x[[2, 2]]), probe_size=None, seed=0, rpi_permutations=2, null=False)
    np.testing.assert_allclose(got["pooled"]([1.0, 1.0])["eed_percent"], twice["eed_percent"], rtol=0, atol=1e-9)


def _numpy_eed(tokens: np.ndarray) -> float:
    cov = np.cov(tokens, rowvar=False, bias=True)
    lam = np.clip(np.linalg.eigvalsh(cov), 0.0, None)
    p = lam[lam > 0] / lam.sum()
    return 100.0 * math.exp(-np.sum(p * np.log(p))) / tokens.shape[1]


def _numpy_ssdc(tokens: np.ndarray, coords: np.ndarray) -> float:
    z = tokens / np.linalg.norm(tokens, axis=1, keepdims=True)
    iu = np.triu_indices(len(tokens), 1)
    dist = np.abs(coords[:, None, :] - coords[None, :, :]).sum(-1)
    return float(stats.spearmanr((z @ z.T)[iu], -dist[iu]).statistic)


@pytest.mark.parametrize("options", [{}, {"embed_dim": 12, "num_heads": 2}], ids=["N<D", "N>D"])
def test_per_image_statistics_are_each_image_alone_averaged_over_its_crops(options):
    task, x = _tiny(**options), _images()
    got = dinov2_real.measure(task, x, UNIT, PERMS, batch=4)
    with torch.inference_mode():
        clean, coords = task.features(x, tap="attn_in")
        permuted = [task.features(x, content_perm=p, tap="attn_in")[0] for p in PERMS]
    c = coords.numpy()
    per_crop = {"eed_percent": [[_numpy_eed(f[i].double().numpy()) for f in clean] for i in range(len(x))],
                "ssdc": [[_numpy_ssdc(f[i].double().numpy(), c) for f in clean] for i in range(len(x))],
                "ssdc_rpi": [[np.mean([_numpy_ssdc(pf[layer][i].double().numpy(), c) for pf in permuted])
                              for layer in range(len(clean))] for i in range(len(x))]}
    for key, rows in per_crop.items():
        rows = np.asarray(rows)
        np.testing.assert_allclose(got["per_crop"][key].numpy(), rows, rtol=0, atol=1e-9, err_msg=key)
        by_unit = np.stack([rows[[i for i, u in enumerate(UNIT) if u == k]].mean(0) for k in range(4)])
        np.testing.assert_allclose(got["per_image"][key].numpy(), by_unit, rtol=0, atol=1e-9, err_msg=key)


def test_position_controls_permute_or_zero_the_patch_rows_and_nothing_else():
    task = _tiny(img_size=84)  # a 6x6 table, read at 56 px (4x4): the controls start from the resampled table
    perm = dinov2_real.table_permutation(16, 0)
    assert sorted(perm.tolist()) == list(range(16)) and perm.tolist() != list(range(16))
    assert torch.equal(perm, dinov2_real.table_permutation(16, 0))  # fixed
    ctl = dinov2_real.position_controls(task, 56, 0)
    original = task.model.pos_embed.detach()
    resampled = resample_abs_pos_embed(original, new_size=[4, 4], old_size=[6, 6], num_prefix_tokens=1)
    table = ctl["table"].model.pos_embed.detach()
    assert table.shape == (1, 17, 384) and torch.equal(table, resampled)
    rpt, zeroed = ctl["rpt"].model.pos_embed.detach(), ctl["zeroed"].model.pos_embed.detach()
    for t in (table, rpt, zeroed):
        assert torch.equal(t[:, :1], original[:, :1])  # the class-token row is untouched
    assert torch.equal(rpt[0, 1:], table[0, 1:][perm])
    assert not torch.equal(rpt, table)
    assert torch.count_nonzero(zeroed[:, 1:]) == 0
    sd = task.model.state_dict()
    for label, m in ctl.items():  # every other parameter is the task's
        for k, v in m.model.state_dict().items():
            assert k == "pos_embed" or torch.equal(v, sd[k]), (label, k)
    x = _images(2)
    with torch.inference_mode():
        base = task.features(x, tap="attn_in")[0]
        same = ctl["table"].features(x, tap="attn_in")[0]
        moved = ctl["rpt"].features(x, tap="attn_in")[0]
        # content moved with the table: position i holds crop token perm[i] with its own position vector
        both = ctl["rpt"].features(x, content_perm=perm, tap="attn_in")[0]
    for b, s, m, w in zip(base, same, moved, both):
        assert torch.equal(b, s)  # resampling once up front is what the forward pass does
        assert not torch.allclose(b, m, atol=1e-3)
        torch.testing.assert_close(w, b[:, perm], rtol=0, atol=1e-4)


def test_random_twin_is_not_near_identity():
    with torch.inference_mode():
        x = _images(2)
        twin = dinov2_real.random_twin(MODEL, 56, 0, {"depth": 3})
        feats = twin.features(x, tap="attn_in")[0]
        torch.manual_seed(0)
        default = TimmTask(MODEL, {"depth": 3, "img_size": 56}).eval()  # timm's layer scale 1e-5
        near = default.features(x, tap="attn_in")[0]

    def change(f):
        return float((f[-1] - f[0]).norm() / f[0].norm())

    assert change(feats) > 0.1
    assert change(near) < 1e-3
    assert float(twin.model.blocks[0].ls1.gamma.min()) == 1.0


def test_report_statistics():
    eed = np.array([60, 60, 60, 60, 25, 25, 25, 25, 90, 90, 90, 90], dtype=float)
    assert float(dinov2_report.dip(eed, dinov2_report.GROUPINGS["thirds"])) == pytest.approx(35.0)
    assert float(dinov2_report.dip(eed, dinov2_report.GROUPINGS["seed"])) == pytest.approx(60 - (60 + 60 + 25) / 3)
    res = {"protocol": {"resamples": 2000, "bootstrap_seed": 0}}
    few = dinov2_report.cell([1.0, 2.0, 3.0], dinov2_report._mean, res, null=0.0)
    assert few["estimate"] == 2.0 and few["lo"] is None and few["p"] is None  # 3 units: no interval, no test
    many = dinov2_report.cell([float(v) for v in range(1, 25)], dinov2_report._mean, res, null=0.0)
    assert many["lo"] <= many["estimate"] == 12.5 <= many["hi"]
    assert many["p_floor"] == pytest.approx(2 / 2001) and many["p"] == many["p_floor"]


def _cells(obj, where=""):
    """Every summary (a dict with an ``estimate``) in the JSON, with where it is."""
    if isinstance(obj, dict) and "estimate" in obj:
        yield where, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _cells(v, f"{where}/{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _cells(v, f"{where}/{i}")


def _committed() -> dict:
    return json.loads((COMMITTED / "study.json").read_text(encoding="utf-8"))


needs_results = pytest.mark.skipif(not (COMMITTED / "study.json").is_file(),
                                   reason="the study's results are not committed")


@needs_results
def test_every_committed_interval_contains_its_estimate_and_every_p_is_a_p():
    res = _committed()
    cells = list(_cells({"sets": res["sets"], "summary": res["summary"], "verdicts": res["verdicts"]}))
    assert len(cells) > 1000
    for where, c in cells:  # the pooled cells of a set too small for an interval carry no p at all
        if c["lo"] is not None:
            assert c["lo"] <= c["estimate"] <= c["hi"], where
        if c.get("p") is not None:
            assert 0.0 < c["p"] <= 1.0, where
            assert c["p_floor"] is None or c["p"] >= c["p_floor"] * (1 - 1e-6), where
    # a set with fewer than MIN_UNITS units has estimates only; an untested claim is outside the Holm family
    for name, s in res["sets"].items():
        if len(s["units"]) < dinov2_report.MIN_UNITS:
            assert all(c["lo"] is None and c["p"] is None for _, c in _cells(res["summary"][name]))
            assert all(c["lo"] is None for _, c in _cells(s["pooled_summary"]))
    for t in res["verdicts"]:
        assert (t["p"] is None) == (t["p_holm"] is None)
        assert not (t["holds"] and t["opposite"])
    assert res["protocol"]["resamples"] >= 2000


@needs_results
def test_committed_report_regenerates_from_the_committed_json(tmp_path):
    res = _committed()
    # the verdicts are what the numbers say (the JSON keeps 7 significant digits)
    numbers = ("estimate", "lo", "hi", "p", "p_floor", "p_holm")
    for got, stored in zip(dinov2_report.verdict_tests(res), res["verdicts"], strict=True):
        assert {k: got[k] for k in ("claim", "statistic", "procedure", "n", "holds", "opposite")} == \
            {k: stored[k] for k in ("claim", "statistic", "procedure", "n", "holds", "opposite")}
        for k in numbers:
            assert (got[k] is None) == (stored[k] is None), k
            if got[k] is not None:
                assert got[k] == pytest.approx(stored[k], rel=1e-6, abs=1e-9), (got["claim"], k)
    # and a few summary cells are what the per-image values say
    s = res["summary"]["objects"]
    for model, metric, layer in (("pretrained", "eed_percent", 0), ("twin", "ssdc", 11), ("rpt", "ssdc_rpi", 5)):
        col = [row[layer] for row in res["sets"]["objects"]["per_image"][model][metric]]
        got = dinov2_report.cell(col, dinov2_report._mean, res)
        for k in ("estimate", "lo", "hi"):
            assert got[k] == pytest.approx(s["per_image"][model][metric][layer][k], rel=1e-6, abs=1e-9)
    report = tmp_path / "REPORT.md"
    assert dinov2_real.main(["--results", str(COMMITTED / "study.json"), "--report", str(report)]) == 0
    assert report.read_text(encoding="utf-8") == (COMMITTED / "REPORT.md").read_text(encoding="utf-8")
    text = report.read_text(encoding="utf-8") + (COMMITTED / "study.json").read_text(encoding="utf-8")
    assert "fine-tuned for saliency is not stated" in text
    for path in ("/work/", "/tmp/", "/root/", "/home/"):
        assert path not in text

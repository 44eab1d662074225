"""probe-parts (the point-cloud probe): labels recomputed from the part centres, the exact no-PE
ceiling through the tokenizer's grouping, identical no-PE logits within an orbit, determinism,
and end-to-end runs."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from pebench.cli import main
from pebench.datamodules import build_datamodule, get_datamodule_class
from pebench.datamodules.probes.probe_parts import PART_POINTS, group_multiset_ceiling
from pebench.models import PointTokenizer
from pebench.models.tokenizers import farthest_point_sample, knn_group, point_groups
from pebench.tasks.classification import ClassificationTask

SMALL = {"train_size": 48, "val_size": 24, "test_size": 72, "batch_size": 8}


def dm(**kw):
    return build_datamodule("probe-parts", **{**SMALL, **kw})


def _ref_label(a, b):
    """+x, -x, +y, -y, +z, -z from the part centres, written independently of the generator."""
    d = [float(q) - float(p) for p, q in zip(a, b)]
    order = sorted(range(3), key=lambda k: -abs(d[k]))
    assert abs(d[order[0]]) - abs(d[order[1]]) >= 0.14  # unambiguous
    return 2 * order[0] + (0 if d[order[0]] > 0 else 1)


def _rows(x):
    return sorted(map(tuple, np.asarray(x, dtype=np.float64).round(9).tolist()))


def test_registered_with_the_ceiling(capsys):
    cls = get_datamodule_class("probe-parts")
    assert cls.modality == "points" and not cls.needs_data_root and cls.has_test_split
    assert cls.no_pe_bound() == pytest.approx(1 / 6)
    assert main(["list", "datasets"]) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if "probe-parts" in ln]
    assert len(line) == 1 and "points" in line[0] and "no-PE ceiling 16.7 %" in line[0]


def test_labels_are_the_geometry_and_splits_are_halves():
    m = dm()
    assert m.input_shape() == (64, 3) and m.num_groups == 4 and m.num_classes == 6
    for split, ds in (("train", m.train_dataset()), ("val", m.val_dataset()), ("test", m.test_dataset())):
        labels = []
        for i in range(len(ds)):
            s = ds.scene(i)
            cloud, y = ds[i]
            kinds = [p["kind"] for p in s["parts"]]
            assert kinds[:2] == ["sphere", "cube"] and len(kinds) == 4
            centres = [p["centre"] for p in s["parts"]]
            assert y == s["label"] == _ref_label(centres[0], centres[1]), (split, i)
            # the cloud is exactly the parts' points around their centres (any order)
            assert tuple(cloud.shape) == (64, 3) and cloud.dtype == torch.float32
            assert _rows(cloud.numpy()) == _rows(np.concatenate([p["points"] + p["centre"] for p in s["parts"]]))
            xs = np.asarray(cloud[:, 0])
            assert (xs > 0).all() if split == "test" else (xs < 0).all()
            for p in s["parts"]:  # 16 points each, around their mean
                assert len(p["points"]) == PART_POINTS and np.abs(p["points"].mean(0)).max() < 2e-3
            gap = min(np.linalg.norm(a - b) for j, a in enumerate(centres) for b in centres[j + 1:])
            assert gap > 4 * max(np.linalg.norm(p["points"], axis=1).max() for p in s["parts"])
            labels.append(y)
        assert sorted(set(labels)) == list(range(6)), split
        assert labels[:6] == [0, 1, 2, 3, 4, 5]  # orbit 0: every direction once


def test_orbits_share_content_and_differ_in_placement():
    ds = dm().test_dataset()
    s = [ds.scene(i) for i in range(7)]
    for j in range(1, 6):
        for p, q in zip(s[0]["parts"], s[j]["parts"]):
            assert p["kind"] == q["kind"] and np.array_equal(p["points"], q["points"])
        assert not np.array_equal(s[0]["parts"][1]["centre"], s[j]["parts"][1]["centre"])
    assert not np.array_equal(s[0]["parts"][0]["points"], s[6]["parts"][0]["points"])  # next orbit: new parts


def test_computed_ceiling_is_one_sixth_and_not_vacuous():
    m = dm()
    assert m.no_pe_ceiling("test") == pytest.approx(1 / 6) == pytest.approx(m.no_pe_bound())
    assert m.no_pe_ceiling("train") == pytest.approx(1 / 6)
    ds = m.test_dataset()
    clouds = torch.stack([ds[i][0] for i in range(len(ds))])
    # labels constant within each orbit: the multiset separates orbits, so a content-only model gets all
    assert group_multiset_ceiling(clouds, [i // 6 % 2 for i in range(len(ds))], 4, PART_POINTS) == 1.0
    # the reason for centre="mean": with FPS-point centres the contents differ inside an orbit
    fps, _ = point_groups(clouds[:6], 4, PART_POINTS, "fps")
    key = [sorted(np.sort(g.numpy(), axis=0).tobytes() for g in sample) for sample in fps]
    assert any(k != key[0] for k in key[1:])


def test_a_no_pe_model_cannot_separate_an_orbit():
    m = dm()
    ds = m.test_dataset()
    x = torch.stack([ds[i][0] for i in range(12)])  # two orbits of six
    torch.manual_seed(0)
    task = ClassificationTask(modality="points", num_classes=6, pe="none", num_groups=m.num_groups,
                              tokenizer_options=m.tokenizer_options()).eval()
    assert task.tokenizer.centre == "mean" and task.tokenizer.group_size == PART_POINTS
    assert task.tokenizer.offset_scale == 10.0
    with torch.no_grad():
        logits = task(x)
    torch.testing.assert_close(logits[:6], logits[:1].expand(6, -1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits[6:], logits[6:7].expand(6, -1), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(logits[0], logits[6], atol=1e-4)
    task_pe = ClassificationTask(modality="points", num_classes=6, pe="pape", num_groups=m.num_groups,
                                 tokenizer_options=m.tokenizer_options()).eval()
    with torch.no_grad():
        assert not torch.allclose(task_pe(x[:6]), task_pe(x[:1]).expand(6, -1), atol=1e-6)


def test_default_point_tokenizer_unchanged():
    """centre="fps" (the default) is the original Point-MAE path, value for value."""
    torch.manual_seed(0)
    tok = PointTokenizer(embed_dim=16, num_groups=8, group_size=4).eval()
    pts = torch.randn(2, 40, 3)
    with torch.no_grad():
        tb = tok(pts)
        centres = torch.gather(pts, 1, farthest_point_sample(pts, 8).unsqueeze(-1).expand(-1, -1, 3))
        f = tok.first(knn_group(pts, centres, 4))
        g = f.max(dim=2, keepdim=True).values.expand_as(f)
        ref = tok.second(torch.cat([f, g], dim=-1)).max(dim=2).values
    assert torch.equal(tb.x, ref) and torch.equal(tb.coords, centres * 4.0)
    mean = PointTokenizer(embed_dim=16, num_groups=8, group_size=4, centre="mean")
    groups, c = point_groups(pts, 8, 4, "mean")
    assert torch.allclose(groups.mean(2), torch.zeros(2, 8, 3), atol=1e-6)
    assert torch.allclose(mean(pts).coords, c * 4.0)
    with pytest.raises(ValueError, match="centre must be one of fps, mean"):
        PointTokenizer(embed_dim=16, centre="median")
    with pytest.raises(ValueError, match="offset_scale must be > 0"):
        PointTokenizer(embed_dim=16, offset_scale=0)
    scaled = PointTokenizer(embed_dim=16, num_groups=8, group_size=4, offset_scale=10.0).eval()
    scaled.load_state_dict(tok.state_dict())
    with torch.no_grad():  # the PointNet sees the offsets times 10; centres unchanged
        f = tok.first(10.0 * knn_group(pts, centres, 4))
        g = f.max(dim=2, keepdim=True).values.expand_as(f)
        ref10 = tok.second(torch.cat([f, g], dim=-1)).max(dim=2).values
        assert torch.equal(scaled(pts).x, ref10) and torch.equal(scaled(pts).coords, centres * 4.0)


def test_data_seed_resolutions_and_options():
    a, b, c = dm(seed=3), dm(seed=3), dm(seed=4)
    assert torch.equal(a.train_dataset()[5][0], b.train_dataset()[5][0])
    assert not torch.equal(a.train_dataset()[5][0], c.train_dataset()[5][0])
    assert torch.equal(a.train_dataset()[5][0], dm(seed=4, data_seed=3).train_dataset()[5][0])
    assert not torch.equal(a.train_dataset()[5][0], a.val_dataset()[5][0])
    m = dm()
    dense = m.val_dataset("128x8")  # the same scene, twice the points per part
    assert tuple(dense[2][0].shape) == (128, 3) and dense[2][1] == m.val_dataset()[2][1]
    assert [p["centre"].tolist() for p in dense.scene(2)["parts"]] == \
        [p["centre"].tolist() for p in m.val_dataset().scene(2)["parts"]]
    assert dm(distractors=0).input_shape() == (32, 3) and dm(distractors=0).num_groups == 2
    with pytest.raises(ValueError, match="not allowed"):
        dm(resolution=128)
    with pytest.raises(ValueError, match="split evenly"):
        m.val_dataset("66")
    with pytest.raises(ValueError, match="distractors"):
        dm(distractors=-1)


@pytest.mark.parametrize("pe", ["pape", "none"])
def test_fast_dev_run(pe, tmp_path):
    out = tmp_path / "runs"
    args = ["run", "--dataset", "probe-parts", "--pe", pe, "--fast-dev-run", "--batch-size", "4", "--model",
            "vit-probe", "--no-progress-bar", "--out", str(out), "--data-option", "train_size=12",
            "--data-option", "val_size=8", "--data-option", "test_size=12"]
    if pe == "pape":  # the denser renderings (extrapolation) and the point shifts (robustness) on this dataset
        args += ["--analyses", "extrapolation,robustness", "--analysis-option", "extrapolation_samples=8",
                 "--analysis-option", "robustness_samples=8"]
    assert main(args) == 0
    res = json.loads((out / "probe-parts" / pe / "vit-probe" / "seed0" / "results.json").read_text())
    assert res["status"] == "complete" and res["primary_metric"] == "test/acc1"
    assert "test/acc1" in res["metrics"] and "val/acc1" in res["metrics"]
    if pe == "pape":
        rows = {r["resolution"]: r for r in res["extrapolation"]["rows"]} if isinstance(res["extrapolation"], dict) \
            else {r["resolution"]: r for r in res["extrapolation"]}
        assert {"64x4", "128x8", "256x16"} <= set(rows)


def test_floor_option_keeps_the_exact_ceiling():
    m = dm(floor=True, test_size=36)
    assert m.input_shape() == (320, 3) and m.num_groups == 20
    s = m.test_dataset().scene(3)
    tiles = [p for p in s["parts"] if p["kind"] == "tile"]
    assert len(tiles) == 16 and all(np.array_equal(t["points"], tiles[0]["points"]) for t in tiles)
    assert np.ptp(tiles[0]["points"][:, 2]) == 0  # flat
    assert all(p["centre"][2] >= -0.45 and p["centre"][0] > 0 for p in s["parts"][:4])  # parts above the floor
    assert m.no_pe_ceiling("test") == pytest.approx(1 / 6)

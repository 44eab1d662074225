"""Coordinate-perturbation robustness (issue #45, ComRoPE's protocol): the perturbations' definition, the
curves' clean rows, the exact offset invariance of relative PEs, where the analysis applies, and that it
runs on a task without class logits (DINO) from its backbone's features."""
from __future__ import annotations

import math

import pytest
import torch

import pebench.datamodules.synthetic.shapes  # noqa: F401  (registers the synthetic sets)
from pebench.analysis.coord_robustness import CoordPerturbation, coord_robustness
from pebench.analysis.evaluators import run_analyses
from pebench.datamodules import get_datamodule_class
from pebench.tasks.classification import ClassificationTask


@pytest.fixture(scope="module")
def shapes16():
    return get_datamodule_class("shapes")(batch_size=8, val_size=8, train_size=8, resolution=16)


def _task(pe: str) -> ClassificationTask:
    torch.manual_seed(0)
    return ClassificationTask("image", 8, pe=pe, train_grid=(4, 4)).eval()


def test_jitter_is_clamped_gaussian_per_token_and_keeps_fixed_axes():
    c = torch.zeros(50, 3)
    out = CoordPerturbation("jitter", 1.0, torch.Generator().manual_seed(0), fixed_axes=(0,))(c, 400)  # (B, N, 3)
    noise = out - c
    assert noise.shape == (400, 50, 3) and float(noise.abs().max()) <= 0.5
    assert torch.equal(noise[..., 0], torch.zeros_like(noise[..., 0]))  # the time axis is not jittered
    # sd s/2 = 0.5 before the clamp at +-1/2: the clamped normal's sd is 0.5 * sqrt(E[min(z^2, 1)])
    cdf1, pdf1 = 0.5 * (1 + math.erf(1 / math.sqrt(2))), math.exp(-0.5) / math.sqrt(2 * math.pi)
    e_clamped = (2 * cdf1 - 1) - 2 * pdf1 + 2 * (1 - cdf1)  # int_{-1}^{1} z^2 phi + P(|z| > 1)
    assert float(noise[..., 1:].std()) == pytest.approx(0.5 * math.sqrt(e_clamped), rel=0.02)
    small = CoordPerturbation("jitter", 0.1, torch.Generator().manual_seed(0))(c, 400) - c
    assert float(small.std()) == pytest.approx(0.05, rel=0.02)  # almost never clamped


def test_offset_is_one_vector_per_sample_in_grid_sides():
    c = torch.arange(32, dtype=torch.float32).view(16, 2)
    out = CoordPerturbation("offset", 0.5, torch.Generator().manual_seed(0))(c, 2000, grid=(4, 8))
    shift = out - c  # (B, N, 2)
    assert torch.allclose(shift, shift[:, :1].expand_as(shift), atol=1e-5)  # the same vector for every token of a sample
    assert float(shift[:, 0].std()) == pytest.approx(0.5 * 8, rel=0.05)  # sd 0.5 grid sides (largest side 8)
    with pytest.raises(ValueError, match="unknown coordinate perturbation"):
        CoordPerturbation("rotate", 1.0, torch.Generator())


def test_curves_clean_rows_and_relative_pe_offset_invariance(shapes16):
    sizes = dict(jitter_sizes=(0.0, 1.0), offset_sizes=(0.0, 1.0, 4.0))
    rope = coord_robustness(_task("rope-axial"), shapes16, seed=0, max_samples=8, **sizes)
    sincos = coord_robustness(_task("sincos"), shapes16, seed=0, max_samples=8, **sizes)
    for res in (rope, sincos):
        assert res["n_samples"] == 8 and res["metric"] == "acc1"
        for kind in ("jitter", "offset"):
            assert res[kind][0]["size"] == 0.0 and res[kind][0]["feature_cos"] == pytest.approx(1.0, abs=1e-12)
            assert res[kind][0]["acc"] == res["clean_acc"]
    # RoPE's logits depend on r_i - r_j only: a global offset changes nothing but rounding
    assert all(r["feature_cos"] > 1 - 1e-5 and r["acc"] == rope["clean_acc"] for r in rope["offset"])
    # an absolute PE (sincos, added to the tokens) moves with the offset
    assert sincos["offset"][2]["feature_cos"] < 0.99
    assert sincos["jitter"][1]["feature_cos"] < 1 - 1e-4 and rope["jitter"][1]["feature_cos"] < 1 - 1e-7
    again = coord_robustness(_task("rope-axial"), shapes16, seed=0, max_samples=8, **sizes)
    assert again == rope  # seeded: deterministic


def test_named_for_ape_it_does_not_apply_and_the_coords_hook_is_restored(shapes16, tmp_path):
    ape = _task("ape")
    out = run_analyses(ape, shapes16, "coord-robustness", tmp_path, {"seed": 0})
    assert out["coord_robustness"] is None and not (tmp_path / "coord_robustness.png").exists()
    task = _task("rope-axial")
    out = run_analyses(task, shapes16, "coord-robustness", tmp_path, {"seed": 0, "analysis_options": {
        "coord_samples": 4, "coord_jitter_sizes": [0, 0.5], "coord_offset_sizes": [0, 2]}})
    assert [r["size"] for r in out["coord_robustness"]["offset"]] == [0.0, 2.0]
    assert (tmp_path / "coord_robustness.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert task.backbone.coord_aug is None


def test_runs_on_dino_from_backbone_features_only(shapes16):
    from pebench.tasks.dino import DinoTask

    torch.manual_seed(0)
    task = DinoTask(num_classes=8, model="vit-nano", pe="rope-axial", patch_size=4, train_grid=(4, 4), out_dim=16,
                    head_hidden=16, head_bottleneck=8).eval()
    res = coord_robustness(task, shapes16, seed=0, max_samples=4, jitter_sizes=(0.0, 1.0), offset_sizes=(0.0, 1.0))
    assert res["metric"] is None and res["clean_acc"] is None
    assert res["jitter"][0]["feature_cos"] == pytest.approx(1.0, abs=1e-12) and res["jitter"][1]["acc"] is None
    assert res["jitter"][1]["feature_cos"] < 1.0 and res["offset"][1]["feature_cos"] > 1 - 1e-5

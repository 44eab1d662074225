"""Post-training evaluators (issue #4): geometry / RPI, robustness (FS), α sweep, extrapolation,
plots and ``run_analyses``. Models have random weights (seeded): the properties tested here do
not need training, and training on 2 CPU cores would dominate the runtime."""
from __future__ import annotations

import math

import pytest
import torch

import pebench.datamodules.synthetic.primitives  # noqa: F401  (registers the synthetic sets)
import pebench.datamodules.synthetic.shapes  # noqa: F401
from pebench.analysis import evaluators
from pebench.analysis import robustness as rob_mod
from pebench.analysis.alpha import ALPHAS, alpha_sweep
from pebench.analysis.evaluators import run_analyses
from pebench.analysis.extrapolation import default_resolutions, evaluate_extrapolation
from pebench.analysis.geometry import geometry, rpi_permutation
from pebench.analysis.robustness import (
    blur_kernel_size,
    event_dropout,
    event_noise,
    fragility,
    gaussian_blur,
    image_codec,
    jpeg,
    point_dropout,
    robustness,
)
from pebench.datamodules import get_datamodule_class
from pebench.tasks.classification import ClassificationTask

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _shapes(res: int = 32, val_size: int = 64, batch_size: int = 32):
    return get_datamodule_class("shapes")(batch_size=batch_size, val_size=val_size, train_size=8, resolution=res)


def _image_task(pe: str, side: int = 32, seed: int = 0) -> ClassificationTask:
    torch.manual_seed(seed)
    return ClassificationTask("image", 8, pe=pe, train_grid=(side // 4, side // 4)).eval()


@pytest.fixture(scope="module")
def shapes32():
    return _shapes(32, val_size=64)


@pytest.fixture(scope="module")
def shapes16():
    return _shapes(16, val_size=16, batch_size=16)


# ------------------------------------------------------------------------------ geometry / RPI
def test_rpi_is_content_permutation_equivariant_without_pe(shapes32):
    """pe=none: the RPI tokens are exactly the clean tokens relabelled by the permutation."""
    task = _image_task("none")
    x = torch.stack([shapes32.val_dataset()[i][0] for i in range(4)])
    perm = rpi_permutation(64, seed=3)
    with torch.no_grad():
        feats, coords = task.features(x)
        feats_p, coords_p = task.features(x, content_perm=perm)
    assert torch.equal(coords, coords_p)
    for f, fp in zip(feats, feats_p):
        torch.testing.assert_close(fp, f[:, perm], atol=1e-5, rtol=1e-5)


GEOMETRY_KEYS = {"tap", "layers", "distance", "ssdc", "ssdc_rpi", "ssdc_rpi_sd", "ssdc_rpi_min", "ssdc_rpi_max",
                 "ssdc_rpi_init", "ssdc_rpi_init_sd", "ssdc_rpi_gain", "rpi_permutations", "eed_tap", "eed_layers",
                 "eed_percent", "eed_top1_share", "probe_size"}


def test_geometry_schema_and_rpi_decouples_content_from_coords(shapes32):
    none = geometry(_image_task("none"), shapes32, probe_size=32, seed=0, rpi_permutations=2, null=False)
    sincos = geometry(_image_task("sincos"), shapes32, probe_size=32, seed=0, rpi_permutations=2, null=False)
    for g in (none, sincos):
        assert set(g) == GEOMETRY_KEYS
        assert g["tap"] == "attn_in" and g["layers"] == [0, 1, 2, 3]  # the SSDC paper's tap: block inputs
        assert g["probe_size"] == 32 and g["distance"] == "l1" and g["rpi_permutations"] == 2
        for k in ("ssdc", "ssdc_rpi", "ssdc_rpi_sd", "eed_percent", "eed_top1_share"):
            assert len(g[k]) == 4 and all(isinstance(v, float) and math.isfinite(v) for v in g[k])
        assert all(0 < v <= 100 for v in g["eed_percent"]) and all(0 < v <= 1 for v in g["eed_top1_share"])
        assert g["ssdc_rpi_init"] is None and g["ssdc_rpi_gain"] is None  # null=False
    # no PE: permuting content against coords destroys index-anchored structure ...
    assert all(abs(v) < 0.1 for v in none["ssdc_rpi"]), none
    # ... (while the images' own smoothness gives the clean tokens some SSDC)
    assert max(none["ssdc"]) > max(abs(v) for v in none["ssdc_rpi"])
    # an additive PE keeps structure anchored to the index frame under RPI
    assert min(sincos["ssdc_rpi"]) > 0.2, sincos


def test_geometry_is_deterministic_and_restores_train_mode(shapes16):
    task = _image_task("sincos", side=16)
    task.train()
    a = geometry(task, shapes16, probe_size=8, seed=5, rpi_permutations=1)
    b = geometry(task, shapes16, probe_size=8, seed=5, rpi_permutations=1)
    assert a == b
    assert task.training


def test_geometry_points_uses_euclidean_distance():
    dm = get_datamodule_class("primitives")(batch_size=4, val_size=4, train_size=4, resolution=128)
    torch.manual_seed(0)
    task = ClassificationTask("points", dm.num_classes, pe="sincos", num_groups=8).eval()
    g = geometry(task, dm, probe_size=4, seed=0, rpi_permutations=2)
    assert g["distance"] == "euclidean" and g["probe_size"] == 4
    assert all(len(g[k]) == 4 for k in ("ssdc", "ssdc_rpi", "ssdc_rpi_init", "ssdc_rpi_gain", "eed_percent"))
    with pytest.raises(ValueError, match="rpi_draw=per-sample needs grid tokens"):
        geometry(task, dm, probe_size=4, rpi_draw="per-sample")


# ------------------------------------------------------------------------------ robustness
def test_fragility_formula():
    assert fragility(0.8, 0.6) == pytest.approx(0.25)
    assert fragility(0.5, 0.5) == 0.0
    assert fragility(0.0, 0.3) is None


def test_robustness_on_a_controlled_model(monkeypatch):
    """Inputs encode their label; the model reads it back; 'jpeg' wipes 3 of 4 samples."""
    task = _image_task("none", side=8)
    monkeypatch.setattr(task, "forward", lambda x, content_perm=None: torch.nn.functional.one_hot(
        x.mean(dim=(1, 2, 3)).round().long().clamp(0, 7), 8).float())
    y = torch.tensor([1, 2, 3, 4])
    x = y.float().view(4, 1, 1, 1).expand(4, 3, 8, 8).contiguous()

    def wipe(x, g, p, ctx):
        out = x.clone()
        out[:3] = 0.0
        return out

    monkeypatch.setitem(rob_mod.PERTURBATIONS, "jpeg", wipe)
    monkeypatch.setitem(rob_mod.PERTURBATIONS, "blur", lambda x, g, p, ctx: x)
    res = robustness(task, None, loader=[(x, y), (x, y)])
    assert res["clean_acc"] == 1.0 and res["n_samples"] == 8
    assert res["jpeg"]["acc"] == 0.25 and res["jpeg"]["fs"] == pytest.approx(0.75)
    assert res["blur"]["acc"] == 1.0 and res["blur"]["fs"] == 0.0
    assert res["jpeg"]["params"] == {"quality": 5} and res["blur"]["params"] == {"sigma": 2.5}
    assert set(res) == {"clean_acc", "clean_acc_se", "chance", "n_samples", "jpeg", "blur"}
    assert res["chance"] == 1 / 8 and res["clean_acc_se"] == 0.0 and res["jpeg"]["fs_reason"] is None


def test_image_shifts(shapes32):
    x = torch.stack([shapes32.val_dataset()[i][0] for i in range(4)])
    codec = image_codec(shapes32)
    assert codec is not None
    torch.testing.assert_close(codec[1](codec[0](x)), x)
    j = jpeg(x, 5, codec)
    assert j.shape == x.shape and j.dtype == x.dtype
    assert 0 < (j - x).abs().mean() < 1.0  # lossy, but the same image
    j_mm = jpeg(x, 5, None)  # min-max fallback
    assert j_mm.shape == x.shape and (j_mm - x).abs().mean() < 1.0
    assert blur_kernel_size(2.5, 32) == 17 and blur_kernel_size(2.5, 10) == 9 and blur_kernel_size(2.5, 8) == 7
    b = gaussian_blur(x, 2.5)
    assert b.shape == x.shape and b.diff(dim=-1).abs().mean() < x.diff(dim=-1).abs().mean()
    clip = x.unsqueeze(2).expand(-1, -1, 2, -1, -1)  # (B, C, T, H, W): per-frame
    torch.testing.assert_close(gaussian_blur(clip, 2.5)[:, :, 1], b)
    torch.testing.assert_close(jpeg(clip, 5, codec)[:, :, 0], j)


def test_event_and_point_shifts():
    g = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    counts = torch.poisson(torch.full((2, 2, 4, 8, 8), 3.0), generator=g())
    d = event_dropout(counts, 0.5, g())
    assert torch.equal(d, event_dropout(counts, 0.5, g()))  # seeded
    assert (d <= counts).all() and torch.equal(d, d.round())
    assert d.sum() / counts.sum() == pytest.approx(0.5, abs=0.05)
    n = event_noise(counts, 0.5, g())
    assert (n >= counts).all() and (n.sum() - counts.sum()) / counts.sum() == pytest.approx(0.5, abs=0.05)
    logd = event_dropout(torch.log1p(counts), 0.5, g(), log_counts=True)
    torch.testing.assert_close(torch.expm1(logd).round(), d)
    pts = torch.randn(3, 100, 3)
    pd = point_dropout(pts, 0.5, g())
    assert pd.shape == pts.shape
    for b in range(3):
        uniq = torch.unique(pd[b], dim=0)
        assert len(uniq) == 50 and all((pts[b] == u).all(-1).any() for u in uniq)


# ------------------------------------------------------------------------------ alpha sweep
def test_alpha_sweep_rows_and_alpha_restored(shapes16):
    task = _image_task("ape", side=16)
    task.backbone.pe.alpha = 1.0
    rows = alpha_sweep(task, shapes16, seed=0, max_samples=8, probe_size=4, rpi_permutations=1)
    assert [r["alpha"] for r in rows] == list(ALPHAS) and len(rows) == 8
    for r in rows:
        assert {"alpha", "acc", "acc_se", "n_samples", "fs", "fs_reason", "shift_acc", "layers", "ssdc_rpi",
                "ssdc_rpi_sd", "ssdc_rpi_peak"} <= set(r)
        assert 0.0 <= r["acc"] <= 1.0 and r["layers"] == [0, 1, 2, 3] and len(r["ssdc_rpi"]) == 4
        # FS follows the chance rule at every α: null exactly when a reason is given
        assert (r["fs"] is None) == (r["fs_reason"] is not None)
        assert r["ssdc_rpi_peak"] == max(v for v in r["ssdc_rpi"] if v is not None)
    assert task.backbone.pe.alpha == 1.0


def test_alpha_sweep_skips_non_additive_pe(shapes16):
    task = _image_task("rope-axial", side=16)
    assert alpha_sweep(task, shapes16) is None
    assert run_analyses(task, shapes16, ["alpha"], None, {"seed": 0})["alpha_sweep"] is None
    assert "alpha_sweep" not in run_analyses(task, shapes16, "all", None, {
        "seed": 0, "extrapolation_resolutions": ["16"],
        "analysis_options": {"probe_size": 4, "robustness_samples": 4, "extrapolation_samples": 4,
                             "rpi_permutations": 1, "rpi_null": "false"}})


# ------------------------------------------------------------------------------ extrapolation
def test_extrapolation_rows_and_bad_size(shapes16):
    task = _image_task("sincos", side=16)
    rows = evaluate_extrapolation(task, shapes16, ["16", 24, "32", "30"], max_samples=4)
    assert [r["resolution"] for r in rows] == ["16", "24", "32", "30"]
    for r, tokens in zip(rows[:3], (16, 36, 64)):
        assert set(r) == {"resolution", "acc1", "n_tokens", "n_samples"}
        assert r["n_tokens"] == tokens and r["n_samples"] == 4 and 0.0 <= r["acc1"] <= 1.0
    assert set(rows[3]) == {"resolution", "error"} and "divisible" in rows[3]["error"]


def test_default_resolutions_and_point_groups_restored():
    assert default_resolutions(_shapes(32)) == ["32", "48", "64", "96", "128"]
    video = get_datamodule_class("moving-shapes")(batch_size=2, val_size=2, train_size=2)
    assert default_resolutions(video) == ["8x32", "8x64", "16x32", "16x64"]
    dm = get_datamodule_class("primitives")(batch_size=2, val_size=2, train_size=2, resolution=64)
    torch.manual_seed(0)
    task = ClassificationTask("points", dm.num_classes, pe="sincos", num_groups=8).eval()
    assert default_resolutions(dm, task) == ["64x8", "128x16", "256x32"]
    rows = evaluate_extrapolation(task, dm, ["64x8", "128", "32x64"], max_samples=2)
    assert [r.get("n_tokens") for r in rows[:2]] == [8, 16]  # bare M scales the groups with M
    assert "error" in rows[2]  # more groups than points
    assert task.tokenizer.num_groups == 8


# ------------------------------------------------------------------------------ run_analyses
def test_run_analyses_writes_sections_and_pngs(shapes16, tmp_path):
    task = _image_task("sincos", side=16)
    cfg = {"seed": 0, "extrapolation_resolutions": ["16", "24", "32", "30"],
           "analysis_options": {"probe_size": 8, "robustness_samples": 8, "alpha_samples": 4,
                                "alpha_probe_size": 4, "extrapolation_samples": 4, "rpi_permutations": 1,
                                "rpi_null": False}}
    out = run_analyses(task, shapes16, "all", tmp_path, cfg)
    assert set(out) == {"geometry", "robustness", "alpha_sweep", "extrapolation", "analysis_times_s"}
    assert len(out["geometry"]["ssdc_rpi"]) == task.backbone.depth
    assert {"clean_acc", "jpeg", "blur"} <= set(out["robustness"])
    assert len(out["alpha_sweep"]) == 8
    assert sum("error" in r for r in out["extrapolation"]) == 1 and len(out["extrapolation"]) == 4
    for name in ("geometry.png", "robustness.png", "alpha_sweep.png", "extrapolation.png"):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 1000
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left
    with pytest.raises(ValueError, match="unknown analysis"):
        run_analyses(task, shapes16, ["geometri"], None, cfg)
    assert evaluators.RESULT_KEYS["alpha"] == "alpha_sweep"


# ------------------------------------------------------------------------------ protocol (issue #11 §1)
def _naive_ssdc(tokens, coords) -> float:
    """Independent reference: per-image cosine matrices averaged over images (numpy), Manhattan
    distances by explicit differences, scipy's Spearman on the strict upper triangle."""
    import numpy as np
    from scipy.stats import spearmanr

    t = tokens.detach().double().numpy()  # (B, N, D)
    z = t / np.linalg.norm(t, axis=-1, keepdims=True)
    S = np.mean([zb @ zb.T for zb in z], axis=0)  # (N, N)
    c = coords.double().numpy()
    D = np.abs(c[:, None, :] - c[None, :, :]).sum(-1)
    iu = np.triu_indices(len(c), k=1)
    return float(spearmanr(S[iu], -D[iu])[0])


def test_ssdc_attn_in_matches_naive_reference_and_layer0_is_ln1_of_embedding_plus_pe(shapes16):
    task = _image_task("sincos", side=16)
    g = geometry(task, shapes16, probe_size=8, seed=0, rpi=False)
    x = torch.stack([shapes16.val_dataset()[i][0] for i in range(8)])
    with torch.no_grad():
        feats, coords = task.features(x, tap="attn_in")
        tb = task.tokenize(x)
        layer0 = task.backbone.blocks[0].norm1(task.backbone.pe.encode_tokens(tb.x, tb.coords, tb.grid))
    torch.testing.assert_close(feats[0], layer0)  # layer 0 = LN1(patch embedding + PE)
    assert len(feats) == task.backbone.depth and g["layers"] == [0, 1, 2, 3]
    for l in range(4):
        assert g["ssdc"][l] == pytest.approx(_naive_ssdc(feats[l], coords), abs=1e-9)
    gb = geometry(task, shapes16, probe_size=8, seed=0, rpi=False, tap="block_out")
    with torch.no_grad():
        fb, _ = task.features(x, tap="block_out")
    assert gb["tap"] == "block_out" and gb["layers"] == [1, 2, 3, 4]
    assert gb["ssdc"][3] == pytest.approx(_naive_ssdc(fb[3], coords), abs=1e-9)
    ge = geometry(task, shapes16, probe_size=8, seed=0, rpi=False, distance="euclidean")
    assert ge["distance"] == "euclidean" and ge["ssdc"] != g["ssdc"]


def test_rpi_mean_and_sd_over_permutations_match_a_loop(shapes16):
    import numpy as np

    task = _image_task("ape", side=16)
    g = geometry(task, shapes16, probe_size=8, seed=3, rpi_permutations=3, null=False)
    x = torch.stack([shapes16.val_dataset()[i][0] for i in range(8)])
    per = []
    with torch.no_grad():
        for k in range(3):
            perm = rpi_permutation(16, seed=3, index=k)
            feats, coords = task.features(x, content_perm=perm, tap="attn_in")
            per.append([_naive_ssdc(f, coords) for f in feats])
    per = np.array(per)  # (K, L)
    np.testing.assert_allclose(g["ssdc_rpi"], per.mean(0), atol=1e-9)
    np.testing.assert_allclose(g["ssdc_rpi_sd"], per.std(0, ddof=1), atol=1e-9)
    np.testing.assert_allclose(g["ssdc_rpi_min"], per.min(0), atol=1e-9)
    np.testing.assert_allclose(g["ssdc_rpi_max"], per.max(0), atol=1e-9)
    # the permutations differ from each other and do not reuse the run's seed stream
    perms = [rpi_permutation(16, 3, k) for k in range(3)]
    assert not torch.equal(perms[0], perms[1])
    assert not torch.equal(perms[0], torch.randperm(16, generator=torch.Generator().manual_seed(3)))


def test_per_sample_rpi_draw_matches_a_loop_over_samples_and_ignores_batching(shapes16):
    """rpi_draw=per-sample: sample s of pass k gets rpi_sample_permutations(..., k, s, 1); SSDC of the
    similarity averaged over the samples so permuted (naive numpy / scipy reference); the batch size
    does not change which permutation a sample gets."""
    import numpy as np

    from pebench.analysis.geometry import rpi_sample_permutations

    task = _image_task("ape", side=16)
    g = geometry(task, shapes16, probe_size=8, seed=3, rpi_permutations=2, null=False, rpi_draw="per-sample")
    g3 = geometry(task, shapes16, probe_size=8, seed=3, rpi_permutations=2, null=False, rpi_draw="per-sample",
                  batch_size=3)
    assert g["rpi_draw"] == "per-sample" and g["rpi_permutations"] == 2
    x = torch.stack([shapes16.val_dataset()[i][0] for i in range(8)])
    per = []
    with torch.no_grad():
        for k in range(2):
            feats = [task.features(x[s:s + 1], content_perm=rpi_sample_permutations(16, 3, k, s, 1)[0],
                                   tap="attn_in") for s in range(8)]
            coords = feats[0][1]
            layers = [torch.cat([f[0][l] for f in feats]) for l in range(len(feats[0][0]))]
            per.append([_naive_ssdc(t, coords) for t in layers])
    per = np.array(per)  # (K, L)
    np.testing.assert_allclose(g["ssdc_rpi"], per.mean(0), atol=1e-6)
    np.testing.assert_allclose(g["ssdc_rpi_sd"], per.std(0, ddof=1), atol=1e-6)
    np.testing.assert_allclose(g3["ssdc_rpi"], g["ssdc_rpi"], atol=1e-6)
    # a permutation per sample and per pass: rows differ, passes differ, the shared stream is not reused
    p0, p1 = rpi_sample_permutations(16, 3, 0, 0, 8), rpi_sample_permutations(16, 3, 1, 0, 8)
    assert len({tuple(r) for r in p0.tolist()}) == 8 and not torch.equal(p0, p1)
    assert all(sorted(r) == list(range(16)) for r in p0.tolist())
    assert not torch.equal(p0[0], rpi_permutation(16, 3, 0))
    # the default protocol is unchanged: no rpi_draw key in its output
    assert "rpi_draw" not in geometry(task, shapes16, probe_size=8, seed=3, rpi_permutations=2, null=False)
    with pytest.raises(ValueError, match="rpi_draw must be one of shared, per-sample"):
        geometry(task, shapes16, probe_size=8, rpi_draw="each")


def test_null_band_is_the_untrained_twin_and_gain_is_trained_minus_init(shapes16):
    from pebench.analysis.geometry import untrained_twin

    task = _image_task("sincos", side=16, seed=7)  # built after manual_seed(7), as bench run does
    twin = untrained_twin(task, 7)
    assert all(torch.equal(a, b) for a, b in zip(task.state_dict().values(), twin.state_dict().values()))
    state = torch.random.get_rng_state()
    untrained_twin(task, 7)
    assert torch.equal(state, torch.random.get_rng_state())  # global RNG untouched
    with torch.no_grad():  # "training": move the weights away from their initialisation
        for p in task.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    g = geometry(task, shapes16, probe_size=4, seed=7, rpi_permutations=2, plain=False)
    ref = geometry(_image_task("sincos", side=16, seed=7), shapes16, probe_size=4, seed=7, rpi_permutations=2,
                   plain=False, null=False)
    assert g["ssdc_rpi_init"] == ref["ssdc_rpi"] and g["ssdc_rpi_init_sd"] == ref["ssdc_rpi_sd"]
    assert g["ssdc_rpi_gain"] == [a - b for a, b in zip(g["ssdc_rpi"], g["ssdc_rpi_init"])]
    assert g["ssdc_rpi"] != g["ssdc_rpi_init"]
    assert min(g["ssdc_rpi_init"]) > 0.2  # a fixed sincos table has SSDC_RPI > 0 untrained: the null band


def test_fs_is_undefined_within_two_standard_errors_of_chance(monkeypatch):
    from pebench.analysis.robustness import fs_undefined_reason

    # 4 classes, chance 0.25; n = 100: SE(0.3) = 0.0458 -> 0.3 is within 2 SE, 0.4 is not (SE 0.049)
    assert fragility(0.3, 0.1, n=100, num_classes=4) is None
    assert "chance 0.2500" in fs_undefined_reason(0.3, 100, 4)
    assert fragility(0.4, 0.2, n=100, num_classes=4) == pytest.approx(0.5)
    assert fs_undefined_reason(0.4, 100, 4) is None
    assert fragility(0.2, 0.1, n=10_000, num_classes=4) == pytest.approx(0.5)  # below chance, far: defined
    assert fragility(0.0, 0.0, n=100, num_classes=4) is None
    # a model at chance inside robustness(): FS null with a reason, the accuracies still reported
    task = _image_task("none", side=8)
    monkeypatch.setattr(task, "forward", lambda x, content_perm=None: torch.nn.functional.one_hot(
        torch.zeros(x.shape[0], dtype=torch.long), 8).float())
    y = torch.arange(8)
    x = torch.zeros(8, 3, 8, 8)
    res = robustness(task, None, loader=[(x, y)])
    assert res["clean_acc"] == 1 / 8 and res["chance"] == 1 / 8
    for s in ("jpeg", "blur"):
        assert res[s]["fs"] is None and "within 2 standard errors" in res[s]["fs_reason"]
        assert res[s]["acc"] == 1 / 8


def test_analysis_options_match_the_config_keys():
    from pebench.runner.config import ANALYSIS_OPTIONS

    assert set(ANALYSIS_OPTIONS) == set(evaluators.DEFAULT_OPTIONS)
    with pytest.raises(ValueError, match="unknown analysis option"):
        evaluators._options({"analysis_options": {"ssdc_tapp": "attn_in"}})
    assert evaluators.DEFAULT_OPTIONS["ssdc_tap"] == "attn_in" and evaluators.DEFAULT_OPTIONS["rpi_permutations"] >= 8


@pytest.mark.parametrize("opts, message", [
    ({"ssdc_tap": "mlp_out"}, "ssdc_tap must be one of attn_in, block_out, got 'mlp_out'"),
    ({"eed_tap": "residual"}, "eed_tap must be one of attn_in, block_out, got 'residual'"),
    ({"rpi_permutations": 0}, "rpi_permutations must be >= 1 \\(permutations\\), got 0"),
    ({"rpi_null": "maybe"}, "rpi_null must be true or false"),
    ({"ssdc_distance": "chebyshev"}, "ssdc_distance must be one of l1, euclidean, got 'chebyshev'"),
    ({"probe": 8}, "unknown analysis option 'probe'"),
])
def test_bad_analysis_options_are_config_errors(opts, message):
    from pebench.runner.config import ConfigError, RunConfig, resolve

    with pytest.raises(ConfigError, match=message):
        resolve(RunConfig(pe="none", analysis_options=opts))
    ok = resolve(RunConfig(pe="none", analysis_options={"ssdc_tap": "block_out", "rpi_permutations": 16,
                                                        "rpi_null": False}))
    assert ok.analysis_options["ssdc_tap"] == "block_out"

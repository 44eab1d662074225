"""Spiking-patch event tokens (issue #14): hand-built streams with known firing times, a loop
reference of the tokenizer, padding / key-mask invariance and permutation equivariance for every
PE that applies to events, stream perturbations, augmentation label remaps, and end-to-end runs."""
from __future__ import annotations

import json

import fixtures_real as F  # noqa: E402
import numpy as np
import pytest
import torch

from pebench.cli import main
from pebench.datamodules import build_datamodule
from pebench.datamodules.events.event_transforms import (
    STREAM_SHIFTS,
    spiking_analyses,
    stream_dropout,
    stream_noise,
    stream_time_jitter,
)
from pebench.datamodules.events.spiking import EventTokens, age_bucket, pad_collate, spiking_patches
from pebench.datamodules.synthetic.synthetic_events import EVENT_DTYPE, FLIP_LABEL, QUADRANT_ORIGINS, jumps_scene
from pebench.encodings import get_pe_class, list_pes
from pebench.models import ClassificationHead, build_backbone
from pebench.models.spiking import SpikingPatchTokenizer

EVENT_PES = [pe for pe in list_pes() if "events" in get_pe_class(pe).modalities and not get_pe_class(pe).needs_grid]


def stream(rows):
    """``[(x, y, p, t_us), ...]`` -> structured events."""
    ev = np.zeros(len(rows), EVENT_DTYPE)
    for i, (x, y, p, t) in enumerate(rows):
        ev[i] = (x, y, bool(p), t)
    return ev


# ------------------------------------------------------------------------------- tokenizer
def test_cell_with_threshold_events_fires_once_at_last_event():
    # cell (row 1, col 2) of 4x4 cells on a 16x16 sensor, patch 4: 5 events, threshold 5
    ts = [1_000, 3_000, 7_000, 20_000, 45_000]
    ev = stream([(9, 5, i % 2, t) for i, t in enumerate(ts)])
    out = spiking_patches(ev, (16, 16), 4, threshold=5, refractory_us=0, buckets=4, time_scale_us=10_000)
    assert out.coords.shape == (1, 3) and out.fired == 1
    assert np.allclose(out.coords[0], [(45_000 - 1_000) / 10_000, 1, 2])  # t relative to the first event
    assert np.isclose(np.expm1(out.volumes).sum(), 5)
    # one event short: nothing fires
    assert len(spiking_patches(ev[:4], (16, 16), 4, threshold=5).coords) == 0


def test_refractory_suppresses_next_crossing():
    R = 10_000
    first = [(0, 0, 1, t) for t in (0, 100, 200)]                 # fires at t = 200
    inside = [(1, 1, 1, t) for t in (300, 400, 5_000, 10_100)]    # t - 200 < R: ignored, not absorbed
    after = [(2, 3, 0, t) for t in (10_200, 10_300, 10_400)]      # counted again: fires at 10_400
    ev = stream(first + inside + after)
    out = spiking_patches(ev, (4, 4), 4, threshold=3, refractory_us=R, buckets=2, time_scale_us=1_000)
    assert np.allclose(out.coords[:, 0], [0.2, 10.4]) and np.all(out.coords[:, 1:] == 0)
    c = np.expm1(out.volumes)  # (2, 2, K, 4, 4)
    assert np.isclose(c[1].sum(), 3) and np.isclose(c[1][0, :, 3, 2].sum(), 3)  # only the `after` events
    assert np.isclose(c[1][1].sum(), 0)  # the ignored events (polarity 1) were not absorbed
    # without the refractory period, the first `inside` events make a second crossing at t = 400 ms... us
    out0 = spiking_patches(ev, (4, 4), 4, threshold=3, refractory_us=0, buckets=2, time_scale_us=1_000)
    assert np.allclose(out0.coords[:, 0], [0.2, 5.0, 10.3])


def test_age_buckets_counted_as_specified():
    # ages (ms) at the firing time 100 ms: 0, 0.5, 1, 1.999, 2, 3.9, 4, 90; K = 4: edges 1, 2, 4 ms
    ages_us = [0, 500, 1_000, 1_999, 2_000, 3_900, 4_000, 90_000]
    assert age_bucket(np.array(ages_us), 4).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    tf = 100_000
    rows = [(k % 4, k // 4, k % 2, tf - a) for k, a in enumerate(ages_us)]
    ev = stream(sorted(rows, key=lambda r: r[3]))
    out = spiking_patches(ev, (4, 4), 4, threshold=8, refractory_us=0, buckets=4)
    assert len(out.coords) == 1
    want = np.zeros((2, 4, 4, 4))
    for (x, y, p, _), b in zip(rows, [0, 0, 1, 1, 2, 2, 3, 3]):
        want[p, b, y, x] += 1
    assert np.allclose(out.volumes[0], np.log1p(want))


def _reference(ev, H, W, p, thr, R, K, ts, cap=None):
    """Event-by-event loop of the module docstring's rules."""
    gh, gw = H // p, W // p
    buf, until, toks = {}, {}, []
    t0 = int(ev["t"][0])
    for e in ev:
        x, y, t = int(e["x"]), int(e["y"]), int(e["t"]) - t0
        if x >= gw * p or y >= gh * p:
            continue
        c = (y // p) * gw + x // p
        if c in until and t < until[c]:
            continue
        buf.setdefault(c, []).append((int(e["p"]), y % p, x % p, t))
        if len(buf[c]) == thr:
            vol = np.zeros((2, K, p, p))
            for pol, yy, xx, te in buf[c]:
                k = 0
                while k < K - 1 and t - te >= 1000 * 2 ** k:
                    k += 1
                vol[pol, k, yy, xx] += 1
            toks.append((t, c, np.log1p(vol)))
            buf[c], until[c] = [], t + R
    toks.sort(key=lambda z: (z[0], z[1]))
    return toks[-cap:] if cap else toks


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("H, W", [(13, 18), (12, 16)])  # remainder strips (events dropped) / the patch divides
def test_matches_loop_reference(seed, H, W):
    rng = np.random.default_rng(seed)
    n = 2500
    ev = np.zeros(n, EVENT_DTYPE)
    ev["x"], ev["y"], ev["p"] = rng.integers(0, W, n), rng.integers(0, H, n), rng.random(n) < 0.5
    ev["t"] = np.sort(rng.integers(0, 200_000, n)) + 7_000
    thr, R, K = int(rng.integers(4, 40)), int(rng.integers(0, 30_000)), int(rng.integers(1, 7))
    cap = [None, 10][seed % 2]
    out = spiking_patches(ev, (H, W), 4, thr, R, K, 10_000.0, max_tokens=cap)
    ref = _reference(ev, H, W, 4, thr, R, K, 10_000.0, cap)
    assert len(ref) == len(out.coords) > 0
    for i, (t, c, vol) in enumerate(ref):
        gw = W // 4
        assert np.isclose(out.coords[i, 0], t / 10_000) and out.coords[i, 1] == c // gw and out.coords[i, 2] == c % gw
        assert np.allclose(out.volumes[i], vol)
        counts = np.rint(np.expm1(vol)).astype(np.float32)  # the reference's counts (it returns their log1p)
        assert np.array_equal(out.volumes[i], np.log1p(counts))  # float32 log1p of the counts, bit for bit
    if cap:
        assert out.fired > cap  # the cap applied and was recorded
    # unsorted input gives the same tokens
    perm = rng.permutation(n)
    out2 = spiking_patches(ev[np.argsort(ev["t"][perm], kind="stable")], (H, W), 4, thr, R, K, 10_000.0,
                           max_tokens=cap)
    assert np.array_equal(out.coords, out2.coords)


def test_pad_collate_and_tokenizer():
    a = spiking_patches(stream([(0, 0, 1, t) for t in range(0, 500, 100)]), (8, 8), 4, threshold=1, refractory_us=0,
                        buckets=2)
    b = spiking_patches(stream([]), (8, 8), 4, threshold=1, buckets=2)
    assert len(a.coords) == 5 and len(b.coords) == 0
    tokens, labels, info = pad_collate([(a, 3), None, (b, 1)])
    assert tokens.volumes.shape == (2, 5, 2, 2, 4, 4) and labels.tolist() == [3, 1]
    assert info == {"skipped": 1, "capped": 0, "tokens_fired": 5, "tokens_kept": 5}
    assert tokens.mask.tolist() == [[True] * 5, [True] + [False] * 4]  # an empty stream: one empty token
    assert torch.all(tokens.volumes[1] == 0) and torch.all(tokens.coords[1] == 0)
    tok = SpikingPatchTokenizer(16, 4, buckets=2)
    tb = tok(tokens)
    assert tb.x.shape == (2, 5, 16) and tb.grid is None and tb.mask is tokens.mask
    assert torch.allclose(tb.x[0], tok.proj(tokens.volumes[0].flatten(1).float()))
    assert len(tokens[1:]) == 1 and tokens.to("cpu").shape == (2, 5)


def test_cap_hits_counted():
    ev = stream([(0, 0, 1, t) for t in range(0, 500, 100)])
    capped = spiking_patches(ev, (8, 8), 4, threshold=1, refractory_us=0, buckets=2, max_tokens=3)
    assert capped.fired == 5 and np.allclose(capped.coords[:, 0] * 50_000, [200, 300, 400])  # the 3 most recent
    full = spiking_patches(ev, (8, 8), 4, threshold=1, refractory_us=0, buckets=2, max_tokens=5)
    _, _, info = pad_collate([(capped, 0), (full, 1), (capped, 2)])
    assert info == {"skipped": 0, "capped": 2, "tokens_fired": 15, "tokens_kept": 11}
    from pebench.datamodules.events.spiking import cap_report
    rep = cap_report(3, {"train": (4, 1, 20, 10), "val": (0, 0, 0, 0)})
    assert rep == {"max_tokens": 3, "train": {"samples": 4, "capped": 1, "capped_fraction": 0.25,
                                              "tokens_per_sample": 2.5, "fired_per_sample": 5.0},
                   "val": {"samples": 0, "capped": 0, "capped_fraction": None, "tokens_per_sample": None,
                           "fired_per_sample": None}}
    assert cap_report(0, {})["max_tokens"] is None  # 0 = no cap


# ------------------------------------------------------------------------------- PEs and masks
def _tokens(B=2, N=11, D=128, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, N, D, generator=g)
    coords = torch.cat([torch.rand(B, N, 1, generator=g) * 20, torch.randint(0, 8, (B, N, 2), generator=g).float()], -1)
    return x, coords


@pytest.mark.parametrize("pe", EVENT_PES)
def test_padding_invariance_every_pe(pe):
    """Real tokens' outputs do not change when padding tokens (any content, any coords) are added."""
    torch.manual_seed(0)
    vit = build_backbone("vit-nano", pe=pe, spatial_dims=3, grid=None).eval()
    if pe == "ape":
        assert vit.pe.table is None and vit.pe.coord_mlp is not None  # non-grid tokens: the coords MLP
    x, coords = _tokens()
    lengths = [11, 6]
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        ref = [vit(x[b:b + 1, :n], coords[b:b + 1, :n]) for b, n in enumerate(lengths)]  # unpadded, one by one
        P = 5
        xp = torch.cat([x, 3 * torch.randn(2, P, 128, generator=g)], 1)
        cp = torch.cat([coords, torch.randn(2, P, 3, generator=g) * 50], 1)
        mask = torch.zeros(2, 11 + P, dtype=torch.bool)
        for b, n in enumerate(lengths):
            mask[b, :n] = True
            xp[b, n:11] = torch.randn(11 - n, 128, generator=g)  # sample 1's slots 6..10 are padding too
        out = vit(xp, cp, None, mask)
        head = ClassificationHead(128, 8)
        pooled = head(out, mask)
        for b, n in enumerate(lengths):
            assert torch.allclose(out[b, :n], ref[b][0], atol=2e-5), (pe, b, (out[b, :n] - ref[b][0]).abs().max())
            assert torch.allclose(pooled[b], head(ref[b])[0], atol=2e-5)  # mean pooling ignores padding
        assert torch.isfinite(out).all()


@pytest.mark.parametrize("pe", EVENT_PES)
def test_permutation_equivariance_with_mask(pe):
    torch.manual_seed(0)
    vit = build_backbone("vit-nano", pe=pe, spatial_dims=3, grid=None).eval()
    x, coords = _tokens(seed=2)
    mask = torch.ones(2, 11, dtype=torch.bool)
    mask[1, 7:] = False
    perm = torch.randperm(11, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        out = vit(x, coords, None, mask)
        outp = vit(x[:, perm], coords[:, perm], None, mask[:, perm])
    real = mask[:, perm]
    assert torch.allclose(outp[real], out[:, perm][real], atol=2e-5)


def test_grid_pes_refuse_spiking_tokens_with_one_line(tmp_path, capsys):
    """A PE that needs the training grid (rpb) does not apply to spiking tokens: one line, exit 2, nothing written."""
    for pe in [p for p in list_pes() if "events" in get_pe_class(p).modalities and get_pe_class(p).needs_grid]:
        rc = main(["run", "--dataset", "synthetic-events", "--data-option", "tokens=spiking", "--pe", pe,
                   "--fast-dev-run", "--out", str(tmp_path / "runs")])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and "training grid" in err[0], (pe, err)
        assert not (tmp_path / "runs").exists()


def test_geometry_refuses_spiking_tokens(tmp_path, capsys):
    with pytest.raises(ValueError, match="tokens=spiking"):
        spiking_analyses(["geometry", "robustness"], explicit=True)
    assert spiking_analyses(["geometry", "robustness", "alpha", "extrapolation"], explicit=False) == ["robustness"]
    rc = main(["run", "--dataset", "synthetic-events", "--data-option", "tokens=spiking", "--analyses", "geometry",
               "--fast-dev-run", "--out", str(tmp_path / "runs")])
    assert rc == 2 and not (tmp_path / "runs").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench: error: analysis 'geometry' does not apply to tokens=spiking")


# ------------------------------------------------------------------------------- data
def test_jumps_scene_labels_and_flip_remap():
    rng = np.random.default_rng(0)
    for _ in range(50):
        sc = jumps_scene(rng)
        q, d = divmod(sc["label"], 2)
        quad = [int(2 * (c[0] >= 0.5) + ((c[1] >= 0.5) if c[0] < 0.5 else (c[1] < 0.5))) for c in sc["centres"]]
        assert quad[0] == q and quad[1] == (q + (1 if d == 0 else -1)) % 4
        for c, qq in zip(sc["centres"], quad):  # the object stays inside its quadrant
            assert np.all(c - sc["r"] > QUADRANT_ORIGINS[qq]) and np.all(c + sc["r"] < QUADRANT_ORIGINS[qq] + 0.5)
        # a left-right flip mirrors x: the remapped label is the label of the mirrored scene
        m = [int(2 * (c[0] >= 0.5) + (((1 - c[1]) >= 0.5) if c[0] < 0.5 else ((1 - c[1]) < 0.5)))
             for c in sc["centres"]]
        d2 = 0 if m[1] == (m[0] + 1) % 4 else 1
        assert FLIP_LABEL["jumps"][sc["label"]] == 2 * m[0] + d2
    assert sorted(FLIP_LABEL["jumps"]) == list(range(8))


def test_hops_scene_jumps_whole_patches_in_its_direction():
    from pebench.datamodules.synthetic.synthetic_events import HOP_DIRECTIONS, hops_scene, scene_alpha

    rng = np.random.default_rng(0)
    side, patch = 32, 4  # 8 blocks = 8 patches
    labels = []
    for _ in range(40):
        sc = hops_scene(rng)
        labels.append(sc["label"])
        a, b = sc["centres"] * 8  # in blocks
        assert np.allclose(b - a, 3 * HOP_DIRECTIONS[sc["label"]]) and np.all((a >= 1) & (a < 7) & (b >= 1) & (b < 7))
        t1, t2, t3 = sc["times"]
        first, second = scene_alpha(sc, np.array([(t1 + t2) / 2, (t2 + t3) / 2]), side)
        shift = (3 * patch * HOP_DIRECTIONS[sc["label"]]).tolist()
        # the second place is the first moved by whole patches: same coverage pixel for pixel
        assert np.allclose(np.roll(first, shift, axis=(0, 1)), second, atol=1e-5)
        assert first[0].max() == first[-1].max() == first[:, 0].max() == first[:, -1].max() == 0  # inside
        # a left-right flip mirrors dx: the remapped label is the mirrored direction
        dy, dx = HOP_DIRECTIONS[sc["label"]]
        assert HOP_DIRECTIONS[FLIP_LABEL["hops"][sc["label"]]].tolist() == [dy, -dx]
    assert set(labels) == set(range(8))


def test_rotation_augmentation():
    from pebench.datamodules.events.event_transforms import Augment, rotate_events

    ev = stream([(31, 15, 1, 10), (16, 0, 0, 20), (0, 0, 1, 30)])
    r = rotate_events(ev, (32, 32, 2), 90.0)  # counter-clockwise on screen (y down)
    assert r[["x", "y"]].tolist() == [(15, 0), (0, 15), (0, 31)] and r["t"].tolist() == [10, 20, 30]
    assert r["p"].tolist() == [True, False, True]
    assert np.array_equal(rotate_events(ev, (32, 32, 2), 0.0), ev)
    assert len(rotate_events(ev, (32, 32, 2), 45.0)) == 2  # the corner pixel leaves the sensor
    from pebench.datamodules.events.event_transforms import random_rotate

    np.random.seed(0)
    angle = np.random.uniform(-15, 15)
    np.random.seed(0)
    assert np.array_equal(random_rotate(ev, (32, 32, 2)), rotate_events(ev, (32, 32, 2), angle))
    rng = np.random.default_rng(1)
    big = stream([(x, y, 1, t) for t, (x, y) in enumerate(rng.integers(8, 24, (200, 2)))])
    events = {(int(a), int(b), int(t)) for a, b, t in big[["x", "y", "t"]].tolist()}
    for deg, moved in ((0.0, False), (15.0, True)):  # Augment rotates (no flip here: label kept)
        np.random.seed(4)  # first draw: an angle of 14.0° (of ±15°)
        out, lbl = Augment((32, 32, 2), None, rotate_degrees=deg)(big, 3)
        kept = {(int(a), int(b), int(t)) for a, b, t in out[["x", "y", "t"]].tolist()}
        assert lbl == 3 and len(out) and np.all(np.diff(out["t"]) >= 0) and (not kept <= events) == moved
    # drop-by-time <= 20 %, drop-by-area a box of <= 20 % of the side (4 % of the area), drop-event
    # <= 10 %: never most of a uniform stream (tonic 1.7 drew the area ratio of a tuple from [hi, 1))
    xy = rng.integers(0, 32, (2000, 2))
    uniform = stream([(x, y, 1, 500 * t) for t, (x, y) in enumerate(xy)])
    kept = []
    for seed in range(40):
        np.random.seed(seed)
        kept.append(len(Augment((32, 32, 2), None, rotate_degrees=0)(uniform, 0)[0]) / len(uniform))
    assert min(kept) > 0.65, min(kept)


def test_stream_perturbations():
    rng = np.random.default_rng(0)
    ev = np.zeros(1000, EVENT_DTYPE)
    ev["x"], ev["y"], ev["t"] = rng.integers(0, 32, 1000), rng.integers(0, 32, 1000), np.sort(rng.integers(0, 10**6, 1000))
    d = stream_dropout(ev, np.random.default_rng(1), p=0.5)
    assert 400 < len(d) < 600 and np.isin(d["t"], ev["t"]).all()
    n = stream_noise(ev, np.random.default_rng(1), (32, 32), rate=0.5)
    assert len(n) == 1500 and np.all(np.diff(n["t"]) >= 0) and n["x"].max() < 32
    j = stream_time_jitter(ev, np.random.default_rng(1), std_ms=10.0)
    assert len(j) == 1000 and np.all(np.diff(j["t"]) >= 0) and not np.array_equal(j["t"], ev["t"])
    assert j["t"].min() >= ev["t"].min() and j["t"].max() <= ev["t"].max()
    assert set(STREAM_SHIFTS) == {"dropout", "noise", "time_jitter"}


def test_synthetic_events_spiking_loader():
    dm = build_datamodule("synthetic-events", tokens="spiking", train_size=16, val_size=8, batch_size=8)
    tokens, labels, info = next(iter(dm.val_dataloader()))
    assert isinstance(tokens, EventTokens) and labels.shape == (8,) and info["skipped"] == 0
    assert tokens.volumes.shape[2:] == (2, 8, 4, 4) and tokens.mask[:, 0].all()
    n = tokens.mask.sum(1)
    assert (n >= 1).all() and n.max() == tokens.shape[1]
    real = tokens.coords[tokens.mask]
    assert real[:, 0].max() <= 20.0 and real[:, 1:].max() <= 7  # t in 50 ms units over 1 s, 8 x 8 cells
    with pytest.raises(ValueError, match="tokens must be one of"):
        build_datamodule("synthetic-events", tokens="voxels")


# ------------------------------------------------------------------------------- end to end
@pytest.mark.slow
@pytest.mark.parametrize("pe", EVENT_PES)
def test_fast_dev_run_synthetic_events_spiking(pe, tmp_path):
    out = tmp_path / "runs"
    rc = main(["run", "--dataset", "synthetic-events", "--pe", pe, "--fast-dev-run", "--batch-size", "4",
               "--data-option", "tokens=spiking", "--no-progress-bar", "--out", str(out)])
    assert rc == 0
    res = json.loads((out / "synthetic-events" / f"{pe}+spiking" / "vit-nano" / "seed0" / "results.json").read_text())
    assert res["status"] == "complete" and 0.0 <= res["metrics"]["val/acc1"] <= 1.0


@pytest.mark.slow
@pytest.mark.parametrize("pe", ["pape", "ape"])
def test_fast_dev_run_dvsgesture_fixture_spiking(pe, tmp_path):
    root = F.dvsgesture(tmp_path / "dvs")
    out = tmp_path / "runs"
    rc = main(["run", "--dataset", "dvsgesture", "--data-root", str(root), "--pe", pe, "--fast-dev-run",
               "--batch-size", "4", "--resolution", "32",  # no tokens option: spiking is dvsgesture's default
               "--data-option", "spike_threshold=3", "--data-option", "augment=true", "--data-option", "max_tokens=2",
               "--no-progress-bar",
               "--out", str(out)])
    assert rc == 0
    res = json.loads((out / "dvsgesture" / pe / "vit-nano" / "seed0" / "results.json").read_text())
    assert res["status"] == "complete" and res["variant"] == pe
    cap = res["token_cap"]  # 400 events on 2 x 2 cells fire dozens of tokens: every recording is capped
    assert cap["max_tokens"] == 2 and cap["val"]["samples"] == res["val_samples"] == 3
    assert cap["val"]["capped"] == 3 and cap["val"]["tokens_per_sample"] == 2.0 < cap["val"]["fired_per_sample"]
    assert cap["train"]["capped"] == cap["train"]["samples"] == 3  # fast-dev-run: one epoch


def test_robustness_perturbs_streams_before_tokenization():
    from pebench.analysis.robustness import robustness
    from pebench.datamodules.events.event_transforms import stream_shift_loaders
    from pebench.tasks.classification import ClassificationTask

    dm = build_datamodule("synthetic-events", tokens="spiking", train_size=8, val_size=8, batch_size=8)
    clean = next(iter(dm.val_dataloader()))[0]
    shifted = {k: next(iter(v))[0] for k, v in stream_shift_loaders(dm, {"dropout": {"p": 0.5},
                                                                        "noise": {"rate": 3.0}}, 0).items()}
    assert shifted["dropout"].mask.sum() < clean.mask.sum() < shifted["noise"].mask.sum()
    again = next(iter(stream_shift_loaders(dm, {"dropout": {"p": 0.5}}, 0)["dropout"]))[0]
    assert torch.equal(again.coords, shifted["dropout"].coords)  # reproducible
    task = ClassificationTask("events", 8, 2, pe="pape", patch_size=4, tokens="spiking",
                              tokenizer_options={"buckets": 8})
    res = robustness(task, dm, seed=0)
    assert res["n_samples"] == 8 and set(res) >= {"dropout", "noise", "time_jitter"}
    assert res["time_jitter"]["params"] == {"std_ms": 10.0}


def test_dvsgesture_flip_remap_swaps_left_and_right():
    from pebench.datamodules.events.dvsgesture import FLIP_LABEL as DVS_FLIP
    from pebench.datamodules.events.dvsgesture import DVSGestureDataModule

    names = DVSGestureDataModule.classes
    for i, j in enumerate(DVS_FLIP):
        assert DVS_FLIP[j] == i  # an involution
        mirrored = names[i].replace("Right", "@").replace("Left", "Right").replace("@", "Left")
        if "cw" in names[i]:  # a mirror image turns the other way
            mirrored = mirrored.replace("ccw", "@").replace("cw", "ccw").replace("@", "cw")
        assert names[j] == mirrored, (names[i], names[j])
    for scene in ("jumps", "gestures"):
        flip = FLIP_LABEL[scene]
        assert all(flip[flip[i]] == i for i in range(8))


# ------------------------------------------------------------------------------- run directories
def test_spiking_and_frames_runs_get_their_own_run_dirs_and_rows(tmp_path, monkeypatch):
    from pebench.leaderboard.collect import _label
    from pebench.runner.config import RunConfig, run_dir_for, variant_name
    from pebench.runner.integrity import fingerprint
    from pebench.sweep import local as sweep

    def cfg(**data):
        return RunConfig(dataset="synthetic-events", pe="pape", out=str(tmp_path), data=data)
    def dvs(**data):
        return RunConfig(dataset="dvsgesture", pe="ape", rpt=True, data=data)
    names = [variant_name(cfg()), variant_name(cfg(tokens="frames")), variant_name(cfg(tokens="Spiking")),
             variant_name(dvs()), variant_name(dvs(tokens="spiking")), variant_name(dvs(tokens="Frames"))]
    # synthetic-events defaults to frames; dvsgesture to spiking, as in the PaPE paper
    assert names == ["pape", "pape", "pape+spiking", "ape+rpt", "ape+rpt", "ape+rpt+frames"]
    from pebench.runner.config import dataset_default_tokens
    assert dataset_default_tokens("dvsgesture") == "spiking" and dataset_default_tokens("synthetic-events") == "frames"
    assert run_dir_for(cfg(tokens="spiking")) == tmp_path / "synthetic-events" / "pape+spiking" / "vit-nano" / "seed0"
    from pebench.runner.config import config_to_dict
    assert fingerprint(config_to_dict(cfg(tokens="spiking"))) != fingerprint(config_to_dict(cfg()))
    # leaderboard rows: the token kind is part of the label, next to +rpt
    assert _label({"pe": "pape", "variant": "pape+spiking", "config": {}}) == "pape+spiking"
    assert _label({"pe": "ape", "variant": "ape+rpt+spiking", "config": {}}) == "ape+rpt+spiking"
    assert _label({"pe": "ape", "variant": "ape+rpt", "config": {}}) == "ape+rpt"
    # bench sweep watches the directory bench run writes
    seen = []
    monkeypatch.setattr(sweep, "run_sweep", lambda specs, **kw: seen.extend(specs) or [])
    assert main(["sweep", "--datasets", "synthetic-events", "--pes", "pape,ape+rpt", "--seeds", "0",
                 "--data-option", "tokens=spiking", "--out", str(tmp_path)]) == 0
    assert [s.key for s in seen] == ["synthetic-events/pape+spiking/vit-nano/seed0",
                                     "synthetic-events/ape+rpt+spiking/vit-nano/seed0"]
    assert seen[1].run_dir == tmp_path / "synthetic-events" / "ape+rpt+spiking" / "vit-nano" / "seed0"


@pytest.mark.slow
def test_bench_perf_data_spiking_row():
    from pebench.perf.data import bench_spiking, spiking_stream

    ev = spiking_stream(20_000, duration_us=1_000_000)
    assert len(ev) == 20_000 and np.all(np.diff(ev["t"]) >= 0) and ev["x"].max() < 128
    (row,) = bench_spiking(quick=True)
    assert row["name"].startswith("data events: spiking-patch tokenizer") and row["unit"] == "samples/s"
    assert row["a_value"] > 0 and row["b_value"] > 0 and row["ratio"] == pytest.approx(row["a_value"] / row["b_value"])
    assert row["target"] == 1.0 and "tokens/s" in row["note"] and "cap 512" in row["note"]


def test_leaderboard_compares_spiking_rows_with_none_spiking(tmp_path):
    from pebench.leaderboard.collect import collect_results
    from pebench.leaderboard.render import render_leaderboard

    acc = {"none": 0.125, "pape": 0.5, "none+spiking": 0.13, "pape+spiking": 0.95}
    for variant, a in acc.items():
        pe = variant.split("+")[0]
        data = {"tokens": "spiking"} if "spiking" in variant else {}
        for seed in range(3):
            p = tmp_path / "synthetic-events" / variant / "vit-nano" / f"seed{seed}" / "results.json"
            p.parent.mkdir(parents=True)
            p.write_text(json.dumps({
                "dataset": "synthetic-events", "pe": pe, "variant": variant, "model": "vit-nano", "seed": seed,
                "task": "classification", "status": "complete", "primary_metric": "val/acc1",
                "metrics": {"val/acc1": a + 0.01 * seed}, "config": {"data": data}, "git_sha": "abc"}))
    runs, problems = collect_results(tmp_path)
    assert not problems and sorted({r.label for r in runs}) == sorted(acc)
    table = [[c.strip() for c in line.strip("|").split(" | ")]
             for line in render_leaderboard(runs, problems).splitlines() if line.startswith(("| vit", "| Model"))]
    delta = table[0].index("Δval/acc1 vs none")
    rows = {r[1]: r for r in table[1:]}
    assert rows["none"][delta] == rows["none+spiking"][delta] == "(reference)"
    assert rows["pape+spiking"][delta].startswith("+82.0 ")  # paired with none+spiking, not with none
    assert rows["pape"][delta].startswith("+37.5 ")

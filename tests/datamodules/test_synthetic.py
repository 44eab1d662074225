"""Embedded synthetic datasets: determinism, resolution consistency, shapes, labels, events."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pebench.datamodules import build_datamodule, list_datamodules
from pebench.datamodules.synthetic.moving_shapes import positions_at
from pebench.datamodules.synthetic.synthetic_events import EVENT_DTYPE

NAMES = ["shapes", "moving-shapes", "synthetic-events", "primitives"]
SMALL = {"train_size": 64, "val_size": 32, "batch_size": 8}
# (default input shape, another resolution, its input shape)
SHAPES = {
    "shapes": ((3, 32, 32), 48, (3, 48, 48)),
    "moving-shapes": ((3, 8, 32, 32), "16x64", (3, 16, 64, 64)),
    "synthetic-events": ((2, 8, 32, 32), "4x48", (2, 4, 48, 48)),
    "primitives": ((1024, 3), "512x32", (512, 3)),
}


def dm(name, **kw):
    return build_datamodule(name, **{**SMALL, **kw})


def test_registered():
    assert set(NAMES) <= set(list_datamodules())


@pytest.mark.parametrize("name", NAMES)
def test_deterministic_and_seeded(name):
    a, b, c = dm(name, seed=3), dm(name, seed=3), dm(name, seed=4)
    for i in (0, 5):
        xa, ya = a.train_dataset()[i]
        xb, yb = b.train_dataset()[i]
        assert torch.equal(xa, xb) and ya == yb
    assert not torch.equal(a.train_dataset()[0][0], c.train_dataset()[0][0])
    assert not torch.equal(a.train_dataset()[0][0], a.val_dataset()[0][0])  # splits differ


@pytest.mark.parametrize("name", NAMES)
def test_shapes_dtypes_labels(name):
    m = dm(name)
    default, other, other_shape = SHAPES[name]
    assert m.input_shape() == default and m.input_shape(other) == other_shape
    assert not m.needs_data_root and m.num_classes == 8
    x, y = m.train_dataset()[0]
    assert tuple(x.shape) == default and x.dtype == torch.float32 and isinstance(y, int)
    x2, _ = m.val_dataset(other)[0]
    assert tuple(x2.shape) == other_shape and torch.isfinite(x2).all()
    big = dm(name, train_size=300).train_dataset()
    labels = [big.scene(i)["label"] for i in range(300)]
    assert sorted(set(labels)) == list(range(8))  # all classes present, all in range


@pytest.mark.parametrize("name", NAMES)
def test_loaders(name):
    m = dm(name)
    x, y = next(iter(m.train_dataloader()))
    assert tuple(x.shape) == (8, *m.input_shape()) and y.dtype == torch.long and y.shape == (8,)
    x, y = next(iter(m.eval_dataloader(SHAPES[name][1])))
    assert tuple(x.shape) == (8, *SHAPES[name][2])
    assert len(m.val_dataset()) == 32 and len(m.train_dataset()) == 64


@pytest.mark.parametrize("name", NAMES)
def test_unknown_kwarg(name):
    with pytest.raises(TypeError):
        build_datamodule(name, not_an_option=1)


@pytest.mark.parametrize("name", NAMES)
def test_same_scene_at_any_resolution(name):
    m = dm(name)
    lo, hi = m.val_dataset(), m.val_dataset(SHAPES[name][1])
    for i in range(4):
        s_lo, s_hi = lo.scene(i), hi.scene(i)
        assert s_lo.keys() == s_hi.keys() and s_lo["label"] == s_hi["label"]
        for k in s_lo:
            assert np.array_equal(np.asarray(s_lo[k]), np.asarray(s_hi[k])), k


def test_shapes_rerender_matches_downsampled():
    m = dm("shapes", noise=0.0)
    for i in range(3):
        big = m.val_dataset(64)[i][0].reshape(3, 32, 2, 32, 2).mean((2, 4))
        small = m.val_dataset(32)[i][0]
        assert np.corrcoef(big.flatten(), small.flatten())[0, 1] > 0.95


def test_moving_shapes_needs_time():
    m = dm("moving-shapes", noise=0.0)
    ds = m.val_dataset()
    for i in range(8):
        sc = ds.scene(i)
        disc_dir, disc_first = divmod(sc["label"], 2)
        pos = positions_at(sc, np.linspace(0, 1, 9))  # (2, 9, 2)
        moved = np.linalg.norm(pos[0, 4] - pos[0, 0]) > 0.2  # the disc moved in the first half
        assert moved == bool(disc_first)
        # time reversal: disc direction flips and the order swaps -> another class
        assert (2 * ((disc_dir + 2) % 4) + (1 - disc_first)) != sc["label"]
    # finer time sampling keeps the same trajectory: frame f of 8 ~ frames 2f, 2f+1 of 16
    x8, x16 = ds[0][0], m.val_dataset("16x32")[0][0]
    assert np.corrcoef(x16.reshape(3, 8, 2, 32, 32).mean(2).flatten(), x8.flatten())[0, 1] > 0.9


def test_events_stream_and_binning():
    tonic = pytest.importorskip("tonic")
    m = dm("synthetic-events")
    ds = m.val_dataset()
    assert EVENT_DTYPE == tonic.datasets.DVSGesture.dtype
    ev = ds.events(0)
    assert ev.dtype == tonic.datasets.DVSGesture.dtype and len(ev) > 100
    assert np.all(np.diff(ev["t"]) >= 0) and ev["x"].max() < 32 and ev["y"].max() < 32
    assert ev["p"].any() and (~ev["p"]).any()
    assert np.array_equal(ev, ds.events(0))  # deterministic stream
    assert np.array_equal(ev, m.val_dataset("4x32").events(0))  # same stream for another bin count
    vox = ds[0][0]
    # direct histogram with tonic's n_time_bins rule: bins of width (t_last - t_first) // T from t_first
    T = 8
    w = (ev["t"][-1] - ev["t"][0]) // T
    b = (ev["t"] - ev["t"][0]) // w
    keep = b < T
    hist = np.zeros((2, T, 32, 32), np.float32)
    np.add.at(hist, (ev["p"][keep].astype(int), b[keep], ev["y"][keep], ev["x"][keep]), 1)
    assert np.array_equal(vox.numpy(), hist)
    assert torch.equal(ds.to_voxels(ev), vox)
    # a perturbed stream can be re-binned
    assert ds.to_voxels(ev[::2]).sum() < vox.sum()


def test_primitives_unit_sphere_and_groups():
    m = dm("primitives")
    x = m.train_dataset()[1][0]
    norms = x.norm(dim=-1)
    assert norms.max() <= 1.0 + 1e-5 and norms.max() > 0.99 and x.mean(0).abs().max() < 1e-4
    assert m.num_groups_for() == 64 and m.num_groups_for("512x32") == 32
    assert m.val_dataset("512x32").num_groups == 32
    # the same cloud whatever the group count
    assert torch.equal(m.val_dataset("512x32")[0][0], m.val_dataset(512)[0][0])


@pytest.mark.parametrize("task", ["mixed", "octant"])
def test_shapes_label_is_layout(task):
    ds = dm("shapes", task=task, train_size=200).train_dataset()
    for i in range(200):
        sc = ds.scene(i)
        (ay, ax), (by, bx) = sc["centres"][:2]
        if task == "mixed":
            assert sc["label"] == 2 * (2 * (ay > 0.5) + (ax > 0.5)) + (ax < bx)
        else:
            angle = np.degrees(np.arctan2(-(ay - by), ax - bx)) % 360
            assert int(((angle + 22.5) % 360) // 45) == sc["label"]
    with pytest.raises(ValueError):
        build_datamodule("shapes", task="nope")

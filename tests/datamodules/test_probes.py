"""Probe suite: labels recomputed independently, out-of-distribution splits, orbits and the no-PE ceiling."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pebench.datamodules import build_datamodule, get_datamodule_class, list_datamodules
from pebench.datamodules.probes.probes import GLYPH_KINDS, PATCH, PROBES, glyph_mask, multiset_ceiling, render_probe
from pebench.tasks.classification import ClassificationTask

NAMES = list(PROBES)
SMALL = {"train_size": 48, "val_size": 24, "test_size": 48, "batch_size": 8}


def dm(name, **kw):
    return build_datamodule(name, **{**SMALL, **kw})


def _cells(scene):
    return [o["cell"] for o in scene["objects"]], [o["kind"] for o in scene["objects"]]


def _ref_label(name, scene):
    """Each probe's label from the glyph positions, written independently of the generator."""
    cells, kinds = _cells(scene)
    if name in ("probe-translation", "probe-extrapolation"):
        (ay, ax), (by, bx) = cells[0], cells[1]
        dy, dx = by - ay, bx - ax
        assert abs(dx) != abs(dy)
        if abs(dx) > abs(dy):
            return 0 if dx > 0 else 2  # east / west
        return 1 if dy < 0 else 3      # north (up) / south
    if name == "probe-rotation":
        (ay, ax), (by, bx) = cells[0], cells[1]
        d = math.hypot(by - ay, bx - ax)
        assert d <= 3.2 or d >= 4.4
        return 2 * (d >= 4.4) + (bx > ax)
    if name == "probe-decay":
        m = cells[0]
        ds = sorted((math.dist(c, m), k) for c, k in zip(cells[1:], kinds[1:]))
        assert ds[1][0] - ds[0][0] >= 1.0 - 1e-9
        return ["disc", "x"].index(ds[0][1])
    if name == "probe-context":
        r = {"disc": 1.5, "ring": 3.2}[kinds[0]]
        return sum(math.dist(c, cells[0]) <= r for c in cells[1:])
    if name == "probe-anchoring":
        return 2 * (kinds[0] == "x") + (cells[0][0] >= scene["canvas"] // 2)
    raise AssertionError(name)


def test_registered_with_ceilings():
    assert set(NAMES) <= set(list_datamodules())
    bounds = {n: get_datamodule_class(n).no_pe_bound() for n in NAMES}
    assert bounds == {"probe-translation": 0.25, "probe-rotation": 0.25, "probe-decay": 0.5,
                      "probe-context": pytest.approx(1 / 3), "probe-extrapolation": 0.25, "probe-anchoring": 0.5}


@pytest.mark.parametrize("name", NAMES)
def test_labels_splits_and_shapes(name):
    m = dm(name)
    g = m.gen.canvas
    assert m.input_shape() == (3, g * PATCH, g * PATCH) and m.has_test_split
    for split, ds in (("train", m.train_dataset()), ("val", m.val_dataset()), ("test", m.test_dataset())):
        labels = []
        for i in range(len(ds)):
            s = ds.scene(i)
            assert s["label"] == _ref_label(name, s), (split, i)
            cells, _ = _cells(s)
            assert len(set(cells)) == len(cells) and all(0 <= c < s["canvas"] for cell in cells for c in cell)
            labels.append(s["label"])
        assert set(labels) == set(range(m.num_classes)), split
        x, y = ds[0]
        side = s["canvas"] * PATCH
        assert tuple(x.shape) == (3, side, side) and x.dtype == torch.float32 and y == ds.scene(0)["label"]


def test_out_of_distribution_test_splits():
    t = dm("probe-translation")
    assert all(x < 4 for i in range(48) for _, x in _cells(t.train_dataset().scene(i))[0])
    assert all(x >= 4 for i in range(48) for _, x in _cells(t.test_dataset().scene(i))[0])
    r = dm("probe-rotation")
    for split, lo, hi in (("train", 0, 26.6), ("test", 26.6, 63.5)):
        ds = getattr(r, f"{split}_dataset")()
        for i in range(48):
            (ay, ax), (by, bx) = _cells(ds.scene(i))[0][:2]
            ang = math.degrees(math.atan2(abs(by - ay), abs(bx - ax)))
            assert (lo <= ang <= hi) if split == "train" else (lo < ang <= hi), (split, ang)
    d = dm("probe-decay")
    for split, lo, hi in (("train", 1.0, 2.3), ("test", 3.0, 4.5)):
        ds = getattr(d, f"{split}_dataset")()
        for i in range(48):
            cells, _ = _cells(ds.scene(i))
            assert lo <= min(math.dist(c, cells[0]) for c in cells[1:]) <= hi
    e = dm("probe-extrapolation")
    assert e.input_shape() == (3, 32, 32) and tuple(e.test_dataset()[0][0].shape) == (3, 48, 48)
    assert max(max(c) for i in range(48) for c in _cells(e.test_dataset().scene(i))[0]) >= 8


def test_deterministic_seeded_and_data_seed():
    a, b, c = dm("probe-context", seed=3), dm("probe-context", seed=3), dm("probe-context", seed=4)
    assert torch.equal(a.train_dataset()[5][0], b.train_dataset()[5][0])
    assert not torch.equal(a.train_dataset()[5][0], c.train_dataset()[5][0])
    assert not torch.equal(a.train_dataset()[5][0], a.val_dataset()[5][0])
    d = dm("probe-context", seed=4, data_seed=3)  # data from seed 3, whatever the run's seed
    assert torch.equal(a.train_dataset()[5][0], d.train_dataset()[5][0])


@pytest.mark.parametrize("nuisance", ["colour", "full"])
def test_nuisance_cues_vary_within_each_label(nuisance):
    ds = dm("probe-translation", train_size=400, nuisance=nuisance).train_dataset()
    by_label = {}
    for i in range(400):
        s = ds.scene(i)
        a = s["objects"][0]
        by_label.setdefault(s["label"], set()).add((a["polarity"], a["size"]))
        by_label.setdefault(("colour", s["label"]), set()).add(a["colour"])
        by_label.setdefault(("bg", s["label"]), set()).add(s["bg"])
    shapes = 4 if nuisance == "full" else 1  # both polarities x both sizes, or ink 4 x 4 glyphs only
    for k, v in by_label.items():
        want = {"colour": 7, "bg": 4}[k[0]] if isinstance(k, tuple) else shapes
        assert len(v) == want, k


def test_unknown_nuisance_is_one_line_error():
    with pytest.raises(ValueError, match="nuisance must be one of colour, full"):
        dm("probe-translation", nuisance="none")


def test_glyph_masks_are_distinct():
    masks = {}
    for kind in GLYPH_KINDS:
        for size, offsets in ((4, [(0, 0)]), (3, [(0, 0), (0, 1), (1, 0), (1, 1)])):
            for off in offsets:
                masks.setdefault(glyph_mask(kind, size, off).tobytes(), set()).add(kind)
    assert all(len(k) == 1 for k in masks.values())
    with pytest.raises(ValueError, match="unknown glyph"):
        glyph_mask("star", 4)


def test_multiset_ceiling_against_brute_force():
    rng = np.random.default_rng(0)
    tiles = rng.normal(size=(3, 1, 2, 2)).astype(np.float32)
    # 4 images of 2 x 2 patches (of 2 x 2 pixels): images 0 and 1 hold the same patches permuted
    def img(order):
        t = [tiles[k] for k in order]
        return np.block([[t[0], t[1]], [t[2], t[3]]])
    images = np.stack([img([0, 1, 2, 2]), img([2, 0, 2, 1]), img([0, 0, 1, 2]), img([1, 1, 1, 1])])
    assert multiset_ceiling(images, [0, 1, 0, 1], patch=2) == 0.75  # {0,1} must share one answer
    assert multiset_ceiling(images, [1, 1, 0, 1], patch=2) == 1.0
    with pytest.raises(ValueError):
        multiset_ceiling(images, [0, 0, 0, 0], patch=3)


@pytest.mark.parametrize("name", NAMES)
def test_computed_ceiling_equals_the_derived_bound(name):
    m = dm(name)
    assert m.no_pe_ceiling("test") == pytest.approx(m.no_pe_bound())
    assert m.no_pe_ceiling("train") == pytest.approx(m.no_pe_bound())


def test_a_no_pe_model_cannot_separate_an_orbit():
    """The premise of the ceiling: with mean pooling and no PE, every sample of an orbit gets the
    same logits (the orbit shares the multiset of patches)."""
    m = dm("probe-translation")
    torch.manual_seed(0)
    task = ClassificationTask(modality="image", num_classes=4, pe="none", patch_size=PATCH,
                              train_grid=(8, 8)).eval()
    ds = m.test_dataset()
    x = torch.stack([ds[i][0] for i in range(8)])  # two orbits of four
    assert sorted(ds[i][1] for i in range(4)) == [0, 1, 2, 3]
    with torch.no_grad():
        logits = task(x)
    torch.testing.assert_close(logits[:4], logits[:1].expand(4, -1), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(logits[0], logits[4], atol=1e-4)
    task_pe = ClassificationTask(modality="image", num_classes=4, pe="rope-axial", patch_size=PATCH,
                                 train_grid=(8, 8)).eval()
    with torch.no_grad():
        assert not torch.allclose(task_pe(x[:4]), task_pe(x[:1]).expand(4, -1), atol=1e-5)


def test_resolutions():
    m = dm("probe-anchoring")
    native = m.val_dataset()[3][0].numpy()
    up = m.val_dataset(64)[3][0].numpy()
    assert np.array_equal(up, native.repeat(2, axis=1).repeat(2, axis=2))  # same scene upsampled
    assert tuple(m.val_dataset("48")[0][0].shape) == (3, 48, 48)
    assert np.array_equal(render_probe(m.val_dataset().scene(3)), native)
    with pytest.raises(ValueError, match="not allowed"):
        dm("probe-anchoring", resolution=48)
    with pytest.raises(ValueError, match="square"):
        m.val_dataset("32x48")
    with pytest.raises(TypeError):
        dm("probe-anchoring", not_an_option=1)
    with pytest.raises(ValueError):
        dm("probe-anchoring", test_size=-1)


def test_motion_probe():
    m = dm("probe-motion")
    assert m.modality == "video" and m.input_shape() == (3, 4, 32, 32) and m.input_shape(64) == (3, 4, 64, 64)
    for split in ("train", "test"):
        ds = getattr(m, f"{split}_dataset")()
        for i in range(len(ds)):
            s = ds.scene(i)
            path = s["objects"][0]["path"]
            dy, dx = path[-1][0] - path[0][0], path[-1][1] - path[0][1]
            assert (abs(dy), abs(dx)) in ((0, 3), (3, 0))  # one cell per frame, straight
            assert s["label"] == {(0, 3): 0, (-3, 0): 1, (0, -3): 2, (3, 0): 3}[(dy, dx)]
            assert all((x >= 4) == (split == "test") for _, x in path)
        x, y = ds[0]
        clip = x.numpy()  # frame f shows the glyph at path[f]: its cell differs from the background
        path = ds.scene(0)["objects"][0]["path"]
        for f, (cy, cx) in enumerate(path):
            cell = clip[:, f, cy * PATCH:(cy + 1) * PATCH, cx * PATCH:(cx + 1) * PATCH]
            assert cell.std() > 0
    assert m.no_pe_ceiling() == pytest.approx(0.25) == m.no_pe_bound()
    torch.manual_seed(0)
    task = ClassificationTask(modality="video", num_classes=4, pe="none", patch_size=PATCH, tubelet=2,
                              train_grid=(2, 8, 8)).eval()
    x = torch.stack([m.test_dataset()[i][0] for i in range(4)])  # one orbit: four directions
    with torch.no_grad():
        logits = task(x)
    torch.testing.assert_close(logits, logits[:1].expand(4, -1), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="frames"):
        m.val_dataset("8x32")
    with pytest.raises(ValueError, match="not allowed"):
        dm("probe-motion", resolution=48)

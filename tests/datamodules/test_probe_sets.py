"""The set probes (pebench.datamodules.probes.probe_sets): scenes as sets of glyph tokens, no canvas.

The point of these probes is that their train -> test shift carries no absolute cue: for every PE that
declares itself relative, a test scene and its training-distribution twin (the same tokens, every
coordinate shifted back) get the same logits, untrained and after training steps (float64, 1e-9); for
the absolute PEs they differ. The canvas probe ``probe-translation`` does not have that property (its
background tokens mark the border), which the last test shows for rope-axial.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from pebench.cli import main
from pebench.datamodules import build_datamodule
from pebench.datamodules.probes.probe_sets import (
    SET_PROBES,
    GlyphTokens,
    SetProbeDataset,
    glyph_collate,
    scene_tokens,
    twin_scene,
)
from pebench.datamodules.probes.probes import render_probe
from pebench.encodings import list_pes
from pebench.encodings.base import PEConfigError
from pebench.encodings.registry import get_pe_class
from pebench.tasks.classification.module import ClassificationTask

SHIFT_PROBES = ("probe-set-translation", "probe-set-extrapolation")
TOL = 1e-9


def dm(name, **kw):
    return build_datamodule(name, **{"train_size": 64, "val_size": 16, "test_size": 48, **kw})


def batch(scenes) -> GlyphTokens:
    return glyph_collate([SetProbeDataset.item(s) for s in scenes])[0].double()


def model(pe: str, num_classes: int = 4, seed: int = 0) -> ClassificationTask:
    torch.manual_seed(seed)
    return ClassificationTask("image", num_classes, model="vit-probe", pe=pe, tokens="occupied").double()


@pytest.mark.parametrize("name", SHIFT_PROBES)
def test_test_scenes_are_shifted_twins(name):
    d = dm(name)
    test, train = d.test_dataset(), d.train_dataset()
    box, big = d.gen.canvas, d.gen.test_canvas
    for i in range(len(test)):
        s, t = test.scene(i), test.twin(i)
        dy, dx = s["shift"]
        assert (dy, dx) != (0, 0) and s["label"] == t["label"] >= 0
        ps, cs = scene_tokens(s)
        pt, ct = scene_tokens(t)
        np.testing.assert_array_equal(ps, pt)  # content identical, token by token
        np.testing.assert_array_equal(cs - ct, np.broadcast_to([dy, dx], cs.shape))
        assert ct.min() >= 0 and ct.max() < box  # the twin lies in the training box
        assert cs.min() >= 0 and cs.max() < big
        if name == "probe-set-translation":
            assert (dy, dx) == (0, box // 2) and ct[:, 1].max() < box // 2 <= cs[:, 1].min()
        else:
            assert (cs >= box).any()  # a coordinate never seen in training
    for i in range(len(train)):
        s = train.scene(i)
        c = scene_tokens(s)[1]
        assert s["shift"] == (0, 0) and twin_scene(s) == s and c.min() >= 0 and c.max() < box
        if name == "probe-set-translation":
            assert c[:, 1].max() < box // 2
    np.testing.assert_array_equal(test[3][0][0], dm(name).test_dataset()[3][0][0])  # deterministic


@pytest.mark.parametrize("name", list(SET_PROBES))
def test_no_pe_ceiling_and_orbits(name):
    d = dm(name, test_size=120)
    assert d.no_pe_ceiling() == pytest.approx(d.no_pe_bound())
    ds = d.test_dataset()
    k = d.gen.orbit
    scenes = [ds.scene(i) for i in range(2 * k)]
    assert len({s["label"] for s in scenes[:k]}) == k
    m = model("none", d.num_classes).eval()
    with torch.no_grad():
        logits = m(batch(scenes))
    for o in range(2):  # no PE: the members of an orbit (same tokens, other places) share their logits
        torch.testing.assert_close(logits[o * k:(o + 1) * k], logits[o * k].expand(k, -1), rtol=0, atol=TOL)


def test_padding_is_masked_out_of_attention_and_pooling():
    ds = dm("probe-set-extrapolation").test_dataset()
    scenes = [ds.scene(i) for i in range(4)]
    tb = batch(scenes)
    n = tb.shape[1]
    g = torch.Generator().manual_seed(0)
    pad = GlyphTokens(torch.cat([tb.patches, torch.randn(4, 5, 3, 4, 4, generator=g, dtype=torch.float64)], 1),
                      torch.cat([tb.coords, torch.randint(-9, 20, (4, 5, 2), generator=g).double()], 1),
                      torch.cat([tb.mask, torch.zeros(4, 5, dtype=torch.bool)], 1))
    for pe in ("rope-axial", "ape", "alibi", "cpe"):
        m = model(pe).eval()
        with torch.no_grad():
            torch.testing.assert_close(m(pad), m(tb), rtol=0, atol=TOL)  # garbage padding changes nothing
    assert tb.mask.sum(1).tolist() == [len(s["objects"]) for s in scenes] and n == max(tb.mask.sum(1))


def _train(m: ClassificationTask, d, steps: int = 3, lr: float = 1e-2) -> None:
    """A few AdamW steps on the probe's training split (float64, cross-entropy)."""
    ds = d.train_dataset()
    opt = torch.optim.AdamW(m.parameters(), lr=lr)
    m.train()
    for step in range(steps):
        tb, y = glyph_collate([ds[i] for i in range(16 * step, 16 * step + 16)])
        loss = torch.nn.functional.cross_entropy(m(tb.double()), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    m.eval()


@pytest.mark.parametrize("name", SHIFT_PROBES)
@pytest.mark.parametrize("pe", list_pes())
def test_relative_pes_see_no_difference_between_a_test_scene_and_its_twin(pe, name):
    """The declaration ``relative`` of every PE against the set probes' twins, untrained and trained."""
    relative = get_pe_class(pe).relative
    assert relative in (True, False), pe
    d = dm(name)
    ds = d.test_dataset()
    test = batch([ds.scene(i) for i in range(12)])
    twin = batch([ds.twin(i) for i in range(12)])
    try:
        m = model(pe).eval()
    except PEConfigError as e:  # a PE that reads a raster (rpb's offset table) does not apply to a set of tokens
        assert "grid" in str(e), (pe, e)
        return
    for state in ("untrained", "trained"):
        if state == "trained":
            before = {k: v.clone() for k, v in m.state_dict().items()}
            _train(m, d)
            assert any((m.state_dict()[k] - v).abs().max() > 0 for k, v in before.items())
        with torch.no_grad():
            a, b = m(test), m(twin)
        diff = float((a - b).abs().max())
        if relative:
            assert diff <= TOL, (pe, state, diff)
        else:
            assert diff > 1e-6, (pe, state, diff)


def test_the_canvas_probe_leaks_the_border_to_a_relative_pe():
    """The reason for the set probes: on the canvas, moving the same glyphs 4 columns right changes an
    exactly relative PE's logits (the background tokens do not move with them)."""
    d = build_datamodule("probe-translation", train_size=8, val_size=8, test_size=8)
    scenes = [d.train_dataset().scene(i) for i in range(8)]
    moved = [{**s, "objects": [{**o, "cell": (o["cell"][0], o["cell"][1] + 4)} for o in s["objects"]]} for s in scenes]
    torch.manual_seed(0)
    m = ClassificationTask("image", 4, model="vit-probe", pe="rope-axial", train_grid=(8, 8)).double().eval()
    imgs = [torch.from_numpy(np.stack([render_probe(s) for s in ss])).double() for ss in (scenes, moved)]
    with torch.no_grad():
        assert float((m(imgs[0]) - m(imgs[1])).abs().max()) > 1e-7  # rounding would be ~1e-16
    # the same scenes as sets: no difference
    sets = [batch(ss) for ss in (scenes, moved)]
    m2 = model("rope-axial").eval()
    with torch.no_grad():
        assert float((m2(sets[0]) - m2(sets[1])).abs().max()) <= TOL


def test_set_probe_options_are_checked():
    with pytest.raises(ValueError):
        dm("probe-set-translation", resolution=48)
    with pytest.raises(ValueError):
        dm("probe-set-translation").test_dataset(resolution=48)
    with pytest.raises(ValueError):
        dm("probe-set-anchoring", test_size=-1)
    with pytest.raises(TypeError):
        model("rope-axial").tokenizer(torch.zeros(1, 3, 32, 32))


def test_bench_run_trains_a_set_probe_and_refuses_image_analyses(tmp_path):
    args = ["run", "--dataset", "probe-set-translation", "--pe", "rope-axial", "--model", "vit-probe",
            "--fast-dev-run", "--batch-size", "8", "--no-progress-bar", "--out", str(tmp_path / "runs")]
    assert main(args) == 0
    res = json.loads(next((tmp_path / "runs").rglob("results.json")).read_text())
    assert res["status"] == "complete" and 0.0 <= res["metrics"][res["primary_metric"]] <= 1.0
    assert main([*args[:-2], "--out", str(tmp_path / "again"), "--analyses", "geometry"]) == 2  # one line, exit 2

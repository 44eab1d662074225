"""Capacity before learning: can a PE represent a probe's label at all? (issue #44 item 2)

A probe cell that a PE "did not learn" says something about the PE only when the label is within its
reach. Some are not, by an exact symmetry: a PE that sees only distances (``rotation_invariant``: alibi,
pape-ri, fire) gives a scene and its mirror image the same logits, and on ``probe-rotation`` those have
different labels; a relative PE gives a scene and its translate the same logits, and on
``probe-set-anchoring`` those have different labels; a model without position (``none``) gives every
member of an orbit the same logits. Such a cell is "cannot represent (<symmetry>)", not "not learned".

:func:`capacity` decides it for one probe and one PE in two steps:

1. **From the declarations.** Each probe lists the symmetries that change its label on its test split
   (:data:`BREAKERS`), each with a transformation of a test scene into another test-distribution scene
   with another label. A symmetry applies to a PE when the PE declares it (``relative``,
   ``rotation_invariant`` in :mod:`pebench.encodings.base`; every PE declares both, tested in
   ``tests/encodings``) and the input keeps it: on a *canvas* probe the background tokens fix the canvas,
   so only the canvas' own mirror images are symmetries (a translation moves the glyphs against the
   border, which a relative PE sees); on a *set* probe (:mod:`pebench.datamodules.probes.probe_sets`)
   every translation and mirror image is. "Position-blind" (the logits ignore coordinates altogether)
   is not declared; it is established by the float64 check below on a PE without learned parameters
   (``learned = False``), whose untrained model is the model.
2. **A float64 check on the untrained model.** ``vit-probe`` with the PE, in float64, on up to
   :data:`CHECK_SCENES` test scenes and their transformed twins: the logits must agree to
   :data:`TOL`. A declared symmetry that the check contradicts raises ``RuntimeError`` (the declaration
   would be wrong), so a "cannot represent" always rests on both.

The check reaches only the label the transformation changes: a canvas ``probe-translation`` scene and its
top-bottom mirror image (labels N and S) are confused by a distance-only PE, while E and W remain
readable from the border, so its ceiling there is 75 % (docs/probes.md); the verdict is still "cannot
represent", since the full label is out of reach.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import numpy as np
import torch

from pebench.datamodules import build_datamodule
from pebench.datamodules.probes.probe_scenes import render_probe
from pebench.datamodules.probes.probe_sets import SET_PROBES, SetProbeDataset, glyph_collate, twin_scene
from pebench.encodings import list_pes
from pebench.encodings.base import PEConfigError
from pebench.encodings.registry import get_pe_class
from pebench.models.heads import ClassificationHead
from pebench.models.set_tokenizer import SetPatchTokenizer
from pebench.models.tokenizers import ImageTokenizer
from pebench.models.vit import build_backbone, model_config

__all__ = ["Capacity", "capacity", "capacity_table", "cannot_represent", "BREAKERS", "TOL", "CHECK_SCENES", "CAPACITY_PROBES"]

#: logits closer than this (float64) count as equal
TOL = 1e-9
#: test scenes (with a valid transformed twin) the check compares
CHECK_SCENES = 8
_MODEL = "vit-probe"


class Capacity(NamedTuple):
    """``(representable, reason)``: ``reason`` starts with ``"representable"``, ``"cannot represent
    (<symmetry>)"`` or ``"does not apply"``, then ``": "`` and the evidence."""

    representable: bool
    reason: str


Scene = dict[str, Any]
Transform = Callable[[Scene, Any], "Scene | None"]


def _move(scene: Scene, f: Callable[[int, int], tuple[int, int]]) -> Scene:
    return {**scene, "objects": [{**o, "cell": f(*o["cell"])} for o in scene["objects"]]}


def _canvas_mirror(axis: int) -> Transform:
    """Mirror image of a canvas scene about the canvas' middle row (axis 0) or column (axis 1)."""
    def t(scene: Scene, gen: Any) -> Scene:
        g = int(scene["canvas"]) - 1
        return _move(scene, (lambda y, x: (g - y, x)) if axis == 0 else (lambda y, x: (y, g - x)))
    return t


def _set_mirror(axis: int) -> Transform:
    """Mirror image of a set scene: its twin mirrored inside the training box, shifted back into the test
    region (the same shift, or the generator's first valid one): an isometry of the scene."""
    def t(scene: Scene, gen: Any) -> Scene | None:
        twin = twin_scene(scene)
        g = int(twin["canvas"]) - 1
        m = _move(twin, (lambda y, x: (g - y, x)) if axis == 0 else (lambda y, x: (y, g - x)))
        if tuple(scene["shift"]) == (0, 0):
            return m
        cells = [o["cell"] for o in m["objects"]]
        dy, dx = gen.shift(cells, _FirstChoice())
        return {**_move(m, lambda y, x: (y + dy, x + dx)), "shift": (dy, dx), "canvas": scene["canvas"],
                "twin_canvas": twin["canvas"]}
    return t


class _FirstChoice:
    """A stand-in generator for :meth:`SetProbe.shift` that always picks the first option."""

    def integers(self, n: int) -> int:
        return 0


def _set_shift_rows(scene: Scene, gen: Any) -> Scene | None:
    """The scene moved by half the box vertically (into the other half), when all its glyphs fit."""
    g = int(scene["canvas"])
    ys = [o["cell"][0] for o in scene["objects"]]
    for dy in (g // 2, -(g // 2)):
        if all(0 <= y + dy < g for y in ys):
            return _move(scene, lambda y, x: (y + dy, x))
    return None


#: per probe: ``(symmetry, transformation, what it swaps)``; symmetry is ``relative`` or
#: ``rotation_invariant`` (a declaration) or ``position_blind`` (checked, see the module docstring)
BREAKERS: dict[str, list[tuple[str, Transform, str]]] = {
    "probe-translation": [("rotation_invariant", _canvas_mirror(0), "N and S (top-bottom mirror image)")],
    "probe-extrapolation": [("rotation_invariant", _canvas_mirror(1), "E and W (left-right mirror image)")],
    "probe-rotation": [("rotation_invariant", _canvas_mirror(1), "B right / left of A (left-right mirror image)")],
    "probe-anchoring": [("rotation_invariant", _canvas_mirror(0), "marker in the top / bottom half "
                                                                  "(top-bottom mirror image)")],
    "probe-decay": [],
    "probe-context": [],
    "probe-set-translation": [("rotation_invariant", _set_mirror(1), "E and W (left-right mirror image)")],
    "probe-set-extrapolation": [("rotation_invariant", _set_mirror(1), "E and W (left-right mirror image)")],
    "probe-set-anchoring": [("relative", _set_shift_rows, "marker in the top / bottom half (shift by 4 rows)"),
                            ("rotation_invariant", _set_shift_rows, "marker in the top / bottom half "
                                                                    "(shift by 4 rows)")],
}
#: the probes :func:`capacity` covers (the image probes, canvas and set)
CAPACITY_PROBES = tuple(BREAKERS)
_SYMMETRY_NAMES = {"relative": "relative", "rotation_invariant": "rotation-invariant",
                   "position_blind": "position-blind"}


def _is_set(probe: str) -> bool:
    return probe in SET_PROBES


def _model(probe: str, pe: str, dm: Any) -> Callable[[list[Scene]], torch.Tensor]:
    """Untrained float64 ``vit-probe`` with ``pe`` (seed 0, global RNG untouched) -> scenes to logits."""
    cfg = model_config(_MODEL)
    grid = None if _is_set(probe) else (dm.gen.canvas, dm.gen.canvas)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        tok = SetPatchTokenizer(cfg.embed_dim) if _is_set(probe) else ImageTokenizer(cfg.embed_dim)
        backbone = build_backbone(_MODEL, pe=pe, spatial_dims=2, grid=grid)
        head = ClassificationHead(cfg.embed_dim, dm.num_classes)
    tok, backbone, head = (m.double().eval() for m in (tok, backbone, head))

    @torch.no_grad()
    def logits(scenes: list[Scene]) -> torch.Tensor:
        if _is_set(probe):
            x = glyph_collate([SetProbeDataset.item(s) for s in scenes])[0].double()
        else:
            x = torch.from_numpy(np.stack([render_probe(s) for s in scenes])).double()
        tb = tok(x)
        return head(backbone(tb.x, tb.coords, tb.grid, tb.mask), tb.mask)  # (B, C)
    return logits


def _label(gen: Any, scene: Scene) -> int:
    """The label of a (transformed) scene by the probe's own rule; a set scene's on its twin, in its box."""
    if "shift" in scene:
        scene = twin_scene(scene)
    cells = [tuple(o["cell"]) for o in scene["objects"]]
    canvas = int(scene["canvas"])
    return int(gen.label_of([o["kind"] for o in scene["objects"]], cells, canvas))


def _pairs(dm: Any, symmetry: str, transform: Transform | None) -> list[tuple[Scene, Scene]]:
    """Up to :data:`CHECK_SCENES` pairs (test scene, transformed scene) with different valid labels."""
    ds = dm.test_dataset()
    k = dm.gen.orbit
    out = []
    for i in range(len(ds)):
        s = ds.scene(i)
        if symmetry == "position_blind":
            base, pos = divmod(i, k)
            j = base * k + (pos + 1) % k
            if j >= len(ds):
                continue
            t = ds.scene(j)
        else:
            t = transform(s, dm.gen)
            if t is None:
                continue
            lab = _label(dm.gen, t)
            if lab < 0 or lab == s["label"]:
                continue
            t = {**t, "label": lab}
        if t["label"] != s["label"]:
            out.append((s, t))
        if len(out) == CHECK_SCENES:
            break
    return out


def _max_diff(logits: Callable[[list[Scene]], torch.Tensor], pairs: list[tuple[Scene, Scene]]) -> float:
    a = logits([p[0] for p in pairs])
    b = logits([p[1] for p in pairs])
    return float((a - b).abs().max())


@functools.lru_cache(maxsize=None)
def _position_blind(pe: str) -> tuple[bool, float]:
    """Whether the untrained model ignores coordinates: the members of an orbit of the canvas probe
    ``probe-translation`` (same glyphs, other places, on a canvas whose background any position signal
    can see) get the same logits. Decided once per PE, not per probe: on a one-glyph set scene a relative
    PE also sees nothing, but that is its relativity, not blindness."""
    dm = build_datamodule("probe-translation", train_size=0, val_size=0, test_size=4 * CHECK_SCENES)
    d = _max_diff(_model("probe-translation", pe, dm), _pairs(dm, "position_blind", None))
    return d <= TOL, d


@functools.lru_cache(maxsize=None)
def capacity(probe: str, pe: str) -> Capacity:
    """Whether PE ``pe`` can represent the label of ``probe`` (one of :data:`CAPACITY_PROBES`), decided from
    its declared symmetries and a float64 check on the untrained model (module docstring).

    ``ValueError`` for a probe outside :data:`CAPACITY_PROBES`; an unknown PE raises the registry's error.
    A PE that cannot be built for the probe's tokens (rpb on a set probe: no raster) gives
    ``Capacity(False, "does not apply: ...")``."""
    if probe not in BREAKERS:
        raise ValueError(f"capacity covers the image probes {', '.join(CAPACITY_PROBES)}; got {probe!r}")
    cls = get_pe_class(pe)
    dm = build_datamodule(probe, train_size=0, val_size=0, test_size=max(200, 4 * CHECK_SCENES))
    try:
        logits = _model(probe, pe, dm)
    except PEConfigError as e:
        return Capacity(False, f"does not apply: {e}")
    ceiling = f"{100 * dm.no_pe_bound():.1f} %"
    if cls.learned is False:
        blind, d = _position_blind(pe)
        if blind:
            return Capacity(False, f"cannot represent (position-blind): the model (no learned parameters in the PE) "
                                   f"gives the members of an orbit (same glyphs, other places, other labels) the "
                                   f"same logits (max diff {d:.1e}); ceiling {ceiling}")
    for symmetry, transform, what in BREAKERS[probe]:
        if not getattr(cls, symmetry):
            continue
        pairs = _pairs(dm, symmetry, transform)
        if not pairs:  # pragma: no cover - every breaker finds pairs on a 200-scene test split
            raise RuntimeError(f"capacity({probe!r}, {pe!r}): no test scene with a {symmetry} twin of another label")
        d = _max_diff(logits, pairs)
        if d > TOL:
            raise RuntimeError(f"{pe} declares {symmetry} = True, but its untrained float64 model separates "
                               f"{probe} scenes from their {what} by {d:.2e}")
        name = _SYMMETRY_NAMES[symmetry]
        return Capacity(False, f"cannot represent ({name}): it cannot tell {what}: the untrained float64 model "
                               f"gives {len(pairs)} such test pairs the same logits (max diff {d:.1e})")
    declared = [n for s, n in _SYMMETRY_NAMES.items() if getattr(cls, s, False)]
    return Capacity(True, "representable: no symmetry of the PE" + (f" ({', '.join(declared)})" if declared else "")
                    + (" on this canvas" if not _is_set(probe) else "") + " changes the label")


def capacity_table(probes: list[str] | None = None, pes: list[str] | None = None) -> dict[tuple[str, str], Capacity]:
    """:func:`capacity` of every probe x PE (defaults: :data:`CAPACITY_PROBES` x every registered PE)."""
    return {(p, e): capacity(p, e) for p in (probes or list(CAPACITY_PROBES)) for e in (pes or list_pes())}


def cannot_represent(probe: str, pe: str) -> str | None:
    """The symmetry name ("relative", "rotation-invariant", "position-blind") that puts the label of ``probe`` out of
    reach of ``pe`` (a grid variant such as ``sincos+rpt`` is its PE), None when it can represent it, or when the probe
    is not one :func:`capacity` covers. Only the PEs such a symmetry could stop are checked (each check builds a
    model): those without learned parameters (the position-blind check) and those declaring a symmetry the probe
    lists; for any other PE :func:`capacity` finds no symmetry to apply. The study engine's ``capacity.checker:
    probe-capacity`` (``bench study report probes --pe MY-PE``) and the test of the probe study's declared cells
    call this."""
    name = pe.split("+", 1)[0]
    cls = get_pe_class(name)
    if probe not in BREAKERS or (cls.learned is not False
                                 and not any(getattr(cls, sym, False) for sym, _, _ in BREAKERS[probe])):
        return None
    c = capacity(probe, name)
    if c.representable or not c.reason.startswith("cannot represent ("):
        return None
    return c.reason[len("cannot represent ("):].split(")", 1)[0]

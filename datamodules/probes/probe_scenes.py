"""Probe scenes: the glyphs, the canvas renderer and the orbit-based scene generator base class
:class:`ProbeGenerator` that every probe of :mod:`pebench.datamodules.probes.probes` (and
:mod:`pebench.datamodules.probes.probe_motion`) subclasses. The probes' design, their labels and the exact
no-PE ceiling are described in :mod:`pebench.datamodules.probes.probes`.
"""
from __future__ import annotations

import abc
from typing import Any, ClassVar, Sequence

import numpy as np

from ..base import int_option
from ..synthetic.render import SPLITS

__all__ = ["PATCH", "PIXEL_MEAN", "PIXEL_STD", "GLYPH_KINDS", "NUISANCE", "glyph_mask", "render_probe",
           "ProbeGenerator", "ProbeSplits", "direction_label", "DIRECTIONS", "canvas_cells", "cell_distance",
           "free_cell", "place_distractors"]

PATCH = 4
PIXEL_MEAN, PIXEL_STD = 0.3, 0.35  # rough pixel statistics of the probe canvases, for standardising

_GLYPHS_4 = {
    "disc": (".##.", "####", "####", ".##."),
    "ring": ("####", "#..#", "#..#", "####"),
    "x": ("#..#", ".##.", ".##.", "#..#"),
    "bar": ("....", "####", "####", "...."),
    "tri": ("...#", "..##", ".###", "####"),
    "plus": (".#..", "####", ".#..", ".#.."),
}
_GLYPHS_3 = {
    "disc": ("###", "###", "###"),
    "ring": ("###", "#.#", "###"),
    "x": ("#.#", ".#.", "#.#"),
    "bar": ("...", "###", "..."),
    "tri": ("..#", ".##", "###"),
    "plus": (".#.", "###", ".#."),
}
GLYPH_KINDS = tuple(_GLYPHS_4)
BACKGROUNDS = np.array([[0.08, 0.08, 0.08], [0.2, 0.08, 0.25], [0.05, 0.2, 0.2], [0.25, 0.18, 0.05]],
                       dtype=np.float32)
COLOURS = np.array([[1.0, 0.3, 0.3], [0.3, 1.0, 0.3], [0.4, 0.5, 1.0], [1.0, 1.0, 0.3], [1.0, 0.4, 1.0],
                    [0.3, 1.0, 1.0], [0.95, 0.95, 0.95]], dtype=np.float32)


def _parse(rows: Sequence[str]) -> np.ndarray:
    return np.array([[c == "#" for c in r] for r in rows], dtype=bool)


def glyph_mask(kind: str, size: int, offset: tuple[int, int] = (0, 0)) -> np.ndarray:
    """``(PATCH, PATCH)`` bool ink mask of a glyph: ``size`` 4 fills the cell, ``size`` 3 sits at
    ``offset`` ``(dy, dx)`` in ``{0, 1}^2``."""
    if kind not in _GLYPHS_4:
        raise ValueError(f"unknown glyph {kind!r}; available: {', '.join(GLYPH_KINDS)}")
    if size == 4:
        return _parse(_GLYPHS_4[kind])
    if size != 3 or not all(o in (0, 1) for o in offset):
        raise ValueError(f"glyph size must be 4, or 3 with offsets in {{0, 1}}; got {size}, {offset}")
    m = np.zeros((PATCH, PATCH), dtype=bool)
    m[offset[0]:offset[0] + 3, offset[1]:offset[1] + 3] = _parse(_GLYPHS_3[kind])
    return m


#: ``nuisance`` option values: which cues are drawn per glyph (the background is drawn per scene in both)
NUISANCE = ("colour", "full")


def _style(rng: np.random.Generator, nuisance: str = "colour") -> dict[str, Any]:
    """Nuisance cues of one glyph (independent of the label): its colour; with ``full`` also its size
    (4 x 4, or 3 x 3 at one of 4 offsets) and polarity (ink on background, or inverted)."""
    colour = int(rng.integers(len(COLOURS)))
    if nuisance == "colour":
        return {"colour": colour, "size": 4, "offset": (0, 0), "polarity": 1}
    return {"colour": colour, "size": int(rng.choice([3, 4])),
            "offset": (int(rng.integers(2)), int(rng.integers(2))), "polarity": int(rng.choice([-1, 1]))}


def render_probe(scene: dict[str, Any], side: int | None = None) -> np.ndarray:
    """Scene -> ``(3, S, S)`` float32 image; ``S = canvas * PATCH`` natively, else the native
    image resampled to ``side`` by nearest neighbour (the "same scene upsampled" regime)."""
    g = int(scene["canvas"])
    native = g * PATCH
    bg = BACKGROUNDS[scene["bg"]]
    img = np.empty((3, native, native), dtype=np.float32)
    img[:] = bg[:, None, None]
    for obj in scene["objects"]:
        y, x = obj["cell"]
        m = glyph_mask(obj["kind"], obj["size"], obj["offset"])  # (P, P)
        col = COLOURS[obj["colour"]]
        patch = img[:, y * PATCH:(y + 1) * PATCH, x * PATCH:(x + 1) * PATCH]  # view (3, P, P)
        if obj["polarity"] > 0:
            patch[:, m] = col[:, None]
        else:
            patch[:] = col[:, None, None]
            patch[:, m] = bg[:, None]
    img = (img - PIXEL_MEAN) / PIXEL_STD
    if side is not None and side != native:
        idx = np.minimum(((np.arange(side) + 0.5) * native / side).astype(np.int64), native - 1)
        img = img[:, idx][:, :, idx]
    return np.ascontiguousarray(img, dtype=np.float32)


def cell_distance(a: Sequence[int], b: Sequence[int]) -> float:
    """Euclidean distance between two ``(y, x)`` cells."""
    return float(np.hypot(a[0] - b[0], a[1] - b[1]))


def canvas_cells(g: int, rows: range | None = None, cols: range | None = None) -> list[tuple[int, int]]:
    """The ``(y, x)`` cells of a ``g x g`` canvas, row-major (only ``rows`` / ``cols`` when given)."""
    return [(y, x) for y in (rows or range(g)) for x in (cols or range(g))]


def free_cell(rng: np.random.Generator, cells: list[tuple[int, int]], taken: list[tuple[int, int]],
              ok=lambda c: True) -> tuple[int, int] | None:
    """A cell of ``cells`` drawn uniformly among those not ``taken`` and accepted by ``ok`` (None: none left)."""
    cand = [c for c in cells if c not in taken and ok(c)]
    return cand[int(rng.integers(len(cand)))] if cand else None


def place_distractors(rng: np.random.Generator, region: list[tuple[int, int]], cells: list[tuple[int, int]],
                      n: int) -> list[tuple[int, int]] | None:
    """``cells`` plus ``n`` distractor cells drawn one by one from the free cells of ``region``
    (None when the region runs out)."""
    for _ in range(n):
        c = free_cell(rng, region, cells)
        if c is None:
            return None
        cells.append(c)
    return cells


class ProbeGenerator(abc.ABC):
    """Scene generator of one probe (plain object: pickles into data-loader workers).

    Subclasses define ``kinds(rng)`` (the glyph kinds, content only), ``place(kinds, pos, split,
    rng)`` (cells of the glyphs for positional label ``pos``, or None to retry) and ``label_of``
    (the label recomputed from kinds and cells, -1 when ambiguous; generation asserts it).
    """

    num_classes: ClassVar[int] = 4
    orbit: ClassVar[int] = 4          # K: positional labels per orbit
    canvas: ClassVar[int] = 8         # G of train / val
    test_canvas: ClassVar[int] = 8    # G of test
    no_pe_bound: ClassVar[float] = 0.25
    summary: ClassVar[str] = ""

    def __init__(self, distractors: int = 0, nuisance: str = "colour") -> None:
        if distractors < 0:
            raise ValueError(f"distractors must be >= 0, got {distractors}")
        if nuisance not in NUISANCE:
            raise ValueError(f"nuisance must be one of {', '.join(NUISANCE)}, got {nuisance!r}")
        self.distractors = int(distractors)
        self.nuisance = nuisance

    def canvas_of(self, split: str) -> int:
        return self.test_canvas if split == "test" else self.canvas

    def render(self, scene: dict[str, Any], side: int | None = None) -> np.ndarray:
        """Scene -> input array (images: ``(3, S, S)``)."""
        return render_probe(scene, side)

    @staticmethod
    def where(c: Any) -> dict[str, Any]:
        """What ``place`` returned for one glyph -> its scene entries."""
        return {"cell": (int(c[0]), int(c[1]))}

    @abc.abstractmethod
    def kinds(self, rng: np.random.Generator) -> list[str]:
        """The glyph kinds of one orbit (its content), drawn from ``rng``."""

    def label(self, kinds: list[str], pos: int) -> int:
        return pos

    @abc.abstractmethod
    def place(self, kinds: list[str], pos: int, split: str, rng: np.random.Generator) -> list | None:
        """Where the glyphs of orbit member ``pos`` go in ``split`` (None: no valid placement)."""

    @abc.abstractmethod
    def label_of(self, kinds: list[str], cells: list[tuple[int, int]], canvas: int) -> int:
        """The label of a placed scene, computed from its glyphs and cells alone."""

    def scene(self, seed: int, split: str, index: int) -> dict[str, Any]:
        base, pos = divmod(int(index), self.orbit)
        crng = np.random.default_rng([seed, SPLITS[split], base])  # orbit: content and nuisance
        kinds = self.kinds(crng)
        styles = [_style(crng, self.nuisance) for _ in kinds]
        bg = int(crng.integers(len(BACKGROUNDS)))
        prng = np.random.default_rng([seed, SPLITS[split], int(index), 1])  # sample: placement
        for _ in range(1000):
            cells = self.place(kinds, pos, split, prng)
            if cells is not None:
                break
        else:  # pragma: no cover - every probe's placement is feasible by construction
            raise RuntimeError(f"{type(self).__name__}: no placement found for sample {index}")
        label = self.label(kinds, pos)
        g = self.canvas_of(split)
        if self.label_of(kinds, cells, g) != label:  # pragma: no cover - consistency of place/label_of
            raise AssertionError(f"{type(self).__name__}: placement of sample {index} does not give label {label}")
        objects = [{"kind": k, **self.where(c), **s} for k, c, s in zip(kinds, cells, styles)]
        return {"label": label, "canvas": g, "bg": bg, "objects": objects}


DIRECTIONS = ((0, 1), (-1, 0), (0, -1), (1, 0))  # (dy, dx) of E, N, W, S (y down)


def direction_label(a: Sequence[int], b: Sequence[int]) -> int:
    """Direction of ``b`` seen from ``a``: 0 E, 1 N, 2 W, 3 S by the dominant axis; -1 on a tie."""
    dy, dx = b[0] - a[0], b[1] - a[1]
    if abs(dx) > abs(dy):
        return 0 if dx > 0 else 2
    if abs(dy) > abs(dx):
        return 3 if dy > 0 else 1
    return -1


class ProbeSplits:
    """What every probe datamodule (image, video and point probes) shares: the split sizes and the
    data seed, checked as ``--data-option`` values, and the class count and derived no-PE bound of
    its generator (``self.gen``, class attribute ``generator``)."""

    generator: ClassVar[Any]
    gen: Any
    name: str
    seed: int

    def _init_splits(self, train_size: Any, val_size: Any, test_size: Any, data_seed: Any) -> None:
        self.train_size = int_option(self.name, "train_size", train_size, minimum=0)
        self.val_size = int_option(self.name, "val_size", val_size, minimum=0)
        self.test_size = int_option(self.name, "test_size", test_size, minimum=0)
        self.data_seed = self.seed if data_seed is None else int_option(self.name, "data_seed", data_seed, minimum=0)
        self._ceiling: float | None = None

    @property
    def num_classes(self) -> int:
        return self.gen.num_classes

    @classmethod
    def no_pe_bound(cls) -> float:
        """The derived no-PE ceiling (orbit argument in :mod:`pebench.datamodules.probes.probes`)."""
        return cls.generator.no_pe_bound

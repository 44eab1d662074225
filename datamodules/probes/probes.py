"""Probe suite: one embedded image task per positional-encoding property.

Each probe renders small glyphs on a canvas of ``G x G`` cells of ``PATCH x PATCH`` pixels, one
glyph per cell, aligned with the tokenizer's patches (patch size 4). The probes test the
properties that the positional-encoding literature attributes to PEs:

================== ======= =====================================================================
name               classes label (train/val split -> out-of-distribution test split)
================== ======= =====================================================================
probe-translation  4       direction (E, N, W, S) of glyph B seen from glyph A; both glyphs in
                           the left half of the canvas -> both in the right half (translation
                           invariance, as in the RoPE paper's relative-position argument,
                           Su et al. 2021).
probe-rotation     4       ``2 * far + (B right of A)``: distance bin and direction on the same
                           scenes; A->B within 27 degrees of horizontal -> 27 to 64 degrees
                           ("rotated scenes"). A rotation-invariant PE (PaPE-RI, ALiBi) can carry
                           the distance but not the direction (see below).
probe-decay        2       kind (disc or cross) of the glyph nearest to a marker, the other one
                           (and any distractors) at least one cell farther; nearest at distance
                           1 to 2.3 cells -> 3 to 4.5 cells (distance decay, as in ALiBi, Press
                           et al. 2022).
probe-context      3       number (0..2) of crosses within a radius that the marker's kind selects
                           (disc: 1.5 cells, ring: 3.2 cells): content-dependent decay (the
                           parabolic PE's motivation, PaPE); test: fresh scenes, same law.
probe-extrapolation 4      direction of B from A as in probe-translation; canvas 8 x 8 -> a larger
                           12 x 12 canvas at the same glyph scale. The second regime, the same
                           scene upsampled, is ``val_dataset(resolution)`` at any other side
                           (nearest-neighbour resampling), which the extrapolation analysis uses.
probe-anchoring    4       ``2 * (marker is a cross) + (marker in the bottom half)``: content alone
                           reaches 50 %, absolute position adds the rest (the index-anchoring
                           setting of the SSDC study, where RPI / RPT / alpha keep a defined
                           fragility score).
probe-motion       4       video (4 frames, tubelets of 2): direction of a glyph moving one cell
                           per frame; path in the left half -> right half (pebench.datamodules.probes.probe_motion).
================== ======= =====================================================================

Defaults: no distractor glyphs (``distractors=N`` adds N glyphs of other kinds; with them the
probes learn much more slowly) and ``train_size=6400``. The committed recipe (README "Probes"):
``--model vit-probe --epochs 2 --batch-size 64 --warmup-epochs 0.3`` (200 steps) with the learning rate of
each PE chosen on the validation split.

Nuisance cues are independent of the label: the background (one of 4 dark colours) is drawn per
scene and the colour (7 bright colours) per glyph. ``nuisance=full`` also draws each glyph's size
(4 x 4, or 3 x 3 at one of 4 offsets) and polarity (ink on background, or inverted). It is not the
default because it delays learning far beyond a CPU budget (rope-axial on probe-translation,
vit-probe-sized model, lr 5e-3: still on the ln 4 loss plateau after 150 steps with ``full``, 91 %
on the test split after 100 steps without), and it is not needed against shortcuts: the orbit
construction below makes every cue that is not a position useless, whatever cues vary. There
is no pixel noise and the background is flat, so a cell's pixels are a discrete function of
(kind, colour, size, offset, polarity, background).

No-PE ceiling (exact). A ViT without PE and with mean pooling is invariant to permuting its
patch tokens, so its prediction is a function of the *multiset of patch contents*. Every split
is generated in *orbits*: sample ``i`` belongs to orbit ``i // K``; all samples of an orbit share
the glyphs and every nuisance cue (drawn from a generator seeded by the orbit) and differ only in
where the glyphs are (drawn per sample), with the positional part of the label equal to
``i % K``. All members of an orbit therefore have the same multiset but ``K`` different labels,
and no function of the multiset beats ``1 / K`` of the positional part: the ceiling is ``1/K``
(``1/4``; ``1/2`` for decay, ``1/3`` for context) and ``1/2`` for probe-anchoring (``K = 2``: the
glyph kind, which the multiset shows, fixes the other half of the label). :meth:`ProbeDataModule.no_pe_ceiling`
computes the same number from the rendered test split (group the samples by the byte content of
their sorted patches, count the majority label of each group), which checks the argument. For
probe-rotation the direction bit is also out of reach of any PE that sees only Euclidean
distances (ALiBi, PaPE-RI): mirroring the canvas left-right preserves all distances and flips
the bit, and the scenes are drawn mirror-symmetrically, so their expected ceiling on that probe is
50 %.

Splits: ``train`` and ``val`` follow the training distribution (val is for model selection),
``test`` is the out-of-distribution split above (``test_size`` >= 1000 so that a 95 % interval of
an accuracy is at most +-3.1 points). Each split has its own seed stream
``[data_seed, split, ...]`` (``data_seed`` defaults to the run's seed).
"""
from __future__ import annotations

from typing import Any, ClassVar, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from ..base import BenchDataModule, parse_resolution
from ..registry import register_datamodule
from .probe_scenes import (
    DIRECTIONS,
    GLYPH_KINDS,
    PATCH,
    PIXEL_MEAN,
    PIXEL_STD,
    ProbeGenerator,
    ProbeSplits,
    canvas_cells,
    cell_distance,
    direction_label,
    free_cell,
    glyph_mask,
    place_distractors,
    render_probe,
)

__all__ = ["PATCH", "GLYPH_KINDS", "glyph_mask", "ProbeGenerator", "ProbeDataset", "ProbeDataModule",
           "PROBES", "multiset_ceiling", "render_probe"]


class DirectionProbe(ProbeGenerator):
    """Glyph A (disc) and B (cross) plus distractors; label = direction of B from A."""

    max_along: ClassVar[int] = 3

    def kinds(self, rng: np.random.Generator) -> list[str]:
        others = ("bar", "tri", "plus", "ring")
        return ["disc", "x"] + [others[int(rng.integers(len(others)))] for _ in range(self.distractors)]

    def region(self, split: str) -> list[tuple[int, int]]:
        g = self.canvas_of(split)
        return canvas_cells(g)

    def place(self, kinds, pos, split, rng):
        region = self.region(split)
        along = int(rng.integers(1, self.max_along + 1))
        perp = int(rng.integers(-(along - 1), along))  # |perp| < along: the direction is unambiguous
        dy, dx = DIRECTIONS[pos]
        d = (dy * along + dx * perp, dx * along + dy * perp)
        starts = [c for c in region if (c[0] + d[0], c[1] + d[1]) in region]
        if not starts:
            return None
        a = starts[int(rng.integers(len(starts)))]
        cells = [a, (a[0] + d[0], a[1] + d[1])]
        return place_distractors(rng, region, cells, len(kinds) - 2)

    def label_of(self, kinds, cells, canvas):
        return direction_label(cells[0], cells[1])


class TranslationProbe(DirectionProbe):
    summary = "direction of B from A; train: left half of the canvas, test: right half"

    def region(self, split):
        g = self.canvas_of(split)
        half = g // 2
        return canvas_cells(g, cols=range(half, g) if split == "test" else range(0, half))


class ExtrapolationProbe(DirectionProbe):
    test_canvas = 12
    summary = "direction of B from A; train: 8x8 canvas, test: 12x12 canvas (same glyph scale)"
    max_along = 4


# probe-rotation displacement sets (dy, dx) in cells, by (split kind, far)
def _rotation_offsets(test: bool, far: bool) -> list[tuple[int, int]]:
    out = []
    for dy in range(-7, 8):
        for dx in range(-7, 8):
            d = float(np.hypot(dy, dx))
            if not ((4.4 <= d <= 6.5) if far else (2.0 <= d <= 3.2)):
                continue
            flat = 2 * abs(dy) <= abs(dx)                       # within atan(1/2) = 26.6 deg of horizontal
            steep = abs(dx) * 0.5 < abs(dy) <= 2 * abs(dx)      # 26.6 .. 63.4 deg
            if (steep if test else flat):
                out.append((dy, dx))
    return out


class RotationProbe(ProbeGenerator):
    summary = "2*far + (B right of A); train: A->B within 27 deg of horizontal, test: 27..63 deg"

    def kinds(self, rng):
        others = ("bar", "tri", "plus", "ring")
        return ["disc", "x"] + [others[int(rng.integers(len(others)))] for _ in range(self.distractors)]

    def place(self, kinds, pos, split, rng):
        far, right = divmod(pos, 2)
        offs = [o for o in _rotation_offsets(split == "test", bool(far)) if (o[1] > 0) == bool(right)]
        dy, dx = offs[int(rng.integers(len(offs)))]
        g = self.canvas_of(split)
        region = canvas_cells(g)
        starts = [c for c in region if 0 <= c[0] + dy < g and 0 <= c[1] + dx < g]
        a = starts[int(rng.integers(len(starts)))]
        cells = [a, (a[0] + dy, a[1] + dx)]
        return place_distractors(rng, region, cells, len(kinds) - 2)

    def label_of(self, kinds, cells, canvas):
        (_ay, ax), (_by, bx) = cells[0], cells[1]
        d = cell_distance(cells[0], cells[1])
        if bx == ax or 3.2 < d < 4.4:
            return -1
        return 2 * int(d >= 4.4) + int(bx > ax)


class DecayProbe(ProbeGenerator):
    num_classes = 2
    orbit = 2
    canvas = test_canvas = 10
    no_pe_bound = 0.5
    summary = "kind (disc or cross) of the glyph nearest to the marker; nearest at 1..2.3 cells -> 3..4.5 cells"
    candidates = ("disc", "x")
    margin = 1.0

    def kinds(self, rng):
        extra = [self.candidates[int(rng.integers(len(self.candidates)))] for _ in range(self.distractors)]
        return ["ring", *self.candidates, *extra]

    def place(self, kinds, pos, split, rng):
        g = self.canvas_of(split)
        lo, hi = (3.0, 4.5) if split == "test" else (1.0, 2.3)
        region = canvas_cells(g)
        m = region[int(rng.integers(len(region)))]
        near = free_cell(rng, region, [m], lambda c: lo <= cell_distance(c, m) <= hi)
        if near is None:
            return None
        d1 = cell_distance(near, m)
        cells = [m]
        for i, _ in enumerate(kinds[1:], start=1):
            if i == 1 + pos:
                cells.append(near)
                continue
            c = free_cell(rng, region, cells + [near], lambda c: cell_distance(c, m) >= d1 + self.margin)
            if c is None:
                return None
            cells.append(c)
        return cells

    def label_of(self, kinds, cells, canvas):
        d = [cell_distance(c, cells[0]) for c in cells[1:]]
        order = np.argsort(d, kind="stable")
        if len(d) > 1 and d[order[1]] - d[order[0]] < self.margin - 1e-9:
            return -1
        return self.candidates.index(kinds[1 + int(order[0])])


class ContextProbe(ProbeGenerator):
    num_classes = 3
    orbit = 3
    canvas = test_canvas = 10
    no_pe_bound = 1 / 3
    summary = "crosses within the marker's radius (disc 1.5, ring 3.2 cells), 0..2"
    radii = {"disc": 1.5, "ring": 3.2}
    counted = 2

    def kinds(self, rng):
        return [("disc", "ring")[int(rng.integers(2))]] + ["x"] * self.counted

    def place(self, kinds, pos, split, rng):
        g = self.canvas_of(split)
        r = self.radii[kinds[0]]
        region = canvas_cells(g)
        m = region[int(rng.integers(len(region)))]
        cells = [m]
        for i in range(self.counted):
            inside = i < pos
            ok = (lambda c: cell_distance(c, m) <= r) if inside else (lambda c: r + 0.5 < cell_distance(c, m) <= r + 3.0)
            c = free_cell(rng, region, cells, ok)
            if c is None:
                return None
            cells.append(c)
        return cells

    def label_of(self, kinds, cells, canvas):
        r = self.radii[kinds[0]]
        return sum(cell_distance(c, cells[0]) <= r for c in cells[1:])


class AnchoringProbe(ProbeGenerator):
    orbit = 2
    no_pe_bound = 0.5
    summary = "2*(marker is a cross) + (marker in the bottom half); content alone: 50 %"

    def kinds(self, rng):
        others = ("bar", "tri", "plus")
        return [("disc", "x")[int(rng.integers(2))]] + [others[int(rng.integers(3))] for _ in range(self.distractors)]

    def label(self, kinds, pos):
        return 2 * int(kinds[0] == "x") + pos

    def place(self, kinds, pos, split, rng):
        g = self.canvas_of(split)
        half = g // 2
        m_rows = range(half, g) if pos else range(0, half)
        cells = [free_cell(rng, canvas_cells(g, rows=m_rows), [])]
        for _ in kinds[1:]:
            cells.append(free_cell(rng, canvas_cells(g), cells))
        return cells

    def label_of(self, kinds, cells, canvas):
        return 2 * int(kinds[0] == "x") + int(cells[0][0] >= canvas // 2)


PROBES: dict[str, type[ProbeGenerator]] = {
    "probe-translation": TranslationProbe,
    "probe-rotation": RotationProbe,
    "probe-decay": DecayProbe,
    "probe-context": ContextProbe,
    "probe-extrapolation": ExtrapolationProbe,
    "probe-anchoring": AnchoringProbe,
}


class ProbeDataset(Dataset):
    """Index -> ``(image (3, S, S), label)``; ``side`` None renders natively (patch-aligned)."""

    def __init__(self, gen: ProbeGenerator, split: str, size: int, seed: int, side: int | None = None) -> None:
        if size < 0:
            raise ValueError(f"dataset size must be >= 0, got {size}")
        self.gen, self.split, self.size, self.seed, self.side = gen, split, int(size), int(seed), side
        self._cache: dict[int, tuple[torch.Tensor, int]] = {}  # rendered samples (epochs > 1 reuse them)

    def __len__(self) -> int:
        return self.size

    def scene(self, i: int) -> dict[str, Any]:
        i = int(i)
        if not 0 <= i < self.size:
            raise IndexError(f"index {i} out of range for a dataset of {self.size} samples")
        return self.gen.scene(self.seed, self.split, i)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        i = int(i)
        if i not in self._cache:
            s = self.scene(i)
            self._cache[i] = (torch.from_numpy(self.gen.render(s, self.side)), int(s["label"]))
        return self._cache[i]


def multiset_ceiling(images: np.ndarray, labels: Sequence[int], patch: int = PATCH, tubelet: int = 1) -> float:
    """Best accuracy any function of the multiset of patch contents reaches on ``(images, labels)``.

    images: ``(n, C, S, S)`` (or clips ``(n, C, T, S, S)`` cut into ``tubelet x patch x patch``
    tubelets); samples with the same sorted list of patch byte-strings form one group, which such
    a function must give one answer: the best is each group's majority label.
    """
    images = np.asarray(images)
    if images.ndim == 4:
        images = images[:, :, None]  # (n, C, 1, S, S)
        tubelet = 1
    n, c, t, h, w = images.shape
    if h % patch or w % patch or t % tubelet:
        raise ValueError(f"input size {t}x{h}x{w} is not divisible by the tubelet x patch size "
                         f"{tubelet}x{patch}x{patch}")
    p = images.reshape(n, c, t // tubelet, tubelet, h // patch, patch, w // patch, patch)
    p = np.ascontiguousarray(p.transpose(0, 2, 4, 6, 1, 3, 5, 7))
    p = p.reshape(n, (t // tubelet) * (h // patch) * (w // patch), -1)  # (n, N, C*tubelet*P*P)
    groups: dict[bytes, dict[int, int]] = {}
    for img, y in zip(p, labels):
        key = b"".join(sorted(row.tobytes() for row in img))
        counts = groups.setdefault(key, {})
        counts[int(y)] = counts.get(int(y), 0) + 1
    return sum(max(v.values()) for v in groups.values()) / n if n else float("nan")


class ProbeDataModule(ProbeSplits, BenchDataModule):
    """A probe (see the module docstring). Options: ``train_size``, ``val_size``, ``test_size``,
    ``distractors``, ``data_seed`` (default: the run's seed)."""

    modality = "image"
    needs_data_root = False
    patch_size = PATCH
    tubelet = 1
    has_test_split: ClassVar[bool] = True
    generator: ClassVar[type[ProbeGenerator]] = ProbeGenerator
    default_resolution = 32
    in_chans = 3
    mean, std = PIXEL_MEAN, PIXEL_STD

    def __init__(self, train_size: int = 6400, val_size: int = 600, test_size: int = 1200,
                 distractors: int | None = None, nuisance: str = "colour", data_seed: int | None = None,
                 resolution: int | str | None = None, **kwargs: Any) -> None:
        super().__init__(resolution=None, **kwargs)
        self.gen = self.generator(0 if distractors is None else int(distractors), nuisance)
        native = self.gen.canvas * PATCH
        if resolution is not None and parse_resolution(resolution) not in ((native,), (native, native)):
            raise ValueError(f"{self.name} trains on its {self.gen.canvas}x{self.gen.canvas}-cell canvas "
                             f"({native} px); --resolution {resolution} is not allowed (other sizes are "
                             f"evaluation-only: the extrapolation analysis and the test split)")
        self._init_splits(train_size, val_size, test_size, data_seed)
        self.resolution = (native,)

    def _side(self, resolution: Any) -> int | None:
        if resolution is None:
            return None
        res = resolution if isinstance(resolution, tuple) else parse_resolution(resolution)
        if len(res) == 2 and res[0] != res[1]:
            raise ValueError(f"{self.name} renders square images; got resolution {'x'.join(map(str, res))}")
        if res[0] <= 0:
            raise ValueError(f"image side must be positive, got {res[0]}")
        return int(res[0])

    def input_shape(self, resolution: Any = None) -> tuple[int, ...]:
        s = self._side(resolution) or self.resolution[0]
        return (self.in_chans, s, s)

    def train_dataset(self) -> Dataset:
        return ProbeDataset(self.gen, "train", self.train_size, self.data_seed)

    def val_dataset(self, resolution: Any = None) -> Dataset:
        side = self._side(resolution)
        return ProbeDataset(self.gen, "val", self.val_size, self.data_seed,
                            None if side == self.resolution[0] else side)

    def test_dataset(self, resolution: Any = None) -> Dataset:
        return ProbeDataset(self.gen, "test", self.test_size, self.data_seed, self._side(resolution))

    def no_pe_ceiling(self, split: str = "test") -> float:
        """Best accuracy of any patch-permutation-invariant model on ``split`` (computed, exact)."""
        ds = {"train": self.train_dataset, "val": self.val_dataset, "test": self.test_dataset}[split]()
        if split == "test" and self._ceiling is not None:
            return self._ceiling
        scenes = [ds.scene(i) for i in range(len(ds))]
        images = np.stack([self.gen.render(s) for s in scenes])
        value = multiset_ceiling(images, [s["label"] for s in scenes], PATCH, self.tubelet)
        if split == "test":
            self._ceiling = value
        return value


def _register(name: str, gen: type[ProbeGenerator]) -> type[ProbeDataModule]:
    cls = type(f"{gen.__name__}DataModule", (ProbeDataModule,), {
        "generator": gen, "default_resolution": gen.canvas * PATCH,
        "__doc__": f"``{name}``: {gen.summary} (no-PE ceiling {100 * gen.no_pe_bound:.1f} %).",
        "__module__": __name__})
    return register_datamodule(name)(cls)


for _name, _gen in PROBES.items():
    globals()[f"{_gen.__name__}DataModule"] = _register(_name, _gen)
    __all__.append(f"{_gen.__name__}DataModule")

"""Set probes: the probe scenes as sets of occupied tokens, with no canvas of background tokens.

Why (issue #44). The canvas probes of :mod:`pebench.datamodules.probes.probes` place their glyphs on a
fixed canvas of ``G x G`` cells, most of them background, and the mean pool reads every cell. The
canvas border is then an absolute cue: an exactly relative PE sees how far each glyph is from the
background tokens at the border, so translating the glyphs inside the canvas changes its logits (on
untrained ``vit-probe`` models the train -> test shift of ``probe-translation`` / ``probe-extrapolation``
moved the centred logits by 0.68-1.92 times the within-orbit label signal for rope-axial, rope-mixed,
pape, lookhere, string and comrope). What those probes measured was therefore partly the border, not
translation invariance.

Here a scene is the set of its glyph tokens: one ``PATCH x PATCH`` patch per glyph (the same pixels as
that glyph's cell on the canvas, background colour included) at its cell coordinate ``(y, x)`` in patch
units, padded to the batch's largest scene with a key mask (:class:`GlyphTokens`, :func:`glyph_collate`).
Padding is masked out of attention and of the mean pool, so a model sees the glyphs and their
coordinates and nothing else. The test split of the two shift probes is built from *twins*: each test
scene is a scene of the training distribution (drawn from the test seed stream) with every coordinate
shifted by the same ``(dy, dx)``, its content unchanged (:meth:`SetProbeDataset.twin` returns the
unshifted scene). A model whose attention logits depend on coordinates only through differences (and
whose other parts ignore them) gives a test scene and its twin the same logits, to rounding; a PE that
reads absolute coordinates does not (``tests/datamodules/test_probe_sets.py`` checks both, in float64,
untrained and after a few optimizer steps).

================================ ======= ==================================================================
name                             classes label (train/val -> test)
================================ ======= ==================================================================
probe-set-translation            4       direction (E, N, W, S) of B (cross) from A (disc), as
                                         ``probe-translation``: both glyphs in columns 0..3 of an 8 x 8
                                         box -> the same kind of scene shifted by 4 columns (columns
                                         4..7, the canvas probe's test half).
probe-set-extrapolation          4       the same label, ``|along| <= 4`` cells, scenes inside an 8 x 8
                                         box -> shifted by a per-scene ``(dy, dx) >= 0`` so that the
                                         scene stays inside a 12 x 12 box and at least one glyph leaves
                                         the 8 x 8 training box: coordinates never seen in training.
probe-set-anchoring              4       ``2 * (marker is a cross) + (marker in rows 4..7)`` of an 8 x 8
                                         box, as ``probe-anchoring``: the positive control, a label that
                                         needs absolute position. Relative PEs cannot represent it
                                         (:func:`pebench.analysis.probe_capacity.capacity`); absolute PEs
                                         (ape, sincos) can.
================================ ======= ==================================================================

Orbits, nuisance cues, split sizes and seeds are those of the canvas probes (the module docstring of
:mod:`~pebench.datamodules.probes.probes`), so the no-PE ceiling argument holds unchanged: the members of
an orbit have the same multiset of token contents (:func:`token_multiset_ceiling` recomputes it).
The canvas probes keep their names and code, so the committed results still describe existing code.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

from pebench.core.errors import ConfigError

from ..base import BenchDataModule
from ..registry import register_datamodule
from ..synthetic.render import SPLITS
from .probe_scenes import PATCH, PIXEL_MEAN, PIXEL_STD, ProbeGenerator, ProbeSplits, render_probe
from .probes import AnchoringProbe, DirectionProbe, canvas_cells

__all__ = ["GlyphTokens", "glyph_collate", "scene_tokens", "SetProbe", "SetTranslationProbe",
           "SetExtrapolationProbe", "SetAnchoringProbe", "SET_PROBES", "SetProbeDataset", "SetProbeDataModule",
           "token_multiset_ceiling", "twin_scene", "set_probe_analyses", "SET_TOKENS"]

#: the ``tokens`` kind of a set probe (the classification task builds :class:`~pebench.models.set_tokenizer.SetPatchTokenizer`)
SET_TOKENS = "occupied"


@dataclass
class GlyphTokens:
    """A padded batch of set-probe scenes: ``patches (B, N, 3, P, P)`` float32 (the glyph cells'
    standardised pixels), ``coords (B, N, 2)`` float32 ``(y, x)`` in patch units, ``mask (B, N)`` bool
    (True = a glyph, False = padding). ``to``, batch indexing and ``len`` as for a tensor batch."""

    patches: Tensor
    coords: Tensor
    mask: Tensor

    def to(self, *args: Any, **kwargs: Any) -> "GlyphTokens":
        """``patches.to(...)`` (device and / or dtype); coords follow its dtype when it is floating, the
        mask only its device."""
        p = self.patches.to(*args, **kwargs)
        return GlyphTokens(p, self.coords.to(device=p.device, dtype=p.dtype), self.mask.to(p.device))

    def double(self) -> "GlyphTokens":
        return self.to(torch.float64)

    def __getitem__(self, i: Any) -> "GlyphTokens":
        if isinstance(i, int):
            i = slice(i, i + 1)
        return GlyphTokens(self.patches[i], self.coords[i], self.mask[i])

    def __len__(self) -> int:
        return int(self.mask.shape[0])

    @property
    def shape(self) -> torch.Size:
        """``(B, N)``: batch size and padded token count."""
        return self.mask.shape

    @property
    def device(self) -> torch.device:
        return self.patches.device


def scene_tokens(scene: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Scene -> ``patches (n, 3, P, P)`` float32 (each glyph's cell exactly as :func:`render_probe` draws
    it on the canvas) and ``coords (n, 2)`` float32 (its cell ``(y, x)``), one row per glyph."""
    patches = [render_probe({"canvas": 1, "bg": scene["bg"], "objects": [{**o, "cell": (0, 0)}]})
               for o in scene["objects"]]
    coords = [o["cell"] for o in scene["objects"]]
    return np.stack(patches), np.asarray(coords, dtype=np.float32).reshape(-1, 2)


def glyph_collate(batch: Sequence[tuple[tuple[Tensor, Tensor], int]]) -> tuple[GlyphTokens, Tensor]:
    """``[((patches (n_i, 3, P, P), coords (n_i, 2)), label)]`` -> ``(GlyphTokens, labels (B,))``, padded to
    the largest ``n_i`` with zero patches at coordinate 0 (masked)."""
    n = max(1, max(int(p.shape[0]) for (p, _), _ in batch)) if batch else 1
    B = len(batch)
    patches = torch.zeros(B, n, 3, PATCH, PATCH)
    coords = torch.zeros(B, n, 2)
    mask = torch.zeros(B, n, dtype=torch.bool)
    for b, ((p, c), _) in enumerate(batch):
        k = int(p.shape[0])
        patches[b, :k], coords[b, :k], mask[b, :k] = p, c, True
    return GlyphTokens(patches, coords, mask), torch.tensor([int(y) for _, y in batch], dtype=torch.long)


def twin_scene(scene: dict[str, Any]) -> dict[str, Any]:
    """The scene with its shift undone: every glyph at ``cell - shift``, in the training box (the scene
    itself when it is not shifted)."""
    dy, dx = scene.get("shift", (0, 0))
    objects = [{**o, "cell": (o["cell"][0] - dy, o["cell"][1] - dx)} for o in scene["objects"]]
    return {**scene, "objects": objects, "shift": (0, 0), "canvas": scene.get("twin_canvas", scene["canvas"])}


class SetProbe(ProbeGenerator):
    """Mixin of a set probe's generator: train and val scenes come from the canvas probe's generator; a
    test scene is such a scene (its twin, drawn from the test seed stream) shifted by :meth:`shift`."""

    #: side of the box the test scenes lie in (the training box is ``canvas``)
    test_canvas: ClassVar[int] = 8

    def canvas_of(self, split: str) -> int:
        return self.canvas  # the twin's box; :meth:`scene` records the test box

    def shift(self, cells: list[tuple[int, int]], rng: np.random.Generator) -> tuple[int, int]:
        """The test shift ``(dy, dx)`` of a twin whose glyphs are at ``cells`` (none: ``(0, 0)``)."""
        return (0, 0)

    def scene(self, seed: int, split: str, index: int) -> dict[str, Any]:
        twin = super().scene(seed, split, index)
        if split != "test":
            return {**twin, "shift": (0, 0)}
        rng = np.random.default_rng([seed, SPLITS[split], int(index), 2])  # the shift's own stream
        dy, dx = self.shift([o["cell"] for o in twin["objects"]], rng)
        objects = [{**o, "cell": (o["cell"][0] + dy, o["cell"][1] + dx)} for o in twin["objects"]]
        return {**twin, "objects": objects, "shift": (dy, dx), "canvas": self.test_canvas,
                "twin_canvas": twin["canvas"]}


class SetTranslationProbe(SetProbe, DirectionProbe):
    summary = "direction of B from A as a set of glyph tokens; train: columns 0..3, test: the same scenes 4 columns right"
    test_canvas = 8

    def region(self, split):
        return canvas_cells(self.canvas, cols=range(0, self.canvas // 2))

    def shift(self, cells, rng):
        return (0, self.canvas // 2)


class SetExtrapolationProbe(SetProbe, DirectionProbe):
    summary = ("direction of B from A as a set of glyph tokens; train: inside 8x8, test: shifted so that a glyph "
               "leaves the 8x8 box (inside 12x12)")
    test_canvas = 12
    max_along = 4

    def region(self, split):
        return canvas_cells(self.canvas)

    def shift(self, cells, rng):
        ymax, xmax = max(c[0] for c in cells), max(c[1] for c in cells)
        ok = [(dy, dx) for dy in range(self.test_canvas - ymax) for dx in range(self.test_canvas - xmax)
              if ymax + dy >= self.canvas or xmax + dx >= self.canvas]  # never empty: ymax <= canvas - 1
        return ok[int(rng.integers(len(ok)))]


class SetAnchoringProbe(SetProbe, AnchoringProbe):
    summary = "2*(marker is a cross) + (marker in rows 4..7) as a set of glyph tokens; content alone: 50 %"


SET_PROBES: dict[str, type[SetProbe]] = {
    "probe-set-translation": SetTranslationProbe,
    "probe-set-extrapolation": SetExtrapolationProbe,
    "probe-set-anchoring": SetAnchoringProbe,
}


class SetProbeDataset(Dataset):
    """Index -> ``((patches (n, 3, P, P), coords (n, 2)), label)``; batches through :func:`glyph_collate`."""

    def __init__(self, gen: SetProbe, split: str, size: int, seed: int) -> None:
        if size < 0:
            raise ValueError(f"dataset size must be >= 0, got {size}")
        self.gen, self.split, self.size, self.seed = gen, split, int(size), int(seed)
        self.collate_fn = glyph_collate
        self._cache: dict[int, tuple[tuple[Tensor, Tensor], int]] = {}

    def __len__(self) -> int:
        return self.size

    def scene(self, i: int) -> dict[str, Any]:
        i = int(i)
        if not 0 <= i < self.size:
            raise IndexError(f"index {i} out of range for a dataset of {self.size} samples")
        return self.gen.scene(self.seed, self.split, i)

    def twin(self, i: int) -> dict[str, Any]:
        """Scene ``i`` with its test shift undone (a scene of the training distribution)."""
        return twin_scene(self.scene(i))

    @staticmethod
    def item(scene: dict[str, Any]) -> tuple[tuple[Tensor, Tensor], int]:
        p, c = scene_tokens(scene)
        return (torch.from_numpy(p), torch.from_numpy(c)), int(scene["label"])

    def __getitem__(self, i: int) -> tuple[tuple[Tensor, Tensor], int]:
        i = int(i)
        if i not in self._cache:
            self._cache[i] = self.item(self.scene(i))
        return self._cache[i]


def token_multiset_ceiling(scenes: Sequence[dict[str, Any]]) -> float:
    """Best accuracy of any function of the multiset of token contents (a model without position):
    scenes with the same sorted list of patch byte-strings form one group, answered by its majority label."""
    groups: dict[bytes, dict[int, int]] = {}
    for s in scenes:
        p, _ = scene_tokens(s)
        key = b"".join(sorted(row.tobytes() for row in p))
        counts = groups.setdefault(key, {})
        counts[int(s["label"])] = counts.get(int(s["label"]), 0) + 1
    return sum(max(v.values()) for v in groups.values()) / len(scenes) if scenes else float("nan")


class SetProbeDataModule(ProbeSplits, BenchDataModule):
    """A set probe (module docstring). Options as the canvas probes: ``train_size``, ``val_size``,
    ``test_size``, ``distractors``, ``nuisance``, ``data_seed``."""

    modality = "image"
    tokens: ClassVar[str] = SET_TOKENS
    needs_data_root = False
    patch_size = PATCH
    tubelet = 1
    has_test_split: ClassVar[bool] = True
    generator: ClassVar[type[SetProbe]] = SetProbe
    default_resolution = 32
    in_chans = 3
    mean, std = PIXEL_MEAN, PIXEL_STD
    #: analyses that apply to a set of tokens without a shared grid (none of pebench's do yet)
    analyses: ClassVar[tuple[str, ...]] = ()

    def __init__(self, train_size: int = 6400, val_size: int = 600, test_size: int = 1200,
                 distractors: int | None = None, nuisance: str = "colour", data_seed: int | None = None,
                 resolution: int | str | None = None, **kwargs: Any) -> None:
        super().__init__(resolution=None, **kwargs)
        if resolution is not None:
            raise ConfigError(f"{self.name} has no image size (its scenes are sets of glyph tokens); "
                             f"--resolution {resolution} does not apply")
        self.gen = self.generator(0 if distractors is None else int(distractors), nuisance)
        self._init_splits(train_size, val_size, test_size, data_seed)
        self.resolution = (self.gen.canvas * PATCH,)

    def input_shape(self, resolution: Any = None) -> tuple[int, ...]:
        """The canvas an image of the training box would need (the set has no image; for listings)."""
        s = self.gen.canvas * PATCH
        return (self.in_chans, s, s)

    def train_dataset(self) -> Dataset:
        return SetProbeDataset(self.gen, "train", self.train_size, self.data_seed)

    def val_dataset(self, resolution: Any = None) -> Dataset:
        if resolution is not None:
            raise ValueError(f"{self.name}: a set of glyph tokens has no resolution to evaluate at")
        return SetProbeDataset(self.gen, "val", self.val_size, self.data_seed)

    def test_dataset(self, resolution: Any = None) -> Dataset:
        if resolution is not None:
            raise ValueError(f"{self.name}: a set of glyph tokens has no resolution to evaluate at")
        return SetProbeDataset(self.gen, "test", self.test_size, self.data_seed)

    def no_pe_ceiling(self, split: str = "test") -> float:
        """Best accuracy of any model that ignores the coordinates on ``split`` (computed, exact)."""
        ds = {"train": self.train_dataset, "val": self.val_dataset, "test": self.test_dataset}[split]()
        if split == "test" and self._ceiling is not None:
            return self._ceiling
        value = token_multiset_ceiling([ds.scene(i) for i in range(len(ds))])
        if split == "test":
            self._ceiling = value
        return value


def set_probe_analyses(analyses: Sequence[str], explicit: bool, dataset: str) -> list[str]:
    """The analyses of a set-probe run: none of pebench's analyses read a set of tokens without a grid,
    so they are dropped from the defaults; asked for by name they are a one-line :class:`ConfigError`."""
    if analyses and explicit:
        raise ConfigError(f"analysis {analyses[0]!r} does not apply to {dataset} (a set of glyph tokens, no image "
                         f"and no shared grid); use --analyses none")
    return []


def _register(name: str, gen: type[SetProbe]) -> type[SetProbeDataModule]:
    cls = type(f"{gen.__name__}DataModule", (SetProbeDataModule,), {
        "generator": gen, "default_resolution": gen.canvas * PATCH,
        "__doc__": f"``{name}``: {gen.summary} (no-PE ceiling {100 * gen.no_pe_bound:.1f} %).",
        "__module__": __name__})
    return register_datamodule(name)(cls)


for _name, _gen in SET_PROBES.items():
    globals()[f"{_gen.__name__}DataModule"] = _register(_name, _gen)
    __all__.append(f"{_gen.__name__}DataModule")

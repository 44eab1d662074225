"""``probe-parts``: the probe suite's point-cloud probe (relations between parts).

A scene holds a few *parts*, each a small point set of ``PART_POINTS`` (16) points on the surface
of a primitive (:func:`pebench.datamodules.synthetic.primitives.sample_surface`): part A is a
sphere, part B a cube, and ``distractors`` (default 2) parts are cylinders, cones, tori or helices.
The label is the direction of B's centre seen from A's centre, by the dominant axis (6 classes: +x,
-x, +y, -y, +z, -z), with the dominant component at least 0.15 (scene units) longer than the
others.

Nuisance cues, drawn per part independently of the label: an anisotropic scale (each axis in
``[0.8, 1.2]``), Gaussian jitter (sigma up to 5 % of the part's size), the size itself (largest
distance of a point from the part's mean, 0.06 to 0.10) and which 16 surface points are drawn;
the points of the cloud are in random order. Parts are not rotated (a random orientation would
make 16 points of a sphere even harder to tell from 16 of a cube). Train/val: every part's
centre has ``x`` in ``[-0.95, -0.11]``, so every point lies in the left half (``x < 0``) of the
``[-1, 1]^3`` scene box; test (out of distribution): ``x`` in ``[0.11, 0.95]``, every point in
the right half; ``y, z`` in ``[-0.95, 0.95]`` everywhere. A PE that only sees coordinate
differences gives the same answers on both halves; one that reads absolute coordinates meets
positions it never saw in training.

Tokens. The model's :class:`~pebench.models.PointTokenizer` groups the cloud by FPS + kNN and
feeds each group's points *relative to a centre* to a PointNet, so no token content carries an
absolute coordinate. With its default ``centre="fps"`` that centre is the point FPS picked, and
which point of a part FPS picks depends on where the *other* parts are, so the content would
still change with the placement. This datamodule therefore asks for ``centre="mean"``
(:meth:`PartsProbeDataModule.tokenizer_options`): each group relative to its own mean. The scene
is built so that the groups are exactly the parts: a part has exactly ``group_size`` points, its
radius is at most 0.101 and part centres are at least 0.45 apart (more than four radii), so FPS
picks one point of every part before a second one of any (the number of groups is the number of
parts) and each point's 16 nearest neighbours are its own part's points. It also asks for
``offset_scale=10``: the PointNet sees in-group offsets times 10 (radius <= 1 instead of 0.1),
as the scene tokenizer does with its decimetre offsets. Token coords are the group means times
the tokenizer's ``coord_scale`` (4): the scene box spans ``[-4, 4]`` in PE units.

No-PE ceiling (exact): every split is generated in orbits of ``K = 6`` samples that share the
parts' point sets relative to their centres (and every nuisance cue) and differ only in where the
parts are, with the 6 labels. Coordinates are multiples of ``2**-10`` with few significant bits,
so float32 arithmetic is exact and the tokenizer produces bit-identical group contents in every
member of an orbit: without a PE and with mean pooling the model is a function of the multiset of
these contents and cannot beat ``1/6`` (16.7 %). :meth:`PartsProbeDataModule.no_pe_ceiling`
recomputes it from the rendered split *through the tokenizer's own grouping*
(:func:`pebench.models.tokenizers.point_groups`): samples whose sorted group contents are
byte-identical form one group, which must get one answer.

Option ``floor=true`` adds a reference frame like the image probes' background: a 4 x 4 lattice
(spacing 0.5) of identical flat square tiles at ``z = -0.9`` spanning both halves, with the parts
at least 0.45 above it (20 tokens instead of 4); the ceiling argument is unchanged (the tiles are
part of every orbit's shared content and never move).

Resolution ``M`` (or ``"MxG"``) is the number of points: natively ``16 * parts``. Other counts
(a multiple of the number of parts) are evaluation-only and sample ``M / parts`` points from the
same surfaces at the same placements ("the same scene, denser"), which the extrapolation analysis
uses; those renderings are not exact orbits.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
from torch.utils.data import Dataset

from ..base import BenchDataModule, bool_option, int_option, parse_resolution
from ..points.grouping import point_groups
from ..registry import register_datamodule
from ..synthetic.primitives import sample_surface
from ..synthetic.render import SPLITS
from .probe_scenes import ProbeSplits

__all__ = ["PartsProbe", "PartsDataset", "PartsProbeDataModule", "direction_label_3d", "PART_POINTS", "DIRECTIONS"]

#: points per part at the native resolution = the point tokenizer's group size
PART_POINTS = 16
#: the tokenizer's factor on in-group offsets: parts have radius <= 0.1, so their PointNet sees radius <= 1
OFFSET_SCALE = 10.0
#: coordinates are multiples of this (exact float32 arithmetic in the tokenizer)
QUANTUM = 2.0 ** -10
#: label -> (axis, sign): +x, -x, +y, -y, +z, -z
DIRECTIONS = ((0, 1), (0, -1), (1, 1), (1, -1), (2, 1), (2, -1))
DIRECTION_NAMES = ("+x", "-x", "+y", "-y", "+z", "-z")


def direction_label_3d(a: np.ndarray, b: np.ndarray, margin: float = 0.0) -> int:
    """Direction of ``b`` seen from ``a`` by the dominant axis (index into :data:`DIRECTIONS`); -1
    when the dominant component is not longer than the others by more than ``margin``."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    mag = np.abs(d)
    axis = int(np.argmax(mag))
    if mag[axis] - np.max(np.delete(mag, axis)) <= margin:
        return -1
    return DIRECTIONS.index((axis, 1 if d[axis] > 0 else -1))


class PartsProbe:
    """Scene generator (a plain object: pickles into data-loader workers); see the module docstring."""

    num_classes: ClassVar[int] = len(DIRECTIONS)
    orbit: ClassVar[int] = len(DIRECTIONS)  # K: every direction once per orbit
    no_pe_bound: ClassVar[float] = 1 / len(DIRECTIONS)
    kinds_ab: ClassVar[tuple[str, str]] = ("sphere", "cube")
    distractor_kinds: ClassVar[tuple[str, ...]] = ("cylinder", "cone", "torus", "helix")
    size_range: ClassVar[tuple[float, float]] = (0.06, 0.10)
    separation: ClassVar[float] = 0.45   # > 4 * the largest part radius (0.10 + quantisation)
    margin: ClassVar[float] = 0.15       # dominant component minus the others, at least
    along: ClassVar[tuple[float, float]] = (0.5, 0.8)
    summary: ClassVar[str] = "direction (+-x, +-y, +-z) of a cube part from a sphere part; train: x < 0, test: x > 0"

    #: floor tiles: a 4 x 4 lattice of identical flat square patches at z = -0.9 (option ``floor``)
    floor_xy: ClassVar[tuple[float, ...]] = (-0.75, -0.25, 0.25, 0.75)
    floor_z: ClassVar[float] = -0.9

    def __init__(self, distractors: int = 2, floor: bool = False) -> None:
        if distractors < 0 or distractors > 6:
            raise ValueError(f"distractors must be between 0 and 6, got {distractors}")
        self.distractors = int(distractors)
        self.floor = bool(floor)

    @property
    def tiles(self) -> int:
        return len(self.floor_xy) ** 2 if self.floor else 0

    @property
    def parts(self) -> int:
        """Point sets (= tokens) per scene: A, B, the distractors and the floor tiles."""
        return 2 + self.distractors + self.tiles

    def floor_centres(self) -> np.ndarray:
        z = np.round(self.floor_z / QUANTUM) * QUANTUM
        return np.array([(x, y, z) for x in self.floor_xy for y in self.floor_xy]).reshape(-1, 3)

    @staticmethod
    def x_range(split: str) -> tuple[float, float]:
        return (0.11, 0.95) if split == "test" else (-0.95, -0.11)

    def region(self, split: str) -> np.ndarray:
        """``(3, 2)`` bounds of the part centres in ``split``."""
        z_lo = self.floor_z + self.separation if self.floor else -0.95  # parts at least 0.45 above the floor
        return np.array([self.x_range(split), (-0.95, 0.95), (z_lo, 0.95)])

    # ---- content (per orbit) -----------------------------------------------------------
    def content(self, seed: int, split: str, orbit: int) -> list[dict[str, Any]]:
        """The parts of an orbit: kind and nuisance cues (resolution-independent)."""
        rng = np.random.default_rng([seed, SPLITS[split], orbit])
        kinds = list(self.kinds_ab) + [self.distractor_kinds[int(rng.integers(len(self.distractor_kinds)))]
                                       for _ in range(self.distractors)] + ["tile"] * self.tiles
        return [{"kind": k, "scale": rng.uniform(0.8, 1.2, 3),
                 "jitter": float(rng.uniform(0.0, 0.05)), "size": float(rng.uniform(*self.size_range))}
                for k in kinds]

    @staticmethod
    def local_points(part: dict[str, Any], n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` points ``(n, 3)`` of a part relative to its mean, largest norm ``size``, on the
        ``QUANTUM`` lattice (float64 holding exact float32 values)."""
        if part["kind"] == "tile":  # a flat square patch
            p = np.concatenate([rng.uniform(-1, 1, (n, 2)), np.zeros((n, 1))], -1) * part["scale"]
        else:
            p = sample_surface(part["kind"], n, rng) * part["scale"]
        p = p + part["jitter"] * rng.standard_normal(p.shape)
        p = p - p.mean(0)
        p = p * (part["size"] / max(float(np.linalg.norm(p, axis=-1).max()), 1e-12))
        return np.round(p / QUANTUM) * QUANTUM

    # ---- placement (per sample) --------------------------------------------------------
    def place(self, pos: int, split: str, rng: np.random.Generator) -> np.ndarray | None:
        """Centres ``(parts, 3)`` on the ``QUANTUM`` lattice with B - A in direction ``pos`` (None: retry)."""
        axis, sign = DIRECTIONS[pos]
        along = rng.uniform(*self.along)
        d = rng.uniform(-(along - self.margin), along - self.margin, 3)
        d[axis] = sign * along
        d = np.round(d / QUANTUM)  # lattice units
        lo, hi = np.ceil(self.region(split)[:, 0] / QUANTUM), np.floor(self.region(split)[:, 1] / QUANTUM)
        a_lo, a_hi = np.maximum(lo, lo - d), np.minimum(hi, hi - d)
        if np.any(a_lo > a_hi):
            return None
        a = np.array([rng.integers(int(l), int(h) + 1) for l, h in zip(a_lo, a_hi)], dtype=np.float64)
        centres = [a, a + d]
        for _ in range(self.distractors):
            for _ in range(200):
                c = np.array([rng.integers(int(l), int(h) + 1) for l, h in zip(lo, hi)], dtype=np.float64)
                if min(np.linalg.norm(c - o) for o in centres) * QUANTUM >= self.separation:
                    centres.append(c)
                    break
            else:
                return None
        return np.stack(centres) * QUANTUM

    def scene(self, seed: int, split: str, index: int, points_per_part: int = PART_POINTS) -> dict[str, Any]:
        """Sample ``index`` of ``split``: ``{"label", "split", "parts": [{"kind", "centre" (3,),
        "points" (n, 3) relative}, ...]}`` with A, B first, then the distractors."""
        orbit, pos = divmod(int(index), self.orbit)
        parts = self.content(seed, split, orbit)
        prng = np.random.default_rng([seed, SPLITS[split], int(index), 1])
        for _ in range(1000):
            centres = self.place(pos, split, prng)
            if centres is not None:
                break
        else:  # pragma: no cover - the box has room for 8 parts 0.45 apart
            raise RuntimeError(f"probe-parts: no placement found for sample {index}")
        label = direction_label_3d(centres[0], centres[1], self.margin - 2 * QUANTUM)
        if label != pos:  # pragma: no cover - consistency of place / direction_label_3d
            raise AssertionError(f"probe-parts: placement of sample {index} does not give label {pos}")
        lrng = np.random.default_rng([seed, SPLITS[split], orbit, 2, int(points_per_part)])  # orbit: point sets
        if self.floor:
            centres = np.concatenate([centres, self.floor_centres()])
        out, tile = [], None
        for part, c in zip(parts, centres):
            if part["kind"] == "tile":  # every tile of a scene is the same point set
                tile = self.local_points(part, points_per_part, lrng) if tile is None else tile
                pts = tile
            else:
                pts = self.local_points(part, points_per_part, lrng)
            out.append({"kind": part["kind"], "centre": c, "points": pts})
        if points_per_part == PART_POINTS:  # the grouping is exact only if parts are farther apart than 4 radii
            radius = max(float(np.linalg.norm(p["points"], axis=-1).max()) for p in out)
            gap = min(float(np.linalg.norm(a - b)) for i, a in enumerate(centres) for b in centres[i + 1:])
            if gap <= 4 * radius:  # pragma: no cover - separation 0.45 > 4 * 0.101
                raise AssertionError(f"probe-parts: parts of sample {index} are too close for exact groups")
        return {"label": label, "split": split, "index": int(index), "parts": out}

    def render(self, scene: dict[str, Any], seed: int) -> np.ndarray:
        """Scene -> ``(M, 3)`` float32 cloud (exact: lattice values), points in a random order."""
        cloud = np.concatenate([p["points"] + p["centre"] for p in scene["parts"]])  # (M, 3)
        rng = np.random.default_rng([seed, SPLITS[scene["split"]], scene["index"], 3, len(cloud)])
        return np.ascontiguousarray(cloud[rng.permutation(len(cloud))], dtype=np.float32)


class PartsDataset(Dataset):
    """Index -> ``(cloud (M, 3) float32, label)``; ``points_per_part`` other than 16: denser parts."""

    def __init__(self, gen: PartsProbe, split: str, size: int, seed: int,
                 points_per_part: int = PART_POINTS) -> None:
        if size < 0:
            raise ValueError(f"dataset size must be >= 0, got {size}")
        self.gen, self.split, self.size, self.seed = gen, split, int(size), int(seed)
        self.points_per_part = int(points_per_part)
        self._cache: dict[int, tuple[torch.Tensor, int]] = {}

    def __len__(self) -> int:
        return self.size

    def scene(self, i: int) -> dict[str, Any]:
        i = int(i)
        if not 0 <= i < self.size:
            raise IndexError(f"index {i} out of range for a dataset of {self.size} samples")
        return self.gen.scene(self.seed, self.split, i, self.points_per_part)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        i = int(i)
        if i not in self._cache:
            s = self.scene(i)
            self._cache[i] = (torch.from_numpy(self.gen.render(s, self.seed)), int(s["label"]))
        return self._cache[i]


def group_multiset_ceiling(clouds: torch.Tensor, labels: list[int], num_groups: int, group_size: int) -> float:
    """Best accuracy of any function of the multiset of token contents on ``clouds (n, M, 3)``.

    The contents are what :class:`~pebench.models.PointTokenizer` with ``centre="mean"`` feeds its
    PointNet: :func:`~pebench.datamodules.points.grouping.point_groups`. The PointNet max-pools over a group,
    so a group is its *set* of rows (sorted here); samples whose sorted lists of groups are
    byte-identical form one group of samples, whose best common answer is its majority label."""
    if len(clouds) == 0:
        return float("nan")
    groups, _ = point_groups(clouds, num_groups, group_size, "mean")  # (n, G, k, 3)
    buckets: dict[bytes, dict[int, int]] = {}
    for g, y in zip(groups.numpy(), labels):
        rows = [np.ascontiguousarray(t[np.lexsort(t.T[::-1])]).tobytes() for t in g]  # each group sorted
        key = b"".join(sorted(rows))
        counts = buckets.setdefault(key, {})
        counts[int(y)] = counts.get(int(y), 0) + 1
    return sum(max(v.values()) for v in buckets.values()) / len(clouds)


@register_datamodule("probe-parts")
class PartsProbeDataModule(ProbeSplits, BenchDataModule):
    """``probe-parts``: direction (+-x, +-y, +-z) of a cube part from a sphere part among distractor
    parts; train x < 0 -> test x > 0 (no-PE ceiling 16.7 %). Options: ``train_size``, ``val_size``,
    ``test_size``, ``distractors``, ``floor``, ``data_seed`` (default: the run's seed)."""

    modality = "points"
    in_chans = 3  # coordinates
    needs_data_root = False
    patch_size = 1
    tubelet = 1
    has_test_split: ClassVar[bool] = True
    generator: ClassVar[type[PartsProbe]] = PartsProbe
    default_resolution = PART_POINTS * 4
    option_help: ClassVar[dict[str, str]] = {
        "distractors": "distractor parts (0-6) besides the sphere (A) and the cube (B)",
        "floor": "add a fixed 4 x 4 lattice of flat tiles under the parts (a reference frame; 20 tokens)"}

    def __init__(self, train_size: int = 6000, val_size: int = 600, test_size: int = 1200, distractors: int = 2,
                 floor: bool = False, data_seed: int | None = None, resolution: int | str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(resolution=None, **kwargs)
        self.gen = PartsProbe(int_option(self.name, "distractors", distractors, minimum=0),
                              bool_option(self.name, "floor", floor))
        native = PART_POINTS * self.gen.parts
        if resolution is not None and parse_resolution(resolution) not in ((native,), (native, self.gen.parts)):
            raise ValueError(f"probe-parts trains on {native} points ({self.gen.parts} parts of {PART_POINTS}); "
                             f"--resolution {resolution} is not allowed (other point counts are evaluation-only)")
        self._init_splits(train_size, val_size, test_size, data_seed)
        self.resolution = (native,)
        self.num_groups = self.gen.parts  # one token per part (instance value; the class default is 64)

    def tokenizer_options(self) -> dict[str, Any]:
        """Groups relative to their own mean, ``PART_POINTS`` points each (module docstring)."""
        return {"centre": "mean", "group_size": PART_POINTS, "offset_scale": OFFSET_SCALE}

    def _points_per_part(self, resolution: Any) -> int:
        if resolution is None:
            return PART_POINTS
        res = resolution if isinstance(resolution, tuple) else parse_resolution(resolution)
        m = int(res[0])
        if m % self.gen.parts or m < self.gen.parts:
            raise ValueError(f"probe-parts: {m} points cannot be split evenly over {self.gen.parts} parts")
        if len(res) == 2 and not 1 <= int(res[1]) <= m:
            raise ValueError(f"cannot form {res[1]} groups from {m} points")
        return m // self.gen.parts

    def input_shape(self, resolution: Any = None) -> tuple[int, ...]:
        return (self._points_per_part(resolution) * self.gen.parts, 3)

    def train_dataset(self) -> Dataset:
        return PartsDataset(self.gen, "train", self.train_size, self.data_seed)

    def val_dataset(self, resolution: Any = None) -> Dataset:
        return PartsDataset(self.gen, "val", self.val_size, self.data_seed, self._points_per_part(resolution))

    def test_dataset(self, resolution: Any = None) -> Dataset:
        return PartsDataset(self.gen, "test", self.test_size, self.data_seed, self._points_per_part(resolution))

    def no_pe_ceiling(self, split: str = "test") -> float:
        """Best accuracy of any model that sees only the multiset of token contents on ``split``
        (computed through the tokenizer's grouping, exact)."""
        if split == "test" and self._ceiling is not None:
            return self._ceiling
        ds = {"train": self.train_dataset, "val": self.val_dataset, "test": self.test_dataset}[split]()
        if len(ds) == 0:
            return float("nan")
        clouds = torch.stack([ds[i][0] for i in range(len(ds))])  # (n, M, 3)
        value = group_multiset_ceiling(clouds, [ds[i][1] for i in range(len(ds))], self.gen.parts, PART_POINTS)
        if split == "test":
            self._ceiling = value
        return value

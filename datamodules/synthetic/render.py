"""Shared machinery of the embedded synthetic datasets: a seeded on-the-fly dataset and
resolution-independent, anti-aliased 2-D shape rendering.

Every scene is described in normalised coordinates (``[0, 1]`` across the image, y down), so
the same sample index renders the same scene at any side length. A sample's *scene* (shape
kinds, positions, colours, label) comes from ``np.random.default_rng([seed, split, index])``;
resolution-dependent details (pixel noise, point samples) come from a second generator
seeded with ``[seed, split, index, 1, *resolution]``. Hence samples are identical across
processes, workers and epochs, and the scene is identical across resolutions.
"""
from __future__ import annotations

import abc
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from pebench.core.errors import ConfigError

from ..base import BenchDataModule, parse_resolution

__all__ = ["SPLITS", "SyntheticDataset", "SyntheticSplitsDataModule", "pixel_centres", "shape_alpha", "SHAPE_KINDS",
           "random_colour"]

#: split name -> integer mixed into the seed
SPLITS = {"train": 0, "val": 1, "test": 2}

SHAPE_KINDS = ("disc", "square", "triangle", "diamond")

_TRI_NORMALS = np.array([[np.cos(a), np.sin(a)] for a in np.deg2rad([90.0, 210.0, 330.0])])  # (3, 2), y down


class SyntheticDataset(Dataset):
    """Index -> ``(input tensor, label)`` generated on the fly.

    ``scene_fn(rng) -> dict`` draws the scene (must contain ``"label"``);
    ``render_fn(scene, resolution, rng) -> np.ndarray`` renders it at ``resolution``.
    """

    def __init__(self, scene_fn: Callable[[np.random.Generator], dict[str, Any]],
                 render_fn: Callable[[dict[str, Any], tuple[int, ...], np.random.Generator], np.ndarray],
                 size: int, seed: int, split: str, resolution: tuple[int, ...]) -> None:
        if size < 0:
            raise ConfigError(f"dataset size must be >= 0, got {size}")
        self.scene_fn, self.render_fn = scene_fn, render_fn
        self.size, self.seed, self.split = int(size), int(seed), split
        self.split_id = SPLITS[split]
        self.resolution = tuple(int(r) for r in resolution)

    def __len__(self) -> int:
        return self.size

    def _index(self, i: int) -> int:
        i = int(i)
        if i < 0:
            i += self.size
        if not 0 <= i < self.size:
            raise IndexError(f"index {i} out of range for a dataset of {self.size} samples")
        return i

    def scene(self, i: int) -> dict[str, Any]:
        """The resolution-independent description of sample ``i`` (includes ``"label"``)."""
        return self.scene_fn(np.random.default_rng([self.seed, self.split_id, self._index(i)]))

    def render_rng(self, i: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.split_id, self._index(i), 1, *self.resolution])

    def render(self, i: int) -> np.ndarray:
        return self.render_fn(self.scene(i), self.resolution, self.render_rng(i))

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        scene = self.scene(i)
        x = self.render_fn(scene, self.resolution, self.render_rng(i))
        return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)), int(scene["label"])


def pixel_centres(side: int) -> np.ndarray:
    """Normalised pixel-centre coordinates ``(side,)`` in ``(0, 1)``."""
    return (np.arange(side, dtype=np.float32) + 0.5) / side


def shape_alpha(kind: str, cy: np.ndarray | float, cx: np.ndarray | float, r: np.ndarray | float,
                side: int) -> np.ndarray:
    """Anti-aliased coverage ``(..., side, side)`` in ``[0, 1]`` of a shape of half-size ``r``.

    ``cy, cx, r`` are scalars or arrays of one shape ``L`` (e.g. one entry per video frame);
    the result has shape ``L + (side, side)``. Uses a signed-distance approximation with a
    one-pixel soft edge, so coverage is consistent across resolutions.
    """
    c = pixel_centres(side)
    cy, cx, r = (np.asarray(v, dtype=np.float32)[..., None, None] for v in (cy, cx, r))
    dy = c[:, None] - cy  # (..., side, 1)
    dx = c[None, :] - cx  # (..., 1, side)
    if kind == "disc":
        d = np.sqrt(dy * dy + dx * dx) - r
    elif kind == "square":
        d = np.maximum(np.abs(dy), np.abs(dx)) - 0.85 * r  # same area as a disc of radius ~0.96 r
    elif kind == "diamond":
        d = (np.abs(dy) + np.abs(dx) - 1.2 * r) * np.float32(1 / np.sqrt(2))
    elif kind == "triangle":  # equilateral, pointing up, circumradius 1.3 r
        n = _TRI_NORMALS.astype(np.float32)
        d = np.maximum(np.maximum(n[0, 0] * dx + n[0, 1] * dy, n[1, 0] * dx + n[1, 1] * dy),
                       n[2, 0] * dx + n[2, 1] * dy) - 0.65 * r
    else:
        raise ConfigError(f"unknown shape kind {kind!r}; available: {', '.join(SHAPE_KINDS)}")
    return np.clip(0.5 - d * side, 0.0, 1.0)


def random_colour(rng: np.random.Generator, n: int | None = None) -> np.ndarray:
    """Saturated, bright RGB colour(s) in ``[0, 1]``: ``(3,)`` or ``(n, 3)``."""
    size = (3,) if n is None else (n, 3)
    col = rng.uniform(0.0, 1.0, size=size)
    col = col / np.maximum(col.max(axis=-1, keepdims=True), 1e-6)  # brightest channel = 1
    return (0.55 + 0.45 * col).astype(np.float32)


def check_size(what: str, sizes: Sequence[int]) -> None:
    for s in sizes:
        if s <= 0:
            raise ConfigError(f"{what} must be positive, got {tuple(sizes)}")


class SyntheticSplitsDataModule(BenchDataModule):
    """Train / val / test splits of an on-the-fly synthetic set: subclasses set ``train_size`` and
    ``val_size`` and implement ``_dataset(split, size, resolution)`` (train at the training
    resolution; val and test at any resolution, for extrapolation)."""

    train_size: int
    val_size: int

    @abc.abstractmethod
    def _dataset(self, split: str, size: int, resolution: Any) -> Dataset:
        """Split ``split`` with ``size`` samples rendered at ``resolution`` (None: training one)."""

    def train_dataset(self) -> Dataset:
        return self._dataset("train", self.train_size, None)

    def val_dataset(self, resolution: Any = None) -> Dataset:
        return self._dataset("val", self.val_size, resolution)

    def test_dataset(self, resolution: Any = None) -> Dataset:
        return self._dataset("test", self.val_size, resolution)


class SquareImageSplitsDataModule(SyntheticSplitsDataModule):
    """A synthetic image set rendered as square ``(C, S, S)`` images (``C = in_chans``) at any side
    ``S`` (training side from ``resolution``; validation/test at any side, for extrapolation)."""

    def _side(self, resolution: tuple[int, ...]) -> int:
        if len(resolution) == 2 and resolution[0] != resolution[1]:
            raise ConfigError(f"{self.name} renders square images; got resolution {'x'.join(map(str, resolution))}")
        check_size("image side", resolution)
        return resolution[0]

    def _res(self, resolution: Any) -> tuple[int, ...]:
        res = self.resolution if resolution is None else (
            resolution if isinstance(resolution, tuple) else parse_resolution(resolution))
        return (self._side(res),)

    def input_shape(self, resolution: Any = None) -> tuple[int, ...]:
        s = self._res(resolution)[0]
        return (self.in_chans, s, s)

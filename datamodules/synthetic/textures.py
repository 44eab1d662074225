"""``textures``: embedded *texture-centric* image set for the DINO / EED study (no download).

The texture-centric side of the contrast in "The inductive bottleneck in vision transformers"
(UC Merced there), in miniature: every image is one stationary procedural texture filling the
frame, so any crop shows the class. 8 classes, each a family with random scale, phase,
orientation jitter and a random two-colour palette (the label is not a colour):

0. ``gabor-h``   -- horizontal Gabor-like stripes under a smooth random envelope
1. ``gabor-v``   -- vertical stripes (same family, rotated 90 degrees)
2. ``checker``   -- checkerboard (axis-aligned)
3. ``dots``      -- a regular lattice of round dots
4. ``cells``     -- cellular (Worley) noise: distance to the nearest of random feature points
5. ``cracks``    -- cellular borders: second-nearest minus nearest distance (thin dark lines)
6. ``blobs``     -- smooth value noise (bilinear interpolation of a coarse random lattice)
7. ``grain``     -- fine value noise (a lattice 3-4x finer)

Deterministic: parameters of sample ``i`` from ``default_rng([seed, split, i])``; textures are
defined in normalised coordinates so a sample is the same picture at any side length.
Inputs ``(3, S, S)`` float32, ImageNet-normalised; default 32 px, patch 4.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ..image_common import IMAGENET_MEAN, IMAGENET_STD
from ..registry import register_datamodule
from .render import SquareImageSplitsDataModule, SyntheticDataset, pixel_centres, random_colour

__all__ = ["TexturesDataModule", "textures_scene", "render_textures", "TEXTURE_CLASSES"]

TEXTURE_CLASSES = ("gabor-h", "gabor-v", "checker", "dots", "cells", "cracks", "blobs", "grain")
_MEAN = np.array(IMAGENET_MEAN, dtype=np.float32)[:, None, None]
_STD = np.array(IMAGENET_STD, dtype=np.float32)[:, None, None]


def textures_scene(rng: np.random.Generator) -> dict[str, Any]:
    label = int(rng.integers(len(TEXTURE_CLASSES)))
    lattice = int(rng.integers(4, 7))
    return {"label": label, "freq": float(rng.uniform(3.0, 6.0)), "phase": rng.uniform(0, 1, size=2),
            "angle": float(rng.uniform(-0.15, 0.15)), "points": rng.uniform(0, 1, size=(int(rng.integers(8, 16)), 2)),
            "lattice": rng.uniform(0, 1, size=(lattice * (4 if label == 7 else 1) + 1,) * 2),
            "envelope": rng.uniform(0, 1, size=(4, 4)),
            "colours": np.stack([random_colour(rng) * rng.uniform(0.1, 0.5), random_colour(rng)]).astype(np.float32)}


def _bilinear(grid: np.ndarray, side: int) -> np.ndarray:
    """Bilinear upsampling of a ``(n, n)`` lattice spanning the image to ``(side, side)``."""
    n = grid.shape[0] - 1
    c = pixel_centres(side) * n
    i = np.minimum(np.floor(c).astype(int), n - 1)
    f = c - i
    g00, g01 = grid[i][:, i], grid[i][:, i + 1]
    g10, g11 = grid[i + 1][:, i], grid[i + 1][:, i + 1]
    fy, fx = f[:, None], f[None, :]
    return (g00 * (1 - fy) * (1 - fx) + g01 * (1 - fy) * fx + g10 * fy * (1 - fx) + g11 * fy * fx).astype(np.float32)


def _worley(points: np.ndarray, side: int) -> tuple[np.ndarray, np.ndarray]:
    """Nearest and second-nearest distance to the feature points, wrapped (tileable)."""
    c = pixel_centres(side)
    yy, xx = np.meshgrid(c, c, indexing="ij")
    d = []
    for py, px in points:
        dy = np.abs(yy - py)
        dx = np.abs(xx - px)
        dy, dx = np.minimum(dy, 1 - dy), np.minimum(dx, 1 - dx)
        d.append(np.sqrt(dy * dy + dx * dx))
    d = np.sort(np.stack(d), axis=0)  # (P, S, S)
    return d[0], d[1]


def texture_map(scene: dict[str, Any], side: int) -> np.ndarray:
    """Scene -> intensity ``(S, S)`` in ``[0, 1]``."""
    name = TEXTURE_CLASSES[scene["label"]]
    c = pixel_centres(side)
    yy, xx = np.meshgrid(c, c, indexing="ij")
    f, (py, px), a = scene["freq"], scene["phase"], scene["angle"]
    u = np.cos(a) * yy + np.sin(a) * xx  # ~ vertical coordinate, slightly rotated
    v = -np.sin(a) * yy + np.cos(a) * xx
    if name in ("gabor-h", "gabor-v"):
        w = u if name == "gabor-h" else v
        env = 0.6 + 0.4 * _bilinear(scene["envelope"], side)
        t = 0.5 + 0.5 * env * np.sin(2 * np.pi * (f * w + py))
    elif name == "checker":
        t = (np.sin(2 * np.pi * (0.5 * f * u + py)) * np.sin(2 * np.pi * (0.5 * f * v + px)) > 0).astype(np.float32)
    elif name == "dots":
        fy, fx = (f * u + py) % 1.0 - 0.5, (f * v + px) % 1.0 - 0.5
        t = np.clip(0.5 + (0.3 - np.sqrt(fy * fy + fx * fx)) * side / f, 0, 1)  # 1-pixel soft edge
    elif name == "cells":
        d1, _ = _worley(scene["points"], side)
        t = np.clip(d1 / 0.25, 0, 1)
    elif name == "cracks":
        d1, d2 = _worley(scene["points"], side)
        t = np.clip((d2 - d1) / 0.06, 0, 1)
    else:  # blobs, grain
        t = _bilinear(scene["lattice"], side)
    return np.asarray(t, dtype=np.float32)


def render_textures(scene: dict[str, Any], resolution: tuple[int, ...], rng: np.random.Generator,
                    noise: float = 0.03) -> np.ndarray:
    """Scene -> ``(3, S, S)`` float32, ImageNet-normalised."""
    side = resolution[0]
    t = texture_map(scene, side)[None]  # (1, S, S)
    lo, hi = scene["colours"]
    img = lo[:, None, None] + (hi - lo)[:, None, None] * t  # (3, S, S)
    if noise > 0:
        img = img + noise * rng.standard_normal(img.shape, dtype=np.float32)
    return ((np.clip(img, 0.0, 1.0) - _MEAN) / _STD).astype(np.float32)


@register_datamodule("textures")
class TexturesDataModule(SquareImageSplitsDataModule):
    """Procedural textures, 8 classes; see the module docstring."""

    modality = "image"
    needs_data_root = False
    default_resolution = 32
    patch_size = 4
    tubelet = 1
    num_groups = 64
    in_chans = 3
    mean, std = IMAGENET_MEAN, IMAGENET_STD

    def __init__(self, train_size: int = 2048, val_size: int = 512, noise: float = 0.03, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.train_size, self.val_size, self.noise = int(train_size), int(val_size), float(noise)
        self._side(self.resolution)

    @property
    def num_classes(self) -> int:
        return len(TEXTURE_CLASSES)

    def _dataset(self, split: str, size: int, resolution: Any) -> SyntheticDataset:
        return SyntheticDataset(textures_scene, partial(render_textures, noise=self.noise), size, self.seed, split,
                                self._res(resolution))

"""``objects``: embedded *object-centric* image set for the DINO / EED study (no download).

The object-centric side of the contrast in "The inductive bottleneck in vision transformers"
(EED study: CIFAR-100 / Tiny ImageNet vs texture-centric UC Merced), in miniature. Each image
shows one large object (half-size 0.18-0.30 of the image) at a random position, on *clutter*:
a smooth random colour gradient, 6-12 small random shapes (half-size 0.02-0.06) and pixel noise.
The label is the object: 5 outlines (disc, square, triangle, diamond, ring) x 2 fills (solid,
striped with a random stripe angle) = 10 classes. Its colour is random (the label is not a
colour), so a learner must read the object's shape and fill.

Deterministic: the scene of sample ``i`` is drawn from ``default_rng([seed, split, i])`` and
rendered in normalised coordinates (any side length shows the same scene; see ``render.py``).
Inputs are ``(3, S, S)`` float32 normalised with the ImageNet mean/std (like the real image
sets), default 32 px with patch 4.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, Sequence

import numpy as np

from pebench.core.errors import ConfigError

from ..image_common import IMAGENET_MEAN, IMAGENET_STD
from ..registry import register_datamodule
from .render import SquareImageSplitsDataModule, SyntheticDataset, pixel_centres, random_colour, shape_alpha

__all__ = ["ObjectsDataModule", "objects_scene", "render_objects", "OBJECT_KINDS", "NUM_OBJECT_CLASSES"]

OBJECT_KINDS = ("disc", "square", "triangle", "diamond", "ring")
NUM_OBJECT_CLASSES = 2 * len(OBJECT_KINDS)
_MEAN = np.array(IMAGENET_MEAN, dtype=np.float32)[:, None, None]
_STD = np.array(IMAGENET_STD, dtype=np.float32)[:, None, None]


def objects_scene(rng: np.random.Generator, object_size: tuple[float, float] = (0.18, 0.30),
                  clutter: tuple[int, int] = (6, 12), background: tuple[float, float] = (0.0, 0.6)) -> dict[str, Any]:
    """One scene: object half-size uniform in ``object_size``, ``clutter`` small shapes (inclusive
    range), the gradient's two end colours uniform in ``background``; the defaults are the set's
    (the draws are the same for any values)."""
    label = int(rng.integers(NUM_OBJECT_CLASSES))
    kind, striped = OBJECT_KINDS[label // 2], bool(label % 2)
    r = float(rng.uniform(*object_size))
    centre = rng.uniform(r * 0.8, 1.0 - r * 0.8, size=2).astype(np.float32)  # (y, x), mostly inside
    n_clutter = int(rng.integers(clutter[0], clutter[1] + 1))
    return {"label": label, "kind": kind, "striped": striped, "r": r, "centre": centre,
            "colour": random_colour(rng), "stripe_angle": float(rng.uniform(0, np.pi)),
            "stripe_period": float(rng.uniform(0.06, 0.1)),
            "bg": rng.uniform(*background, size=(2, 3)).astype(np.float32), "bg_angle": float(rng.uniform(0, 2 * np.pi)),
            "clutter_kinds": [str(k) for k in rng.choice(["disc", "square", "triangle", "diamond"], size=n_clutter)],
            "clutter_centres": rng.uniform(0.0, 1.0, size=(n_clutter, 2)).astype(np.float32),
            "clutter_r": rng.uniform(0.02, 0.06, size=n_clutter).astype(np.float32),
            "clutter_colours": random_colour(rng, n_clutter) * rng.uniform(0.3, 1.0, size=(n_clutter, 1)).astype(np.float32)}


def _object_alpha(scene: dict[str, Any], side: int) -> np.ndarray:
    cy, cx = scene["centre"]
    r = scene["r"]
    if scene["kind"] == "ring":
        a = shape_alpha("disc", cy, cx, r, side) * (1.0 - shape_alpha("disc", cy, cx, 0.55 * r, side))
    else:
        a = shape_alpha(scene["kind"], cy, cx, r, side)
    if scene["striped"]:
        c = pixel_centres(side)
        u = np.cos(scene["stripe_angle"]) * c[None, :] + np.sin(scene["stripe_angle"]) * c[:, None]  # (S, S)
        stripes = np.clip(0.5 + 2.0 * np.sin(2 * np.pi * u / scene["stripe_period"]), 0.0, 1.0)
        a = a * (0.25 + 0.75 * stripes)
    return a.astype(np.float32)  # (S, S)


def render_objects(scene: dict[str, Any], resolution: tuple[int, ...], rng: np.random.Generator,
                   noise: float = 0.04) -> np.ndarray:
    """Scene -> ``(3, S, S)`` float32, ImageNet-normalised."""
    side = resolution[0]
    c = pixel_centres(side)
    ca, sa = np.cos(scene["bg_angle"]), np.sin(scene["bg_angle"])
    ramp = np.clip(0.5 + (c[None, :] - 0.5) * ca + (c[:, None] - 0.5) * sa, 0, 1)  # (S, S)
    bg0, bg1 = scene["bg"]
    img = bg0[:, None, None] + (bg1 - bg0)[:, None, None] * ramp[None]  # (3, S, S)
    for kind, (cy, cx), r, col in zip(scene["clutter_kinds"], scene["clutter_centres"], scene["clutter_r"],
                                      scene["clutter_colours"]):
        alpha = shape_alpha(kind, cy, cx, r, side)[None]  # (1, S, S)
        img = img * (1 - alpha) + col[:, None, None] * alpha
    alpha = _object_alpha(scene, side)[None]
    img = img * (1 - alpha) + scene["colour"][:, None, None] * alpha
    if noise > 0:
        img = img + noise * rng.standard_normal(img.shape, dtype=np.float32)
    return ((np.clip(img, 0.0, 1.0) - _MEAN) / _STD).astype(np.float32)


@register_datamodule("objects")
class ObjectsDataModule(SquareImageSplitsDataModule):
    """One large object (10 classes: outline x fill) on clutter; see the module docstring."""

    modality = "image"
    needs_data_root = False
    default_resolution = 32
    option_help = {"object_size": "[lo, hi]: the object's half-size, a fraction of the image side",
                   "clutter": "[lo, hi]: how many small clutter shapes surround the object",
                   "background": "[lo, hi]: range of the background gradient's RGB end colours"}
    patch_size = 4
    tubelet = 1
    num_groups = 64
    in_chans = 3
    mean, std = IMAGENET_MEAN, IMAGENET_STD

    def __init__(self, train_size: int = 2048, val_size: int = 512, noise: float = 0.04,
                 object_size: Sequence[float] = (0.18, 0.30), clutter: Sequence[int] = (6, 12),
                 background: Sequence[float] = (0.0, 0.6), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.train_size, self.val_size, self.noise = int(train_size), int(val_size), float(noise)
        self.object_size = _range("object_size", object_size, float, lambda lo, hi: 0.0 < lo <= hi <= 0.5,
                                  "0 < lo <= hi <= 0.5 (half-size, fraction of the image side)")
        self.clutter = _range("clutter", clutter, int, lambda lo, hi: 0 <= lo <= hi,
                              "0 <= lo <= hi (number of small shapes)")
        self.background = _range("background", background, float, lambda lo, hi: 0.0 <= lo <= hi <= 1.0,
                                 "0 <= lo <= hi <= 1 (intensity)")
        self._side(self.resolution)

    @property
    def num_classes(self) -> int:
        return NUM_OBJECT_CLASSES

    def _dataset(self, split: str, size: int, resolution: Any) -> SyntheticDataset:
        return SyntheticDataset(partial(objects_scene, object_size=self.object_size, clutter=self.clutter,
                                        background=self.background),
                                partial(render_objects, noise=self.noise), size, self.seed, split, self._res(resolution))


def _range(name: str, value: Any, kind: type, valid: Callable[[Any, Any], bool], rule: str) -> tuple[Any, Any]:
    """``value`` as ``(lo, hi)`` of ``kind``; ``ValueError`` naming ``rule`` unless ``valid(lo, hi)``."""
    try:
        lo, hi = (kind(v) for v in value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a pair [lo, hi], got {value!r}") from None
    if not valid(lo, hi):
        raise ConfigError(f"{name} must be [lo, hi] with {rule}, got {list(value)}")
    return lo, hi

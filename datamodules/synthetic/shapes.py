"""``shapes``: embedded synthetic image classification where the label is spatial layout.

Each image shows a warm-coloured disc (A), a cool-coloured square (B) and ``distractors``
(default 0) triangles/diamonds, with random colours and sizes, on a smooth random colour
gradient plus pixel noise. Default ``task="mixed"``: label = ``2 * quadrant(A) + (A left of B)``
with A's image quadrant ``2 * (y > 1/2) + (x > 1/2)`` (absolute position) and A left of B by at
least 0.15 (relative position), 8 classes. ``task="octant"``: the direction of A seen from B in 8
octants (0 = east, counter-clockwise; ``margin_deg`` from the boundaries) -- purely relative
and harder. The mixed default is meant to be learnable sooner (half of it needs only absolute
position) while relative PEs can still get its relative half. Neither task's learnability within
the default run's CPU budget has been confirmed yet (see the PR note). A bag of patches (a ViT without PE) sees both shapes but not where they are, so it sits
near chance (1/8) on either task.

Scenes are drawn in normalised coordinates, so any side length renders the same scene
(``resolution`` ``S`` or ``"HxW"`` with H = W). Inputs are ``(3, S, S)`` float32, roughly zero
mean and unit variance: standardised with the datamodule's declared ``mean`` / ``std``. A subclass
that declares ``in_chans = 1`` (and its own ``mean`` / ``std``) renders the same scenes in
grayscale (ITU-R BT.601 luma), ``(1, S, S)``.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from pebench.core.errors import ConfigError

from ..base import float_option, int_option
from ..registry import register_datamodule
from .render import SquareImageSplitsDataModule, SyntheticDataset, random_colour, shape_alpha

__all__ = ["ShapesDataModule", "shapes_scene", "render_shapes"]

NUM_CLASSES = 8
PIXEL_MEAN, PIXEL_STD = 0.15, 0.14  # pixel statistics of the default (colour) scenes, for standardising
LUMA = (0.299, 0.587, 0.114)  # RGB -> gray weights (ITU-R BT.601)


def _place_octant(rng: np.random.Generator, label: int, margin_deg: float) -> tuple[np.ndarray, np.ndarray]:
    while True:  # A seen from B in octant `label`
        theta = np.deg2rad(label * 45.0 + rng.uniform(-22.5 + margin_deg, 22.5 - margin_deg))
        b = rng.uniform(0.15, 0.85, size=2)  # (y, x)
        a = b + rng.uniform(0.32, 0.6) * np.array([-np.sin(theta), np.cos(theta)])
        if np.all((a > 0.15) & (a < 0.85)):
            return a, b


def _place_mixed(rng: np.random.Generator, label: int, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    quadrant, a_left = divmod(label, 2)
    while True:  # A in its image quadrant; B right of A if a_left else left, >= 0.15 across, not touching
        a = np.array([rng.uniform(0.15, 0.44), rng.uniform(0.15, 0.44)]) + 0.41 * np.array(divmod(quadrant, 2))
        b = rng.uniform(0.15, 0.85, size=2)
        dx = b[1] - a[1]
        if (dx >= 0.15 if a_left else dx <= -0.15) and np.hypot(*(a - b)) > r[0] + r[1] + 0.06:
            return a, b


def shapes_scene(rng: np.random.Generator, distractors: int = 0, task: str = "mixed",
                 margin_deg: float = 8.0) -> dict[str, Any]:
    label = int(rng.integers(NUM_CLASSES))
    r = rng.uniform(0.09, 0.14, size=2 + distractors)
    if task == "octant":
        a, b = _place_octant(rng, label, margin_deg)
    elif task == "mixed":
        a, b = _place_mixed(rng, label, r)
    else:
        raise ConfigError(f"unknown shapes task {task!r}; available: mixed, octant")
    centres = [a, b]
    for k in range(distractors):  # non-overlapping distractors
        for _ in range(100):
            c = rng.uniform(0.12, 0.88, size=2)
            if all(np.hypot(*(c - o)) > r[2 + k] + r[j] + 0.04 for j, o in enumerate(centres)):
                break
        centres.append(c)
    kinds = ["disc", "square"] + [str(rng.choice(["triangle", "diamond"])) for _ in range(distractors)]
    bg = rng.uniform(0.0, 0.25, size=(2, 3)).astype(np.float32)  # gradient end colours
    bg_angle = rng.uniform(0, 2 * np.pi)
    # A warm (red dominant), B cool (blue dominant), distractors any colour: identity is cheap to read
    warm = np.array([1.0, rng.uniform(0.0, 0.6), rng.uniform(0.0, 0.3)]) * rng.uniform(0.75, 1.0)
    cool = np.array([rng.uniform(0.0, 0.3), rng.uniform(0.0, 0.6), 1.0]) * rng.uniform(0.75, 1.0)
    colours = np.concatenate([np.stack([warm, cool]), random_colour(rng, distractors).reshape(-1, 3)])
    return {"label": label, "kinds": kinds, "centres": np.stack(centres).astype(np.float32),
            "radii": r.astype(np.float32), "colours": colours.astype(np.float32),
            "bg": bg, "bg_angle": float(bg_angle)}


def render_shapes(scene: dict[str, Any], resolution: tuple[int, ...], rng: np.random.Generator,
                  noise: float = 0.05, mean: float = PIXEL_MEAN, std: float = PIXEL_STD,
                  chans: int = 3) -> np.ndarray:
    """Scene -> ``(chans, S, S)`` float32 image standardised as ``(x - mean) / std``; ``chans`` 3
    (RGB) or 1 (gray)."""
    side = resolution[0]
    c = (np.arange(side, dtype=np.float32) + 0.5) / side
    ca, sa = np.cos(scene["bg_angle"]), np.sin(scene["bg_angle"])
    ramp = np.clip(0.5 + (c[None, :] - 0.5) * ca + (c[:, None] - 0.5) * sa, 0, 1)  # (S, S)
    bg0, bg1 = scene["bg"]
    img = bg0[:, None, None] + (bg1 - bg0)[:, None, None] * ramp[None]  # (3, S, S)
    for kind, (cy, cx), r, col in zip(scene["kinds"], scene["centres"], scene["radii"], scene["colours"]):
        alpha = shape_alpha(kind, cy, cx, r, side)[None]  # (1, S, S)
        img = img * (1 - alpha) + col[:, None, None] * alpha
    if chans == 1:
        img = np.tensordot(np.asarray(LUMA, dtype=img.dtype), img, axes=1)[None]  # (1, S, S)
    if noise > 0:
        img = img + noise * rng.standard_normal(img.shape, dtype=np.float32)
    return ((img - mean) / std).astype(np.float32)


@register_datamodule("shapes")
class ShapesDataModule(SquareImageSplitsDataModule):
    """Disc-vs-square relative direction (8 classes); see the module docstring."""

    modality = "image"
    needs_data_root = False
    default_resolution = 32
    patch_size = 4
    tubelet = 1
    num_groups = 64
    in_chans = 3
    mean, std = PIXEL_MEAN, PIXEL_STD

    def __init__(self, train_size: int = 4096, val_size: int = 512, distractors: int = 0,
                 noise: float = 0.05, task: str = "mixed", **kwargs: Any) -> None:
        if task not in ("mixed", "octant"):
            raise ConfigError(f"unknown shapes task {task!r}; available: mixed, octant")
        super().__init__(**kwargs)
        if self.in_chans not in (1, 3):
            raise ConfigError(f"{self.name} renders RGB (in_chans 3) or gray (1) images, not {self.in_chans} channels")
        mean, std = self.normalisation()  # per channel
        if len(set(mean)) != 1 or len(set(std)) != 1:
            raise ConfigError(f"{self.name}: mean and std must be one value shared by every channel")
        self.pixel_mean, self.pixel_std = mean[0], std[0]
        self.task = task
        self.train_size = int_option(self.name, "train_size", train_size)
        self.val_size = int_option(self.name, "val_size", val_size)
        self.distractors = int_option(self.name, "distractors", distractors, minimum=0)
        self.noise = float_option(self.name, "noise", noise)
        self._side(self.resolution)  # validate

    @property
    def num_classes(self) -> int:
        return NUM_CLASSES

    def _dataset(self, split: str, size: int, resolution: Any) -> SyntheticDataset:
        # partials of module-level functions (not lambdas) so datasets pickle into spawned workers
        return SyntheticDataset(partial(shapes_scene, distractors=self.distractors, task=self.task),
                                partial(render_shapes, noise=self.noise, mean=self.pixel_mean,
                                        std=self.pixel_std, chans=self.in_chans),
                                size, self.seed, split, self._res(resolution))


"""``shapes``: embedded synthetic image classification where the label is spatial layout.

Each image shows a disc (A), a square (B) and ``distractors`` (default 0, to keep the default
run learnable within its CPU budget) triangles/diamonds, with random colours and sizes, on a smooth random colour gradient plus pixel noise. The label is the
direction of A as seen from B, quantised into 8 octants (0 = east, counter-clockwise in
45-degree steps; y points up for the angle). Scenes keep a margin of ``margin_deg`` from the
octant boundaries and never overlap. A bag of patches (a ViT without PE) sees both shapes but
not where they are, so it sits near chance (1/8); a PE lets the model compare the positions.

Scenes are drawn in normalised coordinates, so any side length renders the same scene
(``resolution`` ``S`` or ``"HxW"`` with H = W). Inputs are ``(3, S, S)`` float32, roughly zero
mean and unit variance.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ._render import SyntheticDataset, check_size, random_colour, shape_alpha
from .base import BenchDataModule, parse_resolution
from .registry import register_datamodule

__all__ = ["ShapesDataModule", "shapes_scene", "render_shapes"]

NUM_CLASSES = 8
_MEAN, _STD = 0.20, 0.22  # pixel statistics of the default scenes (for normalisation)


def shapes_scene(rng: np.random.Generator, distractors: int = 0, margin_deg: float = 8.0) -> dict[str, Any]:
    label = int(rng.integers(NUM_CLASSES))
    r = rng.uniform(0.08, 0.13, size=2 + distractors)
    while True:  # place A and B with the requested direction
        theta = np.deg2rad(label * 45.0 + rng.uniform(-22.5 + margin_deg, 22.5 - margin_deg))
        dist = rng.uniform(0.32, 0.6)
        b = rng.uniform(0.15, 0.85, size=2)  # (y, x)
        a = b + dist * np.array([-np.sin(theta), np.cos(theta)])
        if np.all((a > 0.15) & (a < 0.85)):
            break
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
    return {"label": label, "kinds": kinds, "centres": np.stack(centres).astype(np.float32),
            "radii": r.astype(np.float32), "colours": random_colour(rng, len(kinds)),
            "bg": bg, "bg_angle": float(bg_angle)}


def render_shapes(scene: dict[str, Any], resolution: tuple[int, ...], rng: np.random.Generator,
                  noise: float = 0.05) -> np.ndarray:
    """Scene -> ``(3, S, S)`` float32 image (normalised)."""
    side = resolution[0]
    c = (np.arange(side, dtype=np.float32) + 0.5) / side
    ca, sa = np.cos(scene["bg_angle"]), np.sin(scene["bg_angle"])
    ramp = np.clip(0.5 + (c[None, :] - 0.5) * ca + (c[:, None] - 0.5) * sa, 0, 1)  # (S, S)
    bg0, bg1 = scene["bg"]
    img = bg0[:, None, None] + (bg1 - bg0)[:, None, None] * ramp[None]  # (3, S, S)
    for kind, (cy, cx), r, col in zip(scene["kinds"], scene["centres"], scene["radii"], scene["colours"]):
        alpha = shape_alpha(kind, cy, cx, r, side)[None]  # (1, S, S)
        img = img * (1 - alpha) + col[:, None, None] * alpha
    if noise > 0:
        img = img + noise * rng.standard_normal(img.shape, dtype=np.float32)
    return ((img - _MEAN) / _STD).astype(np.float32)


@register_datamodule("shapes")
class ShapesDataModule(BenchDataModule):
    """Disc-vs-square relative direction (8 classes); see the module docstring."""

    modality = "image"
    needs_data_root = False
    default_resolution = 32
    patch_size = 4
    tubelet = 1
    num_groups = 64

    def __init__(self, train_size: int = 4096, val_size: int = 512, distractors: int = 0,
                 noise: float = 0.05, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.train_size, self.val_size = int(train_size), int(val_size)
        self.distractors, self.noise = int(distractors), float(noise)
        self._side(self.resolution)  # validate

    @property
    def num_classes(self) -> int:
        return NUM_CLASSES

    @staticmethod
    def _side(resolution: tuple[int, ...]) -> int:
        if len(resolution) == 2 and resolution[0] != resolution[1]:
            raise ValueError(f"shapes renders square images; got resolution {'x'.join(map(str, resolution))}")
        check_size("image side", resolution)
        return resolution[0]

    def _res(self, resolution: Any) -> tuple[int, ...]:
        res = self.resolution if resolution is None else (
            resolution if isinstance(resolution, tuple) else parse_resolution(resolution))
        return (self._side(res),)

    def input_shape(self, resolution: Any = None) -> tuple[int, ...]:
        s = self._res(resolution)[0]
        return (3, s, s)

    def _dataset(self, split: str, size: int, resolution: Any) -> SyntheticDataset:
        # partials of module-level functions (not lambdas) so datasets pickle into spawned workers
        return SyntheticDataset(partial(shapes_scene, distractors=self.distractors),
                                partial(render_shapes, noise=self.noise),
                                size, self.seed, split, self._res(resolution))

    def train_dataset(self) -> SyntheticDataset:
        return self._dataset("train", self.train_size, None)

    def val_dataset(self, resolution: Any = None) -> SyntheticDataset:
        return self._dataset("val", self.val_size, resolution)

    def test_dataset(self, resolution: Any = None) -> SyntheticDataset:
        return self._dataset("test", self.val_size, resolution)

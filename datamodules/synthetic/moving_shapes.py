"""``moving-shapes``: embedded synthetic video classification where the label needs time order.

Each clip shows a disc and a square on a static random background. One of them moves during
the first half of the clip while the other stands still, then the other moves during the
second half. The label is ``2 * disc_direction + disc_moves_first`` (directions 0..3 =
east, north, west, south), 8 classes. A single frame cannot tell the class (nothing moves
within a frame, and the order of motion is a property of the whole clip); reversing the clip
in time flips both the disc's direction and the order, so it changes the label. A bag of
tubelets (no PE) can see *how* the disc moves but not *when*, so it tops out near 50%.

Trajectories are continuous functions of normalised time ``t in [0, 1]`` and space, sampled
at frame centres ``(f + 0.5) / T``, so resolution ``"TxS"`` (frames x side, or just ``S`` for
the default frame count) re-renders the same scene more densely in time and/or space.
Inputs are ``(3, T, S, S)`` float32, roughly zero mean and unit variance.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ..base import float_option, int_option, parse_resolution
from ..registry import register_datamodule
from .render import SyntheticDataset, SyntheticSplitsDataModule, check_size, random_colour, shape_alpha

__all__ = ["MovingShapesDataModule", "moving_shapes_scene", "render_moving_shapes", "DIRECTIONS"]

NUM_CLASSES = 8
#: unit displacement (dy, dx) of directions east, north, west, south (y down)
DIRECTIONS = np.array([[0.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [1.0, 0.0]], dtype=np.float32)
PIXEL_MEAN, PIXEL_STD = 0.15, 0.22  # pixel statistics of the clips, for standardising
_PATH_S = np.linspace(0.0, 1.0, 6)[:, None]  # path points checked for collisions


def moving_shapes_scene(rng: np.random.Generator, travel: float = 0.35) -> dict[str, Any]:
    label = int(rng.integers(NUM_CLASSES))
    disc_dir, disc_first = divmod(label, 2)
    dirs = np.array([disc_dir, rng.integers(4)])  # disc, square
    radii = rng.uniform(0.08, 0.12, size=2).astype(np.float32)
    lo, hi = 0.14, 0.86
    for _ in range(200):  # start points whose paths stay inside and do not touch each other
        starts = []
        for k in range(2):
            d = DIRECTIONS[dirs[k]] * travel  # (dy, dx)
            starts.append(rng.uniform(lo - np.minimum(d, 0), hi - np.maximum(d, 0)))
        paths = [starts[k] + _PATH_S * DIRECTIONS[dirs[k]] * travel for k in range(2)]
        if np.min(np.linalg.norm(paths[0][:, None] - paths[1][None], axis=-1)) > radii.sum() + 0.03:
            break
    # motion windows: the first mover in [a0, a0 + dur], the second in [a1, a1 + dur]
    a0, a1 = rng.uniform(0.0, 0.05), rng.uniform(0.5, 0.55)
    dur = rng.uniform(0.4, 0.45)
    windows = np.array([[a0, dur], [a1, dur]] if disc_first else [[a1, dur], [a0, dur]], dtype=np.float32)
    bg = rng.uniform(0.0, 0.25, size=(2, 3)).astype(np.float32)
    return {"label": label, "kinds": ["disc", "square"], "starts": np.stack(starts).astype(np.float32),
            "dirs": dirs, "travel": float(travel), "windows": windows, "radii": radii,
            "colours": random_colour(rng, 2), "bg": bg, "bg_angle": float(rng.uniform(0, 2 * np.pi))}


def positions_at(scene: dict[str, Any], t: np.ndarray) -> np.ndarray:
    """Centres ``(2 shapes, len(t), 2)`` as ``(y, x)`` at normalised times ``t``."""
    out = []
    for k in range(2):
        a, dur = scene["windows"][k]
        s = np.clip((t - a) / dur, 0.0, 1.0)[:, None]
        out.append(scene["starts"][k] + s * DIRECTIONS[scene["dirs"][k]] * scene["travel"])
    return np.stack(out).astype(np.float32)


def render_moving_shapes(scene: dict[str, Any], resolution: tuple[int, ...], rng: np.random.Generator,
                         noise: float = 0.05, mean: float = PIXEL_MEAN, std: float = PIXEL_STD) -> np.ndarray:
    """Scene -> ``(3, T, S, S)`` float32 clip standardised as ``(x - mean) / std``;
    ``resolution = (T, S)``."""
    frames, side = resolution
    c = (np.arange(side, dtype=np.float32) + 0.5) / side
    ca, sa = np.cos(scene["bg_angle"]), np.sin(scene["bg_angle"])
    ramp = np.clip(0.5 + (c[None, :] - 0.5) * ca + (c[:, None] - 0.5) * sa, 0, 1)
    bg0, bg1 = scene["bg"]
    clip = np.broadcast_to((bg0[:, None, None] + (bg1 - bg0)[:, None, None] * ramp)[:, None],
                           (3, frames, side, side)).astype(np.float32)
    pos = positions_at(scene, (np.arange(frames, dtype=np.float32) + 0.5) / frames)  # (2, T, 2)
    for k, kind in enumerate(scene["kinds"]):
        alpha = shape_alpha(kind, pos[k, :, 0], pos[k, :, 1], scene["radii"][k], side)[None]  # (1, T, S, S)
        clip = clip * (1 - alpha) + scene["colours"][k][:, None, None, None] * alpha
    if noise > 0:
        clip = clip + noise * rng.standard_normal(clip.shape, dtype=np.float32)
    return ((clip - mean) / std).astype(np.float32)


@register_datamodule("moving-shapes")
class MovingShapesDataModule(SyntheticSplitsDataModule):
    """Disc direction x which shape moves first (8 classes); see the module docstring."""

    modality = "video"
    needs_data_root = False
    default_resolution = "8x32"
    patch_size = 4
    tubelet = 2
    num_groups = 64
    in_chans = 3
    mean, std = PIXEL_MEAN, PIXEL_STD

    def __init__(self, train_size: int = 4096, val_size: int = 512, frames: int = 8, noise: float = 0.05,
                 **kwargs: Any) -> None:
        if kwargs.get("resolution") is None:
            kwargs["resolution"] = f"{int(frames)}x32"
        super().__init__(**kwargs)
        self.train_size = int_option(self.name, "train_size", train_size)
        self.val_size = int_option(self.name, "val_size", val_size)
        self.frames, self.noise = int_option(self.name, "frames", frames), float_option(self.name, "noise", noise)
        self.resolution = self._res(self.resolution)

    @property
    def num_classes(self) -> int:
        return NUM_CLASSES

    def _res(self, resolution: Any) -> tuple[int, int]:
        if resolution is None:
            return self.resolution
        res = resolution if isinstance(resolution, tuple) else parse_resolution(resolution)
        res = (self.frames, res[0]) if len(res) == 1 else tuple(res)
        check_size("clip size (frames x side)", res)
        return res

    def input_shape(self, resolution: Any = None) -> tuple[int, ...]:
        t, s = self._res(resolution)
        return (self.in_chans, t, s, s)

    def _dataset(self, split: str, size: int, resolution: Any) -> SyntheticDataset:
        render = partial(render_moving_shapes, noise=self.noise, mean=self.mean, std=self.std)
        return SyntheticDataset(moving_shapes_scene, render, size, self.seed, split, self._res(resolution))


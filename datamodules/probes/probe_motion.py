"""``probe-motion``: the probe suite's video probe (see :mod:`pebench.datamodules.probes.probes` for the
suite, its nuisance cues and the exact no-PE ceiling argument, which carries over to tubelets).

A glyph moves one cell per frame in one of four directions (the label); train/val paths lie in the
left half of the canvas, test paths in the right half. Clips are ``(3, T, S, S)`` with ``T = 4``
frames, tokenized in tubelets of 2 frames.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from torch.utils.data import Dataset

from pebench.core.errors import ConfigError

from ..base import parse_resolution
from ..registry import register_datamodule
from .probe_scenes import DIRECTIONS, GLYPH_KINDS, PATCH, ProbeGenerator, canvas_cells, free_cell, render_probe
from .probes import ProbeDataModule, ProbeDataset

__all__ = ["MotionProbe", "MotionProbeDataModule"]


class MotionProbe(ProbeGenerator):
    """Video: one glyph (any kind) moves one cell per frame in direction E, N, W or S (the
    label) over ``frames`` frames; ``distractors`` static glyphs. Train/val: the path lies in the
    left half of the canvas; test: in the right half. With tubelets of 2 frames, a glyph moving
    one cell per frame leaves, in every tubelet, one "glyph then background" and one "background
    then glyph" token, whatever the direction: the multiset of tubelets is the same for all four
    directions (no-PE ceiling 25 %)."""

    frames: ClassVar[int] = 4
    summary = "direction of a glyph moving 1 cell/frame; train: left half, test: right half"

    def kinds(self, rng):
        kinds = [GLYPH_KINDS[int(rng.integers(len(GLYPH_KINDS)))]]
        return kinds + [GLYPH_KINDS[int(rng.integers(len(GLYPH_KINDS)))] for _ in range(self.distractors)]

    @staticmethod
    def where(c):
        return {"cell": (int(c[0][0]), int(c[0][1])), "path": [(int(y), int(x)) for y, x in c]}

    def place(self, kinds, pos, split, rng):
        g = self.canvas_of(split)
        half = g // 2
        region = canvas_cells(g, cols=range(half, g) if split == "test" else range(0, half))
        dy, dx = DIRECTIONS[pos]
        steps = self.frames - 1
        starts = [c for c in region if (c[0] + dy * steps, c[1] + dx * steps) in region]
        a = starts[int(rng.integers(len(starts)))]
        path = [(a[0] + dy * f, a[1] + dx * f) for f in range(self.frames)]
        paths, used = [path], list(path)
        for _ in kinds[1:]:
            c = free_cell(rng, region, used)
            if c is None:
                return None
            paths.append([c] * self.frames)
            used.append(c)
        return paths

    def label_of(self, kinds, cells, canvas):
        path = cells[0]
        steps = {(b[0] - a[0], b[1] - a[1]) for a, b in zip(path[:-1], path[1:])}
        if len(steps) != 1:
            return -1
        step = steps.pop()
        return DIRECTIONS.index(step) if step in DIRECTIONS else -1

    def render(self, scene, side=None):
        """Scene -> ``(3, T, S, S)`` clip: frame ``f`` shows every glyph at ``path[f]``."""
        frames = []
        for f in range(self.frames):
            objs = [{**o, "cell": o["path"][f]} for o in scene["objects"]]
            frames.append(render_probe({**scene, "objects": objs}, side))
        return np.ascontiguousarray(np.stack(frames, axis=1))


@register_datamodule("probe-motion")
class MotionProbeDataModule(ProbeDataModule):
    """``probe-motion``: video clips ``(3, T, S, S)`` (T = 4 frames, tubelets of 2); see
    :class:`MotionProbe`. Resolution ``S`` or ``"TxS"`` with ``T = 4``; other sides resample."""

    modality = "video"
    tubelet = 2
    generator = MotionProbe
    default_resolution = f"{MotionProbe.frames}x{MotionProbe.canvas * PATCH}"

    def __init__(self, resolution: int | str | None = None, **kwargs: Any) -> None:
        native = MotionProbe.canvas * PATCH
        if resolution is not None and self._video_res(resolution) != (MotionProbe.frames, native):
            raise ConfigError(f"probe-motion trains on {MotionProbe.frames} frames of {native} px; --resolution "
                             f"{resolution} is not allowed (other sides are evaluation-only)")
        super().__init__(**kwargs)
        self.resolution = (MotionProbe.frames, native)

    @staticmethod
    def _video_res(resolution: Any) -> tuple[int, int]:
        res = resolution if isinstance(resolution, tuple) else parse_resolution(resolution)
        return (MotionProbe.frames, res[0]) if len(res) == 1 else (int(res[0]), int(res[1]))

    def _side(self, resolution: Any) -> int | None:
        if resolution is None:
            return None
        t, side = self._video_res(resolution)
        if t != MotionProbe.frames:
            raise ConfigError(f"probe-motion clips have {MotionProbe.frames} frames; got resolution {resolution}")
        if side <= 0:
            raise ConfigError(f"side must be positive, got {side}")
        return side

    def input_shape(self, resolution: Any = None) -> tuple[int, ...]:
        s = self._side(resolution) or self.resolution[1]
        return (self.in_chans, MotionProbe.frames, s, s)

    def val_dataset(self, resolution: Any = None) -> Dataset:
        side = self._side(resolution)
        return ProbeDataset(self.gen, "val", self.val_size, self.data_seed,
                            None if side == self.resolution[1] else side)


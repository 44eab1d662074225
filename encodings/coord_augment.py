"""Coordinate augmentation in training (``bench run --coord-aug dinov3``), for every coordinate-based PE.

DINOv3 (Siméoni et al., 2025, "DINOv3", §3.2 and its official RoPE module) normalises the patch
coordinates of an image to the box ``[-1, 1]`` per axis and, in training only, transforms them at
random before its RoPE reads them, in this order:

* shift: add ``s_a ~ U(-shift, shift)`` on each axis ``a``;
* jitter: multiply each axis by its own log-uniform factor ``j_a = exp(U(-log jitter, log jitter))``;
* rescale: multiply every axis by one log-uniform factor ``r = exp(U(-log rescale, log rescale))``.

Its released training recipe uses rescale only, ``rescale = 2`` (the box ``[-1, 1]`` becomes
``[-r, r]``, ``r`` in ``[1/2, 2]``); shift and jitter are off. That recipe is the preset ``dinov3``
(:data:`PRESETS`). In evaluation coordinates are not changed.

pebench's PEs read coordinates in patch units (their frequencies and slopes are set for them), so
:class:`CoordAugment` normalises each sample's coords to ``[-1, 1]``, augments them there and maps them
back with the inverse of the normalisation: ``c' = centre + half * aug((c - centre) / half)`` per axis.
The PEs keep their units, and evaluation is exactly the identity. ``centre`` is the middle of the
sample's real tokens' bounding box; ``half`` is half the grid size (DINOv3's box of ``n`` unit cells)
when tokens lie on a grid, else half the bounding box. Differences from DINOv3, stated: one draw per
sample and forward, shared by all blocks (DINOv3 draws once per block and batch), and ``p`` axes (a
video's time axis is shifted and jittered like the others; the rescale factor is shared by all axes).
Random numbers come from torch's global generator on the coords' device, so a run is deterministic
per seed. PEs that need integer grid coords (``ape``'s table; ``PositionalEncoding.accepts_coord_augment``)
refuse it; ``cpe`` on a grid places tokens by coordinate ranks, which these maps keep, so there it is
a no-op.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor, nn

from .base import batch_coords

__all__ = ["CoordAugment", "PRESETS", "build_coord_augment"]

#: ``--coord-aug`` values -> (shift, jitter, rescale); ``none``: no augmentation
PRESETS: dict[str, tuple[float | None, float | None, float | None] | None] = {
    "none": None,
    "dinov3": (None, None, 2.0),  # DINOv3's released recipe (pos_embed_rope_rescale_coords: 2)
}


class CoordAugment(nn.Module):
    """Random shift / jitter / rescale of normalised coords in training, the identity in evaluation
    (see the module docstring). ``None`` turns a transform off; jitter and rescale must be ``>= 1``."""

    def __init__(self, shift: float | None = None, jitter: float | None = None,
                 rescale: float | None = None) -> None:
        super().__init__()
        if shift is not None and not (math.isfinite(shift) and shift >= 0):
            raise ValueError(f"coordinate shift must be a finite number >= 0, got {shift}")
        for name, v in (("jitter", jitter), ("rescale", rescale)):
            if v is not None and not (math.isfinite(v) and v >= 1):
                raise ValueError(f"coordinate {name} must be a finite factor >= 1, got {v}")
        self.shift, self.jitter, self.rescale = shift, jitter, rescale

    def forward(self, coords: Tensor, batch_size: int, grid: Sequence[int] | None = None,
                valid: Tensor | None = None) -> Tensor:
        """coords ``(N, p)`` / ``(B, N, p)``; valid ``(B, N)`` bool (padding excluded from the box) or
        ``None``. -> coords: unchanged in evaluation, augmented ``(B, N, p)`` in training."""
        if not self.training:
            return coords
        c = batch_coords(coords, batch_size)  # (B, N, p)
        B, _, p = c.shape
        real = valid.unsqueeze(-1) if valid is not None else torch.ones_like(c[..., :1], dtype=torch.bool)
        lo = c.masked_fill(~real, math.inf).amin(1, keepdim=True)  # (B, 1, p)
        hi = c.masked_fill(~real, -math.inf).amax(1, keepdim=True)
        centre = (lo + hi) / 2
        if grid is not None:
            half = torch.tensor([g / 2 for g in grid], dtype=c.dtype, device=c.device).expand_as(centre)
        else:
            half = (hi - lo) / 2
        half = torch.where(half > 0, half, torch.ones_like(half))  # a single token / flat axis
        u = (c - centre) / half  # (B, N, p), the box [-1, 1]
        if self.shift is not None:
            u = u + (torch.rand(B, 1, p, device=c.device, dtype=c.dtype) * 2 - 1) * self.shift
        if self.jitter is not None:
            u = u * _log_uniform(self.jitter, (B, 1, p), c)
        if self.rescale is not None:
            u = u * _log_uniform(self.rescale, (B, 1, 1), c)
        return centre + half * u

    def extra_repr(self) -> str:
        return f"shift={self.shift}, jitter={self.jitter}, rescale={self.rescale}"


def _log_uniform(factor: float, shape: tuple[int, ...], like: Tensor) -> Tensor:
    """``exp(U(-log factor, log factor))`` of ``shape``."""
    span = math.log(factor)
    return ((torch.rand(shape, device=like.device, dtype=like.dtype) * 2 - 1) * span).exp()


def build_coord_augment(name: str) -> CoordAugment | None:
    """The augmentation of ``--coord-aug NAME`` (:data:`PRESETS`), ``None`` for ``none``."""
    if name not in PRESETS:
        raise ValueError(f"unknown coordinate augmentation {name!r}; available: {', '.join(PRESETS)}")
    spec = PRESETS[name]
    return None if spec is None else CoordAugment(*spec)

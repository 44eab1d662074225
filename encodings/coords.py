"""Token coordinates on a regular grid (the coordinate contract of the data path).

Position is carried by ``coords``, a float tensor ``(N, p)`` (or ``(B, N, p)``) in patch units, never
by token index. The tokenizers build grid coordinates with :func:`canonical_grid_coords`, which
returns one cached tensor per ``(grid, device)``; a PE that keeps a table for the training grid (APE)
recognises that tensor by identity with :func:`is_canonical_grid_coords` instead of comparing values.
These live here, below the models, because both the tokenizers and the PEs use them.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

__all__ = ["grid_coords", "canonical_grid_coords", "is_canonical_grid_coords"]


def grid_coords(grid: Sequence[int], device: torch.device | str | None = None) -> Tensor:
    """Integer coords of a row-major grid as float ``(prod(grid), len(grid))``."""
    axes = [torch.arange(g, device=device, dtype=torch.float32) for g in grid]
    mesh = torch.meshgrid(*axes, indexing="ij")
    return torch.stack([m.reshape(-1) for m in mesh], dim=-1)


# (grid, device) -> (coords, version at creation); see canonical_grid_coords.
_CANONICAL_COORDS: dict[tuple[tuple[int, ...], torch.device], tuple[Tensor, int]] = {}


def canonical_grid_coords(grid: Sequence[int], device: torch.device | str | None = None) -> Tensor:
    """:func:`grid_coords` cached per ``(grid, device)`` (perf, issue #7): the tokenizers return the
    same tensor every forward instead of rebuilding it, and :func:`is_canonical_grid_coords` lets a
    PE recognise it by identity (no device sync). Treat it as read-only; if it is modified in place
    anyway (its ``_version`` changes) it is rebuilt and no longer counts as canonical."""
    key = (tuple(int(g) for g in grid), torch.device(device) if device is not None else torch.device("cpu"))
    hit = _CANONICAL_COORDS.get(key)
    if hit is not None and hit[0]._version == hit[1] and not hit[0].requires_grad:
        return hit[0]
    with torch.inference_mode(False), torch.no_grad():  # a normal tensor even if first built under inference
        c = grid_coords(key[0], key[1])
    _CANONICAL_COORDS[key] = (c, c._version)
    return c


def is_canonical_grid_coords(coords: Tensor, grid: Sequence[int]) -> bool:
    """True iff ``coords`` is the unmodified cached :func:`canonical_grid_coords` tensor of ``grid``
    (an identity check: no comparison of values, no sync)."""
    hit = _CANONICAL_COORDS.get((tuple(int(g) for g in grid), coords.device))
    return hit is not None and coords is hit[0] and coords._version == hit[1] and not coords.requires_grad

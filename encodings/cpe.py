"""``cpe``: the conditional positional encoding (PEG) of CPVT, and its kNN form for tokens off a grid.

Paper: Chu et al., ICLR 2023, "Conditional Positional Encodings for Vision Transformers" (CPVT).
The position generator (PEG) is a depthwise 3x3 convolution over the token map, added to the tokens
(``x + conv(x)``, the convolution with a bias); its position signal is implicit, from the zero padding
at the borders of the map and the convolution's fixed neighbourhood. It acts between blocks, through
:meth:`~pebench.encodings.base.PositionalEncoding.after_block`: after block ``after_block`` (0 = after
the first block, the paper's default position), once.

Two neighbourhoods (option ``mode``; ``auto``: ``grid`` when the PE is built with a training grid,
else ``knn``):

* ``grid``: tokens on a regular grid (``grid`` given at run time). A depthwise convolution with kernel
  3 on every axis over ``p`` axes (p = 2: CPVT's 3x3; p = 3, video / events: 3x3x3; p = 1: 3), zero
  padding. A token's cell is the rank of its coordinate among the distinct coordinates of the sample's
  real tokens, axis by axis, so the map is built from ``coords`` and not from token order: the PE is
  equivariant to permuting tokens together with their coords, invariant to translating (or any
  increasing per-axis affine map of) the coords, and applies to any grid size (extrapolation).
  Tokens on a grid have distinct coords; a grid with a missing row or column of real tokens closes
  the gap (there is no cell for an empty rank).
* ``knn``: tokens that are not on a grid (point groups, spiking-patch tokens; ``grid`` is ``None``).
  The same idea on the token neighbourhood: each token aggregates its ``k`` nearest real tokens
  (itself included; default ``3^p``, the convolution's neighbourhood size; Euclidean distance,
  brute force over all pairs, ties at the k-th distance broken by token order) with per-channel
  weights that are an MLP of the offset, ``out_i = sum_j w(c_j - c_i) * x_j + b``, ``w: R^p -> R^D``
  (two linear layers, hidden width 32, GELU), a continuous depthwise convolution. Offsets are divided by
  the sample's mean distance to the k-th neighbour, so the result does not depend on the coordinate
  unit (patches, metres). No sparse-convolution package is used (Point Transformer V3's xCPE is a
  sparse 3-D convolution on voxels; this is the dense, package-free analogue).

Padding masks: padded tokens neither contribute (they are not placed in the map / not candidates as
neighbours) nor receive (their tokens are returned unchanged). Prefix tokens (CLS) carry no position:
untouched.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import CoordsCache, PEConfigError, PositionalEncoding
from .options import PEOption
from .registry import register_pe

__all__ = ["ConditionalPE", "MODES", "grid_cells", "KNN_HIDDEN"]

#: neighbourhoods of ``cpe`` (see the module docstring)
MODES = ("auto", "grid", "knn")
#: hidden width of the offset MLP of the kNN form
KNN_HIDDEN = 32
_CONVS = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}


def grid_cells(coords: Tensor, valid: Tensor | None) -> tuple[Tensor, list[int]]:
    """Grid cell of every token from its coords: on each axis, the rank of its coordinate among the
    distinct coordinates of the sample's real tokens.

    coords: ``(B, N, p)``; valid: ``(B, N)`` bool or ``None`` (all real).
    -> cells ``(B, N, p)`` long (padded tokens: a rank past the last real one), the map's extent per
    axis (the largest over the batch).
    """
    B, N, p = coords.shape
    cells, extent = [], []
    for a in range(p):
        v = coords[..., a]
        if valid is not None:
            v = v.masked_fill(~valid, float("inf"))  # padded tokens sort last
        s, order = v.sort(dim=1)  # (B, N)
        new = torch.ones_like(s, dtype=torch.bool)
        new[:, 1:] = s[:, 1:] != s[:, :-1]  # the first of each run of equal values
        rank = torch.empty_like(order).scatter_(1, order, new.long().cumsum(1) - 1)  # (B, N)
        real = rank if valid is None else rank.masked_fill(~valid, -1)
        extent.append(int(real.amax()) + 1)
        cells.append(rank)
    return torch.stack(cells, dim=-1), extent


@register_pe("cpe", order=120)
class ConditionalPE(PositionalEncoding):
    """CPVT's position generator (PEG) between blocks. Options: ``after_block``, ``mode``, ``k``."""

    #: the map is placed by coordinate ranks (grid) or offsets (knn): translating the coords changes nothing
    relative = True
    rotation_invariant = False
    distance_decay = False
    learned = True
    options = (PEOption("after_block", "int", 0, "the block after which the PEG acts (0: after the first, CPVT's default)"),
               PEOption("mode", "str", "auto", "neighbourhood: grid (depthwise conv over the token grid), knn (kNN "
                        "aggregation over coords, for tokens off a grid), auto (grid if built with a grid)",
                        choices=MODES),
               PEOption("k", "int", None, "neighbours of the knn form, the token itself included (default 3^p)"))

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, after_block: int = 0,
                 mode: str = "auto", k: int | None = None) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if not 0 <= after_block < depth:
            raise PEConfigError(f"cpe after_block must be in 0 .. {depth - 1} (the model has {depth} blocks), "
                                f"got {after_block}")
        if mode not in MODES:
            raise PEConfigError(f"cpe mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.after_block_index = after_block
        self.mode = ("grid" if grid is not None else "knn") if mode == "auto" else mode
        if self.mode == "grid":
            if spatial_dims not in _CONVS:
                raise PEConfigError(f"cpe mode=grid needs 1-, 2- or 3-D coords, got p={spatial_dims}")
            self.conv = _CONVS[spatial_dims](dim, dim, 3, padding=1, groups=dim)  # depthwise, zero padding
        else:
            self.k = 3 ** spatial_dims if k is None else int(k)
            if self.k < 1:
                raise PEConfigError(f"cpe k must be >= 1, got {k}")
            self.offset_mlp = nn.Sequential(nn.Linear(spatial_dims, KNN_HIDDEN), nn.GELU(),
                                            nn.Linear(KNN_HIDDEN, dim))
            self.knn_bias = nn.Parameter(torch.zeros(dim))
        self._cells = CoordsCache()

    def after_block(self, i: int, x: Tensor, coords: Tensor, grid: Sequence[int] | None,
                    mask: Tensor | None) -> Tensor:
        if i != self.after_block_index:
            return x
        P = self.num_prefix_tokens
        xp = x[:, P:]  # (B, N, D)
        valid = mask[:, P:] if mask is not None else None  # (B, N) or None
        if self.mode == "grid":
            if grid is None:
                raise ValueError("cpe was built for tokens on a grid (mode=grid) but got tokens without one; "
                                 "build it with mode=knn for point / spiking tokens")
            out = self._grid_conv(xp, coords, valid)
        else:
            out = self._knn(xp, coords, valid)
        if valid is not None:
            out = out * valid.unsqueeze(-1)  # padded tokens receive nothing
        return torch.cat([x[:, :P], xp + out], dim=1)

    def _cells_of(self, coords: Tensor, valid: Tensor | None) -> tuple[Tensor, list[int]]:
        c = coords if coords.dim() == 3 else coords.unsqueeze(0)  # (B | 1, N, p)
        if valid is not None:
            return grid_cells(c.expand(valid.shape[0], -1, -1), valid)
        return self._cells.get(coords, ("cells", coords.shape, coords.device), lambda: grid_cells(c, None))

    def _grid_conv(self, xp: Tensor, coords: Tensor, valid: Tensor | None) -> Tensor:
        """Depthwise convolution over the token map: ``(B, N, D) -> (B, N, D)`` (bias included)."""
        B, N, D = xp.shape
        cells, extent = self._cells_of(coords, valid)  # (B | 1, N, p)
        S = 1
        flat = torch.zeros_like(cells[..., 0])
        for a in reversed(range(len(extent))):  # row-major flat index of each cell
            flat = flat + cells[..., a] * S
            S *= extent[a]
        if valid is not None:
            flat = flat.masked_fill(~valid, S)  # padded tokens: one spare slot past the map
        flat = flat.expand(B, -1).unsqueeze(-1).expand(-1, -1, D)  # (B, N, D)
        src = xp if valid is None else xp * valid.unsqueeze(-1)
        dense = xp.new_zeros(B, S + 1, D).scatter(1, flat, src)  # (B, S + 1, D); empty cells stay 0
        fmap = dense[:, :S].reshape(B, *extent, D).movedim(-1, 1)  # (B, D, *extent)
        y = self.conv(fmap).movedim(1, -1).reshape(B, S, D)  # (B, S, D)
        return torch.gather(F.pad(y, (0, 0, 0, 1)), 1, flat)  # (B, N, D)

    def _knn(self, xp: Tensor, coords: Tensor, valid: Tensor | None) -> Tensor:
        """kNN aggregation with offset-MLP weights: ``(B, N, D) -> (B, N, D)`` (bias included)."""
        B, N, D = xp.shape
        c = (coords if coords.dim() == 3 else coords.unsqueeze(0)).to(xp.dtype).expand(B, -1, -1)  # (B, N, p)
        dist = torch.cdist(c, c)  # (B, N, N): query i, candidate j
        if valid is not None:
            dist = dist.masked_fill(~valid.unsqueeze(1), float("inf"))  # padded tokens are no neighbours
        k = min(self.k, N)
        d_k, idx = dist.topk(k, dim=-1, largest=False)  # (B, N, k), nearest first
        ok = torch.isfinite(d_k)  # fewer than k real tokens: the rest do not count
        if valid is not None:
            ok = ok & valid.unsqueeze(-1)
        scale = self._offset_scale(d_k, ok, valid)  # (B, 1, 1, 1)
        nb = idx.unsqueeze(-1)  # (B, N, k, 1)
        c_j = torch.gather(c.unsqueeze(1).expand(-1, N, -1, -1), 2, nb.expand(-1, -1, -1, c.shape[-1]))
        offsets = ((c_j - c.unsqueeze(2)) / scale).to(self.knn_bias.dtype)  # (B, N, k, p)
        w = self.offset_mlp(offsets)  # (B, N, k, D)
        x_j = torch.gather(xp.unsqueeze(1).expand(-1, N, -1, -1), 2, nb.expand(-1, -1, -1, D))  # (B, N, k, D)
        return (w * x_j * ok.unsqueeze(-1)).sum(2) + self.knn_bias  # (B, N, D)

    @staticmethod
    def _offset_scale(d_k: Tensor, ok: Tensor, valid: Tensor | None) -> Tensor:
        """Per sample: the mean over real tokens of the distance to their farthest counted neighbour."""
        far = torch.where(ok, d_k, torch.zeros_like(d_k)).amax(-1)  # (B, N)
        n = valid.sum(1).clamp_min(1) if valid is not None else torch.full_like(far[:, 0], far.shape[1])
        far = far if valid is None else far * valid
        scale = far.sum(1) / n  # (B,)
        return torch.where(scale > 0, scale, torch.ones_like(scale)).view(-1, 1, 1, 1)

    def extra_repr(self) -> str:
        extra = f", k={self.k}" if self.mode == "knn" else ""
        return super().extra_repr() + f", after_block={self.after_block_index}, mode={self.mode}{extra}"

"""``sincos``: fixed n-D sinusoidal absolute position embedding.

Paper: Vaswani et al., NeurIPS 2017, "Attention Is All You Need" (1-D sinusoids, base 10000),
in the per-axis n-D form of MAE (He et al., CVPR 2022) / "simple ViT" (Beyer et al., 2022).

* The token width ``D`` is split evenly over the ``p`` axes: each axis gets ``F = D // (2p)``
  frequencies ``w_k = 10000^(-k/F)``, ``k = 0..F-1``, and the block
  ``[sin(c_a w_0..F-1), cos(c_a w_0..F-1)]`` (MAE layout: all sines, then all cosines).
  Blocks follow the coords' axis order; the ``D - 2pF`` leftover channels are zero.
* The embedding is a closed-form function of the coords, so it is defined for any grid,
  unseen grids (extrapolation = evaluate the formula) and non-grid tokens (point centres).
* CLS: prefix tokens get no position (the backbone prepends them after ``encode_tokens``).
* ``alpha`` scales the added embedding (docs/architecture.md §4).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from pebench.core.options import Option

from .base import CoordsCache, PEConfigError, PositionalEncoding, batch_coords
from .registry import register_pe

__all__ = ["SinCosPE", "sincos_embedding"]


def sincos_embedding(coords: Tensor, dim: int, base: float = 10000.0) -> Tensor:
    """Closed-form n-D sinusoidal embedding: coords ``(..., N, p)`` -> ``(..., N, dim)``."""
    p = coords.shape[-1]
    F = dim // (2 * p)
    dt = torch.promote_types(coords.dtype, torch.float32)
    omega = base ** (-torch.arange(F, device=coords.device, dtype=dt) / F)  # (F,)
    ang = coords.to(dt).unsqueeze(-1) * omega  # (..., N, p, F)
    emb = torch.cat([ang.sin(), ang.cos()], dim=-1).flatten(-2)  # (..., N, p * 2F)
    if emb.shape[-1] < dim:
        emb = torch.nn.functional.pad(emb, (0, dim - emb.shape[-1]))  # zero leftover channels
    return emb


@register_pe("sincos", order=20)
class SinCosPE(PositionalEncoding):
    """Fixed sinusoidal table evaluated at the tokens' coords (no parameters)."""

    relative = False
    rotation_invariant = False
    distance_decay = False
    learned = False
    options = (Option("base", "float", 10000.0, "frequency base of the sinusoids"),)

    additive = True

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, base: float = 10000.0) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if dim < 2 * spatial_dims:
            raise PEConfigError(f"sincos needs dim >= 2 * spatial_dims, got dim={dim}, p={spatial_dims}")
        if base <= 1:
            raise PEConfigError(f"sincos base must be > 1, got {base}")
        self.base = float(base)
        self._table = CoordsCache()

    def encode_tokens(self, x: Tensor, coords: Tensor, grid: Sequence[int] | None) -> Tensor:
        # (N, p) coords broadcast: one (1, N, D) table, cached while the same coords come back
        b = 1 if coords.dim() == 2 else x.shape[0]
        pos = self._table.get(coords, (b, coords.shape, coords.device),
                              lambda: sincos_embedding(batch_coords(coords, b), self.dim, self.base))  # (B|1, N, D)
        return x + self.alpha * pos.to(x.dtype)

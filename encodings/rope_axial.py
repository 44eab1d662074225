"""``rope-axial``: axial rotary position embedding for n-D tokens.

Papers: Su et al., 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding";
axial 2-D form for ViTs: Heo et al., ECCV 2024, "Rotary Position Embedding for Vision
Transformer" (RoPE-Axial), generalised here to ``p`` axes.

* Head channels are split evenly over the ``p`` axes: each axis owns ``F = d // (2p)``
  consecutive channel *pairs* ``(2j, 2j+1)`` (interleaved layout, timm's ``rot``), axis ``a``
  the pairs ``a*F .. a*F+F-1``. Pair ``k`` of axis ``a`` is rotated by ``c_a * w_k`` with
  ``w_k = base^(-k/F)``. Leftover pairs (``d/2 - pF``) are not rotated.
* Base frequency: **100** by default, as in Heo et al.'s RoPE-Axial for ViTs (their
  ``rope_theta=100``; coords are patch indices, so 10000 would waste most bands on
  wavelengths far longer than any image). ``base=10000`` gives the RoFormer/LLM choice.
* Rotation is applied with timm's ``apply_rot_embed`` (``half=False``).
* The angle is a linear function of the coords, so any grid, unseen grids and non-grid
  coords work as-is; logits depend on ``r_j - r_i`` only (translation invariant).
* CLS: prefix tokens get the identity rotation (angle 0).
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from timm.layers.pos_embed_sincos import apply_rot_embed
from torch import Tensor

from .base import CoordsCache, LayerPE, PEConfigError, PositionalEncoding, batch_coords
from .options import PEOption
from .registry import register_pe

__all__ = ["AxialRoPE", "AxialRoPELayer", "rope_sin_cos", "apply_rope"]


def rope_sin_cos(angles: Tensor, head_dim: int, num_prefix_tokens: int) -> tuple[Tensor, Tensor]:
    """Interleaved sin/cos tables from pair angles.

    angles: ``(B, H|1, N, F)`` with ``F <= head_dim // 2`` (missing pairs -> angle 0).
    Returns sin, cos ``(B, H|1, P + N, head_dim)`` with identity (sin 0, cos 1) on prefix rows.
    """
    pairs = head_dim // 2
    angles = F.pad(angles, (0, pairs - angles.shape[-1], num_prefix_tokens, 0))  # (B, H, P + N, d/2)
    sin = angles.sin().repeat_interleave(2, dim=-1)  # (B, H, P + N, d)
    cos = angles.cos().repeat_interleave(2, dim=-1)
    return sin, cos


def apply_rope(q: Tensor, k: Tensor, angles: Tensor, num_prefix_tokens: int) -> tuple[Tensor, Tensor]:
    """Rotate q, k ``(B, H, P + N, d)`` by pair angles ``(B, H|1, N, F)``."""
    sin, cos = rope_sin_cos(angles, q.shape[-1], num_prefix_tokens)
    return apply_rot_embed(q, sin, cos), apply_rot_embed(k, sin, cos)


class AxialRoPELayer(LayerPE):
    """Stateless per-layer part (all layers share it): rotates q and k."""

    def __init__(self, base: float, n_freq: int, num_prefix_tokens: int) -> None:
        super().__init__()
        self.base = base
        self.n_freq = n_freq
        self.num_prefix_tokens = num_prefix_tokens
        self._tables = CoordsCache()

    def omega(self, device: torch.device, dtype: torch.dtype) -> Tensor:
        """Frequencies ``w_k = base^(-k/F)``: ``(F,)`` (computed on the fly, in float32 or wider)."""
        return self.base ** (-torch.arange(self.n_freq, device=device, dtype=dtype) / self.n_freq)

    def angles(self, coords: Tensor, batch_size: int, dtype: torch.dtype) -> Tensor:
        """Pair angles ``(B, 1, N, p * F)``, axis-major."""
        dt = torch.promote_types(dtype, torch.float32)
        c = batch_coords(coords, batch_size).to(dt)  # (B, N, p)
        ang = c.unsqueeze(-1) * self.omega(c.device, dt)  # (B, N, p, F)
        return ang.flatten(-2).unsqueeze(1)  # (B, 1, N, p * F)

    def sin_cos(self, coords: Tensor, batch_size: int, dtype: torch.dtype, head_dim: int) -> tuple[Tensor, Tensor]:
        """The sin/cos tables ``(B | 1, 1, P + N, d)``, cached per coords tensor (the layer is shared
        by all blocks, so a forward computes them once; see :class:`~pebench.encodings.base.CoordsCache`)."""
        b = 1 if coords.dim() == 2 else batch_size  # broadcast (N, p) coords: one table row for the batch
        key = (b, dtype, head_dim, coords.shape, coords.device)
        return self._tables.get(coords, key, lambda: rope_sin_cos(self.angles(coords, b, dtype), head_dim,
                                                                   self.num_prefix_tokens))

    def qk(self, q: Tensor, k: Tensor, x: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        sin, cos = self.sin_cos(coords, q.shape[0], q.dtype, q.shape[-1])
        return apply_rot_embed(q, sin, cos), apply_rot_embed(k, sin, cos)


@register_pe("rope-axial", order=30)
class AxialRoPE(PositionalEncoding):
    """Axial RoPE (no parameters). Option: ``base`` (default 100)."""
    options = (PEOption("base", "float", 100.0, "frequency base: frequencies base^(-k/F) per axis"),)

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, base: float = 100.0) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if self.head_dim % 2:
            raise PEConfigError(f"rope-axial needs an even head dim, got {self.head_dim}")
        n_freq = self.head_dim // (2 * spatial_dims)
        if n_freq < 1:
            raise PEConfigError(f"rope-axial needs head_dim >= 2 * spatial_dims, got {self.head_dim}, p={spatial_dims}")
        if base <= 1:
            raise PEConfigError(f"rope-axial base must be > 1, got {base}")
        self.base = float(base)
        self.rope = AxialRoPELayer(self.base, n_freq, num_prefix_tokens)

    def layer(self, i: int) -> LayerPE:
        return self.rope

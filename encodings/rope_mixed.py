"""``rope-mixed``: RoPE with learnable mixed-axis frequencies.

Paper: Heo et al., ECCV 2024, "Rotary Position Embedding for Vision Transformer" (RoPE-Mixed,
code: naver-ai/rope-vit; timm's ``init_random_2d_freqs``).

* Every layer ``l`` holds a learnable frequency tensor ``freqs`` of shape ``(p, H, d/2)``;
  channel pair ``k`` of head ``h`` is rotated by ``sum_a c_a * freqs[a, h, k]``, so one pair
  mixes all axes. Logits depend on ``r_j - r_i`` only (translation invariant).
* Init (as in the paper's code, base ``theta = 10`` for the mixed variant): per layer and head
  a random rotation ``R`` of the coordinate frame; the ``d/2`` pairs are split into ``p``
  groups of ``L = (d/2) // p`` pairs, group ``g`` points along column ``g`` of ``R`` with
  magnitudes ``theta^(-k/L)``, ``k = 0..L-1``. For ``p = 2`` ``R`` is the rotation by a
  uniform random angle, which is exactly the paper's ``(cos t, sin t)`` / ``(cos(t+pi/2),
  sin(t+pi/2))`` init. For ``p = 3`` ``R`` is Haar-random in SO(3), so the third axis
  (time for video/events, z for points) gets frequencies that are *not* zero-initialised.
  Leftover pairs (``d/2 - pL``) start at frequency 0 and are learned.
* Frequencies are excluded from weight decay (``no_weight_decay``: ``layers.{l}.freqs``).
* Any grid, unseen grids and non-grid coords: the angle is linear in the coords.
* CLS: prefix tokens get the identity rotation.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor, nn

from .base import LayerPE, PEConfigError, PositionalEncoding, batch_coords
from .options import PEOption
from .registry import register_pe
from .rope_axial import apply_rope

__all__ = ["MixedRoPE", "MixedRoPELayer", "init_mixed_freqs"]


def _random_rotation(p: int, generator: torch.Generator | None = None) -> Tensor:
    """A random rotation ``(p, p)`` (uniform angle for p=2, Haar via QR otherwise)."""
    if p == 2:
        t = torch.rand((), generator=generator) * 2 * math.pi
        c, s = torch.cos(t), torch.sin(t)
        return torch.stack([torch.stack([c, -s]), torch.stack([s, c])])  # columns: (cos t, sin t), (cos(t+pi/2), sin(t+pi/2))
    if p == 1:
        return torch.ones(1, 1)
    a = torch.randn(p, p, generator=generator)
    qm, r = torch.linalg.qr(a)
    qm = qm * torch.sign(torch.diagonal(r))  # Haar-distributed in O(p)
    if torch.det(qm) < 0:
        qm[:, 0] = -qm[:, 0]  # into SO(p)
    return qm


def init_mixed_freqs(p: int, num_heads: int, head_dim: int, theta: float = 10.0,
                     generator: torch.Generator | None = None) -> Tensor:
    """Initial RoPE-Mixed frequencies ``(p, H, d/2)`` for one layer (see module docstring)."""
    pairs = head_dim // 2
    L = pairs // p
    mag = theta ** (-torch.arange(L, dtype=torch.float32) / L)  # (L,)
    freqs = torch.zeros(p, num_heads, pairs)
    for h in range(num_heads):
        R = _random_rotation(p, generator)  # (p, p)
        for g in range(p):
            freqs[:, h, g * L:(g + 1) * L] = R[:, g:g + 1] * mag  # (p, L)
    return freqs


class MixedRoPELayer(LayerPE):
    """Per-layer learnable frequencies ``freqs: (p, H, d/2)``."""

    def __init__(self, freqs: Tensor, num_prefix_tokens: int) -> None:
        super().__init__()
        self.freqs = nn.Parameter(freqs)  # (p, H, d/2)
        self.num_prefix_tokens = num_prefix_tokens

    def angles(self, coords: Tensor, batch_size: int, dtype: torch.dtype) -> Tensor:
        """Pair angles ``(B|1, H, N, d/2)`` (one batch row for broadcast ``(N, p)`` coords)."""
        dt = torch.promote_types(dtype, torch.float32)
        c = coords.to(dt) if coords.dim() == 3 else coords.to(dt).unsqueeze(0)  # (B|1, N, p): no batch copies
        return torch.einsum("bnp,phf->bhnf", c, self.freqs.to(dt))

    def qk(self, q: Tensor, k: Tensor, x: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        return apply_rope(q, k, self.angles(coords, q.shape[0], q.dtype), self.num_prefix_tokens)


@register_pe("rope-mixed", order=40)
class MixedRoPE(PositionalEncoding):
    """RoPE-Mixed. Option: ``theta`` (init magnitude base, default 10 as in the paper)."""

    relative = True
    rotation_invariant = False
    distance_decay = False
    learned = True
    options = (PEOption("theta", "float", 10.0, "frequency base of the initial frequency vectors"),)

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, theta: float = 10.0) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if self.head_dim % 2:
            raise PEConfigError(f"rope-mixed needs an even head dim, got {self.head_dim}")
        if self.head_dim // 2 < spatial_dims:
            raise PEConfigError(f"rope-mixed needs head_dim >= 2 * spatial_dims, got {self.head_dim}, p={spatial_dims}")
        if theta <= 1:
            raise PEConfigError(f"rope-mixed theta must be > 1, got {theta}")
        self.theta = float(theta)
        self.layers = nn.ModuleList(
            MixedRoPELayer(init_mixed_freqs(spatial_dims, num_heads, self.head_dim, self.theta), num_prefix_tokens)
            for _ in range(depth))

    def layer(self, i: int) -> LayerPE:
        return self.layers[i]

    def no_weight_decay(self) -> set[str]:
        return {f"layers.{i}.freqs" for i in range(self.depth)}

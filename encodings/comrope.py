"""``comrope``: RoPE with trainable commuting angle matrices (exactly relative).

Paper: Yu et al., CVPR 2025, "ComRoPE: Scalable and Robust Rotary Position Embedding Parameterized
by Trainable Commuting Angle Matrices" (arXiv 2506.03737; official code: Longin-Yu/ComRoPE).
Defaults follow the paper and that code, read from them (no code taken from it).

* Token at position ``r`` rotates q and k of head ``h`` by ``R_h(r) = expm(sum_a s_a r_a A[h, a])``,
  ``A[h, a] = diag(B[h, a, 1], ..., B[h, a, m])`` with ``m = d / block_size`` skew blocks. The blocks
  ``B[h, a, k]`` of one ``k`` commute over the axes ``a``, so ``R(r_i)^T R(r_j) = R(r_j - r_i)``:
  logits depend on ``r_j - r_i`` only (the paper's RoPE equation).
* ``variant`` ``ld`` (default, ComRoPE-LD, linearly dependent): ``B[h, a, k] = theta[a, k] (P_hk - P_hk^T)``,
  one trainable base matrix per head and block, one trainable scalar per axis and block (shared by
  the heads, as in the official code). ``ap`` (ComRoPE-AP, axis-partitioned):
  ``B[h, a, k] = P_hk - P_hk^T`` if ``k = a (mod p)``, else 0 (block ``k`` belongs to axis ``k mod p``).
* Published defaults (read from the paper and the official code): block size 8 ("a block size of 8
  is used in practice", Sec. 4.1.1; Sec. 4.3.2 varies it from 2 to 8 and keeps 8 to bound the
  ``O(b^2)`` cost). The official ``model.py`` config class defaults ``block_size`` to 2, but that
  class also configures its vanilla-RoPE baseline, which requires 2; the experiments use 8. ``ld`` is
  the paper's best variant overall (Tables 1 and 3) and the one it carries to detection.
  ``d`` must be a multiple of the block size (``ap`` also needs ``m >= p``). ``block_size=2`` with
  ``ap`` is axial RoPE with learned frequencies.
* Init (official code, ``init_std`` config default 1): ``P`` entries ``N(0, init_std^2)``; ``theta``
  ``N(0, 1)``. Parameters are per layer (each attention layer builds its own), ``P`` per head and
  block, ``theta`` per axis and block, shared by the heads.
* Positions: the paper scales each axis to [0, 1] by its own extent (Sec. 3.4.1, ``x_a / X_a``, at
  the patch centre); the official code divides every axis, time included, by the number of patches
  per side (``axis_scale``). pebench follows the code: ``s_a = 1 / S`` with ``S`` the largest spatial
  side of the training grid (its last two axes), 1 without a training grid (point clouds);
  ``coord_scale`` overrides it (one value per axis). The ``+0.5`` centre offset cancels in relative
  logits. The paper's training-time position perturbation (Sec. 3.4.2) is not part of the PE
  (``--coord-aug`` is pebench's coordinate augmentation).
* The angle matrices are excluded from weight decay, like RoPE-Mixed's frequencies.
* CLS: prefix tokens get the identity rotation (the official code gives CLS a position instead;
  pebench's interface has CLS carry none).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor, nn

from ._rotation import BlockRotationLayerPE, grid_coord_scale, skew
from .base import LayerPE, PEConfigError, PositionalEncoding
from .options import PEOption
from .registry import register_pe

__all__ = ["ComRoPE", "ComRoPELayer", "comrope_coord_scale", "VARIANTS"]

VARIANTS = ("ld", "ap")


def comrope_coord_scale(grid: Sequence[int] | None, spatial_dims: int) -> list[float]:
    """ComRoPE's position scale: ``1 / S`` on every axis, ``S`` the largest spatial side of the grid."""
    if grid is None or len(grid) != spatial_dims:
        return [1.0] * spatial_dims
    side = max(grid[-2:])
    return [1.0 / side] * spatial_dims


class ComRoPELayer(BlockRotationLayerPE):
    """One layer's angle matrices: ``base: (H, m, b, b)`` and, for ``ld``, ``theta: (p, m)``."""

    def __init__(self, variant: str, num_heads: int, spatial_dims: int, num_blocks: int, block_size: int,
                 init_std: float, scale: Tensor, num_prefix_tokens: int) -> None:
        super().__init__()
        self.variant = variant
        self.spatial_dims = spatial_dims
        self.base = nn.Parameter(torch.randn(num_heads, num_blocks, block_size, block_size) * init_std)
        if variant == "ld":
            self.theta = nn.Parameter(torch.randn(spatial_dims, num_blocks))
        else:  # ap: block k belongs to axis k mod p
            owner = torch.arange(num_blocks) % spatial_dims
            mask = (owner[None, :] == torch.arange(spatial_dims)[:, None]).float()  # (p, m)
            self.register_buffer("axis_mask", mask, persistent=False)
        self.num_prefix_tokens = num_prefix_tokens
        self.register_buffer("scale", scale, persistent=False)  # (p,) float64

    def generators(self) -> Tensor:
        """Commuting skew generators ``(H, p, m, b, b)``."""
        s = skew(self.base).unsqueeze(1)  # (H, 1, m, b, b)
        w = self.theta if self.variant == "ld" else self.axis_mask  # (p, m)
        return s * w[None, :, :, None, None].to(s.dtype)


@register_pe("comrope", order=100)
class ComRoPE(PositionalEncoding):
    """ComRoPE: commuting trainable angle matrices, ``ld`` (default) or ``ap``; exactly relative."""

    relative = True
    rotation_invariant = False
    distance_decay = False
    learned = True
    options = (
        PEOption("variant", "str", "ld", "ld: theta[a,k] (P - P^T) (linearly dependent); ap: block k on axis k mod p",
                 choices=VARIANTS),
        PEOption("block_size", "int", 8, "size of the skew blocks (head dim must be a multiple)"),
        PEOption("init_std", "float", 1.0, "std of the initial base matrices P"),
        PEOption("coord_scale", "floats", None,
                 "per-axis position scale (default: 1/S on every axis, S the training grid's largest side)"),
    )

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, variant: str = "ld",
                 block_size: int = 8, init_std: float = 1.0, coord_scale: Sequence[float] | None = None) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if variant not in VARIANTS:
            raise PEConfigError(f"comrope variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
        b = int(block_size)
        if b < 2 or self.head_dim % b:
            raise PEConfigError(f"comrope block_size must be >= 2 and divide the head dim {self.head_dim}, got {b}")
        m = self.head_dim // b
        if variant == "ap" and m < spatial_dims:
            raise PEConfigError(f"comrope ap needs at least p={spatial_dims} blocks, head dim {self.head_dim} "
                                f"has {m} of size {b}")
        if not init_std > 0:
            raise PEConfigError(f"comrope init_std must be > 0, got {init_std}")
        self.variant, self.block_size, self.init_std = variant, b, float(init_std)
        scale = comrope_coord_scale(self.train_grid, spatial_dims) if coord_scale is None else coord_scale
        s = grid_coord_scale(scale, spatial_dims)
        self.layers = nn.ModuleList(
            ComRoPELayer(variant, num_heads, spatial_dims, m, b, self.init_std, s.clone(), num_prefix_tokens)
            for _ in range(depth))

    def layer(self, i: int) -> LayerPE:
        return self.layers[i]

    def no_weight_decay(self) -> set[str]:
        names = {f"layers.{i}.base" for i in range(self.depth)}
        if self.variant == "ld":
            names |= {f"layers.{i}.theta" for i in range(self.depth)}
        return names

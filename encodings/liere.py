"""``liere``: Lie rotational position encodings, learned dense rotations of the head channels.

Paper: Ostmeier et al., ICML 2025, "LieRE: Lie Rotational Positional Encodings" (official code:
StanfordMIMI/LieRE). Defaults follow that code's published configurations, read from it (no code
taken from it).

* Token at position ``r`` rotates q and k of head ``h`` by ``R_h(r) = expm(sum_a s_a r_a A[h, a])``
  with learned skew-symmetric generators ``A[h, a]`` (one per head and axis). ``A`` is
  block-diagonal with blocks of ``block_size`` channels; the default block is the whole head
  (LieRE's ``generator_dim`` 64 = its head dim 64, i.e. one dense ``d x d`` generator). Channels past
  the last full block are not rotated (as in the official code).
* Generators are per layer and per head (``per_layer=True``, the default): the paper's method, a
  learned rotation per layer. In the official code both are switches (``rotary_embedding_per_layer``,
  ``rotary_embedding_per_head``) that its argument class leaves off; its CIFAR-100, UCF101 and
  ImageNet-224 configurations turn both on (an earlier ImageNet configuration left both off). With
  both on, that code computes one rotation table per layer, but its transformer's layer loop replaces
  the table by layer 0's slice at the first layer and keeps it (a slice of extent 1 then fails the
  "one per layer" test), so every layer uses layer 0's rotations and the generators of layers
  1 .. L-1 are never used. What the official on/on code computes is therefore ``per_layer=False``
  here (one set of per-head generators shared by all blocks); ``per_layer=True`` follows the paper,
  not the code. Generators are always per head here (the official per-head switch on).
  ``generator_dim`` defaults to 64 there, the head dim of its models, hence one dense block per head.
* Init: the strict upper triangle of each block is drawn from ``U(0, 2 pi)`` and mirrored with a
  minus sign below the diagonal (the official ``triu(raw) - 0.5`` minus its transpose, in which the
  ``-0.5`` cancels). Only the upper triangle is stored as parameters.
* Positions: LieRE feeds positions in ``[0, 1]`` along each axis of the training grid
  (``linspace(0, 1, G_a)``), so ``s_a = 1 / (G_a - 1)`` (1 for an axis of size 1 or with no training
  grid, e.g. point clouds); ``coord_scale`` overrides it (one value per axis). The scale is a fixed
  linear map of pebench's patch-unit coords, so unseen grids and non-grid coords extrapolate
  linearly (the official code instead re-spaces ``linspace`` for other image sizes).
* Not exactly relative (documented departure): ``R(r_i)^T R(r_j) = R(r_j - r_i)`` needs the
  generators of different axes to commute, which LieRE does not impose, so logits depend on the
  absolute position too. They *are* relative for shifts along one axis while the others stay 0
  (one generator commutes with itself), and exactly relative whenever the ``A[h, a]`` commute
  (``comrope`` imposes that).
* The generators are excluded from weight decay (the official code trains with Adam, no decay).
* CLS: prefix tokens get the identity rotation.
* ``product`` (default ``shared``): the rotations of a coords table shared by the batch meet q and k as one
  ``(B, b) x (b, b)`` product per token, head and block; ``broadcast`` (the only path before 2026-12-06,
  and the official code's) lets ``matmul`` broadcast them over the batch, which copies them once per
  sample. Same rotation; the rounding of the rotations' gradient (a sum over the batch) differs, so
  runs of earlier commits reproduce with ``broadcast``. The per-token matrix exponential and its
  backward are the method's floor either way (``bench perf peers``).
* ``expm_grad`` (default ``spectral``): the exponential is ``torch.linalg.matrix_exp`` (the official code's);
  its gradient comes from the eigendecomposition of each (skew-symmetric, so normal) generator
  (:func:`~pebench.encodings._rotation.skew_expm`) rather than matrix_exp's backward, an exponential of a
  matrix twice the size. Same values, gradients equal up to float rounding; ``autograd`` (with
  ``product=broadcast``) is the path before 2026-12-06.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor, nn

from pebench.core.options import Option

from ._rotation import EXPM_GRADS, PRODUCTS, BlockRotationLayerPE, grid_coord_scale, skew_from_upper
from .base import LayerPE, PEConfigError, PositionalEncoding
from .registry import register_pe

__all__ = ["LieRE", "LieRELayer", "liere_coord_scale"]


def liere_coord_scale(grid: Sequence[int] | None, spatial_dims: int) -> list[float]:
    """LieRE's per-axis position scale: ``1 / (G_a - 1)`` (positions in [0, 1] on the training grid)."""
    if grid is None or len(grid) != spatial_dims:
        return [1.0] * spatial_dims
    return [1.0 / (g - 1) if g > 1 else 1.0 for g in grid]


class LieRELayer(BlockRotationLayerPE):
    """Learned generators of one layer: strict upper triangles ``upper: (H, p, m, b(b-1)/2)``."""

    def __init__(self, num_heads: int, spatial_dims: int, num_blocks: int, block_size: int,
                 scale: Tensor, num_prefix_tokens: int) -> None:
        super().__init__()
        n_upper = block_size * (block_size - 1) // 2
        self.upper = nn.Parameter(torch.rand(num_heads, spatial_dims, num_blocks, n_upper) * (2 * math.pi))
        self.block_size = block_size
        self.num_prefix_tokens = num_prefix_tokens
        self.register_buffer("scale", scale, persistent=False)  # (p,) float64

    def generators(self) -> Tensor:
        """Skew-symmetric generators ``(H, p, m, b, b)``."""
        return skew_from_upper(self.upper, self.block_size)


@register_pe("liere", order=90)
class LieRE(PositionalEncoding):
    """LieRE: ``R(r) = expm(sum_a s_a r_a A_a)``, learned dense skew generators per layer and head."""

    relative = False
    rotation_invariant = False
    distance_decay = False
    learned = True
    options = (
        Option("block_size", "int", None,
               "generator block size in channels (default: the head dim, one dense block)"),
        Option("per_layer", "bool", True, "one set of generators per block, as the paper (false: one set shared by "
               "all blocks, what the official code computes with its per-layer switch on)"),
        Option("coord_scale", "floats", None,
               "per-axis position scale (default: 1/(G-1) per training-grid axis, positions in [0, 1])"),
        Option("product", "str", "shared", "shared: apply each token's rotation to the batch as one product per "
               "token, head and block; broadcast: a broadcast matmul that copies the rotations once per sample "
               "(the only path before 2026-12-06; same rotation, the gradient's rounding differs)", choices=PRODUCTS),
        Option("expm_grad", "str", "spectral", "spectral: the matrix exponential's gradient from each generator's "
               "eigendecomposition; autograd: matrix_exp's own backward (the only path before 2026-12-06; same "
               "values, the gradient's rounding differs)", choices=EXPM_GRADS),
    )

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, block_size: int | None = None,
                 per_layer: bool = True, coord_scale: Sequence[float] | None = None, product: str = "shared",
                 expm_grad: str = "spectral") -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if product not in PRODUCTS:
            raise PEConfigError(f"liere product must be one of {', '.join(PRODUCTS)}, got {product!r}")
        if expm_grad not in EXPM_GRADS:
            raise PEConfigError(f"liere expm_grad must be one of {', '.join(EXPM_GRADS)}, got {expm_grad!r}")
        self.product, self.expm_grad = product, expm_grad
        b = self.head_dim if block_size is None else int(block_size)
        if not 2 <= b <= self.head_dim:
            raise PEConfigError(f"liere block_size must be in [2, head dim {self.head_dim}], got {b}")
        self.block_size = b
        self.per_layer = bool(per_layer)
        scale = liere_coord_scale(self.train_grid, spatial_dims) if coord_scale is None else coord_scale
        s = grid_coord_scale(scale, spatial_dims)
        n = depth if self.per_layer else 1
        self.layers = nn.ModuleList(
            LieRELayer(num_heads, spatial_dims, self.head_dim // b, b, s.clone(), num_prefix_tokens) for _ in range(n))
        for lay in self.layers:
            lay.product, lay.expm_grad = product, expm_grad

    def layer(self, i: int) -> LayerPE:
        return self.layers[i if self.per_layer else 0]

    def no_weight_decay(self) -> set[str]:
        return {f"layers.{i}.upper" for i in range(len(self.layers))}

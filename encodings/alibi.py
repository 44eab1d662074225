"""``alibi``: n-D ALiBi, attention with linear biases on the Euclidean distance of coords.

Paper: Press et al., ICLR 2022, "Train Short, Test Long: Attention with Linear Biases Enables
Input Length Extrapolation"; the n-D (Euclidean) form follows its 2-D uses in ViTs.

* Bias ``b_hij = -m_h * ||r_j - r_i||_2`` added to the scaled logits, with the ALiBi head
  slopes ``m_h`` (geometric: ``2^(-8h/H)``, h = 1..H, for H a power of two; otherwise the
  paper's interleaving rule). Slopes are fixed (not learned) and shared by all layers.
* Any grid, unseen grids and non-grid coords: the bias is a function of coords only, and of
  their differences (translation and rotation invariant).
* CLS: prefix rows and columns of the bias are zero.
* The bias is cast to the dtype of the q seen by ``qk`` (so autocast works), else coords' dtype.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
from torch import Tensor

from .base import LayerPE, PositionalEncoding
from .lookhere import BiasLayerPE, entry_distance, pairwise_distance
from .registry import register_pe

__all__ = ["ALiBi", "ALiBiLayer", "alibi_slopes"]


def alibi_slopes(n: int) -> list[float]:
    """ALiBi head slopes (Press et al. 2022, reference implementation)."""
    def pow2(k: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(k) - 3)))
        return [start * start ** i for i in range(k)]

    if math.log2(n).is_integer():
        return pow2(n)
    closest = 2 ** math.floor(math.log2(n))
    return pow2(closest) + pow2(2 * closest)[0::2][: n - closest]


class ALiBiLayer(BiasLayerPE):
    def __init__(self, slopes: Sequence[float], num_prefix_tokens: int) -> None:
        super().__init__()
        self.register_buffer("slopes", torch.tensor(slopes, dtype=torch.float64), persistent=False)  # (H,)
        self.num_prefix_tokens = num_prefix_tokens

    def bias(self, coords: Tensor) -> Tensor:
        c = coords if coords.dim() == 3 else coords.unsqueeze(0)  # (B|1, N, p)
        c = c.to(torch.promote_types(c.dtype, torch.float32))
        dist = pairwise_distance(c)  # (B|1, N, N)
        bias = -self.slopes.to(c.dtype)[:, None, None] * dist.unsqueeze(1)  # (B|1, H, N, N)
        return self._finish(bias)

    def _bias_entry(self, c: Tensor) -> Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]:
        slopes = self.slopes.to(c.dtype)  # (H,)
        return lambda b, h, i, j: -slopes[h] * entry_distance(c, b, i, j)


@register_pe("alibi", order=60)
class ALiBi(PositionalEncoding):
    """n-D ALiBi with fixed geometric slopes (no parameters)."""

    relative = True
    rotation_invariant = True
    distance_decay = True
    learned = False
    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        self.alibi = ALiBiLayer(alibi_slopes(num_heads), num_prefix_tokens)

    def layer(self, i: int) -> LayerPE:
        return self.alibi

"""``alibi``: n-D ALiBi, attention with linear biases on the Euclidean distance of coords.

Paper: Press et al., ICLR 2022, "Train Short, Test Long: Attention with Linear Biases Enables
Input Length Extrapolation"; the n-D (Euclidean) form follows its 2-D uses in ViTs.

* Bias ``b_hij = -m_h * ||r_j - r_i||_2`` added to the scaled logits, with the ALiBi head
  slopes ``m_h`` (geometric: ``2^(-8h/H)``, h = 1..H, for H a power of two; otherwise the
  paper's interleaving rule). Slopes are fixed (not learned) and shared by all layers.
* Any grid, unseen grids and non-grid coords: the bias is a function of coords only, and of
  their differences (translation and rotation invariant).
* CLS: prefix rows and columns of the bias are zero.
* Options (pebench variants; the defaults are the published method, unchanged):
  ``slope_scale`` (float, default 1) multiplies every slope; ``learnable_slopes`` (bool, default
  false) makes the ``H`` slopes one parameter vector shared by all layers (initialised to the
  scaled published slopes, unconstrained in sign, excluded from weight decay). Why they exist:
  ``results/alibi-study/REPORT.md``.
* The bias is cast to the dtype of the q seen by ``qk`` (so autocast works), else coords' dtype.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
from torch import Tensor, nn

from pebench.core.options import Option

from .base import LayerPE, PEConfigError, PositionalEncoding
from .bias import BiasLayerPE, entry_distance, pairwise_distance
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
    def __init__(self, slopes: Sequence[float], num_prefix_tokens: int, learnable: bool = False) -> None:
        super().__init__()
        if learnable:  # float32 parameter (H,), initialised to the given slopes
            self.slopes = nn.Parameter(torch.tensor(slopes, dtype=torch.float32))
        else:
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
    """n-D ALiBi with fixed geometric slopes (no parameters); options: see the module docstring."""

    relative = True
    rotation_invariant = True
    distance_decay = True
    learned = False
    options = (
        Option("slope_scale", "float", 1.0, "multiply the published head slopes 2^(-8h/H) by this factor "
               "(pebench variant; 1 = published)"),
        Option("learnable_slopes", "bool", False, "per-head slopes as one parameter vector shared by all layers, "
               "initialised to the (scaled) published slopes, no weight decay (pebench variant; false = published)"),
    )

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, slope_scale: float = 1.0,
                 learnable_slopes: bool = False) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if not (math.isfinite(slope_scale) and slope_scale > 0):
            raise PEConfigError(f"alibi slope_scale must be a finite number > 0, got {slope_scale}")
        self.slope_scale = float(slope_scale)
        self.learnable_slopes = bool(learnable_slopes)
        slopes = alibi_slopes(num_heads)
        if self.slope_scale != 1.0:
            slopes = [m * self.slope_scale for m in slopes]
        self.alibi = ALiBiLayer(slopes, num_prefix_tokens, learnable=self.learnable_slopes)

    def layer(self, i: int) -> LayerPE:
        return self.alibi

    def no_weight_decay(self) -> set[str]:
        return {"alibi.slopes"} if self.learnable_slopes else set()

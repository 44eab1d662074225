"""``pape-ri``: rotation-invariant Parabolic Position Encoding.

Paper: "PaPE: Parabolic Position Encoding", rotation-invariant variant (docs/ARCHITECTURE.md §3):
``b = 0``, one scalar ``a_i < 0`` per head, ``W_p = s_h I`` a scaled identity per head::

    S_ij = <q_i, k_j> / sqrt(d) + a_i s_h^2 ||r_j - r_i||^2,     a_i = -softplus(A x_i)

The 1/sqrt(d) sits on the content term only (as in ``pape``). The bias depends on distances
only, so it is invariant to translations *and* rotations of the coords (any p).

* ``impl="sdpa"`` (default): ``||r_j - r_i||^2 = |r_j|^2 - 2 r_i.r_j + |r_i|^2``; the last
  term is a per-query constant that cancels in the softmax, so q gets
  ``sqrt(d) * a_i s^2 [1, -2 r_i]`` and k gets ``[|r_j|^2, r_j]``: ``p + 1`` extra dims
  (``+1`` indicator column with a CLS token, exactly as in ``pape``), padded to a multiple
  of 8. Coords are centred first. ``impl="naive"``: explicit ``(B, H, T, T)`` logits via
  ``bias`` (see ``pape``).
* CLS / prefix tokens: zero PE terms (zero augmentation plus the indicator column).
* Non-grid tokens (points) and unseen grids: a function of coords only.
* Init: ``A`` weights ``N(0, 0.02^2)``, bias ``softplus^-1(1)`` (``a ~ -1``); learnable
  per-head scale ``s_h = 2 / G`` (G = largest training-grid side, 8 without a grid), so the
  penalty is about -1 at half the grid and -4 across it; ``s`` is excluded from weight decay.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import LayerPE, PEConfigError, PositionalEncoding
from .options import PEOption
from .pape import _SOFTPLUS_INV_1, PAPE_IMPLS, AugmentedLayerPE, neg_softplus
from .registry import register_pe

__all__ = ["PaPERI", "PaPERILayer"]


class PaPERILayer(AugmentedLayerPE):
    """One block: ``A: (H, D)``, per-head scale ``s: (H,)``."""

    def __init__(self, dim: int, num_heads: int, spatial_dims: int, num_prefix_tokens: int, impl: str,
                 scale: float) -> None:
        super().__init__(dim // num_heads, num_prefix_tokens, impl)
        self.num_heads = num_heads
        self.extra_dims = spatial_dims + 1  # q: a s^2 [1, -2 r_i], k: [|r_j|^2, r_j]
        self.a_weight = nn.Parameter(torch.empty(num_heads, dim))
        self.a_bias = nn.Parameter(torch.full((num_heads,), _SOFTPLUS_INV_1))
        self.scale = nn.Parameter(torch.full((num_heads,), float(scale)))  # (H,)
        nn.init.trunc_normal_(self.a_weight, std=0.02)

    def coefficient(self, x: Tensor) -> Tensor:
        """``a_i s_h^2``: ``(B, H, N)`` from tokens ``(B, N, D)``."""
        a = neg_softplus(F.linear(x, self.a_weight.to(x.dtype), self.a_bias.to(x.dtype)))  # (B, N, H)
        return a.transpose(1, 2) * self.scale.to(x.dtype)[:, None] ** 2

    def key_features(self, r: Tensor, width: int) -> Tensor:
        ka = torch.cat([(r * r).sum(-1, keepdim=True), r], dim=-1)  # (B, N, p + 1): [|r_j|^2, r_j]
        return F.pad(ka, (0, width - ka.shape[-1])).unsqueeze(1)

    def augment(self, x: Tensor, r: Tensor, width: int, scale: float,
                need_const: bool) -> tuple[Tensor, Tensor | None]:
        g = self.coefficient(x).unsqueeze(-1)  # (B, H, N, 1)
        rr = r.unsqueeze(1)  # (B, 1, N, p)
        base = torch.cat([torch.full_like(rr[..., :1], scale), (-2 * scale) * rr], dim=-1)  # (B, 1, N, p + 1)
        qa = g * F.pad(base, (0, width - self.extra_dims))  # (B, H, N, width)
        const = (g.squeeze(-1) * (rr * rr).sum(-1)) if need_const else None  # (B, H, N)
        return qa, const

    def logits(self, x: Tensor, r: Tensor) -> Tensor:
        g = self.coefficient(x)  # (B, H, N)
        d2 = ((r.unsqueeze(1) - r.unsqueeze(2)) ** 2).sum(-1)  # (B, N, N)
        return g.unsqueeze(-1) * d2.unsqueeze(1)  # (B, H, N, N)


@register_pe("pape-ri")
class PaPERI(PositionalEncoding):
    """Rotation-invariant PaPE. Options: ``impl`` ("sdpa" | "naive"), ``ref_extent`` (G)."""

    options = (
        PEOption("impl", "str", "sdpa", "sdpa: exact fold into q/k (no N x N tensor); naive: explicit N x N logits",
                 PAPE_IMPLS),
        PEOption("ref_extent", "float", None, "G: per-head scale init 2 / G (default: largest training-grid side, 8 without)"),
    )

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, impl: str = "sdpa",
                 ref_extent: float | None = None) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if impl not in PAPE_IMPLS:
            raise PEConfigError(f"unknown PaPE impl {impl!r}; available: {', '.join(PAPE_IMPLS)}")
        G = float(ref_extent) if ref_extent is not None else float(max(self.train_grid) if self.train_grid else 8)
        if G <= 0:
            raise PEConfigError(f"pape-ri ref_extent must be > 0, got {G}")
        self.impl = impl
        self.layers = nn.ModuleList(
            PaPERILayer(dim, num_heads, spatial_dims, num_prefix_tokens, impl, 2.0 / G) for _ in range(depth))

    def layer(self, i: int) -> LayerPE:
        return self.layers[i]

    def no_weight_decay(self) -> set[str]:
        return {f"layers.{i}.scale" for i in range(self.depth)}

"""``pape-ri``: rotation-invariant Parabolic Position Encoding.

Paper: "PaPE: Parabolic Position Encoding" (DTU-PAS), rotation-invariant variant; official
harness: github.com/DTU-PAS/parabolic-position-encoding (``pape/nn/positions/pape_ri.py``).
``b = 0``, one scalar ``a_i < 0`` per head, ``W_p = s_h I`` a scaled identity per head::

    S_ij = ( <q_i, k_j> + a_i s_h^2 ||r_j - r_i||^2 ) / sqrt(d),     a_i = -softplus(A x_i)

The bias depends on distances only, so it is invariant to translations *and* rotations of the
coords (any p). Options (defaults = the published method):

* ``logit_scale``: "all" (default, published) ``1/sqrt(d)`` on the whole logit as above;
  "content": on ``<q_i, k_j>`` only, the PE term unscaled (as in ``pape``).
* ``init``: "published" (default): ``A`` ``(H, D)`` drawn as ``nn.Linear``'s default
  ``U(+-1/sqrt(D))``, no bias, ``s_h ~ U(-1/sqrt(p), 1/sqrt(p))``. "pebench": ``A`` weights
  ``N(0, 0.02^2)``, bias ``softplus^-1(1)`` (``a ~ -1``), ``s_h = 2 / G`` (G = ``ref_extent``,
  default the largest training-grid side, 8 without a grid: the penalty is about -1 at half
  the grid and -4 across it).
* ``head_scale``: "fixed" (default, published): ``s`` is a buffer, never trained; "learnable":
  ``s`` is a parameter (excluded from weight decay).

* ``impl="sdpa"`` (default): ``||r_j - r_i||^2 = |r_j|^2 - 2 r_i.r_j + |r_i|^2``; the last
  term is a per-query constant that cancels in the softmax, so q gets
  ``c a_i s^2 [1, -2 r_i]`` (``c = 1`` for ``logit_scale="all"``, ``sqrt(d)`` for "content",
  against SDPA's fixed ``1/sqrt(d)``) and k gets ``[|r_j|^2, r_j]``: ``p + 1`` extra dims
  (``+1`` indicator column with a CLS token, exactly as in ``pape``), padded to a multiple
  of 8. Coords are centred first. ``impl="naive"``: explicit ``(B, H, T, T)`` logits via
  ``bias`` (see ``pape``).
* CLS / prefix tokens: zero PE terms (zero augmentation plus the indicator column).
* Non-grid tokens (points) and unseen grids: a function of coords only.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pebench.core.options import Option

from .base import LayerPE, PEConfigError, PositionalEncoding
from .pape import (
    PAPE_IMPLS,
    PAPE_INITS,
    PAPE_LOGIT_SCALES,
    SOFTPLUS_INV_1,
    AugmentedLayerPE,
    check_variant,
    linear_default_init_,
    neg_softplus,
)
from .registry import register_pe

__all__ = ["PaPERI", "PaPERILayer", "HEAD_SCALES"]

#: ``head_scale``: "fixed" = a random buffer (published); "learnable" = a parameter.
HEAD_SCALES = ("fixed", "learnable")


class PaPERILayer(AugmentedLayerPE):
    """One block: ``A: (H, D)`` (+ bias under ``init="pebench"``), per-head scale ``s: (H,)``
    (a buffer when ``head_scale="fixed"``, a parameter when "learnable")."""

    def __init__(self, dim: int, num_heads: int, spatial_dims: int, num_prefix_tokens: int, impl: str,
                 init: str = "published", logit_scale: str = "all", head_scale: str = "fixed",
                 scale: float | None = None) -> None:
        super().__init__(dim // num_heads, num_prefix_tokens, impl, logit_scale)
        check_variant("pape-ri", init, logit_scale)
        if head_scale not in HEAD_SCALES:
            raise PEConfigError(f"unknown pape-ri head_scale {head_scale!r}; available: {', '.join(HEAD_SCALES)}")
        H = num_heads
        self.num_heads = H
        self.init = init
        self.extra_dims = spatial_dims + 1  # q: a s^2 [1, -2 r_i], k: [|r_j|^2, r_j]
        self.a_weight = nn.Parameter(torch.empty(H, dim))  # A (H, D)
        if init == "published":  # nn.Linear(D, H, bias=False); s ~ U(+-1/sqrt(p))
            linear_default_init_(self.a_weight, dim)
            self.register_buffer("a_bias", torch.zeros(H), persistent=False)  # no bias
            s = linear_default_init_(torch.empty(H), spatial_dims)  # (H,)
        else:
            if scale is None:
                raise PEConfigError("pape-ri init='pebench' needs the scale 2 / G")
            self.a_bias = nn.Parameter(torch.full((H,), SOFTPLUS_INV_1))
            nn.init.trunc_normal_(self.a_weight, std=0.02)
            s = torch.full((H,), float(scale))
        if head_scale == "learnable":
            self.scale = nn.Parameter(s)  # (H,)
        else:
            self.register_buffer("scale", s)  # (H,) fixed random buffer, saved with the model

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


@register_pe("pape-ri", order=80)
class PaPERI(PositionalEncoding):
    """Rotation-invariant PaPE; the default is the published method (see the module docstring)."""

    relative = True
    rotation_invariant = True
    distance_decay = True
    learned = True
    options = (
        Option("impl", "str", "sdpa", "sdpa: exact fold into q/k (no N x N tensor); naive: explicit N x N logits",
               PAPE_IMPLS),
        Option("init", "str", "published", "published: nn.Linear default init of A, no bias, s ~ U(+-1/sqrt(p)); "
               "pebench: a ~ -1 with a bias, s = 2 / G", PAPE_INITS),
        Option("logit_scale", "str", "all", "all: 1/sqrt(d) on the whole augmented logit (published); "
               "content: on <q,k> only, PE term unscaled", PAPE_LOGIT_SCALES),
        Option("head_scale", "str", "fixed", "fixed: per-head scale s a random buffer (published); "
               "learnable: a parameter", HEAD_SCALES),
        Option("ref_extent", "float", None, "init=pebench only: G in s = 2 / G (default: largest training-grid "
               "side, 8 without a grid)"),
    )

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, impl: str = "sdpa",
                 init: str = "published", logit_scale: str = "all", head_scale: str = "fixed",
                 ref_extent: float | None = None) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if impl not in PAPE_IMPLS:
            raise PEConfigError(f"unknown PaPE impl {impl!r}; available: {', '.join(PAPE_IMPLS)}")
        check_variant("pape-ri", init, logit_scale)
        if head_scale not in HEAD_SCALES:
            raise PEConfigError(f"unknown pape-ri head_scale {head_scale!r}; available: {', '.join(HEAD_SCALES)}")
        scale = None
        if init == "pebench":
            G = float(ref_extent) if ref_extent is not None else float(max(self.train_grid) if self.train_grid else 8)
            if G <= 0:
                raise PEConfigError(f"pape-ri ref_extent must be > 0, got {G}")
            scale = 2.0 / G
        elif ref_extent is not None:
            raise PEConfigError("pape-ri ref_extent applies to init=pebench only")
        self.impl = impl
        self.init = init
        self.logit_scale = logit_scale
        self.head_scale = head_scale
        self.layers = nn.ModuleList(
            PaPERILayer(dim, num_heads, spatial_dims, num_prefix_tokens, impl, init, logit_scale, head_scale, scale)
            for _ in range(depth))

    def layer(self, i: int) -> LayerPE:
        return self.layers[i]

    def no_weight_decay(self) -> set[str]:
        return {f"layers.{i}.scale" for i in range(self.depth)} if self.head_scale == "learnable" else set()

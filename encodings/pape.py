"""``pape``: Parabolic Position Encoding (PaPE).

Paper: "PaPE: Parabolic Position Encoding" (DESIGN.md §3 gives the formula this module follows).

Logits of head ``h`` (indices ``h`` dropped)::

    S_ij = <q_i, k_j> / sqrt(d) + <a_i, D_ij**2> + <b_i, D_ij>,     D_ij = W_p (r_j - r_i)  (m,)
    a_i = -softplus(A x_i)  (m,),   b_i = B x_i  (m,),   W_p: (m, p) learnable per head

``x_i`` is the block's normalised input token, ``r`` its coords; ``m`` parabolas (default 50).
**Where 1/sqrt(d) sits:** only on the content term ``<q_i, k_j>``; the PaPE terms are added
unscaled (SDPA's ``scale`` stays ``1/sqrt(d)`` of the original head dim, and the augmented q
columns are multiplied by ``sqrt(d)`` to cancel it).

Two implementations of the same module (``impl``):

* ``impl="sdpa"`` (default) never forms an N x N tensor. With ``M_i = sum_m a_im w_m w_m^T``
  (symmetric p x p) and ``c_i = sum_m b_im w_m``::

      <a_i, D_ij**2> + <b_i, D_ij> = r_j^T M_i r_j - 2 r_i^T M_i r_j + c_i^T r_j + const_i,
      const_i = r_i^T M_i r_i - c_i^T r_i,

  and ``const_i`` drops out of the softmax over j. So q gets ``sqrt(d) * [upper triangle of
  M_i (off-diagonals doubled), c_i - 2 M_i r_i]`` and k gets ``[r_j r_j^T monomials, r_j]``:
  ``p(p+1)/2 + p`` extra dims (5 for 2-D, 9 for 3-D), then both are zero-padded to a multiple
  of 8 total head dim. Coords are centred (mean over the tokens) first; this is exact (the
  logits depend on ``r_j - r_i`` only) and avoids cancellation in float32.
* ``impl="naive"`` forms the full PaPE logits ``(B, H, T, T)`` in ``qk`` (O(N^2 m), from the
  expansion over the m parabolas), stashes them, and returns them from ``bias`` (``qk`` leaves
  q, k unchanged); ``bias`` must be called right after ``qk`` (the Attention does). For tests
  and attention maps.

CLS / prefix tokens: no PE term between a prefix token and any token (zero rows and columns of
the naive logits). In the sdpa path prefix queries and keys get zero augmentation, except for
one extra *indicator* column when ``num_prefix_tokens > 0``: ``k`` gets 1 on prefix keys (0 on
patch keys) and ``q_i`` gets ``-sqrt(d) * const_i``. Without it, dropping ``const_i`` would
shift patch keys against the prefix key and the sdpa path would not equal the naive one; with
it the two are exactly equal (``p(p+1)/2 + p + 1`` extra dims, still inside the padding to 8).

Non-grid tokens and unseen grids: everything is a function of coords (any p), so point
clouds and any grid work as-is. Translation invariant; not rotation invariant when ``b != 0``
(see ``pape-ri``).

Initialisation (chosen so a fresh model starts with a mild locality prior and trains like a
plain ViT): ``A`` and ``B`` weights ``N(0, 0.02^2)`` (near zero), ``B`` bias 0, ``A`` bias
``softplus^-1(1)`` so ``a ~ -1``; ``W_p ~ N(0, sigma^2)`` with ``sigma = 2 / (G sqrt(m))`` and
``G`` the largest side of the training grid (8 without a grid, e.g. point clouds scaled to
[-4, 4]). Then ``E[<a, D^2>] ~ -4 |r_j - r_i|^2 / G^2``: about -1 at half the grid, -4 across
it. ``A``/``B`` are raw parameters (not ``nn.Linear``) so the backbone's Linear re-init does
not overwrite them. ``W_p`` is excluded from weight decay (``layers.{l}.wp``).
"""
from __future__ import annotations

import abc
import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import LayerPE, PEConfigError, PositionalEncoding, batch_coords
from .registry import register_pe

__all__ = ["PaPE", "PaPELayer", "AugmentedLayerPE", "centred_coords", "pad_to_multiple", "PAPE_IMPLS"]

PAPE_IMPLS = ("sdpa", "naive")
_SOFTPLUS_INV_1 = math.log(math.e - 1.0)  # softplus(x) = 1


def centred_coords(coords: Tensor, batch_size: int, dtype: torch.dtype) -> Tensor:
    """Coords ``(B, N, p)`` in a float dtype at least float32, minus their mean over tokens."""
    c = batch_coords(coords, batch_size).to(torch.promote_types(dtype, torch.float32))
    return c - c.mean(dim=1, keepdim=True)


def pad_to_multiple(t: Tensor, multiple: int = 8) -> Tensor:
    """Zero-pad the last dim of ``t`` to a multiple of ``multiple``."""
    extra = (-t.shape[-1]) % multiple
    return F.pad(t, (0, extra)) if extra else t


class AugmentedLayerPE(LayerPE, abc.ABC):
    """Shared machinery of PaPE layers: ``impl`` switch, prefix handling, q/k augmentation."""

    def __init__(self, head_dim: int, num_prefix_tokens: int, impl: str) -> None:
        super().__init__()
        if impl not in PAPE_IMPLS:
            raise PEConfigError(f"unknown PaPE impl {impl!r}; available: {', '.join(PAPE_IMPLS)}")
        self.head_dim = head_dim
        self.num_prefix_tokens = num_prefix_tokens
        self.impl = impl
        self._stash: Tensor | None = None

    # subclasses implement these two --------------------------------------------------------
    @abc.abstractmethod
    def augment(self, x: Tensor, r: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Patch tokens only. x ``(B, N, D)``, centred r ``(B, N, p)`` ->
        q_aug ``(B, H, N, e)``, k_aug ``(B, H|1, N, e)`` (exact up to a per-query constant),
        const ``(B, H, N)`` (the dropped per-query constant)."""

    @abc.abstractmethod
    def logits(self, x: Tensor, r: Tensor) -> Tensor:
        """Patch tokens only: the full PaPE logits ``(B, H, N, N)``."""

    # ------------------------------------------------------------------------------------------
    def qk(self, q: Tensor, k: Tensor, x: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        P = self.num_prefix_tokens
        B, H, T, d = q.shape
        xs = x[:, P:]  # (B, N, D) patch tokens
        r = centred_coords(coords, B, q.dtype)  # (B, N, p)
        if self.impl == "naive":
            self._stash = F.pad(self.logits(xs.to(r.dtype), r), (P, 0, P, 0)).to(q.dtype)  # (B, H, T, T)
            return q, k
        qa, ka, const = self.augment(xs.to(r.dtype), r)  # (B, H, N, e), (B, H|1, N, e), (B, H, N)
        ka = ka.expand(B, H, -1, -1)
        if P:
            # indicator column: prefix keys 1, patch keys 0; patch queries -const_i.
            qa = torch.cat([qa, -const.unsqueeze(-1)], dim=-1)
            ka = torch.cat([ka, torch.zeros_like(ka[..., :1])], dim=-1)
            qa = F.pad(qa, (0, 0, P, 0))  # prefix queries: zero augmentation
            kp = torch.zeros(B, H, P, ka.shape[-1], dtype=ka.dtype, device=ka.device)
            kp[..., -1] = 1.0
            ka = torch.cat([kp, ka], dim=2)  # (B, H, T, e + 1)
        qa = qa * math.sqrt(self.head_dim)  # cancels SDPA's 1/sqrt(d)
        q = pad_to_multiple(torch.cat([q, qa.to(q.dtype)], dim=-1))  # (B, H, T, d')
        k = pad_to_multiple(torch.cat([k, ka.to(k.dtype)], dim=-1))
        return q, k

    def bias(self, coords: Tensor) -> Tensor | None:
        if self.impl != "naive":
            return None
        if self._stash is None:
            raise RuntimeError("PaPE impl='naive': bias() must follow qk() (it returns the logits qk built)")
        out, self._stash = self._stash, None
        return out


class PaPELayer(AugmentedLayerPE):
    """One block's PaPE: ``A, B: (H*m, D)`` maps of x, ``W_p: (H, m, p)``."""

    def __init__(self, dim: int, num_heads: int, spatial_dims: int, num_parabolas: int, num_prefix_tokens: int,
                 impl: str, wp_std: float) -> None:
        super().__init__(dim // num_heads, num_prefix_tokens, impl)
        H, m, p = num_heads, num_parabolas, spatial_dims
        self.num_heads, self.m, self.p = H, m, p
        self.a_weight = nn.Parameter(torch.empty(H * m, dim))
        self.a_bias = nn.Parameter(torch.full((H * m,), _SOFTPLUS_INV_1))
        self.b_weight = nn.Parameter(torch.empty(H * m, dim))
        self.b_bias = nn.Parameter(torch.zeros(H * m))
        self.wp = nn.Parameter(torch.randn(H, m, p) * wp_std)  # (H, m, p)
        nn.init.trunc_normal_(self.a_weight, std=0.02)
        nn.init.trunc_normal_(self.b_weight, std=0.02)
        iu = torch.triu_indices(p, p)
        self.register_buffer("iu", iu, persistent=False)  # (2, p(p+1)/2)

    def coefficients(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """a, b ``(B, H, N, m)`` from tokens ``(B, N, D)``."""
        B, N, _ = x.shape
        a = -F.softplus(F.linear(x, self.a_weight.to(x.dtype), self.a_bias.to(x.dtype)))
        b = F.linear(x, self.b_weight.to(x.dtype), self.b_bias.to(x.dtype))
        return (a.view(B, N, self.num_heads, self.m).transpose(1, 2),
                b.view(B, N, self.num_heads, self.m).transpose(1, 2))

    def augment(self, x: Tensor, r: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        a, b = self.coefficients(x)  # (B, H, N, m)
        w = self.wp.to(x.dtype)  # (H, m, p)
        ww = (w.unsqueeze(-1) * w.unsqueeze(-2)).flatten(-2)  # (H, m, p*p)
        M = torch.matmul(a, ww).unflatten(-1, (self.p, self.p))  # (B, H, N, p, p)
        c = torch.matmul(b, w)  # (B, H, N, p)
        i0, i1 = self.iu[0], self.iu[1]
        mult = torch.where(i0 == i1, 1.0, 2.0).to(x.dtype)  # off-diagonals doubled
        q_quad = M[..., i0, i1] * mult  # (B, H, N, p(p+1)/2)
        Mr = (M * r.unsqueeze(1).unsqueeze(-2)).sum(-1)  # (B, H, N, p): M_i r_i (no tiny-batch bmm)
        q_lin = c - 2 * Mr  # (B, H, N, p)
        k_quad = r[..., i0] * r[..., i1]  # (B, N, p(p+1)/2)
        qa = torch.cat([q_quad, q_lin], dim=-1)  # (B, H, N, e)
        ka = torch.cat([k_quad, r], dim=-1).unsqueeze(1)  # (B, 1, N, e)
        rr = r.unsqueeze(1)  # (B, 1, N, p)
        const = (Mr * rr).sum(-1) - (c * rr).sum(-1)  # (B, H, N)
        return qa, ka, const

    def logits(self, x: Tensor, r: Tensor) -> Tensor:
        a, b = self.coefficients(x)  # (B, H, N, m)
        u = torch.einsum("bnp,hmp->bhnm", r, self.wp.to(x.dtype))  # (B, H, N, m): W_p r
        # sum_m a_im (u_jm - u_im)^2 + b_im (u_jm - u_im), expanded over m (N x N, never N x N x m)
        s = torch.matmul(a, (u * u).transpose(-1, -2))  # (B, H, N, N)
        s = s + torch.matmul(b - 2 * a * u, u.transpose(-1, -2))
        return s + ((a * u - b) * u).sum(-1, keepdim=True)  # + const_i


@register_pe("pape")
class PaPE(PositionalEncoding):
    """PaPE. Options: ``num_parabolas`` (m, 50), ``impl`` ("sdpa" | "naive"),
    ``wp_std`` (default ``2 / (G sqrt(m))``), ``ref_extent`` (G; default max(grid) or 8)."""

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, num_parabolas: int = 50,
                 impl: str = "sdpa", wp_std: float | None = None, ref_extent: float | None = None) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if int(num_parabolas) != num_parabolas or num_parabolas < 1:
            raise PEConfigError(f"pape num_parabolas must be a positive integer, got {num_parabolas}")
        if impl not in PAPE_IMPLS:
            raise PEConfigError(f"unknown PaPE impl {impl!r}; available: {', '.join(PAPE_IMPLS)}")
        G = float(ref_extent) if ref_extent is not None else float(max(self.train_grid) if self.train_grid else 8)
        if G <= 0:
            raise PEConfigError(f"pape ref_extent must be > 0, got {G}")
        m = int(num_parabolas)
        self.num_parabolas = m
        self.impl = impl
        std = wp_std if wp_std is not None else 2.0 / (G * math.sqrt(m))
        self.layers = nn.ModuleList(
            PaPELayer(dim, num_heads, spatial_dims, m, num_prefix_tokens, impl, std) for _ in range(depth))

    def layer(self, i: int) -> LayerPE:
        return self.layers[i]

    def no_weight_decay(self) -> set[str]:
        return {f"layers.{i}.wp" for i in range(self.depth)}

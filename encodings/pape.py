"""``pape``: Parabolic Position Encoding (PaPE).

Paper: "PaPE: Parabolic Position Encoding" (DTU-PAS); official harness:
github.com/DTU-PAS/parabolic-position-encoding (``pape/nn/positions/pape_naive.py``,
``pape/nn/encoder.py``), which fixes the parameterisation this module follows by default.

Logits of head ``h`` (indices ``h`` dropped), ``d`` the head dim::

    S_ij = ( <q_i, k_j> + <a_i, D_ij**2> + <b_i, D_ij> ) / sqrt(d),     D_ij = W_p (r_j - r_i)  (m,)
    a_i = -softplus(A x_i)  (m,),   b_i = B x_i  (m,),   W_p: (m, p) per head

``x_i`` is the block's normalised input token (the attention's LayerNorm output), ``r`` its
coords (patch units); ``m`` parabolas (default 50). The harness writes the PE term as
``-<softplus(A x_i), D**2> - <B x_i, D>``; the sign of ``b`` is a reparameterisation of ``B``
(whose init is symmetric), so pebench's ``+<b, D>`` is the same model.

Options that define the variant (``variant_label`` names non-default ones):

* ``logit_scale="all"`` (default, published): ``1/sqrt(d)`` multiplies the whole augmented
  logit, PE terms included. ``"content"``: only ``<q_i, k_j>`` is scaled, the PE terms are
  added unscaled (pebench's earlier default).
* ``init="published"`` (default): ``A``, ``B`` ``(H*m, D)`` and ``W_p`` ``(H, m, p)`` drawn as
  ``nn.Linear``'s default init, ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` (fan_in ``D`` for ``A``,
  ``B`` and ``p`` for ``W_p``), and no biases. ``"pebench"`` (pebench's earlier default, a mild
  locality prior): ``A``, ``B`` weights ``N(0, 0.02^2)``, ``B`` bias 0, ``A`` bias
  ``softplus^-1(1)`` so ``a ~ -1``, ``W_p ~ N(0, sigma^2)`` with ``sigma = wp_std``, default
  ``2 / (G sqrt(m))``, ``G = ref_extent`` (default the largest side of the training grid, 8
  without a grid); then ``E[<a, D^2>] ~ -4 |r_j - r_i|^2 / G^2``. ``wp_std`` and
  ``ref_extent`` apply to ``init="pebench"`` only. (Biases are zero buffers, not parameters,
  under ``"published"``.)

Mean PE logit ``<a_i, D_ij**2> + <b_i, D_ij>`` (after the variant's scale) at init, vit-nano
(D = 128, 4 heads, d = 32, m = 50), LayerNorm'd Gaussian tokens, 16 x 16 grid, averaged over
heads, queries and 4 seeds, at distance 1 / 7 / 14 patches along an axis:
published (``init=published``, ``logit_scale=all``) -1.05 / -51.3 / -205;
pebench (``init=pebench``, ``logit_scale=content``) -0.015 / -0.72 / -2.89.
Extrapolation and locality depend on exactly this scale.

``A``/``B``/``W_p`` are raw parameters (not ``nn.Linear``) so the backbone's ``nn.Linear``
re-initialisation does not overwrite them. Weight decay: under ``init="published"`` ``W_p``
is decayed like ``A`` and ``B`` (the harness's AdamW decays every parameter); under
``init="pebench"`` ``W_p`` is excluded (``layers.{l}.wp``), as before.

Two implementations of the same module (``impl``):

* ``impl="sdpa"`` (default) never forms an N x N tensor. With ``M_i = sum_m a_im w_m w_m^T``
  (symmetric p x p) and ``c_i = sum_m b_im w_m``::

      <a_i, D_ij**2> + <b_i, D_ij> = r_j^T M_i r_j - 2 r_i^T M_i r_j + c_i^T r_j + const_i,
      const_i = r_i^T M_i r_i - c_i^T r_i,

  and ``const_i`` drops out of the softmax over j. So q gets ``s * [upper triangle of M_i
  (off-diagonals doubled), c_i - 2 M_i r_i]`` and k gets ``[r_j r_j^T monomials, r_j]``:
  ``p(p+1)/2 + p`` extra dims (5 for 2-D, 9 for 3-D), then both are zero-padded to a multiple
  of 8 total head dim. SDPA's ``scale`` stays ``1/sqrt(d)`` of the original head dim, so
  ``s = 1`` with ``logit_scale="all"`` (the PE columns are simply not divided out) and
  ``s = sqrt(d)`` with ``"content"`` (cancelling SDPA's scale on them). Coords are centred
  (mean over the tokens) first; this is exact (the logits depend on ``r_j - r_i`` only) and
  avoids cancellation in float32. Implementation (issue #7): ``B`` is linear, so it is folded
  through ``W_p`` (``c_i`` costs a ``(p, D)`` map per head, not ``m`` outputs); the per-token
  work is one autograd node with a hand-written backward (:mod:`._pape_fused`, tested against
  the composite ``augment_reference``); k's columns depend on the coords only and are cached
  per coords tensor.
* ``impl="naive"`` forms the full PaPE logits ``(B, H, T, T)`` in ``qk`` (O(N^2 m), from the
  expansion over the m parabolas, times ``1/sqrt(d)`` under ``logit_scale="all"``), stashes
  them, and returns them from ``bias`` (``qk`` leaves q, k unchanged); ``bias`` must be called
  right after ``qk`` (the Attention does). For tests and attention maps.

CLS / prefix tokens: no PE term between a prefix token and any token (zero rows and columns of
the naive logits). (The harness instead gives its CLS token the position 0; pebench's
convention keeps position off prefix tokens for every PE.) In the sdpa path prefix queries and
keys get zero augmentation, except for one extra *indicator* column when
``num_prefix_tokens > 0``: ``k`` gets 1 on prefix keys (0 on patch keys) and ``q_i`` gets
``-s * const_i``. Without it, dropping ``const_i`` would shift patch keys against the prefix
key and the sdpa path would not equal the naive one; with it the two are exactly equal
(``p(p+1)/2 + p + 1`` extra dims, still inside the padding to 8).

Non-grid tokens and unseen grids: everything is a function of coords (any p), so point
clouds and any grid work as-is. Translation invariant; not rotation invariant when ``b != 0``
(see ``pape-ri``).
"""
from __future__ import annotations

import abc
import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pebench.core.options import Option

from ._pape_fused import fold_weights, neg_softplus_forward, pape_query_augment
from .base import CoordsCache, LayerPE, PEConfigError, PositionalEncoding, batch_coords
from .registry import register_pe

__all__ = ["PaPE", "PaPELayer", "AugmentedLayerPE", "centred_coords", "pad_to_multiple", "PAPE_IMPLS",
           "PAPE_INITS", "PAPE_LOGIT_SCALES", "pape_extra_dims", "augmented_width", "linear_default_init_",
           "SOFTPLUS_INV_1"]

PAPE_IMPLS = ("sdpa", "naive")
#: ``init``: "published" = the official harness (nn.Linear default init, no biases); "pebench" = pebench's prior.
PAPE_INITS = ("published", "pebench")
#: ``logit_scale``: "all" = 1/sqrt(d) on the whole augmented logit (published); "content" = on <q, k> only.
PAPE_LOGIT_SCALES = ("all", "content")
#: softplus^-1(1): the bias at which a softplus-gated scale starts at 1
SOFTPLUS_INV_1 = math.log(math.e - 1.0)  # softplus(x) = 1


def centred_coords(coords: Tensor, batch_size: int, dtype: torch.dtype) -> Tensor:
    """Coords ``(B, N, p)`` in a float dtype at least float32, minus their mean over tokens."""
    c = batch_coords(coords, batch_size).to(torch.promote_types(dtype, torch.float32))
    return c - c.mean(dim=1, keepdim=True)


def linear_default_init_(t: Tensor, fan_in: int) -> Tensor:
    """In place: ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``, the distribution ``nn.Linear`` gives its
    weight by default (``kaiming_uniform_(a=sqrt(5))``), for a raw parameter of any shape."""
    bound = 1.0 / math.sqrt(fan_in)
    with torch.no_grad():
        return t.uniform_(-bound, bound)


def check_variant(name: str, init: str, logit_scale: str) -> None:
    """Validate PaPE's ``init`` / ``logit_scale`` (PaPE and PaPE-RI)."""
    if init not in PAPE_INITS:
        raise PEConfigError(f"unknown {name} init {init!r}; available: {', '.join(PAPE_INITS)}")
    if logit_scale not in PAPE_LOGIT_SCALES:
        raise PEConfigError(f"unknown {name} logit_scale {logit_scale!r}; available: {', '.join(PAPE_LOGIT_SCALES)}")


def pad_to_multiple(t: Tensor, multiple: int = 8) -> Tensor:
    """Zero-pad the last dim of ``t`` to a multiple of ``multiple``."""
    extra = (-t.shape[-1]) % multiple
    return F.pad(t, (0, extra)) if extra else t


def pape_extra_dims(spatial_dims: int) -> int:
    """PaPE's exact augmentation width for ``p`` coords: ``p(p+1)/2 + p`` (5 in 2-D, 9 in 3-D)."""
    return spatial_dims * (spatial_dims + 1) // 2 + spatial_dims


def augmented_width(head_dim: int, extra_dims: int) -> int:
    """Extra q/k columns including the zero padding that makes ``head_dim + width`` a multiple of 8."""
    return extra_dims + (-(head_dim + extra_dims)) % 8


class _NegSoftplus(torch.autograd.Function):
    """``-softplus(x)`` as ``log(sigmoid(|x|)) - max(x, 0)`` with the backward ``-sigmoid(x)``.

    Deliberately not ``F.softplus`` (nor ``F.logsigmoid``): on CPU both go through ``log1p``,
    which torch does not vectorise (0.49 ms for 1024 x 50 floats vs 0.09 ms here, 1 thread).
    ``log(sigmoid(|x|)) = -log(1 + e)`` with ``e = exp(-|x|) <= 1`` differs from ``-log1p(e)`` by
    at most one ulp of 1 (1.2e-7 in float32).
    """

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:  # type: ignore[override]
        ctx.save_for_backward(x)
        return neg_softplus_forward(x)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:  # type: ignore[override]
        (x,) = ctx.saved_tensors
        return -grad * torch.sigmoid(x)


def neg_softplus(x: Tensor) -> Tensor:
    """``-softplus(x)`` (PaPE's curvature ``a = -softplus(A x)``), fast on CPU; see ``_NegSoftplus``."""
    return _NegSoftplus.apply(x)


class AugmentedLayerPE(LayerPE, abc.ABC):
    """Shared machinery of PaPE layers: ``impl`` switch, prefix handling, q/k augmentation.

    ``logit_scale``: "all" puts ``1/sqrt(d)`` on the PE terms too (``pe_factor = 1/sqrt(d)``),
    "content" leaves them unscaled (``pe_factor = 1``); SDPA always scales by ``1/sqrt(d)``, so
    q's PE columns are multiplied by ``pe_factor * sqrt(d)`` (1 or ``sqrt(d)``).

    Subclasses set ``extra_dims`` (e: the width of the exact augmentation) and implement
    ``key_features``, ``augment`` and ``logits``. Without prefix tokens (the default, mean
    pooling) q's and k's extra columns come at their padded width, q's already scaled, so ``qk``
    is one ``cat`` per tensor (this path is what ``bench perf attention`` times).
    """

    extra_dims: int

    def __init__(self, head_dim: int, num_prefix_tokens: int, impl: str, logit_scale: str = "all") -> None:
        super().__init__()
        if impl not in PAPE_IMPLS:
            raise PEConfigError(f"unknown PaPE impl {impl!r}; available: {', '.join(PAPE_IMPLS)}")
        if logit_scale not in PAPE_LOGIT_SCALES:
            raise PEConfigError(f"unknown PaPE logit_scale {logit_scale!r}; available: {', '.join(PAPE_LOGIT_SCALES)}")
        self.head_dim = head_dim
        self.logit_scale = logit_scale
        #: factor on the PE terms in the final logits: 1/sqrt(d) ("all", published) or 1 ("content")
        self.pe_factor = 1.0 / math.sqrt(head_dim) if logit_scale == "all" else 1.0
        self.num_prefix_tokens = num_prefix_tokens
        self.impl = impl
        self._stash: Tensor | None = None
        self._coord_cache = CoordsCache()  # centred coords and k's extra columns; see coord_features

    # subclasses implement these three --------------------------------------------------------
    @abc.abstractmethod
    def key_features(self, r: Tensor, width: int) -> Tensor:
        """k's extra columns from centred r ``(B, N, p)``: ``(B, 1, N, width)``, zero past ``extra_dims``."""

    @abc.abstractmethod
    def augment(self, x: Tensor, r: Tensor, width: int, scale: float,
                need_const: bool) -> tuple[Tensor, Tensor | None]:
        """Patch tokens only. x ``(B, N, D)``, centred r ``(B, N, p)`` -> q_aug
        ``(B, H, N, width)``, columns past ``extra_dims`` zero, with ``<q_aug_i, k_aug_j> =
        scale * (PE logit_ij - const_i)`` for k_aug = ``key_features(r, width)``; ``const``
        ``(B, H, N)`` (unscaled; only when ``need_const``, else None)."""

    @abc.abstractmethod
    def logits(self, x: Tensor, r: Tensor) -> Tensor:
        """Patch tokens only: the full PaPE logits ``(B, H, N, N)``."""

    # ------------------------------------------------------------------------------------------
    def coord_features(self, coords: Tensor, batch_size: int, dtype: torch.dtype,
                       width: int) -> tuple[Tensor, Tensor]:
        """Centred r ``(B, N, p)`` and ``key_features(r, width)``, cached per coords tensor
        (:class:`~pebench.encodings.base.CoordsCache`)."""
        def compute() -> tuple[Tensor, Tensor]:
            r = centred_coords(coords, batch_size, dtype)  # (B, N, p)
            return r, self.key_features(r, width)
        return self._coord_cache.get(coords, (batch_size, dtype, width, coords.shape), compute)

    def qk(self, q: Tensor, k: Tensor, x: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        P = self.num_prefix_tokens
        B, H, T, d = q.shape
        xs = x[:, P:] if P else x  # (B, N, D) patch tokens (no slice node without prefix: its backward is a pass)
        if self.impl == "naive":
            r = centred_coords(coords, B, q.dtype)  # (B, N, p)
            s = self.logits(xs.to(r.dtype), r)  # (B, H, N, N)
            if self.pe_factor != 1.0:
                s = s * self.pe_factor
            self._stash = F.pad(s, (P, 0, P, 0)).to(q.dtype)  # (B, H, T, T)
            return q, k
        # SDPA multiplies every column by 1/sqrt(d): q's PE columns get pe_factor * sqrt(d)
        scale = 1.0 if self.logit_scale == "all" else math.sqrt(self.head_dim)
        if not P:
            width = augmented_width(d, self.extra_dims)  # total head dim: a multiple of 8
            r, ka = self.coord_features(coords, B, torch.promote_types(q.dtype, torch.float32), width)
            qa, _ = self.augment(xs.to(r.dtype), r, width, scale, False)  # (B, H, N, w)
            return (torch.cat([q, qa.to(q.dtype)], dim=-1),
                    torch.cat([k, ka.to(k.dtype).expand(B, H, -1, -1)], dim=-1))  # (B, H, T, d + w)
        r, ka = self.coord_features(coords, B, torch.promote_types(q.dtype, torch.float32), self.extra_dims)
        qa, const = self.augment(xs.to(r.dtype), r, self.extra_dims, scale, True)
        ka = ka.expand(B, H, -1, -1)
        # indicator column: prefix keys 1, patch keys 0; patch queries -const_i.
        qa = torch.cat([qa, -scale * const.unsqueeze(-1)], dim=-1)
        ka = torch.cat([ka, torch.zeros_like(ka[..., :1])], dim=-1)
        qa = F.pad(qa, (0, 0, P, 0))  # prefix queries: zero augmentation
        kp = torch.zeros(B, H, P, ka.shape[-1], dtype=ka.dtype, device=ka.device)
        kp[..., -1] = 1.0
        ka = torch.cat([kp, ka], dim=2)  # (B, H, T, e + 1)
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


def quadratic_features(r: Tensor, i0: Tensor, i1: Tensor, width: int) -> Tensor:
    """k's extra columns ``[r r^T upper-triangle monomials, r, 0 ...]``: ``(B, N, p) -> (B, 1, N, width)``."""
    ka = torch.cat([r[..., i0] * r[..., i1], r], dim=-1)  # (B, N, p(p+1)/2 + p)
    return F.pad(ka, (0, width - ka.shape[-1])).unsqueeze(1)


class PaPELayer(AugmentedLayerPE):
    """One block's PaPE: ``A, B: (H*m, D)`` maps of x, ``W_p: (H, m, p)``.

    sdpa path, per head (``T = p(p+1)/2``, ``s = 1`` for ``logit_scale="all"``, ``sqrt(d)`` for "content")::

        y_i = a_i @ [s W2 | 0 | w w^T]      ->  s * (M_i's upper triangle), 0 ..., M_i (p*p)
        q_aug_i = y_i[:width] + [0 (T), s (c_i - 2 M_i r_i), 0 ...],   c_i = (W_p^T B) x_i + W_p^T b0

    where ``W2 (m, T)`` holds ``w_m w_m^T``'s upper triangle (off-diagonals doubled). ``B`` is
    linear, so it is folded through ``W_p`` into a ``(p, D)`` map per head (never the ``H*m``
    outputs). ``augment`` runs this as one fused autograd node (:mod:`._pape_fused`);
    ``augment_reference`` is the same computation as autograd ops.
    """

    def __init__(self, dim: int, num_heads: int, spatial_dims: int, num_parabolas: int, num_prefix_tokens: int,
                 impl: str, init: str = "published", logit_scale: str = "all", wp_std: float | None = None) -> None:
        super().__init__(dim // num_heads, num_prefix_tokens, impl, logit_scale)
        check_variant("pape", init, logit_scale)
        H, m, p = num_heads, num_parabolas, spatial_dims
        self.num_heads, self.m, self.p = H, m, p
        self.init = init
        self.extra_dims = pape_extra_dims(p)
        self.a_weight = nn.Parameter(torch.empty(H * m, dim))  # A (H*m, D)
        self.b_weight = nn.Parameter(torch.empty(H * m, dim))  # B (H*m, D)
        self.wp = nn.Parameter(torch.empty(H, m, p))  # W_p (H, m, p)
        if init == "published":  # nn.Linear(D, 2 H m, bias=False) and nn.Linear(p, H m, bias=False)
            linear_default_init_(self.a_weight, dim)
            linear_default_init_(self.b_weight, dim)
            linear_default_init_(self.wp, p)
            self.register_buffer("a_bias", torch.zeros(H * m), persistent=False)  # no biases: zero buffers
            self.register_buffer("b_bias", torch.zeros(H * m), persistent=False)
        else:
            if wp_std is None:
                raise PEConfigError("pape init='pebench' needs wp_std")
            self.a_bias = nn.Parameter(torch.full((H * m,), SOFTPLUS_INV_1))
            self.b_bias = nn.Parameter(torch.zeros(H * m))
            nn.init.trunc_normal_(self.a_weight, std=0.02)
            nn.init.trunc_normal_(self.b_weight, std=0.02)
            with torch.no_grad():
                self.wp.normal_(0.0, float(wp_std))
        iu = torch.triu_indices(p, p)
        self.register_buffer("iu", iu, persistent=False)  # (2, p(p+1)/2)
        self.register_buffer("iu_mult", (iu[0] != iu[1]).float() + 1, persistent=False)  # off-diagonals 2
        self.register_buffer("iu_flat", iu[0] * p + iu[1], persistent=False)  # into a flattened p x p

    def coefficients(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """a, b ``(B, H, N, m)`` from tokens ``(B, N, D)`` (the naive path)."""
        B, N, _ = x.shape
        a = neg_softplus(F.linear(x, self.a_weight.to(x.dtype), self.a_bias.to(x.dtype)))
        b = F.linear(x, self.b_weight.to(x.dtype), self.b_bias.to(x.dtype))
        return (a.view(B, N, self.num_heads, self.m).transpose(1, 2),
                b.view(B, N, self.num_heads, self.m).transpose(1, 2))

    def key_features(self, r: Tensor, width: int) -> Tensor:
        return quadratic_features(r, self.iu[0], self.iu[1], width)

    def augment(self, x: Tensor, r: Tensor, width: int, scale: float,
                need_const: bool) -> tuple[Tensor, Tensor | None]:
        if need_const:
            return self.augment_reference(x, r, width, scale, need_const)
        # published init: the biases are zero buffers, i.e. no bias (skipped, not added as zeros)
        a_bias, b_bias = (b if isinstance(b, nn.Parameter) else None for b in (self.a_bias, self.b_bias))
        qa = pape_query_augment(x, r, self.a_weight, a_bias, self.b_weight, b_bias, self.wp,
                                width, scale)  # one autograd node (see _pape_fused)
        return qa, None

    def augment_reference(self, x: Tensor, r: Tensor, width: int, scale: float,
                          need_const: bool) -> tuple[Tensor, Tensor | None]:
        """``augment`` as a composite of autograd ops (the fused path is tested against it; it
        also serves the prefix-token path, which needs ``const``)."""
        B, N, D = x.shape
        H, m, p, T = self.num_heads, self.m, self.p, self.extra_dims - self.p
        dt = x.dtype
        wy, cw, cb = fold_weights(self.wp.to(dt), self.b_weight.to(dt), self.b_bias.to(dt), self.iu_flat,
                                  self.iu_mult.to(dt), width, scale)
        a = neg_softplus(F.linear(x, self.a_weight.to(dt), self.a_bias.to(dt))).view(B, N, H, m)
        c = F.linear(x, cw, cb).view(B, N, H, p)  # scale * c_i
        y = torch.einsum("bnhm,hmk->bnhk", a, wy)  # (B, N, H, width + p*p): [scale * M_i upper, 0, M_i]
        M = y[..., width:].unflatten(-1, (p, p))  # (B, N, H, p, p)
        Mr = (M * r[:, :, None, None, :]).sum(-1)  # (B, N, H, p): M_i r_i
        lin = c - (2 * scale) * Mr  # scale * (c_i - 2 M_i r_i)
        qa = (y[..., :width] + F.pad(lin, (T, width - T - p))).transpose(1, 2)  # (B, H, N, width)
        const = None
        if need_const:  # r_i^T M_i r_i - c_i^T r_i
            const = ((Mr * r.unsqueeze(2)).sum(-1) - (c * r.unsqueeze(2)).sum(-1) / scale).transpose(1, 2)
        return qa, const

    def logits(self, x: Tensor, r: Tensor) -> Tensor:
        a, b = self.coefficients(x)  # (B, H, N, m)
        u = torch.einsum("bnp,hmp->bhnm", r, self.wp.to(x.dtype))  # (B, H, N, m): W_p r
        # sum_m a_im (u_jm - u_im)^2 + b_im (u_jm - u_im), expanded over m (N x N, never N x N x m)
        s = torch.matmul(a, (u * u).transpose(-1, -2))  # (B, H, N, N)
        s = s + torch.matmul(b - 2 * a * u, u.transpose(-1, -2))
        return s + ((a * u - b) * u).sum(-1, keepdim=True)  # + const_i


@register_pe("pape", order=70)
class PaPE(PositionalEncoding):
    """PaPE; the default is the published parameterisation (see the module docstring)."""

    relative = True
    rotation_invariant = False
    distance_decay = True
    learned = True
    options = (
        Option("num_parabolas", "int", 50, "m, the number of parabolas per head"),
        Option("impl", "str", "sdpa", "sdpa: exact fold into q/k (no N x N tensor); naive: explicit N x N logits",
               PAPE_IMPLS),
        Option("init", "str", "published", "published: nn.Linear default init of A, B, W_p, no biases; "
               "pebench: small-W_p locality prior with biases (a ~ -1)", PAPE_INITS),
        Option("logit_scale", "str", "all", "all: 1/sqrt(d) on the whole augmented logit (published); "
               "content: on <q,k> only, PE terms unscaled", PAPE_LOGIT_SCALES),
        Option("wp_std", "float", None, "init=pebench only: std of W_p (default 2 / (G sqrt(m)))"),
        Option("ref_extent", "float", None, "init=pebench only: G in wp_std's default (default: largest "
               "training-grid side, 8 without a grid)"),
    )

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, num_parabolas: int = 50,
                 impl: str = "sdpa", init: str = "published", logit_scale: str = "all", wp_std: float | None = None,
                 ref_extent: float | None = None) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if int(num_parabolas) != num_parabolas or num_parabolas < 1:
            raise PEConfigError(f"pape num_parabolas must be a positive integer, got {num_parabolas}")
        if impl not in PAPE_IMPLS:
            raise PEConfigError(f"unknown PaPE impl {impl!r}; available: {', '.join(PAPE_IMPLS)}")
        check_variant("pape", init, logit_scale)
        m = int(num_parabolas)
        std = None
        if init == "pebench":
            G = float(ref_extent) if ref_extent is not None else float(max(self.train_grid) if self.train_grid else 8)
            if G <= 0:
                raise PEConfigError(f"pape ref_extent must be > 0, got {G}")
            std = wp_std if wp_std is not None else 2.0 / (G * math.sqrt(m))
        elif wp_std is not None or ref_extent is not None:
            raise PEConfigError("pape wp_std / ref_extent apply to init=pebench only (init=published draws W_p "
                                "as nn.Linear does)")
        self.num_parabolas = m
        self.impl = impl
        self.init = init
        self.logit_scale = logit_scale
        self.layers = nn.ModuleList(
            PaPELayer(dim, num_heads, spatial_dims, m, num_prefix_tokens, impl, init, logit_scale, std)
            for _ in range(depth))

    def layer(self, i: int) -> LayerPE:
        return self.layers[i]

    def no_weight_decay(self) -> set[str]:
        return {f"layers.{i}.wp" for i in range(self.depth)} if self.init == "pebench" else set()

"""PaPE's per-token query augmentation as one autograd node with a hand-written backward.

Why (issue #7, docs/architecture.md §6): the augmentation is a dozen small ops on ``(B*N, H*m)`` tensors;
through autograd each adds a node and a few kernel launches, which on CPU cost about as much as
the arithmetic (``bench perf attention-budget``). This function computes the same thing as the
composite in :meth:`pebench.encodings.pape.PaPELayer.augment_reference` with fewer kernels; the
tests check its outputs and gradients against that composite and against the naive N x N path.

Per head ``h`` (dropped), token ``i``, with ``K = width + p*p`` and ``s`` the scale::

    z_i = A x_i + a0                (m,)        a_i = -softplus(z_i)
    y_i = a_i @ wy                  (K,)        wy = [s * W2 | 0 | w w^T flattened]
    q_aug_i = Cw x_i + cb + y_i[:width] - 2 s * pad_T(M_i r_i),   M_i = y_i[width:] as (p, p)

where ``Cw (width, D)`` and ``cb (width,)`` are ``s * (W_p^T B, W_p^T b0)`` placed at columns
``T .. T+p`` (zero elsewhere): the linear part of q_aug is one ``(B*N, D) x (D, H*width)``
product, written straight into the output. Kernel count per call (issue #46): forward 6 small
weight ops + 3 products + 5 elementwise (``-softplus``) + 3 for ``M_i r_i``; backward 6 products
on ``B*N`` rows. The weight constants (which column each monomial lands in) depend on
``(p, width, s)`` only and are built once per dtype and device.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

_CONSTANTS: dict[tuple, tuple[Tensor, Tensor]] = {}


def neg_softplus_forward(z: Tensor) -> Tensor:
    """``-softplus(z) = log(sigmoid(|z|)) - max(z, 0)`` (``sigmoid(|z|) = 1 / (1 + exp(-|z|))``),
    five vectorised kernels in place in one new buffer; absolute error <= one ulp of 1 (1.2e-7 in
    float32) against ``log1p``. See ``pape._NegSoftplus`` for why not ``F.softplus``."""
    return z.abs().sigmoid_().log_().sub_(z.clamp_min(0))


def fold_weights(wp: Tensor, b_weight: Tensor, b_bias: Tensor, iu_flat: Tensor, iu_mult: Tensor, width: int,
                 scale: float) -> tuple[Tensor, Tensor, Tensor]:
    """PaPE's per-call weight algebra as plain tensor ops (the composite
    :meth:`~pebench.encodings.pape.PaPELayer.augment_reference` differentiates through it).
    ``wp (H, m, p)``, ``b_weight (H*m, D)``, ``b_bias (H*m,)`` -> ``wy (H, m, width + p*p)`` =
    ``[scale * W2, 0, w w^T]`` (``W2``: the upper triangle of ``w_m w_m^T`` at ``iu_flat``,
    off-diagonals times ``iu_mult`` = 2), ``cw (H*p, D)``, ``cb (H*p,)`` = ``scale * (W_p^T B, W_p^T b0)``."""
    H, m, p = wp.shape
    D = b_weight.shape[-1]
    T = iu_flat.numel()
    ww = (wp.unsqueeze(-1) * wp.unsqueeze(-2)).flatten(-2)  # (H, m, p*p): w_m w_m^T
    wy = torch.cat([F.pad(ww[..., iu_flat] * (iu_mult * scale), (0, width - T)), ww], -1)
    cw = torch.matmul(wp.transpose(1, 2), b_weight.view(H, m, D)) * scale  # (H, p, D)
    cb = torch.matmul(b_bias.view(H, 1, m), wp) * scale  # (H, 1, p)
    return wy, cw.reshape(H * p, D), cb.reshape(H * p)


def _constants(p: int, width: int, scale: float, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    """``sy (p*p, width + p*p)`` with ``ww @ sy = [scale * W2 | 0 | ww]`` and ``e (p, width)`` with
    ``wp @ e`` = ``scale * W_p`` at columns ``T .. T+p`` (zero elsewhere); cached (constants only)."""
    key = (p, width, float(scale), dtype, device)
    hit = _CONSTANTS.get(key)
    if hit is None:
        iu = torch.triu_indices(p, p)  # the upper-triangle monomials, as PaPELayer's k columns order them
        iu_flat, iu_mult, T = iu[0] * p + iu[1], (iu[0] != iu[1]).double() + 1, iu.shape[1]
        sy = torch.zeros(p * p, width + p * p, dtype=torch.float64)
        sy[iu_flat, torch.arange(T)] = iu_mult * scale  # off-diagonals twice: r^T M r
        sy[:, width:] = torch.eye(p * p, dtype=torch.float64)
        e = torch.zeros(p, width, dtype=torch.float64)
        e[torch.arange(p), T + torch.arange(p)] = scale
        hit = _CONSTANTS[key] = (sy.to(dtype=dtype, device=device), e.to(dtype=dtype, device=device))
    return hit


def _block_diag(t: Tensor) -> Tensor:
    """``(H, m, k)`` -> the block-diagonal ``(H*m, H*k)`` (one product serves every head)."""
    H, m, k = t.shape
    if H == 1:
        return t[0]
    eye = torch.eye(H, dtype=t.dtype, device=t.device)
    return (eye.view(H, 1, H, 1) * t.view(H, m, 1, k)).view(H * m, H * k)


def _diagonal_blocks(t: Tensor, H: int) -> Tensor:
    """``(H*m, H*k)`` -> its ``H`` diagonal blocks ``(H, m, k)`` (the inverse of ``_block_diag``'s layout)."""
    if H == 1:
        return t.unsqueeze(0)
    Hm, Hk = t.shape
    return t.view(H, Hm // H, H, Hk // H).diagonal(dim1=0, dim2=2).permute(2, 0, 1)


class PaPEQueryAugment(torch.autograd.Function):
    """``(x, r, a_weight, a_bias, b_weight, b_bias, wp) -> q_aug (B*N, H*width)`` (token-major);
    ``a_bias`` / ``b_bias`` may be None (no bias: PaPE's published ``nn.Linear(bias=False)``)."""

    @staticmethod
    def forward(ctx, x2: Tensor, r2: Tensor, a_weight: Tensor, a_bias: Tensor | None,  # type: ignore[override]
                b_weight: Tensor, b_bias: Tensor | None, wp: Tensor, width: int, scale: float) -> Tensor:
        # x2 (BN, D), r2 (BN, p), a_weight / b_weight (H*m, D), wp (H, m, p)
        with torch.autocast(x2.device.type, enabled=False):  # one dtype in forward and backward
            H, m, p = wp.shape
            BN, D = x2.shape
            T = p * (p + 1) // 2
            sy, e = _constants(p, width, scale, x2.dtype, x2.device)
            ww = (wp.unsqueeze(-1) * wp.unsqueeze(-2)).view(H, m, p * p)  # w_m w_m^T
            wy = _block_diag(torch.matmul(ww, sy))  # (H*m, H*K): per head [s W2 | 0 | w w^T]
            wpe = torch.matmul(wp, e)  # (H, m, width): s W_p at columns T..T+p
            cw = torch.matmul(wpe.transpose(1, 2), b_weight.view(H, m, D)).view(H * width, D)
            if b_bias is None:
                qa = x2 @ cw.t()  # (BN, H*width): Cw x_i
            else:
                qa = torch.addmm(torch.matmul(b_bias.view(H, 1, m), wpe).view(H * width), x2, cw.t())
            z = x2 @ a_weight.t() if a_bias is None else torch.addmm(a_bias, x2, a_weight.t())  # (BN, H*m)
            a = neg_softplus_forward(z)
            y = (a @ wy).view(BN, H, width + p * p)
            mr = (y[..., width:].view(BN, H, p, p) * r2.view(BN, 1, 1, p)).sum(-1)  # (BN, H, p): M_i r_i
            q3 = qa.view(BN, H, width)
            q3.add_(y[..., :width])
            q3[..., T:T + p].add_(mr, alpha=-2.0 * scale)
        ctx.save_for_backward(x2, r2, a_weight, b_weight, b_bias, wp, sy, e, wpe, cw, wy, z, a)
        ctx.consts = (width, scale, a_bias is not None)
        return qa

    @staticmethod
    def backward(ctx, g: Tensor):  # type: ignore[override]
        x2, r2, a_weight, b_weight, b_bias, wp, sy, e, wpe, cw, wy, z, a = ctx.saved_tensors
        width, scale, has_a_bias = ctx.consts
        H, m, p = wp.shape
        BN, D = x2.shape
        T = p * (p + 1) // 2
        g3 = g.reshape(BN, H, width)
        g_m = g3[..., T:T + p].unsqueeze(-1) * (r2 * (-2.0 * scale)).view(BN, 1, 1, p)  # (BN, H, p, p)
        g_y = torch.cat([g3, g_m.view(BN, H, p * p)], -1).view(BN, -1)  # (BN, H*K)
        g_flat = g3.reshape(BN, H * width)  # a view unless g came non-contiguous
        g_zn = (g_y @ wy.t()).mul_(z.sigmoid())  # -dL/dz (d(-softplus(z))/dz = -sigmoid(z))
        g_x = None
        if ctx.needs_input_grad[0]:
            g_x = g_flat @ cw
            g_x.addmm_(g_zn, a_weight, alpha=-1.0)
        g_aw = (g_zn.t() @ x2).neg_() if ctx.needs_input_grad[2] else None
        g_ab = g_zn.sum(0).neg_() if has_a_bias and ctx.needs_input_grad[3] else None
        # back through the weight algebra
        g_cw = (g_flat.t() @ x2).view(H, width, D)
        g_ww = torch.matmul(_diagonal_blocks(a.t() @ g_y, H), sy.t()).view(H, m, p, p)
        g_wp = torch.matmul(g_ww + g_ww.transpose(-1, -2), wp.unsqueeze(-1)).squeeze(-1)  # d(w w^T)
        g_wpe = torch.bmm(b_weight.view(H, m, D), g_cw.transpose(1, 2))  # from cw = wpe^T B
        g_bb = None
        if b_bias is not None:
            g_cb = g_flat.sum(0).view(H, 1, width)
            g_wpe.baddbmm_(b_bias.view(H, m, 1), g_cb)  # from cb = b0 wpe
            g_bb = torch.bmm(wpe, g_cb.transpose(1, 2)).view(H * m) if ctx.needs_input_grad[5] else None
        g_wp.add_(torch.matmul(g_wpe, e.t()))
        g_bw = torch.bmm(wpe, g_cw).view(H * m, D) if ctx.needs_input_grad[4] else None
        return g_x, None, g_aw, g_ab, g_bw, g_bb, g_wp, None, None


def pape_query_augment(x: Tensor, r: Tensor, a_weight: Tensor, a_bias: Tensor | None, b_weight: Tensor,
                       b_bias: Tensor | None, wp: Tensor, width: int, scale: float) -> Tensor:
    """x ``(B, N, D)``, r ``(B, N, p)`` -> q_aug ``(B, H, N, width)`` (a token-major buffer seen
    through a transpose). Biases None: none (the published PaPE). First-order gradients only (no
    double backward)."""
    B, N, D = x.shape
    H = wp.shape[0]
    a_weight, b_weight, wp, r = (t.to(x.dtype) for t in (a_weight, b_weight, wp, r))
    a_bias, b_bias = (None if t is None else t.to(x.dtype) for t in (a_bias, b_bias))
    qa = PaPEQueryAugment.apply(x.reshape(B * N, D), r.reshape(B * N, -1), a_weight, a_bias, b_weight, b_bias, wp,
                                width, scale)  # (B*N, H*width)
    return qa.view(B, N, H, width).transpose(1, 2)

"""PaPE's per-token query augmentation as one autograd node with a hand-written backward.

Why (issue #7, docs/architecture.md §6): the augmentation is a dozen small ops on ``(B*N, H*m)`` tensors;
through autograd each adds a node and a few kernel launches, which on CPU cost about as much as
the arithmetic (``bench perf attention-budget``). This function computes the same thing as the
composite in :meth:`pebench.encodings.pape.PaPELayer.augment_reference` with fewer kernels; the
tests check its outputs and gradients against that composite and against the naive N x N path.

Per head ``h`` (dropped), token ``i``, with ``K = width + p*p``::

    z_i = A x_i + a0                (m,)        a_i = -softplus(z_i)
    y_i = a_i @ wy                  (K,)        wy = [scale * W2 | 0 | w w^T flattened]
    c_i = Cw x_i + cb               (p,)        Cw, cb = scale * (W_p^T B, W_p^T b0)
    q_aug_i = y_i[:width] + pad_T(c_i - 2 scale * M_i r_i),   M_i = y_i[width:] as (p, p)
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def neg_softplus_forward(z: Tensor) -> Tensor:
    """``-softplus(z) = log(sigmoid(|z|)) - max(z, 0)`` (``sigmoid(|z|) = 1 / (1 + exp(-|z|))``),
    five vectorised kernels in place in one new buffer; absolute error <= one ulp of 1 (1.2e-7 in
    float32) against ``log1p``. See ``pape._NegSoftplus`` for why not ``F.softplus``."""
    return z.abs().sigmoid_().log_().sub_(z.clamp_min(0))


def fold_weights(wp: Tensor, b_weight: Tensor, b_bias: Tensor, iu_flat: Tensor, iu_mult: Tensor, width: int,
                 scale: float) -> tuple[Tensor, Tensor, Tensor]:
    """PaPE's per-call weight algebra (plain tensor ops; differentiable when called outside the
    fused node). ``wp (H, m, p)``, ``b_weight (H*m, D)``, ``b_bias (H*m,)`` ->
    ``wy (H, m, width + p*p)`` = ``[scale * W2, 0, w w^T]`` (``W2``: the upper triangle of
    ``w_m w_m^T`` at ``iu_flat``, off-diagonals times ``iu_mult`` = 2), ``cw (H*p, D)``, ``cb (H*p,)``
    = ``scale * (W_p^T B, W_p^T b0)``."""
    H, m, p = wp.shape
    D = b_weight.shape[-1]
    T = iu_flat.numel()
    ww = (wp.unsqueeze(-1) * wp.unsqueeze(-2)).flatten(-2)  # (H, m, p*p): w_m w_m^T
    wy = torch.cat([F.pad(ww[..., iu_flat] * (iu_mult * scale), (0, width - T)), ww], -1)
    cw = torch.matmul(wp.transpose(1, 2), b_weight.view(H, m, D)) * scale  # (H, p, D)
    cb = torch.matmul(b_bias.view(H, 1, m), wp) * scale  # (H, 1, p)
    return wy, cw.reshape(H * p, D), cb.reshape(H * p)


class PaPEQueryAugment(torch.autograd.Function):
    """``(x, r, a_weight, a_bias, b_weight, b_bias, wp) -> q_aug (H, B*N, width)`` (head-major)."""

    @staticmethod
    def forward(ctx, x2: Tensor, r2: Tensor, a_weight: Tensor, a_bias: Tensor,  # type: ignore[override]
                b_weight: Tensor, b_bias: Tensor, wp: Tensor, iu_flat: Tensor, iu_mult: Tensor, width: int,
                scale: float) -> Tensor:
        # x2 (BN, D), r2 (BN, p), a_weight / b_weight (H*m, D), wp (H, m, p)
        with torch.autocast(x2.device.type, enabled=False):  # one dtype in forward and backward
            wy, cw, cb = fold_weights(wp, b_weight, b_bias, iu_flat, iu_mult, width, scale)
            H, m, p = wp.shape
            T = iu_flat.numel()
            BN = x2.shape[0]
            z = torch.addmm(a_bias, x2, a_weight.t())  # (BN, H*m)
            a = neg_softplus_forward(z).view(BN, H, m).transpose(0, 1)  # (H, BN, m)
            y = torch.bmm(a, wy)  # (H, BN, K)
            c = torch.addmm(cb, x2, cw.t()).view(BN, H, p).transpose(0, 1)  # (H, BN, p)
            M = y[..., width:].view(H, BN, p, p)
            lin = torch.einsum("hnij,nj->hni", M, r2).mul_(-2 * scale).add_(c)  # (H, BN, p)
            qa = y[..., :width].contiguous()
            qa[..., T:T + p] += lin
        ctx.save_for_backward(x2, r2, a_weight, b_weight, b_bias, wp, iu_flat, iu_mult, cw, wy, z, a)
        ctx.consts = (width, scale)
        return qa

    @staticmethod
    def backward(ctx, g: Tensor):  # type: ignore[override]
        x2, r2, a_weight, b_weight, b_bias, wp, iu_flat, iu_mult, cw, wy, z, a = ctx.saved_tensors
        width, scale = ctx.consts
        H, m, p = wp.shape
        T = iu_flat.numel()
        BN, D = x2.shape
        g = g.contiguous()  # (H, BN, width)
        g_lin = g[..., T:T + p]  # (H, BN, p)
        g_c = g_lin.transpose(0, 1).reshape(BN, H * p)  # (BN, H*p)
        g_M = torch.einsum("hni,nj->hnij", g_lin, r2).mul_(-2 * scale).reshape(H, BN, p * p)
        g_y = torch.cat([g, g_M], dim=-1)  # (H, BN, K)
        g_a = torch.bmm(g_y, wy.transpose(1, 2))  # (H, BN, m)
        g_wy = torch.bmm(a.transpose(1, 2), g_y)  # (H, m, K)
        g_z = g_a.transpose(0, 1).reshape(BN, H * m).mul_(torch.sigmoid(z)).neg_()  # d(-softplus) = -sigmoid
        g_x = (g_z @ a_weight).addmm_(g_c, cw) if ctx.needs_input_grad[0] else None
        g_aw = g_z.t() @ x2 if ctx.needs_input_grad[2] else None
        g_ab = g_z.sum(0) if ctx.needs_input_grad[3] else None
        # back through fold_weights
        g_cw = (g_c.t() @ x2).view(H, p, D)  # (H, p, D)
        g_cb = g_c.sum(0).view(H, 1, p)
        g_ww = g_wy[..., width:].clone()  # (H, m, p*p)
        g_ww.index_add_(-1, iu_flat, g_wy[..., :T] * (iu_mult * scale))
        g_ww = g_ww.view(H, m, p, p)
        bw = b_weight.view(H, m, D)
        g_wp = torch.einsum("hmij,hmj->hmi", g_ww + g_ww.transpose(-1, -2), wp)  # d(w w^T)
        g_wp += torch.bmm(bw, g_cw.transpose(1, 2)).mul_(scale)  # from cw = scale W_p^T B
        g_wp += b_bias.view(H, m, 1) * g_cb * scale  # from cb = scale W_p^T b0
        g_bw = torch.bmm(wp, g_cw).mul_(scale).view(H * m, D) if ctx.needs_input_grad[4] else None
        g_bb = torch.bmm(wp, g_cb.transpose(1, 2)).mul_(scale).view(H * m) if ctx.needs_input_grad[5] else None
        return g_x, None, g_aw, g_ab, g_bw, g_bb, g_wp, None, None, None, None


def pape_query_augment(x: Tensor, r: Tensor, a_weight: Tensor, a_bias: Tensor, b_weight: Tensor, b_bias: Tensor,
                       wp: Tensor, iu_flat: Tensor, iu_mult: Tensor, width: int, scale: float) -> Tensor:
    """x ``(B, N, D)``, r ``(B, N, p)`` -> q_aug ``(B, H, N, width)`` (a head-major buffer seen
    through a permute). First-order gradients only (no double backward)."""
    B, N, D = x.shape
    H = wp.shape[0]
    a_weight, a_bias, b_weight, b_bias, wp, iu_mult, r = (
        t.to(x.dtype) for t in (a_weight, a_bias, b_weight, b_bias, wp, iu_mult, r))
    qa = PaPEQueryAugment.apply(x.reshape(B * N, D), r.reshape(B * N, -1), a_weight, a_bias, b_weight, b_bias, wp,
                                iu_flat, iu_mult, width, scale)  # (H, B*N, width)
    return qa.view(H, B, N, width).transpose(0, 1)

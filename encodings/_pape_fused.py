"""PaPE's per-token query augmentation as one autograd node with a hand-written backward.

Why (issue #7, DESIGN.md §6): the augmentation is a dozen small ops on ``(B*N, H*m)`` tensors;
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
from torch import Tensor


def neg_softplus_forward(z: Tensor) -> Tensor:
    """``-softplus(z) = -(max(z, 0) + log(1 + exp(-|z|)))`` computed in place in one new buffer
    (see ``pape._NegSoftplus`` for why not ``F.softplus``)."""
    return z.abs().neg_().exp_().add_(1).log_().add_(z.clamp_min(0)).neg_()


class PaPEQueryAugment(torch.autograd.Function):
    """``(x, r, a_weight, a_bias, cw, cb, wy) -> q_aug (H, B*N, width)`` (head-major)."""

    @staticmethod
    def forward(ctx, x2: Tensor, r2: Tensor, a_weight: Tensor, a_bias: Tensor, cw: Tensor, cb: Tensor,  # type: ignore[override]
                wy: Tensor, width: int, T: int, scale: float) -> Tensor:
        # x2 (BN, D), r2 (BN, p), a_weight (H*m, D), cw (H*p, D), wy (H, m, width + p*p)
        with torch.autocast(x2.device.type, enabled=False):  # one dtype in forward and backward
            return PaPEQueryAugment._forward(ctx, x2, r2, a_weight, a_bias, cw, cb, wy, width, T, scale)

    @staticmethod
    def _forward(ctx, x2: Tensor, r2: Tensor, a_weight: Tensor, a_bias: Tensor, cw: Tensor, cb: Tensor,
                 wy: Tensor, width: int, T: int, scale: float) -> Tensor:
        H, m, K = wy.shape
        p = r2.shape[-1]
        BN = x2.shape[0]
        z = torch.addmm(a_bias, x2, a_weight.t())  # (BN, H*m)
        a = neg_softplus_forward(z).view(BN, H, m).transpose(0, 1)  # (H, BN, m)
        y = torch.bmm(a, wy)  # (H, BN, K)
        c = torch.addmm(cb, x2, cw.t()).view(BN, H, p).transpose(0, 1)  # (H, BN, p)
        M = y[..., width:].view(H, BN, p, p)
        lin = torch.einsum("hnij,nj->hni", M, r2).mul_(-2 * scale).add_(c)  # (H, BN, p)
        qa = y[..., :width].contiguous()
        qa[..., T:T + p] += lin
        ctx.save_for_backward(x2, r2, a_weight, cw, wy, z, a)
        ctx.consts = (width, T, scale)
        return qa

    @staticmethod
    def backward(ctx, g: Tensor):  # type: ignore[override]
        x2, r2, a_weight, cw, wy, z, a = ctx.saved_tensors
        width, T, scale = ctx.consts
        H, m, K = wy.shape
        p = r2.shape[-1]
        BN = x2.shape[0]
        g = g.contiguous()  # (H, BN, width)
        g_lin = g[..., T:T + p]  # (H, BN, p)
        g_c = g_lin.transpose(0, 1).reshape(BN, H * p)  # (BN, H*p)
        g_M = torch.einsum("hni,nj->hnij", g_lin, r2).mul_(-2 * scale).reshape(H, BN, p * p)
        g_y = torch.cat([g, g_M], dim=-1)  # (H, BN, K)
        g_a = torch.bmm(g_y, wy.transpose(1, 2))  # (H, BN, m)
        g_wy = torch.bmm(a.transpose(1, 2), g_y)  # (H, m, K)
        g_z = g_a.transpose(0, 1).reshape(BN, H * m).mul_(torch.sigmoid(z)).neg_()  # d(-softplus) = -sigmoid
        g_x = torch.addmm(g_z @ a_weight, g_c, cw) if ctx.needs_input_grad[0] else None
        g_aw = g_z.t() @ x2 if ctx.needs_input_grad[2] else None
        g_ab = g_z.sum(0) if ctx.needs_input_grad[3] else None
        g_cw = g_c.t() @ x2 if ctx.needs_input_grad[4] else None
        g_cb = g_c.sum(0) if ctx.needs_input_grad[5] else None
        return g_x, None, g_aw, g_ab, g_cw, g_cb, g_wy, None, None, None


def pape_query_augment(x: Tensor, r: Tensor, a_weight: Tensor, a_bias: Tensor, cw: Tensor, cb: Tensor,
                       wy: Tensor, width: int, T: int, scale: float) -> Tensor:
    """x ``(B, N, D)``, r ``(B, N, p)`` -> q_aug ``(B, H, N, width)`` (a head-major buffer seen
    through a permute). First-order gradients only (no double backward)."""
    B, N, D = x.shape
    H = wy.shape[0]
    a_weight, a_bias, cw, cb, wy, r = (t.to(x.dtype) for t in (a_weight, a_bias, cw, cb, wy, r))
    qa = PaPEQueryAugment.apply(x.reshape(B * N, D), r.reshape(B * N, -1), a_weight, a_bias, cw, cb, wy,
                                width, T, scale)  # (H, B*N, width)
    return qa.view(H, B, N, width).transpose(0, 1)

"""Shared pieces of the learned-rotation PEs (``liere``, ``comrope``): block rotations from skew generators.

Both PEs rotate the first ``m * b`` channels of every head by a block-diagonal rotation with ``m``
blocks of size ``b``: block ``k`` of head ``h`` at position ``r`` is

    R_hk(r) = expm( sum_a  s_a r_a G[h, a, k] ),     G[h, a, k]  (b, b) skew-symmetric,

with ``s_a`` a fixed per-axis coordinate scale (each PE's rule for normalised positions). The
remaining ``d - m * b`` channels are not rotated. Prefix (CLS) tokens get the identity.

The exponential is ``torch.matrix_exp`` (exact up to floating point, differentiable), computed in
float32 or wider with autocast off (mixed precision would run the products in bf16/fp16); the rotated
q and k are cast back to their dtype. Whether ``R(r_i)^T R(r_j)`` depends on ``r_j - r_i`` only is the PE's business:
it does iff the generators ``G[h, a, k]`` of each block commute over ``a``.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from .base import LayerPE, PEConfigError, batch_coords

__all__ = ["skew", "skew_from_upper", "block_rotations", "apply_block_rotation", "grid_coord_scale", "full_precision",
           "BlockRotationLayerPE", "PRODUCTS", "EXPM_GRADS", "skew_expm"]

#: how :func:`apply_block_rotation` applies one rotation table to the batch (``shared``: the default)
PRODUCTS = ("shared", "broadcast")
#: how :func:`skew_expm` computes the matrix exponential's gradient
EXPM_GRADS = ("spectral", "autograd")


def full_precision(t: Tensor) -> torch.autocast:
    """A context with autocast off on ``t``'s device (rotation maths stays in float32 or wider)."""
    return torch.autocast(t.device.type, enabled=False)


def skew(m: Tensor) -> Tensor:
    """``M - M^T`` over the last two dims (a skew-symmetric matrix from any square one)."""
    return m - m.transpose(-1, -2)


def skew_from_upper(upper: Tensor, b: int) -> Tensor:
    """The skew-symmetric ``(..., b, b)`` matrix whose strict upper triangle (row-major) is
    ``upper: (..., b(b-1)/2)``."""
    rows, cols = torch.triu_indices(b, b, offset=1, device=upper.device)
    full = upper.new_zeros(*upper.shape[:-1], b, b)
    full[..., rows, cols] = upper
    return skew(full)


class _SkewExpm(torch.autograd.Function):
    """``torch.linalg.matrix_exp`` of real skew-symmetric ``A (..., b, b)`` (the same forward), with the
    gradient from the spectral form of ``A`` instead of matrix_exp's backward (which exponentiates the
    ``2b x 2b`` block matrix ``[[A^T, G], [0, A^T]]``).

    ``iA`` is Hermitian: ``iA = V diag(w) V^H`` (``eigh``), so ``A^T = -A = V diag(i w) V^H`` is normal, and the
    gradient ``L(A^T, G)`` (the Frechet derivative of exp at ``A^T`` in the direction ``G``; Higham, *Functions
    of Matrices*, 2008, Thm. 3.11 and Sec. 3.2, the Daleckii-Krein formula) is
    ``V [(V^H G V) o Phi] V^H`` with ``Phi_jk`` the divided difference of exp at ``i w_j, i w_k``:
    ``exp(i (w_j + w_k) / 2) sinc((w_j - w_k) / 2)``, which is exp's derivative ``exp(i w_j)`` at
    ``w_j = w_k`` (the sinc form needs no special case for equal or close eigenvalues); its real part, as
    ``A`` and ``G`` are real. One batched ``eigh`` of ``b x b`` Hermitian matrices and four complex products
    in place of an exponential of twice the size (measured for 1,024 blocks of 32 on the 2-core CPU: the
    forward and backward in 110 ms against 169 ms)."""

    @staticmethod
    def forward(ctx, a: Tensor) -> Tensor:  # type: ignore[override]
        ctx.save_for_backward(a)
        return torch.linalg.matrix_exp(a)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> Tensor:  # type: ignore[override]
        (a,) = ctx.saved_tensors
        ct = torch.complex128 if a.dtype == torch.float64 else torch.complex64
        w, v = torch.linalg.eigh(a.to(ct) * 1j)  # (..., b), (..., b, b): iA = V diag(w) V^H
        half_sum = (w.unsqueeze(-1) + w.unsqueeze(-2)) / 2
        half_diff = (w.unsqueeze(-1) - w.unsqueeze(-2)) / 2
        phi = torch.polar(torch.sinc(half_diff / math.pi), half_sum)  # exp(i s) sin(d) / d, (..., b, b)
        inner = (v.mH @ grad.to(ct) @ v) * phi
        return (v @ inner @ v.mH).real.to(a.dtype)


def skew_expm(a: Tensor, grad: str = "spectral") -> Tensor:
    """``expm(a)`` of real skew-symmetric ``a (..., b, b)``: ``torch.linalg.matrix_exp``; ``grad`` (:data:`EXPM_GRADS`)
    ``spectral`` takes the gradient from ``a``'s eigendecomposition (:class:`_SkewExpm`), ``autograd`` from
    matrix_exp's own backward. The same values; gradients equal up to float rounding (tested in float64)."""
    if grad not in EXPM_GRADS:
        raise PEConfigError(f"matrix exponential gradient must be one of {', '.join(EXPM_GRADS)}, got {grad!r}")
    if grad == "spectral" and torch.is_grad_enabled() and a.requires_grad:
        return _SkewExpm.apply(a)
    return torch.linalg.matrix_exp(a)


def block_rotations(coords: Tensor, generators: Tensor, scale: Tensor, batch_size: int,
                    dtype: torch.dtype, grad: str = "autograd") -> Tensor:
    """Rotation blocks ``(B|1, H, N, m, b, b)`` of ``expm(sum_a scale_a c_a G[:, a])``.

    coords ``(N, p)`` (one table for the batch: leading dim 1) or ``(B, N, p)``; generators
    ``(H, p, m, b, b)``; scale ``(p,)``. Computed in ``dtype`` promoted to float32 or wider. ``grad``: how
    the exponential's gradient is computed (:func:`skew_expm`).
    """
    dt = torch.promote_types(dtype, torch.float32)
    b = 1 if coords.dim() == 2 else batch_size
    with full_precision(coords):
        c = batch_coords(coords, b).to(dt) * scale.to(device=coords.device, dtype=dt)  # (B|1, N, p)
        log_r = torch.einsum("znp,hpkij->zhnkij", c, generators.to(dt))  # (B|1, H, N, m, b, b)
        return skew_expm(log_r.contiguous(), grad)


def apply_block_rotation(t: Tensor, rot: Tensor, num_prefix_tokens: int, product: str = "shared") -> Tensor:
    """Rotate ``t: (B, H, P + N, d)`` by blocks ``rot: (B|1, H, N, m, b, b)`` (prefix rows and channels
    past ``m * b`` unchanged); the result has ``t``'s dtype.

    ``product`` (:data:`PRODUCTS`), for one table shared by the batch (``rot``'s leading dim 1):
    ``shared`` contracts per token, head and block, one ``(B, b) x (b, b)`` product each, so the table is
    read as it is; ``broadcast`` is a broadcast ``matmul``, which copies the table once per sample before
    its batched matrix-vector products (forward and backward: at vit-nano's 64 tokens, batch 32, it took
    30 ms of a layer's forward and backward against 1 ms). The same rotation; the rounding of the
    table's gradient (a sum over the batch) differs. Per-sample tables (``(B, ...)``) take ``matmul``."""
    if product not in PRODUCTS:
        raise PEConfigError(f"rotation product must be one of {', '.join(PRODUCTS)}, got {product!r}")
    P = num_prefix_tokens
    m, b = rot.shape[-3], rot.shape[-1]
    width = m * b
    x = t[:, :, P:, :width].to(rot.dtype).unflatten(-1, (m, b))  # (B, H, N, m, b)
    with full_precision(t):
        if product == "shared" and rot.shape[0] == 1:
            y = torch.einsum("hnkij,bhnkj->bhnki", rot[0], x)  # a bmm over (h, n, k) of (B, j) x (j, i)
        else:
            y = (rot @ x.unsqueeze(-1)).squeeze(-1)  # (B, H, N, m, b)
        y = y.flatten(-2).to(t.dtype)  # (B, H, N, m * b)
    patch = torch.cat([y, t[:, :, P:, width:]], dim=-1)  # (B, H, N, d)
    return torch.cat([t[:, :, :P], patch], dim=2)


def grid_coord_scale(values: Sequence[float], spatial_dims: int) -> Tensor:
    """Per-axis scale ``(p,)`` from one value per axis (validated finite and > 0)."""
    vals = [float(v) for v in values]
    if len(vals) != spatial_dims or not all(v > 0 and v < float("inf") for v in vals):
        raise PEConfigError(f"coordinate scales must be {spatial_dims} finite values > 0, got {vals}")
    return torch.tensor(vals, dtype=torch.float64)


class BlockRotationLayerPE(LayerPE):
    """The per-layer part of a learned-rotation PE: rotate q and k by :func:`block_rotations` of the
    subclass's ``generators()`` ``(H, p, m, b, b)``, with the ``scale`` buffer ``(p,)`` and
    ``num_prefix_tokens`` (identity) set by the subclass."""

    scale: Tensor
    num_prefix_tokens: int
    generators: Callable[[], Tensor]  # the subclass's method: skew generators (H, p, m, b, b)
    product: str = "shared"  # apply_block_rotation's product (PRODUCTS)
    expm_grad: str = "autograd"  # skew_expm's gradient (EXPM_GRADS)

    def rotations(self, coords: Tensor, batch_size: int, dtype: torch.dtype) -> Tensor:
        """Rotation blocks ``(B|1, H, N, m, b, b)``."""
        return block_rotations(coords, self.generators(), self.scale, batch_size, dtype, self.expm_grad)

    def qk(self, q: Tensor, k: Tensor, x: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        rot = self.rotations(coords, q.shape[0], q.dtype)
        P = self.num_prefix_tokens
        return apply_block_rotation(q, rot, P, self.product), apply_block_rotation(k, rot, P, self.product)

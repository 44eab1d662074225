"""``string``: STRING, RoPE with a learned orthogonal change of basis (exactly translation-invariant).

Paper: Schenck et al., ICML 2025, "Learning the RoPEs: Better 2D and 3D Position Encodings with
STRING". STRING is ``R(r) = expm(sum_a r_a L_a)`` with commuting learned skew generators ``L_a``;
every such family is ``P^T RoPE(r) P`` for an orthogonal ``P`` and RoPE with learned frequencies,
and the leading ``P^T`` cancels in ``q^T R(r_i)^T R(r_j) k``. So the rotation applied to q and k is

    R(r) = RoPE(r) P        (P first, then RoPE),   R(r_i)^T R(r_j) = P^T RoPE(r_j - r_i) P,

which depends on ``r_j - r_i`` only. (Applied the other way round, ``P RoPE(r)``, ``P`` would cancel.)
The definition's rotation is ``P^T RoPE(r) P`` (``R(0) = I``); dropping the leading ``P^T`` is exact for
every pair of tokens that are all rotated the same way, so a prefix (CLS) token, which the definition
leaves unrotated, is given ``P`` in this frame (``P = P^T RoPE(0) P`` with the ``P^T`` dropped): its logits
with a patch ``j`` are then ``q_cls^T P^T RoPE(r_j) P k_j``, the definition's. Giving it the identity
instead (``q_cls^T RoPE(r_j) P k_j``) would equal the definition only while ``P = I``.

* ``p_form`` ``cayley`` (default, Cayley-STRING): ``P = (I - S)(I + S)^{-1}`` with a learned
  skew-symmetric ``S`` per layer and head (only its strict upper triangle is stored). Cayley is the
  paper's default: it is best in its experiments and recommended unless training cost rules it out
  (Sec. 3, "Computationally efficient STRING"); ``P`` is learned "once per attention head" and
  the RoPE frequencies are learned too.
  No official code is published and the paper states no initialisation of ``S``: ``S`` starts at 0
  here, so ``P = I`` and STRING starts as the RoPE it wraps (pebench's init; the learned ``P`` leaves
  the identity in training). ``RoPE(r)``: RoPE-Mixed's learnable frequencies ``(p, H, d/2)`` per layer
  with its init (``theta``, default 10; see ``rope-mixed``), so the family is the general STRING.
* ``p_form`` ``circulant`` (Circulant-STRING): ``L_a = C_a - C_a^T`` with ``C_a`` circulant (learned
  first column ``c_a``, per layer and head); circulant matrices commute and the DFT diagonalises
  them (``P`` the Fourier basis), so ``R(r) q = IFFT(exp(sum_a r_a FFT(l_a)) * FFT(q))`` with
  ``l_a = c_a - reverse(c_a)``, in O(d log d). Init (pebench's; the paper states none): ``c_a``
  entries ``N(0, 1 / (8 d))``,
  so the eigen-frequencies have std 1/2 rad per patch.
* Coords are in patch units (as rope-axial / rope-mixed); parameters are excluded from weight decay.
* Computed in float32 or wider with autocast off; the rotated q and k keep their dtype.
* ``fold_basis`` (default on, Cayley): ``P`` does not depend on the token, so ``P q = (P W_q) x + P b_q``:
  the layer declares ``P`` as its ``qk_basis`` and the attention folds it into the q/k projection weights
  once per step (``pebench.models.vit.fold_qk_basis``), leaving RoPE-Mixed's rotation as the per-token
  work; the logits are the same up to float rounding (tested in float64 with gradients). Under autocast the
  folded weight is cast like the plain one, so ``P`` acts at the projection's precision.
  ``fold_basis=false`` multiplies every token's q and k by ``P`` in float32 (the only path before
  2026-12-05: runs of earlier commits computed that).
* Cayley: once per forward, :meth:`STRING.encode_tokens` computes every layer's ``P`` and RoPE phasors in one
  batch (one solve over the stacked skew matrices) and hands them to the layers; bit for bit each layer's own
  computation (a layer called on its own, or given other coords, e.g. windowed attention, computes its own; so does every layer for per-sample coords in evaluation).
* CLS: prefix tokens get the definition's identity: ``P`` alone (no RoPE) in the frame above
  (Cayley); the identity (circulant, which computes ``expm`` itself).
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor, nn

from pebench.core.options import Option

from ._rotation import full_precision, skew_from_upper
from .base import LayerPE, LayerTables, PEConfigError, PositionalEncoding, batch_coords, layer_tables_batchable
from .registry import register_pe
from .rope_axial import rotate_pairs
from .rope_mixed import init_mixed_freqs, mixed_phasors

__all__ = ["STRING", "CayleySTRINGLayer", "CirculantSTRINGLayer", "cayley", "P_FORMS"]

P_FORMS = ("cayley", "circulant")


def cayley(s: Tensor) -> Tensor:
    """Cayley transform ``(I - S)(I + S)^{-1}`` of skew ``S: (..., d, d)`` (orthogonal, det 1)."""
    eye = torch.eye(s.shape[-1], dtype=s.dtype, device=s.device)
    # (I - S) and (I + S)^{-1} commute, so this is also (I + S)^{-1} (I - S): one solve
    return torch.linalg.solve(eye + s, eye - s)


def cayley_orthogonal(upper: Tensor, head_dim: int, dtype: torch.dtype) -> Tensor:
    """``P (..., H, d, d)`` from skew upper triangles ``upper (..., H, d(d-1)/2)``, in ``dtype`` promoted to
    float32 or wider with autocast off; leading dims (the layers, :meth:`STRING.encode_tokens`) batch the solve."""
    dt = torch.promote_types(dtype, torch.float32)
    with torch.autocast(upper.device.type, enabled=False):
        return cayley(skew_from_upper(upper.to(dt), head_dim))


class CayleySTRINGLayer(LayerTables, LayerPE):
    """``R(r) = RoPE_mixed(r) P``: skew upper triangles ``upper: (H, d(d-1)/2)``, frequencies ``freqs: (p, H, d/2)``.

    ``fold_basis``: declare ``P`` as :meth:`qk_basis`, so the attention folds it into its q/k projection
    weights; off, :meth:`qk` multiplies every token's q and k by ``P``. ``P`` and the phasors come from
    :meth:`STRING.encode_tokens`'s batch over the layers when it prepared them for this forward."""

    def __init__(self, freqs: Tensor, head_dim: int, num_prefix_tokens: int, fold_basis: bool = True) -> None:
        super().__init__()
        num_heads = freqs.shape[1]
        self.upper = nn.Parameter(torch.zeros(num_heads, head_dim * (head_dim - 1) // 2))
        self.freqs = nn.Parameter(freqs)  # (p, H, d/2)
        self.head_dim = head_dim
        self.num_prefix_tokens = num_prefix_tokens
        self.fold_basis = fold_basis
        self._pending: tuple | None = None  # (key, coords, phasors): qk_basis -> qk_after_basis

    TRANSIENT = ("_prepared", "_pending")  # prepared: (key, coords, P, phasors)

    def table_key(self, dtype: torch.dtype) -> tuple:
        """What ``P`` and the phasors depend on besides the coords: the parameters' versions, dtype, grad mode."""
        return (self.upper._version, self.freqs._version, torch.promote_types(dtype, torch.float32),
                torch.is_grad_enabled())

    def orthogonal(self, dtype: torch.dtype) -> Tensor:
        """``P: (H, d, d)`` in ``dtype`` promoted to float32 or wider."""
        return cayley_orthogonal(self.upper, self.head_dim, dtype)

    def qk_basis(self, dtype: torch.dtype) -> Tensor | None:
        if not self.fold_basis:
            return None
        prepared = self.take_prepared(dtype)
        if prepared is None:
            return self.orthogonal(dtype)
        self._pending = (prepared[0], prepared[1], prepared[3])
        return prepared[2]

    def qk(self, q: Tensor, k: Tensor, x: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        prepared = self.take_prepared(q.dtype)
        rot = prepared[3] if prepared is not None and prepared[1] is coords else None
        with full_precision(q):  # P, the angles and the basis change in float32 or wider
            orth = prepared[2] if prepared is not None else self.orthogonal(q.dtype)
            orth_t = orth.transpose(-1, -2)  # (H, d, d)

            def change_basis(t: Tensor) -> Tensor:  # P t on every row, prefix rows too: (B, H, P + N, d), in dt
                return t.to(orth_t.dtype) @ orth_t  # one broadcast matmul (an einsum here permuted and copied)

            qr, kr = self._rope(change_basis(q), change_basis(k), coords, rot)
        return qr.to(q.dtype), kr.to(k.dtype)

    def qk_after_basis(self, q: Tensor, k: Tensor, x: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        pending, self._pending = self._pending, None
        ok = pending is not None and pending[0] == self.table_key(q.dtype) and pending[1] is coords
        with full_precision(q):  # the angles and the rotation in float32 or wider
            qr, kr = self._rope(q, k, coords, pending[2] if ok else None)
        return qr.to(q.dtype), kr.to(k.dtype)

    def _rope(self, q: Tensor, k: Tensor, coords: Tensor, rot: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """RoPE-Mixed's rotation of every patch row of q, k ``(B, H, P + N, d)`` (prefix rows unrotated), by the
        prepared phasors ``rot`` or, when None, the layer's own."""
        if rot is None:
            rot = mixed_phasors(coords, self.freqs, q.shape[-1], self.num_prefix_tokens, q.dtype)
        return rotate_pairs(q, rot), rotate_pairs(k, rot)


class CirculantSTRINGLayer(LayerPE):
    """``R(r) = expm(sum_a r_a (C_a - C_a^T))``, circulant ``C_a``: first columns ``cols: (p, H, d)``."""

    def __init__(self, cols: Tensor, num_prefix_tokens: int) -> None:
        super().__init__()
        self.cols = nn.Parameter(cols)  # (p, H, d)
        self.num_prefix_tokens = num_prefix_tokens

    def eigenvalues(self, dtype: torch.dtype) -> Tensor:
        """Imaginary parts ``(p, H, d)`` of the eigenvalues of ``C_a - C_a^T`` (in DFT order)."""
        dt = torch.promote_types(dtype, torch.float32)
        c = self.cols.to(dt)
        l = c - torch.roll(torch.flip(c, dims=[-1]), 1, dims=-1)  # first column of C - C^T
        return torch.fft.fft(l).imag  # the real part is 0 (l is real and odd)

    def qk(self, q: Tensor, k: Tensor, x: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        with full_precision(q):  # the phases and FFTs in float32 or wider
            return self._qk(q, k, coords)

    def _qk(self, q: Tensor, k: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        P = self.num_prefix_tokens
        lam = self.eigenvalues(q.dtype)  # (p, H, d)
        dt = lam.dtype
        c = batch_coords(coords, q.shape[0]).to(dt)  # (B, N, p)
        phase = torch.polar(torch.ones((), dtype=dt, device=lam.device),
                            torch.einsum("bnp,phd->bhnd", c, lam))  # (B, H, N, d): exp(i sum_a r_a lam_a)

        def rotate(t: Tensor) -> Tensor:
            patch = torch.fft.ifft(phase * torch.fft.fft(t[:, :, P:].to(dt))).real.to(t.dtype)
            return torch.cat([t[:, :, :P], patch], dim=2)

        return rotate(q), rotate(k)


@register_pe("string", order=110)
class STRING(PositionalEncoding):
    """STRING: ``R(r) = RoPE(r) P`` with a learned orthogonal ``P`` (Cayley) or circulant generators."""

    relative = True
    rotation_invariant = False
    distance_decay = False
    learned = True
    #: Cayley: compute every layer's P and phasors in one batch at encode_tokens (False: each layer its own)
    batch_layers = True
    options = (
        Option("p_form", "str", "cayley", "cayley: P = (I - S)(I + S)^-1 with RoPE-Mixed frequencies; "
               "circulant: circulant skew generators (FFT)", choices=P_FORMS),
        Option("theta", "float", 10.0, "cayley: frequency base of the initial RoPE-Mixed frequencies"),
        Option("fold_basis", "bool", True, "cayley: fold P into the q/k projection weights once per step "
               "(exact up to float rounding); false: multiply every token's q and k by P (the only path "
               "before 2026-12-05)"),
    )

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, p_form: str = "cayley",
                 theta: float = 10.0, fold_basis: bool = True) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if p_form not in P_FORMS:
            raise PEConfigError(f"string p_form must be one of {', '.join(P_FORMS)}, got {p_form!r}")
        if self.head_dim % 2 or self.head_dim // 2 < spatial_dims:
            raise PEConfigError(f"string needs an even head dim >= 2 * spatial_dims, got {self.head_dim}, "
                                f"p={spatial_dims}")
        if not theta > 1:
            raise PEConfigError(f"string theta must be > 1, got {theta}")
        self.p_form, self.theta, self.fold_basis = p_form, float(theta), bool(fold_basis)
        d = self.head_dim
        if p_form == "cayley":
            layers = (CayleySTRINGLayer(init_mixed_freqs(spatial_dims, num_heads, d, self.theta), d, num_prefix_tokens,
                                        self.fold_basis) for _ in range(depth))
        else:
            std = 1.0 / math.sqrt(8 * d)
            layers = (CirculantSTRINGLayer(torch.randn(spatial_dims, num_heads, d) * std, num_prefix_tokens)
                      for _ in range(depth))
        self.layers = nn.ModuleList(layers)

    def encode_tokens(self, x: Tensor, coords: Tensor, grid: Sequence[int] | None) -> Tensor:
        """No additive term; Cayley: every layer's ``P`` and phasors for this forward in one batch (one solve over
        the stacked skew matrices, one phasor table), handed to the layers. Bit for bit each layer's own
        computation (tests/encodings/test_batched_layer_tables.py); on CPU the per-layer small ops cost more in
        dispatch than in arithmetic."""
        if self.p_form == "cayley" and self.batch_layers and layer_tables_batchable(coords):
            lays = list(self.layers)
            orth = cayley_orthogonal(torch.stack([lay.upper for lay in lays]), self.head_dim, x.dtype)  # (L, H, d, d)
            rot = mixed_phasors(coords, torch.stack([lay.freqs for lay in lays]), self.head_dim,
                                self.num_prefix_tokens, x.dtype)  # (L, B|1, H, P + N, d/2)
            for lay, o, r in zip(lays, orth.unbind(), rot.unbind()):  # unbind: one backward node for all layers
                lay.prepare(lay.table_key(x.dtype), coords, o, r)
        return x

    def layer(self, i: int) -> LayerPE:
        return self.layers[i]

    def no_weight_decay(self) -> set[str]:
        names = ("upper", "freqs") if self.p_form == "cayley" else ("cols",)
        return {f"layers.{i}.{n}" for i in range(self.depth) for n in names}

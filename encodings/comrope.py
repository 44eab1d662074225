"""``comrope``: RoPE with trainable commuting angle matrices (exactly relative).

Paper: Yu et al., CVPR 2025, "ComRoPE: Scalable and Robust Rotary Position Embedding Parameterized
by Trainable Commuting Angle Matrices" (arXiv 2506.03737; official code: Longin-Yu/ComRoPE).
Defaults follow the paper and that code, read from them (no code taken from it).

* Token at position ``r`` rotates q and k of head ``h`` by ``R_h(r) = expm(sum_a s_a r_a A[h, a])``,
  ``A[h, a] = diag(B[h, a, 1], ..., B[h, a, m])`` with ``m = d / block_size`` skew blocks. The blocks
  ``B[h, a, k]`` of one ``k`` commute over the axes ``a``, so ``R(r_i)^T R(r_j) = R(r_j - r_i)``:
  logits depend on ``r_j - r_i`` only (the paper's RoPE equation).
* ``variant`` ``ld`` (default, ComRoPE-LD, linearly dependent): ``B[h, a, k] = theta[a, k] (P_hk - P_hk^T)``,
  one trainable base matrix per head and block, one trainable scalar per axis and block (shared by
  the heads, as in the official code). ``ap`` (ComRoPE-AP, axis-partitioned):
  ``B[h, a, k] = P_hk - P_hk^T`` if ``k = a (mod p)``, else 0 (block ``k`` belongs to axis ``k mod p``).
* Published defaults (read from the paper and the official code): block size 8 ("a block size of 8
  is used in practice", Sec. 4.1.1; Sec. 4.3.2 varies it from 2 to 8 and keeps 8 to bound the
  ``O(b^2)`` cost). The official ``model.py`` config class defaults ``block_size`` to 2, but that
  class also configures its vanilla-RoPE baseline, which requires 2; the experiments use 8. ``ld`` is
  the paper's best variant overall (Tables 1 and 3) and the one it carries to detection.
  ``d`` must be a multiple of the block size (``ap`` also needs ``m >= p``). ``block_size=2`` with
  ``ap`` is axial RoPE with learned frequencies.
* Init (official code, ``init_std`` config default 1): ``P`` entries ``N(0, init_std^2)``; ``theta``
  ``N(0, 1)``. Parameters are per layer (each attention layer builds its own), ``P`` per head and
  block, ``theta`` per axis and block, shared by the heads.
* Positions: the paper scales each axis to [0, 1] by its own extent (Sec. 3.4.1, ``x_a / X_a``, at
  the patch centre); the official code divides every axis, time included, by the number of patches
  per side (``axis_scale``) of the image it is given, so a higher resolution *interpolates* (the
  positions still span [0, 1]). pebench follows the code: ``s_a = 1 / S`` with ``S`` the largest
  spatial side (last two axes) of the **current** grid (``positions="current"``, the default; the
  grid the backbone passes to :meth:`ComRoPE.encode_tokens`, the training grid when it passes none,
  1 without either, e.g. point clouds). ``positions="train"`` divides by the training grid instead,
  so a larger grid *extrapolates* to positions past 1 (pebench's rule before this option).
  ``coord_scale`` overrides both (one fixed value per axis). The ``+0.5`` centre offset cancels in
  relative logits. The paper's training-time position perturbation (Sec. 3.4.2) is not part of the
  PE (``--coord-aug`` is pebench's coordinate augmentation).
* The angle matrices are excluded from weight decay, like RoPE-Mixed's frequencies.
* CLS: prefix tokens get the identity rotation (the official code gives CLS a position instead;
  pebench's interface has CLS carry none).

Computation (``impl``; the rotation is the same, tests/encodings/test_comrope_fast.py checks it in
float64 with gradients). Both variants give block ``k`` of head ``h`` one skew matrix
``S_hk = P_hk - P_hk^T`` scaled by a scalar phase ``phi_k(r) = sum_a s_a r_a w[a, k]`` (``w = theta``
for ``ld``, the axis mask for ``ap``), so ``R_hk(r) = expm(phi_k(r) S_hk)``. With the real spectral
form ``S_hk = U diag([[0, -l_j], [l_j, 0]]) U^T`` (``U`` orthogonal, ``+-i l_j`` the eigenvalues), the
rotation is ``U rot(phi_k(r) l_j) U^T``: RoPE with angles ``phi_k(r) l_j`` in the basis ``U``. Since
``U`` is orthogonal and the same for every token, ``(R_i q)^T (R_j k) = (D_i U^T q)^T (D_j U^T k)``:
``impl="eig"`` (default) returns ``D U^T q`` and ``D U^T k`` (prefix rows ``U^T q``, no phase), which
give the same logits (not the same vectors) as ``U D U^T q``. ``U`` and ``l`` come from one
``eigh`` of the Hermitian ``i S_hk`` per layer and step (``b = 2``: the closed form ``l = S[1, 0]``,
``U = I``); no per-token matrix exponential. Its gradient exists while the ``l_j`` of a block are
distinct and non-zero (true at any generic point; the random init never starts on a tie).
``impl="expm"``: the per-token ``torch.linalg.matrix_exp`` of every block (the definition, slower);
odd block sizes always take it. ``fold_basis`` (default on, ``eig``): ``U^T`` is the same for every token, so
the layer declares it as its ``qk_basis`` and the attention folds it into the q/k projection weights once
per step (``pebench.models.vit.fold_qk_basis``); the per-token work is then RoPE's phase rotation alone.
Same logits up to float rounding (tested in float64 with gradients); ``fold_basis=false`` applies ``U^T``
to every token's q and k (the only path before 2026-12-05: runs of earlier commits computed that).
Once per forward, :meth:`ComRoPE.encode_tokens` computes every layer's basis, speeds and phasors in one batch
(one ``eigh`` over the stacked base matrices, one phasor table) and hands them to the layers: on CPU the dozen
small ops per layer cost more in dispatch than in arithmetic. The result is bit for bit each layer's own
computation (tests/encodings/test_batched_layer_tables.py); a layer called on its own, or given other coords than
the forward's (windowed attention), computes its own tables, as every layer does for per-sample coords in
evaluation (:func:`~pebench.encodings.base.layer_tables_batchable`).
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor, nn

from pebench.core.options import Option

from ._rotation import BlockRotationLayerPE, block_rotations, full_precision, grid_coord_scale, skew
from .base import LayerPE, LayerTables, PEConfigError, PositionalEncoding, layer_tables_batchable
from .registry import register_pe
from .rope_axial import rope_phasors, rotate_pairs

__all__ = ["ComRoPE", "ComRoPELayer", "comrope_coord_scale", "phase_basis", "VARIANTS", "IMPLS", "POSITIONS"]

VARIANTS = ("ld", "ap")
#: ``eig``: one spectral decomposition per layer and step, then RoPE phases; ``expm``: per-token matrix_exp
IMPLS = ("eig", "expm")
#: what positions are divided by: the current grid (official code, interpolates) or the training grid
POSITIONS = ("current", "train")


def comrope_coord_scale(grid: Sequence[int] | None, spatial_dims: int) -> list[float]:
    """ComRoPE's position scale: ``1 / S`` on every axis, ``S`` the largest spatial side of the grid."""
    if grid is None or len(grid) != spatial_dims:
        return [1.0] * spatial_dims
    side = max(grid[-2:])
    return [1.0 / side] * spatial_dims


def phase_basis(s: Tensor) -> tuple[Tensor, Tensor]:
    """Real spectral form of skew matrices ``s: (..., b, b)`` (``b`` even): ``U (..., b, b)`` orthogonal
    and ``l (..., b/2)`` with ``s = U J U^T``, ``J`` block-diagonal ``[[0, -l_j], [l_j, 0]]``, i.e.
    ``s u_{2j} = l_j u_{2j+1}`` and ``s u_{2j+1} = -l_j u_{2j}`` for the columns ``u`` of ``U``.

    From ``eigh(i s)`` (Hermitian): an eigenvector ``v`` of eigenvalue ``l > 0`` gives the orthonormal
    pair ``sqrt(2) (Re v, Im v)``; ``b = 2`` uses the closed form ``U = I``, ``l = s[1, 0]``.
    """
    b = s.shape[-1]
    if b == 2:
        eye = torch.eye(2, dtype=s.dtype, device=s.device).expand(s.shape)
        return eye, s[..., 1, 0].unsqueeze(-1)
    lam, vec = torch.linalg.eigh(s.to(torch.promote_types(s.dtype, torch.complex64)) * 1j)  # ascending
    v = vec[..., b // 2:]  # (..., b, b/2): the eigenvectors of the positive eigenvalues
    u = torch.stack([v.real, v.imag], dim=-1).flatten(-2) * math.sqrt(2.0)  # (..., b, b): pair j -> 2j, 2j+1
    return u, lam[..., b // 2:]


def spectra(base: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """The eig path's per-step tables from base matrices ``base (..., H, m, b, b)``: the block-diagonal basis
    ``(..., H, d, d)`` (``t @ basis`` is ``U^T t``) and the speeds ``l (..., H, m, b/2)``, in ``dtype`` promoted to
    float32 or wider (autocast off). Leading dims (the layers, :meth:`ComRoPE.encode_tokens`) batch the ``eigh``."""
    dt = torch.promote_types(dtype, torch.float32)
    with torch.autocast(base.device.type, enabled=False):
        u, lam = phase_basis(skew(base.to(dt)))  # (..., H, m, b, b), (..., H, m, b/2)
        m, b = u.shape[-3], u.shape[-1]
        eye = torch.eye(m, dtype=dt, device=u.device)
        return (u.unsqueeze(-2) * eye[:, None, :, None]).reshape(*u.shape[:-3], m * b, m * b), lam  # (..., H, d, d)


def phase_phasors(coords: Tensor, scale: Tensor, w: Tensor, lam: Tensor, num_prefix_tokens: int) -> Tensor:
    """``exp(i phi_k(r) l_hkj)`` ``(..., B|1, H, P + N, d/2)`` (prefix rows: 1): coords ``(B|., N, p)``, the
    position scale ``(p,)``, axis weights ``w (..., p, m)``, speeds ``lam (..., H, m, b/2)``; leading dims (the
    layers) must match between ``w`` and ``lam``. Computed in ``lam``'s dtype with autocast off."""
    dt = lam.dtype
    with full_precision(coords):
        c = coords.to(dt) * scale.to(device=coords.device, dtype=dt)  # (B|., N, p)
        c = c if c.dim() == 3 else c.unsqueeze(0)  # (B|1, N, p)
        # (..., B|1, N, m): one (N, p) x (p, m) product per layer, not a batched one, whose kernel rounds
        # differently at small N (so a layer's phases have the same bits batched or alone)
        phi = c @ w.to(dt) if w.dim() == 2 else torch.stack([c @ wi for wi in w.to(dt).flatten(0, -3).unbind()]
                                                             ).unflatten(0, w.shape[:-2])
        ang = (phi.unsqueeze(-3).unsqueeze(-1) * lam.unsqueeze(-3).unsqueeze(-5)).flatten(-2)  # (..., B|1, H, N, d/2)
        return rope_phasors(ang, ang.shape[-1] * 2, num_prefix_tokens)  # (..., B|1, H, P + N, d/2)


class ComRoPELayer(LayerTables, BlockRotationLayerPE):
    """One layer's angle matrices: ``base: (H, m, b, b)`` and, for ``ld``, ``theta: (p, m)``.

    ``scale (p,)``: the position scale of the training grid (or ``coord_scale``); ``grid_scale``: the
    current grid's, set by :meth:`ComRoPE.encode_tokens` under ``positions="current"`` (None: use ``scale``).
    """

    def __init__(self, variant: str, num_heads: int, spatial_dims: int, num_blocks: int, block_size: int,
                 init_std: float, scale: Tensor, num_prefix_tokens: int, impl: str = "eig",
                 fold_basis: bool = True) -> None:
        super().__init__()
        self.variant = variant
        self.fold_basis = fold_basis
        self._pending_speeds: tuple | None = None  # (key, speeds, phasors|None, coords|None): qk_basis -> qk_after_basis
        self.spatial_dims = spatial_dims
        self.block_size = block_size
        self.impl = impl
        self.base = nn.Parameter(torch.randn(num_heads, num_blocks, block_size, block_size) * init_std)
        if variant == "ld":
            self.theta = nn.Parameter(torch.randn(spatial_dims, num_blocks))
        else:  # ap: block k belongs to axis k mod p
            owner = torch.arange(num_blocks) % spatial_dims
            mask = (owner[None, :] == torch.arange(spatial_dims)[:, None]).float()  # (p, m)
            self.register_buffer("axis_mask", mask, persistent=False)
        self.num_prefix_tokens = num_prefix_tokens
        self.register_buffer("scale", scale, persistent=False)  # (p,) float64
        self.grid_scale: Tensor | None = None  # (p,) float64, the current grid's (positions="current")

    def position_scale(self) -> Tensor:
        """The per-axis scale ``(p,)`` in use: the current grid's when set, else ``scale``."""
        return self.scale if self.grid_scale is None else self.grid_scale

    def axis_weights(self) -> Tensor:
        """``w (p, m)``: block ``k``'s phase is ``phi_k(r) = sum_a s_a r_a w[a, k]`` (``theta`` or the axis mask)."""
        return self.theta if self.variant == "ld" else self.axis_mask

    def generators(self) -> Tensor:
        """Commuting skew generators ``(H, p, m, b, b)``."""
        s = skew(self.base).unsqueeze(1)  # (H, 1, m, b, b)
        w = self.axis_weights()  # (p, m)
        return s * w[None, :, :, None, None].to(s.dtype)

    def rotations(self, coords: Tensor, batch_size: int, dtype: torch.dtype) -> Tensor:
        """Rotation blocks ``(B|1, H, N, m, b, b)`` by per-token matrix exponentials (``impl="expm"``)."""
        return block_rotations(coords, self.generators(), self.position_scale(), batch_size, dtype)

    def spectrum(self, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """``impl="eig"``: the basis ``(H, d, d)`` (block-diagonal ``U_hk``; ``t @ basis`` is ``U^T t``) and the
        rotation speeds ``l (H, m, b/2)``, in ``dtype`` promoted to float32 or wider."""
        return spectra(self.base, dtype)

    def phasors(self, coords: Tensor, lam: Tensor) -> Tensor:
        """``exp(i phi_k(r) l_hkj)`` ``(B|1, H, P + N, d/2)`` (prefix rows: 1) for speeds ``lam (H, m, b/2)``."""
        return phase_phasors(coords, self.position_scale(), self.axis_weights(), lam, self.num_prefix_tokens)

    def phase_tables(self, coords: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """``impl="eig"``: the basis ``(H, d, d)`` (:meth:`spectrum`) and the phasors (:meth:`phasors`)."""
        basis, lam = self.spectrum(dtype)
        return basis, self.phasors(coords, lam)

    def _eig_path(self) -> bool:
        return self.impl == "eig" and self.block_size % 2 == 0

    TRANSIENT = ("_prepared", "_pending_speeds")  # prepared: (key, coords, basis, speeds, phasors)

    def table_key(self, dtype: torch.dtype) -> tuple:
        """What the tables depend on besides the coords: the speeds' key, the axis weights' version and the scale."""
        w = self.theta._version if self.variant == "ld" else None
        return self._spectrum_key(dtype), w, id(self.position_scale())

    def qk_basis(self, dtype: torch.dtype) -> Tensor | None:
        """``fold_basis`` with ``impl="eig"``: ``U^T`` per head, to fold into the q/k projection; the speeds
        of the same decomposition wait for :meth:`qk_after_basis` (one ``eigh`` per layer and step, or one for
        all layers when :meth:`ComRoPE.encode_tokens` prepared them)."""
        if not (self.fold_basis and self._eig_path()):
            return None
        prepared = self.take_prepared(dtype)
        if prepared is not None:
            _, coords, basis, lam, rot = prepared
            self._pending_speeds = (self._spectrum_key(dtype), lam, rot, coords)
        else:
            basis, lam = self.spectrum(dtype)
            self._pending_speeds = (self._spectrum_key(dtype), lam, None, None)
        return basis.transpose(-1, -2)

    def _spectrum_key(self, dtype: torch.dtype) -> tuple:
        """What the speeds depend on: the base matrices' version, the dtype, and the grad mode (a graph or not)."""
        return self.base._version, torch.promote_types(dtype, torch.float32), torch.is_grad_enabled()

    def qk_after_basis(self, q: Tensor, k: Tensor, x: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        pending, self._pending_speeds = self._pending_speeds, None
        rot = None
        if pending is not None and pending[0] == self._spectrum_key(q.dtype):
            lam = pending[1]  # from the qk_basis call of this forward
            if pending[3] is coords:
                rot = pending[2]  # prepared for these coords
        else:  # called without a matching qk_basis just before: decompose here
            lam = self.spectrum(q.dtype)[1]
        if rot is None:
            rot = self.phasors(coords, lam)
        with full_precision(q):
            return rotate_pairs(q, rot), rotate_pairs(k, rot)

    def qk(self, q: Tensor, k: Tensor, x: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        if not self._eig_path():
            return super().qk(q, k, x, coords)
        prepared = self.take_prepared(q.dtype)
        if prepared is not None and prepared[1] is coords:
            basis, rot = prepared[2], prepared[4]
        else:
            basis, rot = self.phase_tables(coords, q.dtype)
        return _phase_rotate(q, basis, rot), _phase_rotate(k, basis, rot)


def _phase_rotate(t: Tensor, basis: Tensor, rot: Tensor) -> Tensor:
    """``D(r) U^T t`` for ``t (B, H, T, d)``: the basis change ``basis (H, d, d)`` on every row, then each
    channel pair ``(2j, 2j+1)`` turned by the phasor ``rot (B|1, H, T, d/2)``; ``t``'s dtype."""
    with full_precision(t):
        return rotate_pairs(t.to(basis.dtype) @ basis, rot).to(t.dtype)  # (B, H, T, d)


@register_pe("comrope", order=100)
class ComRoPE(PositionalEncoding):
    """ComRoPE: commuting trainable angle matrices, ``ld`` (default) or ``ap``; exactly relative."""

    relative = True
    rotation_invariant = False
    distance_decay = False
    learned = True
    #: eig path: compute every layer's tables in one batch at encode_tokens (False: each layer its own, as before)
    batch_layers = True
    options = (
        Option("variant", "str", "ld", "ld: theta[a,k] (P - P^T) (linearly dependent); ap: block k on axis k mod p",
               choices=VARIANTS),
        Option("block_size", "int", 8, "size of the skew blocks (head dim must be a multiple)"),
        Option("init_std", "float", 1.0, "std of the initial base matrices P"),
        Option("coord_scale", "floats", None,
               "fixed per-axis position scale (default: 1/S on every axis, S the largest side of the grid "
               "that `positions` names)"),
        Option("positions", "str", "current",
               "current: positions / the current grid's side (official code; larger grids interpolate); "
               "train: / the training grid's side (larger grids extrapolate)", choices=POSITIONS),
        Option("impl", "str", "eig",
               "eig: one spectral decomposition per layer and step, then RoPE phases; expm: per-token "
               "matrix exponential (the definition; same logits, slower)", choices=IMPLS),
        Option("fold_basis", "bool", True, "impl=eig: fold the basis change U^T into the q/k projection weights "
               "once per step (exact up to float rounding); false: apply it to every token's q and k (the only "
               "path before 2026-12-05)"),
    )

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, variant: str = "ld",
                 block_size: int = 8, init_std: float = 1.0, coord_scale: Sequence[float] | None = None,
                 positions: str = "current", impl: str = "eig", fold_basis: bool = True) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if variant not in VARIANTS:
            raise PEConfigError(f"comrope variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
        if positions not in POSITIONS:
            raise PEConfigError(f"comrope positions must be one of {', '.join(POSITIONS)}, got {positions!r}")
        if impl not in IMPLS:
            raise PEConfigError(f"comrope impl must be one of {', '.join(IMPLS)}, got {impl!r}")
        b = int(block_size)
        if b < 2 or self.head_dim % b:
            raise PEConfigError(f"comrope block_size must be >= 2 and divide the head dim {self.head_dim}, got {b}")
        m = self.head_dim // b
        if variant == "ap" and m < spatial_dims:
            raise PEConfigError(f"comrope ap needs at least p={spatial_dims} blocks, head dim {self.head_dim} "
                                f"has {m} of size {b}")
        if not init_std > 0:
            raise PEConfigError(f"comrope init_std must be > 0, got {init_std}")
        self.variant, self.block_size, self.init_std = variant, b, float(init_std)
        self.positions, self.impl, self.fold_basis = positions, impl, bool(fold_basis)
        self.fixed_scale = coord_scale is not None
        scale = comrope_coord_scale(self.train_grid, spatial_dims) if coord_scale is None else coord_scale
        s = grid_coord_scale(scale, spatial_dims)
        self._grid_scales: dict[tuple[int, ...], Tensor] = {}
        self.layers = nn.ModuleList(
            ComRoPELayer(variant, num_heads, spatial_dims, m, b, self.init_std, s.clone(), num_prefix_tokens, impl,
                         self.fold_basis) for _ in range(depth))

    def encode_tokens(self, x: Tensor, coords: Tensor, grid: Sequence[int] | None) -> Tensor:
        """No additive term; under ``positions="current"`` (and no ``coord_scale``) records the current
        grid's scale in every layer (none given: the layers fall back to the training grid's)."""
        if self.positions == "current" and not self.fixed_scale:
            scale = None
            if grid is not None and len(grid) == self.spatial_dims:
                key = tuple(int(g) for g in grid)
                if key not in self._grid_scales:
                    self._grid_scales[key] = grid_coord_scale(comrope_coord_scale(key, self.spatial_dims),
                                                              self.spatial_dims)
                scale = self._grid_scales[key]
            for lay in self.layers:
                lay.grid_scale = scale
        if self.impl == "eig" and self.block_size % 2 == 0 and self.batch_layers and layer_tables_batchable(coords):
            self._prepare_layers(coords, x.dtype)
        return x

    def _prepare_layers(self, coords: Tensor, dtype: torch.dtype) -> None:
        """Every layer's basis, speeds and phasors for this forward in one batch: one ``eigh`` over the layers'
        stacked base matrices and one phasor table, instead of a dozen small ops per layer (on CPU the per-layer
        calls cost more in dispatch than in arithmetic). The same values as each layer's own computation
        (the same per-matrix decomposition and elementwise ops); tested against it in float64 with gradients."""
        lays = list(self.layers)
        basis, lam = spectra(torch.stack([lay.base for lay in lays]), dtype)  # (L, H, d, d), (L, H, m, b/2)
        w = torch.stack([lay.axis_weights() for lay in lays])  # (L, p, m)
        rot = phase_phasors(coords, lays[0].position_scale(), w, lam.to(basis.dtype), self.num_prefix_tokens)
        # unbind, not indexing: one backward node that stacks the layers' gradients, instead of one zero-filled
        # (L, ...) tensor per layer and table
        for lay, bs, ls, rs in zip(lays, basis.unbind(), lam.unbind(), rot.unbind()):  # rot: (L, B|1, H, P + N, d/2)
            lay.prepare(lay.table_key(dtype), coords, bs, ls, rs)

    def layer(self, i: int) -> LayerPE:
        return self.layers[i]

    def no_weight_decay(self) -> set[str]:
        names = {f"layers.{i}.base" for i in range(self.depth)}
        if self.variant == "ld":
            names |= {f"layers.{i}.theta" for i in range(self.depth)}
        return names

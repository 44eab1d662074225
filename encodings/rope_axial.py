"""``rope-axial``: axial rotary position embedding for n-D tokens.

Papers: Su et al., 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding";
axial 2-D form for ViTs: Heo et al., ECCV 2024, "Rotary Position Embedding for Vision
Transformer" (RoPE-Axial), generalised here to ``p`` axes.

* Head channels are split evenly over the ``p`` axes: each axis owns ``F = d // (2p)``
  consecutive channel *pairs* ``(2j, 2j+1)`` (interleaved layout, timm's ``rot``), axis ``a``
  the pairs ``a*F .. a*F+F-1``. Pair ``k`` of axis ``a`` is rotated by ``c_a * w_k`` with
  ``w_k = base^(-k/F)``. Leftover pairs (``d/2 - pF``) are not rotated.
* Base frequency: **100** by default, as in Heo et al.'s RoPE-Axial for ViTs (their
  ``rope_theta=100``; coords are patch indices, so 10000 would waste most bands on
  wavelengths far longer than any image). ``base=10000`` gives the RoFormer/LLM choice.
* Rotation: timm's ``apply_rot_embed`` (``half=False``) convention, computed as one complex multiply per
  pair (:func:`rotate_pairs`).
* The angle is a linear function of the coords, so any grid, unseen grids and non-grid
  coords work as-is; logits depend on ``r_j - r_i`` only (translation invariant).
* CLS: prefix tokens get the identity rotation (angle 0).

Frequency layouts (option ``layout``, for video / events: axis 0 is time ``t``, then ``y``, ``x``).
``axial`` is the layout above (the default, unchanged). The others use one 1-D RoPE frequency
ladder over all ``F = d/2`` pairs, ``w_k = base^(-k/F)`` (pair 0 the highest frequency), and assign
each pair to an axis; pair ``k`` of axis ``a`` is rotated by ``c_a * w_k``:

* ``mrope`` (Qwen2-VL's M-RoPE): contiguous sections ``t | y | x`` from the highest frequency down;
  Qwen2-VL's sections ``(16, 24, 24)`` of 64 pairs, scaled to ``F`` by the rule ``t = F // 4``,
  ``y = (F - t) // 2``, ``x = F - t - y`` (F = 16 at vit-nano: 4, 6, 6).
* ``mrope-interleaved`` (Qwen3-VL): axes cycle ``t, y, x, t, y, x, ...`` from pair 0 while ``y`` and
  ``x`` have pairs left, the remaining (lowest-frequency) pairs go to ``t``; Qwen3-VL's sections
  ``(24, 20, 20)`` of 64 pairs, scaled by ``y = x = 5F // 16``, ``t = F - y - x`` (F = 16: 6, 5, 5).
* ``videorope`` (Wei et al., ICML 2025, "VideoRoPE: What Makes for Good Video Rotary Position
  Embedding?"): low-frequency temporal allocation, the lowest ``F // 4`` pairs on ``t``, the rest
  alternate ``y, x, y, x, ...``; diagonal layout, the spatial positions are offset by the (scaled) time
  index, ``(t', y + t', x + t')``; adjustable temporal spacing ``t' = 2 t``. As read from the official
  code (Wiselnn570/VideoRoPE: Qwen2-VL's sections, ``t`` on the last quarter, scale factor 2.0 in its
  evaluation scripts); its centring of ``y`` and ``x`` on the frame adds a constant, which cancels.
* ``hope`` (Li et al., NeurIPS 2025, "HoPE: Hybrid of Position Embedding for Long Context Vision-Language
  Models", arXiv 2505.20444; official code hrlics/HoPE, ``modeling_hope.py``): VideoRoPE's pairs and diagonal
  layout with two changes. Hybrid frequency allocation: the lowest ``F // 4`` pairs, VideoRoPE's temporal ones,
  get frequency zero (they are not rotated: NoPE channels), the rest alternate ``y, x, y, x, ...`` from pair 0;
  time reaches the logits only through the diagonal offset ``(y + g t, x + g t)``. Dynamic temporal scaling:
  the temporal spacing ``g`` is drawn in training for each sample (each video) from the set of option
  ``hope_scales``, default the official ``{0.5, 0.75, 1, 1.25, 1.5}`` (uniformly, torch's global generator,
  once per forward in :meth:`AxialRoPE.encode_tokens`, shared by all blocks as the official position ids
  are; a layer given other coords, e.g. attention windows, uses ``hope_eval_scale``); evaluation uses the
  fixed ``hope_eval_scale``. The official inference code makes the user choose
  that value (its retrieval script uses 0.75); pebench's default 1 is the middle of the training set, the
  unscaled frame index. Its centring of ``y`` and ``x`` and the text offset add constants, which cancel.
  For images (no time axis) ``hope`` equals ``videorope``: the zeroed pairs are the ones ``videorope``
  leaves unrotated there.

With 2-D coords (images: ``y``, ``x``) the ``t`` pairs are not rotated (the time index of a single
frame is constant, so its relative angle is 0). Qwen's code rotates half-split channel pairs
(``rotate_half``); pebench pairs adjacent channels, a fixed channel permutation that the qkv
projection absorbs. ``base`` stays pebench's 100 for every layout (the LLMs' 10^6 is for text
positions in the thousands). Every layout is linear in the coords, hence exactly relative (``hope``
in training: for each drawn temporal spacing).

p-RoPE (option ``p``; Barbero et al., ICLR 2025, "Round and Round We Go! What makes Rotary Positional
Encodings useful?", Sec. 6.1): ``p`` is the fraction of RoPE's frequencies kept; the lowest ``1 - p``
are truncated to frequency 0, i.e. their pairs are not rotated and act as position-free (NoPE)
channels, while the kept frequencies keep their values (``p = 1``: RoPE, ``p = 0``: no rotation).
The number kept is ``floor(p * F)``, counted from the highest frequency, as in the authors' group's
public Gemma code (``rope_proportion``: ``int(p * F)`` frequencies, the rest zero). ``axial``
truncates each axis's own ladder of ``F = d // (2 * axes)`` pairs; the other layouts truncate their one
ladder of ``d/2`` pairs (whichever axis owns the dropped pairs). Still linear in the coords, so
exactly relative. The default ``p = 1`` leaves rope-axial unchanged.

PointROPE (LitePT, arXiv 2512.13689; code prs-eth/LitePT, ``libs/pointrope``) is this PE's ``axial`` layout
with ``p = 3`` axes (``x, y, z``, ``F = d // 6`` frequencies each, leftover channels unrotated) and its ``freq``
as ``base`` (100 in every LitePT config, pebench's default), applied to LitePT's *integer* voxel coordinates
(Pointcept's ``grid_coord = floor(c / s) - min``, divided by 2 per pooling stage). Its channels differ by a fixed
permutation (axis ``a`` owns the block ``[2aF, 2aF + 2F)``, pair ``k`` rotating channel ``2aF + k`` with
``2aF + F + k``; here pair ``aF + k`` is ``(2(aF + k), 2(aF + k) + 1)``), which a q/k projection absorbs. So it
equals rope-axial on coordinates in voxel-cell units exactly when they lie on the voxel grid; on pebench's
continuous token coordinates (patch centres) rope-axial on ``c / s`` is PointROPE without the rounding to cells
(tested against a port of its CPU kernel in ``tests/encodings/test_pointrope.py``). The presets
``<dataset>-pointrope`` set the unit.

Extrapolation rules (option ``extrapolation``, :mod:`~pebench.encodings.extrapolation`): ``native`` (the
default: the rotation of the new coordinates, as always), ``pi``, ``ntk``, ``yarn``, ``normalized``; they
act in evaluation only, on a grid other than the training grid, and need the training grid (not points).
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from timm.layers.pos_embed_sincos import apply_rot_embed
from torch import Tensor

from pebench.core.options import Option

from . import extrapolation as extrap
from .base import CoordsCache, LayerPE, PEConfigError, PositionalEncoding, batch_coords
from .registry import register_pe

__all__ = ["AxialRoPE", "AxialRoPELayer", "rope_sin_cos", "rope_phasors", "rotate_pairs", "apply_rope", "LAYOUTS",
           "layout_frequencies", "kept_frequencies", "HOPE_SCALES", "tensor_version"]

#: Frequency layouts of ``rope-axial`` (see the module docstring).
LAYOUTS = ("axial", "mrope", "mrope-interleaved", "videorope", "hope")
#: VideoRoPE's adjustable temporal spacing (its delta).
VIDEOROPE_TIME_SCALE = 2.0
#: HoPE's dynamic temporal scaling: the training set of temporal spacings (official ``scale_factors``)
HOPE_SCALES = (0.5, 0.75, 1.0, 1.25, 1.5)


def tensor_version(t: Tensor) -> int:
    """``t._version``; -2 for an inference tensor (no version counter: matched by identity alone)."""
    return -2 if t.is_inference() else t._version


def rope_sin_cos(angles: Tensor, head_dim: int, num_prefix_tokens: int) -> tuple[Tensor, Tensor]:
    """Interleaved sin/cos tables from pair angles.

    angles: ``(B, H|1, N, F)`` with ``F <= head_dim // 2`` (missing pairs -> angle 0).
    Returns sin, cos ``(B, H|1, P + N, head_dim)`` with identity (sin 0, cos 1) on prefix rows.
    """
    pairs = head_dim // 2
    angles = F.pad(angles, (0, pairs - angles.shape[-1], num_prefix_tokens, 0))  # (B, H, P + N, d/2)
    sin = angles.sin().repeat_interleave(2, dim=-1)  # (B, H, P + N, d)
    cos = angles.cos().repeat_interleave(2, dim=-1)
    return sin, cos


def _pair_axes(layout: str, n_pairs: int) -> list[int]:
    """The axis (0 = t, 1 = y, 2 = x) of each of the ``n_pairs`` pairs, highest frequency first."""
    F_ = n_pairs
    if layout == "mrope":
        t = F_ // 4
        y = (F_ - t) // 2
        return [0] * t + [1] * y + [2] * (F_ - t - y)
    if layout == "mrope-interleaved":
        y = 5 * F_ // 16
        return [k % 3 if k < 3 * y else 0 for k in range(F_)]
    if layout in ("videorope", "hope"):  # hope: the same pairs, its t pairs get frequency 0 (layout_frequencies)
        t = F_ // 4
        return [1 + k % 2 for k in range(F_ - t)] + [0] * t
    raise ValueError(f"no pair assignment for layout {layout!r}")


def kept_frequencies(p: float, n_freq: int) -> int:
    """p-RoPE: how many of a ladder's ``n_freq`` frequencies keep their value (the highest ones)."""
    return int(p * n_freq)


def layout_frequencies(layout: str, head_dim: int, spatial_dims: int, base: float,
                       p: float = 1.0) -> Tensor:
    """Frequency matrix ``M: (p, d/2)`` float64 of a non-axial layout: pair ``k`` is rotated by
    ``sum_a c_a M[a, k]`` (see the module docstring); ``p < 1`` zeroes the pairs past the kept
    fraction of the ladder (p-RoPE)."""
    if spatial_dims not in (2, 3):
        raise PEConfigError(f"rope-axial layout {layout!r} needs 2-D or 3-D coords, got p={spatial_dims}")
    n_pairs = head_dim // 2
    omega = base ** (-torch.arange(n_pairs, dtype=torch.float64) / n_pairs)  # (F,)
    axes = _pair_axes(layout, n_pairs)
    m = torch.zeros(3, n_pairs, dtype=torch.float64)  # rows t, y, x
    for k, a in enumerate(axes):
        m[a, k] = omega[k]
    if layout == "videorope":  # t' = 2 t drives its own pairs and, by the diagonal offset, the spatial ones
        m[0] = VIDEOROPE_TIME_SCALE * omega
    if layout == "hope":  # t pairs: frequency 0; t' = g t drives the spatial pairs by the diagonal offset (g = 1
        m[0] = 0.0        # here: the layer scales the time coordinate by the forward's g)
        m[0, : n_pairs - n_pairs // 4] = omega[: n_pairs - n_pairs // 4]
    if p < 1:
        m[:, kept_frequencies(p, n_pairs):] = 0.0  # p-RoPE: the lowest frequencies are not rotated
    return m if spatial_dims == 3 else m[1:]  # images: no time axis (its pairs stay unrotated)


def rope_phasors(angles: Tensor, head_dim: int, num_prefix_tokens: int) -> Tensor:
    """Unit complex phasors ``exp(i angle)`` ``(B, H|1, P + N, d/2)`` from pair angles ``(B, H|1, N, F)``,
    ``F <= d/2`` (missing pairs and prefix rows: 1, the identity)."""
    angles = F.pad(angles, (0, head_dim // 2 - angles.shape[-1], num_prefix_tokens, 0))  # (B, H, P + N, d/2)
    return torch.polar(torch.ones_like(angles), angles)


def rotate_pairs(t: Tensor, phasors: Tensor) -> Tensor:
    """Rotate each channel pair ``(2j, 2j+1)`` of ``t (B, H, T, d)`` as the complex number ``t_2j + i t_2j+1``
    times ``phasors (B|1, H|1, T, d/2)``: the same rotation as timm's ``apply_rot_embed`` (interleaved,
    ``[[cos, -sin], [sin, cos]]``) in one complex multiply (forward and backward), about 1.6x faster on
    CPU than its six real ops. Computed in float32 or wider (no complex bfloat16); ``t``'s dtype back."""
    dt = torch.promote_types(t.dtype, torch.float32)
    x = t.to(dt).unflatten(-1, (-1, 2))  # (B, H, T, d/2, 2)
    try:
        xc = torch.view_as_complex(x)
    except RuntimeError:  # strides not viewable as complex (e.g. an odd offset): copy once
        xc = torch.view_as_complex(x.contiguous())
    return torch.view_as_real(xc * phasors.to(xc.dtype)).flatten(-2).to(t.dtype)


def apply_rope(q: Tensor, k: Tensor, angles: Tensor, num_prefix_tokens: int) -> tuple[Tensor, Tensor]:
    """Rotate q, k ``(B, H, P + N, d)`` by pair angles ``(B, H|1, N, F)``."""
    rot = rope_phasors(angles, q.shape[-1], num_prefix_tokens)
    return rotate_pairs(q, rot), rotate_pairs(k, rot)


class AxialRoPELayer(LayerPE):
    """Stateless per-layer part (all layers share it): rotates q and k. ``freq_matrix`` ``(p, d/2)``:
    a non-axial layout's frequencies (:func:`layout_frequencies`); ``None``: the axial layout."""

    def __init__(self, base: float, n_freq: int, num_prefix_tokens: int, freq_matrix: Tensor | None = None,
                 n_rot: int | None = None) -> None:
        super().__init__()
        self.base = base
        self.n_freq = n_freq
        self.n_rot = n_freq if n_rot is None else n_rot  # p-RoPE: frequencies past n_rot are 0
        self.num_prefix_tokens = num_prefix_tokens
        self.freq_matrix = freq_matrix  # (p, d/2) float64 or None; a plain attribute (no state_dict entry)
        self._tables = CoordsCache()
        #: extrapolation rule (:mod:`~pebench.encodings.extrapolation`) and the training grid it needs
        self.rule = "native"
        self.train_grid: tuple[int, ...] | None = None
        self._extent = CoordsCache()
        #: HoPE's temporal spacing in evaluation (None: the layout scales no time axis); the training draws
        #: of the current forward are recorded by :meth:`AxialRoPE.encode_tokens` in ``_time_draw``
        self.eval_time_scale: float | None = None
        self._time_draw: tuple[Tensor, int, Tensor, int] | None = None  # (coords, version, g (B,), serial)

    def omega(self, device: torch.device, dtype: torch.dtype) -> Tensor:
        """Frequencies ``w_k = base^(-k/F)``: ``(F,)`` (computed on the fly, in float32 or wider); with
        p-RoPE, ``w_k = 0`` for ``k >= n_rot``."""
        w = self.base ** (-torch.arange(self.n_freq, device=device, dtype=dtype) / self.n_freq)
        if self.n_rot < self.n_freq:
            w = torch.cat([w[:self.n_rot], w.new_zeros(self.n_freq - self.n_rot)])
        return w

    def time_scales(self, coords: Tensor) -> Tensor | None:
        """HoPE's temporal spacing for ``coords``: the per-sample draws ``(B,)`` of the current training forward
        when these are its coords, else ``None`` (the evaluation value, or no time scaling)."""
        d = self._time_draw
        if d is not None and self.training and d[0] is coords and d[1] == tensor_version(coords):
            return d[2]
        return None

    def _scale_time(self, c: Tensor, draws: Tensor | None) -> Tensor:
        """``c (B, N, p)`` with the time axis (0) times HoPE's spacing (the draws ``(B,)`` or the evaluation value)."""
        if self.eval_time_scale is None or c.shape[-1] != 3:
            return c
        g = draws.to(c.dtype)[:, None, None] if draws is not None else self.eval_time_scale
        return torch.cat([c[..., :1] * g, c[..., 1:]], dim=-1)

    def angles(self, coords: Tensor, batch_size: int, dtype: torch.dtype) -> Tensor:
        """Pair angles ``(B, 1, N, p * F)``, axis-major (a non-axial layout: ``(B, 1, N, d/2)``)."""
        dt = torch.promote_types(dtype, torch.float32)
        c = self._scale_time(batch_coords(coords, batch_size).to(dt), self.time_scales(coords))  # (B, N, p)
        if self.freq_matrix is not None:
            m = self.freq_matrix.to(device=c.device, dtype=dt)  # (p, d/2); elementwise, not matmul: no autocast
            return (c.unsqueeze(-1) * m).sum(-2).unsqueeze(1)  # (B, 1, N, d/2)
        ang = c.unsqueeze(-1) * self.omega(c.device, dt)  # (B, N, p, F)
        return ang.flatten(-2).unsqueeze(1)  # (B, 1, N, p * F)

    def sin_cos(self, coords: Tensor, batch_size: int, dtype: torch.dtype, head_dim: int) -> tuple[Tensor, Tensor]:
        """The sin/cos tables ``(B | 1, 1, P + N, d)``, cached per coords tensor (the layer is shared
        by all blocks, so a forward computes them once; see :class:`~pebench.encodings.base.CoordsCache`)."""
        b, tkey = self._batch_and_key(coords, batch_size)  # broadcast (N, p) coords: one table row for the batch
        key = (b, dtype, head_dim, coords.shape, coords.device, tkey)
        return self._tables.get(coords, key, lambda: rope_sin_cos(self.angles(coords, b, dtype), head_dim,
                                                                   self.num_prefix_tokens))

    def _batch_and_key(self, coords: Tensor, batch_size: int) -> tuple[int, tuple]:
        """Table rows (1 for broadcast coords, unless HoPE drew a spacing per sample) and the time-scale key."""
        d = self.time_scales(coords)
        if d is not None:
            return batch_size, ("draw", self._time_draw[3] if self._time_draw is not None else -1)
        return (1 if coords.dim() == 2 else batch_size), ("eval", self.eval_time_scale)

    def phasors(self, coords: Tensor, batch_size: int, dtype: torch.dtype, head_dim: int) -> Tensor:
        """The complex phasor table ``(B | 1, 1, P + N, d/2)`` (:func:`rope_phasors`), cached per coords tensor
        like :meth:`sin_cos`."""
        b, tkey = self._batch_and_key(coords, batch_size)
        key = ("phasors", b, dtype, head_dim, coords.shape, coords.device, tkey)
        return self._tables.get(coords, key, lambda: rope_phasors(self.angles(coords, b, dtype), head_dim,
                                                                   self.num_prefix_tokens))

    def qk(self, q: Tensor, k: Tensor, x: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        if self.rule != "native" and not self.training and self.train_grid is not None:
            extent = self._extent.get(coords, "extent", lambda: extrap.grid_extent(coords))
            if extent != self.train_grid:
                return self._qk_rule(q, k, coords, extent)
        rot = self.phasors(coords, q.shape[0], q.dtype, q.shape[-1])
        return rotate_pairs(q, rot), rotate_pairs(k, rot)

    def pair_frequencies(self, n_axes: int, head_dim: int) -> tuple[Tensor, Tensor, int]:
        """The native rotation as ``(M, k, L)``: ``M (p, d/2)`` float64, pair ``j`` rotated by ``sum_a c_a M[a, j]``;
        ``k (d/2,)`` each pair's index in its frequency ladder, ``L`` the ladder length."""
        if self.freq_matrix is not None:
            n = self.freq_matrix.shape[1]
            return self.freq_matrix.clone(), torch.arange(n, dtype=torch.float64), n
        w = self.omega(torch.device("cpu"), torch.float64)  # (F,)
        n_pairs = head_dim // 2
        m = torch.zeros(n_axes, n_pairs, dtype=torch.float64)
        k = torch.zeros(n_pairs, dtype=torch.float64)
        for a in range(n_axes):
            m[a, a * self.n_freq:(a + 1) * self.n_freq] = w
            k[a * self.n_freq:(a + 1) * self.n_freq] = torch.arange(self.n_freq, dtype=torch.float64)
        return m, k, self.n_freq

    def _qk_rule(self, q: Tensor, k: Tensor, coords: Tensor, extent: tuple[int, ...]) -> tuple[Tensor, Tensor]:
        """q, k rotated under ``self.rule`` on a grid of ``extent`` (see :mod:`~pebench.encodings.extrapolation`)."""
        dt = torch.promote_types(q.dtype, torch.float32)
        c = batch_coords(coords, 1 if coords.dim() == 2 else q.shape[0]).to(dt)  # (B|1, N, p)
        c = self._scale_time(c, None)  # hope: the evaluation spacing (rules act in evaluation only)
        m, ladder, n_ladder = self.pair_frequencies(c.shape[-1], q.shape[-1])  # (p, d/2), (d/2,)
        scales = extrap.axis_scales(self.train_grid, extent)
        if self.rule in ("pi", "normalized"):
            c = extrap.map_coords(self.rule, c, self.train_grid, extent)
        elif self.rule == "ntk":
            m = torch.stack([extrap.ntk_frequencies(m[a], ladder, n_ladder, scales[a]) for a in range(len(scales))])
        elif self.rule == "yarn":
            m = torch.stack([extrap.yarn_frequencies(m[a], float(self.train_grid[a]), scales[a])
                             for a in range(len(scales))])
        ang = (c.unsqueeze(-1) * m.to(device=c.device, dtype=dt)).sum(-2).unsqueeze(1)  # (B|1, 1, N, d/2)
        sin, cos = rope_sin_cos(ang, q.shape[-1], self.num_prefix_tokens)
        q, k = apply_rot_embed(q, sin.to(q.dtype), cos.to(q.dtype)), apply_rot_embed(k, sin.to(k.dtype), cos.to(k.dtype))
        if self.rule == "yarn":
            mscale = extrap.yarn_logit_scale(math.prod(scales)) ** 0.5  # on q and k each
            q, k = q * mscale, k * mscale
        return q, k


@register_pe("rope-axial", order=30)
class AxialRoPE(PositionalEncoding):
    """Axial RoPE (no parameters). Options: ``base`` (default 100), ``layout`` (default ``axial``), ``p``
    (p-RoPE's fraction of frequencies rotated, default 1), ``hope_scales`` / ``hope_eval_scale`` (``layout=hope``'s
    temporal spacings in training / evaluation)."""

    relative = True
    rotation_invariant = False
    distance_decay = False
    learned = False
    options = (Option("base", "float", 100.0, "frequency base: frequencies base^(-k/F) per axis"),
               Option("layout", "str", "axial", "frequency layout over t/y/x: axial (per-axis ladders), mrope "
                      "(Qwen2-VL), mrope-interleaved (Qwen3-VL), videorope, hope (HoPE: lowest quarter unrotated, "
                      "dynamic temporal scaling)", choices=LAYOUTS),
               Option("p", "float", 1.0, "p-RoPE (Barbero et al. 2024): fraction of each frequency ladder rotated, "
                      "the highest; the lowest 1-p stay unrotated (1: RoPE, 0: no rotation)"),
               Option("extrapolation", "str", "native", "rule on an unseen grid, in evaluation: native (the new "
                      "coords), pi, ntk, yarn, normalized (pebench.encodings.extrapolation)",
                      choices=extrap.ROPE_RULES),
               Option("hope_scales", "floats", HOPE_SCALES, "layout=hope, training: temporal spacings drawn per "
                      "sample (HoPE's dynamic temporal scaling)", minimum=0.0, minimum_inclusive=False),
               Option("hope_eval_scale", "float", 1.0, "layout=hope, evaluation: the temporal spacing (HoPE leaves "
                      "it to the user)", minimum=0.0, minimum_inclusive=False))

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, base: float = 100.0,
                 layout: str = "axial", p: float = 1.0, extrapolation: str = "native",
                 hope_scales: Sequence[float] = HOPE_SCALES, hope_eval_scale: float = 1.0) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if self.head_dim % 2:
            raise PEConfigError(f"rope-axial needs an even head dim, got {self.head_dim}")
        n_freq = self.head_dim // (2 * spatial_dims)
        if n_freq < 1:
            raise PEConfigError(f"rope-axial needs head_dim >= 2 * spatial_dims, got {self.head_dim}, p={spatial_dims}")
        if base <= 1:
            raise PEConfigError(f"rope-axial base must be > 1, got {base}")
        if layout not in LAYOUTS:
            raise PEConfigError(f"rope-axial layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
        if not 0.0 <= p <= 1.0:
            raise PEConfigError(f"rope-axial p must be in [0, 1] (the fraction of frequencies rotated), got {p}")
        self.base = float(base)
        self.layout = layout
        self.p = float(p)
        matrix = None if layout == "axial" else layout_frequencies(layout, self.head_dim, spatial_dims, self.base,
                                                                   self.p)
        self.rope = AxialRoPELayer(self.base, n_freq, num_prefix_tokens, matrix, kept_frequencies(self.p, n_freq))
        self.rope.train_grid = self.train_grid
        self.extrapolation = extrap.check_rule("rope-axial", extrapolation, extrap.ROPE_RULES, self.train_grid)
        if self.extrapolation == "ntk" and n_freq < 2 and layout == "axial":
            raise PEConfigError("rope-axial extrapolation=ntk needs at least 2 frequencies per axis")
        scales = tuple(float(g) for g in hope_scales)
        if not scales or not all(math.isfinite(g) and g > 0 for g in scales + (float(hope_eval_scale),)):
            raise PEConfigError(f"rope-axial hope_scales and hope_eval_scale must be finite numbers > 0, got "
                                f"{list(scales)} and {hope_eval_scale}")
        if layout != "hope" and (scales != HOPE_SCALES or float(hope_eval_scale) != 1.0):
            raise PEConfigError(f"rope-axial hope_scales / hope_eval_scale apply to layout=hope only, not {layout!r}")
        self.hope_scales, self.hope_eval_scale = scales, float(hope_eval_scale)
        if layout == "hope":
            self.rope.eval_time_scale = self.hope_eval_scale
        self._draws = 0

    def encode_tokens(self, x: Tensor, coords: Tensor, grid: Sequence[int] | None) -> Tensor:
        """``layout=hope`` in training, video: draw each sample's temporal spacing from ``hope_scales`` (one
        draw per forward, shared by all blocks) for these coords; ``x`` unchanged."""
        if self.layout == "hope" and self.training and coords.shape[-1] == 3:
            idx = torch.randint(len(self.hope_scales), (x.shape[0],), device=coords.device)  # (B,)
            g = torch.tensor(self.hope_scales, dtype=torch.float64, device=coords.device)[idx]
            self._draws += 1
            self.rope._time_draw = (coords, tensor_version(coords), g, self._draws)
        return x

    @property
    def extrapolation(self) -> str:
        """The extrapolation rule (settable: :func:`~pebench.encodings.extrapolation.set_extrapolation`)."""
        return self.rope.rule

    @extrapolation.setter
    def extrapolation(self, rule: str) -> None:
        self.rope.rule = rule

    def layer(self, i: int) -> LayerPE:
        return self.rope

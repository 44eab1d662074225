"""``rope-dinov3``: DINOv3's RoPE: axial rotary embedding of the patch centres normalised to [-1, 1] by the current token grid, with DINOv3's training-time coordinate shift / jitter / rescale as options.

Paper: Siméoni et al., 2025, "DINOv3" (arXiv 2508.10104). Official code: facebookresearch/dinov3,
``dinov3/layers/rope_position_encoding.py`` (``RopePositionEmbedding``), called by its ViT inside the loop over
blocks. timm's port ``timm.layers.RotaryEmbeddingDinoV3`` is what ``tests/encodings/test_rope_dinov3.py``
compares this module with, in float64 (sin/cos tables and the rotated q, k).

The rotation (head dim ``d``, ``p`` coordinate axes, ``F = d // (2p)`` frequencies per axis; images: ``p = 2``,
``F = d/4``, DINOv3's ``D_head // 4``):

* Coordinates. A token in cell ``c_a`` (pebench's patch index, counted from 0) of a grid with ``E_a`` cells on
  axis ``a`` sits at ``u_a = 2 (c_a + 0.5) / D_a - 1``: DINOv3's ``arange(0.5, E) / D`` mapped to ``[-1, 1]``.
  ``D_a`` (option ``normalize_coords``): ``separate`` (default) ``D_a = E_a``; ``min`` / ``max``: the smallest /
  largest spatial extent, the same for both spatial axes (a non-square grid then spans a sub-box of ``[-1, 1]``).
* Training augmentation (options ``shift``, ``jitter``, ``rescale``; each off, ``none``, as in DINOv3's module;
  its released training recipe sets ``rescale = 2``, the preset ``imagenet100-dinov3``), in training only, in
  this order and with the same random calls as DINOv3 and timm: ``u_a += s_a`` with ``s ~ U(-shift, shift)^p``;
  ``u_a *= j_a`` with ``log j ~ U(-log jitter, log jitter)^p``; ``u *= r`` with ``log r ~ U(-log rescale,
  log rescale)``. Draws use torch's global generator on the coords' device in their dtype (at least float32:
  DINOv3's and timm's float32 on CPU). Option ``aug_draws``: ``block`` (default; DINOv3's ViT calls its RoPE
  module in every block, so every block draws its own) or ``forward`` (timm's ``Eva``: one draw per forward,
  shared by all blocks). In either, one draw serves the whole batch (DINOv3's draw is per batch, not per sample).
  Evaluation never augments and draws nothing.
* Frequencies as periods: ``P_k = base^(k / F)`` (option ``base``, default 100: DINOv3's ``base^(2k / (d/2))``
  for ``p = 2``), or, with both ``min_period`` and ``max_period`` set, ``P_k = min (max / min)^(k / (F - 1))``
  (DINOv3's ``linspace(0, 1, F)`` exponents; ``base`` is then not used). Pair ``k`` of axis ``a`` is rotated by
  ``theta = 2 pi u_a / P_k``; angles are axis-major (``y`` then ``x``), and pairs beyond ``p F`` are not rotated.
* Channel layout (option ``rotate_half``). ``true`` (default): DINOv3's and timm's (``rotate_half=True``):
  channel ``j`` is paired with channel ``j + d/2`` and rotated by angle ``j``, as ``[x_j, x_{j+d/2}] ->
  [x_j cos - x_{j+d/2} sin, x_{j+d/2} cos + x_j sin]``, so this PE equals timm's module channel for channel
  (pretrained q/k projections keep their meaning). ``false``: timm's ``rotate_half=False``, the interleaved
  layout of ``rope-axial`` (pair ``(2j, 2j+1)``, angle ``j``). The two differ by the fixed channel permutation
  ``2j <-> j``, ``2j+1 <-> j + d/2``, which a q/k projection absorbs: the same family of logits.
* Prefix tokens (CLS, registers) carry no position: their rotation is the identity. DINOv3 and timm do the same
  (they rotate ``q[:, :, n_prefix:]`` and leave the prefix rows as they are), so no mapping is needed.
* Video and event voxels (``p = 3``, coords ``(t, y, x)``): the time axis is normalised separately, by its
  number of frames ``E_t``, in every ``normalize_coords`` mode (``min`` / ``max`` take the spatial axes only: a
  frame count and a patch count are different units, and a short clip must not rescale space). Shift and jitter
  draw one value per axis, time included; rescale (a zoom) multiplies the spatial axes only. ``F = d // 6`` per
  axis (leftover pairs unrotated). A single frame has ``u_t = 0``.

Which grid. The backbone passes the token grid with the coords to :meth:`DinoV3RoPE.encode_tokens` once per
forward; that call records the denominators (and the augmentation draws) for those coords, and every block's
layer uses them when it is given the same coords tensor. For other coords (a layer called on its own, or the
windows of windowed attention) and when the backbone passes no grid, the grid is the coords' extent
``E_a = round(max c_a - min c_a) + 1`` (the grid of canonical patch coords), without augmentation.

Properties. On one grid the angle is an affine function of the coords, so the logits depend on coordinate
differences only: ``relative`` (shifting every coordinate, grid unchanged, changes nothing; tested). It is not a
function of patch offsets across resolutions: the same offset ``Delta`` turns by ``4 pi Delta / (D_a P_k)``,
which shrinks as the grid grows (by design: DINOv3 keeps an image's relative extent, not its patch offsets;
tested). Not rotation invariant, no built-in decay, no parameters.

Why a PE of its own rather than ``rope-axial`` options. On a fixed grid ``G`` rope-dinov3's angle is
``(4 pi / (D_a P_k)) c_a`` plus a constant, rope-axial's ``base^(-k/F) c_a``: the same frequency ratio, but an
overall scale ``4 pi / D_a`` that depends on the *current* grid, which no rope-axial option expresses (``base``
changes the ratio; ``extrapolation=normalized`` rescales only in evaluation and relative to the training grid).
The half-split channel layout, the period parameterisation and DINOv3's augmentation (in normalised units, per
batch and block) would each be further rope-axial options that combine with its video layouts, p-RoPE and
extrapolation rules in ways DINOv3 never defined; and rope-dinov3 needs a token grid (it does not apply to point
clouds or token sets off a grid: ``needs_grid``), while rope-axial applies to every modality.

pebench's run-level ``--coord-aug dinov3`` acts on the patch coords before this PE and composes with it: with
``normalize_coords=separate`` its box is exactly DINOv3's, so it is DINOv3's rescale drawn per sample (this PE's
own ``rescale`` draws per batch, as DINOv3). Setting both augments twice.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import torch
from torch import Tensor, nn

from pebench.core.options import Option

from .base import CoordsCache, LayerPE, PEConfigError, PositionalEncoding, batch_coords
from .extrapolation import grid_extent
from .registry import register_pe
from .rope_axial import rope_phasors, rotate_pairs, tensor_version

__all__ = ["DinoV3RoPE", "DinoV3RoPELayer", "NORMALIZE_MODES", "AUG_DRAWS", "dinov3_periods", "dinov3_denominators",
           "rotate_halves"]

#: DINOv3's ``normalize_coords`` values
NORMALIZE_MODES = ("separate", "min", "max")
#: when the training augmentation draws: per block (DINOv3's ViT) or per forward (timm's Eva)
AUG_DRAWS = ("block", "forward")
#: one augmentation draw: shift, jitter, rescale, each ``(p,)`` or ``None`` (off)
Draw = tuple[Tensor | None, Tensor | None, Tensor | None]


def dinov3_periods(n_freq: int, base: float, min_period: float | None = None,
                   max_period: float | None = None) -> Tensor:
    """The ``n_freq`` periods ``(F,)`` float64: ``base^(k/F)``, or ``min (max/min)^(k/(F-1))`` when both
    ``min_period`` and ``max_period`` are given (see the module docstring)."""
    if min_period is not None and max_period is not None:
        exponents = torch.linspace(0, 1, n_freq, dtype=torch.float64)  # (F,)
        return min_period * (max_period / min_period) ** exponents
    return base ** (torch.arange(n_freq, dtype=torch.float64) / n_freq)  # (F,)


def dinov3_denominators(grid: Sequence[int], mode: str) -> tuple[float, ...]:
    """Per-axis denominators ``D_a`` of a grid ``(E_0, ..., E_{p-1})``: the extent itself (``separate``), or the
    smallest / largest spatial extent (``min`` / ``max``) on the spatial axes (the last two; both for ``p <= 2``)
    while a third, time axis keeps its own."""
    g = [float(e) for e in grid]
    if mode == "separate":
        return tuple(g)
    spatial = g[-2:]
    d = min(spatial) if mode == "min" else max(spatial)
    return tuple(g[:-2]) + (d,) * len(spatial)


def rotate_halves(t: Tensor, phasors: Tensor) -> Tensor:
    """Rotate channel ``j`` with channel ``j + d/2`` of ``t (B, H, T, d)`` as the complex number
    ``t_j + i t_{j+d/2}`` times ``phasors (B|1, H|1, T, d/2)``: timm's ``apply_rot_embed(half=True)``
    (DINOv3's ``rope_rotate_half``) as one complex multiply. Float32 or wider inside; ``t``'s dtype back."""
    dt = torch.promote_types(t.dtype, torch.float32)
    x = t.to(dt)
    h = x.shape[-1] // 2
    z = torch.complex(x[..., :h], x[..., h:]) * phasors.to(torch.complex128 if dt == torch.float64
                                                             else torch.complex64)  # (B, H, T, d/2)
    return torch.cat([z.real, z.imag], dim=-1).to(t.dtype)


class _Forward:
    """What :meth:`DinoV3RoPE.encode_tokens` records for one forward, shared by every block's layer: the coords
    it was given (matched by identity and version), their denominators, the augmentation draws (one
    :data:`Draw` per block or one for all; ``None``: none) and a serial number. Pickling and
    deepcopy drop it (a per-forward record); the table caches go with it."""

    def __init__(self, n_slots: int) -> None:
        self.n_slots = n_slots
        self.reset()

    def reset(self) -> None:
        self.coords: Tensor | None = None
        self.version = -1
        self.denominators: tuple[float, ...] = ()
        self.draws: list[Draw] | None = None
        self.serial = 0
        self.caches = [CoordsCache() for _ in range(self.n_slots)]

    def __getstate__(self) -> dict[str, Any]:
        return {"n_slots": self.n_slots}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.n_slots = state["n_slots"]
        self.reset()


class DinoV3RoPELayer(LayerPE):
    """Block ``block``'s part of :class:`DinoV3RoPE` (no parameters): rotates q and k by the angles of the
    current forward (its own augmentation draw with ``aug_draws=block``)."""

    def __init__(self, pe_config: dict[str, Any], periods: Tensor, state: _Forward, block: int) -> None:
        super().__init__()
        self.cfg = pe_config  # num_prefix_tokens, normalize_coords, rotate_half, n_freq
        self.periods = periods  # (F,) float64; a plain attribute (no state_dict entry)
        self.state = state
        self.block = block

    def _setting(self, coords: Tensor) -> tuple[tuple[float, ...], Draw | None, Any, int]:
        """(denominators, augmentation draw or None, cache key, cache slot) for ``coords``."""
        st = self.state
        if st.coords is coords and st.version == tensor_version(coords):
            if st.draws is None or not self.training:  # evaluation never augments, whatever was recorded
                return st.denominators, None, ("grid", st.denominators), 0
            slot = self.block if len(st.draws) > 1 else 0
            return st.denominators, st.draws[slot], ("draw", st.serial, slot), slot
        den = dinov3_denominators(grid_extent(coords), self.cfg["normalize_coords"])
        return den, None, ("extent", den), 0

    def angles(self, coords: Tensor, batch_size: int, dtype: torch.dtype) -> Tensor:
        """Pair angles ``(B|1, 1, N, p F)``, axis-major, in float32 or wider (see the module docstring)."""
        den, draw, _, _ = self._setting(coords)
        return self._angles(coords, batch_size, dtype, den, draw)

    def _angles(self, coords: Tensor, batch_size: int, dtype: torch.dtype, den: tuple[float, ...],
                draw: Draw | None) -> Tensor:
        dt = torch.promote_types(dtype, torch.float32)
        c = batch_coords(coords, batch_size).to(dt)  # (B, N, p)
        u = (c + 0.5) / torch.tensor(den, dtype=dt, device=c.device)  # DINOv3's arange(0.5, E) / D
        u = 2.0 * u - 1.0  # [0, 1] -> [-1, 1]
        for step, t in zip(("shift", "jitter", "rescale"), draw or ()):  # DINOv3's order: u + s, * j, * r
            if t is not None:
                t = t.to(device=c.device, dtype=dt)  # (p,)
                u = u + t if step == "shift" else u * t
        periods = self.periods.to(device=c.device, dtype=dt)  # (F,)
        ang = 2 * math.pi * u.unsqueeze(-1) / periods  # (B, N, p, F)
        return ang.flatten(-2).unsqueeze(1)  # (B, 1, N, p F)

    def phasors(self, coords: Tensor, batch_size: int, dtype: torch.dtype, head_dim: int) -> Tensor:
        """Complex phasors ``(B|1, 1, P + N, d/2)`` (prefix rows and unused pairs: 1), cached per coords tensor
        and setting (the forward's table is computed once and shared by the blocks that share a draw)."""
        den, draw, key, slot = self._setting(coords)
        b = 1 if coords.dim() == 2 else batch_size
        full_key = (key, b, dtype, head_dim, coords.shape, coords.device)
        return self.state.caches[slot].get(coords, full_key, lambda: rope_phasors(
            self._angles(coords, b, dtype, den, draw), head_dim, self.cfg["num_prefix_tokens"]))

    def qk(self, q: Tensor, k: Tensor, x: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        rot = self.phasors(coords, q.shape[0], q.dtype, q.shape[-1])
        if self.cfg["rotate_half"]:
            return rotate_halves(q, rot), rotate_halves(k, rot)
        return rotate_pairs(q, rot), rotate_pairs(k, rot)

    def extra_repr(self) -> str:
        return f"block={self.block}"


@register_pe("rope-dinov3", order=35)
class DinoV3RoPE(PositionalEncoding):
    """DINOv3's RoPE (no parameters). Options: ``base`` or ``min_period`` + ``max_period``, ``normalize_coords``,
    ``shift`` / ``jitter`` / ``rescale`` with ``aug_draws``, ``rotate_half`` (see the module docstring)."""

    relative = True  # on one grid; the scale follows the grid (see the module docstring)
    rotation_invariant = False
    distance_decay = False
    learned = False
    modalities = ("image", "video", "events")
    needs_grid = True  # normalised by the token grid
    options = (
        Option("base", "float", 100.0, "period base: periods base^(k/F) per axis (DINOv3: 100)", minimum=1.0,
               minimum_inclusive=False),
        Option("min_period", "float", None, "with max_period: periods min (max/min)^(k/(F-1)) instead of base",
               minimum=0.0, minimum_inclusive=False),
        Option("max_period", "float", None, "with min_period: the longest period (see min_period)", minimum=0.0,
               minimum_inclusive=False),
        Option("normalize_coords", "str", "separate", "coords (c + 0.5) / D mapped to [-1, 1]: D each axis's own "
               "extent (separate), or the smaller / larger spatial extent (min, max); time always separate",
               choices=NORMALIZE_MODES),
        Option("shift", "float", None, "training only: add U(-shift, shift) per axis to the normalised coords",
               minimum=0.0),
        Option("jitter", "float", None, "training only: multiply each axis by a log-uniform factor in "
               "[1/jitter, jitter]", minimum=1.0),
        Option("rescale", "float", None, "training only: multiply the spatial axes by one log-uniform factor in "
               "[1/rescale, rescale] (DINOv3's recipe: 2)", minimum=1.0),
        Option("aug_draws", "str", "block", "a new shift/jitter/rescale draw for every block (DINOv3) or one per "
               "forward shared by all blocks (timm)", choices=AUG_DRAWS),
        Option("rotate_half", "bool", True, "channel j paired with j + d/2 (DINOv3, timm's default) or, false, "
               "adjacent channels (2j, 2j+1) as rope-axial"),
    )

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, base: float = 100.0,
                 min_period: float | None = None, max_period: float | None = None,
                 normalize_coords: str = "separate", shift: float | None = None, jitter: float | None = None,
                 rescale: float | None = None, aug_draws: str = "block", rotate_half: bool = True) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if self.train_grid is None:
            raise PEConfigError("rope-dinov3 needs the training grid (tokens on a grid: images, video, events); "
                                "it normalises coordinates by the token grid")
        if self.head_dim % 2:
            raise PEConfigError(f"rope-dinov3 needs an even head dim, got {self.head_dim}")
        n_freq = self.head_dim // (2 * spatial_dims)
        if n_freq < 1:
            raise PEConfigError(f"rope-dinov3 needs head_dim >= 2 * spatial_dims, got {self.head_dim}, "
                                f"p={spatial_dims}")
        if (min_period is None) != (max_period is None):
            raise PEConfigError("rope-dinov3 needs both min_period and max_period (or neither: periods from base)")
        if not (base > 1 and math.isfinite(base)):
            raise PEConfigError(f"rope-dinov3 base must be a finite number > 1, got {base}")
        for name, v, lo in (("min_period", min_period, 0.0), ("max_period", max_period, 0.0),
                            ("shift", shift, 0.0), ("jitter", jitter, 1.0), ("rescale", rescale, 1.0)):
            ok = v is None or (math.isfinite(v) and (v > lo if name.endswith("period") else v >= lo))
            if not ok:
                raise PEConfigError(f"rope-dinov3 {name} must be a finite number {'>' if 'period' in name else '>='} "
                                    f"{lo:g}, got {v}")
        if normalize_coords not in NORMALIZE_MODES:
            raise PEConfigError(f"rope-dinov3 normalize_coords must be one of {', '.join(NORMALIZE_MODES)}, "
                                f"got {normalize_coords!r}")
        if aug_draws not in AUG_DRAWS:
            raise PEConfigError(f"rope-dinov3 aug_draws must be one of {', '.join(AUG_DRAWS)}, got {aug_draws!r}")
        self.base, self.min_period, self.max_period = float(base), min_period, max_period
        self.normalize_coords, self.aug_draws, self.rotate_half = normalize_coords, aug_draws, bool(rotate_half)
        self.shift, self.jitter, self.rescale = shift, jitter, rescale
        self.n_freq = n_freq
        periods = dinov3_periods(n_freq, self.base, min_period, max_period)  # (F,) float64
        self._forward = _Forward(depth)
        cfg = {"num_prefix_tokens": num_prefix_tokens, "normalize_coords": normalize_coords,
               "rotate_half": self.rotate_half, "n_freq": n_freq}
        self.layers = nn.ModuleList(DinoV3RoPELayer(cfg, periods, self._forward, i) for i in range(depth))

    @property
    def augments(self) -> bool:
        """Whether the PE's own training augmentation is on (any of shift, jitter, rescale set)."""
        return self.shift is not None or self.jitter is not None or self.rescale is not None

    def _draw(self, p: int, device: torch.device, dtype: torch.dtype) -> Draw:
        """One augmentation draw ``(shift, jitter, rescale)``, each ``(p,)`` or ``None`` (off), with DINOv3's random
        calls in its order; rescale is 1 on a time axis."""
        dd = {"device": device, "dtype": dtype}
        shift = jitter = rescale = None
        if self.shift is not None:
            shift = torch.empty(p, **dd).uniform_(-self.shift, self.shift)
        if self.jitter is not None:
            span = math.log(self.jitter)
            jitter = torch.empty(p, **dd).uniform_(-span, span).exp()
        if self.rescale is not None:
            span = math.log(self.rescale)
            r = torch.empty(1, **dd).uniform_(-span, span).exp()  # (1,)
            spatial = torch.arange(p, device=device) >= max(p - 2, 0)  # the last two axes (a zoom, not time)
            rescale = torch.where(spatial, r, torch.ones_like(r))  # (p,)
        return shift, jitter, rescale

    def encode_tokens(self, x: Tensor, coords: Tensor, grid: Sequence[int] | None) -> Tensor:
        """Record the forward's grid and draws for ``coords`` (see the module docstring); ``x`` unchanged."""
        st = self._forward
        p = coords.shape[-1]
        extent = tuple(int(g) for g in grid) if grid is not None and len(grid) == p else grid_extent(coords)
        st.coords, st.version = coords, tensor_version(coords)
        st.denominators = dinov3_denominators(extent, self.normalize_coords)
        st.draws = None
        if self.training and self.augments:
            dt = torch.promote_types(coords.dtype, torch.float32)
            n = self.depth if self.aug_draws == "block" else 1
            st.draws = [self._draw(p, coords.device, dt) for _ in range(n)]
            st.serial += 1
        return x

    def tables(self, coords: Tensor, block: int = 0, dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
        """sin, cos ``(B|1, N, d)`` of block ``block`` for ``coords`` (patch tokens) in the channel layout of
        ``rotate_half``: timm's ``get_embed()`` halves (``[sin, cos]`` there), for comparing tables."""
        layer = self.layers[block]
        ang = layer.angles(coords, 1 if coords.dim() == 2 else coords.shape[0], dtype)[:, 0]  # (B, N, pF)
        ang = nn.functional.pad(ang, (0, self.head_dim // 2 - ang.shape[-1]))  # (B, N, d/2)
        full = torch.cat([ang, ang], -1) if self.rotate_half else ang.repeat_interleave(2, -1)  # (B, N, d)
        return full.sin(), full.cos()

    def layer(self, i: int) -> LayerPE:
        return self.layers[i]

    def extra_repr(self) -> str:
        periods = (f"periods=[{self.min_period}, {self.max_period}]" if self.min_period is not None
                   else f"base={self.base}")
        return (f"{super().extra_repr()}, {periods}, normalize={self.normalize_coords}, shift={self.shift}, "
                f"jitter={self.jitter}, rescale={self.rescale}, draws={self.aug_draws}, half={self.rotate_half}")

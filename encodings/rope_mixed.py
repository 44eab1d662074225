"""``rope-mixed``: RoPE with learnable mixed-axis frequencies.

Paper: Heo et al., ECCV 2024, "Rotary Position Embedding for Vision Transformer" (RoPE-Mixed,
code: naver-ai/rope-vit; timm's ``init_random_2d_freqs``).

* Every layer ``l`` holds a learnable frequency tensor ``freqs`` of shape ``(p, H, d/2)``;
  channel pair ``k`` of head ``h`` is rotated by ``sum_a c_a * freqs[a, h, k]``, so one pair
  mixes all axes. Logits depend on ``r_j - r_i`` only (translation invariant).
* Init (as in the paper's code, base ``theta = 10`` for the mixed variant): per layer and head
  a random rotation ``R`` of the coordinate frame; the ``d/2`` pairs are split into ``p``
  groups of ``L = (d/2) // p`` pairs, group ``g`` points along column ``g`` of ``R`` with
  magnitudes ``theta^(-k/L)``, ``k = 0..L-1``. For ``p = 2`` ``R`` is the rotation by a
  uniform random angle, which is exactly the paper's ``(cos t, sin t)`` / ``(cos(t+pi/2),
  sin(t+pi/2))`` init. For ``p = 3`` ``R`` is Haar-random in SO(3), so the third axis
  (time for video/events, z for points) gets frequencies that are *not* zero-initialised.
  Leftover pairs (``d/2 - pL``) start at frequency 0 and are learned.
* Other initialisations of the same learnable ``freqs`` (option ``init``; the default ``mixed`` is
  the paper's above). Each gives every channel pair ``k`` of head ``h`` a unit direction ``u`` in
  coordinate space and a magnitude ``w``, ``freqs[:, h, k] = w u``:

  - ``golden-gate``: Golden Gate RoPE (Jerry Xiong, 2025, "On N-dimensional Rotary Positional
    Embeddings", jerryxio.ng/posts/nd-rope, and the ``GoldenGateRoPENd`` code published with it).
    Pair ``k`` of head ``h`` takes point ``i = h F + k + 1`` (``F = d/2``) of the generalised
    golden-ratio sequence ``z_i = frac(i g^-1, i g^-2, .., i g^-p)``, where ``g`` is the positive
    root of ``x^(p+1) = x + 1`` (the golden ratio for ``p = 1``, the plastic number for ``p = 2``),
    mapped to a direction by ``u_i = normalise(Phi^-1(z_i))`` (the standard normal quantile per axis,
    so the directions are quasi-uniform on the sphere). ``g`` is the root itself (the published code
    approximates it with ten fixed-point steps). Magnitudes: one log-spaced ladder over the ``F``
    pairs, ``w_k = w_min (w_max / w_min)^(k / (F - 1))``, the same for every head, with
    ``w_max = 1`` and ``w_min = 1 / theta`` rad per patch (pebench's range: the blog sets its range
    for its own coordinate units). Deterministic: every layer and seed starts the same. Note: for
    ``p = 2`` these directions are not spaced by the golden angle; "golden" refers to the generalised
    golden ratio ``g`` of the sequence, as in the published code.
  - ``spiral``: Spiral RoPE (Liu et al., 2026, "Spiral RoPE: Rotate Your Rotary Positional
    Embeddings in the 2D Plane", arXiv:2602.03227), 2-D coords only: the pairs are split into ``K``
    groups (option ``directions``), group ``j`` is tied to the direction at angle ``j pi / K`` and
    rotated by the projection of the position onto it, with the 1-D RoPE ladder
    ``theta^(-m / G)``, ``m = 0 .. G-1``, ``G = F // K`` pairs per group (leftover pairs start at
    0). Established from the paper's public abstract (channel groups, uniformly distributed
    directions, rotation by the projection); its code was not found, so the number of directions
    (default here ``K = 4``), the half-circle spacing ``j pi / K`` (directions ``u`` and ``-u``
    give the same group up to sign, so a full-circle spacing would repeat groups) and the per-group
    ladder are pebench's reading, not the paper's stated values. ``K = 2`` is exactly ``rope-axial``
    with ``base = theta`` (tested).
  - ``uniform``: every pair of every head and layer gets an independent direction uniform on the
    unit sphere (``p = 2``: an angle uniform in ``[0, 2 pi)``), the "random RoPE rotations" that
    Jerry Xiong's post (its first version called it uniform RoPE) and NovelAI's note "Why random
    rotations are good for RoPE" (research.novelai.net/rope) compare with axial RoPE; magnitudes as
    ``golden-gate``.

  ``learn_freqs=false`` freezes the frequencies at their initial values (no gradient, not in the
  optimiser: a fixed RoPE with the chosen directions, as Golden Gate and Spiral RoPE are published);
  the default learns them, as RoPE-Mixed does.
* Frequencies are excluded from weight decay (``no_weight_decay``: ``layers.{l}.freqs``).
* Any grid, unseen grids and non-grid coords: the angle is linear in the coords.
* CLS: prefix tokens get the identity rotation.
* Once per forward, :meth:`MixedRoPE.encode_tokens` computes every layer's phasors in one table and hands
  them to the layers; bit for bit each layer's own computation (a layer called on its own, or given other
  coords, e.g. windowed attention, computes its own; so does every layer for per-sample coords in evaluation).
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor, nn

from pebench.core.options import Option

from .base import LayerPE, LayerTables, PEConfigError, PositionalEncoding, layer_tables_batchable
from .registry import register_pe
from .rope_axial import rope_phasors, rotate_pairs

__all__ = ["MixedRoPE", "MixedRoPELayer", "init_mixed_freqs", "INITS", "golden_ratio_root",
           "golden_gate_directions", "init_freqs"]


def _random_rotation(p: int, generator: torch.Generator | None = None) -> Tensor:
    """A random rotation ``(p, p)`` (uniform angle for p=2, Haar via QR otherwise)."""
    if p == 2:
        t = torch.rand((), generator=generator) * 2 * math.pi
        c, s = torch.cos(t), torch.sin(t)
        return torch.stack([torch.stack([c, -s]), torch.stack([s, c])])  # columns: (cos t, sin t), (cos(t+pi/2), sin(t+pi/2))
    if p == 1:
        return torch.ones(1, 1)
    a = torch.randn(p, p, generator=generator)
    qm, r = torch.linalg.qr(a)
    qm = qm * torch.sign(torch.diagonal(r))  # Haar-distributed in O(p)
    if torch.det(qm) < 0:
        qm[:, 0] = -qm[:, 0]  # into SO(p)
    return qm


def init_mixed_freqs(p: int, num_heads: int, head_dim: int, theta: float = 10.0,
                     generator: torch.Generator | None = None) -> Tensor:
    """Initial RoPE-Mixed frequencies ``(p, H, d/2)`` for one layer (see module docstring)."""
    pairs = head_dim // 2
    L = pairs // p
    mag = theta ** (-torch.arange(L, dtype=torch.float32) / L)  # (L,)
    freqs = torch.zeros(p, num_heads, pairs)
    for h in range(num_heads):
        R = _random_rotation(p, generator)  # (p, p)
        for g in range(p):
            freqs[:, h, g * L:(g + 1) * L] = R[:, g:g + 1] * mag  # (p, L)
    return freqs


#: initialisations of ``rope-mixed``'s frequencies (see the module docstring)
INITS = ("mixed", "golden-gate", "spiral", "uniform")
#: Spiral RoPE's number of directions when ``directions`` is not given (pebench's choice)
SPIRAL_DIRECTIONS = 4


def golden_ratio_root(p: int) -> float:
    """The positive root ``g`` of ``x^(p+1) = x + 1`` (golden ratio for p = 1), by fixed-point
    iteration ``x <- (1 + x)^(1/(p+1))`` (a contraction near the root) to float64 precision."""
    x = 2.0
    for _ in range(200):
        nxt = (1.0 + x) ** (1.0 / (p + 1.0))
        if nxt == x:
            break
        x = nxt
    return x


def golden_gate_directions(n: int, p: int) -> Tensor:
    """Unit directions ``(n, p)`` float64: ``normalise(Phi^-1(frac(i g^-1, .., i g^-p)))`` for
    ``i = 1 .. n`` (the generalised golden-ratio sequence through the normal quantile)."""
    g = golden_ratio_root(p)
    alpha = g ** -torch.arange(1, p + 1, dtype=torch.float64)  # (p,)
    i = torch.arange(1, n + 1, dtype=torch.float64).unsqueeze(1)  # (n, 1)
    z = torch.remainder(i * alpha, 1.0)  # (n, p) in (0, 1)
    u = torch.erfinv(2.0 * z - 1.0)  # Phi^-1(z) / sqrt(2): the scale cancels below
    return u / u.norm(dim=1, keepdim=True)


def _ladder(n: int, theta: float) -> Tensor:
    """Log-spaced magnitudes ``(n,)`` float64 from ``1 / theta`` up to 1 (``n = 1``: 1)."""
    if n == 1:
        return torch.ones(1, dtype=torch.float64)
    return theta ** (torch.linspace(0.0, 1.0, n, dtype=torch.float64) - 1.0)


def init_freqs(init: str, p: int, num_heads: int, head_dim: int, theta: float = 10.0,
               directions: int | None = None, generator: torch.Generator | None = None) -> Tensor:
    """Initial frequencies ``(p, H, d/2)`` (float32) of one layer for ``init`` (:data:`INITS`; see the
    module docstring); ``directions``: Spiral RoPE's ``K``."""
    F = head_dim // 2
    if init == "mixed":
        return init_mixed_freqs(p, num_heads, head_dim, theta, generator)
    if init == "golden-gate":
        u = golden_gate_directions(num_heads * F, p).view(num_heads, F, p)  # (H, F, p)
        return (u * _ladder(F, theta).view(1, F, 1)).permute(2, 0, 1).float().contiguous()
    if init == "uniform":
        u = torch.randn(num_heads, F, p, generator=generator, dtype=torch.float64)
        u = u / u.norm(dim=-1, keepdim=True)  # (H, F, p), uniform on the sphere
        return (u * _ladder(F, theta).view(1, F, 1)).permute(2, 0, 1).float().contiguous()
    if init == "spiral":
        K = SPIRAL_DIRECTIONS if directions is None else directions
        G = F // K
        freqs = torch.zeros(p, num_heads, F, dtype=torch.float64)
        mag = theta ** (-torch.arange(G, dtype=torch.float64) / G)  # (G,)
        for j in range(K):
            ang = torch.tensor(j * math.pi / K, dtype=torch.float64)
            u = torch.stack([torch.cos(ang), torch.sin(ang)])  # (2,)
            freqs[:, :, j * G:(j + 1) * G] = u.view(2, 1, 1) * mag.view(1, 1, G)
        return freqs.float()
    raise PEConfigError(f"rope-mixed init must be one of {', '.join(INITS)}, got {init!r}")


def mixed_phasors(coords: Tensor, freqs: Tensor, head_dim: int, num_prefix_tokens: int,
                  dtype: torch.dtype) -> Tensor:
    """RoPE-Mixed's phasors ``(..., B|1, H, P + N, d/2)`` (prefix rows: 1) for coords ``(B|., N, p)`` and
    frequencies ``freqs (..., p, H, d/2)``, in ``dtype`` promoted to float32 or wider: one ``(N, p) x (p, H d/2)``
    product per leading index (the layers; the same kernel batched or alone, so the same bits), then one table."""
    dt = torch.promote_types(dtype, torch.float32)
    c = coords.to(dt) if coords.dim() == 3 else coords.to(dt).unsqueeze(0)  # (B|1, N, p): no batch copies
    f = freqs.to(dt)
    if f.dim() == 3:
        angles = torch.einsum("bnp,phf->bhnf", c, f)  # (B|1, H, N, d/2)
    else:
        angles = torch.stack([torch.einsum("bnp,phf->bhnf", c, fi) for fi in f.flatten(0, -4).unbind()]
                             ).unflatten(0, f.shape[:-3])
    return rope_phasors(angles, head_dim, num_prefix_tokens)


class MixedRoPELayer(LayerTables, LayerPE):
    """Per-layer learnable frequencies ``freqs: (p, H, d/2)``; the phasors come from
    :meth:`MixedRoPE.encode_tokens`'s batch over the layers when it prepared them for this forward."""

    def __init__(self, freqs: Tensor, num_prefix_tokens: int) -> None:
        super().__init__()
        self.freqs = nn.Parameter(freqs)  # (p, H, d/2)
        self.num_prefix_tokens = num_prefix_tokens

    def table_key(self, dtype: torch.dtype) -> tuple:
        """What the phasors depend on besides the coords: the frequencies' version, the dtype, the grad mode."""
        return self.freqs._version, torch.promote_types(dtype, torch.float32), torch.is_grad_enabled()

    def qk(self, q: Tensor, k: Tensor, x: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        prepared = self.take_prepared(q.dtype)  # (key, coords, phasors)
        if prepared is not None and prepared[1] is coords:
            rot = prepared[2]
        else:
            rot = mixed_phasors(coords, self.freqs, q.shape[-1], self.num_prefix_tokens, q.dtype)
        return rotate_pairs(q, rot), rotate_pairs(k, rot)


@register_pe("rope-mixed", order=40)
class MixedRoPE(PositionalEncoding):
    """RoPE-Mixed. Options: ``theta`` (init magnitude base, default 10 as in the paper), ``init``
    (the directions' initialisation), ``directions`` (Spiral RoPE's K), ``learn_freqs``."""

    relative = True
    rotation_invariant = False
    distance_decay = False
    learned = True
    #: compute every layer's phasors in one table at encode_tokens (False: each layer its own)
    batch_layers = True
    options = (Option("theta", "float", 10.0, "frequency base of the initial frequency vectors"),
               Option("init", "str", "mixed", "initial frequencies: mixed (RoPE-Mixed, Heo et al. 2024), golden-gate "
                      "(Golden Gate RoPE), spiral (Spiral RoPE, 2-D), uniform (random directions)", choices=INITS),
               Option("directions", "int", None, "init=spiral: number of evenly spaced directions K (default 4)"),
               Option("learn_freqs", "bool", True, "learn the frequencies (false: frozen at their init)"))

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, theta: float = 10.0,
                 init: str = "mixed", directions: int | None = None, learn_freqs: bool = True) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if self.head_dim % 2:
            raise PEConfigError(f"rope-mixed needs an even head dim, got {self.head_dim}")
        if self.head_dim // 2 < spatial_dims:
            raise PEConfigError(f"rope-mixed needs head_dim >= 2 * spatial_dims, got {self.head_dim}, p={spatial_dims}")
        if theta <= 1:
            raise PEConfigError(f"rope-mixed theta must be > 1, got {theta}")
        if init not in INITS:
            raise PEConfigError(f"rope-mixed init must be one of {', '.join(INITS)}, got {init!r}")
        if init == "spiral":
            if spatial_dims != 2:
                raise PEConfigError(f"rope-mixed init=spiral is for 2-D coords (Spiral RoPE), got p={spatial_dims}")
            K = SPIRAL_DIRECTIONS if directions is None else int(directions)
            if not 1 <= K <= self.head_dim // 2:
                raise PEConfigError(f"rope-mixed directions must be in 1 .. {self.head_dim // 2} (the pairs of a "
                                    f"head), got {directions}")
        elif directions is not None:
            raise PEConfigError("rope-mixed directions applies to init=spiral only")
        self.theta, self.init, self.directions, self.learn_freqs = float(theta), init, directions, bool(learn_freqs)
        self.layers = nn.ModuleList(
            MixedRoPELayer(init_freqs(init, spatial_dims, num_heads, self.head_dim, self.theta, directions),
                           num_prefix_tokens)
            for _ in range(depth))
        if not self.learn_freqs:
            self.requires_grad_(False)

    def encode_tokens(self, x: Tensor, coords: Tensor, grid: Sequence[int] | None) -> Tensor:
        """No additive term; every layer's phasors for this forward in one table (``batch_layers``), handed to the
        layers: bit for bit each layer's own (tests/encodings/test_batched_layer_tables.py); on CPU the per-layer
        small ops cost more in dispatch than in arithmetic. A layer given other coords (windowed attention)
        computes its own."""
        if self.batch_layers and layer_tables_batchable(coords):
            lays = list(self.layers)
            rot = mixed_phasors(coords, torch.stack([lay.freqs for lay in lays]), self.head_dim,
                                self.num_prefix_tokens, x.dtype)  # (L, B|1, H, P + N, d/2)
            for lay, r in zip(lays, rot.unbind()):  # unbind: one backward node for all layers
                lay.prepare(lay.table_key(x.dtype), coords, r)
        return x

    def layer(self, i: int) -> LayerPE:
        return self.layers[i]

    def no_weight_decay(self) -> set[str]:
        return {f"layers.{i}.freqs" for i in range(self.depth)}

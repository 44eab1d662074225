"""``lookhere``: LookHere directed-attention masks with distance penalties, LH-90 by default.

Paper: Fuller et al., NeurIPS 2024, "LookHere: Vision Transformers with Directed Attention
Generalize and Extrapolate" (code: github.com/GreenCUBIC/lookhere, ``lookhere.py``; its LH-90
model is the configuration ``head_directions="corners-triangles-none"``, ``global_slope=2``,
``layer_slopes=[1.5, 0.5]``).

Bias of head ``h`` in block ``l`` (added to the scaled logits), ``D_ij = ||r_j - r_i||``::

    B_ij = -g * s_l * s_h * D_ij    if key j is visible to query i in head h,   else  -1e9

with global slope ``g = 2`` and layer slopes ``s_l`` linear from 1.5 (first block) to 0.5
(last). Head kinds (``(y, x)`` coords, "up" = smaller y):

* *corner* heads look into one quadrant: up-left, up-right, down-left, down-right (``j``
  visible iff both ``dy`` and ``dx`` have the quadrant's signs or are zero);
* *triangle* heads look into the 90-degree cone around one axis: up, down, left, right
  (visible iff ``|dx| <= -dy`` for up, etc.; the diagonals are included);
* *unmasked* heads see every token, with a distance penalty only.

Both directional kinds are "angle between ``r_j - r_i`` and the head's direction <= fov/2"
with ``fov = 90`` degrees, boundary inclusive, and a token always sees itself (in video, also
the tokens at the same (y, x) in other frames). The option ``fov`` widens or narrows every
directional head.

Head layout (LH-90). With 12 heads, as in the official code: 4 corner heads (slope 1/2), 4
triangle heads (1/2), 4 unmasked heads with slopes 1/4, 1/16, 1/64, 1/256. With 16 heads: 8
corner heads (the 4 quadrants twice, slopes 1/2 then 1/4), 4 triangle heads (1/2) and the same 4
unmasked heads. **Rule for any head count H** (it reproduces both; the official code has no
working layout for other counts):

1. ``u = min(4, H // 3, max(H - 4, 0))`` unmasked heads (a third of the heads, at most 4, and
   never so many that fewer than 4 directional heads remain to cover the plane) with slopes
   ``1/4, 1/16, 1/64, 1/256`` (the first ``u``); the option ``unmasked_heads`` overrides ``u``.
2. The ``H - u`` directional heads are dealt out in groups of four: corners round 0, triangles
   round 0, corners round 1, triangles round 1, ...; a head of round ``k`` has slope
   ``2^-(k+1)``. A last, partial group of ``n < 4`` heads takes the first ``n`` of an order that
   spreads them (corners: up-left, down-right, up-right, down-left; triangles: up, down, left,
   right).
3. Heads are ordered corner heads (by round), triangle heads (by round), unmasked heads.

So vit-nano (4 heads) gets the 4 corner heads and no unmasked head; 6 heads: 4 corners + 2
unmasked; 8 heads (vit-tiny, vit-small): 4 corners + 2 triangles (up, down) + 2 unmasked.

Conventions (departures from the official code, which precomputes bfloat16 maps for a fixed
square grid): the bias is float32, recomputed from the coords of any grid (unseen grids,
non-square inputs); invisible logits get ``-1e9`` (finite, so padded rows never produce NaN)
instead of the bfloat16 maximum; CLS rows and columns are zero (the CLS token sees and is
seen by everyone), as in the official code. Only the spatial axes are used: coords
``(y, x)`` for images, the last two of ``(t, y, x)`` for video/events. Point clouds are refused
(``modalities``; pass ``modality="points"`` to get a :class:`PEConfigError` at construction),
and ``spatial_dims`` must be 2 or 3.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pebench.core.options import Option

from .base import CoordsCache, LayerPE, PEConfigError, PositionalEncoding, batch_coords
from .bias import BiasLayerPE, entry_distance, pairwise_distance
from .registry import register_pe

__all__ = ["LookHere", "LookHereLayer", "lh90_heads", "LookHereHead", "MASK_VALUE", "BIAS_CACHE_MAX"]

MASK_VALUE = -1e9
#: largest bias (entries) :meth:`LookHereLayer.bias` keeps between calls (16 MiB in float32; a 1,024-token grid's
#: bias for 4 heads); larger ones are rebuilt at each call
BIAS_CACHE_MAX = 2 ** 22


class LookHereHead(NamedTuple):
    """One head of the layout: ``kind`` "corner" | "triangle" | "unmasked"; ``direction`` a
    unit vector ``(y, x)`` (``None`` when unmasked); ``name`` e.g. "up-left"; ``slope``."""

    kind: str
    name: str
    direction: tuple[float, float] | None
    slope: float


_R = 1 / math.sqrt(2)
#: (name, (y, x) unit direction); full groups in the official order, partial groups in spread order
_CORNERS = [("up-left", (-_R, -_R)), ("up-right", (-_R, _R)), ("down-left", (_R, -_R)), ("down-right", (_R, _R))]
_CORNERS_SPREAD = [_CORNERS[0], _CORNERS[3], _CORNERS[1], _CORNERS[2]]
_TRIANGLES = [("up", (-1.0, 0.0)), ("down", (1.0, 0.0)), ("left", (0.0, -1.0)), ("right", (0.0, 1.0))]
_UNMASKED_SLOPES = (1 / 4, 1 / 16, 1 / 64, 1 / 256)


def lh90_heads(num_heads: int, unmasked_heads: int | None = None) -> list[LookHereHead]:
    """The LH-90 head layout for ``num_heads`` heads (the rule in the module docstring)."""
    H = int(num_heads)
    u = min(4, H // 3, max(H - 4, 0)) if unmasked_heads is None else int(unmasked_heads)
    if not 0 <= u <= min(4, H):
        raise PEConfigError(f"lookhere unmasked_heads must be in 0..{min(4, H)} for {H} heads, got {u}")
    corners, triangles = [], []
    left, rnd = H - u, 0
    while left > 0:
        for kind, full, spread, out in (("corner", _CORNERS, _CORNERS_SPREAD, corners),
                                         ("triangle", _TRIANGLES, _TRIANGLES, triangles)):
            n = min(4, left)
            if n == 0:
                break
            out += [LookHereHead(kind, name, d, 2.0 ** -(rnd + 1)) for name, d in (full if n == 4 else spread[:n])]
            left -= n
        rnd += 1
    unmasked = [LookHereHead("unmasked", "all", None, _UNMASKED_SLOPES[k]) for k in range(u)]
    return corners + triangles + unmasked


class LookHereLayer(BiasLayerPE):
    """Directional masks + distance penalty for one block (fixed buffers, no parameters).
    ``dirs`` rows of unmasked heads are zero and ``masked`` False for them."""

    def __init__(self, dirs: Tensor, slopes: Tensor, masked: Sequence[bool], cos_half_fov: float,
                 num_prefix_tokens: int) -> None:
        super().__init__()
        self.register_buffer("dirs", dirs, persistent=False)  # (H, 2) unit vectors in (y, x)
        self.register_buffer("slopes", slopes, persistent=False)  # (H,)
        self.masked = [bool(m) for m in masked]  # (H,)
        self.cos_half_fov = cos_half_fov
        self.num_prefix_tokens = num_prefix_tokens
        self._bias_cache = CoordsCache()  # the bias depends on the coords and fixed buffers only

    def bias(self, coords: Tensor) -> Tensor:
        """The masks and distance penalties ``(B|1, H, P + N, P + N)``: no parameters, so the same tensor is
        returned while the same coords tensor comes back unmodified (every block of every step, for the
        tokenizers' grid coords) and the bias has at most :data:`BIAS_CACHE_MAX` entries."""
        T = coords.shape[-2] + self.num_prefix_tokens
        if (coords.shape[0] if coords.dim() == 3 else 1) * len(self.masked) * T * T > BIAS_CACHE_MAX:
            return self._bias(coords)
        key = (self.dirs.device, self.dirs.dtype, coords.dtype, tuple(coords.shape))
        return self._bias_cache.get(coords, key, lambda: self._bias(coords))

    def _bias(self, coords: Tensor) -> Tensor:
        c = coords if coords.dim() == 3 else coords.unsqueeze(0)  # (B|1, N, p)
        c = c[..., -2:].to(torch.promote_types(c.dtype, torch.float32))  # (B|1, N, 2) spatial (y, x)
        dist = pairwise_distance(c)  # (B|1, N, N)
        dy = c[..., None, :, 0] - c[..., :, None, 0]  # (B|1, N, N): r_j - r_i
        dx = c[..., None, :, 1] - c[..., :, None, 1]
        dirs = self.dirs.tolist()
        slopes = self.slopes.tolist()
        # visible iff <r_j - r_i, u_h> >= |r_j - r_i| cos(fov/2), with a 1e-6 (1 + dist) tolerance
        thr = dist * (self.cos_half_fov - 1e-6) - 1e-6  # (B|1, N, N)
        heads = []
        for h in range(len(dirs)):
            if not self.masked[h]:  # unmasked head: distance penalty only
                heads.append(dist * -slopes[h])
                continue
            visible = torch.addcmul(dy * dirs[h][0], dx, torch.tensor(dirs[h][1], dtype=dx.dtype)) >= thr
            heads.append(torch.where(visible, dist * -slopes[h], MASK_VALUE))  # (B|1, N, N)
        return self._finish(torch.stack(heads, dim=1))  # (B|1, H, P + N, P + N)

    def flex_block_visibility(self, coords: Tensor, batch_size: int, block: int) -> Tensor | None:
        """Which ``block x block`` tiles of the logits may hold a visible key: ``(B, H, nb, nb)`` bool.

        A directional head's cone (half-angle ``theta < 90`` degrees around ``u_h``) lies in the
        half-planes ``<d, n> >= 0`` of ``n = u_h`` rotated by ``0, +-(90 - theta)`` degrees; a tile is
        False when, for one of these ``n``, every key lies behind every query (``<r_j - r_i, n> <
        -margin``, the margin covering the visibility test's 1e-6 tolerance and rounding). Skipping such
        a tile is exact: its logits are all ``MASK_VALUE`` and each query keeps a visible key (itself)
        in another tile, so they add exactly 0 after the softmax (padded queries aside, whose outputs
        are never used). ``None`` (no skipping) with prefix tokens or ``fov >= 180``."""
        if self.num_prefix_tokens or self.cos_half_fov <= 1e-6:
            return None
        c = batch_coords(coords, batch_size)[..., -2:]
        c = c.to(torch.promote_types(c.dtype, torch.float32))  # (B, N, 2) spatial (y, x)
        B, N = c.shape[:2]
        nb = -(-N // block)
        phi = math.pi / 2 - math.acos(self.cos_half_fov)  # 90 degrees - theta
        dirs = self.dirs.to(c.dtype)  # (H, 2)
        normals = [dirs] + [torch.stack([dirs[:, 0] * math.cos(a) - dirs[:, 1] * math.sin(a),
                                         dirs[:, 0] * math.sin(a) + dirs[:, 1] * math.cos(a)], -1) for a in (phi, -phi)]
        proj = torch.einsum("bnk,hjk->bhjn", c, torch.stack(normals, 1))  # (B, H, 3, N): <r, n>
        pad = nb * block - N
        q_min = F.pad(proj, (0, pad), value=float("inf")).unflatten(-1, (nb, block)).amin(-1)  # (B, H, 3, nb)
        k_max = F.pad(proj, (0, pad), value=float("-inf")).unflatten(-1, (nb, block)).amax(-1)
        margin = 1e-4 * (1.0 + 2.0 * float(c.norm(dim=-1).max())) if N else 0.0
        behind = (k_max.unsqueeze(-2) - q_min.unsqueeze(-1) < -margin).any(2)  # (B, H, nb, nb)
        masked = torch.tensor(self.masked, device=c.device)[None, :, None, None]  # (1, H, 1, 1)
        return ~(behind & masked)

    def _bias_entry(self, c: Tensor) -> Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]:
        c = c[..., -2:].contiguous()  # (B, N, 2) spatial (y, x)
        dirs = self.dirs.to(c.dtype)  # (H, 2)
        slopes = self.slopes.to(c.dtype)  # (H,)
        unmasked = torch.tensor([not m for m in self.masked], device=c.device)  # (H,)
        cos = self.cos_half_fov - 1e-6

        def entry(b: Tensor, h: Tensor, i: Tensor, j: Tensor) -> Tensor:  # as ``bias``, one entry
            dist = entry_distance(c, b, i, j)
            dy, dx = c[b, j, 0] - c[b, i, 0], c[b, j, 1] - c[b, i, 1]
            visible = (dy * dirs[h, 0] + dx * dirs[h, 1] >= dist * cos - 1e-6) | unmasked[h]
            return torch.where(visible, dist * -slopes[h], MASK_VALUE)
        return entry


@register_pe("lookhere", order=50)
class LookHere(PositionalEncoding):
    """LookHere, LH-90 layout (see the module docstring); ``self.heads`` lists the layout."""

    relative = True
    rotation_invariant = False
    distance_decay = True
    learned = False
    options = (
        Option("unmasked_heads", "int", None, "number of unmasked heads (default: the LH-90 rule, 4 with 12 or 16 "
               "heads)"),
        Option("fov", "float", 90.0, "field of view of a directional head, degrees"),
        Option("global_slope", "float", 2.0, "global distance-penalty slope"),
        Option("layer_slopes", "floats", (1.5, 0.5), "layer slopes of the first and last block (linear between)"),
        Option("modality", "str", None, "input modality; 'points' is refused"),
    )

    modalities = ("image", "video", "events")

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, unmasked_heads: int | None = None,
                 fov: float = 90.0, global_slope: float = 2.0, layer_slopes: Sequence[float] = (1.5, 0.5),
                 modality: str | None = None) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if modality is not None and modality not in self.modalities:
            raise PEConfigError(f"lookhere does not apply to {modality!r}; it supports {', '.join(self.modalities)}")
        if spatial_dims not in (2, 3):
            raise PEConfigError(f"lookhere needs 2-D (image) or 3-D (video/events) coords, got spatial_dims={spatial_dims}")
        if not 0 < fov <= 360:
            raise PEConfigError(f"lookhere fov must be in (0, 360] degrees, got {fov}")
        if len(layer_slopes) != 2:
            raise PEConfigError(f"lookhere layer_slopes must be (first, last), got {layer_slopes}")
        self.fov = float(fov)
        self.heads = lh90_heads(num_heads, unmasked_heads)
        dirs = torch.tensor([h.direction or (0.0, 0.0) for h in self.heads], dtype=torch.float64)  # (H, 2) (y, x)
        head_slopes = torch.tensor([h.slope for h in self.heads], dtype=torch.float64)  # (H,)
        masked = [h.kind != "unmasked" for h in self.heads]
        lay = torch.linspace(layer_slopes[0], layer_slopes[1], depth, dtype=torch.float64) if depth > 1 \
            else torch.tensor([float(layer_slopes[0])], dtype=torch.float64)
        cos_half = math.cos(math.radians(self.fov / 2))
        self.layers = nn.ModuleList(
            LookHereLayer(dirs, global_slope * lay[i] * head_slopes, masked, cos_half, num_prefix_tokens)
            for i in range(depth))

    def layer(self, i: int) -> LayerPE:
        return self.layers[i]

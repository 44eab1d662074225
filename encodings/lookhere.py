"""``lookhere``: LookHere directed-attention masks with distance penalties.

Paper: Fuller et al., NeurIPS 2024, "LookHere: Vision Transformers with Directed Attention
Generalize and Extrapolate" (code: GreenCUBIC/lookhere).

* Each head looks in one 2-D direction: ``num_directions`` (default 8) directions at angles
  ``phi_k = 2*pi*k/num_directions`` in the image plane, ``u_k = (sin phi_k, cos phi_k)`` in
  (y, x) order (``k = 0`` looks right, ``k = 2`` down when there are 8). A key ``j`` is visible
  to query ``i`` in head ``h`` iff the angle between ``r_j - r_i`` and ``u_h`` is at most
  ``fov/2`` (boundary inclusive); ``fov`` defaults to 90 degrees, so with 8 directions the
  heads pointing along the axes are the paper's "triangles" and the diagonal ones its
  "corners" (its LH-90 model). A token always sees itself (and, in video, the tokens at the
  same (y, x) in other frames). Invisible logits get ``-1e9`` (finite, so padded rows never
  produce NaN).
* Heads are split among directions in rounds of ``num_directions``; a round with fewer heads
  spreads them evenly over the circle (4 heads, 8 directions -> right, down, left, up).
* Distance penalty: visible logits get ``-s_g * s_l * s_h * ||r_j - r_i||`` with the paper's
  fixed slopes: global ``s_g = 2``, layer slopes linear from 1.5 (first block) to 0.5 (last),
  head slope ``2^-(round+1)``.
* Only the spatial axes are used: coords ``(y, x)`` for images, the last two of ``(t, y, x)``
  for video/events. Point clouds are refused (``modalities``; pass ``modality="points"`` to get
  a :class:`PEConfigError` at construction), and ``spatial_dims`` must be 2 or 3.
* Unseen grids: the masks and distances are rebuilt from the coords of whatever grid comes in.
* CLS: prefix rows and columns are zero (the CLS token sees and is seen by everyone).
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import LayerPE, PEConfigError, PositionalEncoding
from .options import PEOption
from .registry import register_pe

__all__ = ["LookHere", "LookHereLayer", "lookhere_head_directions", "MASK_VALUE", "BiasLayerPE", "pairwise_distance"]

MASK_VALUE = -1e9


def pairwise_distance(c: Tensor) -> Tensor:
    """Exact Euclidean distances ``(B, N, N)`` of coords ``(B, N, p)`` (no matmul expansion)."""
    return torch.cdist(c, c, compute_mode="donot_use_mm_for_euclid_dist")


class BiasLayerPE(LayerPE):
    """A layer PE that only adds a bias; remembers q's dtype from ``qk`` to cast the bias."""

    num_prefix_tokens: int = 0

    def qk(self, q: Tensor, k: Tensor, x: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        self._dtype = q.dtype
        return q, k

    def _finish(self, bias: Tensor) -> Tensor:
        """Zero prefix rows/cols and cast: ``(B, H, N, N) -> (B, H, P + N, P + N)``."""
        P = self.num_prefix_tokens
        if P:
            bias = F.pad(bias, (P, 0, P, 0))
        return bias.to(getattr(self, "_dtype", bias.dtype))


def lookhere_head_directions(num_heads: int, num_directions: int) -> tuple[list[int], list[int]]:
    """Direction index and round of each head."""
    dirs, rounds = [], []
    r = 0
    while len(dirs) < num_heads:
        n = min(num_directions, num_heads - len(dirs))
        dirs += [j * num_directions // n for j in range(n)]
        rounds += [r] * n
        r += 1
    return dirs, rounds


class LookHereLayer(BiasLayerPE):
    """Directional masks + distance penalty for one block (fixed buffers, no parameters)."""

    def __init__(self, dirs: Tensor, slopes: Tensor, cos_half_fov: float, num_prefix_tokens: int) -> None:
        super().__init__()
        self.register_buffer("dirs", dirs, persistent=False)  # (H, 2) unit vectors in (y, x)
        self.register_buffer("slopes", slopes, persistent=False)  # (H,)
        self.cos_half_fov = cos_half_fov
        self.num_prefix_tokens = num_prefix_tokens

    def bias(self, coords: Tensor) -> Tensor:
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
            visible = torch.addcmul(dy * dirs[h][0], dx, torch.tensor(dirs[h][1], dtype=dx.dtype)) >= thr
            heads.append(torch.where(visible, dist * -slopes[h], MASK_VALUE))  # (B|1, N, N)
        return self._finish(torch.stack(heads, dim=1))  # (B|1, H, P + N, P + N)


@register_pe("lookhere")
class LookHere(PositionalEncoding):
    """LookHere. Options: ``num_directions`` (8), ``fov`` degrees (90), ``global_slope`` (2),
    ``layer_slopes`` ((1.5, 0.5): first and last block), ``modality`` (refuses "points")."""

    options = (
        PEOption("num_directions", "int", 8, "number of distinct look directions"),
        PEOption("fov", "float", 90.0, "field of view of a directional head, degrees"),
        PEOption("global_slope", "float", 2.0, "global distance-penalty slope"),
        PEOption("layer_slopes", "floats", (1.5, 0.5), "layer slopes of the first and last block (linear between)"),
        PEOption("modality", "str", None, "input modality; 'points' is refused"),
    )

    modalities = ("image", "video", "events")

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, num_directions: int = 8,
                 fov: float = 90.0, global_slope: float = 2.0, layer_slopes: Sequence[float] = (1.5, 0.5),
                 modality: str | None = None) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if modality is not None and modality not in self.modalities:
            raise PEConfigError(f"lookhere does not apply to {modality!r}; it supports {', '.join(self.modalities)}")
        if spatial_dims not in (2, 3):
            raise PEConfigError(f"lookhere needs 2-D (image) or 3-D (video/events) coords, got spatial_dims={spatial_dims}")
        if int(num_directions) != num_directions or num_directions < 1:
            raise PEConfigError(f"lookhere num_directions must be a positive integer, got {num_directions}")
        if not 0 < fov <= 360:
            raise PEConfigError(f"lookhere fov must be in (0, 360] degrees, got {fov}")
        if len(layer_slopes) != 2:
            raise PEConfigError(f"lookhere layer_slopes must be (first, last), got {layer_slopes}")
        self.num_directions = int(num_directions)
        self.fov = float(fov)
        d_idx, rounds = lookhere_head_directions(num_heads, self.num_directions)
        phi = torch.tensor(d_idx, dtype=torch.float64) * (2 * math.pi / self.num_directions)
        dirs = torch.stack([phi.sin(), phi.cos()], dim=-1)  # (H, 2) (y, x)
        head_slopes = torch.tensor([2.0 ** -(r + 1) for r in rounds], dtype=torch.float64)  # (H,)
        lay = torch.linspace(layer_slopes[0], layer_slopes[1], depth, dtype=torch.float64) if depth > 1 \
            else torch.tensor([float(layer_slopes[0])], dtype=torch.float64)
        cos_half = math.cos(math.radians(self.fov / 2))
        self.layers = nn.ModuleList(
            LookHereLayer(dirs, global_slope * lay[i] * head_slopes, cos_half, num_prefix_tokens)
            for i in range(depth))

    def layer(self, i: int) -> LayerPE:
        return self.layers[i]

"""Scene-scale point tokenization for 3-D semantic segmentation (ScanNet, nuScenes, primitives-scene).

A scene of ``10^4 .. 10^5`` points is turned into a variable number of tokens per scene:

1. **grid (voxel) sampling** (:func:`pebench.datamodules.scenes.scene_common.grid_sample`, done by the datamodule on each scene before
   batching): one point per occupied voxel of side ``grid_size`` metres, as Pointcept's
   ``GridSample`` (Wu et al., "Point Transformer V3", CVPR 2024): a random point per voxel for
   training, the first point (in file order) for evaluation.
2. **patches of K points**, two ways (``patching``):

   * ``"serialize"`` (default): sort the points of each scene along a space-filling curve
     (Morton / z-order code of the voxel coordinates, :func:`morton_code`) and cut the sorted
     sequence into consecutive patches of ``K`` points (PTv3's serialization; z-order only, not its
     Hilbert / transposed orders). Every point belongs to exactly one patch; ``ceil(n / K)``
     tokens for a scene of ``n`` points. ``O(n log n)``.
   * ``"fps"``: farthest point sampling of ``ceil(n / K)`` centres and the ``K`` nearest points of
     each (Point-BERT / Point-MAE grouping, today's :class:`~pebench.models.PointTokenizer`,
     batched with masks). ``O(n^2 / K)`` for FPS plus ``O(n^2 / K)`` distances for kNN (chunked).

   Measured on one 10^5-point scene (``bench perf``-style, CPU, 2 cores; see the README's
   "3-D scene segmentation" section): serialization is orders of magnitude faster, so it is the
   default; FPS + kNN is kept as an option (its patches are rounder, it costs more).
3. a **mini-PointNet** per patch: a shared per-point MLP on ``[offset to the patch centre (dm),
   point features]`` (``3 + F -> 32 -> 64``), masked max-pool, then a per-token MLP
   (``64 -> 128 -> D``) -> one ``D``-dim token per patch. Lighter than
   :class:`~pebench.models.PointTokenizer`'s two per-point stages: scenes have ~10^5 points per batch
   on CPU, and the per-point layers dominate a step.

Token coords are the patch centres (mean of the patch's points) **in metres** in the dataset's
frame (the scene frame for ScanNet, the ego frame for nuScenes), multiplied by ``coord_scale``
(1.0 by default: the PE sees metres). Scenes are padded to the batch's largest token count and
``mask`` marks real tokens (True), so attention is mask-aware.

Back to the points: :func:`knn_interpolate` (inverse squared-distance weights over the ``k = 3``
nearest token centres; PointNet++ feature propagation, Qi et al. 2017) -- torch-geometric's
``knn_interpolate`` when its ``knn`` backend (``torch-cluster`` / ``pyg-lib``) is installed, else
a dense, chunked torch implementation of the same formula (no wheels of either for the torch
build pebench pins). Likewise FPS and kNN are written in torch for that reason, and voxel
sampling is NumPy (``np.unique`` over voxel keys, per scene in the data loader) instead of
torch-geometric's ``voxel_grid`` / ``GridSampling`` (which need them too).
"""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from .tokenizers import TokenBatch

__all__ = ["morton_code", "serialize_patches", "fps_knn_patches", "knn_interpolate",
           "SceneTokenizer", "PATCHINGS", "masked_farthest_point_sample", "masked_knn"]

PATCHINGS = ("serialize", "fps")
#: offsets to a patch centre enter the PointNet in decimetres (metre offsets of a few cm are tiny)
OFFSET_SCALE = 10.0


def _spread_bits(x: Tensor) -> Tensor:
    """The low 21 bits of ``x`` (int64) spread to every third bit (for 3-D Morton codes)."""
    x = x & 0x1FFFFF
    x = (x | (x << 32)) & 0x1F00000000FFFF
    x = (x | (x << 16)) & 0x1F0000FF0000FF
    x = (x | (x << 8)) & 0x100F00F00F00F00F
    x = (x | (x << 4)) & 0x10C30C30C30C30C3
    x = (x | (x << 2)) & 0x1249249249249249
    return x


def morton_code(vox: Tensor) -> Tensor:
    """Z-order code ``(...,)`` int64 of non-negative integer voxel coords ``(..., 3)`` (< 2^21 each)."""
    return _spread_bits(vox[..., 0]) | (_spread_bits(vox[..., 1]) << 1) | (_spread_bits(vox[..., 2]) << 2)


def _gather(x: Tensor, idx: Tensor) -> Tensor:
    """``x (B, M, C)``, ``idx (B, ...)`` -> ``(B, ..., C)``."""
    B, C = x.shape[0], x.shape[-1]
    flat = idx.reshape(B, -1)
    out = torch.gather(x, 1, flat.unsqueeze(-1).expand(-1, -1, C))
    return out.reshape(*idx.shape, C)


def serialize_patches(coord: Tensor, mask: Tensor, k: int, cell: float) -> tuple[Tensor, Tensor]:
    """Serialization patching: -> point indices ``(B, T, k)`` and point-in-patch mask ``(B, T, k)``.

    ``coord (B, M, 3)`` metres, ``mask (B, M)``; ``cell``: voxel side (m) of the Morton code. Real
    points are sorted by z-order and cut into runs of ``k``; ``T = ceil(max_b n_b / k)``.
    """
    B, M, _ = coord.shape
    big = torch.finfo(coord.dtype).max
    lo = torch.where(mask.unsqueeze(-1), coord, coord.new_tensor(big)).amin(1, keepdim=True)  # (B, 1, 3)
    vox = torch.floor((coord - lo) / cell).clamp(0, 2 ** 21 - 1).long()  # (B, M, 3)
    code = morton_code(vox)  # (B, M)
    code = torch.where(mask, code, torch.full_like(code, 2 ** 63 - 1))  # padding sorts last
    order = torch.sort(code, dim=1, stable=True).indices  # (B, M)
    n_max = int(mask.sum(1).max())
    T = max(1, math.ceil(n_max / k))
    pad = T * k - M
    if pad > 0:
        order = torch.cat([order, order[:, -1:].expand(-1, pad)], 1)
    order = order[:, : T * k]
    valid = torch.gather(mask, 1, order)  # (B, T*k): sorted, real points first
    if pad > 0:
        valid[:, M:] = False
    return order.view(B, T, k), valid.view(B, T, k)


def masked_farthest_point_sample(coord: Tensor, mask: Tensor, n: int) -> Tensor:
    """FPS indices ``(B, n)`` over the real points of ``coord (B, M, 3)`` (``mask (B, M)``), seeded at
    each scene's first real point. A scene with fewer than ``n`` points repeats indices (its extra
    tokens are masked by the caller)."""
    B, M, _ = coord.shape
    dist = torch.where(mask, torch.full((B, M), float("inf"), device=coord.device, dtype=coord.dtype),
                       torch.full((B, M), -1.0, device=coord.device, dtype=coord.dtype))
    far = mask.float().argmax(1)  # (B,) first real point
    ar = torch.arange(B, device=coord.device)
    idx = torch.empty(B, n, dtype=torch.long, device=coord.device)
    for i in range(n):
        idx[:, i] = far
        d = ((coord - coord[ar, far].unsqueeze(1)) ** 2).sum(-1)  # (B, M)
        dist = torch.where(mask, torch.minimum(dist, d), dist)
        far = dist.argmax(1)
    return idx


def masked_knn(query: Tensor, ref: Tensor, ref_mask: Tensor, k: int, chunk: int | None = None) -> tuple[Tensor, Tensor]:
    """The ``k`` nearest real ``ref`` points of each query: -> (squared distances, indices), each
    ``(B, Q, k)``. ``query (B, Q, 3)``, ``ref (B, R, 3)``, ``ref_mask (B, R)``; chunked over queries so
    that one distance block holds at most ~2^24 entries per scene (64 MB in float32)."""
    chunk = chunk or max(1, 2 ** 24 // max(1, ref.shape[1]))
    out_d, out_i = [], []
    inf = torch.tensor(float("inf"), device=ref.device, dtype=ref.dtype)
    for s in range(0, query.shape[1], chunk):
        d = torch.cdist(query[:, s:s + chunk], ref).square()  # (B, q, R)
        d = torch.where(ref_mask.unsqueeze(1), d, inf)
        r = d.topk(k, dim=-1, largest=False)
        out_d.append(r.values)
        out_i.append(r.indices)
    return torch.cat(out_d, 1), torch.cat(out_i, 1)


def fps_knn_patches(coord: Tensor, mask: Tensor, k: int) -> tuple[Tensor, Tensor, Tensor]:
    """FPS + kNN patching: -> point indices ``(B, T, k)``, point-in-patch mask ``(B, T, k)`` and token
    mask ``(B, T)``; ``ceil(n_b / k)`` centres for a scene of ``n_b`` points."""
    n = mask.sum(1)  # (B,)
    T = max(1, math.ceil(int(n.max()) / k))
    with torch.no_grad():
        centre_idx = masked_farthest_point_sample(coord, mask, T)  # (B, T)
        centres = _gather(coord, centre_idx)  # (B, T, 3)
        kk = min(k, coord.shape[1])
        _, idx = masked_knn(centres, coord, mask, kk)  # (B, T, kk)
    tok_mask = torch.arange(T, device=coord.device).unsqueeze(0) < torch.ceil(n / k).long().unsqueeze(1)
    pmask = torch.gather(mask, 1, idx.flatten(1)).view_as(idx) & tok_mask.unsqueeze(-1)  # neighbour may be padding
    return idx, pmask, tok_mask


def _pyg_knn_available() -> bool:
    try:
        from torch_geometric.nn import knn  # deferred: optional dependency (torch-cluster, behind pyg's knn)

        knn(torch.zeros(1, 3), torch.zeros(1, 3), 1)
        return True
    except Exception:  # noqa: BLE001 - ImportError (no torch-cluster / pyg-lib) or a backend failure
        return False


_PYG_KNN: bool | None = None


def knn_interpolate(x: Tensor, pos_x: Tensor, mask_x: Tensor, pos_y: Tensor, mask_y: Tensor, k: int = 3,
                    use_pyg: bool | None = None) -> Tensor:
    """Features of the ``k`` nearest (real) sources, weighted by ``1 / max(d^2, 1e-16)``, at each target.

    ``x (B, T, C)`` at ``pos_x (B, T, 3)`` (``mask_x (B, T)``) -> ``(B, M, C)`` at ``pos_y (B, M, 3)``
    (``mask_y (B, M)``; padded targets get zeros). Same formula as
    ``torch_geometric.nn.unpool.knn_interpolate``, which is used when its knn backend is installed.
    """
    global _PYG_KNN
    if use_pyg is None:
        if _PYG_KNN is None:
            _PYG_KNN = _pyg_knn_available()
        use_pyg = _PYG_KNN
    B, M, _ = pos_y.shape
    if use_pyg:
        from torch_geometric.nn import knn_interpolate as pyg_interp  # deferred: optional dependency (torch-cluster)

        bx = torch.arange(B, device=x.device).unsqueeze(1).expand(-1, x.shape[1])[mask_x]
        by = torch.arange(B, device=x.device).unsqueeze(1).expand(-1, M)[mask_y]
        y = pyg_interp(x[mask_x], pos_x[mask_x], pos_y[mask_y], batch_x=bx, batch_y=by, k=k)
        out = x.new_zeros(B, M, x.shape[-1])
        out[mask_y] = y
        return out
    kk = min(k, x.shape[1])
    d2, idx = masked_knn(pos_y, pos_x, mask_x, kk)  # (B, M, kk)
    w = 1.0 / d2.clamp_min(1e-16)  # inf distance (fewer than k real sources) -> weight 0
    w = w / w.sum(-1, keepdim=True).clamp_min(1e-30)  # a scene without real sources: zeros, not NaN
    out = (_gather(x, idx) * w.unsqueeze(-1)).sum(2)  # (B, M, C)
    return out * mask_y.unsqueeze(-1).to(out.dtype)


def _masked_max(f: Tensor, m: Tensor, dim: int) -> Tensor:
    neg = torch.finfo(f.dtype).min
    out = f.masked_fill(~m.unsqueeze(-1), neg).amax(dim)
    return torch.where(m.any(dim).unsqueeze(-1), out, torch.zeros_like(out))


class SceneTokenizer(nn.Module):
    """Padded scene batch -> :class:`TokenBatch` of patch tokens (coords: patch centres, metres x
    ``coord_scale``; ``mask`` True for real tokens) plus the centres in metres for the way back."""

    def __init__(self, embed_dim: int, feat_dim: int, patch_size: int = 32, patching: str = "serialize",
                 grid_size: float = 0.02, coord_scale: float = 1.0) -> None:
        super().__init__()
        if patching not in PATCHINGS:
            raise ValueError(f"unknown patching {patching!r}; available: {', '.join(PATCHINGS)}")
        if patch_size < 1:
            raise ValueError(f"patch_size must be >= 1, got {patch_size}")
        self.patch_size, self.patching, self.grid_size = int(patch_size), patching, float(grid_size)
        self.coord_scale = float(coord_scale)
        self.feat_dim = int(feat_dim)
        self.spatial_dims = 3
        self.point = nn.Sequential(nn.Linear(3 + feat_dim, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 64))
        self.token = nn.Sequential(nn.LayerNorm(64), nn.Linear(64, 128), nn.GELU(), nn.Linear(128, embed_dim))

    def patches(self, coord: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """-> point indices ``(B, T, K)``, point-in-patch mask ``(B, T, K)``, token mask ``(B, T)``."""
        with torch.no_grad():
            if self.patching == "serialize":
                idx, pmask = serialize_patches(coord, mask, self.patch_size, max(self.grid_size, 1e-3))
                return idx, pmask, pmask.any(-1)
            return fps_knn_patches(coord, mask, self.patch_size)

    def forward(self, coord: Tensor, feat: Tensor, mask: Tensor) -> tuple[TokenBatch, Tensor]:
        """``coord (B, M, 3)`` m, ``feat (B, M, F)``, ``mask (B, M)`` -> (TokenBatch with ``x (B, T, D)``,
        ``coords (B, T, 3)``, ``mask (B, T)``; centres ``(B, T, 3)`` in metres)."""
        idx, pmask, tmask = self.patches(coord, mask)
        pts = _gather(coord, idx)  # (B, T, K, 3)
        w = pmask.unsqueeze(-1).to(coord.dtype)
        centres = (pts * w).sum(2) / w.sum(2).clamp_min(1.0)  # (B, T, 3) metres; padding tokens at 0
        rel = (pts - centres.unsqueeze(2)) * OFFSET_SCALE  # (B, T, K, 3)
        f = torch.cat([rel, _gather(feat, idx)], -1) if self.feat_dim else rel  # (B, T, K, 3 + F)
        f = _masked_max(self.point(f), pmask, 2)  # (B, T, 64)
        f = self.token(f)  # (B, T, D)
        return TokenBatch(f, centres * self.coord_scale, None, tmask), centres

    def describe(self) -> dict[str, Any]:
        return {"patching": self.patching, "patch_size": self.patch_size, "grid_size_m": self.grid_size,
                "coord_unit": "m", "coord_scale": self.coord_scale}

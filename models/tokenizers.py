"""Tokenizers: modality input -> :class:`TokenBatch` ``(x, coords, grid, mask)`` (docs/architecture.md §2).

* images  ``(B, C, H, W)``        -> patches (timm ``PatchEmbed``), coords ``(y, x)``
* video   ``(B, C, T, H, W)``     -> tubelets ``t x p x p`` (Conv3d), coords ``(t, y, x)``
* events  ``(B, 2, T, H, W)``     -> event voxels (binned by the datamodule with tonic's
  ``ToFrame``: polarity as channels, time bins as T) -> tubelets, coords ``(t, y, x)``
* points  ``(B, M, 3)``           -> farthest-point-sampled centres, kNN groups, a small
  PointNet per group (Point-MAE / Point-BERT style), coords = centres ``(x, y, z)``
* events as events (``tokens=spiking``) -> :class:`pebench.models.spiking.SpikingPatchTokenizer`:
  asynchronous spiking-patch tokens made in the data loader (padded ``EventTokens``), coords
  ``(t, y, x)`` with continuous ``t``, ``grid=None`` and a key mask; built by
  :func:`pebench.tasks.classification.build_tokenizer` (it lives in its own module because it imports
  :class:`TokenBatch` from here)

Coords are in patch units: the integer index of the patch / tubelet along each axis. Point
centres keep their metric coordinates (scaled by ``coord_scale``) and have no grid.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from timm.layers import PatchEmbed
from torch import Tensor, nn

from pebench.core.errors import UserError
from pebench.datamodules.points.grouping import POINT_CENTRES, farthest_point_sample, knn_group, point_groups
from pebench.encodings.coords import canonical_grid_coords, grid_coords, is_canonical_grid_coords

__all__ = ["TokenBatch", "grid_coords", "canonical_grid_coords", "is_canonical_grid_coords", "ImageTokenizer", "TubeletTokenizer", "PointTokenizer",
           "farthest_point_sample", "knn_group", "point_groups", "POINT_CENTRES", "ResolutionError"]


class ResolutionError(UserError):
    """Input size not divisible by the patch / tubelet size."""


@dataclass
class TokenBatch:
    x: Tensor                       # (B, N, D) token embeddings
    coords: Tensor                  # (N, p) or (B, N, p), patch units
    grid: tuple[int, ...] | None    # regular grid shape (row-major token order) or None
    mask: Tensor | None = None      # (B, N) bool, True = valid token


def _check_divisible(what: str, sizes: Sequence[int], patch: Sequence[int]) -> tuple[int, ...]:
    for s, p in zip(sizes, patch):
        if s % p:
            raise ResolutionError(f"{what} {tuple(sizes)} is not divisible by the patch size {tuple(patch)}")
    return tuple(s // p for s, p in zip(sizes, patch))


class ImageTokenizer(nn.Module):
    """Non-overlapping patches of an image; any size divisible by ``patch_size``."""

    def __init__(self, embed_dim: int, patch_size: int = 4, in_chans: int = 3) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.spatial_dims = 2
        # img_size=None: no fixed input size; NHWC keeps the grid shape.
        self.proj = PatchEmbed(img_size=None, patch_size=patch_size, in_chans=in_chans, embed_dim=embed_dim,
                               flatten=False, output_fmt="NHWC", strict_img_size=False)

    def grid_for(self, size: Sequence[int]) -> tuple[int, ...]:
        return _check_divisible("image size", size, (self.patch_size,) * 2)

    def forward(self, img: Tensor) -> TokenBatch:
        grid = self.grid_for(img.shape[-2:])
        x = self.proj(img)  # (B, h, w, D), a permuted view of the conv's (B, D, h, w) output
        # .contiguous() (perf, issue #7): else the residual stream inherits the transposed layout
        # through every block's adds and each LayerNorm copies it (same values either way).
        return TokenBatch(x.flatten(1, 2).contiguous(), canonical_grid_coords(grid, img.device), grid)


class TubeletTokenizer(nn.Module):
    """Non-overlapping ``t x p x p`` tubelets of a clip / event voxel grid ``(B, C, T, H, W)``."""

    def __init__(self, embed_dim: int, patch_size: int = 4, tubelet: int = 2, in_chans: int = 3) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.tubelet = tubelet
        self.spatial_dims = 3
        k = (tubelet, patch_size, patch_size)
        self.proj = nn.Conv3d(in_chans, embed_dim, kernel_size=k, stride=k)

    def grid_for(self, size: Sequence[int]) -> tuple[int, ...]:
        return _check_divisible("clip size (T, H, W)", size, (self.tubelet, self.patch_size, self.patch_size))

    def forward(self, clip: Tensor) -> TokenBatch:
        grid = self.grid_for(clip.shape[-3:])
        x = self.proj(clip)  # (B, D, t, h, w)
        return TokenBatch(x.flatten(2).transpose(1, 2).contiguous(),  # contiguous: see ImageTokenizer
                          canonical_grid_coords(grid, clip.device), grid)


class PointTokenizer(nn.Module):
    """FPS centres + kNN groups + a shared mini-PointNet (max-pooled) per group (``centre``: see
    :func:`point_groups`)."""

    def __init__(self, embed_dim: int, num_groups: int = 64, group_size: int = 16, coord_scale: float = 4.0,
                 centre: str = "fps", offset_scale: float = 1.0) -> None:
        super().__init__()
        if centre not in POINT_CENTRES:
            raise ValueError(f"point tokenizer centre must be one of {', '.join(POINT_CENTRES)}, got {centre!r}")
        if not offset_scale > 0:
            raise ValueError(f"point tokenizer offset_scale must be > 0, got {offset_scale!r}")
        self.num_groups = num_groups
        self.group_size = group_size
        self.coord_scale = coord_scale
        self.centre = centre
        #: factor on the in-group offsets the PointNet sees (1: as given; small parts need more)
        self.offset_scale = float(offset_scale)
        self.spatial_dims = 3
        self.first = nn.Sequential(nn.Linear(3, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 128))
        self.second = nn.Sequential(nn.Linear(256, 256), nn.LayerNorm(256), nn.GELU(), nn.Linear(256, embed_dim))

    def forward(self, points: Tensor, num_groups: int | None = None) -> TokenBatch:
        G = num_groups or self.num_groups
        groups, centres = point_groups(points, G, self.group_size, self.centre)  # (B, G, k, 3), (B, G, 3)
        if self.offset_scale != 1.0:
            groups = groups * self.offset_scale
        f = self.first(groups)  # (B, G, k, 128)
        g = f.max(dim=2, keepdim=True).values.expand_as(f)
        f = self.second(torch.cat([f, g], dim=-1)).max(dim=2).values  # (B, G, D)
        return TokenBatch(f, centres * self.coord_scale, None)

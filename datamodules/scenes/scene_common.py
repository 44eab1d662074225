"""What every 3-D scene segmentation datamodule shares (ScanNet, primitives-scene, nuScenes).

Batch contract (``pebench.tasks.segmentation``):

* ``inputs``: a dict ``{"coord": (B, M, 3) float32 metres, "feat": (B, M, F) float32,
  "mask": (B, M) bool (True = real point)}``, scenes padded to the batch's largest ``M``
  (real points first);
* ``targets``: ``(B, M)`` int64 class indices, :data:`IGNORE_INDEX` (-1) for padding and for
  unlabelled / ignored classes;
* ``{"skipped": n}``: corrupt scenes dropped from the batch (datamodules/corrupt.py's contract).

A scene datamodule sets ``default_task = "segmentation"``, ``label_kind = "point-labels"``,
``modality = "points"``, ``num_classes``, ``class_names``, ``ignore_index = -1``,
``coord_unit = "m"`` and ``feat_dim`` (per-point features besides xyz).

Augmentation (:class:`SceneAugment`) follows Pointcept's ScanNet / nuScenes semantic-segmentation
defaults (``configs/scannet/semseg-pt-v3m1-0-base.py``; Wu et al., PTv3, CVPR 2024): random rotation
about z (angle uniform in [-pi, pi], p = 0.5), small rotations about x and y (+-pi/64, p = 0.5 each),
uniform scaling in [0.9, 1.1], flips of x and y (p = 0.5 each), Gaussian jitter (sigma 5 mm, clipped
at 2 cm); elastic distortion is optional and off. Pointcept's colour augmentations
(auto-contrast, translation, jitter) are not applied. Rotation and scaling are about the scene's
centre (``centre="scene"``: bounding-box centre in x, y) or the origin (``centre="origin"``: the
ego vehicle for lidar), so coordinates stay in metres in the dataset's frame.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import torch

__all__ = ["IGNORE_INDEX", "scene_collate", "SceneAugment", "crop_points", "grid_sample"]

#: target value of padding and of unlabelled / ignored points
IGNORE_INDEX = -1


def scene_collate(batch: Sequence[Any]) -> tuple[dict[str, torch.Tensor], torch.Tensor, dict[str, int]]:
    """Samples ``(coord (M_i, 3), feat (M_i, F), target (M_i,))`` (numpy or torch) or ``None`` (corrupt)
    -> ``(inputs, targets, {"skipped": n})`` padded to ``M = max M_i`` (see the module docstring).
    A batch of only corrupt scenes gives ``B = 0`` tensors."""
    kept = [b for b in batch if b is not None]
    skipped = len(batch) - len(kept)
    if not kept:
        return ({"coord": torch.zeros(0, 0, 3), "feat": torch.zeros(0, 0, 0), "mask": torch.zeros(0, 0, dtype=torch.bool)},
                torch.zeros(0, 0, dtype=torch.long), {"skipped": skipped})
    coords = [torch.as_tensor(c, dtype=torch.float32) for c, _, _ in kept]
    feats = [torch.as_tensor(f, dtype=torch.float32) for _, f, _ in kept]
    targets = [torch.as_tensor(t).long() for _, _, t in kept]
    B, M, F = len(kept), max(c.shape[0] for c in coords), feats[0].shape[-1]
    coord = torch.zeros(B, M, 3)
    feat = torch.zeros(B, M, F)
    mask = torch.zeros(B, M, dtype=torch.bool)
    target = torch.full((B, M), IGNORE_INDEX, dtype=torch.long)
    for i, (c, f, t) in enumerate(zip(coords, feats, targets)):
        n = c.shape[0]
        if f.shape != (n, F) or t.shape != (n,):
            raise ValueError(f"scene {i}: coord {tuple(c.shape)}, feat {tuple(f.shape)}, target {tuple(t.shape)} "
                             f"do not agree (expected feat ({n}, {F}), target ({n},))")
        coord[i, :n], feat[i, :n], mask[i, :n], target[i, :n] = c, f, True, t
    return {"coord": coord, "feat": feat, "mask": mask}, target, {"skipped": skipped}


def _rot(axis: int, angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    i, j = [a for a in range(3) if a != axis]
    r = np.eye(3)
    r[i, i], r[i, j], r[j, i], r[j, j] = c, -s, s, c
    return r


class SceneAugment:
    """Pointcept-default geometric augmentation of one scene (see the module docstring).

    ``__call__(coord (M, 3), normal (M, 3) or None, rng)`` -> (coord, normal) as float32 arrays;
    normals get the rotation and flips (not the scaling)."""

    def __init__(self, centre: str = "scene", rotate_z: float = math.pi, tilt: float = math.pi / 64,
                 scale: tuple[float, float] = (0.9, 1.1), flip: bool = True, jitter: float = 0.005,
                 jitter_clip: float = 0.02) -> None:
        if centre not in ("scene", "origin"):
            raise ValueError(f"centre must be 'scene' or 'origin', got {centre!r}")
        self.centre, self.rotate_z, self.tilt, self.scale = centre, rotate_z, tilt, scale
        self.flip, self.jitter, self.jitter_clip = flip, jitter, jitter_clip

    def __call__(self, coord: np.ndarray, normal: np.ndarray | None, rng: np.random.Generator
                 ) -> tuple[np.ndarray, np.ndarray | None]:
        coord = coord.astype(np.float64)
        c = np.zeros(3)
        if self.centre == "scene":
            c[:2] = (coord[:, :2].min(0) + coord[:, :2].max(0)) / 2
        r = np.eye(3)
        if rng.random() < 0.5:
            r = _rot(2, rng.uniform(-self.rotate_z, self.rotate_z)) @ r
        for axis in (0, 1):
            if rng.random() < 0.5:
                r = _rot(axis, rng.uniform(-self.tilt, self.tilt)) @ r
        flipm = np.ones(3)
        if self.flip:
            flipm[0] = -1.0 if rng.random() < 0.5 else 1.0
            flipm[1] = -1.0 if rng.random() < 0.5 else 1.0
        r = np.diag(flipm) @ r
        s = rng.uniform(*self.scale)
        out = (coord - c) @ r.T * s + c
        if self.jitter > 0:
            out += np.clip(rng.normal(0.0, self.jitter, out.shape), -self.jitter_clip, self.jitter_clip)
        nrm = None if normal is None else (normal.astype(np.float64) @ r.T).astype(np.float32)
        return out.astype(np.float32), nrm


def crop_points(coord: np.ndarray, max_points: int, rng: np.random.Generator | None) -> np.ndarray:
    """Indices of at most ``max_points`` points: the nearest to a random point (training, Pointcept's
    ``SphereCrop`` random mode) or to the scene's centre (evaluation, ``rng=None``)."""
    n = coord.shape[0]
    if max_points <= 0 or n <= max_points:
        return np.arange(n)
    centre = coord[rng.integers(n)] if rng is not None else (coord.min(0) + coord.max(0)) / 2
    d = ((coord - centre) ** 2).sum(1)
    return np.sort(np.argpartition(d, max_points - 1)[:max_points])


def grid_sample(coord: np.ndarray, grid_size: float, train: bool = False,
                rng: np.random.Generator | None = None) -> np.ndarray:
    """Indices (sorted, int64) of one point per occupied voxel of side ``grid_size`` of ``coord (M, 3)``:
    a uniformly random one when ``train`` (drawn from ``rng``), else the first in order
    (deterministic). NumPy: it runs per scene in the data loader, like Pointcept's ``GridSample``."""
    coord = np.asarray(coord)
    if grid_size <= 0 or len(coord) == 0:
        return np.arange(len(coord))
    vox = np.floor((coord - coord.min(0)) / grid_size).astype(np.int64)  # (M, 3)
    dims = vox.max(0) + 1
    key = (vox[:, 0] * dims[1] + vox[:, 1]) * dims[2] + vox[:, 2]  # (M,) voxel id
    order = (rng or np.random.default_rng()).permutation(len(key)) if train else np.arange(len(key))
    _, first = np.unique(key[order], return_index=True)  # first occurrence per voxel in ``order``
    return np.sort(order[first])

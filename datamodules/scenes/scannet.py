"""``scannet``: ScanNet v2 indoor scenes for 20-class semantic segmentation (Dai et al., "ScanNet:
Richly-annotated 3D Reconstructions of Indoor Scenes", CVPR 2017), read offline. Two layouts:

1. **raw** (as downloaded): ``<root>/scans/<scene>/<scene>_vh_clean_2.ply`` (binary PLY mesh: vertex
   ``x, y, z, red, green, blue``) and ``<scene>_vh_clean_2.labels.ply`` (the same vertices with the
   NYU40 class id in the vertex property ``label``), and the benchmark's split lists
   ``<root>/scannetv2_{train,val}.txt`` (one scene name per line). Read with ``plyfile``. The 20
   benchmark classes are the NYU40 ids 1-12, 14, 16, 24, 28, 33, 34, 36, 39 (:data:`NYU40_IDS`, in
   that order); every other id is ignored (-1). Normals are the area-weighted vertex normals of the
   mesh faces.
2. **preprocessed** (Pointcept's): ``<root>/{train,val}/<scene>/coord.npy`` (float, metres),
   ``color.npy`` (0-255), ``normal.npy`` and ``segment20.npy`` (0-19, -1 ignored).

The test split's labels are hidden (benchmark server), so runs train on ``train`` and report on
``val`` (``primary_metric`` ``val/miou``).

Per scene (see :mod:`.scene_common`): training applies Pointcept's geometric augmentation about the
scene centre, then grid sampling (``grid_size`` metres, a random point per voxel; the first point
for evaluation), then at most ``M`` points (the resolution, Pointcept's ``SphereCrop`` point_max:
the ``M`` nearest to a random point in training, to the scene centre in evaluation). Features:
colour / 255 (3) and, with ``normals=True``, the unit normal (3). Coordinates stay in metres in the
scan's frame (ScanNet's axis-aligned frame, z up, floor near z = 0). Evaluation metrics are over
the grid-sampled points (Pointcept's validation protocol; its test-time voting over all vertices
is not done).

Corrupt scenes (unreadable PLY / npy, vertex counts that do not match) are skipped in the loader
and counted (``datamodules/corrupt.py``).
"""
from __future__ import annotations

import os
from typing import Any, ClassVar

import numpy as np
import torch
from plyfile import PlyData, PlyParseError

from ..base import BenchDataModule, DataRootError, DataSource, bool_option, float_option, int_option
from ..corrupt import SkippingDataset
from ..registry import register_datamodule
from .scene_common import IGNORE_INDEX, SceneAugment, crop_points, grid_sample, scene_collate

__all__ = ["ScanNetDataModule", "SceneFolderDataset", "NYU40_IDS", "SCANNET20_CLASSES", "nyu40_to_scannet20",
           "read_scannet_ply", "vertex_normals", "LAYOUT"]

#: NYU40 ids of the 20 ScanNet benchmark classes, in benchmark order
NYU40_IDS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 24, 28, 33, 34, 36, 39)
SCANNET20_CLASSES = ("wall", "floor", "cabinet", "bed", "chair", "sofa", "table", "door", "window", "bookshelf",
                     "picture", "counter", "desk", "curtain", "refrigerator", "shower curtain", "toilet", "sink",
                     "bathtub", "otherfurniture")

LAYOUT = ("<root>/scans/<scene>/<scene>_vh_clean_2.ply + <scene>_vh_clean_2.labels.ply (NYU40 'label') with "
          "<root>/scannetv2_{train,val}.txt, or preprocessed <root>/{train,val}/<scene>/"
          "{coord,color,normal,segment20}.npy")

_LUT = np.full(256, IGNORE_INDEX, dtype=np.int64)
_LUT[list(NYU40_IDS)] = np.arange(len(NYU40_IDS))


def nyu40_to_scannet20(label: np.ndarray) -> np.ndarray:
    """NYU40 ids -> 0..19 for the benchmark classes, -1 for the rest (and for ids outside 0..255)."""
    label = np.asarray(label).astype(np.int64)
    ok = (label >= 0) & (label < 256)
    return np.where(ok, _LUT[np.clip(label, 0, 255)], IGNORE_INDEX)


def vertex_normals(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Unit, area-weighted vertex normals ``(V, 3)`` of a triangle mesh (zero for isolated vertices)."""
    n = np.zeros_like(vertices, dtype=np.float64)
    if len(faces):
        tri = vertices[faces].astype(np.float64)  # (F, 3, 3)
        fn = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])  # (F, 3), |.| = 2 x area
        for j in range(3):
            np.add.at(n, faces[:, j], fn)
    norm = np.linalg.norm(n, axis=1, keepdims=True)
    return (n / np.where(norm > 0, norm, 1.0)).astype(np.float32)


def read_scannet_ply(mesh_path: str, labels_path: str | None) -> dict[str, np.ndarray]:
    """``<scene>_vh_clean_2.ply`` (+ ``.labels.ply``) -> ``coord (V, 3)``, ``color (V, 3)`` uint8,
    ``normal (V, 3)``, ``segment20 (V,)`` (all -1 without a labels file). Raises ``ValueError`` on a
    malformed file (plyfile's parse errors included)."""
    try:
        mesh = PlyData.read(mesh_path)
        v = mesh["vertex"]
        coord = np.stack([v["x"], v["y"], v["z"]], 1).astype(np.float32)
        color = np.stack([v["red"], v["green"], v["blue"]], 1).astype(np.uint8)
        faces = np.zeros((0, 3), dtype=np.int64)
        if "face" in [e.name for e in mesh.elements]:
            raw = mesh["face"]["vertex_indices"]
            faces = np.stack([np.asarray(f, dtype=np.int64) for f in raw]) if len(raw) else faces
        if faces.size and (faces.shape[1] != 3 or faces.min() < 0 or faces.max() >= len(coord)):
            raise ValueError(f"{mesh_path}: faces are not triangles over the {len(coord)} vertices")
        segment = np.full(len(coord), IGNORE_INDEX, dtype=np.int64)
        if labels_path is not None:
            lab = PlyData.read(labels_path)["vertex"]
            if len(lab["label"]) != len(coord):
                raise ValueError(f"{labels_path}: {len(lab['label'])} labels for {len(coord)} mesh vertices")
            segment = nyu40_to_scannet20(lab["label"])
    except (PlyParseError, KeyError) as e:
        raise ValueError(f"{mesh_path}: {type(e).__name__}: {e}") from None
    if not np.isfinite(coord).all():
        raise ValueError(f"{mesh_path}: non-finite vertex coordinates")
    return {"coord": coord, "color": color, "normal": vertex_normals(coord, faces), "segment20": segment}


def _read_npy_scene(folder: str) -> dict[str, np.ndarray]:
    out = {k: np.load(os.path.join(folder, f"{k}.npy"), allow_pickle=False)
           for k in ("coord", "color", "segment20")}
    npath = os.path.join(folder, "normal.npy")
    out["normal"] = np.load(npath, allow_pickle=False) if os.path.isfile(npath) else None
    n = len(out["coord"])
    if out["coord"].ndim != 2 or out["coord"].shape[1] != 3 or out["color"].shape != (n, 3) \
            or out["segment20"].reshape(-1).shape != (n,) or (out["normal"] is not None and out["normal"].shape != (n, 3)):
        raise ValueError(f"{folder}: coord/color/normal/segment20 shapes disagree")
    if not np.isfinite(out["coord"]).all():
        raise ValueError(f"{folder}: non-finite coordinates")
    out["segment20"] = out["segment20"].reshape(-1).astype(np.int64)
    return out


class SceneFolderDataset(SkippingDataset):
    """Scenes (raw PLY pairs or preprocessed folders) -> ``(coord (M, 3), feat (M, F), target (M,))``."""

    def __init__(self, items: list[tuple[str, Any]], layout: str, train: bool, grid_size: float, max_points: int,
                 normals: bool, augment: bool, num_classes: int) -> None:
        super().__init__(None)
        self.collate_fn = scene_collate
        self.items, self.layout, self.train = items, layout, train
        self.grid_size, self.max_points, self.normals = grid_size, max_points, normals
        self.augment = SceneAugment("scene") if (augment and train) else None
        self.num_classes = num_classes

    def __len__(self) -> int:
        return len(self.items)

    def describe(self, index: int) -> str:
        return self.items[index][0]

    def read(self, index: int) -> dict[str, np.ndarray]:
        path, extra = self.items[index]
        return read_scannet_ply(path, extra) if self.layout == "raw" else _read_npy_scene(os.path.dirname(path))

    def load(self, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = self.read(index)
        seg = s["segment20"]
        if len(seg) == 0:
            raise ValueError(f"{self.describe(index)}: no points")
        if seg.max(initial=-1) >= self.num_classes or seg.min(initial=0) < IGNORE_INDEX:
            raise ValueError(f"{self.describe(index)}: labels outside -1..{self.num_classes - 1}")
        coord, normal = s["coord"].astype(np.float32), s["normal"]
        rng = None
        if self.train:  # drawn from torch's global RNG, which bench run seeds (reproducible order)
            rng = np.random.default_rng(int(torch.randint(0, 2 ** 62, ()).item()))
        if self.augment is not None:
            coord, normal = self.augment(coord, normal, rng)
        keep = grid_sample(coord, self.grid_size, train=self.train, rng=rng)
        keep = keep[crop_points(coord[keep], self.max_points, rng)]
        feat = [s["color"][keep].astype(np.float32) / 255.0]
        if self.normals:
            if normal is None:
                raise ValueError(f"{self.describe(index)}: no normal.npy (set --data-option normals=false)")
            feat.append(normal[keep].astype(np.float32))
        return coord[keep], np.concatenate(feat, 1), seg[keep]


@register_datamodule("scannet")
class ScanNetDataModule(BenchDataModule):
    """ScanNet v2 20-class semantic segmentation (see the module docstring)."""

    source = DataSource(
        publisher="ScanNet (Dai et al. 2017, ScanNet: Richly-annotated 3D Reconstructions of Indoor Scenes)",
        url="http://www.scan-net.org/",
        licence="the ScanNet Terms of Use, signed and emailed before download (not restated here)",
        size="1,513 scans (1,201 training, 312 validation), 20 benchmark classes",
        writer=("the download script sent after the agreement (``download-scannet.py --type _vh_clean_2.ply`` and "
                "``--type _vh_clean_2.labels.ply``), or Pointcept's preprocessing of it"),
    )
    modality: ClassVar[str] = "points"
    needs_data_root: ClassVar[bool] = True
    expected_layout: ClassVar[str] = LAYOUT
    default_task: ClassVar[str] = "segmentation"
    label_kind: ClassVar[str] = "point-labels"
    #: resolution = at most this many points per scene after grid sampling (Pointcept's point_max)
    default_resolution: ClassVar[int | str] = 102400
    ignore_index: ClassVar[int] = IGNORE_INDEX
    coord_unit: ClassVar[str] = "m"
    class_names: tuple[str, ...] = SCANNET20_CLASSES
    #: default voxel side of grid sampling, metres
    default_grid_size: ClassVar[float] = 0.02
    has_test_split: ClassVar[bool] = False
    #: points per patch token unless --task-option patch_size says otherwise (~1.5k tokens for 10^5 points)
    default_patch_size: ClassVar[int] = 64

    option_help: ClassVar[dict[str, str]] = {
        "grid_size": "voxel side of grid sampling in metres (None: the dataset's, 0.02 for ScanNet)",
        "normals": "append the unit normal (3) to the colour features",
        "augment": "Pointcept-default geometric augmentation of training scenes",
        "train_size": "use only the first N training scenes (None: all)",
        "val_size": "use only the first N validation scenes (None: all)",
    }

    def __init__(self, grid_size: float | None = None, normals: bool = True, augment: bool = True,
                 train_size: int | None = None, val_size: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.grid_size = float_option(self.name, "grid_size",
                                      self.default_grid_size if grid_size is None else grid_size)
        self.normals = bool_option(self.name, "normals", normals)
        self.augment = bool_option(self.name, "augment", augment)
        self.train_size = None if train_size is None else int_option(self.name, "train_size", train_size)
        self.val_size = None if val_size is None else int_option(self.name, "val_size", val_size)
        if len(self.resolution) != 1:
            raise ValueError(f"{self.name}: resolution is one number (points per scene), got {self.resolution}")
        if self.needs_data_root:
            self.data_root = os.path.expanduser(str(self.data_root))
            self.validate()

    # ---- layout -------------------------------------------------------------------------
    def validate(self) -> None:
        root = self.data_root
        if not os.path.isdir(root):
            raise DataRootError(f"{self.name}: data root {root!r} is not a directory; expected layout: {LAYOUT}")
        if os.path.isdir(os.path.join(root, "scans")):
            self.layout = "raw"
            for split in ("train", "val"):
                lst = os.path.join(root, f"scannetv2_{split}.txt")
                if not os.path.isfile(lst):
                    raise DataRootError(f"{self.name}: split list {lst!r} not found; expected layout: {LAYOUT}")
        elif os.path.isdir(os.path.join(root, "train")) and os.path.isdir(os.path.join(root, "val")):
            self.layout = "preprocessed"
        else:
            raise DataRootError(f"{self.name}: neither {os.path.join(root, 'scans')!r} nor "
                                f"{os.path.join(root, 'train')!r} and {os.path.join(root, 'val')!r} found; "
                                f"expected layout: {LAYOUT}")

    def _items(self, split: str) -> list[tuple[str, Any]]:
        root = self.data_root
        if self.layout == "raw":
            lst = os.path.join(root, f"scannetv2_{split}.txt")
            with open(lst) as fh:
                names = [ln.strip() for ln in fh if ln.strip()]
            items = [(os.path.join(root, "scans", n, f"{n}_vh_clean_2.ply"),
                      os.path.join(root, "scans", n, f"{n}_vh_clean_2.labels.ply")) for n in names]
            listed_in = lst
        else:
            folder = os.path.join(root, split)
            names = sorted(e.name for e in os.scandir(folder) if e.is_dir())
            if not names:
                raise DataRootError(f"{self.name}: no scene folders in {folder!r}; expected layout: {LAYOUT}")
            items = [(os.path.join(folder, n, "coord.npy"), None) for n in names]
            listed_in = folder
        limit = self.train_size if split == "train" else self.val_size
        items = items[:limit] if limit else items
        return self.drop_missing(items, split, listed_in)

    # ---- BenchDataModule ----------------------------------------------------------------
    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def feat_dim(self) -> int:
        return 3 + (3 if self.normals else 0)

    @property
    def in_chans(self) -> int:
        return self.feat_dim

    def input_shape(self, resolution: tuple[int, ...] | None = None) -> tuple[int, ...]:
        return ((resolution or self.resolution)[0], 3)

    def _dataset(self, split: str, resolution: tuple[int, ...] | None = None) -> SceneFolderDataset:
        cache = self.__dict__.setdefault("_item_cache", {})
        if split not in cache:
            cache[split] = self._items(split)
        return SceneFolderDataset(cache[split], self.layout, split == "train", self.grid_size,
                                  (resolution or self.resolution)[0], self.normals, self.augment, self.num_classes)

    def train_dataset(self) -> SceneFolderDataset:
        return self._dataset("train")

    def val_dataset(self, resolution: tuple[int, ...] | None = None) -> SceneFolderDataset:
        return self._dataset("val", resolution)

    def tokenizer_options(self) -> dict[str, Any]:
        """What the scene tokenizer needs from the data: voxel side (m) for serialization, default
        points per patch."""
        return {"grid_size": self.grid_size, "patch_size": self.default_patch_size}

"""ModelNet40 (40 classes of CAD meshes) as point clouds, read offline. Two layouts:

1. torch-geometric's: ``<root>/raw/<class>/{train,test}/<class>_NNNN.off`` (the official
   ``ModelNet40.zip`` extracted and renamed to ``raw/``), processed once by
   ``torch_geometric.datasets.ModelNet(root, name="40")`` into ``<root>/processed/`` (or, when the
   root is read-only, ``~/.cache/pebench/modelnet40/<hash>/processed``). :class:`OfflineModelNet`
   overrides ``raw_file_names`` (stock ModelNet checks the ModelNet10 class names even for "40")
   and ``download()`` (raises :class:`DataRootError`), so it never downloads. Points are sampled
   on the mesh faces, area-weighted (``torch_geometric.transforms.SamplePoints``), fresh each
   training epoch and with a per-index seed for evaluation (reproducible).
2. ``modelnet40_normal_resampled/``: ``<class>/<class>_NNNN.txt`` (10,000 comma-separated
   ``x,y,z,nx,ny,nz`` rows) + ``modelnet40_shape_names.txt``, ``modelnet40_{train,test}.txt``.
   Train takes a random subset of ``M`` points per epoch, eval the first ``M``.

Points ``(M, 3)`` are centred on their mean and scaled into the unit sphere. ``resolution`` is
``M`` (or ``"MxG"``: points x tokenizer groups). The Task reports overall accuracy; ``num_classes``
is exposed for mean class accuracy (macro).

Corrupt meshes: a truncated / malformed ``.off`` fails the vertex/face counts of its header; it is
left out at processing time and recorded in ``processed/pebench_corrupt.json``. The dataset keeps
one placeholder index per such file that yields ``None``, so it is skipped and counted in the
collate info like any corrupt sample of the other modalities (each epoch).
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
from typing import Any, ClassVar

import numpy as np
import torch

from ..base import BenchDataModule, DataRootError, DataSource
from ..corrupt import CORRUPT_ERRORS, SkippingDataset
from ..image_common import require_dir, require_file
from ..registry import register_datamodule

__all__ = ["ModelNet40DataModule", "OfflineModelNet", "normalise_unit_sphere", "check_off"]

LAYOUT = ("<root>/raw/<class>/{train,test}/<class>_NNNN.off (torch-geometric ModelNet) or "
          "<root>/modelnet40_normal_resampled/{modelnet40_shape_names.txt,modelnet40_{train,test}.txt,<class>/*.txt}")


def normalise_unit_sphere(pos: torch.Tensor) -> torch.Tensor:
    pos = pos - pos.mean(dim=0, keepdim=True)
    return pos / pos.norm(dim=1).max().clamp_min(1e-12)


def check_off(path: str, data) -> None:
    """Raise ValueError when the parsed mesh does not match its header (truncated file)."""
    with open(path) as f:
        head = f.readline().strip()
        counts = head[3:].split() if head != "OFF" else f.readline().split()
    nv, nf = int(counts[0]), int(counts[1])
    if data.pos.size(0) != nv or data.face is None or data.face.size(1) < nf or nv == 0:
        raise ValueError(f"{path}: header says {nv} vertices / {nf} faces, read {data.pos.size(0)} / "
                         f"{0 if data.face is None else data.face.size(1)}")
    if int(data.face.max()) >= nv or not torch.isfinite(data.pos).all():
        raise ValueError(f"{path}: face index out of range or non-finite vertex")


_CLS: type | None = None


def _offline_class() -> type:
    global _CLS
    if _CLS is None:
        from torch_geometric.datasets import ModelNet  # deferred: start-up time (torch_geometric, ~0.5 s)
        from torch_geometric.io import read_off  # deferred: start-up time (torch_geometric, ~0.5 s)

        class OfflineModelNet(ModelNet):
            """torch-geometric ModelNet reading ``raw/`` in place; never downloads; skips corrupt meshes."""

            def __init__(self, root: str, name: str = "40", train: bool = True, processed_root: str | None = None,
                         **kw: Any) -> None:
                self._processed_root = processed_root
                super().__init__(root, name=name, train=train, **kw)
                report = os.path.join(self.processed_dir, "pebench_corrupt.json")  # absent: processed by stock PyG
                self.corrupt: list[str] = []
                if os.path.isfile(report):
                    with open(report) as f:
                        self.corrupt = json.load(f)["train" if train else "test"]

            @property
            def raw_file_names(self) -> list[str]:
                d = self.raw_dir
                return sorted(e.name for e in os.scandir(d) if e.is_dir()) if os.path.isdir(d) else ["<classes>"]

            @property
            def processed_dir(self) -> str:
                return os.path.join(self._processed_root or self.root, "processed")

            def download(self) -> None:
                raise DataRootError(f"modelnet40: expected class folders in {self.raw_dir!r} (offline: no download); "
                                    f"expected layout: {LAYOUT}")

            def process(self) -> None:
                corrupt: dict[str, list[str]] = {}
                for i, split in enumerate(("train", "test")):
                    self.save(self._read_set(split, corrupt.setdefault(split, [])), self.processed_paths[i])
                with open(os.path.join(self.processed_dir, "pebench_corrupt.json"), "w") as f:
                    json.dump(corrupt, f)

            def _read_set(self, split: str, corrupt: list[str]) -> list:
                out = []
                categories = sorted(x.split(os.sep)[-2] for x in glob.glob(os.path.join(self.raw_dir, "*", "")))
                for target, category in enumerate(categories):
                    for path in sorted(glob.glob(os.path.join(self.raw_dir, category, split, f"{category}_*.off"))):
                        try:
                            data = read_off(path)
                            check_off(path, data)
                        except CORRUPT_ERRORS:
                            corrupt.append(path)
                            continue
                        data.y = torch.tensor([target])
                        out.append(data)
                return out

        OfflineModelNet.__module__ = __name__
        OfflineModelNet.__qualname__ = "OfflineModelNet"
        _CLS = OfflineModelNet
    return _CLS


def __getattr__(name: str) -> Any:
    if name == "OfflineModelNet":
        return _offline_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class PointCloudDataset(SkippingDataset):
    """Meshes (PyG dataset + corrupt placeholders) or point files -> ``(float (M, 3), label)``."""

    def __init__(self, items: Any, n_items: int, num_points: int, train: bool, seed: int, kind: str,
                 describe: list[str] | None = None) -> None:
        super().__init__((num_points, 3))
        self.items, self.n, self.m, self.train, self.seed, self.kind = items, n_items, num_points, train, seed, kind
        self.paths = describe or []

    def __len__(self) -> int:
        return self.n

    def describe(self, index: int) -> str:
        return self.paths[index] if index < len(self.paths) else f"modelnet40 sample {index}"

    def load(self, index: int):
        if self.kind == "mesh":
            pyg = self.items
            if index >= len(pyg):
                raise ValueError(f"corrupt mesh {pyg.corrupt[index - len(pyg)]}")
            data = pyg[index]
            from torch_geometric.transforms import SamplePoints  # deferred: start-up time (torch_geometric, ~0.5 s)

            with torch.random.fork_rng(devices=[], enabled=not self.train):
                if not self.train:  # reproducible evaluation points, one stream per index
                    torch.manual_seed(self.seed * 1_000_003 + index)
                pos = SamplePoints(self.m)(data.clone()).pos
            return normalise_unit_sphere(pos.float()), int(data.y)
        path, label = self.items[index]
        arr = np.loadtxt(path, delimiter=",", dtype=np.float32, ndmin=2)
        if arr.shape[1] < 3 or len(arr) == 0:
            raise ValueError(f"{path}: expected rows of x,y,z[,nx,ny,nz]")
        pts = torch.from_numpy(arr[:, :3])
        if self.train:
            idx = torch.randperm(len(pts))[: self.m] if len(pts) >= self.m else torch.randint(len(pts), (self.m,))
        else:
            idx = torch.arange(self.m) % len(pts)
        return normalise_unit_sphere(pts[idx]), label


@register_datamodule("modelnet40")
class ModelNet40DataModule(BenchDataModule):
    source = DataSource(
        publisher="Princeton ModelNet (Wu et al. 2015, 3D ShapeNets)",
        url="https://modelnet.cs.princeton.edu/",
        licence=("provided for the convenience of academic research only; the CAD models' original authors hold "
                 "their copyright; the labels are provided freely (as the page states)"),
        size="ModelNet40.zip; 12,311 CAD models (9,843 training, 2,468 test), 40 classes",
        writer=("``torch_geometric.datasets.ModelNet(root, name='40')`` (downloads ModelNet40.zip, unpacks it as "
                "``<root>/raw/`` and writes ``<root>/processed/``)"),
    )
    modality: ClassVar[str] = "points"
    in_chans: ClassVar[int] = 3  # coordinates
    needs_data_root: ClassVar[bool] = True
    expected_layout: ClassVar[str] = LAYOUT
    default_resolution: ClassVar[int | str] = 1024
    num_groups: ClassVar[int] = 64

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.data_root = os.path.expanduser(str(self.data_root))
        self._pyg: dict[bool, Any] = {}
        self.validate()

    def validate(self) -> None:
        root = require_dir(self.data_root, self.name, LAYOUT)
        resampled = os.path.join(root, "modelnet40_normal_resampled")
        if os.path.isdir(os.path.join(root, "raw")):
            self.layout = "mesh"
            raw = os.path.join(root, "raw")
            self.classes = sorted(e.name for e in os.scandir(raw) if e.is_dir())
            if not self.classes or not os.path.isdir(os.path.join(raw, self.classes[0], "train")):
                raise DataRootError(f"modelnet40: no <class>/train folders in {raw!r}; expected layout: {LAYOUT}")
        elif os.path.isdir(resampled) or os.path.isfile(os.path.join(root, "modelnet40_shape_names.txt")):
            self.layout = "resampled"
            self.folder = resampled if os.path.isdir(resampled) else root
            for f in ("modelnet40_shape_names.txt", "modelnet40_train.txt", "modelnet40_test.txt"):
                require_file(os.path.join(self.folder, f), self.name, LAYOUT)
            with open(os.path.join(self.folder, "modelnet40_shape_names.txt")) as fh:
                self.classes = [ln.strip() for ln in fh if ln.strip()]
        else:
            raise DataRootError(f"modelnet40: neither {os.path.join(root, 'raw')!r} nor {resampled!r} found; "
                                f"expected layout: {LAYOUT}")

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def points_and_groups(self, resolution: tuple[int, ...] | None = None) -> tuple[int, int]:
        res = resolution or self.resolution
        return (res[0], self.num_groups) if len(res) == 1 else (res[0], res[1])

    def input_shape(self, resolution: tuple[int, ...] | None = None) -> tuple[int, ...]:
        return (self.points_and_groups(resolution)[0], 3)

    def processed_root(self) -> str | None:
        """``None`` (= ``<root>/processed``) when the root is writable, else a per-root user cache."""
        if os.access(self.data_root, os.W_OK):
            return None
        h = hashlib.sha1(os.path.abspath(self.data_root).encode()).hexdigest()[:12]
        return os.path.join(os.path.expanduser("~/.cache/pebench/modelnet40"), h)

    def pyg_dataset(self, train: bool):
        if train not in self._pyg:
            self._pyg[train] = _offline_class()(self.data_root, name="40", train=train,
                                                processed_root=self.processed_root())
        return self._pyg[train]

    def _resampled_items(self, split: str) -> list[tuple[str, int]]:
        lst = os.path.join(self.folder, f"modelnet40_{split}.txt")
        idx = {c: i for i, c in enumerate(self.classes)}
        out = []
        with open(lst) as fh:
            for ln in fh:
                shape = ln.strip()
                if shape:
                    cls = shape.rsplit("_", 1)[0]
                    if cls not in idx:
                        raise DataRootError(f"modelnet40: {lst!r} names class {cls!r} not in modelnet40_shape_names.txt")
                    out.append((os.path.join(self.folder, cls, f"{shape}.txt"), idx[cls]))
        return self.drop_missing(out, split, lst)  # listed shapes without a file: counted as "missing"

    def _dataset(self, train: bool, resolution: tuple[int, ...] | None = None):
        m = self.points_and_groups(resolution)[0]
        if self.layout == "mesh":
            pyg = self.pyg_dataset(train)
            return PointCloudDataset(pyg, len(pyg) + len(pyg.corrupt), m, train, self.seed, "mesh",
                                     describe=[""] * len(pyg) + list(pyg.corrupt))
        items = self._resampled_items("train" if train else "test")
        return PointCloudDataset(items, len(items), m, train, self.seed, "txt", describe=[p for p, _ in items])

    def train_dataset(self):
        return self._dataset(True)

    def val_dataset(self, resolution: tuple[int, ...] | None = None):
        return self._dataset(False, resolution)

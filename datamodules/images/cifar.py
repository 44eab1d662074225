"""CIFAR-100, read offline from the official python pickles.

Layout: ``<root>/cifar-100-python/{train,test,meta}`` (or ``<root>`` being that folder).

Own reader instead of ``torchvision.datasets.CIFAR100``: torchvision refuses files whose md5 differs
from the official archive's, which rules out test fixtures and re-packed copies, and it unpickles with a
plain ``pickle.load``. Here the md5 is *checked, not required*: when a file's md5 matches the official one
it is recorded as verified (``verified[name] = True``); otherwise a warning is logged and the file is
still read, always through :class:`CIFARUnpickler`, which admits only the three numpy globals the official
files reference, so no file can run code (labels come from ``fine_labels``, classes from
``meta['fine_label_names']``, exactly as torchvision parses them).
An unreadable pickle is a broken data root (``DataRootError``), not a per-sample corruption.

Resolution: native 32 px with patch 4 (an 8x8 token grid), the usual small-image ViT setting.
The SSDC/EED-style ViT-S/16 at 224 px runs with ``--resolution 224`` only with a patch-16 model
(upsampling 32 -> 224 is what those studies do); ``patch_size`` here stays 4 for the native grid.
Eval images are resized to the resolution (no crop); train uses RandomResizedCrop(scale 0.35-1) +
flip, ImageNet mean/std like every image set in pebench.
"""
from __future__ import annotations

import hashlib
import logging
import os
import pickle
from typing import Any, Callable

import numpy as np
import torch
from PIL import Image

from ..base import DataRootError, DataSource
from ..corrupt import SkippingDataset
from ..image_common import ImageDataModule, eval_transform, image_hw, require_dir, require_file, train_transform
from ..registry import register_datamodule

__all__ = ["CIFAR100DataModule", "CIFAR100_MD5", "CIFARUnpickler", "read_cifar_pickle"]

log = logging.getLogger(__name__)

#: md5 of the official files (as in torchvision.datasets.CIFAR100)
CIFAR100_MD5 = {"train": "16019d7e3df5f24257cddd939b257f8d", "test": "f0ef6b0ae62326f3e7ffdfab6717acfc",
                "meta": "7973b15100ade9c7d40fb424638fde48"}


def _md5(path: str) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _numpy_reconstruct() -> Callable[..., Any]:
    """numpy's array unpickling helper, wherever this numpy keeps it (``numpy._core`` from numpy 2 on)."""
    core = getattr(np, "_core", None)
    multiarray = getattr(core, "multiarray", None) if core is not None else None
    if multiarray is None or not hasattr(multiarray, "_reconstruct"):
        multiarray = np.core.multiarray  # numpy 1.x
    return multiarray._reconstruct


class CIFARUnpickler(pickle.Unpickler):
    """An unpickler that admits only the globals the official CIFAR files reference, so a planted file cannot
    run code (a plain ``pickle.load`` calls whatever a file names).

    The official ``cifar-100-python/{train,test,meta}`` are Python 2 ``cPickle`` files (protocol 2) of a dict of
    lists, strings and one numpy array; their only globals are ``numpy.core.multiarray._reconstruct``,
    ``numpy.ndarray`` and ``numpy.dtype`` (the array's reduce). Those three (and ``numpy._core.multiarray``'s
    name for the first, which numpy 2 may write) are resolved here to numpy's own objects; every other global
    raises ``pickle.UnpicklingError`` naming it. None of the three can call anything else: ``_reconstruct``
    builds an empty array of an admitted class, ``dtype`` parses a type code, and the array's state is data.
    """

    ALLOWED = frozenset({("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                         ("numpy", "ndarray"), ("numpy", "dtype")})

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"global {module}.{name} refused (the official CIFAR files hold only "
                                         f"numpy arrays, lists, strings and numbers)")
        if name == "_reconstruct":
            return _numpy_reconstruct()
        return np.ndarray if name == "ndarray" else np.dtype


def read_cifar_pickle(path: str) -> dict[str, Any]:
    """One official CIFAR pickle as a dict, through :class:`CIFARUnpickler` (no code runs, whatever the file)."""
    with open(path, "rb") as f:
        obj = CIFARUnpickler(f, encoding="latin1").load()
    if not isinstance(obj, dict):
        raise pickle.UnpicklingError(f"expected a dict, got {type(obj).__name__}")
    return obj


class CIFARArrayDataset(SkippingDataset):
    """HWC uint8 array + labels -> ``(float (3, H, W), label)``."""

    def __init__(self, data: np.ndarray, targets: list[int], transform: Callable, hw: tuple[int, int]) -> None:
        super().__init__((3, *hw))
        self.data, self.targets, self.transform = data, targets, transform

    def __len__(self) -> int:
        return len(self.targets)

    def load(self, index: int) -> tuple[torch.Tensor, int]:
        return self.transform(Image.fromarray(self.data[index])), int(self.targets[index])


@register_datamodule("cifar100")
class CIFAR100DataModule(ImageDataModule):
    source = DataSource(
        publisher=("Alex Krizhevsky, University of Toronto (Krizhevsky 2009, Learning Multiple Layers of Features "
                   "from Tiny Images)"),
        url="https://www.cs.toronto.edu/~kriz/cifar.html",
        licence="not stated (the page asks users to cite the 2009 report)",
        size="cifar-100-python.tar.gz (161 MB); 50,000 training and 10,000 test images of 32 x 32 px, 100 classes",
        writer=("``torchvision.datasets.CIFAR100(root, download=True)`` (downloads and unpacks "
                "``<root>/cifar-100-python/``)"),
    )
    expected_layout = "<root>/cifar-100-python/{train,test,meta} (the official python pickles)"
    n_classes = 100
    default_resolution = 32
    patch_size = 4
    rrc_scale = (0.35, 1.0)
    crop_ratio = 1.0

    def validate(self) -> None:
        require_dir(self.data_root, self.name, self.expected_layout)
        inner = os.path.join(self.data_root, "cifar-100-python")
        self.folder = inner if os.path.isdir(inner) else self.data_root
        for name in ("train", "test", "meta"):
            require_file(os.path.join(self.folder, name), self.name, self.expected_layout)
        self.verified: dict[str, bool] = {}
        self._arrays: dict[str, tuple[np.ndarray, list[int]]] = {}

    def _read(self, name: str) -> dict[str, Any]:
        path = os.path.join(self.folder, name)
        ok = _md5(path) == CIFAR100_MD5[name]
        self.verified[name] = ok
        if not ok:
            log.warning("cifar100: %s does not match the official md5 (not the original file?); reading its arrays through "
                        "the restricted unpickler",
                        path)
        try:
            return read_cifar_pickle(path)
        except Exception as e:  # noqa: BLE001 - any unpickling failure means a broken root
            raise DataRootError(f"cifar100: cannot read {path!r} ({type(e).__name__}: {e}); "
                                f"expected layout: {self.expected_layout}") from None

    @property
    def classes(self) -> list[str]:
        return list(self._read("meta")["fine_label_names"])

    def arrays(self, name: str) -> tuple[np.ndarray, list[int]]:
        """``name`` in {"train", "test"} -> (N, 32, 32, 3) uint8 images, fine labels."""
        if name not in self._arrays:
            entry = self._read(name)
            data = np.asarray(entry["data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
            targets = [int(t) for t in entry["fine_labels"]]
            if len(targets) != len(data):
                raise DataRootError(f"cifar100: {name} has {len(data)} images but {len(targets)} labels")
            self._arrays[name] = (np.ascontiguousarray(data), targets)
        return self._arrays[name]

    def make_dataset(self, split: str, train: bool, resolution: tuple[int, ...] | None = None):
        hw = image_hw(resolution or self.resolution)
        mean, std = self.normalisation()
        tf = train_transform(hw, self.rrc_scale, mean, std) if train else eval_transform(hw, self.crop_ratio, mean, std)
        data, targets = self.arrays("train" if split == "train" else "test")
        return CIFARArrayDataset(data, targets, tf, hw)

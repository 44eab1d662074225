"""Shared pieces of the real image datasets: transforms, a skip-corrupt image list, a base module.

Input normalisation (all image datasets): float ``(3, H, W)``, standardised with the datamodule's
declared ``mean`` / ``std`` (ImageNet's, :class:`ImageDataModule`).

* train: ``RandomResizedCrop(size, scale=rrc_scale)`` + horizontal flip (torchvision.transforms.v2)
* eval:  ``Resize(short side = size / crop_ratio)`` + ``CenterCrop(size)`` (crop_ratio 0.875 is the
  usual 224/256; datasets whose images are already tightly framed use 1.0; for ``"HxW"`` the
  short side is resized to ``max(H, W) / crop_ratio``)

``resolution`` is the side length ``S`` (or ``"HxW"``); every PIL image is converted to RGB first
(Tiny ImageNet and ImageNet contain grayscale / CMYK JPEGs).
"""
from __future__ import annotations

import abc
import os
from functools import lru_cache
from typing import Any, Callable, ClassVar, Sequence

import torch
import torchvision.transforms.v2 as v2
from PIL import Image
from timm.data import ImageNetInfo

from .base import BenchDataModule, DataRootError
from .corrupt import SkippingDataset

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "image_hw", "train_transform", "eval_transform", "pil_rgb",
           "ImageListDataset", "ImageDataModule", "imagenet_wnids", "require_dir", "require_file",
           "IMG_EXTENSIONS"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


@lru_cache(maxsize=1)
def imagenet_wnids() -> tuple[str, ...]:
    """The 1000 ImageNet-1K synsets in class-index order (sorted wnids), from timm's bundled list."""
    names = tuple(ImageNetInfo().label_names())
    assert len(names) == 1000 and list(names) == sorted(names)
    return names


def require_dir(path: str, what: str, layout: str) -> str:
    if not os.path.isdir(path):
        raise DataRootError(f"{what}: expected directory {path!r} not found; expected layout: {layout}")
    return path


def require_file(path: str, what: str, layout: str) -> str:
    if not os.path.isfile(path):
        raise DataRootError(f"{what}: expected file {path!r} not found; expected layout: {layout}")
    return path


def image_hw(resolution: Sequence[int]) -> tuple[int, int]:
    return (resolution[0], resolution[0]) if len(resolution) == 1 else (resolution[0], resolution[1])


def _to_float_normalised(mean: Sequence[float], std: Sequence[float]) -> list:
    return [v2.ToDtype(torch.float32, scale=True), v2.Normalize(mean, std)]


def train_transform(hw: tuple[int, int], scale: tuple[float, float] = (0.08, 1.0),
                    mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD) -> Callable:
    return v2.Compose([v2.ToImage(), v2.RandomResizedCrop(hw, scale=scale, antialias=True),
                       v2.RandomHorizontalFlip(), *_to_float_normalised(mean, std)])


def eval_transform(hw: tuple[int, int], crop_ratio: float = 0.875, mean: Sequence[float] = IMAGENET_MEAN,
                   std: Sequence[float] = IMAGENET_STD) -> Callable:
    short = int(round(max(hw) / crop_ratio))  # max: a non-square crop never needs padding
    return v2.Compose([v2.ToImage(), v2.Resize(short, antialias=True), v2.CenterCrop(hw),
                       *_to_float_normalised(mean, std)])


def pil_rgb(path: str) -> Image.Image:
    """Decode fully (so truncated files raise here, inside the skip-corrupt guard) and convert to RGB."""
    with open(path, "rb") as f:
        img = Image.open(f)
        img.load()
        return img.convert("RGB")


class ImageListDataset(SkippingDataset):
    """``(path, label)`` list -> ``(float (3, H, W), label)``; corrupt files -> ``None``."""

    def __init__(self, samples: Sequence[tuple[str, int]], transform: Callable, hw: tuple[int, int]) -> None:
        super().__init__((3, *hw))
        self.samples = list(samples)
        self.targets = [t for _, t in self.samples]
        self.transform = transform

    def __len__(self) -> int:
        return len(self.samples)

    def describe(self, index: int) -> str:
        return self.samples[index][0]

    def load(self, index: int) -> tuple[torch.Tensor, int]:
        path, target = self.samples[index]
        return self.transform(pil_rgb(path)), target


class ImageDataModule(BenchDataModule):
    """Base of the real image datasets: subclasses implement :meth:`validate` and ``scan`` (see below)."""

    modality: ClassVar[str] = "image"
    in_chans: ClassVar[int] = 3  # every image is converted to RGB (pil_rgb)
    mean: ClassVar[tuple[float, ...]] = IMAGENET_MEAN
    std: ClassVar[tuple[float, ...]] = IMAGENET_STD
    needs_data_root: ClassVar[bool] = True
    default_resolution: ClassVar[int | str] = 224
    patch_size: ClassVar[int] = 16
    n_classes: ClassVar[int] = 0
    rrc_scale: ClassVar[tuple[float, float]] = (0.08, 1.0)
    crop_ratio: ClassVar[float] = 0.875

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.data_root = os.path.expanduser(str(self.data_root))
        self._samples: dict[str, list[tuple[str, int]]] = {}
        self.validate()

    # ---- subclass API -----------------------------------------------------------------
    # File-list datasets also define ``scan(split) -> [(path, label), ...]`` ("train", "val" or
    # "test"), which :meth:`samples` reads; array-backed ones (CIFAR-100) override the datasets
    # instead and have no file list.
    @abc.abstractmethod
    def validate(self) -> None:
        """Cheap existence checks of the layout; raise DataRootError (one line) on failure."""

    # ---- BenchDataModule --------------------------------------------------------------
    @property
    def num_classes(self) -> int:
        return self.n_classes

    def input_shape(self, resolution: tuple[int, ...] | None = None) -> tuple[int, ...]:
        return (self.in_chans, *image_hw(resolution or self.resolution))

    def samples(self, split: str) -> list[tuple[str, int]]:
        if split not in self._samples:
            found = self.scan(split)
            if not found:
                raise DataRootError(f"{self.name}: no images found for split {split!r} under {self.data_root!r}; "
                                    f"expected layout: {self.expected_layout}")
            self._samples[split] = found
        return self._samples[split]

    def make_dataset(self, split: str, train: bool, resolution: tuple[int, ...] | None = None):
        hw = image_hw(resolution or self.resolution)
        mean, std = self.normalisation()
        tf = train_transform(hw, self.rrc_scale, mean, std) if train else eval_transform(hw, self.crop_ratio, mean, std)
        return ImageListDataset(self.samples(split), tf, hw)

    def train_dataset(self):
        return self.make_dataset("train", train=True)

    def val_dataset(self, resolution: tuple[int, ...] | None = None):
        return self.make_dataset("val", train=False, resolution=resolution)

"""Tiny ImageNet (200 classes, 64 px), read offline.

Layout: ``<root>/tiny-imagenet-200/`` (or ``<root>`` being that folder) with ``wnids.txt``,
``train/<wnid>/images/*.JPEG`` and ``val/images/*.JPEG`` + ``val/val_annotations.txt``
(tab-separated: file, wnid, box). The official ``test/`` split has no labels; ``val`` is the
evaluation split (the usual protocol). Labels: position of the wnid in the *sorted* ``wnids.txt``
(the order ``ImageFolder`` gives ``train/``). Validation images named in ``val_annotations.txt`` that
do not exist are dropped and counted as ``missing`` (``base.py``). Some images are grayscale: every
image is converted to RGB.

Resolution: the SSDC/EED ViT-S/16 setting, 64 px images upsampled to 224 (patch 16). Eval:
resize + centre crop with ratio 1.0 (the images are already tight 64x64 crops).
"""
from __future__ import annotations

import os

from ..base import DataRootError, DataSource
from ..image_common import ImageDataModule, require_dir, require_file
from ..registry import register_datamodule

__all__ = ["TinyImageNetDataModule"]


@register_datamodule("tiny-imagenet")
class TinyImageNetDataModule(ImageDataModule):
    source = DataSource(
        publisher="Stanford CS231n (Le and Yang 2015, Tiny ImageNet Visual Recognition Challenge)",
        url="http://cs231n.stanford.edu/tiny-imagenet-200.zip",
        licence="not stated on any publisher page we could read (the canonical url is the archive itself)",
        size=("tiny-imagenet-200.zip (248,100,043 bytes, about 248 MB); 100,000 training, 10,000 validation and "
              "10,000 unlabelled test images of 64 x 64 px, 200 classes"),
        writer="none: unzip into the root",
    )
    expected_layout = ("<root>/tiny-imagenet-200/{wnids.txt, train/<wnid>/images/*.JPEG, val/images/*.JPEG, "
                       "val/val_annotations.txt}")
    n_classes = 200
    default_resolution = 224
    patch_size = 16
    rrc_scale = (0.35, 1.0)
    crop_ratio = 1.0

    def validate(self) -> None:
        require_dir(self.data_root, self.name, self.expected_layout)
        inner = os.path.join(self.data_root, "tiny-imagenet-200")
        self.folder = inner if os.path.isdir(inner) else self.data_root
        f = self.folder
        require_file(os.path.join(f, "wnids.txt"), self.name, self.expected_layout)
        require_dir(os.path.join(f, "train"), self.name, self.expected_layout)
        require_dir(os.path.join(f, "val", "images"), self.name, self.expected_layout)
        require_file(os.path.join(f, "val", "val_annotations.txt"), self.name, self.expected_layout)
        with open(os.path.join(f, "wnids.txt")) as fh:
            wnids = sorted({ln.strip() for ln in fh if ln.strip()})
        if not wnids:
            raise DataRootError(f"{self.name}: {os.path.join(f, 'wnids.txt')!r} is empty; "
                                f"expected layout: {self.expected_layout}")
        self.wnids = wnids
        self.class_to_idx = {w: i for i, w in enumerate(wnids)}

    def scan(self, split: str) -> list[tuple[str, int]]:
        if split == "train":
            out = []
            for w in self.wnids:
                d = os.path.join(self.folder, "train", w, "images")
                if os.path.isdir(d):
                    out += [(os.path.join(d, n), self.class_to_idx[w]) for n in sorted(os.listdir(d))
                            if n.lower().endswith((".jpeg", ".jpg", ".png"))]
            return out
        ann = os.path.join(self.folder, "val", "val_annotations.txt")
        out = []
        with open(ann) as fh:
            for ln in fh:
                parts = ln.rstrip("\n").split("\t")
                if len(parts) < 2 or not parts[0]:
                    continue
                if parts[1] not in self.class_to_idx:
                    raise DataRootError(f"{self.name}: {ann!r} names wnid {parts[1]!r} missing from wnids.txt")
                out.append((os.path.join(self.folder, "val", "images", parts[0]), self.class_to_idx[parts[1]]))
        return self.drop_missing(sorted(out), split, ann)

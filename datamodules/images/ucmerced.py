"""UC Merced Land Use (21 classes, 256x256 aerial RGB TIFFs), read offline.

Layout: ``<root>/UCMerced_LandUse/Images/<class>/<class>NN.tif`` (``<root>`` may also be the
``UCMerced_LandUse`` folder). Labels: position of the class folder in sorted order.

Splits: when ``uc_merced-train.txt``, ``uc_merced-val.txt`` and ``uc_merced-test.txt`` exist (in
``<root>`` or next to ``Images/``; one file name per line, as distributed with torchgeo / TFDS) they
define the splits; if only some of them exist that is a broken root (``DataRootError``). With
none, a stratified split 60/20/20 per class is drawn with ``split_seed`` (default 0, independent
of the run's seed so every run sees the same split).

A few images are not 256x256 (e.g. 256x247): eval resizes the short side to the resolution and
centre-crops (ratio 1.0). ViT-S/16 at 224 px as in the SSDC/EED studies.
"""
from __future__ import annotations

import os
import random
from typing import Any

from ..base import DataRootError, DataSource
from ..image_common import IMG_EXTENSIONS, ImageDataModule, require_dir
from ..registry import register_datamodule

__all__ = ["UCMercedDataModule"]

SPLIT_FILES = {s: f"uc_merced-{s}.txt" for s in ("train", "val", "test")}


@register_datamodule("ucmerced")
class UCMercedDataModule(ImageDataModule):
    source = DataSource(
        publisher="Yi Yang and Shawn Newsam, UC Merced (Yang and Newsam 2010)",
        url="http://weegee.vision.ucmerced.edu/datasets/landuse.html",
        licence=("not stated (the images are extracted from the USGS National Map Urban Area Imagery collection, "
                 "described as public domain imagery)"),
        size=("UCMerced_LandUse.zip (332 MB, i.e. 317 MiB); 2,100 images, 256 x 256 px but for 44, 21 classes of "
              "100"),
        writer="none: unzip into the root",
    )
    expected_layout = ("<root>/UCMerced_LandUse/Images/<21 classes>/*.tif (+ optional "
                       "uc_merced-{train,val,test}.txt split files)")
    n_classes = 21
    default_resolution = 224
    patch_size = 16
    rrc_scale = (0.35, 1.0)
    crop_ratio = 1.0

    def __init__(self, split_seed: int = 0, split_fractions: tuple[float, float] = (0.6, 0.2), **kwargs: Any) -> None:
        self.split_seed = split_seed
        self.split_fractions = tuple(split_fractions)
        super().__init__(**kwargs)

    def validate(self) -> None:
        require_dir(self.data_root, self.name, self.expected_layout)
        inner = os.path.join(self.data_root, "UCMerced_LandUse")
        self.folder = inner if os.path.isdir(inner) else self.data_root
        images = require_dir(os.path.join(self.folder, "Images"), self.name, self.expected_layout)
        self.classes = sorted(e.name for e in os.scandir(images) if e.is_dir())
        if not self.classes:
            raise DataRootError(f"{self.name}: no class folders in {images!r}; expected layout: {self.expected_layout}")
        self.split_paths: dict[str, str] = {}
        for split, fname in SPLIT_FILES.items():
            for d in (self.data_root, self.folder):
                if os.path.isfile(os.path.join(d, fname)):
                    self.split_paths[split] = os.path.join(d, fname)
                    break
        if self.split_paths and len(self.split_paths) != len(SPLIT_FILES):
            missing = [SPLIT_FILES[s] for s in SPLIT_FILES if s not in self.split_paths]
            raise DataRootError(f"{self.name}: split file {os.path.join(self.data_root, missing[0])!r} missing "
                                f"(found {sorted(os.path.basename(p) for p in self.split_paths.values())}); "
                                f"expected layout: {self.expected_layout}")

    def _all(self) -> dict[str, tuple[str, int]]:
        """file name -> (path, label) over all class folders (2100 files: a cheap scan)."""
        out = {}
        for label, c in enumerate(self.classes):
            d = os.path.join(self.folder, "Images", c)
            for n in sorted(os.listdir(d)):
                if n.lower().endswith(IMG_EXTENSIONS):
                    out[n] = (os.path.join(d, n), label)
        return out

    def scan(self, split: str) -> list[tuple[str, int]]:
        everything = self._all()
        if self.split_paths:
            out = []
            with open(self.split_paths[split]) as fh:
                for ln in fh:
                    name = ln.strip()
                    if not name:
                        continue
                    if name not in everything:
                        raise DataRootError(f"{self.name}: {self.split_paths[split]!r} lists {name!r}, not found "
                                            f"under {os.path.join(self.folder, 'Images')!r}")
                    out.append(everything[name])
            return out
        return self.stratified_split(everything)[split]

    def stratified_split(self, everything: dict[str, tuple[str, int]]) -> dict[str, list[tuple[str, int]]]:
        rng = random.Random(self.split_seed)
        per_class: dict[int, list[tuple[str, int]]] = {}
        for name in sorted(everything):
            per_class.setdefault(everything[name][1], []).append(everything[name])
        splits: dict[str, list[tuple[str, int]]] = {"train": [], "val": [], "test": []}
        f_train, f_val = self.split_fractions
        for label in sorted(per_class):
            items = per_class[label]
            rng.shuffle(items)
            n_train, n_val = round(len(items) * f_train), round(len(items) * f_val)
            splits["train"] += items[:n_train]
            splits["val"] += items[n_train:n_train + n_val]
            splits["test"] += items[n_train + n_val:]
        return {k: sorted(v) for k, v in splits.items()}

    def test_dataset(self, resolution: tuple[int, ...] | None = None):
        return self.make_dataset("test", train=False, resolution=resolution)

"""``photos``: square crops of real photographs shipped by installed packages, for analysis-only runs.

No download, no data set to fetch: the photographs come from packages (each a *source*):

===========  ================================================  ==============================================
source       where                                             images (licence)
===========  ================================================  ==============================================
``skimage``  scikit-image's bundled ``skimage/data/`` (an      astronaut (NASA, public domain), camera (CC0,
             optional dependency, in the ``test`` extra; only  L. Varshney), chelsea (CC0, S. van der Walt),
             its files are read, it is not imported)           coffee (CC0, R. Michetti), coins (Brooklyn
                                                               Museum, no known restrictions), hubble_deep_field
                                                               (NASA, public domain), rocket (SpaceX, public
                                                               domain), retina (CC0, M. Häggström), brick,
                                                               grass, gravel (CC0 textures), clock_motion
                                                               (public domain, S. van der Walt)
``mpl``      matplotlib's ``mpl-data/sample_data`` (a          grace_hopper (U.S. Navy photograph, public
             dependency of pebench)                            domain)
``lomiri``   ``--data-root`` (default ``/usr/share/            13 photographs of the Debian package
             backgrounds``, where Debian's                     ``lomiri-wallpapers-16.04`` (CC-BY-4.0,
             ``lomiri-wallpapers-16.04`` installs them)        CC-BY-SA-4.0 or CC0-1.0, per file in the
                                                               package's ``copyright``; docs/datasets.md)
===========  ================================================  ==============================================

The licences are those stated by each package (scikit-image's ``skimage.data`` docstrings, the Debian
package's ``copyright`` file). Images that are not photographs (logos, renders, gradients, scans of text,
microscope phase images) are left out.

``sources="auto"`` (default) uses every source that is installed, in the table's order; a list
(``"skimage,mpl"``) names the sources, and a named source that is not installed is a
:class:`DataRootError` (one line, exit 2) saying which package to install.

Samples: ``train_per_image`` (default 16) and ``val_per_image`` (default 4) square crops of every image;
the label is the image's index in the catalogue (:attr:`PhotosDataModule.images`), so ``num_classes`` is
the number of images and the set is classification-shaped (the probes and analyses of ``bench analyze``
read it). A crop's box is drawn once, from ``numpy.random.default_rng([seed, split])``: side = ``U(0.3,
1)`` x the image's short side, position uniform; the boxes are stored in the image's own coordinates
(fractions of its width and height), so they do not depend on ``--resolution`` and the same seed gives
the same crops everywhere. ``--resolution S`` resamples the box to ``S x S`` (bilinear, antialiased):
any resolution, the same content (what the extrapolation analysis needs). No random augmentation: train
and val are both fixed sets of crops. Inputs are RGB (grayscale photographs are repeated over three
channels), standardised with ImageNet's mean / std (the pretrained timm models' statistics).

Decoding: each photograph is decoded once per process, downscaled so its long side is at most
``max_side`` (default 1024; JPEG draft mode, then antialiased resize) and kept in memory; an image that
cannot be decoded is skipped and counted as corrupt (``corrupt.py``). Geometry: 224 px, patch 16.
"""
from __future__ import annotations

import functools
import importlib.util
import os
from typing import Any, ClassVar

import numpy as np
import torch
import torchvision.transforms.v2 as v2
import torchvision.transforms.v2.functional as TF
from PIL import Image

from ..base import DataRootError, DataSource, int_option
from ..corrupt import SkippingDataset
from ..image_common import IMAGENET_MEAN, IMAGENET_STD, ImageDataModule, image_hw
from ..registry import register_datamodule

__all__ = ["PhotosDataModule", "PhotoCropDataset", "SOURCES", "source_dir"]

#: source -> (what provides it, the photographs in it)
SOURCES: dict[str, tuple[str, tuple[str, ...]]] = {
    "skimage": ("the Python package scikit-image (pip install scikit-image)",
                ("astronaut.png", "camera.png", "chelsea.png", "coffee.png", "coins.png", "hubble_deep_field.jpg",
                 "rocket.jpg", "retina.jpg", "brick.png", "grass.png", "gravel.png", "clock_motion.png")),
    "mpl": ("the Python package matplotlib", ("grace_hopper.jpg",)),
    "lomiri": ("the Debian package lomiri-wallpapers-16.04 (apt-get install lomiri-wallpapers-16.04), or "
               "--data-root naming a folder with its files",
               ("Bridge_by_Sander_Klootwijk.jpg", "Dragonfly_by_Bolly.jpg", "Picture_0B_by_freespace.jpg",
                "Picture_1A_by_freespace.jpg", "Wine_by_Jakkub_Mede.jpg", "aitzgorri_by_Aitzol_Berasategi.jpg",
                "free_by_Peter_Nerlich.jpg", "friends_by_Aitzol_Berasategi.jpg", "greentock_by_Peter_Nerlich.jpg",
                "life_by_Aitzol_Berasategi.jpg", "picosdeeuropa_by_Aitzol_Berasategi.jpg",
                "seeding_by_Clements_Engelhardt.jpg", "sunset_by_Aitzol_Berasategi.jpg")),
}
SPLITS = {"train": 0, "val": 1}


def _package_dir(package: str, *sub: str) -> str | None:
    """``<package's folder>/<sub...>`` without importing the package (None when it is not installed)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(list(spec.submodule_search_locations)[0], *sub)


def source_dir(source: str, data_root: str) -> str | None:
    """The folder that holds ``source``'s photographs, or None when its package is not installed."""
    if source == "skimage":
        return _package_dir("skimage", "data")
    if source == "mpl":
        return _package_dir("matplotlib", "mpl-data", "sample_data")
    return data_root


@functools.lru_cache(maxsize=64)
def decode(path: str, max_side: int) -> torch.Tensor:
    """``path`` -> uint8 ``(3, H, W)``, long side <= ``max_side`` (JPEG draft decoding, then antialiased);
    kept per process (the catalogue is a few dozen images, ~2 MB each at the default ``max_side``)."""
    with open(path, "rb") as f:
        img = Image.open(f)
        img.draft("RGB", (max_side, max_side))  # JPEG: decode at 1/2, 1/4 or 1/8 scale when that suffices
        img.load()
        img = img.convert("RGB")
    w, h = img.size
    if max(w, h) > max_side:
        scale = max_side / max(w, h)
        img = img.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.Resampling.LANCZOS)
    return torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1).contiguous()


class PhotoCropDataset(SkippingDataset):
    """``(path, label, box)`` list -> ``(float (3, S, S), label)``; ``box = (top, left, side_h, side_w)``
    as fractions of the image's height and width."""

    def __init__(self, samples: list[tuple[str, int, tuple[float, float, float, float]]], hw: tuple[int, int],
                 max_side: int, mean=IMAGENET_MEAN, std=IMAGENET_STD) -> None:
        super().__init__((3, *hw))
        self.samples, self.hw, self.max_side = samples, hw, max_side
        self.targets = [t for _, t, _ in samples]
        self.norm = v2.Compose([v2.ToDtype(torch.float32, scale=True), v2.Normalize(list(mean), list(std))])

    def __len__(self) -> int:
        return len(self.samples)

    def describe(self, index: int) -> str:
        return self.samples[index][0]

    def load(self, index: int) -> tuple[torch.Tensor, int]:
        path, label, (top, left, sh, sw) = self.samples[index]
        img = decode(path, self.max_side)  # (3, H, W) uint8
        h, w = img.shape[-2:]
        t, l = int(round(top * h)), int(round(left * w))
        ch, cw = max(1, int(round(sh * h))), max(1, int(round(sw * w)))
        crop = TF.resized_crop(img, t, l, min(ch, h - t), min(cw, w - l), list(self.hw), antialias=True)
        return self.norm(crop), label


@register_datamodule("photos")
class PhotosDataModule(ImageDataModule):
    source = DataSource(
        publisher="installed packages: scikit-image, matplotlib, Debian lomiri-wallpapers-16.04",
        url="https://packages.debian.org/lomiri-wallpapers-16.04",
        licence=("per photograph, as each package states it: CC0, public domain, CC-BY-4.0, CC-BY-SA-4.0 (the table "
                 "below)"),
        size="26 photographs with all three sources; lomiri-wallpapers-16.04 is 16 MB",
        writer=("``pip install scikit-image``; ``apt-get install lomiri-wallpapers-16.04`` (writes "
                "``/usr/share/backgrounds``)"),
    )
    DEFAULT_ROOT: ClassVar[str] = "/usr/share/backgrounds"
    expected_layout: ClassVar[str] = ("no files needed: photographs of installed packages (scikit-image, "
                                      "matplotlib; Debian lomiri-wallpapers-16.04 under --data-root, default "
                                      f"{DEFAULT_ROOT}); random square crops at any resolution")
    default_resolution: ClassVar[int | str] = 224
    patch_size: ClassVar[int] = 16
    option_help: ClassVar[dict[str, str]] = {
        "sources": "auto (every installed source) or a comma-separated list of skimage, mpl, lomiri",
        "train_per_image": "training crops per photograph",
        "val_per_image": "validation crops per photograph",
        "max_side": "long side (pixels) each photograph is reduced to when decoded"}

    def __init__(self, sources: str = "auto", train_per_image: int = 16, val_per_image: int = 4,
                 max_side: int = 1024, data_root: str | None = None, **kwargs: Any) -> None:
        self.sources_option = str(sources)
        self.per_image = {"train": int_option("photos", "train_per_image", train_per_image),
                          "val": int_option("photos", "val_per_image", val_per_image)}
        self.max_side = int_option("photos", "max_side", max_side, minimum=16)
        super().__init__(data_root=data_root or self.DEFAULT_ROOT, **kwargs)

    def validate(self) -> None:
        if self.sources_option == "auto":
            wanted, required = list(SOURCES), False
        else:
            wanted = [s.strip() for s in self.sources_option.split(",") if s.strip()]
            unknown = [s for s in wanted if s not in SOURCES]
            if unknown or not wanted:
                raise ValueError(f"photos: data option sources must be 'auto' or a comma-separated list of "
                                 f"{', '.join(SOURCES)}, got {self.sources_option!r}")
            required = True
        #: the catalogue: (source, path) of every photograph in use; a label is an index into it
        self.images: list[tuple[str, str]] = []
        self.sources: list[str] = []
        for source in wanted:
            folder = source_dir(source, self.data_root)
            paths = [os.path.join(folder, f) for f in SOURCES[source][1]] if folder else []
            missing = [p for p in paths if not os.path.isfile(p)]
            if not paths or missing:
                if required:
                    first = missing[0] if missing else SOURCES[source][1][0]
                    raise DataRootError(f"photos: source {source!r} needs {SOURCES[source][0]}; not found: {first!r}")
                continue
            self.sources.append(source)
            self.images += [(source, p) for p in paths]
        if not self.images:
            raise DataRootError(f"photos: no source installed (sources={self.sources_option!r}); expected layout: "
                                f"{self.expected_layout}")

    @property
    def num_classes(self) -> int:
        return len(self.images)

    def boxes(self, split: str) -> list[tuple[int, tuple[float, float, float, float]]]:
        """``(label, (top, left, side_h, side_w))`` of every crop of ``split``, drawn from ``[seed, split]``;
        the box is square in pixels (``side_h * H == side_w * W``)."""
        rng = np.random.default_rng([self.seed, SPLITS[split]])
        out = []
        for label, (_, path) in enumerate(self.images):
            with Image.open(path) as img:  # the header only: width and height
                w, h = img.size
            for _ in range(self.per_image[split]):
                side = rng.uniform(0.3, 1.0) * min(w, h)  # pixels
                top, left = rng.uniform(0, h - side), rng.uniform(0, w - side)
                out.append((label, (top / h, left / w, side / h, side / w)))
        return out

    def scan(self, split: str) -> list[tuple[str, int, tuple[float, float, float, float]]]:
        return [(self.images[label][1], label, box) for label, box in self.boxes(split)]

    def make_dataset(self, split: str, train: bool, resolution: tuple[int, ...] | None = None):
        mean, std = self.normalisation()
        return PhotoCropDataset(self.samples("val" if split == "test" else split),
                                image_hw(resolution or self.resolution), self.max_side, mean, std)

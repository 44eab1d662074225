"""ImageNet-1K, ImageNet-100 and the ImageNet evaluation sets (V2, R, HR), read offline.

Labels are always the canonical ImageNet-1K class index (position of the wnid in the sorted list
of the 1000 synsets, timm's bundled ``imagenet_synsets.txt``), except ImageNet-100 whose labels are
the position in the sorted list of its 100 wnids. So a model trained on ``imagenet`` evaluates on
``imagenet-v2`` / ``imagenet-r`` / ``imagenet-hr`` without any remapping, whatever subset of class
folders a root holds.

* ``imagenet``: ``<root>/train/<wnid>/*.JPEG`` and ``<root>/val/<wnid>/*.JPEG``. When
  ``<root>/meta.bin`` exists (the layout ``torchvision.datasets.ImageNet`` leaves after parsing
  the archives) the file lists come from ``torchvision.datasets.ImageNet``; otherwise from
  ``torchvision.datasets.ImageFolder``. Archives are never parsed or downloaded: the split
  folders must exist (run ``torchvision.datasets.ImageNet(root, split)`` once to extract them).
* ``imagenet100``: the 100-class subset of Tian et al., "Contrastive Multiview Coding" (CMC,
  ECCV 2020; list ``imagenet100.txt`` of github.com/HobbitLong/CMC). The root may hold only those
  class folders or the full 1K (the other classes are filtered out).
* ``imagenet-v2``: ``<root>/<class index 0..999>/*.jpeg`` (the ImageNetV2 release folders, e.g.
  ``imagenetv2-matched-frequency-format-val``; the root may also be their parent).
* ``imagenet-r``: ``<root>/imagenet-r/<wnid>/*.jpg`` (or the ``imagenet-r`` folder itself), 200
  classes labelled with their 1K index. ``class_subset`` lists those indices: the usual protocol
  restricts the 1000 logits to them before the argmax (the Task's job).
* ``imagenet-hr``: high-resolution test images (Fuller et al., LookHere, NeurIPS 2024), a folder of
  class folders named by wnid or by 1K index.

The evaluation-only sets have no training split: ``train_dataset()`` raises ``ValueError``.
"""
from __future__ import annotations

import os
from typing import ClassVar

from torchvision.datasets import ImageFolder, ImageNet

from ..base import DataRootError, DataSource
from ..image_common import ImageDataModule, imagenet_wnids, require_dir
from ..registry import register_datamodule

__all__ = ["IMAGENET100_WNIDS", "ImageNetDataModule", "ImageNet100DataModule", "ImageNetV2DataModule",
           "ImageNetRDataModule", "ImageNetHRDataModule"]

#: CMC's ImageNet-100 (HobbitLong/CMC imagenet100.txt), in the file's order
IMAGENET100_WNIDS = tuple("""
n02869837 n01749939 n02488291 n02107142 n13037406 n02091831 n04517823 n04589890 n03062245 n01773797
n01735189 n07831146 n07753275 n03085013 n04485082 n02105505 n01983481 n02788148 n03530642 n04435653
n02086910 n02859443 n13040303 n03594734 n02085620 n02099849 n01558993 n04493381 n02109047 n04111531
n02877765 n04429376 n02009229 n01978455 n02106550 n01820546 n01692333 n07714571 n02974003 n02114855
n03785016 n03764736 n03775546 n02087046 n07836838 n04099969 n04592741 n03891251 n02701002 n03379051
n02259212 n07715103 n03947888 n04026417 n02326432 n03637318 n01980166 n02113799 n02086240 n03903868
n02483362 n04127249 n02089973 n03017168 n02093428 n02804414 n02396427 n04418357 n02172182 n01729322
n02113978 n03787032 n02089867 n02119022 n03777754 n04238763 n02231487 n03032252 n02138441 n02104029
n03837869 n03494278 n04136333 n03794056 n03492542 n02018207 n04067472 n03930630 n03584829 n02123045
n04229816 n02100583 n03642806 n04336792 n03259280 n02116738 n02108089 n03424325 n01855672 n02090622
""".split())
assert len(IMAGENET100_WNIDS) == 100 == len(set(IMAGENET100_WNIDS))


def _subdirs(path: str) -> list[str]:
    with os.scandir(path) as it:
        return sorted(e.name for e in it if e.is_dir())


class _MappedImageFolder(ImageFolder):
    """ImageFolder whose classes are the allowed folder names, labelled by ``mapping`` (name -> label)."""

    def __init__(self, root: str, mapping: dict[str, int]) -> None:
        self._mapping = mapping
        super().__init__(root, allow_empty=True)

    def find_classes(self, directory: str) -> tuple[list[str], dict[str, int]]:
        classes = [c for c in _subdirs(directory) if c in self._mapping]
        return classes, {c: self._mapping[c] for c in classes}


def _scan_folder(path: str, mapping: dict[str, int]) -> list[tuple[str, int]]:
    return list(_MappedImageFolder(path, mapping).samples)


class _ClassFolderModule(ImageDataModule):
    """A split is ``<dir>/<class folder>/<image>``; class folder names -> labels via :meth:`mapping`."""

    n_classes: ClassVar[int] = 1000
    split_dirs: ClassVar[dict[str, str]] = {"train": "train", "val": "val", "test": "val"}

    def mapping(self) -> dict[str, int]:
        return {w: i for i, w in enumerate(imagenet_wnids())}

    def split_dir(self, split: str) -> str:
        return os.path.join(self.data_root, self.split_dirs[split])

    def validate(self) -> None:
        require_dir(self.data_root, self.name, self.expected_layout)
        mapping = self.mapping()
        for split in sorted(set(self.split_dirs.values())):
            d = require_dir(os.path.join(self.data_root, split), self.name, self.expected_layout)
            if not any(c in mapping for c in _subdirs(d)):
                raise DataRootError(f"{self.name}: no known class folders in {d!r}; "
                                    f"expected layout: {self.expected_layout}")

    def scan(self, split: str) -> list[tuple[str, int]]:
        return _scan_folder(self.split_dir(split), self.mapping())


@register_datamodule("imagenet")
class ImageNetDataModule(_ClassFolderModule):
    source = DataSource(
        publisher="ImageNet, Stanford University and Princeton University (ILSVRC 2012; Russakovsky et al. 2015)",
        url="https://image-net.org/download.php",
        licence=("ImageNet Terms of Access: non-commercial research and educational purposes only (registration "
                 "required)"),
        size=("ILSVRC2012_img_train.tar (138 GB), ILSVRC2012_img_val.tar (6.3 GB), ILSVRC2012_devkit_t12.tar.gz (2.5 "
              "MB); 1,281,167 training and 50,000 validation images, 1,000 classes"),
        writer=("``torchvision.datasets.ImageNet(root, split='train')`` and ``split='val'`` with the three archives "
                "in the root: it parses the devkit into ``<root>/meta.bin`` and unpacks ``<root>/train/<wnid>/`` and "
                "``<root>/val/<wnid>/`` (no download)"),
    )
    expected_layout = "<root>/train/<wnid>/*.JPEG and <root>/val/<wnid>/*.JPEG (optionally <root>/meta.bin)"

    def scan(self, split: str) -> list[tuple[str, int]]:
        if not os.path.isfile(os.path.join(self.data_root, "meta.bin")):
            return super().scan(split)
        # torchvision's parsed layout: it skips archive parsing because meta.bin and the split folder exist
        tv = ImageNet(self.data_root, split=self.split_dirs[split])
        canon = self.mapping()
        return [(p, canon[tv.wnids[t]]) for p, t in tv.samples]


@register_datamodule("imagenet100")
class ImageNet100DataModule(_ClassFolderModule):
    source = DataSource(
        publisher=("ImageNet (as ``imagenet``), the 100-class list of Tian, Krishnan and Isola 2020 (CMC, "
                   "imagenet100.txt)"),
        url="https://github.com/HobbitLong/CMC",
        licence="ImageNet Terms of Access (as ``imagenet``): non-commercial research and educational purposes only",
        size="no separate download: 100 of ImageNet-1K's classes (126,689 training and 5,000 validation images)",
        writer="as ``imagenet`` (``torchvision.datasets.ImageNet``); a full ImageNet-1K root is filtered",
    )
    n_classes = 100
    expected_layout = ("<root>/train/<wnid>/*.JPEG and <root>/val/<wnid>/*.JPEG with the 100 CMC ImageNet-100 "
                       "class folders (a full ImageNet-1K root is filtered)")

    def mapping(self) -> dict[str, int]:
        return {w: i for i, w in enumerate(sorted(IMAGENET100_WNIDS))}


class _EvalOnlyModule(_ClassFolderModule):
    """An evaluation-only ImageNet test set: one folder of class folders."""

    def validate(self) -> None:
        require_dir(self.data_root, self.name, self.expected_layout)
        self.data_root = self.locate(self.data_root)
        if not any(c in self.mapping() for c in _subdirs(self.data_root)):
            raise DataRootError(f"{self.name}: no class folders in {self.data_root!r}; "
                                f"expected layout: {self.expected_layout}")

    def locate(self, root: str) -> str:
        return root

    def split_dir(self, split: str) -> str:
        return self.data_root

    def train_dataset(self):
        raise ValueError(f"{self.name} is an evaluation-only set: train on imagenet and evaluate on {self.name}")


@register_datamodule("imagenet-v2")
class ImageNetV2DataModule(_EvalOnlyModule):
    source = DataSource(
        publisher="Recht, Roelofs, Schmidt and Shankar 2019 (Do ImageNet Classifiers Generalize to ImageNet?)",
        url="https://github.com/modestyachts/ImageNetV2",
        licence=("code: MIT; the repository says that licence does not cover the images, which come from Flickr "
                 "with its licence information and can be used the same way as the original ImageNet dataset"),
        size="imagenetv2-matched-frequency.tar.gz; 10,000 test images, 10 per class",
        writer="none: untar into the root (the archive holds ``imagenetv2-matched-frequency-format-val/<0..999>/``)",
    )
    expected_layout = "<root>/<class index 0..999>/*.jpeg (an ImageNetV2 release folder, or its parent)"

    def mapping(self) -> dict[str, int]:
        return {str(i): i for i in range(1000)}

    def locate(self, root: str) -> str:
        if any(d.isdigit() for d in _subdirs(root)):
            return root
        inner = [d for d in _subdirs(root) if d.lower().startswith("imagenetv2")]
        return os.path.join(root, inner[0]) if len(inner) == 1 else root


@register_datamodule("imagenet-r")
class ImageNetRDataModule(_EvalOnlyModule):
    source = DataSource(
        publisher="Hendrycks et al. 2021 (The Many Faces of Robustness)",
        url="https://github.com/hendrycks/imagenet-r",
        licence="not stated (the repository's README states none)",
        size="imagenet-r.tar; 30,000 renditions of 200 ImageNet-1K classes",
        writer="none: untar into the root (the archive holds ``imagenet-r/<wnid>/``)",
    )
    expected_layout = "<root>/imagenet-r/<wnid>/*.jpg (200 ImageNet-1K wnids; or the imagenet-r folder itself)"

    def locate(self, root: str) -> str:
        inner = os.path.join(root, "imagenet-r")
        return inner if os.path.isdir(inner) else root

    @property
    def class_subset(self) -> list[int]:
        """1K indices of the class folders present (ImageNet-R: 200) -- restrict logits to these."""
        m = self.mapping()
        return sorted(m[c] for c in _subdirs(self.data_root) if c in m)


@register_datamodule("imagenet-hr")
class ImageNetHRDataModule(_EvalOnlyModule):
    source = DataSource(
        publisher="Fuller et al. 2024 (LookHere, NeurIPS 2024)",
        url="https://huggingface.co/datasets/antofuller/ImageNet-HR",
        licence="MIT (the Hugging Face dataset card's licence field)",
        size="5,000 test images of 1024 x 1024 px for the 1,000 ImageNet-1K classes (a Hugging Face dataset)",
        writer="none: save the dataset's images into class folders named by wnid or 1K index",
    )
    expected_layout = "<root>/<wnid or class index 0..999>/<image> (ImageNet-HR high-resolution test images)"

    def mapping(self) -> dict[str, int]:
        m = {w: i for i, w in enumerate(imagenet_wnids())}
        m.update({str(i): i for i in range(1000)})
        return m


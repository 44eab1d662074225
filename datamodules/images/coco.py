"""``coco``: COCO 2017 object detection (Lin et al., ECCV 2014, "Microsoft COCO: Common Objects in Context").

Layout under ``--data-root`` (the official release, unchanged)::

    annotations/instances_train2017.json
    annotations/instances_val2017.json
    train2017/<12-digit id>.jpg
    val2017/<12-digit id>.jpg

Annotations are read with pycocotools (``COCO``); images with PIL, boxes and images transformed
together with torchvision transforms v2 (``tv_tensors.BoundingBoxes``, ``SanitizeBoundingBoxes``).

* Categories: the 80 category ids (1..90 with gaps) map to contiguous labels ``0..79`` in id order
  (:attr:`CocoDataModule.label_to_category_id` maps back for evaluation).
* Crowd annotations (``iscrowd=1``) are not training targets and not ordinary ground truth:
  evaluation passes the original annotation file to COCOeval, which ignores detections matched to
  crowd regions, exactly as on the official server.
* Training images without any non-crowd box are left out of the training split (Detectron2's
  ``FILTER_EMPTY_ANNOTATIONS``); validation keeps every image.
* Input: the longer side resized to ``resolution`` (aspect kept) and padded to a square
  (:func:`~.detection_common.resize_pad`); horizontal flip in training. Predictions are mapped back
  to the original frame before evaluation (``models/tasks/detection/coco_eval.py``).
* Files listed in the annotations but missing are dropped and counted (``missing``); undecodable
  images are skipped in the loader and counted (``corrupt``).

:class:`CocoFormatDataModule` is the same reader for any COCO-format set with per-split
``annotations/instances_<split>.json`` and image folders; ``shapes-det`` writes its data in that
layout and is read by this code.
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
from typing import Any, ClassVar, Sequence

import torch
from pycocotools.coco import COCO
from torch.utils.data import DataLoader
from torchvision.transforms.v2.functional import pil_to_tensor

from ..base import BenchDataModule, DataRootError, DataSource, parse_resolution
from ..corrupt import SkippingDataset
from ..detection_common import detection_collate, resize_pad, xywh_to_xyxy
from ..image_common import IMAGENET_MEAN, IMAGENET_STD, image_hw, pil_rgb
from ..registry import register_datamodule

__all__ = ["CocoFormatDataModule", "CocoDataModule", "CocoDetectionDataset", "load_coco"]

log = logging.getLogger(__name__)


def load_coco(path: str, what: str, layout: str) -> Any:
    """pycocotools ``COCO(path)`` with its prints silenced; a missing / malformed file is a one-line
    :class:`DataRootError`."""
    if not os.path.isfile(path):
        raise DataRootError(f"{what}: expected file {path!r} not found; expected layout: {layout}")
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            coco = COCO(path)
    except (ValueError, KeyError, TypeError, AssertionError, OSError) as e:
        raise DataRootError(f"{what}: cannot read COCO annotations {path!r} ({type(e).__name__}: "
                            f"{' '.join(str(e).split())[:120]}); expected layout: {layout}") from None
    for key in ("images", "annotations", "categories"):
        if key not in coco.dataset:
            raise DataRootError(f"{what}: {path!r} has no {key!r} list; expected layout: {layout}")
    return coco


class CocoDetectionDataset(SkippingDataset):
    """One split: ``(image (3, S, S) float, target dict)`` per image (see ``detection_common``)."""

    def __init__(self, coco: Any, samples: Sequence[tuple[str, int]], category_to_label: dict[int, int],
                 side: int, train: bool, mean: Sequence[float] = IMAGENET_MEAN,
                 std: Sequence[float] = IMAGENET_STD) -> None:
        super().__init__((3, side, side))
        self.collate_fn = detection_collate  # (inputs, [targets], {"skipped": n})
        self.coco = coco
        self.samples = list(samples)
        self.category_to_label = dict(category_to_label)
        self.side = int(side)
        self.train = train
        self.mean, self.std = tuple(mean), tuple(std)

    def __len__(self) -> int:
        return len(self.samples)

    def describe(self, index: int) -> str:
        return self.samples[index][0]

    def annotations(self, image_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Non-crowd boxes of ``image_id`` as xyxy ``(n, 4)`` in the original frame, and their labels."""
        anns = [a for a in self.coco.imgToAnns.get(image_id, []) if not a.get("iscrowd", 0)]
        anns = [a for a in anns if a["category_id"] in self.category_to_label]
        if not anns:
            return torch.zeros((0, 4)), torch.zeros((0,), dtype=torch.int64)
        xywh = torch.tensor([a["bbox"] for a in anns], dtype=torch.float32).reshape(-1, 4)
        labels = torch.tensor([self.category_to_label[a["category_id"]] for a in anns], dtype=torch.int64)
        return xywh_to_xyxy(xywh), labels

    def load(self, index: int) -> tuple[torch.Tensor, dict]:
        path, image_id = self.samples[index]
        pil = pil_rgb(path)
        image = pil_to_tensor(pil)  # (3, h, w) uint8
        h, w = int(image.shape[-2]), int(image.shape[-1])
        boxes, labels = self.annotations(image_id)
        flip = self.train and bool(torch.rand(()) < 0.5)
        x, boxes, labels, scale, scale_xy = resize_pad(image, boxes, labels, self.side, self.mean, self.std, flip)
        target = {"boxes": boxes, "labels": labels, "image_id": int(image_id), "orig_size": (h, w),
                  "scale": scale, "scale_xy": scale_xy}
        return x, target


class CocoFormatDataModule(BenchDataModule):
    """A COCO-format detection set: ``annotations/instances_<split><suffix>.json`` + ``<split><suffix>/``.

    Subclasses set :attr:`splits` (the split names on disk) and, for a held-out test split,
    ``has_test_split = True``."""

    modality: ClassVar[str] = "image"
    in_chans: ClassVar[int] = 3
    needs_data_root: ClassVar[bool] = True
    default_task: ClassVar[str] = "detection"
    label_kind: ClassVar[str] = "boxes"
    default_resolution: ClassVar[int | str] = 512
    patch_size: ClassVar[int] = 16
    has_test_split: ClassVar[bool] = False
    #: split -> folder / annotation-file stem on disk
    splits: ClassVar[dict[str, str]] = {"train": "train2017", "val": "val2017"}
    #: pixel statistics used for normalisation
    mean: ClassVar[tuple[float, float, float]] = IMAGENET_MEAN
    std: ClassVar[tuple[float, float, float]] = IMAGENET_STD

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.data_root = os.path.expanduser(str(self.data_root)) if self.data_root else self.data_root
        self._coco: dict[str, Any] = {}
        self._samples: dict[str, list[tuple[str, int]]] = {}
        self._categories: list[int] | None = None
        self._check_resolution(self.resolution)
        self.validate()

    # ---- layout -----------------------------------------------------------------------------
    def ann_file(self, split: str) -> str:
        return os.path.join(self.data_root, "annotations", f"instances_{self.splits[split]}.json")

    def image_dir(self, split: str) -> str:
        return os.path.join(self.data_root, self.splits[split])

    def validate(self) -> None:
        if not os.path.isdir(self.data_root):
            raise DataRootError(f"{self.name}: data root {self.data_root!r} is not a directory; "
                                f"expected layout: {self.expected_layout}")
        for split in self.splits:
            if not os.path.isfile(self.ann_file(split)):
                raise DataRootError(f"{self.name}: expected file {self.ann_file(split)!r} not found; "
                                    f"expected layout: {self.expected_layout}")
            if not os.path.isdir(self.image_dir(split)):
                raise DataRootError(f"{self.name}: expected directory {self.image_dir(split)!r} not found; "
                                    f"expected layout: {self.expected_layout}")

    def _check_resolution(self, res: tuple[int, ...]) -> int:
        if len(res) == 2 and res[0] != res[1]:
            raise ValueError(f"{self.name}: images are padded to a square; give --resolution as one side length, "
                             f"got {'x'.join(map(str, res))}")
        return int(res[0])

    # ---- annotations ------------------------------------------------------------------------
    def coco(self, split: str) -> Any:
        if split not in self.splits:
            raise ValueError(f"{self.name}: no split {split!r}; available: {', '.join(self.splits)}")
        if split not in self._coco:
            self._coco[split] = load_coco(self.ann_file(split), self.name, self.expected_layout)
        return self._coco[split]

    def coco_gt(self, split: str) -> Any:
        """Ground truth of ``split`` as a pycocotools ``COCO`` (original frame, the dataset's category
        ids, crowd regions with ``iscrowd=1``): what COCOeval evaluates against."""
        return self.coco(split)

    @property
    def label_to_category_id(self) -> list[int]:
        """Contiguous label -> the dataset's category id (sorted ids of the validation annotations)."""
        if self._categories is None:
            cats = sorted(int(c["id"]) for c in self.coco("val").dataset["categories"])
            if not cats:
                raise DataRootError(f"{self.name}: {self.ann_file('val')!r} lists no categories; "
                                    f"expected layout: {self.expected_layout}")
            self._categories = cats
        return self._categories

    @property
    def category_to_label(self) -> dict[int, int]:
        return {c: i for i, c in enumerate(self.label_to_category_id)}

    @property
    def num_classes(self) -> int:
        return len(self.label_to_category_id)

    def samples(self, split: str) -> list[tuple[str, int]]:
        """``(image path, image id)`` of ``split`` in image-id order; missing files dropped and counted."""
        if split not in self._samples:
            coco = self.coco(split)
            ids = sorted(int(i) for i in coco.imgs)
            if split == "train":
                cats = set(self.label_to_category_id)
                ids = [i for i in ids if any(not a.get("iscrowd", 0) and a["category_id"] in cats
                                             for a in coco.imgToAnns.get(i, []))]
            listed = [(os.path.join(self.image_dir(split), coco.imgs[i]["file_name"]), i) for i in ids]
            self._samples[split] = self.drop_missing(listed, split, self.ann_file(split)) if listed else []
        return self._samples[split]

    # ---- BenchDataModule --------------------------------------------------------------------
    def input_shape(self, resolution: tuple[int, ...] | None = None) -> tuple[int, ...]:
        return (self.in_chans, *image_hw((self._check_resolution(resolution or self.resolution),)))

    def make_dataset(self, split: str, train: bool, resolution: Any = None) -> CocoDetectionDataset:
        res = self.resolution if resolution is None else (
            resolution if isinstance(resolution, tuple) else parse_resolution(resolution))
        side = self._check_resolution(res)
        return CocoDetectionDataset(self.coco(split), self.samples(split), self.category_to_label, side, train,
                                    self.mean, self.std)

    def train_dataset(self) -> CocoDetectionDataset:
        return self.make_dataset("train", train=True)

    def val_dataset(self, resolution: Any = None) -> CocoDetectionDataset:
        return self.make_dataset("val", train=False, resolution=resolution)

    def test_dataset(self, resolution: Any = None) -> CocoDetectionDataset:
        return self.make_dataset("test" if "test" in self.splits else "val", train=False, resolution=resolution)

    def eval_split_dataloader(self, split: str, resolution: Any = None) -> DataLoader:
        """Loader of ``split`` (``val`` / ``test``) at ``resolution``, in a fixed order."""
        ds = self.test_dataset(resolution) if split == "test" else self.val_dataset(resolution)
        return self._loader(ds, shuffle=False)


@register_datamodule("coco")
class CocoDataModule(CocoFormatDataModule):
    """COCO 2017 detection (train2017 / val2017), 80 categories; see the module docstring."""

    source = DataSource(
        publisher="the COCO Consortium (Lin et al. 2014, Microsoft COCO)",
        url="https://cocodataset.org/#download",
        licence=("annotations: CC BY 4.0; images: the COCO Consortium does not own their copyright, and their use "
                 "must abide by the Flickr Terms of Use (cocodataset.org/#termsofuse)"),
        size=("train2017.zip (18 GB, 118,287 images), val2017.zip (1 GB, 5,000 images), annotations_trainval2017.zip "
              "(241 MB)"),
        writer=("none: unzip the three archives into the root (``torchvision.datasets.CocoDetection`` reads the same "
                "files; it does not download)"),
    )
    name: ClassVar[str] = "coco"
    expected_layout: ClassVar[str] = ("<root>/annotations/instances_{train,val}2017.json, <root>/train2017/*.jpg, "
                                      "<root>/val2017/*.jpg (the official COCO 2017 release)")
    default_resolution: ClassVar[int | str] = 512
    patch_size: ClassVar[int] = 16

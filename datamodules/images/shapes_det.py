"""``shapes-det``: embedded synthetic object detection, written as a COCO-format dataset and read by
the ``coco`` reader (:class:`~.coco.CocoFormatDataModule`), so the real loader, the box
conversions and COCOeval in the original frame are exercised without a download.

Each image (width and height drawn from ``[96, 160]`` px, so aspect ratios vary and the resize +
pad path matters; the default input side is 64, patch 8) shows 1 to ``max_objects`` non-overlapping shapes of three classes
-- disc (category id 1), square (2), triangle (3) -- with random colours on a smooth random
gradient plus pixel noise. Object sizes are drawn log-uniformly between ``min_object`` and
``max_object`` px (12 to 128) in the *original* frame, so COCO's absolute area bins are populated: small
(< 32² px²), medium (< 96²) and large. With probability 0.15 an image also holds a *crowd*: a
cluster of tiny discs annotated as one ``iscrowd=1`` disc region (COCOeval ignores detections
inside it, see :mod:`pebench.tasks.detection.coco_eval`).

Files (deterministic for a given seed and sizes; written once into a temporary folder that is
then renamed, so a half-written cache never exists)::

    <cache_dir>/shapes-det/<key>/annotations/instances_{train,val,test}.json
    <cache_dir>/shapes-det/<key>/{train,val,test}/<id>.jpg

``cache_dir`` defaults to ``~/.cache/pebench``. Splits: ``train`` (``train_size`` images),
``val`` and ``test`` (held out, ``has_test_split``), all from one seeded stream per split.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, ClassVar

import numpy as np
from PIL import Image, ImageDraw

from pebench.core.io import publish_dir

from ..base import int_option
from ..registry import register_datamodule
from .coco import CocoFormatDataModule

__all__ = ["ShapesDetDataModule", "write_shapes_det", "CATEGORIES"]

#: COCO categories of the set (ids as written in the JSON)
CATEGORIES = ({"id": 1, "name": "disc"}, {"id": 2, "name": "square"}, {"id": 3, "name": "triangle"})
_VERSION = 1  # bump when the generator changes (new cache key)


def _draw_shape(draw: Any, kind: str, box: tuple[float, float, float, float], colour: tuple[int, ...]) -> None:
    x0, y0, x1, y1 = box
    if kind == "disc":
        draw.ellipse([x0, y0, x1 - 1, y1 - 1], fill=colour)
    elif kind == "square":
        draw.rectangle([x0, y0, x1 - 1, y1 - 1], fill=colour)
    else:  # triangle: apex at the top centre, base along the bottom edge
        draw.polygon([((x0 + x1) / 2, y0), (x1 - 1, y1 - 1), (x0, y1 - 1)], fill=colour)


def _scene(rng: np.random.Generator, image_id: int, min_side: int, max_side: int, max_objects: int,
           min_object: int, max_object: int) -> tuple[Any, list[dict], dict]:
    """One image (PIL) and its COCO annotations (without ids)."""
    w, h = (int(v) for v in rng.integers(min_side, max_side + 1, size=2))
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    a = rng.uniform(0, 2 * np.pi)
    t = (np.cos(a) * xx / w + np.sin(a) * yy / h)
    t = (t - t.min()) / max(1e-6, float(t.max() - t.min()))
    c0, c1 = rng.uniform(0, 110, size=(2, 3))
    bg = c0 + t[..., None] * (c1 - c0) + rng.normal(0, 6, size=(h, w, 3))
    img = Image.fromarray(np.clip(bg, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    boxes: list[tuple[float, float, float, float]] = []
    anns: list[dict] = []
    n = int(rng.integers(1, max_objects + 1))
    big = min(max_object, int(0.9 * min(w, h)))
    for _ in range(n):
        for _try in range(30):
            s = float(np.exp(rng.uniform(np.log(min_object), np.log(big))))
            bw = int(round(s * rng.uniform(0.8, 1.25)))
            bh = int(round(s * rng.uniform(0.8, 1.25)))
            bw, bh = max(min_object, min(bw, w - 2)), max(min_object, min(bh, h - 2))
            x0, y0 = int(rng.integers(0, w - bw + 1)), int(rng.integers(0, h - bh + 1))
            box = (x0, y0, x0 + bw, y0 + bh)
            if all(box[2] + 2 <= b[0] or b[2] + 2 <= box[0] or box[3] + 2 <= b[1] or b[3] + 2 <= box[1]
                   for b in boxes):
                break
        else:
            continue
        cat = int(rng.integers(0, len(CATEGORIES)))
        colour = tuple(int(v) for v in rng.uniform(140, 255, size=3))
        _draw_shape(draw, CATEGORIES[cat]["name"], box, colour)
        boxes.append(box)
        anns.append({"image_id": image_id, "category_id": CATEGORIES[cat]["id"], "iscrowd": 0,
                     "bbox": [float(box[0]), float(box[1]), float(bw), float(bh)], "area": float(bw * bh)})
    if rng.uniform() < 0.15:  # a crowd of tiny discs in a free region, annotated as one iscrowd=1 box
        cw, ch = int(rng.integers(24, 48)), int(rng.integers(24, 48))
        if cw < w - 2 and ch < h - 2:
            x0, y0 = int(rng.integers(0, w - cw)), int(rng.integers(0, h - ch))
            box = (x0, y0, x0 + cw, y0 + ch)
            if all(box[2] + 2 <= b[0] or b[2] + 2 <= box[0] or box[3] + 2 <= b[1] or b[3] + 2 <= box[1]
                   for b in boxes):
                for _ in range(int(rng.integers(6, 12))):
                    cx, cy = rng.uniform(x0, x0 + cw - 4), rng.uniform(y0, y0 + ch - 4)
                    draw.ellipse([cx, cy, cx + 3, cy + 3], fill=tuple(int(v) for v in rng.uniform(140, 255, 3)))
                anns.append({"image_id": image_id, "category_id": 1, "iscrowd": 1,
                             "bbox": [float(x0), float(y0), float(cw), float(ch)], "area": float(cw * ch)})
    return img, anns, {"id": image_id, "width": w, "height": h, "file_name": f"{image_id:06d}.jpg"}


def write_shapes_det(root: str, sizes: dict[str, int], seed: int, min_side: int = 96, max_side: int = 160,
                     max_objects: int = 4, min_object: int = 12, max_object: int = 128) -> str:
    """Write the dataset into ``root`` (which must not exist yet); returns ``root``.

    Written into a temporary sibling folder first and renamed at the end (atomic on one
    filesystem); if another process finished first, its copy is kept."""
    with publish_dir(root, ".shapes-det-tmp-") as tmp:
        os.makedirs(os.path.join(tmp, "annotations"))
        next_image, next_ann = 1, 1
        for k, (split, n) in enumerate(sizes.items()):
            rng = np.random.default_rng(np.random.SeedSequence([seed, k, _VERSION]))
            os.makedirs(os.path.join(tmp, split))
            images, annotations = [], []
            for _ in range(n):
                img, anns, info = _scene(rng, next_image, min_side, max_side, max_objects, min_object, max_object)
                img.save(os.path.join(tmp, split, info["file_name"]), quality=92)
                images.append(info)
                for a in anns:
                    a["id"] = next_ann
                    next_ann += 1
                annotations.extend(anns)
                next_image += 1
            with open(os.path.join(tmp, "annotations", f"instances_{split}.json"), "w") as f:
                json.dump({"info": {"description": "pebench shapes-det", "version": _VERSION}, "images": images,
                           "annotations": annotations, "categories": [dict(c) for c in CATEGORIES]}, f)
    return root


@register_datamodule("shapes-det")
class ShapesDetDataModule(CocoFormatDataModule):
    """Embedded synthetic detection in COCO format (see the module docstring)."""

    name: ClassVar[str] = "shapes-det"
    needs_data_root: ClassVar[bool] = False
    has_test_split: ClassVar[bool] = True
    expected_layout: ClassVar[str] = ("written by pebench into <cache_dir>/shapes-det/<key>/ "
                                      "(annotations/instances_{train,val,test}.json, {train,val,test}/*.jpg)")
    default_resolution: ClassVar[int | str] = 64
    patch_size: ClassVar[int] = 8
    #: detector settings for this set (``--task-option`` overrides them): a narrow pyramid and two
    #: convolutions per FCOS tower keep a run within CPU minutes
    detection_defaults: ClassVar[dict] = {"fpn_dim": 64, "head_convs": 2}
    splits: ClassVar[dict[str, str]] = {"train": "train", "val": "val", "test": "test"}

    def __init__(self, train_size: int = 512, val_size: int = 128, test_size: int = 128, max_objects: int = 4,
                 data_seed: int = 0, cache_dir: str | None = None, **kwargs: Any) -> None:
        if kwargs.get("data_root"):
            raise ValueError("shapes-det is embedded (written into cache_dir); it takes no --data-root")
        self.sizes = {"train": int_option(self.name, "train_size", train_size),
                      "val": int_option(self.name, "val_size", val_size),
                      "test": int_option(self.name, "test_size", test_size)}
        self.max_objects = int_option(self.name, "max_objects", max_objects)
        self.data_seed = int_option(self.name, "data_seed", data_seed, minimum=0)
        cache = os.path.expanduser(str(cache_dir) if cache_dir else os.path.join("~", ".cache", "pebench"))
        key = hashlib.sha1(json.dumps([_VERSION, self.sizes, self.max_objects, self.data_seed]).encode()).hexdigest()[:12]
        root = os.path.join(cache, "shapes-det", key)
        if not os.path.isdir(root):
            write_shapes_det(root, self.sizes, self.data_seed, max_objects=self.max_objects)
        self.cache_root = root
        kwargs["data_root"] = root
        super().__init__(**kwargs)

"""Shared pieces of the 2-D detection datamodules: batch format, collate, box conversions, resize + pad.

Batch contract (every detection datamodule; the ``detection`` task reads it):

* ``inputs``: ``(B, C, H, W)`` float (images) or ``(B, 2, T, H, W)`` (binned events), padded at the
  bottom / right to one size that is a multiple of the patch size;
* ``targets``: a list of ``B`` dicts, one per sample:

  =============  =========================================================================
  ``boxes``      float32 ``(n, 4)`` **xyxy** in the *input* pixel frame (after resize + pad)
  ``labels``     int64 ``(n,)`` contiguous labels ``0 .. K-1``
  ``image_id``   int, the id of the image in the dataset's COCO ground truth
  ``orig_size``  ``(h, w)`` of the original frame
  ``scale``      float: input = original x scale (padding only at bottom / right, so
                 original = input / scale)
  ``scale_xy``   optional ``(sx, sy)``: the exact per-axis factors when the resized side
                 lengths were rounded to whole pixels (the evaluator prefers them)
  =============  =========================================================================

* ``info``: ``{"skipped": n}`` (corrupt samples dropped by :func:`detection_collate`), as for
  classification (``datamodules/corrupt.py``).

Event streams as spiking-patch tokens (``tokens=spiking``,
:func:`pebench.datamodules.events.spiking.detection_spiking_collate`):
``inputs`` is a padded :class:`~pebench.datamodules.events.spiking.EventTokens` batch (volumes, coords ``(t, y,
x)``, key mask), each target also carries ``input_hw`` = the padded input ``(H, W)`` whose
``patch``-pixel cells the tokens' ``(y, x)`` index, and ``info`` adds the token-cap counts
(:data:`pebench.datamodules.events.spiking.CAP_COUNTS`).

Box formats at the boundaries: COCO files hold ``[x, y, w, h]`` in the original frame
(:func:`xywh_to_xyxy` on reading, :func:`xyxy_to_xywh` when predictions are written back for
COCOeval); the model works in xyxy input pixels; torchvision's FCOS box coder normalises the
regression targets by the anchor size itself. Images keep their aspect ratio: the longer side is
resized to the resolution ``S`` and the image is padded to ``S x S`` with zeros after normalisation
(the ViTDet recipe, Li et al. 2022), so COCO's small / medium / large bins, which are absolute
areas in the original frame, keep their meaning.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
import torchvision.transforms.v2 as v2
import torchvision.transforms.v2.functional as TF
from torch import Tensor
from torchvision import tv_tensors

__all__ = ["detection_collate", "xywh_to_xyxy", "xyxy_to_xywh", "resize_pad",
           "content_size", "to_original_frame",
           "DetectionTarget"]

DetectionTarget = dict  # see the module docstring


def xywh_to_xyxy(boxes: Tensor) -> Tensor:
    """``(n, 4)`` COCO ``[x, y, w, h]`` -> ``[x0, y0, x1, y1]``."""
    return torch.cat([boxes[:, :2], boxes[:, :2] + boxes[:, 2:]], dim=1)


def xyxy_to_xywh(boxes: Tensor) -> Tensor:
    """``(n, 4)`` ``[x0, y0, x1, y1]`` -> COCO ``[x, y, w, h]``."""
    return torch.cat([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], dim=1)


def detection_collate(batch: Sequence[Any], sample_shape: Sequence[int] | None = None
                      ) -> tuple[Tensor, list[dict], dict[str, int]]:
    """``[(input, target) | None]`` -> ``(inputs (B, ...), [target] * B, {"skipped": n})``.

    ``None`` entries (corrupt samples, see ``corrupt.py``) are dropped and counted. Inputs must
    already share one shape (the datasets pad to a fixed size); a batch of only corrupt samples
    is ``(0, *sample_shape)`` and an empty list."""
    kept = [b for b in batch if b is not None]
    skipped = len(batch) - len(kept)
    if not kept:
        shape = tuple(sample_shape) if sample_shape is not None else (0,)
        return torch.empty((0, *shape)), [], {"skipped": skipped}
    return torch.stack([b[0] for b in kept]), [b[1] for b in kept], {"skipped": skipped}


def content_size(target: dict, padded_hw: Sequence[int]) -> tuple[int, int]:
    """``(h, w)`` of the un-padded image content inside an input of size ``padded_hw``."""
    h, w = (int(v) for v in target["orig_size"])
    sx, sy = target.get("scale_xy") or (target["scale"], target["scale"])
    return (min(int(padded_hw[0]), int(round(h * float(sy)))), min(int(padded_hw[1]), int(round(w * float(sx)))))


def to_original_frame(boxes: Tensor, target: dict) -> Tensor:
    """xyxy boxes ``(n, 4)`` in the input frame -> xyxy in the original frame, clipped to it."""
    h, w = (float(v) for v in target["orig_size"])
    sx, sy = target.get("scale_xy") or (target["scale"], target["scale"])
    div = torch.tensor([sx, sy, sx, sy], dtype=boxes.dtype, device=boxes.device)
    out = boxes / div
    out[:, 0::2] = out[:, 0::2].clamp(0, w)
    out[:, 1::2] = out[:, 1::2].clamp(0, h)
    return out


def resize_pad(image: Tensor, boxes: Tensor, labels: Tensor, side: int, mean: Sequence[float],
               std: Sequence[float], flip: bool = False) -> tuple[Tensor, Tensor, Tensor, float, tuple[float, float]]:
    """uint8 ``(3, h, w)`` image + xyxy boxes in its frame -> normalised float ``(3, side, side)``
    (longer side resized to ``side``, aspect kept, zero padding at bottom / right), the boxes in
    that frame (degenerate ones dropped by :class:`~torchvision.transforms.v2.SanitizeBoundingBoxes`),
    their labels, the scale ``side / max(h, w)`` and the exact per-axis factors ``(sx, sy)``.

    ``flip``: horizontal flip first (training augmentation; the evaluation path never flips, so
    its boxes map back with ``/ scale``)."""
    h, w = int(image.shape[-2]), int(image.shape[-1])
    scale = side / max(h, w)
    nh, nw = max(1, min(side, int(round(h * scale)))), max(1, min(side, int(round(w * scale))))
    img = tv_tensors.Image(image)
    bxs = tv_tensors.BoundingBoxes(boxes, format="XYXY", canvas_size=(h, w))
    if flip:
        img, bxs = TF.horizontal_flip(img), TF.horizontal_flip(bxs)
    img = TF.resize(img, [nh, nw], antialias=True)
    bxs = TF.resize(bxs, [nh, nw])
    img = TF.normalize(TF.to_dtype(img, torch.float32, scale=True), list(mean), list(std))
    pad = [0, 0, side - nw, side - nh]  # left, top, right, bottom
    img, bxs = TF.pad(img, pad, fill=0.0), TF.pad(bxs, pad)
    out = v2.SanitizeBoundingBoxes(min_size=1.0)({"image": img, "boxes": bxs, "labels": labels})
    return (out["image"].as_subclass(Tensor), out["boxes"].as_subclass(Tensor).float(), out["labels"],
            float(scale), (nw / w, nh / h))

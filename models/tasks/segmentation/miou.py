"""Semantic-segmentation metrics from one confusion matrix: mIoU, per-class IoU, overall accuracy.

The state is torchmetrics' :class:`~torchmetrics.classification.MulticlassConfusionMatrix`
(a ``(C, C)`` sum state, rows = target, columns = prediction; ``ignore_index`` points are left
out), so the DDP reduction is exact: every point counted once on the rank that evaluated its
scene (the validation sampler splits scenes across ranks without duplicates, see
``pebench/_loaders.py``).

Definitions (IoU as in the ScanNet benchmark, Dai et al. CVPR 2017; PASCAL VOC's Jaccard index):

* ``IoU_c = TP_c / (TP_c + FP_c + FN_c)`` from the confusion matrix;
* ``mIoU``: mean of ``IoU_c`` over the classes with ``TP + FP + FN > 0`` (present in the targets or
  predicted). This is torchmetrics' ``MulticlassJaccardIndex(average="macro", ignore_index=...)``,
  which a test checks. (Pointcept averages over all classes with 0 for an absent one; on the full
  ScanNet / nuScenes validation splits every class is present and the two agree.) A class with
  ``TP + FP + FN = 0`` has IoU ``None`` in :func:`iou_from_confusion`'s per-class list.
* ``oAcc`` (overall accuracy) ``= sum_c TP_c / sum(C)``; ``mAcc`` = mean per-class recall over the
  classes present in the targets.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor
from torchmetrics.classification import MulticlassConfusionMatrix

__all__ = ["SegmentationMetrics", "iou_from_confusion"]


def iou_from_confusion(cm: Tensor) -> dict[str, Any]:
    """``(C, C)`` confusion matrix (rows target, columns prediction) -> ``{"miou", "oacc", "macc",
    "iou": [per class or None], "support": [target points per class]}`` (floats, ``nan`` when empty)."""
    cm = cm.double()
    tp = cm.diag()                           # (C,)
    union = cm.sum(0) + cm.sum(1) - tp       # (C,) TP + FP + FN
    support = cm.sum(1)                      # (C,) target points
    present = union > 0
    iou = torch.where(present, tp / union.clamp_min(1), torch.zeros_like(tp))
    total = cm.sum()
    miou = float(iou[present].mean()) if bool(present.any()) else float("nan")
    has = support > 0
    macc = float((tp[has] / support[has]).mean()) if bool(has.any()) else float("nan")
    oacc = float(tp.sum() / total) if total > 0 else float("nan")
    return {"miou": miou, "oacc": oacc, "macc": macc,
            "iou": [float(v) if p else None for v, p in zip(iou.tolist(), present.tolist())],
            "support": [int(v) for v in support.tolist()]}


class SegmentationMetrics(MulticlassConfusionMatrix):
    """Point-wise segmentation metrics over a run's batches (exact across DDP ranks).

    ``update(preds, target)``: ``preds`` ``(...,)`` class indices or ``(..., C)`` logits, ``target``
    ``(...,)`` with ``ignore_index`` for padding and unlabelled points. ``compute()`` -> a dict of
    scalar tensors ``{"miou", "oacc", "macc"}`` (what ``self.log_dict`` takes);
    :meth:`summary` -> :func:`iou_from_confusion` with the class names.
    """

    def __init__(self, num_classes: int, ignore_index: int = -1, class_names: Sequence[str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(num_classes=num_classes, ignore_index=ignore_index, **kwargs)
        if class_names is not None and len(class_names) != num_classes:
            raise ValueError(f"{len(class_names)} class names for {num_classes} classes")
        self.class_names = list(class_names) if class_names is not None else [str(i) for i in range(num_classes)]

    def update(self, preds: Tensor, target: Tensor) -> None:  # type: ignore[override]
        if preds.dim() == target.dim() + 1:
            preds = preds.argmax(-1)
        super().update(preds.reshape(-1), target.reshape(-1))

    def compute(self) -> dict[str, Tensor]:  # type: ignore[override]
        r = iou_from_confusion(super().compute())
        return {k: torch.tensor(r[k], dtype=torch.float32) for k in ("miou", "oacc", "macc")}

    def summary(self) -> dict[str, Any]:
        """mIoU, oAcc, mAcc, and per-class IoU / support keyed by class name (from the reduced state)."""
        r = iou_from_confusion(super().compute())
        return {"miou": r["miou"], "oacc": r["oacc"], "macc": r["macc"],
                "iou_per_class": dict(zip(self.class_names, r["iou"])),
                "support_per_class": dict(zip(self.class_names, r["support"]))}

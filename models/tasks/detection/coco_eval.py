"""COCO box mAP with pycocotools' ``COCOeval`` (Lin et al. 2014), exact across DDP ranks.

:class:`CocoEvaluator` collects the detections of an evaluation pass (``update`` per batch, with
the model's xyxy boxes in the input frame and the batch's targets, see
``datamodules/detection_common.py``), maps them to the **original image frame** (``/ scale``,
clipped to the image) and to the dataset's own **category ids** (``label_to_category_id``), and
converts them to COCO's ``[x, y, w, h]`` result format. ``compute`` gathers every rank's
detections and image ids (``all_gather_object``), evaluates once on global rank 0 with
``COCOeval(iouType="bbox")`` restricted to the images that were evaluated (each counted once,
whichever rank saw it; a full pass is exactly the split), and broadcasts the numbers, so every
rank logs the same values.

Ground truth is the dataset's own annotation (``datamodule.coco_gt(split)``): crowd regions stay
``iscrowd=1`` and COCOeval ignores detections matched to them instead of counting them as false
positives; images without any annotation count only through their false positives.

Metrics (COCOeval ``stats[0:6]``): ``map`` (AP@[.50:.95]), ``map_50``, ``map_75``, ``map_small``,
``map_medium``, ``map_large``. COCOeval reports -1 for an area bin without ground truth; that is
returned as NaN (``null`` in results.json). With no detections at all every AP is 0 where there is
ground truth (``COCO.loadRes`` cannot take an empty list, so this case is not sent to it).

Optional dataset hook: ``filter_predictions(boxes_xyxy_original, scores, labels) -> (boxes, scores,
labels)`` is applied to each image's detections in the original frame before evaluation (the
Prophesee protocol's size filter on GEN1).
"""
from __future__ import annotations

import contextlib
import io
import math
from typing import Any, Callable, Sequence

import torch
from pycocotools.cocoeval import COCOeval
from torch import Tensor

from pebench.datamodules.detection_common import to_original_frame, xyxy_to_xywh

__all__ = ["CocoEvaluator", "coco_map", "detections_to_coco", "METRIC_NAMES"]

#: metric name -> index in COCOeval.stats
METRIC_NAMES = {"map": 0, "map_50": 1, "map_75": 2, "map_small": 3, "map_medium": 4, "map_large": 5}


def detections_to_coco(detections: Sequence[dict], targets: Sequence[dict], label_to_category_id: Sequence[int],
                       filter_predictions: Callable | None = None) -> list[dict]:
    """Model detections (``boxes`` xyxy input frame, ``scores``, ``labels`` contiguous) of a batch ->
    COCO result dicts ``{"image_id", "category_id", "bbox": [x, y, w, h], "score"}`` in the original
    frame."""
    cat_ids = torch.as_tensor(list(label_to_category_id), dtype=torch.int64)
    out: list[dict] = []
    for det, tgt in zip(detections, targets):
        boxes = to_original_frame(det["boxes"].detach().float().cpu(), tgt)
        scores, labels = det["scores"].detach().float().cpu(), det["labels"].detach().cpu().long()
        if filter_predictions is not None:
            boxes, scores, labels = filter_predictions(boxes, scores, labels)
        keep = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])  # zero-area after clipping
        boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
        xywh = xyxy_to_xywh(boxes).tolist()
        cats = cat_ids[labels].tolist()
        image_id = int(tgt["image_id"])
        out.extend({"image_id": image_id, "category_id": int(c), "bbox": [float(v) for v in b], "score": float(s)}
                   for b, c, s in zip(xywh, cats, scores.tolist()))
    return out


def coco_map(coco_gt: Any, results: list[dict], image_ids: Sequence[int]) -> dict[str, float]:
    """COCOeval (bbox) of ``results`` against ``coco_gt`` on ``image_ids``; -> :data:`METRIC_NAMES`
    values (NaN where COCOeval says -1, i.e. no ground truth in that bin)."""
    ids = sorted({int(i) for i in image_ids})
    if not ids:
        raise ValueError("coco_map: no images were evaluated")
    has_gt = any(not a.get("iscrowd", 0) for i in ids for a in coco_gt.imgToAnns.get(i, []))
    if not results:
        # COCO.loadRes cannot take an empty list; no detection = AP 0 wherever there is ground truth
        return {k: (0.0 if has_gt else math.nan) for k in METRIC_NAMES}
    with contextlib.redirect_stdout(io.StringIO()):
        dt = coco_gt.loadRes([dict(r) for r in results])  # loadRes adds ids / areas in place
        ev = COCOeval(coco_gt, dt, iouType="bbox")
        ev.params.imgIds = ids
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return {k: (float(ev.stats[i]) if ev.stats[i] >= 0 else math.nan) for k, i in METRIC_NAMES.items()}


def _dist() -> tuple[bool, int, int]:
    d = torch.distributed
    if d.is_available() and d.is_initialized():
        return True, d.get_rank(), d.get_world_size()
    return False, 0, 1


class CocoEvaluator:
    """Detections of one evaluation pass -> COCO mAP (see the module docstring). Not a
    ``torchmetrics.Metric``: its state is a list of Python dicts, gathered as objects."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.results: list[dict] = []
        self.image_ids: list[int] = []

    def update(self, detections: Sequence[dict], targets: Sequence[dict], label_to_category_id: Sequence[int],
               filter_predictions: Callable | None = None) -> None:
        self.results.extend(detections_to_coco(detections, targets, label_to_category_id, filter_predictions))
        self.image_ids.extend(int(t["image_id"]) for t in targets)

    def compute(self, coco_gt: Any) -> tuple[dict[str, float], int]:
        """-> (metrics, number of distinct images evaluated); identical on every rank."""
        dist, rank, world = _dist()
        results, ids = self.results, self.image_ids
        if dist and world > 1:
            gathered: list[Any] = [None] * world
            torch.distributed.all_gather_object(gathered, (results, ids))
            results = [r for g in gathered for r in g[0]]
            ids = [i for g in gathered for i in g[1]]
        out: list[Any] = [None]
        if rank == 0:
            n = len(set(ids))
            out[0] = (coco_map(coco_gt, results, ids) if n else {k: math.nan for k in METRIC_NAMES}, n)
        if dist and world > 1:
            torch.distributed.broadcast_object_list(out, src=0)
        return out[0]


def as_tensor_dict(metrics: dict[str, float], device: torch.device | None = None) -> dict[str, Tensor]:
    return {k: torch.tensor(v, device=device) for k, v in metrics.items()}

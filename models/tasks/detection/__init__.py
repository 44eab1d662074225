"""The ``detection`` task: 2-D object detection on the ViT's token map.

* :mod:`.module`: :class:`DetectionTask` (the LightningModule) and :func:`scatter_token_map`;
* :mod:`.pyramid`: the simple feature pyramid and torchvision's FCOS head (:class:`Detector`);
* :mod:`.coco_eval`: COCO mAP in the original image frame (:class:`CocoEvaluator`);
* :mod:`.shift`: robustness (FS on mAP) and resolution extrapolation (mAP per input side);
* :mod:`.setup`: ``bench run --task detection`` (:class:`DetectionSetup`, registered on import).
"""
from .coco_eval import CocoEvaluator
from .module import DetectionTask, scatter_token_map
from .pyramid import Detector
from .setup import DETECTION_OPTIONS, DetectionSetup

__all__ = ["CocoEvaluator", "DetectionTask", "scatter_token_map", "Detector", "DETECTION_OPTIONS", "DetectionSetup"]

"""The ``segmentation`` task: per-point labels of 3-D scenes from the ViT's patch tokens.

* :mod:`.module`: :class:`SegmentationTask` (the LightningModule);
* :mod:`.miou`: mIoU / overall accuracy from one confusion matrix (:class:`SegmentationMetrics`);
* :mod:`.shift`: robustness (FS on mIoU) and extrapolation (denser sampling, tiled scenes);
* :mod:`.setup`: ``bench run --task segmentation`` (:class:`SegmentationSetup`, registered on import) and its
  task options.
"""
from .miou import SegmentationMetrics
from .module import SegmentationTask
from .setup import SEGMENTATION_DEFAULTS, SegmentationSetup

__all__ = ["SegmentationMetrics", "SEGMENTATION_DEFAULTS", "SegmentationTask", "SegmentationSetup"]

"""The ``classification`` task: :class:`ClassificationTask` (the LightningModule the other tasks build
on: tokenizer, backbone, optimiser, skipped-sample count) and its setup (:mod:`.setup`)."""
from .module import ClassificationTask, NonFiniteLossError, SkippedSampleCount, build_tokenizer, split_batch
from .setup import ClassificationSetup

__all__ = ["ClassificationTask", "NonFiniteLossError", "SkippedSampleCount", "build_tokenizer", "split_batch",
           "ClassificationSetup"]

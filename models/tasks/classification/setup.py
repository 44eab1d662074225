"""``bench run --task classification`` (the default of every dataset that names no other task): build
:class:`~.module.ClassificationTask` from a RunConfig.

Every analysis applies; robustness (FS on top-1 accuracy) and extrapolation (top-1 per input size)
are the classification versions in :mod:`pebench.analysis` (the default ``analysis_hooks``).
Primary metric: ``test/acc1`` for datasets with a held-out test split, else ``val/acc1``.
"""
from __future__ import annotations

from typing import Any

from pebench.tasks.base import TaskSetup, register_task

from .module import ClassificationTask

__all__ = ["ClassificationSetup"]


@register_task("classification")
class ClassificationSetup(TaskSetup):
    """Supervised classification: cross-entropy on the pooled token (:class:`~.module.ClassificationTask`)."""

    def build(self, cfg: Any, dm: Any, grid: Any) -> ClassificationTask:
        return ClassificationTask(
            modality=dm.modality, num_classes=dm.num_classes, in_chans=dm.in_chans, model=cfg.model, pe=cfg.pe,
            pe_options=cfg.pe_options, patch_size=dm.patch_size, tubelet=dm.tubelet, num_groups=dm.num_groups,
            train_grid=grid, class_token=cfg.class_token, pool=cfg.pool, lr=cfg.lr, weight_decay=cfg.weight_decay,
            warmup_epochs=cfg.warmup_epochs, epochs=cfg.epochs, label_smoothing=cfg.label_smoothing, rpt=cfg.rpt,
            layer_decay=cfg.layer_decay, drop_path=cfg.drop_path, tokens=getattr(dm, "tokens", "frames"),
            lr_schedule=cfg.lr_schedule,
            tokenizer_options=dm.tokenizer_options() if hasattr(dm, "tokenizer_options") else None)

    def primary_metric(self, dm: Any) -> str:
        return "test/acc1" if getattr(dm, "has_test_split", False) else "val/acc1"

    def checkpoint_class(self) -> type:
        return ClassificationTask

"""``bench run --task detection``: the detection task (:class:`~.module.DetectionTask`) from a RunConfig.

Run options keep their meaning (``lr`` the AdamW peak learning rate, ``weight_decay``,
``warmup_epochs``, ``layer_decay``, ``drop_path``, ``resolution`` the padded square input side).
Detector settings are ``--task-option KEY=VALUE``, declared in :data:`DETECTION_OPTIONS`: ``fpn_dim`` (pyramid
channels; default the backbone width), ``pyramid_levels`` (3: strides p/2, p, 2p; 4 adds 4p),
``head_convs`` (convolutions per FCOS tower; 4 in FCOS), ``score_thresh`` / ``nms_thresh`` /
``detections_per_img`` / ``topk_candidates`` (post-processing; COCO-style 0.05 / 0.6 / 100 / 1000),
``center_sampling_radius`` (FCOS, 1.5). A datamodule may change these defaults with a
``detection_defaults`` class attribute (``shapes-det``: ``fpn_dim=64, head_convs=2``); the values
used are the task's saved hyper-parameters.

Primary metric ``val/map`` (COCO mAP@[.5:.95] in the original frame); datasets with a held-out test
split also report ``test/map``. Analyses (robustness / extrapolation: :mod:`.shift`): ``geometry`` (SSDC /
EED on the backbone tokens); ``robustness`` (FS on mAP under JPEG q5 / blur σ 2.5 of the validation
images, undefined below clean mAP 0.01); ``extrapolation`` (mAP at larger input sides, default
``S, 1.5S, 2S``, each PE with its native rule). All three are in the default set. ``alpha`` (the α
sweep reads class accuracy) does not apply: asking for it by name is a one-line error.
"""
from __future__ import annotations

from typing import Any

from pebench.analysis.evaluators import ANALYSIS_NAMES, TaskAnalyses
from pebench.core.errors import ConfigError
from pebench.core.options import Option
from pebench.tasks.base import TaskSetup, analyses_except, register_task

from . import shift
from .module import DetectionTask

__all__ = ["DETECTION_OPTIONS", "DetectionSetup", "build_detection_task", "detection_analyses", "DETECTION_ANALYSES"]

#: the ``--task-option`` keys of the detector (defaults as in FCOS, Tian et al., ICCV 2019, and torchvision's FCOS)
DETECTION_OPTIONS: tuple[Option, ...] = (
    Option("fpn_dim", "int", None, "pyramid channels, a multiple of 32 (FCOS's GroupNorm(32))", minimum=32,
           none_means="the backbone width"),
    Option("pyramid_levels", "int", 3, "pyramid levels: 3 (strides p/2, p, 2p) or 4 (adds 4p)", choices=(3, 4)),
    Option("head_convs", "int", 4, "convolutions per FCOS tower (4 in FCOS)", minimum=0),
    Option("score_thresh", "float", 0.05, "post-processing: lowest score kept", minimum=0.0, maximum=1.0),
    Option("nms_thresh", "float", 0.6, "post-processing: IoU of non-maximum suppression", minimum=0.0, maximum=1.0),
    Option("detections_per_img", "int", 100, "post-processing: detections kept per image", minimum=1),
    Option("topk_candidates", "int", 1000, "post-processing: candidates per level before NMS", minimum=1),
    Option("center_sampling_radius", "float", 1.5, "FCOS centre sampling radius (in strides)", minimum=0.0,
           minimum_inclusive=False),
)


def _options(cfg: Any, dm: Any = None) -> dict[str, Any]:
    """The detector's options: declared defaults < the dataset's ``detection_defaults`` < ``--task-option``."""
    opts = DetectionSetup().option_values({**dict(getattr(dm, "detection_defaults", None) or {}), **cfg.task_options})
    if opts["fpn_dim"] is not None and opts["fpn_dim"] % 32:
        raise ConfigError(f"--task-option fpn_dim must be a positive multiple of 32 (FCOS's GroupNorm(32)), "
                          f"got {opts['fpn_dim']}")
    return opts


def build_detection_task(cfg: Any, dm: Any, grid: Any) -> DetectionTask:
    if cfg.pool != "mean":
        raise ConfigError("--pool does not apply to --task detection (it reads the token map, not a pooled token)")
    if cfg.rpt:
        raise ConfigError("--rpt is not implemented for --task detection")
    return DetectionTask(modality=dm.modality, num_classes=dm.num_classes, in_chans=dm.in_chans, model=cfg.model,
                         pe=cfg.pe, pe_options=cfg.pe_options, patch_size=dm.patch_size,
                         tubelet=getattr(dm, "tubelet", 2), train_grid=grid, class_token=cfg.class_token,
                         lr=cfg.lr, weight_decay=cfg.weight_decay, warmup_epochs=cfg.warmup_epochs,
                         epochs=cfg.epochs, layer_decay=cfg.layer_decay, drop_path=cfg.drop_path, lr_schedule=cfg.lr_schedule,
                         tokens=getattr(dm, "tokens", "frames"),  # spiking: tokens scattered into their cells
                         tokenizer_options=dm.tokenizer_options() if hasattr(dm, "tokenizer_options") else None,
                         **_options(cfg, dm))


#: geometry, robustness (FS on mAP) and extrapolation (mAP per input side) apply; the α sweep does not
detection_analyses = analyses_except("detection", {"alpha": "the alpha sweep reads class accuracy"},
                                     every=ANALYSIS_NAMES)

#: robustness (FS on mAP) and extrapolation (mAP per input side) of :mod:`.shift`; sizes are checked as
#: for classification
DETECTION_ANALYSES = TaskAnalyses(robustness=shift.robustness, default_resolutions=shift.default_resolutions,
                                  evaluate_extrapolation=shift.evaluate_extrapolation)


@register_task("detection")
class DetectionSetup(TaskSetup):
    """2-D object detection: ViT backbone -> pyramid -> FCOS head (:class:`~.module.DetectionTask`)."""

    options = DETECTION_OPTIONS
    dense = True
    accepts = ("boxes",)
    modalities = ("image", "events")

    def build(self, cfg: Any, dm: Any, grid: Any) -> DetectionTask:
        return build_detection_task(cfg, dm, grid)

    def primary_metric(self, dm: Any) -> str:
        return "val/map"

    def analyses(self, names: list[str], explicit: bool) -> list[str]:
        return detection_analyses(names, explicit)

    def extra_results(self, task: Any) -> dict[str, Any]:
        """Distinct images of each split that the last COCOeval saw (every image once, DDP included)."""
        return {"detection_images": dict(task.images_evaluated)}

    def analysis_hooks(self) -> TaskAnalyses:
        return DETECTION_ANALYSES

    def checkpoint_class(self) -> type:
        return DetectionTask

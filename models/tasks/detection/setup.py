"""``bench run --task detection``: the detection task (:class:`~.module.DetectionTask`) from a RunConfig.

Run options keep their meaning (``lr`` the AdamW peak learning rate, ``weight_decay``,
``warmup_epochs``, ``layer_decay``, ``drop_path``, ``resolution`` the padded square input side).
Detector settings are ``--task-option KEY=VALUE`` (:data:`DETECTION_OPTIONS`): ``fpn_dim`` (pyramid
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
from pebench.tasks.base import TaskSetup, analyses_except, register_task

from . import shift
from .module import DetectionTask

__all__ = ["DETECTION_OPTIONS", "DetectionSetup", "build_detection_task", "detection_analyses", "DETECTION_ANALYSES"]

#: task option -> default (None: derived, see the module docstring)
DETECTION_OPTIONS: dict[str, Any] = {
    "fpn_dim": None, "pyramid_levels": 3, "head_convs": 4, "score_thresh": 0.05, "nms_thresh": 0.6,
    "detections_per_img": 100, "topk_candidates": 1000, "center_sampling_radius": 1.5,
}
_INT = ("fpn_dim", "pyramid_levels", "head_convs", "detections_per_img", "topk_candidates")


def _options(cfg: Any, dm: Any = None) -> dict[str, Any]:
    unknown = sorted(set(cfg.task_options) - set(DETECTION_OPTIONS))
    if unknown:
        raise ConfigError(f"unknown task option {unknown[0]!r} for --task detection; available: "
                          f"{', '.join(DETECTION_OPTIONS)}")
    # a dataset may set its own defaults (``detection_defaults``); --task-option overrides them
    opts = {**DETECTION_OPTIONS, **dict(getattr(dm, "detection_defaults", None) or {}), **cfg.task_options}
    for k, v in opts.items():
        if v is None:
            continue
        try:
            opts[k] = int(v) if k in _INT else float(v)
        except (TypeError, ValueError):
            raise ConfigError(f"--task-option {k} must be a number, got {v!r}") from None
        if k in _INT and (isinstance(v, float) and not float(v).is_integer()):
            raise ConfigError(f"--task-option {k} must be an integer, got {v!r}")
    if opts["fpn_dim"] is not None and (opts["fpn_dim"] < 32 or opts["fpn_dim"] % 32):
        raise ConfigError(f"--task-option fpn_dim must be a positive multiple of 32 (FCOS's GroupNorm(32)), "
                          f"got {opts['fpn_dim']}")
    if opts["pyramid_levels"] not in (3, 4):
        raise ConfigError(f"--task-option pyramid_levels must be 3 or 4, got {opts['pyramid_levels']}")
    for k in ("head_convs", "detections_per_img", "topk_candidates"):
        if opts[k] < (0 if k == "head_convs" else 1):
            raise ConfigError(f"--task-option {k} must be >= {0 if k == 'head_convs' else 1}, got {opts[k]}")
    for k in ("score_thresh", "nms_thresh"):
        if not 0.0 <= opts[k] <= 1.0:
            raise ConfigError(f"--task-option {k} must be in [0, 1], got {opts[k]}")
    if opts["center_sampling_radius"] <= 0:
        raise ConfigError(f"--task-option center_sampling_radius must be > 0, got {opts['center_sampling_radius']}")
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

    options = tuple(DETECTION_OPTIONS)
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

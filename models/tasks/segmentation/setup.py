"""``bench run --task segmentation``: build :class:`~.module.SegmentationTask`
from a RunConfig and a scene datamodule (``scannet``, ``primitives-scene``, ``nuscenes``).

Run options map as for classification (``lr``, ``weight_decay``, ``warmup_epochs``, ``drop_path``,
``rpt``); ``--class-token`` does not apply (per-point predictions come from the patch tokens).
``--task-option KEY=VALUE`` (declared in :data:`SEGMENTATION_OPTIONS`):

* ``patching``: ``serialize`` (z-order serialization, default) or ``fps`` (FPS + kNN);
* ``patch_size``: points per patch ``K`` (default: the dataset's, ``tokenizer_options()["patch_size"]``:
  scannet 64, primitives-scene 16; else 32);
* ``coord_scale``: factor on the token centres (metres) the PE sees (1.0: metres);
* ``interp_k``: token centres interpolated per point (3);
* ``attn_window``: tokens per attention window (default none: full attention over a scene's tokens;
  an integer >= 2 windows the z-order token sequence, needs ``patching=serialize``; README "3-D scene
  segmentation").

Analyses (robustness / extrapolation: :mod:`.shift`): ``geometry`` (SSDC with the Euclidean distance
between token centres in metres x ``coord_scale``, per scene; EED); ``robustness`` (FS on mIoU under
point jitter, σ = half the grid-sampling voxel in metres, and point dropout p = 0.5; undefined when
the clean mIoU is not above the majority-class predictor's); ``extrapolation`` (mIoU with 2x / 4x
denser sampling and with 2 / 4 validation scenes tiled into one larger scene, settings ``FxK``). All
three are in the default set. ``alpha`` (the α sweep reads whole-sample class accuracy) does not
apply: an explicit request is a :class:`ConfigError`.

``results.json`` gains ``segmentation``: class names, per-class IoU and support of the final
validation (and test) pass, the ignore index, the coordinate unit and the tokenizer settings.
"""
from __future__ import annotations

from typing import Any

from pebench.analysis.evaluators import ANALYSIS_NAMES, TaskAnalyses
from pebench.core.errors import ConfigError
from pebench.core.options import Option
from pebench.models.scene_tokenizer import PATCHINGS
from pebench.tasks.base import TaskSetup, analyses_except, register_task

from . import shift
from .module import SegmentationTask

__all__ = ["SegmentationSetup", "SEGMENTATION_OPTIONS", "SEGMENTATION_DEFAULTS", "build_segmentation_task",
           "segmentation_analyses", "segmentation_options",
           "SEGMENTATION_ANALYSES"]


#: the ``--task-option`` keys of the segmentation task (see the module docstring)
SEGMENTATION_OPTIONS: tuple[Option, ...] = (
    Option("patching", "str", "serialize", "serialize (z-order serialization) or fps (FPS + kNN)", choices=PATCHINGS),
    Option("patch_size", "int", None, "points per patch K", minimum=1,
           none_means="the dataset's (tokenizer_options), else 32"),
    Option("coord_scale", "float", 1.0, "factor on the token centres (metres) the PE sees", minimum=0.0,
           minimum_inclusive=False),
    Option("interp_k", "int", 3, "token centres interpolated per point", minimum=1),
    Option("attn_window", "int", None, "tokens per attention window (an integer >= 2; needs patching=serialize)",
           none_means="full attention over a scene's tokens"),
)
#: task option -> its default (``patch_size`` None: the datamodule's ``tokenizer_options()["patch_size"]``, else 32)
SEGMENTATION_DEFAULTS: dict[str, Any] = {o.name: o.default for o in SEGMENTATION_OPTIONS}


def segmentation_options(cfg: Any, dm: Any = None) -> dict[str, Any]:
    """``cfg.task_options`` over the declared defaults, checked (one-line :class:`ConfigError`)."""
    opts = SegmentationSetup().option_values(cfg.task_options)
    if opts["patch_size"] is None:
        tok = dm.tokenizer_options() if hasattr(dm, "tokenizer_options") else {}
        opts["patch_size"] = tok.get("patch_size", 32)
    return opts


def build_segmentation_task(cfg: Any, dm: Any, grid: Any) -> SegmentationTask:
    if getattr(dm, "default_task", None) != "segmentation" or not hasattr(dm, "feat_dim"):
        raise ConfigError(f"--task segmentation needs a scene dataset (scannet, primitives-scene, nuscenes), "
                          f"got {cfg.dataset!r}")
    if cfg.class_token:
        raise ConfigError("--class-token does not apply to --task segmentation (per-point predictions use the patch tokens)")
    opts = segmentation_options(cfg, dm)
    tok = dm.tokenizer_options() if hasattr(dm, "tokenizer_options") else {}
    return SegmentationTask(num_classes=dm.num_classes, feat_dim=int(dm.feat_dim),
                            class_names=list(getattr(dm, "class_names", [])) or None,
                            ignore_index=int(getattr(dm, "ignore_index", -1)), model=cfg.model, pe=cfg.pe,
                            pe_options=cfg.pe_options, patching=opts["patching"], patch_size=opts["patch_size"],
                            grid_size=float(tok.get("grid_size", 0.05)), coord_scale=opts["coord_scale"],
                            interp_k=opts["interp_k"], lr=cfg.lr, weight_decay=cfg.weight_decay,
                            warmup_epochs=cfg.warmup_epochs, epochs=cfg.epochs, drop_path=cfg.drop_path,
                            rpt=cfg.rpt, coord_unit=str(getattr(dm, "coord_unit", "m")),
                            attn_window=opts["attn_window"], lr_schedule=cfg.lr_schedule)


#: geometry, robustness (FS on mIoU) and extrapolation (mIoU per scene setting) apply; the α sweep does not
segmentation_analyses = analyses_except("segmentation", {"alpha": "the alpha sweep reads whole-sample class accuracy"},
                                        every=ANALYSIS_NAMES)

#: robustness (FS on mIoU) and extrapolation (mIoU per ``FxK`` scene setting) of :mod:`.shift`
SEGMENTATION_ANALYSES = TaskAnalyses(robustness=shift.robustness, default_resolutions=shift.default_resolutions,
                                     check_resolutions=shift.check_resolutions,
                                     evaluate_extrapolation=shift.evaluate_extrapolation)


def _extra_results(task: Any) -> dict[str, Any]:
    hp = task.hparams
    out: dict[str, Any] = {"class_names": list(task.val_metrics.class_names), "ignore_index": int(hp.ignore_index),
                           "coord_unit": hp.coord_unit, "tokenizer": task.tokenizer.describe(),
                           "interp_k": int(hp.interp_k), "attention": "full (all tokens of a scene, key-masked)"
                           if hp.get("attn_window") is None else f"windowed ({hp.attn_window} z-order tokens, "
                           f"shifted by {hp.attn_window // 2} on odd blocks)"}
    for split, s in task.last_summary.items():
        out[f"{split}_iou_per_class"] = s["iou_per_class"]
        out[f"{split}_support_per_class"] = s["support_per_class"]
    return {"segmentation": out}


@register_task("segmentation")
class SegmentationSetup(TaskSetup):
    """3-D scene segmentation: per-point labels from patch tokens (:class:`~.module.SegmentationTask`)."""

    options = SEGMENTATION_OPTIONS
    dense = True
    accepts = ("point-labels",)
    modalities = ("points",)

    def build(self, cfg: Any, dm: Any, grid: Any) -> SegmentationTask:
        return build_segmentation_task(cfg, dm, grid)

    def primary_metric(self, dm: Any) -> str:
        return "test/miou" if getattr(dm, "has_test_split", False) else "val/miou"

    def analyses(self, names: list[str], explicit: bool) -> list[str]:
        return segmentation_analyses(names, explicit)

    def extra_results(self, task: Any) -> dict[str, Any]:
        return _extra_results(task)

    def analysis_hooks(self) -> TaskAnalyses:
        return SEGMENTATION_ANALYSES

    def checkpoint_class(self) -> type:
        return SegmentationTask

"""``bench run --task dino``: build the DINO task and its multi-crop datamodule from a RunConfig.

Run options map onto the recipe (Caron et al., ICCV 2021) as follows: ``lr`` is the learning rate
per 256 samples (peak = ``lr x batch_size / 256``, the linear scaling rule), ``weight_decay`` the
start of the weight-decay cosine (end: ``weight_decay_end``), ``warmup_epochs`` the lr warm-up,
``drop_path`` the student's stochastic depth, ``resolution`` the global-crop size. Everything else
is a ``task_options`` key (``--task-option KEY=VALUE``), see :data:`DINO_OPTIONS`.

Per-dataset crop geometry (global px, local px, patch px) when not given: CIFAR-100 and the
embedded sets 32 / 16 / 4, Tiny ImageNet 64 / 32 / 8, UC Merced 224 / 96 / 16, others the
dataset's resolution, half of it, and its patch size.
"""
from __future__ import annotations

from typing import Any

from pebench.analysis.evaluators import ANALYSIS_NAMES
from pebench.core.errors import ConfigError
from pebench.tasks.base import TaskSetup, analyses_except, register_task

from .module import DinoTask
from .multicrop import DinoDataModule

__all__ = ["DINO_OPTIONS", "CROP_GEOMETRY", "DinoSetup", "prepare_dino_data", "build_dino_task", "dino_analyses"]

#: task option -> default (None: derived, see the module docstring)
DINO_OPTIONS: dict[str, Any] = {
    "global_size": None, "local_size": None, "n_local": 6, "patch_size": None,
    "global_scale": [0.4, 1.0], "local_scale": [0.05, 0.4], "colour_jitter": [0.4, 0.4, 0.2, 0.1], "grayscale_p": 0.2,
    "out_dim": 65536, "head_hidden": 2048, "head_bottleneck": 256, "head_bn": False,
    "min_lr": 1e-6, "weight_decay_end": 0.4, "momentum_teacher": 0.996, "teacher_temp": 0.07,
    "warmup_teacher_temp": 0.04, "warmup_teacher_temp_epochs": None, "student_temp": 0.1,
    "center_momentum": 0.9, "clip_grad": 3.0, "freeze_last_layer": 1,
    "knn_k": 20, "knn_temperature": 0.07, "linear_probe": True, "eed_every": 1, "eed_probe_size": 256,
    "init_eval": True,
}

#: dataset -> (global size, local size, patch size)
CROP_GEOMETRY = {"cifar100": (32, 16, 4), "objects": (32, 16, 4), "textures": (32, 16, 4),
                 "tiny-imagenet": (64, 32, 8), "ucmerced": (224, 96, 16)}


def _options(cfg: Any) -> dict[str, Any]:
    unknown = sorted(set(cfg.task_options) - set(DINO_OPTIONS))
    if unknown:
        raise ConfigError(f"unknown task option {unknown[0]!r} for --task dino; available: {', '.join(DINO_OPTIONS)}")
    opts = {**DINO_OPTIONS, **cfg.task_options}
    if not isinstance(opts["head_bn"], bool):
        raise ConfigError(f"--task dino: head_bn must be true or false, got {opts['head_bn']!r}")
    return opts


def prepare_dino_data(cfg: Any, dm: Any) -> Any:
    """The dataset's datamodule -> a :class:`~.multicrop.DinoDataModule`
    (patch size and crop sizes resolved; sizes checked against the patch size)."""
    opts = _options(cfg)
    if dm.modality != "image":
        raise ConfigError(f"--task dino needs an image dataset; {cfg.dataset!r} is {dm.modality} data")
    g0, l0, p0 = CROP_GEOMETRY.get(cfg.dataset, (None, None, None))
    patch = int(opts["patch_size"] or p0 or dm.patch_size)
    res = tuple(dm.resolution)
    if len(res) == 2 and res[0] != res[1]:
        raise ConfigError("--task dino uses square crops; give --resolution as one side length")
    if cfg.resolution is None and g0 is not None and opts["global_size"] is None:
        dm.resolution = (g0,)
    global_size = int(opts["global_size"] or dm.resolution[0])
    dm.resolution = (global_size,)
    local_size = int(opts["local_size"] or (l0 if g0 == global_size and l0 else global_size // 2))
    for what, s in (("global crop", global_size), ("local crop", local_size)):
        if s < patch or s % patch:
            raise ConfigError(f"--task dino: the {what} size {s} is not a positive multiple of the patch size {patch}; "
                              f"set --resolution / --task-option local_size=... / patch_size=...")
    if int(opts["n_local"]) < 0:
        raise ConfigError(f"--task dino: n_local must be >= 0, got {opts['n_local']}")
    jitter, gray = opts["colour_jitter"], opts["grayscale_p"]
    if (not isinstance(jitter, (list, tuple)) or len(jitter) != 4
            or not all(isinstance(v, (int, float)) and v >= 0 for v in jitter) or jitter[3] > 0.5):
        raise ConfigError(f"--task dino: colour_jitter must be [brightness, contrast, saturation, hue], each >= 0 and "
                          f"hue <= 0.5; got {jitter!r}")
    if not isinstance(gray, (int, float)) or not 0 <= gray <= 1:
        raise ConfigError(f"--task dino: grayscale_p must be a probability in [0, 1], got {gray!r}")
    dm.patch_size = patch  # instance attribute: the tokenizer and train_grid_for read it
    return DinoDataModule(dm, global_size, local_size, int(opts["n_local"]), tuple(opts["global_scale"]),
                          tuple(opts["local_scale"]), tuple(float(v) for v in jitter), float(gray))


def build_dino_task(cfg: Any, dm: Any, grid: Any) -> DinoTask:
    if cfg.lr_schedule != "cosine":
        raise ConfigError("--lr-schedule does not apply to --task dino (its lr, weight decay and teacher momentum "
                          "follow DINO's own cosine schedules)")
    opts = _options(cfg)
    keep = {k: v for k, v in opts.items() if k not in ("global_size", "local_size", "n_local", "patch_size",
                                                        "global_scale", "local_scale", "colour_jitter", "grayscale_p")}
    return DinoTask(modality=dm.modality, num_classes=dm.num_classes, in_chans=dm.in_chans, model=cfg.model,
                    pe=cfg.pe, pe_options=cfg.pe_options, patch_size=dm.patch_size, train_grid=grid,
                    class_token=cfg.class_token, pool=cfg.pool, lr=cfg.lr, batch_size=cfg.batch_size,
                    weight_decay=cfg.weight_decay, warmup_epochs=cfg.warmup_epochs, epochs=cfg.epochs,
                    drop_path=cfg.drop_path, **keep)


#: of the analyses ``all`` runs only ``geometry`` applies (the others read class logits); those that read only the
#: backbone (``attention``, ``coord-robustness``) run when named
dino_analyses = analyses_except("dino", {a: "it reads class logits" for a in ("robustness", "alpha", "extrapolation")},
                                every=ANALYSIS_NAMES)


@register_task("dino")
class DinoSetup(TaskSetup):
    """Self-supervised DINO pre-training with a k-NN / linear-probe evaluation (:class:`~.module.DinoTask`)."""

    options = tuple(DINO_OPTIONS)
    accepts = ("class",)  # the labels serve the k-NN / linear-probe evaluation only
    modalities = ("image",)

    def build(self, cfg: Any, dm: Any, grid: Any) -> DinoTask:
        return build_dino_task(cfg, dm, grid)

    def primary_metric(self, dm: Any) -> str:
        return "test/knn_top1"

    def prepare_data(self, cfg: Any, dm: Any) -> DinoDataModule:
        return prepare_dino_data(cfg, dm)

    def analyses(self, names: list[str], explicit: bool) -> list[str]:
        return dino_analyses(names, explicit)

    def extra_results(self, task: Any) -> dict[str, Any]:
        """EED% / SSDC per layer at each checkpoint (:meth:`~.module.DinoTask._record_eed`)."""
        return {"eed_checkpoints": task.eed_history}

"""``bench run --task dino``: build the DINO task and its multi-crop datamodule from a RunConfig.

Run options map onto the recipe (Caron et al., ICCV 2021) as follows: ``lr`` is the learning rate
per 256 samples (peak = ``lr x batch_size / 256``, the linear scaling rule), ``weight_decay`` the
start of the weight-decay cosine (end: ``weight_decay_end``), ``warmup_epochs`` the lr warm-up,
``drop_path`` the student's stochastic depth, ``resolution`` the global-crop size. Everything else
is a ``task_options`` key (``--task-option KEY=VALUE``), declared in :data:`DINO_OPTIONS`.

Per-dataset crop geometry (global px, local px, patch px) when not given: CIFAR-100 and the
embedded sets 32 / 16 / 4, Tiny ImageNet 64 / 32 / 8, UC Merced 224 / 96 / 16, others the
dataset's resolution, half of it, and its patch size.
"""
from __future__ import annotations

from typing import Any

from pebench.analysis.evaluators import ANALYSIS_NAMES
from pebench.core.errors import ConfigError
from pebench.core.options import Option
from pebench.tasks.base import TaskSetup, analyses_except, register_task

from .module import DinoTask
from .multicrop import DinoDataModule

__all__ = ["DINO_OPTIONS", "CROP_GEOMETRY", "DinoSetup", "prepare_dino_data", "build_dino_task", "dino_analyses"]

#: the ``--task-option`` keys of DINO (defaults: the official recipe, Caron et al., ICCV 2021, github.com/facebookresearch/dino)
DINO_OPTIONS: tuple[Option, ...] = (
    Option("global_size", "int", None, "global crop side in pixels", none_means="the dataset's (CROP_GEOMETRY)"),
    Option("local_size", "int", None, "local crop side in pixels", none_means="the dataset's, else half the global"),
    Option("n_local", "int", 6, "local crops per sample", minimum=0),
    Option("patch_size", "int", None, "patch side in pixels", none_means="the dataset's"),
    Option("global_scale", "floats", [0.4, 1.0], "area range of the global crops (RandomResizedCrop scale)"),
    Option("local_scale", "floats", [0.05, 0.4], "area range of the local crops (RandomResizedCrop scale)"),
    Option("colour_jitter", "floats", [0.4, 0.4, 0.2, 0.1], "colour jitter: brightness, contrast, saturation, hue"),
    Option("grayscale_p", "float", 0.2, "probability of the grayscale augmentation"),
    Option("out_dim", "int", 65536, "prototypes K of the DINO head", minimum=1),
    Option("head_hidden", "int", 2048, "hidden width of the head's MLP", minimum=1),
    Option("head_bottleneck", "int", 256, "bottleneck width of the head", minimum=1),
    Option("head_bn", "bool", False, "batch norm in the head's MLP"),
    Option("min_lr", "float", 1e-6, "learning rate at the end of the cosine schedule", minimum=0.0),
    Option("weight_decay_end", "float", 0.4, "weight decay at the end of its cosine schedule", minimum=0.0),
    Option("momentum_teacher", "float", 0.996, "teacher EMA momentum at the start (cosine to 1)", minimum=0.0,
           maximum=1.0),
    Option("teacher_temp", "float", 0.07, "teacher temperature after its warm-up", minimum=0.0,
           minimum_inclusive=False),
    Option("warmup_teacher_temp", "float", 0.04, "teacher temperature at the start of its warm-up", minimum=0.0,
           minimum_inclusive=False),
    Option("warmup_teacher_temp_epochs", "int", None, "epochs of the teacher-temperature warm-up", minimum=0,
           none_means="0.3 x epochs"),
    Option("student_temp", "float", 0.1, "student temperature", minimum=0.0, minimum_inclusive=False),
    Option("center_momentum", "float", 0.9, "EMA momentum of the teacher's centre", minimum=0.0, maximum=1.0),
    Option("clip_grad", "float", 3.0, "per-parameter gradient-norm clip (0: none)", minimum=0.0),
    Option("freeze_last_layer", "int", 1, "epochs the head's last layer stays frozen", minimum=0),
    Option("knn_k", "int", 20, "neighbours of the weighted k-NN evaluation", minimum=1),
    Option("knn_temperature", "float", 0.07, "temperature of the weighted k-NN vote", minimum=0.0,
           minimum_inclusive=False),
    Option("linear_probe", "bool", True, "also evaluate a logistic-regression probe on frozen features"),
    Option("eed_every", "int", 1, "EED% / SSDC per layer every N epochs (0: none)", minimum=0),
    Option("eed_probe_size", "int", 256, "samples of the EED probe", minimum=1),
    Option("init_eval", "bool", True, "evaluate once at initialisation (step 0)"),
)

#: dataset -> (global size, local size, patch size)
CROP_GEOMETRY = {"cifar100": (32, 16, 4), "objects": (32, 16, 4), "textures": (32, 16, 4),
                 "tiny-imagenet": (64, 32, 8), "ucmerced": (224, 96, 16)}


def _options(cfg: Any) -> dict[str, Any]:
    return DinoSetup().option_values(cfg.task_options)


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

    options = DINO_OPTIONS
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

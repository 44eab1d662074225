"""What ``bench run`` does differently per task: one :class:`TaskSetup` per ``--task`` value.

``prepare`` in :mod:`pebench.run` is task-agnostic; everything a task changes goes through its
setup: which analyses apply, how the dataset's datamodule is wrapped (DINO's multi-crop views),
how the LightningModule is built, which metric is primary, and what it adds to ``results.json``.
A task module registers its setup with :func:`register_task_setup` (imported lazily from
:data:`_SETUP_MODULES`, so ``bench --help`` stays fast).

When ``--task`` is not given, the dataset's ``default_task`` class attribute decides
(``classification`` for every dataset that does not say otherwise; detection and segmentation
datasets name their own task). :func:`resolve_task` is the one place that applies this rule: the
run and the sweep's configuration fingerprint both call it.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from .config import TASKS, ConfigError

__all__ = ["TaskSetup", "register_task_setup", "get_task_setup", "resolve_task", "default_task", "geometry_only",
           "analyses_except"]


def _keep(analyses: list[str], explicit: bool) -> list[str]:
    return analyses


def geometry_only(task: str, reason: str) -> Callable[[list[str], bool], list[str]]:
    """An ``analyses`` filter for tasks where only ``geometry`` applies: others are dropped from the
    defaults, and asking for one explicitly is a one-line :class:`ConfigError` giving ``reason``."""

    def analyses(names: list[str], explicit: bool) -> list[str]:
        other = [a for a in names if a != "geometry"]
        if explicit and other:
            raise ConfigError(f"analysis {other[0]!r} does not apply to --task {task} ({reason}); "
                              f"use --analyses geometry or none")
        return [a for a in names if a == "geometry"]

    return analyses


def analyses_except(task: str, reasons: dict[str, str], opt_in: tuple[str, ...] = ()
                    ) -> Callable[[list[str], bool], list[str]]:
    """An ``analyses`` filter for a task where the analyses in ``reasons`` do not apply (each with
    its reason) and those in ``opt_in`` run only when asked for by name.

    Defaults (``explicit`` False) drop both. An explicit request naming one that does not apply is
    a one-line :class:`ConfigError`, except when the request names every analysis (``--analyses
    all``): then the ones that do not apply are dropped."""
    from .config import ANALYSES

    def analyses(names: list[str], explicit: bool) -> list[str]:
        bad = [a for a in names if a in reasons]
        if explicit and bad and not set(ANALYSES) <= set(names):
            ok = ",".join(a for a in ANALYSES if a not in reasons)
            raise ConfigError(f"analysis {bad[0]!r} does not apply to --task {task} ({reasons[bad[0]]}); "
                              f"use --analyses {ok} or none")
        return [a for a in names if a not in reasons and (explicit or a not in opt_in)]

    return analyses


def _same(cfg: Any, dm: Any) -> Any:
    return dm


def _nothing(task: Any) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class TaskSetup:
    """How one task plugs into ``bench run``.

    * ``build(cfg, dm, grid)`` -> the LightningModule (``grid``: the training token grid or ``None``);
    * ``prepare_data(cfg, dm)`` -> the datamodule to train on (default: ``dm`` itself);
    * ``analyses(names, explicit)`` -> the analyses that apply (raise :class:`ConfigError` when the
      user asked explicitly for one that does not);
    * ``primary_metric(dm)`` -> the metric the leaderboard ranks by;
    * ``extra_results(task)`` -> keys added to ``results.json`` after training;
    * ``options``: the keys ``--task-option`` accepts (empty: the task takes none).
    """

    name: str
    build: Callable[[Any, Any, Any], Any]
    primary_metric: Callable[[Any], str]
    prepare_data: Callable[[Any, Any], Any] = _same
    analyses: Callable[[list[str], bool], list[str]] = _keep
    extra_results: Callable[[Any], dict[str, Any]] = _nothing
    options: tuple[str, ...] = ()


_SETUPS: dict[str, TaskSetup] = {}
#: task name -> module whose import registers its setup
_SETUP_MODULES = {
    "classification": "pebench.tasks",
    "dino": "pebench.dino_setup",
    "detection": "pebench.detection_setup",
    "segmentation": "pebench.segmentation_setup",
}


def register_task_setup(setup: TaskSetup) -> TaskSetup:
    if setup.name not in TASKS:
        raise ValueError(f"task {setup.name!r} is not listed in pebench.config.TASKS")
    _SETUPS[setup.name] = setup
    return setup


def get_task_setup(name: str) -> TaskSetup:
    if name not in _SETUPS:
        available_tasks()  # imports the setup modules
    if name not in _SETUPS:
        raise ConfigError(f"unknown task {name!r}; available: {', '.join(available_tasks())}")
    return _SETUPS[name]


def available_tasks() -> list[str]:
    """Tasks whose setup module is importable (a name in TASKS without one is not offered)."""
    for name in TASKS:
        if name not in _SETUPS and name in _SETUP_MODULES:
            try:
                importlib.import_module(_SETUP_MODULES[name])
            except ModuleNotFoundError as e:
                if e.name != _SETUP_MODULES[name]:
                    raise
    return [name for name in TASKS if name in _SETUPS]


def default_task(dataset: str) -> str:
    """The task a dataset trains when ``--task`` is not given (its ``default_task``)."""
    from pebench.datamodules import get_datamodule_class
    from .run import load_registries

    load_registries()
    return str(getattr(get_datamodule_class(dataset), "default_task", "classification"))


def resolve_task(cfg: Any) -> Any:
    """Fill ``cfg.task`` from the dataset when it is ``None``; check the dataset supports the task and
    that ``task_options`` are ones the task accepts. Returns ``cfg`` (changed in place)."""
    from pebench.datamodules import get_datamodule_class

    if cfg.task is None:
        cfg.task = default_task(cfg.dataset)
    setup = get_task_setup(cfg.task)
    dm_cls = get_datamodule_class(cfg.dataset)
    supported = tuple(getattr(dm_cls, "tasks", ("classification", "dino")))
    if cfg.task not in supported:
        raise ConfigError(f"--task {cfg.task} does not apply to dataset {cfg.dataset!r}; it supports: "
                          f"{', '.join(supported)}")
    unknown = sorted(set(cfg.task_options) - set(setup.options))
    if unknown:
        if not setup.options:
            raise ConfigError(f"--task-option does not apply to --task {cfg.task}: it takes no options")
        raise ConfigError(f"unknown task option {unknown[0]!r} for --task {cfg.task}; available: "
                          f"{', '.join(setup.options)}")
    return cfg


# ------------------------------------------------------------------------------ classification
def _build_classification(cfg: Any, dm: Any, grid: Any) -> Any:
    from pebench.models import ClassificationTask

    return ClassificationTask(
        modality=dm.modality, num_classes=dm.num_classes, in_chans=dm.in_chans, model=cfg.model, pe=cfg.pe,
        pe_options=cfg.pe_options, patch_size=dm.patch_size, tubelet=dm.tubelet, num_groups=dm.num_groups,
        train_grid=grid, class_token=cfg.class_token, pool=cfg.pool, lr=cfg.lr, weight_decay=cfg.weight_decay,
        warmup_epochs=cfg.warmup_epochs, epochs=cfg.epochs, label_smoothing=cfg.label_smoothing, rpt=cfg.rpt,
        layer_decay=cfg.layer_decay, drop_path=cfg.drop_path, tokens=getattr(dm, "tokens", "frames"),
        tokenizer_options=dm.tokenizer_options() if hasattr(dm, "tokenizer_options") else None)


def _classification_metric(dm: Any) -> str:
    return "test/acc1" if getattr(dm, "has_test_split", False) else "val/acc1"


register_task_setup(TaskSetup("classification", build=_build_classification,
                              primary_metric=_classification_metric))

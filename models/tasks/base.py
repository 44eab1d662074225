"""What ``bench run`` does differently per task: one :class:`TaskSetup` per ``--task`` value.

A task is one folder ``models/tasks/<name>/`` (-> ``pebench.tasks.<name>``) holding its
LightningModule, its heads, its metric glue, its own robustness / extrapolation analyses and its setup:
a :class:`TaskSetup` subclass registered under the folder's name with :func:`register_task`.
Adding a task is adding a folder; nothing else names it.

``prepare`` in :mod:`pebench.runner.run` is task-agnostic; everything a task changes goes through its
setup: which analyses apply, how the dataset's datamodule is wrapped (DINO's multi-crop views), how
the LightningModule is built, which metric is primary, what it adds to ``results.json``, and which
robustness / extrapolation functions the post-training analyses call (:meth:`TaskSetup.analysis_hooks`).

:func:`list_tasks` reads the folder names (``pkgutil.iter_modules``) and imports none of them, so
``bench --help`` stays free of torch; :func:`get_task_setup` imports the named folder, whose import
registers its setup.

When ``--task`` is not given, the dataset's ``default_task`` class attribute decides
(``classification`` for every dataset that does not say otherwise; detection and segmentation
datasets name their own task). Which datasets a task trains on is the task's declaration, not the
dataset's: ``TaskSetup.accepts`` names the kinds of targets it reads (a dataset's ``label_kind``:
``class`` -- any classification-shaped dataset --, ``boxes``, ``point-labels``) and
``TaskSetup.modalities`` the input modalities (``None``: any). :func:`resolve_task` is the one place
that applies both rules (an unfit pair is one :class:`ConfigError` naming the tasks that do fit the
dataset): the run and the sweep's configuration fingerprint both call it.
"""
from __future__ import annotations

import abc
import pkgutil
import sys
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence, TypeVar

from pebench.core.errors import ConfigError
from pebench.core.options import Option
from pebench.core.registry import Registry, load_plugins, unknown_name_message

if TYPE_CHECKING:  # annotations only: these imports are downward (tasks > analysis > datamodules), never run
    import lightning as L

    from pebench.analysis.evaluators import TaskAnalyses
    from pebench.datamodules.base import BenchDataModule

__all__ = ["TaskSetup", "TASK_SETUPS", "register_task", "get_task_setup", "list_tasks", "resolve_task",
           "default_task", "geometry_only", "analyses_except", "unfit_reason", "LABEL_KIND_WORDS", "RunConfigLike"]

#: how error messages name a dataset's ``label_kind`` (pebench.datamodules.LABEL_KINDS)
LABEL_KIND_WORDS = {"class": "a class label per sample (a classification-shaped dataset)",
                    "boxes": "annotated boxes", "point-labels": "per-point labels"}


class RunConfigLike(Protocol):
    """What this module reads of a run configuration (:class:`pebench.runner.config.RunConfig`, which lives in
    a layer above and so is named structurally here); a task's ``build`` reads the rest of it."""

    dataset: str
    task: str | None
    task_options: dict[str, Any]


_Cfg = TypeVar("_Cfg", bound=RunConfigLike)

#: task name -> its :class:`TaskSetup` subclass (filled by importing the task's folder, or a plugin module)
TASK_SETUPS: Registry[type[TaskSetup]] = Registry("task", package=__package__)


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


def analyses_except(task: str, reasons: dict[str, str], every: Sequence[str], opt_in: tuple[str, ...] = ()
                    ) -> Callable[[list[str], bool], list[str]]:
    """An ``analyses`` filter for a task where the analyses in ``reasons`` do not apply (each with
    its reason) and those in ``opt_in`` run only when asked for by name; ``every`` is the list of
    all analyses (:data:`pebench.analysis.evaluators.ANALYSIS_NAMES`).

    Defaults (``explicit`` False) drop both. An explicit request naming one that does not apply is
    a one-line :class:`ConfigError`, except when the request names every analysis (``--analyses
    all``): then the ones that do not apply are dropped."""
    every = tuple(every)

    def analyses(names: list[str], explicit: bool) -> list[str]:
        bad = [a for a in names if a in reasons]
        if explicit and bad and not set(every) <= set(names):
            ok = ",".join(a for a in every if a not in reasons)
            raise ConfigError(f"analysis {bad[0]!r} does not apply to --task {task} ({reasons[bad[0]]}); "
                              f"use --analyses {ok} or none")
        return [a for a in names if a not in reasons and (explicit or a not in opt_in)]

    return analyses


class TaskSetup(abc.ABC):
    """How one task plugs into ``bench run`` (subclass it in ``<task>/setup.py`` and register it).

    * ``build(cfg, dm, grid)`` -> the LightningModule (``grid``: the training token grid or ``None``);
    * ``prepare_data(cfg, dm)`` -> the datamodule to train on (default: ``dm`` itself);
    * ``analyses(names, explicit)`` -> the analyses that apply (raise :class:`ConfigError` when the
      user asked explicitly for one that does not; default: all of ``names``);
    * ``primary_metric(dm)`` -> the metric the leaderboard ranks by;
    * ``extra_results(task)`` -> keys added to ``results.json`` after training;
    * ``analysis_hooks()`` -> the task's robustness / extrapolation functions
      (:class:`pebench.analysis.evaluators.TaskAnalyses`; default: the classification ones);
    * ``checkpoint_class()`` -> the LightningModule class ``bench eval`` loads a checkpoint into, or
      ``None`` when ``bench eval`` does not apply to the task;
    * ``options``: the ``--task-option`` keys it accepts, each a :class:`~pebench.core.options.Option`
      (kind, default, help, choices, bounds; empty: the task takes none); :meth:`option_values` checks
      given values against them;
    * ``dense``: the task predicts per box / per point rather than one label per sample (its
      robustness and extrapolation read its own metric, not top-1 accuracy);
    * ``accepts``: the datasets' ``label_kind`` values it trains on (default: ``class``, any
      classification-shaped dataset); ``modalities``: the input modalities it takes (``None``: any).
    """

    name: str = ""  # set by the registry
    options: tuple[Option, ...] = ()
    dense: bool = False
    accepts: tuple[str, ...] = ("class",)
    modalities: tuple[str, ...] | None = None

    @abc.abstractmethod
    def build(self, cfg: RunConfigLike, dm: BenchDataModule, grid: Sequence[int] | None) -> L.LightningModule:
        """The task's LightningModule for run configuration ``cfg`` on datamodule ``dm`` (the one
        :meth:`prepare_data` returned); ``grid``: the training token grid, ``None`` where the data has none."""

    @abc.abstractmethod
    def primary_metric(self, dm: BenchDataModule) -> str:
        """The metric the leaderboard ranks by (e.g. ``val/acc1``)."""

    def prepare_data(self, cfg: RunConfigLike, dm: BenchDataModule) -> BenchDataModule:
        return dm

    def analyses(self, names: list[str], explicit: bool) -> list[str]:
        return names

    def extra_results(self, task: L.LightningModule) -> dict[str, Any]:
        return {}

    def analysis_hooks(self) -> TaskAnalyses:
        from pebench.analysis.evaluators import CLASSIFICATION_ANALYSES  # deferred: start-up time (torch)

        return CLASSIFICATION_ANALYSES

    def checkpoint_class(self) -> type | None:
        return None

    def option_values(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Every task option: ``given`` values (``--task-option``, or a dataset's defaults over them) checked
        against :attr:`options` and in their canonical kinds, the others at their declared defaults."""
        decl = {o.name: o for o in self.options}
        out = {k: o.default for k, o in decl.items()}
        out.update({k: decl[k].check(v, f"--task-option {k}") for k, v in given.items()})
        return out


def register_task(name: str) -> Callable[[type[TaskSetup]], type[TaskSetup]]:
    """Class decorator: register a :class:`TaskSetup` subclass as task ``name`` (its folder's name)."""
    return TASK_SETUPS.register(name)


def list_tasks() -> list[str]:
    """The task names: the sub-packages of :mod:`pebench.tasks` (none of them is imported) and the
    tasks registered by plugins (``$PEBENCH_PLUGINS``, see :mod:`pebench.core.registry`)."""
    load_plugins()
    package = sys.modules[__package__]  # read at call time: a test may extend its __path__
    folders = [m.name for m in pkgutil.iter_modules(package.__path__) if m.ispkg]
    return folders + sorted(set(TASK_SETUPS.registered()) - set(folders))


def get_task_setup(name: str) -> TaskSetup:
    """The setup of task ``name``: the registry imports its folder (which registers it) on first use."""
    if name not in TASK_SETUPS:
        raise ConfigError(unknown_name_message("task", name, list_tasks()))
    return TASK_SETUPS.get(name)()


def default_task(dataset: str) -> str:
    """The task a dataset trains when ``--task`` is not given (its ``default_task``)."""
    from pebench.datamodules import get_datamodule_class  # deferred: start-up time (torch: the CLI lists tasks)

    return str(getattr(get_datamodule_class(dataset), "default_task", "classification"))


def unfit_reason(setup: TaskSetup, dm_cls: type) -> str | None:
    """Why the task of ``setup`` cannot train on datasets of class ``dm_cls`` (its ``accepts`` and
    ``modalities`` against the dataset's ``label_kind`` and ``modality``), or ``None`` when it can."""
    kind = str(getattr(dm_cls, "label_kind", "class"))
    if kind not in setup.accepts:
        need = " or ".join(LABEL_KIND_WORDS.get(k, k) for k in setup.accepts)
        return f"it needs {need}, the dataset has {LABEL_KIND_WORDS.get(kind, kind)}"
    modality = str(getattr(dm_cls, "modality", "image"))
    if setup.modalities is not None and modality not in setup.modalities:
        return f"it needs an {' or '.join(setup.modalities)} dataset, the dataset is {modality} data"
    return None


def resolve_task(cfg: _Cfg) -> _Cfg:
    """Fill ``cfg.task`` from the dataset when it is ``None``; check the task can train on the dataset
    (:func:`unfit_reason`: the task's declaration) and ``task_options`` against the task's declared options.
    Returns ``cfg`` (changed in place)."""
    from pebench.datamodules import get_datamodule_class  # deferred: start-up time (torch: the CLI lists tasks)

    if cfg.task is None:
        cfg.task = default_task(cfg.dataset)
    setup = get_task_setup(cfg.task)
    dm_cls = get_datamodule_class(cfg.dataset)
    reason = unfit_reason(setup, dm_cls)
    if reason is not None:
        fit = [t for t in list_tasks() if unfit_reason(get_task_setup(t), dm_cls) is None]
        raise ConfigError(f"--task {cfg.task} does not apply to dataset {cfg.dataset!r}: {reason}; the tasks "
                          f"for this dataset: {', '.join(fit) or '(none)'}")
    keys = [o.name for o in setup.options]
    unknown = sorted(set(cfg.task_options) - set(keys))
    if unknown:
        if not keys:
            raise ConfigError(f"--task-option does not apply to --task {cfg.task}: it takes no options")
        raise ConfigError(f"unknown task option {unknown[0]!r} for --task {cfg.task}; available: {', '.join(keys)}")
    setup.option_values(cfg.task_options)  # kinds, choices and bounds: one line before anything is built
    return cfg

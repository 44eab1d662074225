"""The analyses of pebench, registered like PEs: one file per analysis, one decorator each.

An analysis is a class registered with :func:`register_analysis` in its own module of
:mod:`pebench.analysis` (the module may also hold its implementation)::

    @dataclass(frozen=True)
    class MyOptions:
        my_samples: int = option(64, "validation samples of my analysis", minimum=1, what="samples")

    @register_analysis("my-analysis", key="my_analysis", order=70, options=MyOptions)
    class MyAnalysis(Analysis):
        '''One line: what it measures (cite the paper).'''

        def run(self, ctx: AnalysisContext) -> Any:
            return {"n": ctx.options["my_samples"]}

Its declaration is the one place that says

* its name (``--analyses my-analysis``, ``bench list analyses``) and its ``results.json`` key;
* its options: a frozen dataclass whose fields are declared with :func:`pebench.core.options.option`
  (type by annotation, default, ``choices`` / ``bounds``, help). Every analysis' options share one
  namespace (``--analysis-option KEY=VALUE``); two analyses may declare the same key only with the same
  field (an analysis reuses another's options by subclassing its dataclass: ``alpha`` reads the geometry
  probe and tap);
* where it applies: :meth:`Analysis.applies` (``None``, or the reason it does not: e.g. ``alpha`` only
  for additive PEs), and ``in_all`` (whether ``--analyses all`` / ``auto`` include it; an analysis
  with ``in_all=False`` runs only when named);
* its plot (``plot = (file name, plot function)``, optional).

The evaluator (:func:`pebench.analysis.evaluators.run_analyses`) and the run configuration
(:mod:`pebench.runner.config`) read names, keys and options from here; nothing lists them by hand.
Analyses outside this repository are plugins, found like PEs (``$PEBENCH_PLUGINS``; docs/extending.md).
"""
from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable

from pebench.core.errors import ConfigError
from pebench.core.options import Option, check_mapping, declared_options
from pebench.core.registry import Registry

__all__ = ["Analysis", "AnalysisContext", "NoOptions", "register_analysis", "list_analyses", "get_analysis",
           "analysis_options", "option_defaults", "check_analysis_options", "result_keys", "describe_analyses",
           "select_analyses"]

#: analysis name -> its :class:`Analysis` subclass; the modules of ``pebench.analysis`` register them
_ANALYSES: Registry[type[Analysis]] = Registry("analysis", package=__package__)


@dataclass(frozen=True)
class NoOptions:
    """The options of an analysis that takes none."""


@dataclass
class AnalysisContext:
    """What an analysis reads when it runs: the trained ``task`` (in eval mode under no_grad only
    inside the analysis' own evaluation), its ``datamodule``, the run's ``seed``, the resolved run
    ``config`` (a dict), every analysis option with its value (``options``), the task's robustness /
    extrapolation functions (``hooks``, :class:`~pebench.analysis.evaluators.TaskAnalyses`) and
    ``explicit``: whether the analysis was named (not only implied by ``all``)."""

    task: Any
    datamodule: Any
    seed: int
    config: dict[str, Any]
    options: dict[str, Any]
    hooks: Any
    explicit: bool = True


class Analysis(abc.ABC):
    """Base class of a registered analysis (see the module docstring). ``name``, ``key``, ``order``,
    ``options`` and ``in_all`` are set by :func:`register_analysis`."""

    name: ClassVar[str] = ""
    key: ClassVar[str] = ""
    options: ClassVar[type] = NoOptions
    in_all: ClassVar[bool] = True
    #: (file name, plot function ``fn(data, ax, run=...)`` of :mod:`.plots`) or None
    plot: ClassVar[tuple[str, Callable[..., Any]] | None] = None

    @classmethod
    def applies(cls, pe: Any) -> str | None:
        """``None`` when the analysis applies to a model with this PE (a PE instance or class), else the
        reason it does not (one line). Default: every PE."""
        return None

    @abc.abstractmethod
    def run(self, ctx: AnalysisContext) -> Any:
        """The analysis' ``results.json`` section for this run (every registered analysis defines it)."""


def register_analysis(name: str, *, key: str | None = None, order: float, options: type = NoOptions,
                      in_all: bool = True) -> Callable[[type[Analysis]], type[Analysis]]:
    """Class decorator: register an :class:`Analysis` under ``name`` with its ``results.json`` ``key``
    (default: the name), listing ``order``, ``options`` dataclass and ``in_all``."""
    if not dataclasses.is_dataclass(options):
        raise TypeError(f"analysis {name!r}: options must be a dataclass declared with pebench.core.options.option")

    def deco(cls: type[Analysis]) -> type[Analysis]:
        cls.key = key or name
        cls.options = options
        cls.in_all = in_all
        _check_shared_options(name, options)
        return _ANALYSES.register(name, order=order)(cls)

    return deco


def _check_shared_options(name: str, options: type) -> None:
    """A key declared by two analyses must be the same declaration (a subclassed dataclass)."""
    mine = {o.name: o for o in declared_options(options)}
    for other in _ANALYSES.registered():
        for o in declared_options(_ANALYSES.get(other).options):
            if o.name in mine and mine[o.name] != o:
                raise ValueError(f"analysis option {o.name!r} of {name!r} differs from the one {other!r} declares")


def list_analyses() -> list[str]:
    """The registered analysis names, in their listing (and running) order."""
    return _ANALYSES.names()


def get_analysis(name: str) -> type[Analysis]:
    """The :class:`Analysis` class called ``name`` (``UnknownNameError`` listing the valid ones)."""
    return _ANALYSES.get(name)


def result_keys() -> dict[str, str]:
    """analysis name -> ``results.json`` key, in running order."""
    return {n: get_analysis(n).key for n in list_analyses()}


def analysis_options() -> dict[str, Option]:
    """Every analysis option: key -> its :class:`~pebench.core.options.Option`, in running order of the first
    analysis declaring it."""
    out: dict[str, Option] = {}
    for n in list_analyses():
        for o in declared_options(get_analysis(n).options):
            out.setdefault(o.name, o)
    return out


def option_defaults() -> dict[str, Any]:
    """Every analysis option's default value."""
    return {k: o.default for k, o in analysis_options().items()}


def check_analysis_options(options: dict[str, Any] | None) -> dict[str, Any]:
    """Validate ``analysis_options`` (``--analysis-option``) against every analysis' declaration ->
    all options, defaults filled in. Unknown keys and bad values are one-line :class:`ConfigError`."""
    return check_mapping(analysis_options().values(), options, "analysis option")


def select_analyses(value: str | Iterable[str] | None, pe: Any, *, default: str = "all") -> tuple[list[str], bool]:
    """``--analyses`` -> (the analyses to run in running order, whether they were named).

    ``none``: nothing; ``all`` (or ``auto``, or ``None``: ``default``): every analysis with ``in_all``
    that applies to ``pe`` (:meth:`Analysis.applies`; an object with the PE's attributes); otherwise
    the named ones (unknown names are one-line errors), whether they apply or not (the caller decides
    what a named analysis that does not apply means)."""
    if value is None:
        value = default
    items = [a.strip() for a in value.split(",")] if isinstance(value, str) else [str(a).strip() for a in value]
    items = [a for a in items if a]
    names = list_analyses()
    if "none" in items:
        return [], True
    if "all" in items or "auto" in items:
        return [n for n in names if get_analysis(n).in_all and get_analysis(n).applies(pe) is None], "auto" not in items
    for a in items:
        if a not in names:
            raise ConfigError(f"unknown analysis {a!r}; available: {', '.join(names)}, none, all")
    return [n for n in names if n in items], True


def describe_analyses() -> list[dict[str, Any]]:
    """One dict per analysis (``bench list analyses``): name, key, in_all, what (its docstring's first
    line) and its options (:meth:`~pebench.core.options.Option.describe`: key, type, default, help)."""
    rows = []
    for n in list_analyses():
        cls = get_analysis(n)
        rows.append({"name": n, "key": cls.key, "in_all": cls.in_all,
                     "what": (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else "",
                     "options": [o.describe() for o in declared_options(cls.options)]})
    return rows


def plot_path(run_dir: Path | None, cls: type[Analysis]) -> Path | None:
    return None if run_dir is None or cls.plot is None else Path(run_dir) / cls.plot[0]

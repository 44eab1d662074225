"""The analyses of pebench, registered like PEs: one file per analysis, one decorator each.

An analysis is a class registered with :func:`register_analysis` in its own module of
:mod:`pebench.analysis` (the module may also hold its implementation)::

    @dataclass(frozen=True)
    class MyOptions:
        my_samples: int = option(64, "validation samples of my analysis", bounds=(1, True, math.inf, False, "samples"))

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
import math
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable

from pebench.core.errors import ConfigError
from pebench.core.options import Option, declared_options, parse_bool
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


def _fields(options: type) -> list[tuple[dataclasses.Field[Any], Option]]:
    return declared_options(options)


def _check_shared_options(name: str, options: type) -> None:
    """A key declared by two analyses must be the same declaration (a subclassed dataclass)."""
    mine = {f.name: (f, o) for f, o in _fields(options)}
    for other in _ANALYSES.registered():
        cls = _ANALYSES.get(other)
        for f, o in _fields(cls.options):
            if f.name in mine and (mine[f.name][1] != o or _default(mine[f.name][0]) != _default(f)):
                raise ValueError(f"analysis option {f.name!r} of {name!r} differs from the one {other!r} declares")


def _default(f: dataclasses.Field[Any]) -> Any:
    return f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[operator]


def list_analyses() -> list[str]:
    """The registered analysis names, in their listing (and running) order."""
    return _ANALYSES.names()


def get_analysis(name: str) -> type[Analysis]:
    """The :class:`Analysis` class called ``name`` (``UnknownNameError`` listing the valid ones)."""
    return _ANALYSES.get(name)


def result_keys() -> dict[str, str]:
    """analysis name -> ``results.json`` key, in running order."""
    return {n: get_analysis(n).key for n in list_analyses()}


def analysis_options() -> dict[str, tuple[dataclasses.Field[Any], Option, type]]:
    """Every analysis option: key -> (field, :class:`Option`, its type), in running order of the first
    analysis declaring it."""
    out: dict[str, tuple[dataclasses.Field[Any], Option, type]] = {}
    for n in list_analyses():
        opts = get_analysis(n).options
        hints = typing.get_type_hints(opts)
        for f, o in _fields(opts):
            out.setdefault(f.name, (f, o, hints[f.name]))
    return out


def option_defaults() -> dict[str, Any]:
    """Every analysis option's default value."""
    return {k: _default(f) for k, (f, _, _) in analysis_options().items()}


def _base_types(hint: Any) -> tuple[list[Any], bool]:
    args = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    return args, type(None) in typing.get_args(hint)


def _check_value(key: str, value: Any, f: dataclasses.Field[Any], opt: Option, hint: Any) -> Any:
    """``value`` checked against its declaration -> the value to use (one-line :class:`ConfigError`)."""
    types, nullable = _base_types(hint)
    if value is None:
        if nullable:
            return None
        raise ConfigError(f"analysis option {key} needs a value, got None")
    if bool in types:
        v = parse_bool(value)
        if v is None:
            raise ConfigError(f"analysis option {key} must be true or false, got {value!r}")
        return v
    if opt.choices is not None:
        if value not in opt.choices:
            raise ConfigError(f"analysis option {key} must be {' or '.join(opt.choices)}, got {value!r}")
        return value
    if int in types or float in types:
        is_int = isinstance(value, int) and not isinstance(value, bool)
        ok = is_int or (float in types and isinstance(value, float) and not isinstance(value, bool))
        lo, lo_in, hi, hi_in, what = opt.bounds or (-math.inf, False, math.inf, False, "")
        if ok:
            ok = math.isfinite(value) and (value >= lo if lo_in else value > lo) and (value <= hi if hi_in else value < hi)
        if not ok:
            kind = "an integer" if int in types else "a finite number"
            rng = f" {'>=' if lo_in else '>'} {lo:g}" if math.isfinite(lo) else ""
            rng += f"{' and' if rng else ''} {'<=' if hi_in else '<'} {hi:g}" if math.isfinite(hi) else ""
            raise ConfigError(f"analysis option {key} must be {kind}{rng}{f' ({what})' if what else ''}, got {value!r}")
        return value
    if tuple in types or list in types:
        if not isinstance(value, (list, tuple)) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 for v in value):
            raise ConfigError(f"analysis option {key} must be a list of finite numbers >= 0, got {value!r}")
        return tuple(float(v) for v in value)
    return value


def check_analysis_options(options: dict[str, Any] | None) -> dict[str, Any]:
    """Validate ``analysis_options`` (``--analysis-option``) against every analysis' declaration ->
    all options, defaults filled in. Unknown keys and bad values are one-line :class:`ConfigError`."""
    decl = analysis_options()
    given = dict(options or {})
    unknown = sorted(set(given) - set(decl))
    if unknown:
        raise ConfigError(f"unknown analysis option {unknown[0]!r}; available: {', '.join(decl)}")
    out = option_defaults()
    for key, value in given.items():
        f, opt, hint = decl[key]
        out[key] = _check_value(key, value, f, opt, hint)
    return out


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
    line) and its options (key, type, default, help)."""
    rows = []
    for n in list_analyses():
        cls = get_analysis(n)
        hints = typing.get_type_hints(cls.options)
        rows.append({"name": n, "key": cls.key, "in_all": cls.in_all,
                     "what": (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else "",
                     "options": [{"key": f.name, "type": _type_name(hints[f.name]), "default": _default(f),
                                  "help": o.help} for f, o in _fields(cls.options)]})
    return rows


def _type_name(hint: Any) -> str:
    types, nullable = _base_types(hint)
    name = "/".join("floats" if t in (tuple, list) else getattr(t, "__name__", str(t)) for t in types)
    return f"{name} or none" if nullable else name


def plot_path(run_dir: Path | None, cls: type[Analysis]) -> Path | None:
    return None if run_dir is None or cls.plot is None else Path(run_dir) / cls.plot[0]

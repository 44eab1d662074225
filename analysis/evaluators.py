"""Post-training analyses of a run: :func:`run_analyses` (called by ``bench run``).

The analyses are registered (:mod:`.registry`: one file per analysis, with its name, results.json
key, options and where it applies); ``bench list analyses`` lists them. :func:`run_analyses` runs the
requested ones in their registered order:

====================  ======================  ==================================================
name                  results.json key        what (module)
====================  ======================  ==================================================
``geometry``          ``geometry``            per-layer SSDC, SSDC_RPI, EED% (:mod:`.geometry`)
``robustness``        ``robustness``          clean accuracy, accuracy + FS per shift (:mod:`.robustness`)
``alpha``             ``alpha_sweep``         α sweep of additive PEs (:mod:`.alpha`); ``None`` otherwise
``extrapolation``     ``extrapolation``       accuracy at other resolutions (:mod:`.extrapolation`)
``attention``         ``attention``           attention entropy and mean attention distance (:mod:`.attention`)
``coord-robustness``  ``coord_robustness``    curves under coordinate jitter / offset (:mod:`.coord_robustness`)
``all``               all that apply          the first four (``alpha`` only for additive PEs); the
                                              last two run when named
====================  ======================  ==================================================

Execution model: after training, in a single process (global rank 0; ``bench run`` destroys
the DDP process group first), with the model in eval mode under ``torch.no_grad()`` (the
previous train/eval mode is restored). Everything random is derived from ``config["seed"]``
(the RPI permutation, the shift noise) and evaluated on fixed, ordered sample sets, so results
are deterministic for a given checkpoint.

Plots (``geometry.png``, ``robustness.png``, ``alpha_sweep.png``, ``extrapolation.png``) go
to ``run_dir``, each written atomically (temp file + ``os.replace``) with the Agg canvas.

Options are read from ``config`` (the resolved run config dict): ``seed``,
``extrapolation_resolutions`` (default: :func:`~.extrapolation.default_resolutions`), and an
optional ``analysis_options`` mapping (``probe_size`` is also accepted at the top level), checked
against the analyses' declarations (:func:`~.registry.check_analysis_options`); the defaults:

* ``probe_size`` (256): geometry probe set.
* ``ssdc_tap`` (``attn_in``, the SSDC paper's; or ``block_out``), ``eed_tap`` (chosen by
  measurement, see :data:`~.geometry.DEFAULT_EED_TAP`), ``ssdc_distance`` (``l1`` on grids,
  ``euclidean`` for point clouds), ``rpi_permutations`` (8) and ``rpi_null`` (true: the
  untrained-twin null band): see :mod:`.geometry`.
* ``robustness_samples`` (``None`` = whole validation set).
* ``alpha_samples`` (128) and ``alpha_probe_size`` (``None`` = the geometry ``probe_size``):
  per-α accuracy/FS samples and SSDC_RPI probe (the full probe: a smaller one biases SSDC_RPI
  low).
* ``extrapolation_samples`` (128): samples per resolution when the run evaluates them
  inside ``bench run`` (the 4x side has 16x the tokens; ``bench eval`` evaluates the whole
  validation set).

Wall times per analysis are returned under ``"analysis_times_s"`` (not a results section).

A task with its own metric (detection: mAP, segmentation: mIoU) passes its own robustness and
extrapolation functions as a :class:`TaskAnalyses` (its setup's ``analysis_hooks()``); without one the
classification functions run. This package names no task: the tasks sit above it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from .extrapolation import check_resolutions, default_resolutions, evaluate_extrapolation
from .plots import run_info, save_plot
from .registry import (
    AnalysisContext,
    check_analysis_options,
    get_analysis,
    list_analyses,
    option_defaults,
    result_keys,
    select_analyses,
)
from .robustness import robustness

__all__ = ["run_analyses", "TaskAnalyses", "CLASSIFICATION_ANALYSES", "ANALYSIS_NAMES", "RESULT_KEYS", "DEFAULT_OPTIONS"]


def __getattr__(name: str) -> Any:
    """Views of the registry kept under their former names: ``ANALYSIS_NAMES`` (what ``--analyses all``
    may include), ``RESULT_KEYS`` (name -> results.json key), ``DEFAULT_OPTIONS`` (option -> default)."""
    if name == "ANALYSIS_NAMES":
        return tuple(n for n in list_analyses() if get_analysis(n).in_all)
    if name == "RESULT_KEYS":
        return result_keys()
    if name == "DEFAULT_OPTIONS":
        return option_defaults()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class TaskAnalyses:
    """The robustness and extrapolation functions of a task (defaults: the classification ones).

    * ``robustness(task, datamodule, seed=, max_samples=)`` -> the ``robustness`` section;
    * ``default_resolutions(datamodule, task)`` -> the extrapolation settings when the run gives none;
    * ``check_resolutions(task, datamodule, resolutions)``: raise one ``ValueError`` line for a bad one;
    * ``evaluate_extrapolation(task, datamodule, resolutions, max_samples=)`` -> the ``extrapolation`` rows.
    """

    robustness: Callable[..., dict[str, Any]] = robustness
    default_resolutions: Callable[[Any, Any], list[str]] = default_resolutions
    check_resolutions: Callable[[Any, Any, Any], None] = check_resolutions
    evaluate_extrapolation: Callable[..., list[dict[str, Any]]] = evaluate_extrapolation


#: the classification analyses (a setup whose ``analysis_hooks()`` is ``None``)
CLASSIFICATION_ANALYSES = TaskAnalyses()


def _options(config: dict | None) -> dict[str, Any]:
    """Every analysis option's value: the declared defaults, a top-level ``probe_size``, then
    ``analysis_options`` (checked: unknown keys and bad values are one-line ``ConfigError``)."""
    config = dict(config or {})
    extra = dict(config.get("analysis_options") or {})
    if config.get("probe_size") is not None and "probe_size" not in extra:
        extra["probe_size"] = int(config["probe_size"])
    return check_analysis_options(extra)


def run_analyses(task: Any, datamodule: Any, analyses: str | Iterable[str], run_dir: str | Path | None,
                 config: dict | None = None, hooks: TaskAnalyses | None = None) -> dict[str, Any]:
    """Run the named analyses; returns ``{results.json key: section, "analysis_times_s": {...}}``.

    ``analyses``: names, ``all`` (every analysis that applies and is in ``all``) or ``none``; they run
    in their registered order. ``run_dir=None`` skips the plots. An analysis named explicitly that does
    not apply to the model's PE (``alpha`` for a non-additive PE) gets ``None`` (not applicable);
    with ``all`` its key is left out. ``hooks``: the task's robustness / extrapolation functions
    (``None``: the classification ones).
    """
    hooks = hooks or CLASSIFICATION_ANALYSES
    pe = getattr(task.backbone, "pe", None)
    names, _ = select_analyses(analyses, pe)
    cfg = dict(config or {})
    seed = int(cfg.get("seed") or 0)
    opts = _options(cfg)
    out: dict[str, Any] = {}
    times: dict[str, float] = {}
    rd = Path(run_dir) if run_dir is not None else None

    info = run_info(cfg, getattr(datamodule, "num_classes", None))  # figure titles and chance lines
    ctx = AnalysisContext(task=task, datamodule=datamodule, seed=seed, config=cfg, options=opts, hooks=hooks)
    for name in names:
        t0 = time.perf_counter()
        cls = get_analysis(name)
        res = None if cls.applies(pe) is not None else cls().run(ctx)
        if rd is not None and res and cls.plot is not None:
            save_plot(cls.plot[1], res, rd / cls.plot[0], run=info)
        out[cls.key] = res
        times[name] = round(time.perf_counter() - t0, 3)
    out["analysis_times_s"] = times
    return out

"""Post-training analyses of a run: :func:`run_analyses` (called by ``bench run``).

=================  ====================  ===================================================
name               results.json key      what (module)
=================  ====================  ===================================================
``geometry``       ``geometry``          per-layer SSDC, SSDC_RPI, EED% (:mod:`.geometry`)
``robustness``     ``robustness``        clean accuracy, accuracy + FS per shift (:mod:`.robustness`)
``alpha``          ``alpha_sweep``       α sweep of additive PEs (:mod:`.alpha`); ``None`` otherwise
``extrapolation``  ``extrapolation``     accuracy at other resolutions (:mod:`.extrapolation`)
``all``            all that apply        (``alpha`` only for additive PEs)
=================  ====================  ===================================================

Execution model: after training, in a single process (global rank 0; ``bench run`` destroys
the DDP process group first), with the model in eval mode under ``torch.no_grad()`` (the
previous train/eval mode is restored). Everything random is derived from ``config["seed"]``
(the RPI permutation, the shift noise) and evaluated on fixed, ordered sample sets, so results
are deterministic for a given checkpoint.

Plots (``geometry.png``, ``robustness.png``, ``alpha_sweep.png``, ``extrapolation.png``) go
to ``run_dir``, each written atomically (temp file + ``os.replace``) with the Agg canvas.

Options are read from ``config`` (the resolved run config dict): ``seed``,
``extrapolation_resolutions`` (default: :func:`~.extrapolation.default_resolutions`), and an
optional ``analysis_options`` mapping (``probe_size`` is also accepted at the top level):

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

from .alpha import alpha_sweep
from .extrapolation import check_resolutions, default_resolutions, evaluate_extrapolation
from .geometry import DEFAULT_EED_TAP, DEFAULT_PROBE_SIZE, DEFAULT_RPI_PERMUTATIONS, DEFAULT_TAP, geometry
from .plots import plot_alpha_sweep, plot_extrapolation, plot_geometry, plot_robustness, run_info, save_plot
from .robustness import robustness

__all__ = ["run_analyses", "TaskAnalyses", "CLASSIFICATION_ANALYSES", "ANALYSIS_NAMES", "RESULT_KEYS", "DEFAULT_OPTIONS"]

ANALYSIS_NAMES = ("geometry", "robustness", "alpha", "extrapolation")
#: analysis name -> results.json key
RESULT_KEYS = {"geometry": "geometry", "robustness": "robustness", "alpha": "alpha_sweep",
               "extrapolation": "extrapolation"}
DEFAULT_OPTIONS: dict[str, Any] = {"probe_size": DEFAULT_PROBE_SIZE, "ssdc_tap": DEFAULT_TAP,
                                   "eed_tap": DEFAULT_EED_TAP, "ssdc_distance": None,
                                   "rpi_permutations": DEFAULT_RPI_PERMUTATIONS, "rpi_null": True,
                                   "robustness_samples": None, "alpha_samples": 128, "alpha_probe_size": None,
                                   "extrapolation_samples": 128}


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


def _names(analyses: str | Iterable[str] | None, additive: bool) -> list[str]:
    items = [a.strip() for a in analyses.split(",")] if isinstance(analyses, str) else list(analyses or [])
    items = [a for a in items if a]
    if "none" in items:
        return []
    if "all" in items:
        return [a for a in ANALYSIS_NAMES if a != "alpha" or additive]
    for a in items:
        if a not in ANALYSIS_NAMES:
            raise ValueError(f"unknown analysis {a!r}; available: {', '.join(ANALYSIS_NAMES)}, all, none")
    return [a for a in ANALYSIS_NAMES if a in items]


def _flag(v: Any) -> bool:
    """A boolean option that may arrive as a string (``--analysis-option rpi_null=false``)."""
    if isinstance(v, str):
        if v.lower() in ("1", "true", "yes", "on"):
            return True
        if v.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected true or false, got {v!r}")
    return bool(v)


def _options(config: dict | None) -> dict[str, Any]:
    config = dict(config or {})
    opts = dict(DEFAULT_OPTIONS)
    if config.get("probe_size") is not None:
        opts["probe_size"] = int(config["probe_size"])
    extra = dict(config.get("analysis_options") or {})
    unknown = sorted(set(extra) - set(DEFAULT_OPTIONS))
    if unknown:
        raise ValueError(f"unknown analysis option {unknown[0]!r}; available: {', '.join(DEFAULT_OPTIONS)}")
    opts.update(extra)
    return opts


def run_analyses(task: Any, datamodule: Any, analyses: str | Iterable[str], run_dir: str | Path | None,
                 config: dict | None = None, hooks: TaskAnalyses | None = None) -> dict[str, Any]:
    """Run the named analyses; returns ``{results.json key: section, "analysis_times_s": {...}}``.

    ``run_dir=None`` skips the plots. A non-additive PE with ``alpha`` requested explicitly gets
    ``"alpha_sweep": None`` (not applicable); with ``all`` the key is left out. ``hooks``: the task's
    robustness / extrapolation functions (``None``: the classification ones).
    """
    hooks = hooks or CLASSIFICATION_ANALYSES
    additive = bool(getattr(task.backbone.pe, "additive", False))
    names = _names(analyses, additive)
    cfg = dict(config or {})
    seed = int(cfg.get("seed") or 0)
    opts = _options(cfg)
    out: dict[str, Any] = {}
    times: dict[str, float] = {}
    rd = Path(run_dir) if run_dir is not None else None

    info = run_info(cfg, getattr(datamodule, "num_classes", None))  # figure titles and chance lines

    def plot(fn: Any, data: Any, name: str) -> None:
        if rd is not None and data:
            save_plot(fn, data, rd / name, run=info)

    for name in names:
        t0 = time.perf_counter()
        if name == "geometry":
            res = geometry(task, datamodule, probe_size=opts["probe_size"], seed=seed, tap=opts["ssdc_tap"],
                           eed_tap=opts["eed_tap"], distance=opts["ssdc_distance"],
                           rpi_permutations=int(opts["rpi_permutations"]), null=_flag(opts["rpi_null"]))
            plot(plot_geometry, res, "geometry.png")
        elif name == "robustness":
            res = hooks.robustness(task, datamodule, seed=seed, max_samples=opts["robustness_samples"])
            plot(plot_robustness, res, "robustness.png")
        elif name == "alpha":
            alpha_probe = opts["alpha_probe_size"] if opts["alpha_probe_size"] is not None else opts["probe_size"]
            res = alpha_sweep(task, datamodule, seed=seed, max_samples=opts["alpha_samples"],
                              probe_size=alpha_probe, tap=opts["ssdc_tap"],
                              rpi_permutations=int(opts["rpi_permutations"]), distance=opts["ssdc_distance"])
            plot(plot_alpha_sweep, res, "alpha_sweep.png")
        else:
            resolutions = (list(cfg.get("extrapolation_resolutions") or [])
                           or hooks.default_resolutions(datamodule, task))
            res = hooks.evaluate_extrapolation(task, datamodule, resolutions, max_samples=opts["extrapolation_samples"])
            plot(plot_extrapolation, res, "extrapolation.png")
        out[RESULT_KEYS[name]] = res
        times[name] = round(time.perf_counter() - t0, 3)
    out["analysis_times_s"] = times
    return out

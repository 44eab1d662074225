"""α sweep of additive PEs (docs/architecture.md §4): scale the added PE by α at inference.

For each α in :data:`ALPHAS` (1, .8, .7, .6, .5, .4, .2, 0) the PE's ``alpha`` is set, and the
sweep records, side by side:

* ``acc`` (clean validation accuracy), its standard error ``acc_se`` and ``n_samples``;
* ``fs``: the fragility under the modality's first shift (JPEG for images and video, event
  dropout for events, jitter for points; see :mod:`.robustness`), with the same rule as
  everywhere: ``None`` plus ``fs_reason`` when the clean accuracy at that α is within 2
  standard errors of chance;
* ``ssdc_rpi`` (per layer, mean over the geometry's K RPI permutations), ``ssdc_rpi_sd`` and
  ``ssdc_rpi_peak`` (max over layers of the mean), on the **full geometry probe** (the same
  fixed probe set and tap as :func:`~.geometry.geometry`; a smaller probe biases SSDC_RPI low).

ΔSSDC (``SSDC_RPI − SSDC_RPI`` of the ablated ``pe=none`` run of the same dataset, model and
seed) needs a second run; the sweep reports SSDC_RPI per α and leaves the difference to the
reader of both runs' ``results.json`` (``geometry.ssdc_rpi`` of the ``none`` run at the same
tap), so that a run's numbers do not depend on which other runs happen to exist.

The PE's previous ``alpha`` is restored afterwards, also when an evaluation fails. Only PEs
added to the token embedding honour α (``task.backbone.pe.additive``: ``ape``, ``sincos``); for
any other PE :func:`alpha_sweep` returns ``None`` (not applicable) and runs nothing. Every
evaluation runs in eval mode under ``torch.no_grad()`` in one process after training.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pebench.core.options import option

from .geometry import DEFAULT_PROBE_SIZE, DEFAULT_RPI_PERMUTATIONS, DEFAULT_TAP, SSDCOptions, geometry
from .plots import plot_alpha_sweep
from .progress import Steps, reporting
from .registry import Analysis, AnalysisContext, register_analysis
from .robustness import first_shift, robustness

__all__ = ["alpha_sweep", "ALPHAS", "AlphaOptions", "AlphaAnalysis"]

ALPHAS = (1.0, 0.8, 0.7, 0.6, 0.5, 0.4, 0.2, 0.0)


def alpha_sweep(task: Any, datamodule: Any, seed: int = 0, alphas: tuple[float, ...] | list[float] = ALPHAS,
                max_samples: int | None = None, probe_size: int | None = DEFAULT_PROBE_SIZE,
                tap: str = DEFAULT_TAP, rpi_permutations: int = DEFAULT_RPI_PERMUTATIONS,
                distance: str | None = None, rpi_draw: str = "shared") -> list[dict[str, Any]] | None:
    """One row per α: ``{"alpha", "acc", "acc_se", "n_samples", "shift", "shift_acc", "fs",
    "fs_reason", "tap", "layers", "ssdc_rpi", "ssdc_rpi_sd", "ssdc_rpi_peak"}``, or ``None`` for a
    non-additive PE."""
    pe = task.backbone.pe
    if not getattr(pe, "additive", False):
        return None
    shift = first_shift(task.modality)
    old = pe.alpha
    rows: list[dict[str, Any]] = []
    steps = Steps("alpha", len(alphas), "alpha")  # one progress line per alpha, none from the geometry inside
    try:
        for a in alphas:
            pe.alpha = float(a)
            with reporting(None):
                rob = robustness(task, datamodule, seed=seed, max_samples=max_samples, shifts=[shift])
                geo = geometry(task, datamodule, probe_size=probe_size, seed=seed, plain=False, null=False, tap=tap,
                               rpi_permutations=rpi_permutations, distance=distance, rpi_draw=rpi_draw)
            steps.done(f"alpha = {float(a):g}")
            vals = [v for v in geo["ssdc_rpi"] if v is not None]
            rows.append({"alpha": float(a), "acc": rob["clean_acc"], "acc_se": rob["clean_acc_se"],
                         "n_samples": rob["n_samples"], "shift": shift, "shift_acc": rob[shift]["acc"],
                         "fs": rob[shift]["fs"], "fs_reason": rob[shift]["fs_reason"], "tap": geo["tap"], "layers": geo["layers"],
                         "ssdc_rpi": geo["ssdc_rpi"], "ssdc_rpi_sd": geo["ssdc_rpi_sd"],
                         "ssdc_rpi_peak": max(vals) if vals else None})
    finally:
        pe.alpha = old
    return rows


# ------------------------------------------------------------------------------- registration
_COUNT: dict[str, Any] = {"minimum": 1, "what": "samples"}


@dataclass(frozen=True)
class AlphaOptions(SSDCOptions):
    """The α sweep's own options; the probe, tap, distance and K are the geometry's (:class:`SSDCOptions`)."""

    alpha_samples: int | None = option(128, "validation samples per alpha (accuracy, FS; none: all)", **_COUNT)
    alpha_probe_size: int | None = option(None, "SSDC_RPI probe per alpha (none: the geometry probe_size)",
                                          **_COUNT)


@register_analysis("alpha", key="alpha_sweep", order=30, options=AlphaOptions)
class AlphaAnalysis(Analysis):
    """Accuracy, FS and SSDC_RPI with the additive PE scaled by alpha at inference (additive PEs only)."""

    plot = ("alpha_sweep.png", plot_alpha_sweep)

    @classmethod
    def applies(cls, pe: Any) -> str | None:
        if getattr(pe, "additive", False):
            return None
        return "it scales a PE added to the token embedding (additive PEs only: see `bench list pes`)"

    def run(self, ctx: AnalysisContext) -> list[dict[str, Any]] | None:
        o = ctx.options
        probe = o["alpha_probe_size"] if o["alpha_probe_size"] is not None else o["probe_size"]
        return alpha_sweep(ctx.task, ctx.datamodule, seed=ctx.seed, max_samples=o["alpha_samples"], probe_size=probe,
                           tap=o["ssdc_tap"], rpi_permutations=int(o["rpi_permutations"]), distance=o["ssdc_distance"],
                           rpi_draw=o["rpi_draw"])

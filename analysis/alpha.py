"""α sweep of additive PEs (docs/ARCHITECTURE.md §4): scale the added PE by α at inference.

For each α in :data:`ALPHAS` (1, .8, .7, .6, .5, .4, .2, 0) the PE's ``alpha`` is set, and the
sweep records the validation accuracy, the fragility FS under the modality's first shift (JPEG
for images and video, event dropout for events, jitter for points; see :mod:`.robustness`) and
the peak over layers of SSDC_RPI on the fixed probe set (see :mod:`.geometry`). The PE's
previous ``alpha`` is restored afterwards, also when an evaluation fails.

Only PEs added to the token embedding honour α (``task.backbone.pe.additive``: ``ape``,
``sincos``); for any other PE :func:`alpha_sweep` returns ``None`` (not applicable) and runs
nothing. Cost control: accuracy/FS use the first ``max_samples`` validation samples and the
SSDC_RPI probe the first ``probe_size`` (callers choose; see ``run_analyses``). Every
evaluation runs in eval mode under ``torch.no_grad()`` in one process after training.
"""
from __future__ import annotations

from typing import Any

from .geometry import DEFAULT_PROBE_SIZE, geometry
from .robustness import first_shift, robustness

__all__ = ["alpha_sweep", "ALPHAS"]

ALPHAS = (1.0, 0.8, 0.7, 0.6, 0.5, 0.4, 0.2, 0.0)


def alpha_sweep(task: Any, datamodule: Any, seed: int = 0, alphas: tuple[float, ...] | list[float] = ALPHAS,
                max_samples: int | None = None, probe_size: int | None = DEFAULT_PROBE_SIZE
                ) -> list[dict[str, Any]] | None:
    """``[{"alpha", "acc", "fs", "ssdc_rpi_peak"}, ...]`` (one row per α), or ``None`` for a
    non-additive PE."""
    pe = task.backbone.pe
    if not getattr(pe, "additive", False):
        return None
    shift = first_shift(task.modality)
    old = pe.alpha
    rows: list[dict[str, Any]] = []
    try:
        for a in alphas:
            pe.alpha = float(a)
            rob = robustness(task, datamodule, seed=seed, max_samples=max_samples, shifts=[shift])
            geo = geometry(task, datamodule, probe_size=probe_size, seed=seed, plain=False)
            vals = [v for v in geo["ssdc_rpi"] if v is not None]
            rows.append({"alpha": float(a), "acc": rob["clean_acc"], "fs": rob[shift]["fs"],
                         "ssdc_rpi_peak": max(vals) if vals else None, "shift": shift})
    finally:
        pe.alpha = old
    return rows

"""A study's validation curves: one panel per dataset (and arm), the study's ``plateau.metric`` against the
optimizer step, one line per PE (the mean over its seeds at each logged step, a run that reached its ``--stop-at``
target holding its last value; shaded: the seeds' range), written
as ``<report stem>_curves.png`` beside the report by ``bench study report``.

The figure is drawn on matplotlib's Agg canvas with no Software metadata. ``bench study check`` compares the
report's text, not the PNG: the image's bytes depend on the installed matplotlib and fonts, its content only on the
runs.
"""
from __future__ import annotations

import io
import math
from typing import Any

from pebench.leaderboard.curves import plain
from pebench.studies.cells import Cell
from pebench.studies.spec import Study

__all__ = ["curves_png", "curves_name"]


def curves_name(report_name: str) -> str:
    """The PNG's file name beside a report: ``REPORT.md`` -> ``REPORT_curves.png``."""
    stem = report_name.rsplit("/", 1)[-1]
    stem = stem[:-3] if stem.endswith(".md") else stem
    return f"{stem}_curves.png"


def _series(cell: Cell) -> tuple[list[int], list[float], list[float], list[float]]:
    """Steps, mean, min and max over the cell's seeds of the plateau metric at each step any seed logged, each run
    read as a step function (its latest validation at or before the step: seeds validate at different steps, e.g.
    at an epoch's end). A run that stopped because it reached its target (``--stop-at``) holds its last value to the
    cell's last step: without it the mean at later steps would be over the slow seeds only."""
    steps_all = sorted({step for run in cell.runs for step, _ in run.curve})
    by_step: dict[int, list[float]] = {}
    for run in cell.runs:
        if not run.curve:
            continue
        first_step, last_step = run.curve[0][0], run.curve[-1][0]
        j, current = 0, run.curve[0][1]
        for step in steps_all:
            if step < first_step or step > last_step and run.stop != "reached":
                continue
            while j < len(run.curve) and run.curve[j][0] <= step:  # the latest validation at or before this step
                current = run.curve[j][1]
                j += 1
            by_step.setdefault(step, []).append(current)
    steps = sorted(by_step)
    return (steps, [math.fsum(by_step[s]) / len(by_step[s]) for s in steps], [min(by_step[s]) for s in steps],
            [max(by_step[s]) for s in steps])


def curves_png(study: Study, cells: dict[tuple[str, str, str], Cell]) -> bytes | None:
    """The PNG bytes (None when the study states no plateau metric or no run logged a curve)."""
    if study.plateau_metric is None:
        return None
    panels = [(arm.name, d) for arm in study.arms for d in study.datasets
              if any(c.runs and any(r.curve for r in c.runs) for (a, dd, _), c in cells.items()
                     if a == arm.name and dd == d)]
    if not panels:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # deferred: ~0.5 s to import, paid only here
    from matplotlib.figure import Figure  # deferred: as above

    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(figsize=(5.2 * ncols + 2.0, 3.4 * nrows), dpi=90, layout="constrained")
    FigureCanvasAgg(fig)
    handles: dict[str, Any] = {}
    for k, (arm, dataset) in enumerate(panels):
        ax = fig.add_subplot(nrows, ncols, k + 1)
        for i, pe in enumerate(study.pes):
            cell = cells.get((arm, dataset, pe))
            if cell is None or not cell.runs:
                continue
            steps, mean, lo, hi = _series(cell)
            if not steps:
                continue
            style = {"color": f"C{i % 10}", "ls": "-" if i < 10 else "--"}
            (line,) = ax.plot(steps, mean, lw=1.2, **style)
            if len(cell.runs) > 1:
                ax.fill_between(steps, lo, hi, color=style["color"], alpha=0.12, lw=0)
            handles.setdefault(pe, line)
        title = dataset if len(study.arms) == 1 else f"{arm} / {dataset}"
        ax.set(xlabel="optimizer step", ylabel=plain(study.plateau_metric), title=plain(title))
    fig.legend(list(handles.values()), [plain(pe) for pe in handles], loc="outside right upper", fontsize=8,
               frameon=False, title="PE (mean over seeds; shaded: range)", title_fontsize=8)
    fig.suptitle(plain(f"{study.name}: {study.plateau_metric} during training"))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()

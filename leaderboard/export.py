"""The leaderboard as CSV and JSON: one record per cell (:class:`.cells.Cell`), deterministic bytes.

Numbers are the raw values the markdown rounds: metrics as stored (fractions stay fractions; the
``percent`` column says whether the markdown shows them ×100), written with Python's shortest
round-trip ``repr``; a missing or non-finite value is an empty CSV field / JSON ``null``.

CSV columns: the cell's identity (``dataset, task, model, pe, variant, tag, primary_metric,
percent``), the seeds (``n``, ``seeds`` and per-seed ``values``, ``;``-separated in seed order), the
primary metric's ``mean, std, ci95_lo, ci95_hi``, the paired difference to the reference
(``reference, delta_mean, delta_lo, delta_hi, delta_p, delta_t_p, delta_significant, delta_note``),
geometry (``eed_min_percent, ssdc_rpi_peak, ssdc_last_layer``), one ``acc1@<res>`` column per
resolution and one ``fs_<shift>`` column per shift any cell reports, then ``git_sha, fingerprint``
and the cell's ``runs`` (``results.json`` paths relative to the results folder).

JSON: ``{"generated_by", "reference", "complete_runs", "cells": [...], "incomplete": [...],
"problems": [...]}``; a cell holds the same fields, plus every metric's mean/std/n, the per-layer
SSDC and EED means, and ``columns``: per extrapolation, geometry and FS column the per-seed values,
seed count, mean and Student-t 95 % interval.

Both are text a UTF-8 file can hold whatever the result files held: a lone surrogate (``"\\ud800"`` in a
JSON string, a run folder whose name is not UTF-8) is written as its escape (:func:`.text.encodable`).
"""
from __future__ import annotations

import csv
import io
import json
import math
from typing import Any, Sequence

from .cells import Cell
from .collect import RunRecord
from .render import DEFAULT_SHIFTS, natural_sort_key
from .text import encodable

__all__ = ["cells_csv", "cells_json", "cell_record", "generated_by"]

FIXED_COLUMNS = ("dataset", "task", "model", "pe", "variant", "tag", "primary_metric", "percent", "n", "seeds",
                 "values", "mean", "std", "ci95_lo", "ci95_hi", "reference", "delta_mean", "delta_lo", "delta_hi",
                 "delta_p", "delta_t_p", "delta_significant", "delta_note", "eed_min_percent", "ssdc_rpi_peak",
                 "ssdc_last_layer")


def generated_by(results_label: str, reference: str | None, fmt: str) -> str:
    """The command that makes the output (part of it: keep ``results_label`` stable)."""
    ref = "" if reference == "none" else f" --reference {reference}"
    return f"bench leaderboard --results {results_label}{ref} --format {fmt}"


def _num(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def cell_record(cell: Cell) -> dict[str, Any]:
    """A cell as a JSON-ready dict (non-finite numbers as None)."""
    delta = None if cell.delta is None else {k: (_num(v) if isinstance(v, float) else v)
                                              for k, v in cell.delta.items()}
    return {
        "dataset": cell.dataset, "task": cell.task, "model": cell.model, "pe": cell.pe, "variant": cell.label,
        "tag": cell.tag, "row": cell.row_label, "primary_metric": cell.primary_metric, "percent": cell.percent,
        "n": len(cell.runs), "seeds": cell.seeds,
        "values": [_num(cell.values[s]) for s in cell.seeds],
        "mean": _num(cell.mean), "std": _num(cell.std),
        "ci95": None if cell.ci is None else [_num(cell.ci[0]), _num(cell.ci[1])],
        "reference": cell.reference, "is_reference": cell.is_reference, "delta": delta, "delta_note": cell.delta_note,
        "eed_min_percent": _num(cell.eed_min), "ssdc_rpi_peak": _num(cell.ssdc_rpi_peak),
        "ssdc_last_layer": _num(cell.ssdc_last),
        "extrapolation": {res: _num(v) for res, v in cell.extrapolation.items()},
        "fs": {s: _num(v) for s, v in cell.fs.items()}, "fs_undefined": cell.fs_undefined,
        "metrics": {m: {k: (_num(v) if isinstance(v, float) else v) for k, v in st.items()}
                    for m, st in cell.metrics.items()},
        "layers": {k: {"layers": v["layers"], "mean": [_num(x) for x in v["mean"]], "n": v["n"]}
                   for k, v in cell.layers.items()},
        "columns": {k: {"values": [_num(x) for x in v["values"]], "n": v["n"], "mean": _num(v["mean"]),
                        "ci95": None if v["ci95"] is None else [_num(v["ci95"][0]), _num(v["ci95"][1])]}
                    for k, v in cell.columns.items()},
        "git_sha": cell.git_sha, "fingerprint": cell.fingerprint, "runs": [r.path for r in cell.runs],
    }


def cells_json(cells: Sequence[Cell], runs: Sequence[RunRecord], problems: Sequence[str], results_label: str,
               reference: str | None, smoke_left_out: int = 0) -> str:
    """The JSON document (see the module docstring); ends with a newline. ``smoke_runs_left_out`` only when
    the caller left smoke runs out."""
    doc = {
        "generated_by": generated_by(results_label, reference, "json"),
        "reference": reference,
        "complete_runs": sum(1 for r in runs if r.complete),
        "cells": [cell_record(c) for c in cells],
        "incomplete": [{"path": r.path, "status": r.status}
                       for r in sorted((r for r in runs if not r.complete), key=lambda r: r.path)],
        "problems": list(problems),
    }
    if smoke_left_out:
        doc["smoke_runs_left_out"] = smoke_left_out
    return encodable(json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n")


def _field(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ""
    return str(v)


#: a CSV field a spreadsheet would read as a formula starts with one of these (OWASP, "CSV Injection")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _text(v: Any) -> str:
    """A text field read from result files (a dataset, PE, tag or path name), inert in a spreadsheet: one that would
    start a formula gets a leading apostrophe, which spreadsheets show as text and do not evaluate."""
    t = _field(v)
    return "'" + t if t.startswith(_FORMULA_START) else t


def cells_csv(cells: Sequence[Cell]) -> str:
    """The CSV table (see the module docstring); ``\\n`` line ends."""
    resolutions = sorted({res for c in cells for res in c.extrapolation}, key=natural_sort_key)
    shifts = [s for s in DEFAULT_SHIFTS if any(s in c.fs for c in cells)]
    shifts += sorted({s for c in cells for s in c.fs} - set(DEFAULT_SHIFTS))
    header = [*FIXED_COLUMNS, *(f"acc1@{r}" for r in resolutions), *(f"fs_{s}" for s in shifts),
              "git_sha", "fingerprint", "runs"]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for c in cells:
        d = c.delta or {}
        row = [*(_text(v) for v in (c.dataset, c.task, c.model, c.pe, c.label, c.tag, c.primary_metric)), c.percent,
               len(c.runs),
               ";".join(str(s) for s in c.seeds), ";".join(_field(c.values[s]) for s in c.seeds),
               c.mean, c.std, *(c.ci or (None, None)), _text(c.reference), d.get("mean"), d.get("lo"), d.get("hi"),
               d.get("p"), d.get("t_p"), d.get("significant"), _text(c.delta_note), c.eed_min, c.ssdc_rpi_peak, c.ssdc_last,
               *(c.extrapolation.get(r) for r in resolutions), *(c.fs.get(s) for s in shifts),
               _text(c.git_sha), _text(c.fingerprint), _text(";".join(r.path for r in c.runs))]
        writer.writerow([_field(v) for v in row])
    return encodable(buf.getvalue())

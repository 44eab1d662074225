"""Plain-text summary tables printed at the end of ``bench run`` / ``bench eval``, and by ``bench runs show``.

``bench runs show`` formats a ``results.json`` that may come from anyone (its strings made terminal-safe by
:mod:`.runs` first), so :func:`format_summary` takes each section for what it is: a section of another type
than pebench writes (a list where an object belongs, a string for a wall time) is shown as it is or left out,
never a traceback."""
from __future__ import annotations

import math
import os
from typing import Any, Sequence

__all__ = ["format_table", "format_summary"]


def _fmt(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        return f"{v:.4f}" if math.isfinite(v) else str(v)
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def format_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in header]] + [[_fmt(c) for c in r] for r in rows]
    numeric = [[isinstance(c, (int, float)) and not isinstance(c, bool) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = "+-" + "-+-".join("-" * w for w in widths) + "-+"
    out = [line, "| " + " | ".join(c.ljust(w) for c, w in zip(cells[0], widths)) + " |", line]
    out += ["| " + " | ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(r, widths, nums)) + " |"
            for r, nums in zip(cells[1:], numeric)]
    out.append(line)
    return "\n".join(out)


_GEOMETRY_SSDC_COLS = ("ssdc", "ssdc_rpi", "ssdc_rpi_sd", "ssdc_rpi_init", "ssdc_rpi_init_sd", "ssdc_rpi_gain",
                       "delta_ssdc")
_GEOMETRY_EED_COLS = ("eed_percent", "eed_top1_share")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float))


def _geometry_table(geo: dict[str, Any]) -> str | None:
    """Per-layer table; SSDC columns are indexed by ``layers`` (the SSDC tap), EED columns by
    ``eed_layers`` (the EED tap; the same as ``layers`` in older results). None when the layers are not
    lists of numbers (they are sorted)."""
    layers = geo.get("layers")
    if not isinstance(layers, list) or not layers:
        return None
    eed_layers = geo.get("eed_layers") if isinstance(geo.get("eed_layers"), list) else layers
    if not all(_is_number(x) for x in layers + eed_layers):
        return None
    cols = [k for k in _GEOMETRY_SSDC_COLS + _GEOMETRY_EED_COLS if isinstance(geo.get(k), list)]
    index = {k: (eed_layers if k in _GEOMETRY_EED_COLS else layers) for k in cols}
    rows = []
    for layer in sorted(set(layers) | set(eed_layers)):
        row: list[Any] = [layer]
        for k in cols:
            idx = index[k].index(layer) if layer in index[k] else None
            row.append(geo[k][idx] if idx is not None and idx < len(geo[k]) else None)
        rows.append(row)
    return format_table(["layer", *cols], rows)


def _geometry_caption(geo: dict[str, Any]) -> str:
    """``geometry per layer (SSDC tap attn_in, l1, RPI K = 8; EED tap attn_in)``."""
    parts = []
    if geo.get("tap"):
        parts.append(f"SSDC tap {geo['tap']}")
    if geo.get("distance"):
        parts.append(str(geo["distance"]))
    if geo.get("rpi_permutations"):
        parts.append(f"RPI K = {geo['rpi_permutations']}")
    if geo.get("probe_size"):
        parts.append(f"probe {geo['probe_size']}")
    head = ", ".join(parts)
    if geo.get("eed_tap"):
        head += f"; EED tap {geo['eed_tap']}"
    return f"geometry per layer ({head})" if head else "geometry per layer"


def _records_table(title: str, value: Any) -> str | None:
    """A list of flat dicts (extrapolation rows, alpha sweep) or a flat dict (robustness)."""
    if isinstance(value, dict):
        flat = []
        for k, v in value.items():  # one level of nesting: {"jpeg": {"acc": .., "fs": ..}} -> jpeg.acc, jpeg.fs
            items = v.items() if isinstance(v, dict) else [("", v)]
            flat += [(f"{k}.{k2}" if k2 else k, v2) for k2, v2 in items
                     if isinstance(v2, (int, float, str)) or v2 is None]
        return f"{title}\n" + format_table(["name", "value"], flat) if flat else None
    if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
        keys: list[str] = []
        for r in value:
            keys += [k for k, v in r.items() if k not in keys and (isinstance(v, (int, float, str)) or v is None)]
        keys.sort(key=lambda k: k != "resolution")  # the resolution column first
        return f"{title}\n" + format_table(keys, [[r.get(k) for k in keys] for r in value])
    return None


def _skip_rows(skipped: Any) -> list[tuple[str, Any]]:
    """``skipped_samples`` -> one row per reason with a non-zero count (none when nothing was skipped)."""
    if not isinstance(skipped, dict):
        return []
    by_reason = skipped.get("by_reason") if isinstance(skipped.get("by_reason"), dict) else {}
    if not by_reason and skipped.get("in_batches"):
        by_reason = {"corrupt": skipped["in_batches"]}
    rows: list[tuple[str, Any]] = [(f"skipped ({k})", v) for k, v in sorted(by_reason.items())
                                   if isinstance(v, int) and v]
    frac = skipped.get("fraction") if isinstance(skipped.get("fraction"), dict) else {}
    if rows:
        rows += [(f"skipped fraction ({k})", v) for k, v in sorted(frac.items()) if isinstance(v, float) and v]
    truncated = skipped.get("truncated") if isinstance(skipped.get("truncated"), dict) else {}
    rows += [(f"read from truncated files ({k})", v) for k, v in sorted(truncated.items()) if isinstance(v, int) and v]
    return rows


def _cap_rows(cap: Any) -> list[tuple[str, Any]]:
    """``token_cap`` (spiking tokens) -> one row per split: samples whose tokens were capped."""
    if not isinstance(cap, dict):
        return []
    limit = cap.get("max_tokens") or "none"
    return [(f"token cap {limit} hit ({k})", f"{v.get('capped')} of {v.get('samples')} samples, "
             f"{v.get('tokens_per_sample')} tokens/sample kept of {v.get('fired_per_sample')} fired")
            for k, v in cap.items() if isinstance(v, dict)]


def _run_dir(results: dict[str, Any]) -> Any:
    """The run directory as the user would type it: ``run_dir`` (relative to ``--out`` since it is recorded
    that way) under the configuration's ``out``; an absolute ``run_dir`` (older files) as recorded."""
    config = results.get("config")
    run_dir, out = results.get("run_dir"), config.get("out") if isinstance(config, dict) else None
    if not isinstance(run_dir, str) or not isinstance(out, str) or os.path.isabs(run_dir) or out in ("", "."):
        return run_dir
    return os.path.join(out, run_dir)


def _wall_time(v: Any) -> str:
    """``12.3``; a value that is not a number (another program's file) as it is."""
    try:
        return f"{v or 0:.1f}"
    except (TypeError, ValueError, OverflowError):
        return str(v)


def format_summary(results: dict[str, Any]) -> str:
    """The end-of-run summary: run, status, metrics, then analyses that produced tables."""
    rows: list[tuple[str, Any]] = [
        ("run", f"{results.get('dataset')} / {results.get('variant', results.get('pe'))} / "
                f"{results.get('model')} / seed {results.get('seed')}"),
        ("status", results.get("status")),
    ]
    metrics = results.get("metrics")
    rows += [(k, v) for k, v in (metrics.items() if isinstance(metrics, dict) else [])]
    if results.get("incomplete_reason"):
        rows.append(("incomplete because", results["incomplete_reason"]))
    rows += [("val samples", results.get("val_samples"))]
    rows += _skip_rows(results.get("skipped_samples"))
    rows += _cap_rows(results.get("token_cap"))
    rows += [("parameters", results.get("n_params")),
             ("wall time (s)", _wall_time(results.get("wall_time_s"))), ("run dir", _run_dir(results))]
    if isinstance(results.get("analyses"), str):
        rows.append(("analyses", results["analyses"]))
    parts = [format_table(["", "value"], rows)]
    if isinstance(results.get("geometry"), dict):
        geo = _geometry_table(results["geometry"])
        if geo:
            parts.append(_geometry_caption(results["geometry"]) + "\n" + geo)
    for key, title in (("robustness", "robustness"), ("alpha_sweep", "alpha sweep"),
                       ("extrapolation", "resolution extrapolation")):
        t = _records_table(title, results.get(key))
        if t:
            parts.append(t)
    errs = results.get("analysis_errors")
    if errs:
        parts.append("analysis errors: " + ("; ".join(f"{k}: {v}" for k, v in errs.items()) if isinstance(errs, dict)
                                            else str(errs)))
    return "\n".join(parts)

"""``bench runs``: list run directories and inspect one, from their ``results.json`` files alone.

Reads only JSON, YAML and directory listings, never torch, so it answers in well under a second
even for a results tree of hundreds of runs (docs/architecture.md §5 describes the files).

* ``bench runs [--results DIR] [--dataset D] [--pe P] [--model M] [--status S]``: one row per
  ``<DIR>/**/results.json``: dataset, PE variant, model, seed, status, primary metric and its
  value, wall time, fingerprint (when the run recorded one), and why a run is not complete.
  A run submitted by ``bench sweep --launcher slurm`` whose ``bench run`` has not started (or was
  requeued) is listed from its ``slurm.json``: status ``queued`` with the SLURM job id.
* ``bench runs show RUN``: one run's status, provenance, metrics, analyses (the same tables as
  the end-of-run summary), resolved configuration and files. ``RUN`` is a run directory, or its
  path relative to ``--results`` (``shapes/pape/vit-nano/seed0``).

Every file is read with :func:`pebench.core.io.read_json` and every string it holds is passed through
:func:`.text.terminal_safe` before it is shown, so a hostile ``results.json`` (nested 100k deep, not UTF-8,
too large, holding terminal escape sequences, of unexpected types) is one ``unreadable`` row of the listing,
or for ``bench runs show`` one ``bench: error:`` line (:class:`~pebench.core.errors.ResultsError`), never a
traceback or a command to the terminal.

The command's handler (its arguments and messages) is :mod:`pebench.cli.commands.runs`.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
from pathlib import Path
from typing import Any

from pebench.core.errors import ConfigError, ResultsError
from pebench.core.io import UnreadableJSON, read_json

from .summary import format_summary, format_table
from .text import terminal_safe

__all__ = ["collect_runs", "read_results", "run_row", "slurm_row", "not_complete_reason", "format_runs", "format_run",
           "filter_runs", "resolve_run", "add_provenance", "RUN_COLUMNS"]

#: columns of ``bench runs`` (in order)
RUN_COLUMNS = ("dataset", "pe", "model", "seed", "status", "metric", "value", "wall (s)", "fingerprint", "reason")
_REASON_WIDTH = 70


def _short(text: Any, width: int = _REASON_WIDTH) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= width else s[: width - 1] + "…"


def _safe(value: Any) -> Any:
    """A parsed JSON value with every string (keys too) passed through :func:`.text.terminal_safe`; numbers, booleans
    and null as they are. Recursive: :func:`~pebench.core.io.read_json` bounds the nesting."""
    if isinstance(value, str):
        return terminal_safe(value)
    if isinstance(value, dict):
        return {terminal_safe(k): _safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_safe(v) for v in value]
    return value


def _scalar(v: Any) -> Any:
    """A table cell of a value pebench writes as a string or a number; anything else (an object or a list
    where a name belongs) as its short JSON text, so every cell is printable and hashable (``--dataset`` etc.)."""
    if v is None or isinstance(v, (str, int, float)):
        return v
    return _short(json.dumps(v, sort_keys=True, default=str), 40)


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _seconds(v: Any) -> int | None:
    """Whole seconds of a recorded wall time; None when it is not a finite number."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    try:
        return int(round(float(v))) if math.isfinite(v) else None
    except OverflowError:  # an integer too large for a float: no wall time pebench records
        return None


def read_results(path: Path) -> dict[str, Any]:
    """A ``results.json`` as a dict of terminal-safe strings (:func:`_safe`). Raises ``OSError`` (cannot be
    opened, or not a regular file: a FIFO would block) or :class:`~pebench.core.io.UnreadableJSON` (one line:
    too large, not UTF-8, too deeply nested, not JSON, not an object)."""
    if not path.is_file():
        raise OSError(f"{terminal_safe(path.name)} is not a regular file")
    res = read_json(path)
    if not isinstance(res, dict):
        raise UnreadableJSON(f"expected a JSON object, got {type(res).__name__}")
    return _safe(res)


def _fingerprint(res: dict[str, Any]) -> str:
    """A short form of ``results["fingerprint"]`` (a hex string, or a mapping holding one)."""
    fp = res.get("fingerprint")
    if fp is None:
        return ""
    if isinstance(fp, dict):
        for key in ("digest", "sha256", "hash", "value", "id"):
            if isinstance(fp.get(key), str):
                return fp[key][:12]
        return _short(json.dumps(fp, sort_keys=True), 12)
    return str(fp)[:12]


def not_complete_reason(res: dict[str, Any]) -> str:
    """Why a run is not ``complete`` (empty for complete runs), from what ``bench run`` recorded."""
    status = res.get("status")
    if status == "complete":
        return ""
    for key in ("reason", "status_reason", "incomplete_reason"):  # an explicit reason wins
        if res.get(key):
            return _short(res[key])
    if status == "failed":
        return _short(res.get("error") or "failed (no error recorded)")
    if status == "interrupted":
        by = res.get("interrupted_by") or "a signal"
        resume = res.get("resume_command")
        return _short(f"interrupted by {by}" + (f"; resume: {resume}" if resume else ""), 2 * _REASON_WIDTH)
    if status == "running":
        return "no end recorded: still running, or killed (bench run with the same options resumes it)"
    if status == "incomplete":
        errs = _dict(res.get("analysis_errors"))
        if errs:
            name = sorted(errs)[0]
            more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
            return _short(f"analysis {name} failed: {errs[name]}{more}")
        if res.get("analyses") == "unavailable":
            return "analyses unavailable in this installation"
        cfg = _dict(res.get("config"))
        if cfg.get("max_time"):
            return f"training stopped by --max-time {cfg['max_time']} before {cfg.get('epochs')} epochs"
        return "training interrupted before the last epoch"
    return _short(f"status {_scalar(status)!r}")


def run_row(res: dict[str, Any], rel: str) -> dict[str, Any]:
    """One ``bench runs`` row (a dict keyed by :data:`RUN_COLUMNS` plus ``run``)."""
    metric = res.get("primary_metric")
    value = _dict(res.get("metrics")).get(metric) if metric and isinstance(metric, str) else None
    return {"run": rel, "dataset": _scalar(res.get("dataset")), "pe": _scalar(res.get("variant") or res.get("pe")),
            "base_pe": _scalar(res.get("pe")), "model": _scalar(res.get("model")), "seed": _scalar(res.get("seed")),
            "status": _scalar(res.get("status")), "metric": _scalar(metric) or "", "value": _scalar(value),
            "wall (s)": _seconds(res.get("wall_time_s")), "fingerprint": _fingerprint(res),
            "reason": not_complete_reason(res)}


#: state file of a run submitted by ``bench sweep --launcher slurm`` (``pebench.sweep.slurm``)
SLURM_STATE_NAME = "slurm.json"
#: ``results.json`` statuses that supersede the SLURM launcher's state: ``bench run`` is going or done
_RESULTS_SUPERSEDE = ("running", "complete")


def _slurm_state(run_dir: Path) -> dict[str, Any] | None:
    try:
        return read_results(run_dir / SLURM_STATE_NAME)
    except (OSError, UnreadableJSON):
        return None


def slurm_row(state: dict[str, Any], rel: str, res: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``bench runs`` row of a run the SLURM launcher queued and ``bench run`` has not (re)started:
    status ``queued`` (or the task's own state when it ended before ``results.json``)."""
    parts = Path(rel).parts
    seed = parts[3][4:] if len(parts) == 4 and parts[3].startswith("seed") else None
    row = run_row(res, rel) if res else {
        "run": rel, "dataset": parts[0] if parts else None, "pe": parts[1] if len(parts) > 1 else None,
        "base_pe": None, "model": parts[2] if len(parts) > 2 else None,
        "seed": int(seed) if seed and seed.lstrip("-").isdecimal() and len(seed) < 100 else seed, "metric": "",
        "value": None,
        "wall (s)": None, "fingerprint": ""}
    job, st = state.get("job_id"), str(state.get("state"))
    if st in ("queued", "requeued"):
        row["status"] = "queued"
        row["reason"] = (f"SLURM job {job} requeued (time limit or preemption); resumes from last.ckpt"
                         if st == "requeued" else f"SLURM job {job} queued")
    else:
        row["status"] = st
        row["reason"] = _short(f"SLURM job {job} {st}; its log is under {state.get('folder')}")
    return row


def _seed_key(v: Any) -> tuple[int, str]:
    return (v, "") if isinstance(v, int) else (1 << 62, str(v))


def collect_runs(root: str | os.PathLike) -> list[dict[str, Any]]:
    """Every ``<root>/**/results.json`` as a :func:`run_row`, sorted by dataset, PE, model, seed.

    An unreadable file gives a row with status ``unreadable`` and the reason, not an error.
    """
    root = Path(root)
    rows = []
    for path in sorted(root.rglob("results.json")):
        rel = terminal_safe(str(path.parent.relative_to(root)) or ".")  # a folder name is anyone's too
        try:
            res = read_results(path)
        except (OSError, UnreadableJSON) as e:
            parts = Path(rel).parts
            reason = str(e) if isinstance(e, UnreadableJSON) else f"{type(e).__name__}: {e}"
            rows.append({"run": rel, "dataset": parts[0] if parts else None, "pe": None, "base_pe": None,
                         "model": None, "seed": None, "status": "unreadable", "metric": "", "value": None,
                         "wall (s)": None, "fingerprint": "", "reason": _short(terminal_safe(reason))})
            continue
        state = _slurm_state(path.parent) if res.get("status") not in _RESULTS_SUPERSEDE else None
        if state is not None and state.get("state") in ("queued", "requeued"):
            rows.append(slurm_row(state, rel, res))  # resubmitted or requeued: waiting in SLURM's queue
            continue
        rows.append(run_row(res, rel))
    for path in sorted(root.rglob(SLURM_STATE_NAME)):  # submitted to SLURM, bench run not started yet
        if not (path.parent / "results.json").exists():
            state = _slurm_state(path.parent)
            if state is not None:
                rows.append(slurm_row(state, terminal_safe(str(path.parent.relative_to(root)) or ".")))
    rows.sort(key=lambda r: (str(r["dataset"]), str(r["pe"]), str(r["model"]), _seed_key(r["seed"]), r["run"]))
    return rows


def filter_runs(rows: list[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    """The rows whose dataset, PE (or base PE), model and status are in ``args``' sets (``None``: any)."""

    def keep(r: dict[str, Any]) -> bool:
        if args.dataset and r["dataset"] not in args.dataset:
            return False
        if args.pe and r["pe"] not in args.pe and r["base_pe"] not in args.pe:
            return False
        if args.model and r["model"] not in args.model:
            return False
        return not args.status or r["status"] in args.status
    return [r for r in rows if keep(r)]


def format_runs(rows: list[dict[str, Any]]) -> str:
    """The ``bench runs`` table plus a count line per status."""
    table = format_table(list(RUN_COLUMNS), [[r[c] if r[c] is not None else "" for c in RUN_COLUMNS]
                                             for r in rows])
    counts: dict[str, int] = {}
    for r in rows:
        counts[str(r["status"])] = counts.get(str(r["status"]), 0) + 1
    return table + "\n" + f"{len(rows)} run(s): " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def resolve_run(run: str, root: Path) -> Path:
    """The run directory ``run`` names: itself, or a path relative to ``root``, holding ``results.json``."""
    for cand in (Path(run), root / run):
        if (cand / "results.json").is_file():
            return cand
    raise ConfigError(f"no run {run!r}: expected a run directory holding results.json (or a path relative to "
                      f"--results {str(root)!r}, e.g. shapes/pape/vit-nano/seed0; `bench runs` lists them)")


def _files_table(run_dir: Path) -> str:
    rows = []
    for p in sorted(run_dir.rglob("*")):
        if p.is_file() and not p.name.startswith("."):
            rows.append([terminal_safe(str(p.relative_to(run_dir))), p.stat().st_size])
    return format_table(["file", "bytes"], rows) if rows else "(no files)"


def _provenance(res: dict[str, Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    reason = not_complete_reason(res)
    if reason:
        out.append(("reason", reason))
    for key in ("primary_metric", "fingerprint", "git_sha", "task"):
        if res.get(key) is not None:
            out.append((key, _scalar(res[key]) if key != "fingerprint" else _fingerprint(res)))
    if res.get("resumed_from"):
        rf = res["resumed_from"]
        out.append(("resumed from", f"{rf.get('checkpoint')} at epoch {rf.get('epoch')}" if isinstance(rf, dict)
                    else _scalar(rf)))
    skipped = _dict(res.get("skipped_samples"))
    if skipped.get("in_batches") or skipped.get("by_reason"):
        out.append(("skipped samples", f"{_scalar(skipped.get('in_batches', 0))} in batches; "
                    + ", ".join(f"{k}: {_scalar(v)}" for k, v in sorted(_dict(skipped.get("by_reason")).items()))))
    versions = _dict(res.get("versions"))
    if versions:
        out.append(("versions", ", ".join(f"{k} {_scalar(v)}" for k, v in versions.items())))
    provenance = res.get("provenance")
    for entry in provenance if isinstance(provenance, list) else []:  # what a later command (bench eval) added
        if isinstance(entry, dict):
            rep = entry.get("replaced")
            replaced = (f"; replaced rows of {rep.get('added_by')} ({rep.get('samples')} samples per size)"
                        if isinstance(rep, dict) else "")
            out.append((f"{entry.get('section')} from", f"{entry.get('command', '?')} at {entry.get('time')}, "
                        f"{entry.get('samples')} samples per size, code {entry.get('git_sha')}{replaced}"))
    return out


def _samples(value: Any) -> Any:
    """Samples per evaluated size of a list of rows with ``n_samples``: one int when all agree,
    else ``{resolution: n}``; ``None`` when the rows do not say."""
    if not isinstance(value, list):
        return None
    counts = {str(r.get("resolution")): r.get("n_samples") for r in value
              if isinstance(r, dict) and r.get("n_samples") is not None}
    if not counts:
        return None
    distinct = set(counts.values())
    return next(iter(distinct)) if len(distinct) == 1 else counts


def add_provenance(results: dict[str, Any], section: str, value: Any, command: str,
                   git_sha: str | None, now: str | None = None) -> dict[str, Any]:
    """Put ``value`` into ``results[section]`` and append to ``results["provenance"]`` what added
    it: section, sample count (per evaluated size), command line, code version (git sha) and UTC
    time. Rows it replaces are kept in the entry (``replaced``: the old value with its sample
    count), never dropped. Returns the entry."""
    entry: dict[str, Any] = {
        "section": section, "command": command, "samples": _samples(value), "git_sha": git_sha,
        "time": now or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "replaced": None}
    if results.get(section) is not None:
        old = results[section]
        entry["replaced"] = {"value": old, "samples": _samples(old),
                             "added_by": next((p.get("command") for p in reversed(results.get("provenance") or [])
                                               if isinstance(p, dict) and p.get("section") == section), "bench run")}
    results[section] = value
    results.setdefault("provenance", []).append(entry)
    return entry


def format_run(run_dir: Path) -> str:
    """``bench runs show``: summary, provenance, configuration and files of one run. A ``results.json`` that
    cannot be read as one is a :class:`~pebench.core.errors.ResultsError` (one line naming the file)."""
    path = run_dir / "results.json"
    try:
        res = read_results(path)
    except (OSError, UnreadableJSON) as e:
        raise ResultsError(terminal_safe(f"{path}: {e}")) from None
    parts = [f"run {terminal_safe(str(run_dir))}", format_summary(res)]
    prov = _provenance(res)
    if prov:
        parts.append("provenance\n" + format_table(["", "value"], prov))
    cfg = res.get("config")
    if isinstance(cfg, dict) and cfg:
        parts.append("configuration\n" + format_table(
            ["key", "value"], [[k, json.dumps(v) if isinstance(v, (dict, list)) else v] for k, v in cfg.items()]))
    parts.append("files\n" + _files_table(run_dir))
    return "\n".join(parts)

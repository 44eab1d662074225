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

from pebench.core.errors import ConfigError

from .summary import format_summary, format_table

__all__ = ["collect_runs", "run_row", "slurm_row", "not_complete_reason", "format_runs", "format_run", "filter_runs",
           "resolve_run", "add_provenance", "RUN_COLUMNS"]

#: columns of ``bench runs`` (in order)
RUN_COLUMNS = ("dataset", "pe", "model", "seed", "status", "metric", "value", "wall (s)", "fingerprint", "reason")
_REASON_WIDTH = 70


def _short(text: Any, width: int = _REASON_WIDTH) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= width else s[: width - 1] + "…"


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
        errs = res.get("analysis_errors") or {}
        if errs:
            name = sorted(errs)[0]
            more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
            return _short(f"analysis {name} failed: {errs[name]}{more}")
        if res.get("analyses") == "unavailable":
            return "analyses unavailable in this installation"
        cfg = res.get("config") or {}
        if cfg.get("max_time"):
            return f"training stopped by --max-time {cfg['max_time']} before {cfg.get('epochs')} epochs"
        return "training interrupted before the last epoch"
    return _short(f"status {status!r}")


def run_row(res: dict[str, Any], rel: str) -> dict[str, Any]:
    """One ``bench runs`` row (a dict keyed by :data:`RUN_COLUMNS` plus ``run``)."""
    metric = res.get("primary_metric")
    value = (res.get("metrics") or {}).get(metric) if metric else None
    wall = res.get("wall_time_s")
    return {"run": rel, "dataset": res.get("dataset"), "pe": res.get("variant") or res.get("pe"),
            "base_pe": res.get("pe"), "model": res.get("model"), "seed": res.get("seed"),
            "status": res.get("status"), "metric": metric or "", "value": value,
            "wall (s)": int(round(float(wall))) if isinstance(wall, (int, float)) and math.isfinite(wall) else None,
            "fingerprint": _fingerprint(res), "reason": not_complete_reason(res)}


#: state file of a run submitted by ``bench sweep --launcher slurm`` (``pebench.sweep.slurm``)
SLURM_STATE_NAME = "slurm.json"
#: ``results.json`` statuses that supersede the SLURM launcher's state: ``bench run`` is going or done
_RESULTS_SUPERSEDE = ("running", "complete")


def _slurm_state(run_dir: Path) -> dict[str, Any] | None:
    try:
        with open(run_dir / SLURM_STATE_NAME, encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def slurm_row(state: dict[str, Any], rel: str, res: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``bench runs`` row of a run the SLURM launcher queued and ``bench run`` has not (re)started:
    status ``queued`` (or the task's own state when it ended before ``results.json``)."""
    parts = Path(rel).parts
    seed = parts[3][4:] if len(parts) == 4 and parts[3].startswith("seed") else None
    row = run_row(res, rel) if res else {
        "run": rel, "dataset": parts[0] if parts else None, "pe": parts[1] if len(parts) > 1 else None,
        "base_pe": None, "model": parts[2] if len(parts) > 2 else None,
        "seed": int(seed) if seed and seed.lstrip("-").isdigit() else seed, "metric": "", "value": None,
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
        rel = str(path.parent.relative_to(root)) or "."
        try:
            with open(path, encoding="utf-8") as f:
                res = json.load(f)
            if not isinstance(res, dict):
                raise ValueError(f"expected a JSON object, got {type(res).__name__}")
        except (OSError, ValueError) as e:
            parts = Path(rel).parts
            rows.append({"run": rel, "dataset": parts[0] if parts else None, "pe": None, "base_pe": None,
                         "model": None, "seed": None, "status": "unreadable", "metric": "", "value": None,
                         "wall (s)": None, "fingerprint": "", "reason": _short(f"{type(e).__name__}: {e}")})
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
                rows.append(slurm_row(state, str(path.parent.relative_to(root)) or "."))
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
            rows.append([str(p.relative_to(run_dir)), p.stat().st_size])
    return format_table(["file", "bytes"], rows) if rows else "(no files)"


def _provenance(res: dict[str, Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    reason = not_complete_reason(res)
    if reason:
        out.append(("reason", reason))
    for key in ("primary_metric", "fingerprint", "git_sha", "task"):
        if res.get(key) is not None:
            out.append((key, res[key] if key != "fingerprint" else _fingerprint(res)))
    if res.get("resumed_from"):
        rf = res["resumed_from"]
        out.append(("resumed from", f"{rf.get('checkpoint')} at epoch {rf.get('epoch')}" if isinstance(rf, dict)
                    else rf))
    skipped = res.get("skipped_samples") or {}
    if isinstance(skipped, dict) and (skipped.get("in_batches") or skipped.get("by_reason")):
        out.append(("skipped samples", f"{skipped.get('in_batches', 0)} in batches; "
                    + ", ".join(f"{k}: {v}" for k, v in sorted((skipped.get("by_reason") or {}).items()))))
    versions = res.get("versions") or {}
    if versions:
        out.append(("versions", ", ".join(f"{k} {v}" for k, v in versions.items())))
    for entry in res.get("provenance") or []:  # what a later command (bench eval) added
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
    """``bench runs show``: summary, provenance, configuration and files of one run."""
    with open(run_dir / "results.json", encoding="utf-8") as f:
        res = json.load(f)
    parts = [f"run {run_dir}", format_summary(res)]
    prov = _provenance(res)
    if prov:
        parts.append("provenance\n" + format_table(["", "value"], prov))
    cfg = res.get("config")
    if isinstance(cfg, dict) and cfg:
        parts.append("configuration\n" + format_table(
            ["key", "value"], [[k, json.dumps(v) if isinstance(v, (dict, list)) else v] for k, v in cfg.items()]))
    parts.append("files\n" + _files_table(run_dir))
    return "\n".join(parts)

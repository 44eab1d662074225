"""``bench perf`` records and their output: the record schema, the markdown table, the JSON file.

A record is one comparison ``{"name", "a", "b", "a_value", "b_value", "unit", "ratio",
"higher_is_better", "target", "meets_target", "note"}`` with ``ratio = a_value / b_value``;
``target`` (optional) is a bound on the ratio: a lower bound when ``higher_is_better`` else an
upper bound. A suite may add keys of its own (e.g. ``sdpa_backend``); they go into the JSON only.
Written records carry ``commit``, the code they were measured with (:func:`code_commit`).

Imports no torch at module level: ``bench --help`` imports :mod:`pebench.perf`, which imports this.
"""
from __future__ import annotations

import functools
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Sequence

from ..core.io import atomic_write_text
from ..runner.provenance import git_sha

__all__ = ["record", "format_markdown", "machine_header", "write_outputs", "cpu_model", "code_commit",
           "with_commit"]


@functools.lru_cache(maxsize=1)
def code_commit() -> str:
    """The commit of the code being measured: ``git rev-parse --short=12 HEAD`` in this package's checkout,
    with ``+uncommitted changes`` when tracked code (``*.py``, ``*.toml``) differs from it; ``unknown (no git
    checkout)`` outside one. Read once per process, at the first call (the suites' header, before anything is
    written): the outputs a command writes (``docs/perf.json``) are not code and do not mark it. A committed
    measurement must reproduce at the commit it records."""
    sha = git_sha()  # the runs' own provenance reads HEAD the same way
    if not sha:
        return "unknown (no git checkout)"
    try:
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ":/*.py", ":/*.toml"],
                               cwd=Path(__file__).resolve().parent, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return sha[:12]
    return sha[:12] + (" +uncommitted changes" if dirty.stdout.strip() else "")


def with_commit(rows: Sequence[dict], commit: str | None = None) -> list[dict]:
    """``rows`` with ``commit`` (:func:`code_commit` unless given) on each record that has none."""
    commit = commit or code_commit()
    return [r if "commit" in r else {**r, "commit": commit} for r in rows]


def record(name: str, a: str, b: str, a_value: float, b_value: float, unit: str, *,
           higher_is_better: bool = True, target: float | None = None, note: str | None = None, **extra) -> dict:
    """One measurement row (see the module docstring for the schema)."""
    ratio = a_value / b_value if b_value else float("nan")
    row = {"name": name, "a": a, "b": b, "a_value": float(a_value), "b_value": float(b_value), "unit": unit,
           "ratio": ratio, "higher_is_better": higher_is_better}
    if target is not None:
        row["target"] = target
        row["meets_target"] = bool(ratio >= target if higher_is_better else ratio <= target)
    if note:
        row["note"] = note
    row.update(extra)
    return row


def _fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def format_markdown(rows: Sequence[dict], header: str = "") -> str:
    """The records as one markdown table (values, ratio, target, met or not), then their notes."""
    lines = [header, ""] if header else []
    lines += ["| measurement | a | b | a value | b value | unit | a/b | target | ok |",
              "|---|---|---|---:|---:|---|---:|---:|:-:|"]
    for r in rows:
        tgt = "" if r.get("target") is None else ("≥ " if r["higher_is_better"] else "≤ ") + f"{r['target']:g}"
        ok = "" if "meets_target" not in r else ("yes" if r["meets_target"] else "**no**")
        lines.append(f"| {r['name']} | {r['a']} | {r['b']} | {_fmt(r['a_value'])} | {_fmt(r['b_value'])} | "
                     f"{r['unit']} | {r['ratio']:.3f} | {tgt} | {ok} |")
    notes = [f"- **{r['name']}**: {r['note']}" for r in rows if r.get("note")]
    if notes:
        lines += ["", "Notes:", ""] + notes
    return "\n".join(lines) + "\n"


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The CPU's model name from ``/proc/cpuinfo`` (Linux; its first ``model name`` line), else
    ``platform.processor()``; ``None`` when neither names it. Ratios do not depend on it, absolute times do."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or None


def machine_header() -> str:
    """One line on the machine and its load at the start (the tables' header)."""
    import torch  # deferred: start-up time (`bench --help` imports this module and must not load torch)
    dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU"
    model = cpu_model()
    if model:
        dev += f" ({model})" if dev == "CPU" else f", CPU {model}"
    try:
        load = "load average %.1f %.1f %.1f" % os.getloadavg()
    except OSError:
        load = "load n/a"
    return (f"pebench perf at commit {code_commit()} — torch {torch.__version__}, {dev}, {os.cpu_count()} CPUs, "
            f"{torch.get_num_threads()} torch threads, {load} at start. Ratios compare candidates "
            f"measured interleaved in one process (medians); absolute numbers depend on machine load.")


def write_outputs(rows: list[dict], json_path: str | None, md_path: str | None, header: str,
                  echo: bool = True) -> None:
    """Print the markdown table (``echo``) and write the JSON records and / or the table atomically."""
    md = format_markdown(rows, header)
    if echo:
        print(md, flush=True)
    for path, text in ((json_path, json.dumps(with_commit(rows), indent=1)), (md_path, md)):
        if path:
            atomic_write_text(path, text)

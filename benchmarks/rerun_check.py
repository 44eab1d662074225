"""Rerun committed runs from their saved configuration and compare every recorded output (reproducibility check).

    python -m benchmarks.rerun_check --results results/embedded [--per-cell 1] [--datasets probe-decay,shapes]
        [--pes pape,liere] [--max 12] [--bench bench] [--keep DIR] [--workers 2] [--json FILE] [--threads N]

For each selected run folder under each ``--results`` folder (by default seed 0 of every cell: dataset x PE
label x model), runs
``bench run --config <run>/config.yaml --out <tmp>`` in a fresh process with the thread count the run
recorded (``numerics.torch_threads``, set through ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` as
``bench sweep`` does) and compares every metric of the new ``results.json`` with the committed one.
Prints one line per run (identical, or the largest difference and which metric) and exits 1 when any
rerun differs, 2 on bad input. The committed folders are only read; reruns go to a temporary folder
(``--keep DIR`` keeps them there). ``--workers N`` runs N reruns at once (each with its recorded
thread count); ``--json FILE`` writes one record per rerun (run, committed and rerun commit, threads, the CPU
model of each (``numerics.cpu_model``), largest difference and its metric; ``--append`` adds them to an existing file). ``--threads N`` reruns with N
threads instead of the recorded count (``bench run --threads N``): the thread count changes the order of the
floating-point reductions, so this is the check's proxy for another CPU (issue #44 item 7). With ``--deterministic`` runs (every committed study uses it) the
metrics should agree bit for bit on another x86-64 machine (docs/cli.md, "Reproducing").
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def select(results: Path, per_cell: int, datasets: set[str] | None, pes: set[str] | None) -> list[Path]:
    """The first ``per_cell`` seeds (lowest first) of every cell under ``results`` that match the filters."""
    cells: dict[tuple[str, ...], list[tuple[int, Path]]] = {}
    for res in sorted(results.glob("**/results.json")):
        r = json.loads(res.read_text(encoding="utf-8"))
        if r.get("status") != "complete" or not (res.parent / "config.yaml").is_file():
            continue
        # PE options live in pe_label ("alibi[slope_scale=8.0]"), RPT in variant ("pape+rpt"): a cell each
        labels = (r.get("pe_label") or r["pe"], r.get("variant") or r.get("pe_label") or r["pe"])
        if (datasets and r["dataset"] not in datasets) or (pes and not set(labels) & pes):
            continue
        key = (r["dataset"], *labels, r["model"])
        cells.setdefault(key, []).append((int(r["seed"]), res.parent))
    return [p for key in sorted(cells) for _, p in sorted(cells[key])[:per_cell]]


#: the sections of results.json a rerun must reproduce: every recorded output, not only the metrics (the
#: analyses' numbers, where training stopped and which weights were evaluated)
OUTPUT_KEYS = ("metrics", "geometry", "robustness", "alpha_sweep", "extrapolation", "stopped_at_target",
               "evaluated_checkpoint", "skipped_samples", "val_samples")


def _leaf_diff(v, w) -> float:
    """|v - w| for numbers (0 where both are null or both NaN, inf where only one is); 0 / inf for other leaves."""
    num = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool)  # noqa: E731
    if v is None or w is None:
        return 0.0 if v is None and w is None else float("inf")
    if num(v) and num(w):
        if math.isnan(float(v)) or math.isnan(float(w)):
            return 0.0 if math.isnan(float(v)) and math.isnan(float(w)) else float("inf")
        return abs(float(v) - float(w))
    return 0.0 if v == w else float("inf")


def _walk(old, new, where: str):
    """``(path, difference)`` of every leaf of ``old`` against the same path in ``new``."""
    if isinstance(old, dict):
        for k, v in old.items():
            yield from _walk(v, new.get(k) if isinstance(new, dict) else None, f"{where}.{k}" if where else str(k))
    elif isinstance(old, list):
        if not isinstance(new, list) or len(new) != len(old):
            yield where, float("inf")
            return
        for i, (v, w) in enumerate(zip(old, new)):
            yield from _walk(v, w, f"{where}[{i}]")
    else:
        yield where, _leaf_diff(old, new)


def compare(old: dict, new: dict) -> tuple[float, str]:
    """Largest absolute difference over every recorded output of the committed run (:data:`OUTPUT_KEYS`; a
    metric is named by its key, anything else by its path, e.g. ``geometry.ssdc[3]``): 0 where both are missing
    or null (COCO's ``map_large`` on a set without large objects) or both NaN, inf where only one is or a
    non-numeric value differs."""
    worst, which = 0.0, ""
    for key in OUTPUT_KEYS:
        if key not in old:
            continue
        for path, d in _walk(old[key], new.get(key), key):
            if d > worst:
                worst, which = d, path.split(".", 1)[1] if key == "metrics" else path
    return worst, which


def rerun(run: Path, results: Path, out: Path, bench: str, threads_override: int | None = None) -> dict:
    """Rerun one committed run into ``out`` (with its recorded thread count, or ``threads_override``), print its
    line, return its record (``recorded_threads``: the count the committed run used)."""
    old = json.loads((run / "results.json").read_text(encoding="utf-8"))
    recorded = int((old.get("numerics") or {}).get("torch_threads") or 1)
    threads = str(threads_override or recorded)
    env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    proc = subprocess.run([bench, "run", "--config", str(run / "config.yaml"), "--out", str(out),
                           "--no-progress-bar", "--threads", threads], env=env, capture_output=True, text=True)
    new_path = next(out.glob("**/results.json"), None)
    rec = {"results": results.as_posix(), "run": run.relative_to(results).as_posix(),
           "commit": old.get("git_sha", "?")[:7], "threads": int(threads), "recorded_threads": recorded}
    if proc.returncode != 0 or new_path is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        print(f"{rec['run']}: rerun failed (exit {proc.returncode}): {tail[0]}", flush=True)
        return {**rec, "status": "failed", "error": tail[0]}
    new = json.loads(new_path.read_text(encoding="utf-8"))
    worst, which = compare(old, new)
    primary = old.get("primary_metric")
    rec.update({"rerun_commit": new.get("git_sha", "?")[:7], "max_abs_diff": worst, "metric": which,
                "primary_metric": primary, "primary_committed": (old.get("metrics") or {}).get(primary),
                "primary_rerun": (new.get("metrics") or {}).get(primary),
                "metrics": len(old.get("metrics", {})),
                "cpu_model": (old.get("numerics") or {}).get("cpu_model"),
                "rerun_cpu_model": (new.get("numerics") or {}).get("cpu_model"),
                "status": "identical" if worst == 0.0 else "differs"})
    print(f"{rec['run']}: " + ("identical outputs" if worst == 0.0 else f"differs: max |Δ| {worst:.3g} ({which})")
          + f" (commit {rec['commit']}, rerun at {rec['rerun_commit']}, {threads} thread(s))", flush=True)
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", required=True, action="append", help="a committed results folder (repeatable)")
    ap.add_argument("--per-cell", type=int, default=1, help="seeds per cell to rerun (lowest first; default 1)")
    ap.add_argument("--datasets", help="comma-separated datasets to include (default all)")
    ap.add_argument("--pes", help="comma-separated PE labels to include (default all)")
    ap.add_argument("--max", type=int, default=None, help="rerun at most this many runs")
    ap.add_argument("--bench", default="bench", help="the bench executable (default: bench on PATH)")
    ap.add_argument("--keep", metavar="DIR", help="write the reruns under DIR (must not exist) instead of a temporary "
                    "folder that is removed")
    ap.add_argument("--workers", type=int, default=1, help="reruns at once (default 1)")
    ap.add_argument("--json", metavar="FILE", help="write one record per rerun to FILE (must not exist, unless "
                    "--append)")
    ap.add_argument("--append", action="store_true", help="add the records to an existing --json FILE")
    ap.add_argument("--threads", type=int, default=None, help="rerun with this many threads instead of the recorded "
                    "count (a proxy for another CPU: the reduction order changes)")
    args = ap.parse_args(argv)
    folders = [Path(r) for r in args.results]
    for results in folders:
        if not results.is_dir():
            print(f"rerun_check: expected a results folder, got {results}", file=sys.stderr)
            return 2
    if args.per_cell < 1 or (args.max is not None and args.max < 1):
        print("rerun_check: expected --per-cell and --max of at least 1", file=sys.stderr)
        return 2
    if args.keep and Path(args.keep).exists():
        print(f"rerun_check: expected --keep to name a folder that does not exist yet, got {args.keep}",
              file=sys.stderr)
        return 2
    if args.workers < 1 or (args.threads is not None and args.threads < 1):
        print("rerun_check: expected --workers and --threads of at least 1", file=sys.stderr)
        return 2
    if args.append and not (args.json and Path(args.json).is_file()):
        print("rerun_check: expected --append with an existing --json FILE", file=sys.stderr)
        return 2
    if args.json and Path(args.json).exists() and not args.append:
        print(f"rerun_check: expected --json to name a file that does not exist yet, got {args.json}", file=sys.stderr)
        return 2

    def split(s):
        return set(s.split(",")) if s else None

    runs = [(results, run) for results in folders
            for run in select(results, args.per_cell, split(args.datasets), split(args.pes))][: args.max]
    if not runs:
        print(f"rerun_check: expected a complete run with a config.yaml under {', '.join(map(str, folders))} that "
              "matches the filters", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        with ThreadPoolExecutor(args.workers) as pool:  # threads only wait on the subprocesses
            records = list(pool.map(
                lambda ir: rerun(ir[1][1], ir[1][0], root / str(ir[0]), args.bench, args.threads), enumerate(runs)))
    differ = sum(r["status"] != "identical" for r in records)
    print(f"{len(runs) - differ} of {len(runs)} reruns identical")
    if args.json:
        before = json.loads(Path(args.json).read_text(encoding="utf-8")) if args.append else []
        Path(args.json).write_text(json.dumps(before + records, indent=1) + "\n", encoding="utf-8")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())

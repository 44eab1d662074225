"""Rerun committed runs from their saved configuration and compare their metrics (reproducibility check).

    python benchmarks/rerun_check.py --results results/embedded [--per-cell 1] [--datasets probe-decay,shapes]
        [--pes pape,liere] [--max 12] [--bench bench] [--keep DIR]

For each selected run folder (by default seed 0 of every cell: dataset x PE label x model), runs
``bench run --config <run>/config.yaml --out <tmp>`` in a fresh process with the thread count the run
recorded (``numerics.torch_threads``, set through ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` as
``bench sweep`` does) and compares every metric of the new ``results.json`` with the committed one.
Prints one line per run (identical, or the largest difference and which metric) and exits 1 when any
rerun differs, 2 on bad input. The committed folders are only read; reruns go to a temporary folder
(``--keep DIR`` keeps them there). With ``--deterministic`` runs (every committed study uses it) the
metrics should agree bit for bit on another x86-64 machine (docs/cli.md, "Reproducing").
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def select(results: Path, per_cell: int, datasets: set[str] | None, pes: set[str] | None) -> list[Path]:
    """The first ``per_cell`` seeds (lowest first) of every cell under ``results`` that match the filters."""
    cells: dict[tuple[str, str, str], list[tuple[int, Path]]] = {}
    for res in sorted(results.glob("**/results.json")):
        r = json.loads(res.read_text(encoding="utf-8"))
        if r.get("status") != "complete" or not (res.parent / "config.yaml").is_file():
            continue
        if (datasets and r["dataset"] not in datasets) or (pes and r.get("pe_label", r["pe"]) not in pes):
            continue
        key = (r["dataset"], r.get("pe_label", r["pe"]), r["model"])
        cells.setdefault(key, []).append((int(r["seed"]), res.parent))
    return [p for key in sorted(cells) for _, p in sorted(cells[key])[:per_cell]]


def compare(old: dict, new: dict) -> tuple[float, str]:
    """Largest absolute difference over the committed run's metrics (inf when one is missing)."""
    worst, which = 0.0, ""
    for k, v in old.get("metrics", {}).items():
        w = new.get("metrics", {}).get(k)
        d = float("inf") if w is None else abs(float(v) - float(w))
        if d > worst:
            worst, which = d, k
    return worst, which


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", required=True, help="a committed results folder")
    ap.add_argument("--per-cell", type=int, default=1, help="seeds per cell to rerun (lowest first; default 1)")
    ap.add_argument("--datasets", help="comma-separated datasets to include (default all)")
    ap.add_argument("--pes", help="comma-separated PE labels to include (default all)")
    ap.add_argument("--max", type=int, default=None, help="rerun at most this many runs")
    ap.add_argument("--bench", default="bench", help="the bench executable (default: bench on PATH)")
    ap.add_argument("--keep", metavar="DIR", help="write the reruns under DIR (must not exist) instead of a temporary "
                    "folder that is removed")
    args = ap.parse_args(argv)
    results = Path(args.results)
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
    split = (lambda s: set(s.split(",")) if s else None)
    runs = select(results, args.per_cell, split(args.datasets), split(args.pes))[: args.max]
    if not runs:
        print(f"rerun_check: expected a complete run with a config.yaml under {results} that matches the filters",
              file=sys.stderr)
        return 2
    differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        for i, run in enumerate(runs):
            old = json.loads((run / "results.json").read_text(encoding="utf-8"))
            threads = str((old.get("numerics") or {}).get("torch_threads") or 1)
            env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
            out = root / str(i)
            proc = subprocess.run([args.bench, "run", "--config", str(run / "config.yaml"), "--out", str(out),
                                   "--no-progress-bar"], env=env, capture_output=True, text=True)
            new_path = next(out.glob("**/results.json"), None)
            name = run.relative_to(results)
            if proc.returncode != 0 or new_path is None:
                differ += 1
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                print(f"{name}: rerun failed (exit {proc.returncode}): {tail[0]}", flush=True)
                continue
            worst, which = compare(old, json.loads(new_path.read_text(encoding="utf-8")))
            same = worst == 0.0
            differ += not same
            print(f"{name}: " + ("identical metrics" if same else f"differs: max |Δ| {worst:.3g} ({which})")
                  + f" (commit {old.get('git_sha', '?')[:7]}, {threads} thread(s))", flush=True)
    print(f"{len(runs) - differ} of {len(runs)} reruns identical")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())

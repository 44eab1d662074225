"""How far a committed probe run moves on another CPU (issue #44 item 7), with the thread count as the proxy.

    bash benchmarks/thread_spread.sh          # the reruns (46 min on the 2-core machine)
    python -m benchmarks.thread_spread --records results/thread-spread/reruns.json \
        --report results/thread-spread/REPORT.md

``benchmarks/rerun_check.py`` reruns a sample of committed probe runs from their ``config.yaml`` twice at
the current commit: with the thread count the run recorded (1: is the committed number reproduced here?) and
with 2 threads (another order of the floating-point reductions, which is what another CPU model or vendor
changes as well). This script reads both sets of records and writes the report: per run the committed test
accuracy, the two reruns and their difference; the size of that difference against the seed-to-seed
standard deviation of the same cell in the committed sweep (a verdict over seeds already carries a spread
of that size; a larger one would not be covered by its interval). Numbers are read from the files, nothing is typed in.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from .reports import emit, fill


def load(records: Path) -> dict[tuple[str, str], dict[int, dict]]:
    """``(results folder, run) -> {threads: record}`` from rerun_check's ``--json`` records (later wins)."""
    out: dict[tuple[str, str], dict[int, dict]] = defaultdict(dict)
    for rec in json.loads(records.read_text(encoding="utf-8")):
        out[(rec["results"], rec["run"])][int(rec["threads"])] = rec
    return dict(sorted(out.items()))


def seed_sd(repo: Path, results: str, run: str) -> tuple[float | None, int]:
    """The sample sd (ddof 1) of the primary metric over the committed seeds of ``run``'s cell, and their number."""
    cell = (repo / results / run).parent
    values = []
    for res in sorted(cell.glob("seed*/results.json")):
        r = json.loads(res.read_text(encoding="utf-8"))
        v = (r.get("metrics") or {}).get(r.get("primary_metric"))
        if r.get("status") == "complete" and v is not None:
            values.append(float(v))
    return (statistics.stdev(values) if len(values) >= 2 else None), len(values)


def cell_commits(runs: dict[tuple[str, str], dict[int, dict]], repo: Path) -> list[str]:
    """The commits (7 characters) of the committed seeds the seed sd is read from: the sweep as committed now, which
    may be a later one than the runs the records reran."""
    shas = set()
    for results, run in runs:
        for res in (repo / results / run).parent.glob("seed*/results.json"):
            shas.add((json.loads(res.read_text(encoding="utf-8")).get("git_sha") or "?")[:7])
    return sorted(shas)


def moves(runs: dict[tuple[str, str], dict[int, dict]], repo: Path) -> tuple[list[float], list[float]]:
    """``|test accuracy at 2 threads - at 1 thread|`` of every run with both reruns, and the same over the cell's
    seed sd where that sd is defined and non-zero (the report's summary and :func:`spread_sentence` share it)."""
    diffs, ratios = [], []
    for (results, run), by in runs.items():
        one, two = by.get(1), by.get(2)
        if not one or not two or one.get("primary_rerun") is None or two.get("primary_rerun") is None:
            continue
        d = abs(two["primary_rerun"] - one["primary_rerun"])
        diffs.append(d)
        sd, _ = seed_sd(repo, results, run)
        if sd:
            ratios.append(d / sd)
    return diffs, ratios


def spread_sentence(records: Path, repo: Path) -> str:
    """One sentence for the reports that cite this check (the probe report): how far test accuracy moved between
    1 and 2 threads, against the cells' seed sd; or that the check has not been run."""
    if not records.is_file():
        return "The thread-count check (`benchmarks/thread_spread.sh`, issue #44 item 7) has not been run."
    diffs, ratios = moves(load(records), repo)
    if not diffs:
        return "The thread-count check (`benchmarks/thread_spread.sh`) recorded no comparable pair of reruns."
    return (f"**On another CPU** (proxy: the same runs with 2 threads instead of 1, `results/thread-spread/REPORT.md`): "
            f"test accuracy moved in {sum(d > 0 for d in diffs)} of {len(diffs)} reruns, by {100 * max(diffs):.2f} "
            f"points at most (median {100 * statistics.median(diffs):.2f})"
            + (f"; {sum(r > 1 for r in ratios)} of {len(ratios)} moved by more than their cell's seed-to-seed sd "
               f"(largest {max(ratios):.2f} sd)" if ratios else "") + ".")


def pp(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f}"


def render(records: Path, repo: Path) -> str:
    runs = load(records)
    if not runs:
        raise SystemExit(f"thread_spread: no records in {records}")
    rows, reproduced, primary_same, compared = [], 0, 0, 0
    drift: list[tuple[float, str]] = []  # |committed - 1-thread rerun| where the code changed since
    commits, rerun_commits, threads = set(), set(), set()
    for (results, run), by_threads in runs.items():
        one, two = by_threads.get(1), by_threads.get(2)
        ok = [r for r in (one, two) if r and r.get("status") != "failed"]
        for r in ok:
            commits.add(r["commit"])
            rerun_commits.add(r["rerun_commit"])
            threads.add(r["threads"])
        if not one or not two or len(ok) < 2:
            rows.append(f"| {run} | — | — | — | — | — | rerun missing or failed |")
            continue
        committed, a, b = one.get("primary_committed"), one.get("primary_rerun"), two.get("primary_rerun")
        compared += 1
        same = one["status"] == "identical"
        reproduced += same
        primary_same += committed is not None and committed == a
        if committed is not None and a is not None and committed != a:
            drift.append((abs(a - committed), run))
        sd, n = seed_sd(repo, results, run)
        d = None if a is None or b is None else b - a
        rows.append(f"| {run} | {pp(committed)} | {pp(a)} | {pp(b)} | {'—' if d is None else f'{100 * d:+.2f}'} "
                    f"| {pp(sd)} (n={n}) | {'identical outputs' if same else 'differs: ' + one.get('metric', '')} |")
    diffs, ratios = moves(runs, repo)
    moved = sum(d > 0 for d in diffs)
    summary = [
        f"- **Runs:** {len(runs)} committed runs (`{records.as_posix()}`), committed at "
        + ", ".join(f"`{c}`" for c in sorted(commits)) + "; reruns at "
        + ", ".join(f"`{c}`" for c in sorted(rerun_commits)) + f", with {' and '.join(map(str, sorted(threads)))} "
        "thread(s).",
        f"- **Reproduced at the recorded thread count:** {reproduced} of {compared} reruns give every recorded "
        "output identical to the committed file (`rerun_check`'s comparison: metrics, analyses, stopping step); "
        f"the test accuracy is identical in {primary_same} of {compared} (the last column names the largest "
        "difference where a run differs)"
        + (f"; where it is not, the code changed between the commits (every run is deterministic at a fixed "
           f"thread count), and the largest change is {100 * max(drift)[0]:.2f} pp (`{max(drift)[1]}`); the runs "
           "that changed are those of " + ", ".join(f"`{pe}`" for pe in sorted({r.split('/')[1] for _, r in drift}))
           + " (`git log` between the commits says what changed in their code)" if drift else "")
        + ".",
    ]
    if diffs:
        summary += [
            f"- **1 vs 2 threads:** test accuracy moved in {moved} of {len(diffs)} runs; |Δ| median "
            f"{100 * statistics.median(diffs):.2f} pp, largest {100 * max(diffs):.2f} pp.",
        ]
    if ratios:
        over = sum(r > 1 for r in ratios)
        summary.append(
            f"- **Against the seed-to-seed spread:** |Δ| / (the cell's seed sd, from its seeds as committed now, "
            f"at {', '.join(f'`{c}`' for c in cell_commits(runs, repo))}) has median "
            f"{statistics.median(ratios):.2f} and largest {max(ratios):.2f} over {len(ratios)} runs; {over} "
            "run(s) moved by more than one seed sd. A verdict's Student-t interval over seeds carries a spread of "
            "the seed sd; a thread-count change of up to one seed sd acts as drawing another seed, which the "
            "interval and the Holm-adjusted tests already allow for. Runs above it are where a single-seed "
            "outcome is not portable across machines.")
    table = ["| run | committed (%) | rerun, 1 thread (%) | rerun, 2 threads (%) | Δ 2 − 1 (pp) | seed sd of the "
             "cell (pp) | 1-thread rerun vs committed |", "|---|---:|---:|---:|---:|---:|---|", *rows]
    return fill(REPORT, summary="\n".join(summary), table="\n".join(table))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", default="results/thread-spread/reruns.json",
                    help="rerun_check --json records of both thread counts")
    ap.add_argument("--report", metavar="FILE", help="write the report here instead of printing it")
    args = ap.parse_args(argv)
    records = Path(args.records)
    if not records.is_file():
        print(f"thread_spread: expected rerun_check --json records, got {records}", file=sys.stderr)
        return 2
    emit(render(records, Path.cwd()), args.report)
    return 0


#: results/thread-spread/REPORT.md; each @@NAME@@ is filled in by :func:`render`
REPORT = """\
# Committed probe runs on another CPU: the thread count as the proxy (issue #44 item 7)

Written by `python -m benchmarks.thread_spread --records results/thread-spread/reruns.json --report
results/thread-spread/REPORT.md` from the records `bash benchmarks/thread_spread.sh` makes
(`tests/studies/test_thread_spread.py` regenerates this report byte for byte). A committed run recorded
1 thread; its rerun with 2 threads sums in another order, as another CPU does (the issue's example:
probe-rotation / rope-mixed / seed 3 read 81.75 % on AMD EPYC and 70.75 % on Intel Xeon, both 1 thread). Every
run is `--deterministic`: at a fixed thread count on one machine it repeats bit for bit.

## Summary

@@SUMMARY@@

## Per run (test accuracy of the weights the run evaluates)

@@TABLE@@
"""


if __name__ == "__main__":
    raise SystemExit(main())

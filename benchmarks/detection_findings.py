"""Write results/embedded/DETECTION_REPORT.md from the committed detection runs (``shapes-det``, ``events-det``).

    python -m benchmarks.detection_findings [--results results/embedded] [--time-file results/detection_sweep_time.txt]
        [--report results/embedded/DETECTION_REPORT.md]

The runs are those of ``benchmarks/detection_sweep.sh`` (vit-nano, FCOS-style head, COCO evaluation through
pycocotools: mAP@[.5:.95]). Per detection set and PE: the number of seeds, val and test mAP (mean and 95 %
Student-t interval over seeds), and the mAP of the resolution-extrapolation analysis at each input size; per
PE against ``none`` (the no-PE baseline), the test-mAP difference paired by seed with its Student-t interval
and paired t-test; the report's verdicts are one family, Holm-adjusted (benchmarks/verdicts.py), and *held* /
*contradicted* need the adjusted p below 0.05 (else *inconclusive*), with the count of seeds whose val mAP is
above ``none``'s. The report's prose is fixed; every number in it is read
from the runs.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

from pebench.leaderboard import collect_results
from pebench.leaderboard.render import pe_sort_key
from pebench.leaderboard.stats import paired_t_interval

from .reports import emit, fill, pct, pct_mean_ci, provenance, reproduced, shown
from .verdicts import FWER, Family, basis, fmt_p, selection, two_pass

SETS = ("shapes-det", "events-det")
REFERENCE = "none"


def _sizes(runs) -> list[str]:
    return sorted({e["resolution"] for r in runs for e in (r.raw.get("extrapolation") or [])},
                  key=lambda s: [int(p) for p in s.replace("x", " ").split()])


def _at_size(r, size: str) -> float | None:
    return next((e["map"] for e in (r.raw.get("extrapolation") or []) if e["resolution"] == size), None)


def verdict(diffs: list[float], fam: Family, weights: str) -> str:
    """"held" / "contradicted" (the paired t-test's Holm-adjusted p below FWER, in the direction of the mean) or
    "inconclusive"; ``weights``: the checkpoint the test mAP comes from (:func:`benchmarks.verdicts.selection`)."""
    r = paired_t_interval(diffs)
    if r is None:
        return "not testable (fewer than 2 paired seeds)"
    mean, lo, hi, p, _ = r
    adj = fam.p(p)
    word = "held" if mean > 0 and adj < FWER else "contradicted" if mean < 0 and adj < FWER else "inconclusive"
    return (f"**{word}** (test mAP {mean * 100:+.1f} points, paired t-CI [{lo * 100:+.1f}, {hi * 100:+.1f}], "
            f"paired t-test {fmt_p(p, adj)}; {basis(len(diffs), weights, False)})")


def tables(results: str, fam: Family) -> tuple[str, list]:
    """The tables and the verdicts (each test in ``fam``: run twice, :func:`benchmarks.verdicts.two_pass`)."""
    runs = [r for r in collect_results(results)[0] if r.complete and r.dataset in SETS]
    if not runs:
        print(f"detection_findings: expected complete {'/'.join(SETS)} runs under {results}", file=sys.stderr)
        raise SystemExit(2)
    out: list[str] = [fam.rule(), ""]
    for ds in SETS:
        by_pe: dict[str, dict[int, object]] = defaultdict(dict)
        for r in runs:
            if r.dataset == ds:
                by_pe[r.label][int(r.seed)] = r
        if not by_pe:
            continue
        sizes = _sizes([r for v in by_pe.values() for r in v.values()])
        out += [f"### `{ds}`", "", "| PE | seeds | val mAP % [95 % t-CI] | test mAP % [95 % t-CI] | "
                + " | ".join(f"mAP % at {s}" + (" px" if s.isdigit() else "") for s in sizes) + " |",
                "|---|---|---|---|" + "---:|" * len(sizes)]
        for pe in sorted(by_pe, key=pe_sort_key):
            rs = [by_pe[pe][s] for s in sorted(by_pe[pe])]
            at = [[v for v in (_at_size(r, s) for r in rs) if v is not None] for s in sizes]
            out.append(f"| {pe} | {','.join(map(str, sorted(by_pe[pe])))} | "
                       f"{pct_mean_ci([r.metrics['val/map'] for r in rs])} | {pct_mean_ci([r.metrics['test/map'] for r in rs])} | "
                       + " | ".join(pct(sum(v) / len(v)) if v else "—" for v in at) + " |")
        out.append("")
        ref = by_pe.get(REFERENCE, {})
        for pe in sorted(by_pe, key=pe_sort_key):
            if pe == REFERENCE or not ref:
                continue
            seeds = sorted(set(ref) & set(by_pe[pe]))
            diffs = [by_pe[pe][s].metrics["test/map"] - ref[s].metrics["test/map"] for s in seeds]
            ahead = sum(by_pe[pe][s].metrics["val/map"] > ref[s].metrics["val/map"] for s in seeds)
            weights = selection([by_pe[pe][s] for s in seeds] + [ref[s] for s in seeds])
            out.append(f"- {pe} beats {REFERENCE} on test mAP: {verdict(diffs, fam, weights)}; val mAP above {REFERENCE}'s in "
                       f"{ahead} of {len(seeds)} seeds.")
        out.append("")
    return "\n".join(out), runs


#: results/embedded/DETECTION_REPORT.md
REPORT = """\
# Detection on the embedded sets (`results/embedded/shapes-det`, `results/embedded/events-det`)

Written by `python -m benchmarks.detection_findings --report results/embedded/DETECTION_REPORT.md` from the
committed runs (`tests/studies/test_leaderboard_committed.py` checks that it regenerates byte for byte). The task,
its head and its evaluation are described in [`docs/tasks.md`](../../docs/tasks.md) ("Detection").

## Setting

`benchmarks/detection_sweep.sh`: `none` (the no-PE baseline) and `pape`, seeds 0–2, two runs of one thread
in parallel on the 2-core CPU machine, the detection task's default analyses: @@PROVENANCE@@. mAP is COCO's
mAP@[.5:.95] (pycocotools) on the validation and test splits; the extrapolation columns evaluate the same
weights on the same scenes rendered at larger input sizes (`events-det`: the sensor grid scaled). Intervals
are 95 % Student-t intervals over seeds (3 seeds: 2 degrees of freedom, so they are wide); the verdicts are
one family, Holm–Bonferroni at 5 % family-wise, and a verdict other than *inconclusive* needs its adjusted p
below 0.05. With 3 seeds every verdict is provisional under the rule of at least 10 seeds per cell.

@@REPRODUCED@@

## Tables and verdicts

@@TABLES@@
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results/embedded")
    ap.add_argument("--time-file", default=None, help="the sweep's start/end record (default: "
                    "detection_sweep_time.txt beside the results folder)")
    ap.add_argument("--rerun-check", default=None, help="benchmarks/rerun_check.py --json output (default: "
                    "rerun_check.json beside the results folder)")
    ap.add_argument("--report", metavar="FILE", help="write the report to FILE instead of printing it")
    args = ap.parse_args(argv)
    if not Path(args.results).is_dir():
        ap.error(f"expected a results folder, got {args.results}")
    time_file = Path(args.time_file) if args.time_file else Path(args.results).resolve().parent / \
        "detection_sweep_time.txt"
    rerun_json = Path(args.rerun_check) if args.rerun_check else Path(args.results).resolve().parent / \
        "rerun_check.json"
    (body, runs), _ = two_pass("every verdict of this report", lambda fam: tables(args.results, fam))
    emit(fill(REPORT, provenance=provenance(runs, time_file), tables=body,
              reproduced=reproduced(rerun_json, shown(Path(args.results)), SETS)), args.report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Write results/event-tokens/REPORT.md from the committed event-token study (``benchmarks/event_tokens_study.sh``).

    python -m benchmarks.event_tokens_findings [--results results/event-tokens] [--report FILE]

The study trains the ``events-det`` detector (vit-nano, FCOS-style head, COCO evaluation through pycocotools)
on the same recordings read two ways: as frames (the default event-count frames) and as spiking tokens
(``--data-option tokens=spiking``), each with ``none`` and ``pape``, seeds 0-2. Per tokenization and PE: val and
test mAP (mean and 95 % Student-t interval over seeds, clipped to [0, 100] %) and test AP50; then, paired by
seed, ``pape`` against ``none`` within each tokenization and frames against spiking tokens within each PE (a
verdict needs the paired t-interval and the paired t-test to agree). The prose is fixed; every number is
read from the runs.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

from pebench.leaderboard import collect_results
from pebench.leaderboard.render import pe_sort_key

from .detection_findings import verdict
from .reports import emit, fill, pct, pct_mean_ci, provenance, reproduced, shown
from .verdicts import Family, selection, two_pass

DATASET = "events-det"
TOKENIZATIONS = ("frames", "spiking")
REFERENCE = "none"


def load(results: Path) -> dict[str, dict[str, dict[int, object]]]:
    """tokenization -> PE -> seed -> complete run."""
    out: dict[str, dict[str, dict[int, object]]] = {}
    for tok in TOKENIZATIONS:
        runs = [r for r in collect_results(results / tok)[0] if r.complete and r.dataset == DATASET] \
            if (results / tok).is_dir() else []
        by_pe: dict[str, dict[int, object]] = defaultdict(dict)
        for r in runs:
            by_pe[r.pe][int(r.seed)] = r
        if by_pe:
            out[tok] = dict(by_pe)
    if not out:
        print(f"event_tokens_findings: expected complete {DATASET} runs under {results}/frames or "
              f"{results}/spiking", file=sys.stderr)
        raise SystemExit(2)
    return out


def _paired(a: dict[int, object], b: dict[int, object], fam: Family, metric: str = "test/map") -> str:
    seeds = sorted(set(a) & set(b))
    return verdict([a[s].metrics[metric] - b[s].metrics[metric] for s in seeds], fam,
                   selection([a[s] for s in seeds] + [b[s] for s in seeds]))


def tables(data, fam: Family) -> str:
    """The table and the paired verdicts (each test in ``fam``: run twice, benchmarks/verdicts.two_pass)."""
    out = ["| tokens | PE | seeds | val mAP % [95 % t-CI] | test mAP % [95 % t-CI] | test AP50 % (mean) | "
           "wall time per run (s, mean) |", "|---|---|---|---|---|---:|---:|"]
    for tok, by_pe in data.items():
        for pe in sorted(by_pe, key=pe_sort_key):
            rs = [by_pe[pe][s] for s in sorted(by_pe[pe])]
            wall = [r.raw.get("wall_time_s") for r in rs]
            wall = [w for w in wall if isinstance(w, (int, float))]
            out.append(f"| {tok} | {pe} | {','.join(map(str, sorted(by_pe[pe])))} | "
                       f"{pct_mean_ci([r.metrics['val/map'] for r in rs])} | {pct_mean_ci([r.metrics['test/map'] for r in rs])} | "
                       f"{pct(sum(r.metrics['test/map_50'] for r in rs) / len(rs))} | "
                       + (f"{sum(wall) / len(wall):.0f} |" if wall else "— |"))
    out += ["", "Paired by seed, test mAP:", ""]
    for tok, by_pe in data.items():
        for pe in sorted(by_pe, key=pe_sort_key):
            if pe != REFERENCE and REFERENCE in by_pe:
                out.append(f"- {tok}: {pe} beats {REFERENCE}: {_paired(by_pe[pe], by_pe[REFERENCE], fam)}.")
    if all(t in data for t in TOKENIZATIONS):
        for pe in sorted(set(data["frames"]) & set(data["spiking"]), key=pe_sort_key):
            out.append(f"- {pe}: frames beat spiking tokens: {_paired(data['frames'][pe], data['spiking'][pe], fam)}.")
    return "\n".join(out[:out.index("Paired by seed, test mAP:") + 2] + [fam.rule(), ""]
                     + out[out.index("Paired by seed, test mAP:") + 2:])


#: results/event-tokens/REPORT.md
REPORT = """\
# Event cameras: frames against spiking tokens on `events-det` (`results/event-tokens`)

Written by `python -m benchmarks.event_tokens_findings --report results/event-tokens/REPORT.md` from the
committed runs (`tests/studies/test_leaderboard_committed.py` checks that it regenerates byte for byte). The set, the
two tokenizations and the detector are described in [`docs/tasks.md`](../../docs/tasks.md) ("Event cameras").

## Setting

`benchmarks/event_tokens_study.sh`: the embedded `events-det` set read as event-count frames (the default)
and as spiking tokens (`--data-option tokens=spiking`), each with `none` (the no-PE baseline) and `pape`,
seeds 0–2, no analyses, two runs of one thread in parallel on the 2-core CPU machine: @@PROVENANCE@@. mAP is
COCO's mAP@[.5:.95] (pycocotools). Intervals are 95 % Student-t intervals over seeds (3 seeds: 2 degrees of
freedom, so they are wide), clipped to [0, 100] %; the verdicts are one family, Holm–Bonferroni at 5 %
family-wise, and a verdict other than *inconclusive* needs its adjusted p below 0.05. With 3 seeds every
verdict is provisional under the rule of at least 10 seeds per cell. Frames and spiking tokens of one seed share the seed, not the
input, so their pairing only blocks the seed.

@@REPRODUCED@@

## Tables and verdicts

@@TABLES@@

## What this does and does not show

The token map places every token in its cell before the convolutional pyramid and the FCOS head, so box
positions reach a model without a PE too; on this set a PE can help only through the backbone's mixing of
tokens. The frames-against-spiking comparison changes two things at once, the tokens' time window and their
number, so a verdict on it says which input trains the detector better in this recipe, not why.
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results/event-tokens")
    ap.add_argument("--report", metavar="FILE", help="write the report to FILE instead of printing it")
    args = ap.parse_args(argv)
    results = Path(args.results)
    if not results.is_dir():
        ap.error(f"expected the event-token study's folder (frames/, spiking/), got {args.results}")
    data = load(results)
    rerun = reproduced(results.resolve().parent / "rerun_check.json", [shown(results / t) for t in TOKENIZATIONS],
                       [DATASET])
    body, _ = two_pass("every verdict of this report", lambda fam: tables(data, fam))
    emit(fill(REPORT, reproduced=rerun, provenance=provenance([r for by_pe in data.values() for v in by_pe.values() for r in v.values()],
                                                  results / "study_time.txt"), tables=body), args.report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

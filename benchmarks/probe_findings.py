"""Summarise a probe sweep (results/embedded/REPORT.md): accuracy per probe x PE and a verdict per prediction.

    python -m benchmarks.probe_findings --results results/embedded [--report results/embedded/REPORT.md]

For each probe: one row per PE with the learning rate it ran with, the number of seeds, the
in-distribution validation accuracy and how many seeds learned it (the precondition, decided per
seed: a PE counts as having learned a probe when at least 80 % of its seeds did, :data:`MIN_LEARNED`; one
that did not says nothing about the property), each seed's steps to learn when the runs validated
every few steps (``bench run --val-every``), the out-of-distribution test accuracy with its 95 %
Student-t interval over seeds, and the paired test - val difference (the cost of leaving the training
distribution); under the table, how the runs ended (target reached, gave up, budget). A cell whose label
the PE cannot represent by an exact symmetry (:func:`cannot_represent`) is reported so, not as "not
learned", and is left out of the learned counts. Verdicts about a PE are computed on the seeds that
learned the probe (post-selection, said beside each verdict with the seed count and the checkpoint). Then
each theoretical prediction with its verdict, computed here from the numbers (never typed in):
``held`` / ``contradicted`` / ``not testable`` (a precondition failed) / ``inconclusive``. Every test
with a p-value is one family, Holm-adjusted (benchmarks/verdicts.py), and a verdict other than
inconclusive needs its adjusted p < 0.05; "keeps" is a TOST equivalence test with the margin
:data:`KEEP_MARGIN`. Differences between PEs are paired by seed (the same seed gives both
runs the same data). The summary after the verdicts is generated from them and names the PEs behind
each one.

``--report`` writes the report (the tables and verdicts inside the prose of ``probe_report_parts.REPORT``,
with the recipe, commits, run count and wall time read from the runs and ``probe_sweep_time.txt``) instead
of printing the tables and verdicts.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from pebench.leaderboard.render import pe_sort_key
from pebench.leaderboard.stats import t_mean_ci

from .probe_cells import CEILING, ID_TEST, MIN_LEARNED, Cell, load, mean_ci_text, paired, pct
from .probe_claims import VERDICTS, Tally, claims
from .probe_report_parts import REPORT, alibi_readout, learned_matrix, learning_png, not_learned_table, protocol
from .reports import fill, reproduced, shown, write_report
from .thread_spread import spread_sentence
from .verdicts import MIN_SEEDS, Family, two_pass


def table(probe: str, cells: dict[str, Cell]) -> list[str]:
    """One row per PE over all its seeds; the steps-to-learn column only when the runs validated every few
    steps (the median over the seeds that learned; "—" when none did)."""
    curves = any(c.steps_to_learn for c in cells.values())
    split = "ID: fresh scenes" if probe in ID_TEST else "OOD"
    out = [f"#### `{probe}` (no-PE ceiling {pct(CEILING[probe])} %)", "",
           "| PE | lr | n | val (ID) % | learned (seeds) | " + ("steps to learn (median) | " if curves else "")
           + f"test ({split}) % | test 95% t-CI | test − val [95% t-CI] |",
           "|---|---:|---:|---:|---:|" + ("---:|" if curves else "") + "---:|---:|---:|"]
    for pe in sorted(cells, key=pe_sort_key):
        c = cells[pe]
        g = paired(c, c, "test", "val")
        gap = "—" if g is None else f"{100 * g[0]:+.1f} [{100 * g[1]:+.1f}, {100 * g[2]:+.1f}]"
        lr = ", ".join(f"{x:g}" for x in c.lr if x is not None)
        steps = f"{c.median_steps_to_learn()} | " if curves else ""
        out.append(f"| {pe} | {lr} | {c.n} | {pct(c.mean('val'))} | {c.learned_seeds}/{c.n} | {steps}"
                   f"{pct(c.mean('test'))} | {mean_ci_text(c.values('test'))} | {gap} |")
    ended = _ended(cells)
    return out + ([""] + [ended] if ended else []) + [""]


def upsampled_table(cells: dict[str, Cell]) -> list[str]:
    """probe-extrapolation's second regime: the validation scenes upsampled (the glyphs grow with the
    canvas), accuracy per input size, mean over seeds with the 95 % Student-t interval."""
    sizes = sorted({k for c in cells.values() for v in c.upsampled.values() for k in v}, key=int)
    if not sizes:
        return []
    n = sorted({len(c.upsampled) for c in cells.values()})
    out = ["The same scenes upsampled (second regime: glyphs and distances grow with the canvas; each PE's "
           f"native rule for the larger grid; {', '.join(map(str, n))} seeds), accuracy % [95 % t-interval]:", "",
           "| PE | " + " | ".join(f"{s} px" for s in sizes) + " |", "|---|" + "---:|" * len(sizes)]
    for pe in sorted(cells, key=pe_sort_key):
        c = cells[pe]
        row = []
        for size in sizes:
            v = list(c.at_size(size).values())
            ci = t_mean_ci(v, bounds=(0.0, 1.0))
            row.append("—" if not v else f"{pct(np.mean(v))}" + (f" [{pct(ci[0])}, {pct(ci[1])}]" if ci else ""))
        out.append(f"| {pe} | " + " | ".join(row) + " |")
    return out + [""]


def summary(tally: Tally, seeds: list[int]) -> list[str]:
    """One line per prediction: which PEs (or pairs) each verdict holds for, generated from ``tally``."""
    out = ["#### Summary of the verdicts", "",
           "Generated from the verdicts above (nothing here is typed in); a PE under *not testable* cannot "
           "represent the probe's label, did not learn the probe in at least 80 % of its seeds, or sits at chance, and "
           "the report says nothing else about it.", ""]
    for claim, by in tally.claims.items():
        parts = [f"{v} for {', '.join(by[v])}" for v in VERDICTS if by[v]]
        out.append(f"- {claim}: " + "; ".join(parts) + ".")
    if seeds and min(seeds) < MIN_SEEDS:
        which = "Every verdict above is" if max(seeds) < MIN_SEEDS else "The verdicts that say so are"
        out += ["", f"{which} provisional under the ≥ {MIN_SEEDS}-seed rule: the sweep ran "
                f"{' / '.join(map(str, seeds))} seeds per cell, which its CPU budget allowed."]
    return out + [""]


def probes_learned(data: dict[str, dict[str, Cell]]) -> dict[str, tuple[int, int]]:
    """PE -> (probes it learned in at least 80 % of its seeds, probes it ran whose label it can represent): the
    "probes learned" column; a cell the PE cannot represent (``Cell.cannot``) counts in neither."""
    out: dict[str, tuple[int, int]] = {}
    for cells in data.values():
        for pe, c in cells.items():
            if c.cannot:
                out.setdefault(pe, (0, 0))
                continue
            k, n = out.get(pe, (0, 0))
            out[pe] = (k + c.learned, n + 1)
    return out


def _claims_pass(data: dict[str, dict[str, Cell]], fam: Family) -> tuple[Tally, list[str]]:
    t = Tally(fam)
    return t, claims(data, t)


def findings(data: dict[str, dict[str, Cell]]) -> list[str]:
    """The tables of every probe in ``data`` (:func:`load`) and the verdicts (markdown lines)."""
    lines = []
    for probe in CEILING:
        if probe in data:
            lines += table(probe, data[probe])
            if probe == "probe-extrapolation":
                lines += upsampled_table(data[probe])
    (tally, verdicts), _ = two_pass("every test of this report", lambda fam: _claims_pass(data, fam))
    lines += verdicts
    ordered = {p: data[p] for p in CEILING if p in data}
    probes = [p for p in CEILING if p in ordered]
    return (learned_matrix(ordered, probes, probes_learned({p: ordered[p] for p in probes})) + lines
            + summary(tally, sorted({c.n for cells in ordered.values() for c in cells.values()}))
            + not_learned_table(ordered))


def _ended(cells: dict[str, Cell]) -> str:
    """How the probe's runs ended (``stopped_at_target`` in results.json): target reached, gave up, budget."""
    ends = [e for c in cells.values() for e in c.ends.values()]
    if not any(ends):
        return ""
    n = {k: sum(e == k for e in ends) for k in ("reached", "gave up", "budget")}
    return (f"Runs: {len(ends)}; reached the target {n['reached']}, gave up on the plateau {n['gave up']}, "
            f"trained the whole budget {n['budget']}.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results/embedded")
    ap.add_argument("--time-file", default=None, help="the sweep's start/end times (default: "
                    "probe_sweep_time.txt beside the results folder)")
    ap.add_argument("--report", metavar="FILE", help="write the sweep's report (results/embedded/REPORT.md) to FILE "
                    "instead of printing")
    ap.add_argument("--png", metavar="FILE", help="also draw each PE's share of seeds learned against the step, per "
                    "probe (results/embedded/probe_learning.png)")
    args = ap.parse_args(argv)
    data = load(args.results)  # read once: the tables, the verdicts and the figure share it
    lines = findings(data)
    if args.png:
        learning_png({p: data[p] for p in CEILING if p in data}, args.png, MIN_LEARNED)
    if args.report:
        time_file = Path(args.time_file) if args.time_file else Path(args.results).resolve().parent / \
            "probe_sweep_time.txt"
        alibi = Path(args.results).resolve().parent / "alibi-study" / "diagnosis.json"
        rerun = reproduced(Path(args.results).resolve().parent / "rerun_check.json", shown(Path(args.results)),
                           [p for p in CEILING if p in data])
        spread = Path(args.results).resolve().parent / "thread-spread" / "reruns.json"
        rerun += " " + spread_sentence(spread, Path(args.results).resolve().parent.parent)
        write_report(args.report, fill(REPORT, findings="\n".join(lines), alibi=alibi_readout(alibi), reproduced=rerun,
                                       **protocol(args.results, time_file, CEILING)))
        return 0
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

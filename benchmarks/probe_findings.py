"""Summarise a probe sweep (README "Probes"): accuracy per probe x PE and a verdict per prediction.

    python benchmarks/probe_findings.py --results results/embedded --lr-results results/probe-lr [--readme README.md]

For each probe: one row per PE with the learning rate it ran with, the number of seeds, the
in-distribution validation accuracy (the precondition: a PE that did not learn the training
distribution says nothing about the property), the out-of-distribution test accuracy with its 95 %
bootstrap interval over seeds, and the paired test - val difference (the cost of leaving the
training distribution). Then each theoretical prediction with its verdict, computed here from the
numbers (never typed in): ``held`` / ``contradicted`` / ``not testable`` (a precondition failed) /
``inconclusive`` (the interval straddles the threshold). Differences between PEs are paired by seed
(the same seed gives both runs the same data); their interval is the paired bootstrap and their
p-value the paired t-test (with 5 seeds the exact sign-flip test cannot go below p = 0.0625).

``--lr-results`` reads the learning-rate selection runs (same recipe, one held-out seed, each
learning rate in its own ``lr<X>`` folder) and prints which learning rate each PE got.
"""
from __future__ import annotations

import argparse
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy import stats

from pebench.leaderboard import collect_results
from pebench.leaderboard.render import pe_sort_key
from pebench.leaderboard.stats import bootstrap_mean_ci, paired_bootstrap

#: the exact no-PE ceilings of the test splits (pebench.datamodules.probes.probes; tests check the two agree)
CEILING = {"probe-translation": 0.25, "probe-rotation": 0.25, "probe-decay": 0.5, "probe-context": 1 / 3,
           "probe-extrapolation": 0.25, "probe-anchoring": 0.5}
#: a PE "learned" a probe when its mean validation accuracy is at least this share of the way from the
#: no-PE ceiling to 100 % (first set as a flat 90 %; changed after the first probe's results, where it
#: called 86-87 %-val models on a 4-class task "not learned" - README "Probes" says so)
LEARNED_SHARE = 0.5
#: tolerance (accuracy points) of "keeps its accuracy" / "at chance"
TOL = 0.05

RELATIVE = ("rope-axial", "rope-mixed", "pape", "lookhere")
ABSOLUTE = ("ape", "sincos")
DISTANCE_ONLY = ("alibi", "pape-ri")
#: PEs with a monotone distance decay of the attention logit (ALiBi's fixed slopes, LookHere's, PaPE's learned one)
DECAY = ("alibi", "lookhere", "pape", "pape-ri")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _ci(values: list[float]) -> str:
    ci = bootstrap_mean_ci(values)
    return "—" if ci is None else f"[{_pct(ci[0])}, {_pct(ci[1])}]"


class Cell:
    """The runs of one (probe, PE): per-seed val and test accuracy."""

    def __init__(self, runs, ceiling: float = 0.0) -> None:
        self.threshold = ceiling + LEARNED_SHARE * (1.0 - ceiling)
        self.val = {r.seed: r.metrics.get("val/acc1") for r in runs}
        self.test = {r.seed: r.metrics.get("test/acc1") for r in runs}
        #: the upsampled-scene accuracy per input size (probe-extrapolation's extrapolation analysis)
        self.upsampled = {r.seed: dict(r.extrapolation or {}) for r in runs}
        self.lr = sorted({r.raw.get("config", {}).get("lr") for r in runs})
        self.n = len(runs)

    def replaced(self, **attrs) -> "Cell":
        """The same runs with some attributes replaced: another "learned" ``threshold`` (a probe half of
        whose label is out of reach), or another accuracy in the ``test`` slot (the upsampled scenes)."""
        import copy

        c = copy.copy(self)
        c.__dict__.update(attrs)
        return c

    def at_size(self, size: str) -> dict[int, float]:
        """Per seed: the accuracy on the same scenes upsampled to ``size`` px (extrapolation analysis)."""
        return {s: v[size] for s, v in self.upsampled.items() if v.get(size) is not None}

    def mean(self, which: str) -> float:
        v = [x for x in getattr(self, which).values() if x is not None]
        return float(np.mean(v)) if v else float("nan")

    def values(self, which: str) -> list[float]:
        return [getattr(self, which)[s] for s in sorted(getattr(self, which)) if getattr(self, which)[s] is not None]

    @property
    def learned(self) -> bool:
        return self.mean("val") >= self.threshold


def load(results: str) -> dict[str, dict[str, Cell]]:
    runs, _ = collect_results(results)
    by = defaultdict(lambda: defaultdict(list))
    for r in runs:
        if r.complete and r.dataset in CEILING:
            by[r.dataset][r.label].append(r)
    return {d: {pe: Cell(rs, CEILING[d]) for pe, rs in pes.items()} for d, pes in by.items()}


def paired(a: Cell, b: Cell, which_a: str = "test", which_b: str = "test"):
    """Mean paired difference a - b, its bootstrap interval and the paired t-test p."""
    da, db = getattr(a, which_a), getattr(b, which_b)
    seeds = sorted(s for s in set(da) & set(db) if da[s] is not None and db[s] is not None)
    d = [da[s] - db[s] for s in seeds]
    pb = paired_bootstrap(d)
    if pb is None:
        return None
    p = float(stats.ttest_rel([da[s] for s in seeds], [db[s] for s in seeds]).pvalue) if np.std(d) > 0 else (
        0.0 if d and d[0] != 0 else 1.0)
    return pb[0], pb[1], pb[2], p


def table(probe: str, cells: dict[str, Cell]) -> list[str]:
    out = [f"#### `{probe}` (no-PE ceiling {_pct(CEILING[probe])} %)", "",
           "| PE | lr | n | val (ID) % | test (OOD) % | test 95% CI | test − val [95% CI] |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for pe in sorted(cells, key=pe_sort_key):
        c = cells[pe]
        g = paired(c, c, "test", "val")
        gap = "—" if g is None else f"{100 * g[0]:+.1f} [{100 * g[1]:+.1f}, {100 * g[2]:+.1f}]"
        lr = ", ".join(f"{x:g}" for x in c.lr if x is not None)
        out.append(f"| {pe} | {lr} | {c.n} | {_pct(c.mean('val'))} | {_pct(c.mean('test'))} | "
                   f"{_ci(c.values('test'))} | {gap} |")
    return out + [""]


def upsampled_table(cells: dict[str, Cell]) -> list[str]:
    """probe-extrapolation's second regime: the validation scenes upsampled (the glyphs grow with the
    canvas), accuracy per input size, mean over seeds with the 95 % bootstrap interval."""
    sizes = sorted({k for c in cells.values() for v in c.upsampled.values() for k in v}, key=int)
    if not sizes:
        return []
    n = sorted({len(c.upsampled) for c in cells.values()})
    out = ["The same scenes upsampled (second regime: glyphs and distances grow with the canvas; each PE's "
           f"native rule for the larger grid; {', '.join(map(str, n))} seeds), accuracy %:", "",
           "| PE | " + " | ".join(f"{s} px" for s in sizes) + " |", "|---|" + "---:|" * len(sizes)]
    for pe in sorted(cells, key=pe_sort_key):
        c = cells[pe]
        row = []
        for size in sizes:
            v = list(c.at_size(size).values())
            ci = bootstrap_mean_ci(v) if len(v) > 1 else None
            row.append("—" if not v else f"{_pct(np.mean(v))}" + (f" [{_pct(ci[0])}, {_pct(ci[1])}]" if ci else ""))
        out.append(f"| {pe} | " + " | ".join(row) + " |")
    return out + [""]


def _keeps(c: Cell) -> str:
    """Verdict of "test accuracy stays within TOL of val" for one PE."""
    if not c.learned:
        return f"not testable (val {_pct(c.mean('val'))} % < {_pct(c.threshold)} %: not learned)"
    g = paired(c, c, "test", "val")
    if g is None:
        return "not testable (one seed)"
    mean, lo, hi, _ = g
    if lo >= -TOL:
        return f"keeps it (test − val {100 * mean:+.1f}, CI [{100 * lo:+.1f}, {100 * hi:+.1f}])"
    if hi < -TOL:
        return f"loses it (test − val {100 * mean:+.1f}, CI [{100 * lo:+.1f}, {100 * hi:+.1f}])"
    return f"inconclusive (test − val {100 * mean:+.1f}, CI [{100 * lo:+.1f}, {100 * hi:+.1f}])"


def _group_claim(cells, group, want: str | None) -> list[str]:
    """One line per PE: its transfer verdict against the prediction ``want`` ("keeps" / "loses"), or
    only the measurement when ``want`` is None (no prediction)."""
    lines = []
    for pe in group:
        if pe not in cells:
            lines.append(f"  - {pe}: not run")
            continue
        v = _keeps(cells[pe])
        if want is None:
            lines.append(f"  - {pe}: {v}")
            continue
        verdict = ("held" if v.startswith(want) else "not testable" if v.startswith("not testable")
                   else "inconclusive" if v.startswith("inconclusive") else "contradicted")
        lines.append(f"  - {pe}: **{verdict}** — {v}")
    return lines


def _at_most(c: Cell, bound: float, which: str = "test", chance: float = 0.25) -> str:
    """Verdict of "accuracy at most ``bound``"; a model at ``chance`` satisfies it vacuously: not testable."""
    ci = bootstrap_mean_ci(c.values(which))
    m = c.mean(which)
    if m <= chance + 0.02:
        return f"**not testable** ({which} {_pct(m)} %: at chance, nothing learned)"
    if ci is None:
        return f"not testable (one seed; {which} {_pct(m)} %)"
    if ci[1] <= bound + TOL:
        return f"**held** ({which} {_pct(m)} %, CI [{_pct(ci[0])}, {_pct(ci[1])}] ≤ {_pct(bound)} % + {_pct(TOL)})"
    if ci[0] > bound + TOL:
        return f"**contradicted** ({which} {_pct(m)} %, CI [{_pct(ci[0])}, {_pct(ci[1])}] above {_pct(bound)} %)"
    return f"**inconclusive** ({which} {_pct(m)} %, CI [{_pct(ci[0])}, {_pct(ci[1])}])"


def _beats(cells, a: str, b: str) -> str:
    if a not in cells or b not in cells:
        return "not run"
    ca, cb = cells[a], cells[b]
    if not ca.learned:  # the predicted winner must have learned the probe; the other failing to is the outcome
        return f"**not testable** (val {a} {_pct(ca.mean('val'))} % < {_pct(ca.threshold)} %: {a} not learned)"
    r = paired(ca, cb)
    if r is None:
        return "**not testable** (fewer than 2 paired seeds)"
    mean, lo, hi, p = r
    verdict = "held" if lo > 0 and p < 0.05 else "contradicted" if hi < 0 and p < 0.05 else "inconclusive"
    return (f"**{verdict}** (test {a} − {b} = {100 * mean:+.1f} points, paired CI [{100 * lo:+.1f}, {100 * hi:+.1f}], "
            f"paired t-test p = {p:.3g})")


def claims(data: dict[str, dict[str, Cell]]) -> list[str]:
    out = ["#### Predictions and verdicts", ""]
    if "probe-translation" in data:
        c = data["probe-translation"]
        out += ["- **Translation** (test: the glyph pair in the other half of the canvas). Relative PEs keep "
                "their accuracy:"] + _group_claim(c, RELATIVE, "keeps")
        out += ["  Absolute PEs lose it:"] + _group_claim(c, ABSOLUTE, "loses")
        out += ["  Relative PEs beat the absolute sincos off the training region (test, paired by seed):"]
        out += [f"  - {pe} − sincos: {_beats(c, pe, 'sincos')}" for pe in RELATIVE]
    if "probe-rotation" in data:
        c = data["probe-rotation"]
        out += ["- **Rotation** (label = distance bin + direction bit; test: scenes turned to 27°–63°). A PE that "
                "sees only Euclidean distances cannot read the direction bit: at most 50 % on val and test:"]
        for pe in DISTANCE_ONLY:
            if pe in c:
                out.append(f"  - {pe}: val {_at_most(c[pe], 0.5, 'val')}; test {_at_most(c[pe], 0.5)}")
        out += ["  ... and, being invariant to rotations, keeps what it learned (the distance bit: learned = val "
                "halfway from 25 % to its 50 % bound) on the rotated scenes:"]
        out += _group_claim({pe: c[pe].replaced(threshold=0.375) for pe in DISTANCE_ONLY if pe in c}, DISTANCE_ONLY,
                            "keeps")
        out += ["  Directional PEs (measured, no prediction):"] + _group_claim(
            c, ("rope-axial", "rope-mixed", "pape", "lookhere", "sincos", "ape"), None)
    if "probe-decay" in data:
        c = data["probe-decay"]
        out += ["- **Distance decay** (test: the nearest glyph at 3–4.5 cells instead of 1–2.3). PEs whose "
                "attention decays with distance (a fixed or learned monotone bias) rank neighbours by distance "
                "at any distance, so they keep the nearest-neighbour rule at unseen distances:"]
        out += _group_claim(c, DECAY, "keeps")
        out += ["  Absolute PEs have no notion of distance to extrapolate and lose it:"] + _group_claim(c, ABSOLUTE, "loses")
        out += ["  RoPE (measured, no prediction: its long-range decay is weak and not monotone):"] + _group_claim(
            c, ("rope-axial", "rope-mixed"), None)
    if "probe-context" in data:
        c = data["probe-context"]
        out += [f"- **Context-dependent decay** (PaPE's motivation): PaPE beats RoPE-axial on probe-context: "
                f"{_beats(c, 'pape', 'rope-axial')}; PaPE beats ALiBi (a fixed decay): {_beats(c, 'pape', 'alibi')}"]
    if "probe-extrapolation" in data:
        c = data["probe-extrapolation"]
        out += ["- **Extrapolation** (test: a 12 × 12 canvas at the training glyph scale). Relative PEs keep "
                "their accuracy:"] + _group_claim(c, RELATIVE, "keeps")
        out += ["  Absolute PEs lose it:"] + _group_claim(c, ABSOLUTE, "loses")
        out += ["  Relative PEs beat the absolute sincos on the larger canvas (test, paired by seed):"]
        out += [f"  - {pe} − sincos: {_beats(c, pe, 'sincos')}" for pe in RELATIVE]
        out += [f"  PaPE extrapolates better than RoPE-axial (the PaPE paper's claim), larger canvas (test): "
                f"{_beats(c, 'pape', 'rope-axial')}"]
        sizes = sorted({k for cell in c.values() for v in cell.upsampled.values() for k in v}, key=int)
        if len(sizes) > 1 and "pape" in c and "rope-axial" in c:
            big = sizes[-1]
            up = {pe: c[pe].replaced(test=c[pe].at_size(big)) for pe in ("pape", "rope-axial")}
            at = up["pape"].mean("test")
            verdict = (f"**not testable** (PaPE at {_pct(at)} % on the upsampled scenes: at chance, "
                       f"{_pct(CEILING['probe-extrapolation'])} % + {_pct(TOL)})"
                       if at <= CEILING["probe-extrapolation"] + TOL else _beats(up, "pape", "rope-axial"))
            out += [f"  ... and on the same scenes upsampled to {big} px: {verdict}"]
    if "probe-anchoring" in data:
        c = data["probe-anchoring"]
        out += [f"- **Index anchoring** (content gives 50 %, absolute position the rest): an absolute PE "
                f"beats RoPE-axial: {_beats(c, 'sincos', 'rope-axial')}"]
    return out + [""]


def _selection(root: str) -> dict[str, dict[float, float]]:
    """PE -> {lr: mean validation accuracy} over the selection runs below ``root/lr*``."""
    acc: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for sub in sorted(Path(root).glob("lr*")):
        runs, _ = collect_results(sub)
        for r in runs:
            if r.complete:
                acc[r.label][float(r.raw["config"]["lr"])].append(r.metrics.get("val/acc1") or 0.0)
    return {pe: {lr: float(np.mean(v)) for lr, v in d.items()} for pe, d in acc.items()}


#: a larger learning rate must beat the smallest one's validation accuracy by this much to be chosen
#: (about one standard error of an accuracy near 50 % on the 600-sample validation split)
LR_MARGIN = 0.02


def chosen_lr(means: dict[float, float]) -> float:
    """The learning rate with the best validation accuracy, unless it beats the smallest learning rate
    by less than :data:`LR_MARGIN` (then the smallest: a noise-level gain does not choose)."""
    lrs = sorted(means)
    best = max(lrs, key=lambda lr: (means[lr], -lr))
    return best if means[best] - means[lrs[0]] >= LR_MARGIN else lrs[0]


def lr_selection(root: str) -> list[str]:
    """Markdown table: validation accuracy per PE and learning rate, and the one chosen."""
    sel = _selection(root)
    lrs = sorted({lr for v in sel.values() for lr in v})
    out = ["| PE | " + " | ".join(f"val % at lr {lr:g}" for lr in lrs) + " | chosen lr |",
           "|---|" + "---:|" * (len(lrs) + 1)]
    for pe in sorted(sel, key=pe_sort_key):
        means = sel[pe]
        out.append(f"| {pe} | " + " | ".join(_pct(means[lr]) if lr in means else "—" for lr in lrs)
                   + f" | {chosen_lr(means):g} |")
    return out + [""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results/embedded")
    ap.add_argument("--lr-results", default=None)
    ap.add_argument("--readme", metavar="FILE", help="write the output between the probe-findings markers of "
                    "FILE (README.md) instead of printing it")
    ap.add_argument("--choose-lr", metavar="DIR", help="print 'PE LR' lines from the selection runs under DIR "
                    "and exit (benchmarks/probe_sweep.sh reads them)")
    args = ap.parse_args(argv)
    if args.choose_lr:
        for pe, means in sorted(_selection(args.choose_lr).items(), key=lambda kv: pe_sort_key(kv[0])):
            print(pe, f"{chosen_lr(means):g}")
        return 0
    lines = []
    if args.lr_results:
        lines += ["#### Learning rate per PE (selection runs)", ""] + lr_selection(args.lr_results)
    data = load(args.results)
    for probe in CEILING:
        if probe in data:
            lines += table(probe, data[probe])
            if probe == "probe-extrapolation":
                lines += upsampled_table(data[probe])
    lines += claims(data)
    text = "\n".join(lines)
    if args.readme:
        path = Path(args.readme)
        path.write_text(replace_block(path.read_text(encoding="utf-8"), text), encoding="utf-8")
    else:
        print(text)
    return 0


START, END = "<!-- probe-findings:start -->", "<!-- probe-findings:end -->"


def replace_block(doc: str, text: str, start: str = START, end: str = END) -> str:
    """``doc`` with the text between the ``start`` / ``end`` markers (default: probe-findings) replaced by
    ``text``."""
    if start not in doc or end not in doc:
        raise SystemExit(f"markers {start} ... {end} not found")
    head, rest = doc.split(start, 1)
    return f"{head}{start}\n{text}\n{end}{rest.split(end, 1)[1]}"


if __name__ == "__main__":
    raise SystemExit(main())

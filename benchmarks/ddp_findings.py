"""DDP against one process (results/ddp-agreement/REPORT.md): does a 2-process run of the default
configuration train what the single-process run trains, and how far apart do their results end?

    python -m benchmarks.ddp_findings --results results/ddp-agreement [--report results/ddp-agreement/REPORT.md]

The runs (benchmarks/ddp_agreement.sh) are ``bench run`` with the defaults of their time (shapes / pape /
vit-nano, 4 epochs -- pinned in the script since the default became 3 --, global batch 64) and ``--deterministic --analyses none`` on CPU, per seed once in one process
(``one-process/``) and once in 2 gloo processes (``ddp-2/``, ``--devices 2 --strategy ddp``).

Every number is computed from the committed ``results.json`` and ``metrics.csv`` files:

* *Endpoint*: val/acc1 and val/loss of each run; the paired difference (2 processes minus one) per seed,
  its mean and 95 % Student-t interval over seeds (paired t-test p), next to the across-seed standard
  deviation of each mode.
* *Trajectory*: the training loss of the global batch that ``metrics.csv`` logs every 10 steps
  (``train/loss_step``; under DDP it is the mean over the ranks' equal halves) and the validation loss
  after each epoch, compared step by step at the same seed: the largest relative difference over the
  first logged steps and the first logged step where the two differ by more than
  :data:`DIVERGED` (relative).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path

import numpy as np

from pebench.leaderboard.stats import equivalence_test, format_p, paired_summary

from .reports import emit, fill

MODES = {"one-process": "1 process", "ddp-2": "2 processes (DDP, gloo)"}
#: relative difference of a logged loss above which the two trajectories count as apart
DIVERGED = 1e-3
#: logged training steps compared for the "start of training" check
FIRST_STEPS = 5

TEMPLATE = """\
# DDP against one process: the default run, 1 vs 2 CPU processes

Written by `benchmarks/ddp_findings.py` from the runs of `benchmarks/ddp_agreement.sh` (pebench issue
#32, item 5). Configuration: `bench run` defaults of the time (shapes / pape / vit-nano, 4 epochs, global batch 64,
lr 2e-3, 1 warm-up epoch) with `--deterministic --analyses none --accelerator cpu`; the 2-process runs
add `--devices 2 --strategy ddp` (gloo), so each rank loads 32 samples a step.
@@SEEDS@@
One thread per process. Nothing here is a timing.

## What is the same by construction

* **Data**: the training sampler is a `DistributedSampler(seed=seed)` in both modes; rank r of 2 takes
  `perm[r::2]` in batches of 32, so the two ranks' s-th batches together are exactly the single
  process's s-th batch `perm[64 s : 64 (s + 1)]` (4096 training samples, 64 steps an epoch, no padding).
  `shapes` renders each sample from (seed, split, index) with no random augmentation, so a sample is
  the same pixels in every mode.
* **Gradient**: the loss is a per-rank mean over equal halves; DDP averages the ranks' gradients, which
  is the global-batch mean gradient. The default run has no dropout, drop-path, RPT or coordinate
  augmentation and no BatchNorm, so no random draw or batch statistic depends on the rank.
* **Schedule**: 64 optimizer steps an epoch in both modes (Lightning's `estimated_stepping_batches` is
  256 in both), so warm-up and cosine decay are the same functions of the step.
* **Validation**: an unrepeated distributed sampler and torchmetrics sum states reduced across ranks,
  so val/acc1 and val/loss are over the same 512 samples.

What differs is float arithmetic: a forward/backward over 32 samples and a gloo sum of two gradients
rounds differently from one over 64 samples.

## Trajectory: the same seed, step by step

Relative difference |2 proc − 1 proc| / |1 proc| of the logged global-batch training loss
(`train/loss_step`, every 10 steps) and of the validation loss after each epoch.

@@TRAJECTORY@@

@@TRAJECTORY_VERDICT@@

## Endpoint: val/acc1 and val/loss after 4 epochs

@@ENDPOINT@@

@@ENDPOINT_STATS@@

## Verdict

@@VERDICT@@
"""


def _runs(results: Path, mode: str) -> dict[int, Path]:
    out: dict[int, Path] = {}
    for rj in sorted((results / mode).rglob("results.json")):
        r = json.loads(rj.read_text(encoding="utf-8"))
        if r.get("status") == "complete":
            out[int(r["seed"])] = rj.parent
    return out


def _metrics(run: Path) -> tuple[dict[int, float], dict[int, float], dict[str, float]]:
    """(train/loss_step by step, val/loss after each training epoch, final metrics) of one run."""
    res = json.loads((run / "results.json").read_text(encoding="utf-8"))
    epochs = int(res["config"]["epochs"])
    steps: dict[int, float] = {}
    val: dict[int, float] = {}
    with open(run / "metrics.csv", newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row.get("train/loss_step"):
                steps[int(row["step"])] = float(row["train/loss_step"])
            if row.get("val/loss") and int(row["epoch"]) < epochs:  # not the final validate() after fit
                val.setdefault(int(row["epoch"]), float(row["val/loss"]))  # the epoch's own validation
    return steps, val, res["metrics"]


def _rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b) if b else abs(a - b)


def _fmt_rel(x: float) -> str:
    return "0" if x == 0 else f"{x:.1e}"


def _span(x: list[int]) -> str:
    return f"{min(x)}" if min(x) == max(x) else f"{min(x)}–{max(x)}"


def _sd(x: list[float]) -> float:
    return float(np.std(np.asarray(x, dtype=np.float64), ddof=1)) if len(x) > 1 else math.nan


#: the gap a user reported (issue #32): val/acc1 0.998 in 2 processes against 0.965 in one
REPORTED_GAP = 0.998 - 0.965
#: equivalence margin of "1- and 2-process runs reach the same val/acc1" (TOST of the paired difference, issue #44):
#: 1 accuracy point, under a third of the reported gap, so equivalence at this margin rules out a mode effect of
#: the reported size; derived from that question, not from these runs
EQUIV_MARGIN = 0.01
#: the report's family: its one equivalence test (the paired t-tests above it describe, they decide nothing)
ALPHA = 0.05


def _equivalence(diffs: list[float]) -> str:
    """The TOST of the paired val/acc1 differences inside ± EQUIV_MARGIN, in one sentence."""
    if len(diffs) < 2:
        return f"{len(diffs)} seed(s) are too few for the equivalence test. "
    t = equivalence_test(diffs, EQUIV_MARGIN, alpha=ALPHA)
    if not t.tested:
        return f"The equivalence test (TOST, margin ± {EQUIV_MARGIN:g} val/acc1) is no test: {t.reason}. "
    assert t.p is not None and t.lo is not None and t.hi is not None
    head = (f"The equivalence test (TOST, margin ± {EQUIV_MARGIN:g} val/acc1, fixed in the script with its reason; "
            f"the report's only verdict, so its family is this one test) gives {format_p(t.p)} over {len(diffs)} "
            f"paired seeds, 90 % t-interval [{t.lo:+.4f}, {t.hi:+.4f}]: ")
    verdict = (f"**equivalent**: the 2-process runs reach the single-process val/acc1 within ± {EQUIV_MARGIN:g}"
               if t.p < ALPHA else f"**not shown equivalent** within ± {EQUIV_MARGIN:g}")
    return head + verdict + (f" (last-epoch weights; provisional: {len(diffs)} < 10 seeds). " if len(diffs) < 10
                             else " (last-epoch weights). ")


def _verdict(parts: list[tuple[str, float, float, bool]], worst_first: float, acc: dict[str, list[float]],
             n: int) -> str:
    same_start = worst_first <= 1e-5
    start = ("Both modes compute the same training: the first logged losses agree to "
             f"{_fmt_rel(worst_first)} (float rounding of a different reduction order). " if same_start else
             f"The first logged losses already differ by {_fmt_rel(worst_first)}: more than float rounding, so "
             "the two modes do not train on the same batches with the same gradient. ")
    if not parts:
        return start + f"{n} seed(s) are too few for an interval of the endpoint difference."
    name, lo, hi, sig = parts[0]
    diffs = [b - a for a, b in zip(acc["one-process"], acc["ddp-2"])]
    spread = max(_sd(acc["one-process"]), _sd(acc["ddp-2"]))
    end = (f"At the end of training the paired {name} difference's 95 % interval [{lo:+.4f}, {hi:+.4f}] "
           + ("excludes 0: the 2-process runs end systematically apart from the single-process runs."
              if sig else
              f"contains 0, and the paired differences (largest |Δ| {max(abs(d) for d in diffs):.4f}) are of the "
              f"size of the across-seed spread of either mode (sd up to {spread:.4f}): the rounding difference is "
              "amplified by training like any other perturbation, so the runs differ run by run. "
              + _equivalence(diffs)
              + (f"A reported gap of {REPORTED_GAP:.3f} (val/acc1 0.965 in one process against 0.998 in two, a "
                 "user's run of the default) is larger than every paired difference measured here; these "
                 f"{n} seeds with `--deterministic` do not reproduce it, and say nothing about what caused it."
                 if REPORTED_GAP > max(abs(d) for d in diffs) else
                 f"A reported gap of {REPORTED_GAP:.3f} (val/acc1 0.965 against 0.998) is within the paired "
                 "differences measured here.")))
    return start + end


def build(results: Path) -> str:
    one, two = _runs(results, "one-process"), _runs(results, "ddp-2")
    seeds = sorted(set(one) & set(two))
    if not seeds:
        raise SystemExit(f"no seed with a complete run in both {results / 'one-process'} and {results / 'ddp-2'}")
    traj_rows, end_rows = [], []
    acc = {m: [] for m in MODES}
    loss = {m: [] for m in MODES}
    first_gaps, diverged_at = [], []
    for s in seeds:
        st1, v1, f1 = _metrics(one[s])
        st2, v2, f2 = _metrics(two[s])
        common = sorted(set(st1) & set(st2))
        rels = [_rel(st2[k], st1[k]) for k in common]
        first = max(rels[:FIRST_STEPS]) if rels else math.nan
        apart = next((k for k, r in zip(common, rels) if r > DIVERGED), None)
        first_gaps.append(first)
        diverged_at.append(apart)
        vrel = [_fmt_rel(_rel(v2[e], v1[e])) for e in sorted(set(v1) & set(v2))]
        traj_rows.append(f"| {s} | {common[0] if common else '–'} | {_fmt_rel(rels[0]) if rels else '–'} | "
                         f"{_fmt_rel(first)} | {apart if apart is not None else 'never'} | "
                         f"{_fmt_rel(max(rels)) if rels else '–'} | {', '.join(vrel)} |")
        for m, f in (("one-process", f1), ("ddp-2", f2)):
            acc[m].append(float(f["val/acc1"]))
            loss[m].append(float(f["val/loss"]))
        end_rows.append(f"| {s} | {f1['val/acc1']:.4f} | {f2['val/acc1']:.4f} | {f2['val/acc1'] - f1['val/acc1']:+.4f} | "
                        f"{f1['val/loss']:.4f} | {f2['val/loss']:.4f} | {f2['val/loss'] - f1['val/loss']:+.4f} |")
    trajectory = "\n".join([
        f"| seed | first logged step | rel. diff there | max rel. diff, first {FIRST_STEPS} logged steps | "
        f"first logged step > {DIVERGED:g} | max rel. diff, all logged steps | val/loss rel. diff, epochs 0–3 |",
        "|---:|---:|---:|---:|---:|---:|---|", *traj_rows])
    worst_first = max(first_gaps)
    apart_steps = [a for a in diverged_at if a is not None]
    traj_verdict = (f"Over the first {FIRST_STEPS} logged steps (steps up to "
                    f"{FIRST_STEPS * 10 - 1}) the two modes' training losses differ by at most "
                    f"{_fmt_rel(worst_first)} (relative) at any seed: the same computation up to float rounding. "
                    + (f"The rounding differences then grow: the logged losses first differ by more than {DIVERGED:g} "
                       f"at step {_span(apart_steps)} "
                       f"({len(apart_steps)} of {len(seeds)} seeds), as two runs of a chaotic training process "
                       f"started a rounding error apart do." if apart_steps else
                       f"They never differ by more than {DIVERGED:g} at a logged step."))
    endpoint = "\n".join([
        "| seed | val/acc1, 1 proc | val/acc1, 2 proc | Δ (2 − 1) | val/loss, 1 proc | val/loss, 2 proc | Δ (2 − 1) |",
        "|---:|---:|---:|---:|---:|---:|---:|", *end_rows])
    stats_lines = []
    verdict_parts = []
    alone = {m: {s: _metrics(r)[2] for s, r in runs.items()} for m, runs in (("one-process", one), ("ddp-2", two))}
    for name, vals, fmt in (("val/acc1", acc, "{:+.4f}"), ("val/loss", loss, "{:+.4f}")):
        diffs = [b - a for a, b in zip(vals["one-process"], vals["ddp-2"])]
        pt = paired_summary(diffs)
        spread = {m: [float(f[name]) for f in alone[m].values()] for m in alone}
        spread_txt = "; ".join(f"across-seed sd in {MODES[m].split(' (')[0]} {_sd(v):.4f} (seeds "
                               f"{', '.join(map(str, sorted(alone[m])))})" if len(v) > 1 else
                               f"{MODES[m].split(' (')[0]}: one seed, no spread" for m, v in spread.items())
        if pt is None:
            stats_lines.append(f"* **{name}**: {len(seeds)} paired seed(s), too few for an interval of the "
                               f"paired difference; {spread_txt}.")
            continue
        mean, lo, hi, p, sig, _ = pt
        stats_lines.append(
            f"* **{name}**: paired difference (2 − 1) mean {fmt.format(mean)}, 95 % t-interval "
            f"[{fmt.format(lo)}, {fmt.format(hi)}] over {len(seeds)} seeds (paired t-test {format_p(p)}); "
            f"{spread_txt}; sd of the paired differences {_sd(diffs):.4f}.")
        verdict_parts.append((name, lo, hi, sig))
    verdict = _verdict(verdict_parts, worst_first, acc, len(seeds))
    only = {m: sorted(set(r) - set(seeds)) for m, r in (("one-process", one), ("ddp-2", two))}
    seeds_txt = (f"Seeds with a complete run in both modes: {', '.join(map(str, seeds))}"
                 + "".join(f"; in {MODES[m].split(' (')[0]} only: {', '.join(map(str, v))}" for m, v in only.items() if v)
                 + ".")
    return fill(TEMPLATE, seeds=seeds_txt, trajectory=trajectory, trajectory_verdict=traj_verdict,
                endpoint=endpoint, endpoint_stats="\n".join(stats_lines), verdict=verdict)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=Path("results/ddp-agreement"))
    ap.add_argument("--report", type=Path, default=None, help="write the report here (default: print it)")
    a = ap.parse_args(argv)
    emit(build(a.results), a.report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

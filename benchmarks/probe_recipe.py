"""The probe recipe study (results/probe-recipe/REPORT.md): which training recipe lets the probes' PEs learn.

    python -m benchmarks.probe_recipe --results results/probe-recipe --baseline results/probe-sweep-200-steps \
        [--report results/probe-recipe/REPORT.md]

``benchmarks/probe_recipe.sh`` trains the probe x PE cells that the previous sweep's 200-step recipe left
bimodal (some seeds learned, some stayed at chance) under each candidate recipe, one folder per recipe
(``<recipe>/<probe>/<pe>/vit-probe/seed<S>``), validating every ``--val-every`` steps. This script reads
each run's ``results.json`` and ``metrics.csv`` and, per recipe x probe x PE, reports

* how many seeds *learned* the probe: final validation accuracy at least halfway from the probe's no-PE
  ceiling to 100 % (the rule of the probe study, ``bench study report probes``), decided per seed;
* each seed's *steps to learn*: the first validation step at which it crossed that line (``—``: never
  within the run's budget), a property of the PE under the recipe in its own right;
* the optimizer steps the seed trained (``--stop-at`` ends a run at its validation target) and the run's
  wall time, which set the cost of the full sweep under that recipe.

``--baseline`` adds the previous sweep's runs of the same cells and seeds as the recipe ``sweep-200-steps``
(200 steps, validated once per epoch: its steps to learn are not measured, shown as ``n/m``). The recipe
is read from the runs' own configurations (never typed in), and the comparison at the end is computed:
learned seeds summed over the runs the recipes share, then the steps they trained.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from .reports import emit, fill, read_metrics, reproduced, shown

#: the exact no-PE ceilings of the probes' test splits (results.json's dataset_info.no_pe_bound; the probe study's
#: learned rule reads them from there)
CEILING = {"probe-translation": 0.25, "probe-rotation": 0.25, "probe-decay": 0.5, "probe-context": 1 / 3,
           "probe-extrapolation": 0.25, "probe-anchoring": 0.5,
           "probe-set-translation": 0.25, "probe-set-extrapolation": 0.25, "probe-set-anchoring": 0.5}
#: a seed learned a probe when its best validation accuracy is at least this share of the way from the no-PE
#: ceiling to 100 % (the probe study's rule: bench/studies/files/probes.yaml, ``learned.above_bound``)
LEARNED_SHARE = 0.5

REPORT = """\
# Probe recipe study (`results/probe-recipe`)

Written by `python -m benchmarks.probe_recipe --results results/probe-recipe --report
results/probe-recipe/REPORT.md --baseline results/probe-sweep-200-steps` from the committed runs of
`benchmarks/probe_recipe.sh` and the same cells and seeds of the previous sweep
(`tests/studies/test_leaderboard_committed.py` checks that it regenerates byte for byte).

The previous probe sweep (`../probe-sweep-200-steps`, commit `dce1ba0`) trained every cell for a
fixed 200 steps with a cosine decay, and several of its cells are bimodal: some seeds leave the loss
plateau and learn the probe, others end at chance. A verdict about a PE property is only as good as
the seeds that learned, so this study asks which recipe gets the seeds of such a cell off the plateau,
and at what cost. Each recipe below trains the same cells (same model `vit-probe`, same data seeds, the
same learning-rate selection as that sweep unless the recipe names another), validating every few steps
so that each seed's *steps to learn* (the first validation at or above the "learned" line: halfway
from the no-PE ceiling to 100 %) is measured, not inferred. The previous sweep ran each PE at the
learning rate its selection stage chose (0.005, or 0.015 for rope-axial and lookhere); the
constant-rate recipes run every PE at 0.005. *Steps trained* is the cost measure: the wall times
were taken on a 2-core machine shared with other jobs (and the previous sweep's under other
loads), so they are not comparable across recipes. The recipe `sweep-200-steps` below is that
previous sweep's.

The committed sweep (`bench study run probes`, [`../embedded/REPORT.md`](../embedded/REPORT.md))
adopts `constant-5e-3`, cut to its 2.5 h budget (at most 400 steps, target 95 %), and adds two rules
this study motivates: a run still within 5 points of the no-PE ceiling at step 200 stops (`--give-up`;
the plateau section below shows when the seeds that learned had left it), and the test split reads the
best validation's weights (`--eval-checkpoint best`: with a constant rate the last step's accuracy
is noisy, compare the val and best-val columns).

## Recipes (read from the runs' configurations)

@@RECIPES@@

@@REPRODUCED@@

## Per cell

@@CELLS@@

## Comparison

@@COMPARISON@@

## Leaving the plateau

@@PLATEAU@@
"""


class SeedRun:
    def __init__(self, res: dict, run_dir: Path) -> None:
        self.seed = int(res["seed"])
        self.config = res.get("config", {})
        self.val = res["metrics"].get("val/acc1")
        self.test = res["metrics"].get("test/acc1")
        self.wall = float(res.get("wall_time_s") or 0.0)
        self.commit = str(res.get("git_sha") or "?")[:7]
        self.curve, last_train = read_metrics(run_dir)
        #: the best validation accuracy logged during training (the final one when there is no curve)
        self.best_val = max([v for _, v in self.curve] + [self.val or 0.0])
        stopped = res.get("stopped_at_target") or {}
        self.steps = int(stopped["global_step"]) if "global_step" in stopped else last_train

    def steps_to(self, line: float) -> str:
        """The first validation step at or above ``line`` (``—``: never; ``n/m``: validated once per epoch only)."""
        if not self.curve or self.config.get("val_every") is None:  # validated once per epoch only
            return "n/m"
        return next((str(s) for s, v in self.curve if v >= line), "—")


def _complete(path: Path) -> dict | None:
    res = json.loads(path.read_text())
    return res if res.get("status") == "complete" and res.get("dataset") in CEILING else None


def load(root: Path, baseline: Path | None = None) -> dict[str, dict[tuple[str, str], list[SeedRun]]]:
    """recipe -> (probe, PE) -> the complete runs, by seed (``sweep-200-steps``: the same cells and
    seeds of the previous sweep below ``baseline``)."""
    out: dict[str, dict[tuple[str, str], list[SeedRun]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(root.glob("*/*/*/*/seed*/results.json")):
        if (res := _complete(path)) is not None:
            recipe = path.relative_to(root).parts[0]
            out[recipe][(res["dataset"], res.get("variant") or res["pe"])].append(SeedRun(res, path.parent))
    if baseline is not None:
        wanted = {(k, r.seed) for cells in list(out.values()) for k, runs in cells.items() for r in runs}
        for path in sorted(baseline.glob("*/*/*/seed*/results.json")):
            if (res := _complete(path)) is not None:
                key = (res["dataset"], res.get("variant") or res["pe"])
                if (key, int(res["seed"])) in wanted:
                    out["sweep-200-steps"][key].append(SeedRun(res, path.parent))
    for cells in out.values():
        for runs in cells.values():
            runs.sort(key=lambda r: r.seed)
    return out


def describe(recipe: str, cells: dict[tuple[str, str], list[SeedRun]]) -> str:
    """One line: the recipe's options as its runs recorded them (a key a run predates has its old default)."""
    def values(key: str, unset: str = "") -> str:
        vals = sorted({json.dumps(r.config.get(key)) for runs in cells.values() for r in runs})
        return ", ".join(unset if v == "null" else v.strip('"') for v in vals)
    seeds = sorted({r.seed for runs in cells.values() for r in runs})
    stop = values("stop_at", "none")
    every = values("val_every", "epoch")
    val = "validation once per epoch" if every == "epoch" else f"validation every {every} steps"
    return (f"- `{recipe}`: lr {values('lr')}, {values('lr_schedule', 'cosine')} schedule after a "
            f"{values('warmup_epochs')}-epoch warm-up, {values('epochs')} epochs of {values('batch_size')}-scene "
            f"batches{' at most' if stop != 'none' else ''}, {val}, "
            + ("no stop rule" if stop == "none" else f"stop at val/acc1 above {stop}")
            + f"; seeds {', '.join(map(str, seeds))}; commit "
            + ", ".join(f"`{c}`" for c in sorted({r.commit for runs in cells.values() for r in runs})))


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def cell_table(data: dict[str, dict[tuple[str, str], list[SeedRun]]]) -> str:
    lines = ["| probe | PE | recipe | learned (seeds) | steps to learn, per seed | steps trained (mean) | "
             "val % (mean) | best val % during training (mean) | test % (mean) | wall s (mean) |",
             "|---|---|---|---:|---|---:|---:|---:|---:|---:|"]
    keys = sorted({k for cells in data.values() for k in cells})
    for probe, pe in keys:
        line = CEILING[probe] + LEARNED_SHARE * (1 - CEILING[probe])
        for recipe in sorted(data):
            runs = data[recipe].get((probe, pe))
            if not runs:
                continue
            learned = sum(1 for r in runs if r.val is not None and r.val >= line)
            to_learn = ", ".join(r.steps_to(line) for r in runs)
            lines.append(f"| `{probe}` | {pe} | `{recipe}` | {learned}/{len(runs)} | {to_learn} | "
                         f"{statistics.mean(r.steps for r in runs):.0f} | "
                         f"{_pct(statistics.mean(r.val for r in runs if r.val is not None))} | "
                         f"{_pct(statistics.mean(r.best_val for r in runs))} | "
                         f"{_pct(statistics.mean(r.test for r in runs if r.test is not None))} | "
                         f"{statistics.mean(r.wall for r in runs):.0f} |")
    return "\n".join(lines)


def _pair_table(data, names: tuple[str, ...]) -> list[str]:
    """Learned seeds and steps trained of ``names`` over the (probe, PE, seed) runs they all have."""
    shared = set.intersection(*({(k, r.seed) for k, runs in data[n].items() for r in runs} for n in names))
    if not shared:
        return []
    cells = sorted({k for k, _ in shared})
    lines = [f"Over the {len(shared)} run{'s' if len(shared) != 1 else ''} ({', '.join(f'`{p}` {pe}' for p, pe in cells)}) that "
             + " and ".join(f"`{n}`" for n in names) + " share:", "",
             "| recipe | seeds learned | steps trained (sum) | wall s (sum) |", "|---|---:|---:|---:|"]
    for name in names:
        runs = [(k, r) for k, rs in data[name].items() for r in rs if (k, r.seed) in shared]
        learned = sum(1 for k, r in runs if r.val is not None
                      and r.val >= CEILING[k[0]] + LEARNED_SHARE * (1 - CEILING[k[0]]))
        lines.append(f"| `{name}` | {learned}/{len(runs)} | {sum(r.steps for _, r in runs)} | "
                     f"{sum(r.wall for _, r in runs):.0f} |")
    return lines + [""]


def comparison(data: dict[str, dict[tuple[str, str], list[SeedRun]]]) -> str:
    """Every pair of recipes on the runs both have: seeds learned, steps trained, wall time."""
    names = sorted(data)
    lines: list[str] = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            lines += _pair_table(data, (a, b))
    return "\n".join(lines).strip() or "No two recipes share a run."


#: a run has left the plateau once its validation accuracy is this far above the no-PE ceiling (the
#: sweep's --give-up value is the ceiling plus this)
OFF_PLATEAU = 0.05


def plateau(data: dict[str, dict[tuple[str, str], list[SeedRun]]]) -> str:
    """Per recipe with learning curves: the step at which each seed that learned first left the plateau
    (validation above the ceiling + :data:`OFF_PLATEAU`), the latest of them, and the runs that never did."""
    out = []
    for recipe in sorted(data):
        left, stuck = [], []
        for (probe, pe), runs in sorted(data[recipe].items()):
            line = CEILING[probe] + LEARNED_SHARE * (1 - CEILING[probe])
            for r in runs:
                if r.config.get("val_every") is None:
                    continue
                off = next((st for st, v in r.curve if v > CEILING[probe] + OFF_PLATEAU), None)
                if r.val is not None and r.val >= line and off is not None:
                    left.append((off, f"`{probe}` {pe} seed {r.seed}"))
                elif off is None:
                    stuck.append(f"`{probe}` {pe} seed {r.seed}")
        if not left and not stuck:
            continue
        latest = max(left) if left else None
        out.append(f"- `{recipe}`: " + (f"the {len(left)} seeds that learned left the plateau (validation more than "
                                        f"{100 * OFF_PLATEAU:.0f} points above the no-PE ceiling) by step "
                                        f"{latest[0]} at the latest ({latest[1]}); " if latest else "")
                   + (f"{len(stuck)} runs never left it within their budget"
                      + (f" ({', '.join(stuck)})" if stuck else "") + "." if stuck else "every run left it."))
    return "\n".join(out) or "No run validated every few steps."


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results/probe-recipe")
    ap.add_argument("--baseline", help="the previous sweep's results (results/probe-sweep-200-steps): its runs of the "
                    "same cells and seeds as the recipe 'sweep-200-steps'")
    ap.add_argument("--report", help="write the report here instead of printing it")
    args = ap.parse_args(argv)
    root = Path(args.results)
    if not root.is_dir():
        print(f"probe_recipe: results directory not found: {root}", file=sys.stderr)
        return 2
    data = load(root, Path(args.baseline) if args.baseline else None)
    emit(fill(REPORT, recipes="\n".join(describe(r, data[r]) for r in sorted(data)) or "No complete runs.",
              cells=cell_table(data), comparison=comparison(data), plateau=plateau(data),
              reproduced=reproduced(root.resolve().parent / "rerun_check.json", shown(root),
                                    sorted(p.name for p in root.iterdir() if p.is_dir()))), args.report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

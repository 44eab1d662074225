"""The parts of the probe sweep's report that are not verdicts (benchmarks/probe_findings.py uses them): the
sweep's protocol read from its runs and time file, the figure of each PE's share of seeds learned by step, the
what-each-PE-learned matrix, the not-learned list, the ALiBi study's readout finding
(``benchmarks/alibi_findings.py``), and the report's prose template (:data:`REPORT`).
"""
from __future__ import annotations

import io
import json
import math
import os
from datetime import datetime
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from pebench.core.io import atomic_write_bytes
from pebench.leaderboard import collect_results
from pebench.leaderboard.render import pe_sort_key

from .alibi_findings import readout_finding


def alibi_readout(diagnosis: Path) -> str:
    """The ALiBi study's readout finding (``benchmarks/alibi_findings.py``), or that it has none."""
    d = json.loads(diagnosis.read_text(encoding="utf-8")) if diagnosis.is_file() else {}
    found = readout_finding(d)
    if not found:
        return "That study has no readout measurements; it did not identify the mechanism."
    text = found[0].split(".** ", 1)[1]
    return "From that study's readout runs: " + text[0].lower() + text[1:]


def protocol(results: str, time_file: Path, probes) -> dict[str, str]:
    """The sweep's recipe, commits, run count and wall time, read from the runs and the time file."""
    runs = [r for r in collect_results(results)[0] if r.dataset in probes]
    done = [r for r in runs if r.complete]
    keys = ("lr", "lr_schedule", "warmup_epochs", "epochs", "batch_size", "val_every", "stop_at", "give_up",
            "eval_checkpoint")
    seen = {k: sorted({str(r.raw.get("config", {}).get(k)) for r in done}) for k in keys}
    recipe = ", ".join(f"`{k}` {' / '.join(v)}" for k, v in seen.items())
    commits = sorted({r.raw.get("git_sha", "?")[:7] for r in done})
    lines = time_file.read_text(encoding="utf-8").splitlines() if time_file.is_file() else []
    stamps = [(ln.split()[0], ln.split()[1]) for ln in lines if ln.split()[:1] in (["start"], ["end"])]
    total, start = 0.0, None
    for what, when in stamps:
        t = datetime.fromisoformat(when.replace("Z", "+00:00"))
        if what == "start":
            start = t
        elif start is not None:
            total, start = total + (t - start).total_seconds(), None
    wall = (f"**{total / 60:.1f} min** of wall time ({'; '.join(' '.join(x) for x in stamps)}, from "
            f"`{time_file.name}`)") if total else "not recorded"
    return {"recipe": recipe, "commits": ", ".join(f"`{c}`" for c in commits), "runs": str(len(done)),
            "incomplete": str(len(runs) - len(done)), "wall": wall}


def learning_png(data: dict, path: str, min_learned: float) -> None:
    """Per probe, the share of each PE's seeds that had learned the probe by each step (the empirical
    distribution of steps to learn; a seed that never learned never counts), up to the largest budget."""
    probes = [p for p in data if any(c.steps_to_learn for c in data[p].values())]
    if not probes:
        return
    cols = min(3, len(probes))
    rows = math.ceil(len(probes) / cols)
    fig = Figure(figsize=(5 * cols, 3.6 * rows))
    FigureCanvasAgg(fig)
    budget = max((v for cells in data.values() for c in cells.values() for v in c.steps.values() if v), default=0)
    styles = ["-", "--", ":"]
    for i, probe in enumerate(probes):
        ax = fig.add_subplot(rows, cols, i + 1)
        for j, pe in enumerate(sorted(data[probe], key=pe_sort_key)):
            c = data[probe][pe]
            steps = sorted(v for v in c.steps_to_learn.values() if v is not None)
            xs = [0] + [x for s in steps for x in (s, s)] + [budget]
            ys = [0.0] + [y for k in range(len(steps)) for y in (k / c.n, (k + 1) / c.n)] + [len(steps) / c.n]
            ax.plot(xs, ys, styles[j // 10 % 3], label=pe, lw=1.4)
        ax.axhline(min_learned, color="grey", lw=0.6)
        ax.set(title=f"{probe} (learned: val ≥ {100 * next(iter(data[probe].values())).threshold:.1f} %)",
               xlabel="optimizer step", ylabel="share of seeds learned", xlim=(0, budget), ylim=(-0.03, 1.03))
    fig.axes[0].legend(fontsize=7, ncol=2, loc="lower right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    atomic_write_bytes(os.fspath(path), buf.getvalue())


def learned_matrix(data, probes: list[str], learned: dict[str, tuple[int, int]]) -> list[str]:
    """PE x probe (``data``: probe -> PE -> probe_findings.Cell): the seeds that learned it (k/n, bold when the
    PE counts as having learned it), the median steps to learn over them, and ``learned`` (PE -> probes
    learned, probes run: probe_findings.probes_learned)."""
    pes = sorted({pe for p in probes for pe in data[p]}, key=pe_sort_key)
    out = ["#### What each PE learned", "",
           "Seeds that learned each probe (**bold**: at least 4 of 5, the PE counts as having learned it) and, "
           "in brackets, the median steps to learn over those seeds; *cannot represent (<symmetry>)*: an exact "
           "symmetry of the PE gives test scenes of different labels the same logits (declared and checked in "
           "float64 on the untrained model, `pebench.analysis.probe_capacity`), so the cell is not a failure to "
           "learn and is left out of *probes learned* (learned of those it can represent):", "",
           "| PE | " + " | ".join(f"`{p}`" for p in probes) + " | probes learned |",
           "|---|" + "---:|" * (len(probes) + 1)]
    for pe in pes:
        row = []
        for p in probes:
            c = data[p].get(pe)
            if c is None:
                row.append("—")
                continue
            k = f"{c.learned_seeds}/{c.n}"
            if c.cannot:  # out of the PE's reach by an exact symmetry: not a failure to learn
                row.append(f"{c.cannot} ({k})")
                continue
            row.append((f"**{k}**" if c.learned else k) + (f" ({c.median_steps_to_learn()})" if c.learned_seeds
                                                          and c.steps_to_learn else ""))
        k, n = learned.get(pe, (0, 0))
        out.append(f"| {pe} | " + " | ".join(row) + f" | {k} of {n} |")
    return out + [""]


def not_learned_table(data) -> list[str]:
    """Per probe, the PEs that did not learn it in at least 4 of 5 seeds (count of seeds that did, and the
    steps the others trained when the runs recorded them), then those that cannot represent its label."""
    out = ["#### Not learned (fewer than 4 of 5 seeds learned the probe; the PE can represent its label)", ""]
    cannot = []
    for probe, cells in data.items():
        ordered = sorted(cells.items(), key=lambda kv: pe_sort_key(kv[0]))
        miss = [f"{pe} ({c.learned_seeds}/{c.n}" + (f"; {c.budget()})" if c.budget() else ")")
                for pe, c in ordered if not c.learned and not c.cannot]
        out.append(f"- `{probe}`: " + (", ".join(miss) if miss else "every PE that can represent its label learned it "
                                       "in at least 4 of 5 seeds") + ".")
        cannot += [f"- `{probe}`, {pe}: {c.cannot} ({c.learned_seeds}/{c.n} seeds above the learned line)"
                   for pe, c in ordered if c.cannot]
    if cannot:
        out += ["", "Cannot represent (an exact symmetry of the PE; not counted as not learned):", ""] + cannot
    return out + [""]


#: results/embedded/REPORT.md; @@FINDINGS@@ is filled in by :func:`findings`, the rest by :func:`protocol`
REPORT = """\
# Probe sweep: one PE property per probe (`results/embedded/probe-*`)

Written by `python -m benchmarks.probe_findings --results results/embedded --report
results/embedded/REPORT.md --png results/embedded/probe_learning.png` from the committed runs and
`results/probe_sweep_time.txt` (`tests/studies/test_leaderboard_committed.py` checks that the report
regenerates byte for byte). The probes
themselves (what each one asks, its no-PE ceiling, its options) are described in
[`docs/probes.md`](../../docs/probes.md). This folder also holds the `shapes` sweep
([`shapes/REPORT.md`](shapes/REPORT.md)) and the detection sweep (`benchmarks/detection_sweep.sh`,
tables in the leaderboard); the SSDC and EED studies' claims tested on the `probe-anchoring` runs
are in [`probe-anchoring/REPORT.md`](probe-anchoring/REPORT.md).

## How the sweep was run

`benchmarks/probe_sweep.sh` (commit @@COMMITS@@, `--deterministic`, one thread per run, two runs in
parallel through `bench sweep --preload`): model `vit-probe` (64 wide, 2 blocks, 4 heads), AdamW,
every PE under one recipe, read here from the runs' configurations: @@RECIPE@@. That is the constant
learning rate of the recipe study ([`../probe-recipe/REPORT.md`](../probe-recipe/REPORT.md)), cut to
the sweep's 2.5-hour CPU budget: validation every `val_every` steps; a run stops at the first
validation above `stop_at`, or gives up at the first validation from step STEP of `give_up`
(STEP:ACCURACY) that is not above ACCURACY (the probe's no-PE ceiling + 5 points), else it trains the
whole budget (`epochs` of 100 steps of 64 scenes); the test split and the analyses read the weights of
the best validation (`eval_checkpoint`). Every probe × PE runs with seeds 0–4 (the seed is also the
data seed, so PEs are compared on identical scenes, paired by seed), and the numbers below are the
**test** split (1200 scenes; ±2.9 points at most) beside the in-distribution validation accuracy. The
test split is out of distribution on translation, rotation, decay and extrapolation; on context and
anchoring it is fresh scenes of the training distribution (the tables say which). `none` is not trained on the first five probes: no permutation-invariant model
can beat the exact ceiling, which `tests/datamodules/test_probes.py` checks on the rendered split and on an
untrained model. `probe-anchoring` also trains `none` (content alone gives 50 % there) and
`sincos+rpt`, `rope-axial+rpt`, `pape+rpt` (random permutation of the tokens against their positions
during training), with the geometry and robustness analyses and, for the additive PEs, the α sweep
(see [`probe-anchoring/REPORT.md`](probe-anchoring/REPORT.md)); `probe-extrapolation` runs the
extrapolation analysis on 256 upsampled scenes per size. @@RUNS@@ complete runs (@@INCOMPLETE@@
incomplete) ran from one git worktree, and every `results.json` records its commit. The sweep took
@@WALL@@ on a 2-core machine with 2 workers. The leaderboard of the same runs is
[`LEADERBOARD.md`](../../LEADERBOARD.md) (`bench leaderboard --results results/embedded --reference
rope-axial,none --out LEADERBOARD.md`), with each cell's validation curves in
[`LEADERBOARD_curves.png`](../../LEADERBOARD_curves.png).

@@REPRODUCED@@

Before anything was learned, each probe × PE cell is checked for capacity: a PE whose exact symmetry
gives test scenes of different labels the same logits (declared by the PE and checked in float64 on
the untrained model, `pebench.analysis.probe_capacity`) is reported as *cannot represent
(<symmetry>)*, is not testable, and is left out of the learned counts. A seed has *learned* a probe
when its best validation accuracy is at least halfway from the no-PE ceiling to 100 %, and a PE
counts as having learned the probe when at least 4 of its 5 seeds did (the `learned (seeds)`
column); only then is its test accuracy read as evidence about the property, and only on the seeds
that learned: a selection made after training (post-selection), which each verdict states with its
seed count. The accuracies are those of the best-validation checkpoint, itself the best of several
validations (optimistic for val; the test split is read once, at that checkpoint). *Steps to learn*
is the first validation step at or above that line. A PE that can represent the label but did not
learn it is reported as "learned in k of 5 seeds" with how the others ended (gave up at step N, or
trained all N steps): the measured result under this budget. "Keeps" is a TOST equivalence test of
test − val (paired by seed) inside ±5 points, a margin fixed before these results were read
(`KEEP_MARGIN` in the script says why); "loses" a t-test of test − val against −5 points. Intervals
are 95 % Student-t intervals over seeds. All tests with a p-value form one family, Holm–Bonferroni
at 5 % family-wise, and a verdict other than *inconclusive* needs its adjusted p below 0.05. With 5
seeds per cell every verdict is provisional under the rule of at least 10 seeds per cell.

## Tables and verdicts

![Per probe: the share of each PE's seeds that had learned it by each step](probe_learning.png)

@@FINDINGS@@

## What the verdicts do not cover

The verdicts and their summary above are the report's findings; this report adds no reading of its
own. `probe-parts` is not in the sweep: no PE learned it with the `bench run` recipes tried (see
[`docs/probes.md`](../../docs/probes.md)). Why ALiBi stays at chance on the probes whose label it can
represent is the subject of [`../alibi-study/REPORT.md`](../alibi-study/REPORT.md) (slope scale, learnable slopes, learning
rate and a longer budget, a CLS readout, and a diagnosis of its attention and of where its
output carries the label). @@ALIBI@@ The previous sweep (200 steps with a cosine
decay after a per-PE learning-rate selection, commit `dce1ba0`) is kept in
[`../probe-sweep-200-steps/`](../probe-sweep-200-steps/) as the baseline of the recipe and ALiBi
studies.
"""

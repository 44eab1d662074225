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


def _seed_span(seeds) -> str:
    """``[0, 1, 2, 3, 4]`` -> "0–4"; a gap lists the seeds."""
    seeds = sorted(seeds)
    if seeds and seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(map(str, seeds))


def seeds_by_probe(runs, probes) -> str:
    """The seeds the runs cover: one span when every probe ran the same seeds, else per probe."""
    spans = {p: _seed_span({r.seed for r in runs if r.dataset == p}) for p in probes}
    if len(set(spans.values())) == 1:
        return next(iter(spans.values()))
    return ", ".join(f"{v} (`{p}`)" for p, v in spans.items())


def _wall(stamps: list[tuple[str, str, str]]) -> float:
    """Seconds between each ``start`` and the ``end`` after it (``(what, when, commit)`` stamps)."""
    total, start = 0.0, None
    for what, when, _ in stamps:
        t = datetime.fromisoformat(when.replace("Z", "+00:00"))
        if what == "start":
            start = t
        elif start is not None:
            total, start = total + (t - start).total_seconds(), None
    return total


def protocol(results: str, time_file: Path, probes) -> dict[str, str]:
    """The sweep's runs by the commit they ran at, one markdown bullet each: its probes, seeds, complete and
    incomplete runs, wall time (the time file's start / end pairs whose start line names that commit) and the
    recipe read from the runs' configurations."""
    runs = [r for r in collect_results(results)[0] if r.dataset in probes]
    keys = ("lr", "lr_schedule", "warmup_epochs", "epochs", "batch_size", "val_every", "stop_at", "give_up",
            "eval_checkpoint")
    lines = time_file.read_text(encoding="utf-8").splitlines() if time_file.is_file() else []
    stamps = []  # (start|end, time, commit of the start line; an end belongs to the start before it)
    for ln in lines:
        f = ln.split()
        if f[:1] in (["start"], ["end"]) and len(f) > 1:
            commit = f[f.index("commit") + 1] if "commit" in f[:-1] else (stamps[-1][2] if stamps else "")
            stamps.append((f[0], f[1], commit))
    by_commit: dict[str, list] = {}
    for r in runs:
        by_commit.setdefault((r.raw.get("git_sha") or "?")[:7], []).append(r)
    bullets = []
    def first_stamp(commit: str) -> int:  # the sweeps in the order the time file records them
        return next((i for i, st in enumerate(stamps) if st[2] and (st[2].startswith(commit)
                                                                    or commit.startswith(st[2]))), len(stamps))
    for commit, rs in sorted(by_commit.items(), key=lambda kv: (first_stamp(kv[0]), kv[0])):
        done = [r for r in rs if r.complete]
        order = [p for p in probes if any(r.dataset == p for r in rs)]
        seen = {k: sorted({str(r.raw.get("config", {}).get(k)) for r in done}) for k in keys}
        mine = [st for st in stamps if st[2] and (st[2].startswith(commit) or commit.startswith(st[2]))]
        total = _wall(mine)
        wall = (f"**{total / 60:.1f} min** of wall time ({'; '.join(f'{w} {t}' for w, t, _ in mine)}, from "
                f"`{time_file.name}`)") if total else "wall time not recorded"
        bullets.append(
            f"- commit `{commit}`: " + ", ".join(f"`{p}`" for p in order)
            + "; seeds " + seeds_by_probe(rs, order) + f"; {len(done)} complete runs ({len(rs) - len(done)} "
            f"incomplete), from one git worktree at that commit; {wall}; recipe: "
            + ", ".join(f"`{k}` {' / '.join(v)}" for k, v in seen.items()) + ".")
    return {"sweeps": "\n".join(bullets) if bullets else "- no runs"}


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
    """PE x probe (``data``: probe -> PE -> probe_cells.Cell): the seeds that learned it (k/n, bold when the
    PE counts as having learned it), the median steps to learn over them, and ``learned`` (PE -> probes
    learned, probes run: probe_findings.probes_learned)."""
    pes = sorted({pe for p in probes for pe in data[p]}, key=pe_sort_key)
    out = ["#### What each PE learned", "",
           "Seeds that learned each probe (**bold**: at least 80 % of them, the PE counts as having learned it) and, "
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
    """Per probe, the PEs that did not learn it in at least 80 % of their seeds (count of seeds that did, and the
    steps the others trained when the runs recorded them), then those that cannot represent its label."""
    out = ["#### Not learned (fewer than 80 % of the seeds learned the probe; the PE can represent its label)", ""]
    cannot = []
    for probe, cells in data.items():
        ordered = sorted(cells.items(), key=lambda kv: pe_sort_key(kv[0]))
        miss = [f"{pe} ({c.learned_seeds}/{c.n}" + (f"; {c.budget()})" if c.budget() else ")")
                for pe, c in ordered if not c.learned and not c.cannot]
        out.append(f"- `{probe}`: " + (", ".join(miss) if miss else "every PE that can represent its label learned it "
                                       "in at least 80 % of its seeds") + ".")
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
([`shapes/REPORT.md`](shapes/REPORT.md)) and the detection study (`bench study run detection`,
[`DETECTION_REPORT.md`](DETECTION_REPORT.md)); the SSDC and EED studies' claims tested on the `probe-anchoring` runs
are in [`probe-anchoring/REPORT.md`](probe-anchoring/REPORT.md).

## How the sweep was run

`benchmarks/probe_sweep.sh` (`--deterministic`, one thread per run, two runs in parallel through `bench sweep
--preload` on a 2-core machine): model `vit-probe` (64 wide, 2 blocks, 4 heads), AdamW, every PE under one recipe. The runs by the
commit they ran at, with the recipe read from their configurations:

@@SWEEPS@@

The recipe is the constant learning rate of the recipe study
([`../probe-recipe/REPORT.md`](../probe-recipe/REPORT.md)), cut to the sweep's CPU budget: validation every
`val_every` steps; a run stops at the first validation above `stop_at`, or, where `give_up` is set
(STEP:ACCURACY), gives up at the first validation from step STEP that is not above ACCURACY (the probe's no-PE
ceiling + 5 points), else it trains the whole budget (`epochs` of 100 steps of 64 scenes); the test split and
the analyses read the weights of the best validation (`eval_checkpoint`). The seed is also the data seed, so
PEs are compared on identical scenes, paired by seed, and the numbers below are the **test** split (1200
scenes; ±2.9 points at most) beside the in-distribution validation accuracy. The test split is out of
distribution on translation, rotation, decay and extrapolation (canvas and set); on context and the two
anchoring probes it is fresh scenes of the training distribution (the tables say which). The set probes
(`probe-set-*`, [`docs/probes.md`](../../docs/probes.md)) give a scene as the set of its glyph tokens at their
coordinates, without a canvas, and test a scene's shifted twin; they run every PE that applies to tokens
without a grid (not rpb) and no analysis. `none` is trained only on `probe-anchoring`: on every other probe no
permutation-invariant model can beat the exact ceiling, which `tests/datamodules/test_probes.py` checks on the
rendered split and on an untrained model. `probe-anchoring` also trains `sincos+rpt`, `rope-axial+rpt`,
`pape+rpt` (random permutation of the tokens against their positions during training), with the geometry and
robustness analyses and, for the additive PEs, the α sweep (see
[`probe-anchoring/REPORT.md`](probe-anchoring/REPORT.md)); `probe-extrapolation` runs the extrapolation
analysis on 256 upsampled scenes per size. Every `results.json` records its commit. The leaderboard of the
same runs is [`LEADERBOARD.md`](../../LEADERBOARD.md) (`bench leaderboard --results results/embedded
--reference rope-axial,none --out LEADERBOARD.md`), with each cell's validation curves in
[`LEADERBOARD_curves.png`](../../LEADERBOARD_curves.png).

@@REPRODUCED@@

Before anything was learned, each probe × PE cell is checked for capacity: a PE whose exact symmetry
gives test scenes of different labels the same logits (declared by the PE and checked in float64 on
the untrained model, `pebench.analysis.probe_capacity`) is reported as *cannot represent
(<symmetry>)*, is not testable, and is left out of the learned counts. A seed has *learned* a probe
when its best validation accuracy is at least halfway from the no-PE ceiling to 100 %, and a PE
counts as having learned the probe when at least 80 % of its seeds did (4 of 5, 8 of 10; the `learned (seeds)`
column); only then is its test accuracy read as evidence about the property, and only on the seeds
that learned: a selection made after training (post-selection), which each verdict states with its
seed count. The accuracies are those of the best-validation checkpoint, itself the best of several
validations (optimistic for val; the test split is read once, at that checkpoint). *Steps to learn*
is the first validation step at or above that line. A PE that can represent the label but did not
learn it is reported as "learned in k of n seeds" with how the others ended (gave up at step N, or
trained all N steps): the measured result under this budget. "Keeps" is a TOST equivalence test of
test − val (paired by seed) inside ±5 points, a margin fixed before these results were read
(`KEEP_MARGIN` in the script says why); "loses" a t-test of test − val against −5 points. Intervals
are 95 % Student-t intervals over seeds. All tests with a p-value form one family, Holm–Bonferroni
at 5 % family-wise, and a verdict other than *inconclusive* needs its adjusted p below 0.05. A verdict
that reads fewer than 10 seeds says it is provisional under the rule of at least 10 seeds per cell.

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

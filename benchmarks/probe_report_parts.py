"""The parts of the probe sweep's report that are not verdicts (benchmarks/probe_findings.py uses them): the
sweep's protocol read from its runs and time file, the figure of each PE's share of seeds learned by step, the
what-each-PE-learned matrix, the not-learned list, and the ALiBi study's readout finding
(``benchmarks/alibi_findings.py``).
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

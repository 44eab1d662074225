"""A study's report, written whole from its study file and its runs: protocol, provenance per cell (commits, CPU
models, wall time), convergence, tables with intervals, verdicts with raw and Holm-adjusted p, scope, and what
changed from the previous report. Deterministic: the same files give the same bytes (``bench study check``)."""
from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Sequence

import numpy as np

from pebench.core.io import read_json
from pebench.leaderboard.stats import TestResult, format_p, mean_test
from pebench.leaderboard.text import encodable
from pebench.studies.cells import Cell, plateau_gain
from pebench.studies.claims import ALPHA, MIN_SEEDS, Verdict, cell_plateaued, not_learned
from pebench.studies.plan import sweep_argvs
from pebench.studies.plots import curves_name
from pebench.studies.spec import TESTS, Study

__all__ = ["render_report"]


def _num(v: float | None, percent: bool, signed: bool = False) -> str:
    if v is None or not math.isfinite(v):
        return "—"
    x = 100.0 * v if percent else v
    text = f"{x:+.1f}" if signed and percent else f"{x:.1f}" if percent else f"{x:+.3g}" if signed else f"{x:.3g}"
    if "e" in text:  # 3 significant digits without an exponent: "7.11e-05" reads as two numbers to a reader's eye
        text = ("+" if signed and x >= 0 else "") + np.format_float_positional(x, precision=3, unique=False,
                                                                             fractional=False, trim="-")
    return text.replace("-", "−") if signed else text


def _interval(r: TestResult | None, percent: bool, signed: bool = False) -> str:
    if r is None or r.lo is None or r.hi is None:
        return ""
    return f"[{_num(r.lo, percent, signed)}, {_num(r.hi, percent, signed)}]"


def _safe(s: object) -> str:
    """File-borne text (a commit, a CPU model read from results.json) as an inert table cell: no pipe, no markup."""
    text = " ".join(str(s).split())
    for a, b in (("\\", "\\\\"), ("|", "\\|"), ("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("`", "'"),
                 ("](", "]\\(")):
        text = text.replace(a, b)
    return text


def _source(study: Study) -> str:
    """The study file as the report names it: its path in the repository for a shipped study, else its name."""
    name = Path(study.source).name
    shipped = Path(__file__).resolve().parent / "files" / name
    return f"`bench/studies/files/{name}`" if shipped.is_file() and name == study.source else f"`{name}`"


def _is_fraction(metric: str) -> bool:
    if metric.startswith("alpha-rho:"):
        return False  # a rank correlation, whatever it correlates
    leaf = metric.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
    return leaf.startswith(("acc", "map", "miou", "knn", "linear")) and "loss" not in leaf


def _bounds(metric: str) -> tuple[float, float] | None:
    """The range a metric cannot leave: a fraction [0, 1], a difference of two fractions [-1, 1]."""
    if metric.startswith("alpha-rho:"):
        return (-1.0, 1.0)  # a rank correlation
    if not _is_fraction(metric):
        return None
    return (-1.0, 1.0) if metric.startswith(("drop:", "delta:")) else (0.0, 1.0)


def _cell_label(study: Study, cell: Cell) -> str:
    if cell.arm.startswith("ref:"):  # a reference's cell (read for a correlation, never run by this study)
        return f"{cell.pe} ({cell.arm[4:]}, reference)"
    return f"{cell.arm} / {cell.pe}" if len(study.arms) > 1 else cell.pe


def _protocol(study: Study, cells: dict, results_label: str) -> list[str]:
    cells = {k: c for k, c in cells.items() if not c.arm.startswith("ref:")}  # the study's own cells, no references
    runs = [r for c in cells.values() for r in c.runs]
    arms = "" if len(study.arms) == 1 else " × arms " + ", ".join(
        f"`{a.name}`" + (f" (`{' '.join(a.flags)}`)" if a.flags else "") for a in study.arms)
    other = sum(len(c.other) for c in cells.values())
    missing = sum(len(c.missing) for c in cells.values())
    evaluated = sorted({r.evaluated for r in runs})
    lines = [
        "## Protocol", "",
        f"- Grid: datasets {', '.join(f'`{d}`' for d in study.datasets)} × PEs "
        f"{', '.join(f'`{p}`' for p in study.pes)} × seeds {', '.join(map(str, study.seeds))}{arms}: "
        f"{study.runs_planned} runs planned, **{len(runs)} complete** found"
        + (f", {other} not complete" if other else "") + (f", {missing} missing" if missing else "") + ".",
        f"- Runs: `bench study run {study.name}` runs "
        + ("" if len(study.arms) == 1 else "one sweep per arm, ")
        + "; ".join(f"`bench {shlex.join(argv)}`" for a in study.arms for argv in sweep_argvs(study, a, results_label))
        + ".",
    ]
    lines += [f"- {p}" for p in study.protocol]
    lines += [
        f"- Evaluated weights: {', '.join(evaluated) or 'no runs'}. The independent unit is the seed: intervals "
        f"are 95 % Student-t intervals over seeds (clipped to [0, 100] % for accuracies and mAP), paired claims "
        f"pair the cells' runs by seed. Each family of claims is controlled by Holm–Bonferroni at "
        f"{ALPHA * 100:g} % family-wise; every verdict shows its raw p and its Holm-adjusted p (p_Holm). A test that "
        f"cannot be made (fewer than 2 seeds, zero variance) is *no test*, never a zero p-value; verdicts on fewer than "
        f"{MIN_SEEDS} seeds per cell are provisional.",
        "",
    ]
    return lines


def _provenance(study: Study, cells: dict) -> list[str]:
    lines = ["## Provenance", "", "| cell | dataset | seeds | commit | CPU model | wall time (min, sum) |",
             "|---|---|---|---|---|---:|"]
    commits, cpus = set(), set()
    total = 0.0
    ref_commits: set[str] = set()
    ref_cpus: set[str] = set()
    for cell in cells.values():
        if not cell.runs:
            continue
        if cell.arm.startswith("ref:"):
            ref_commits.update(cell.commits)
            ref_cpus.update(cell.cpus)
        else:
            commits.update(cell.commits)
            cpus.update(cell.cpus)
            total += cell.wall_time_s
        lines.append(f"| {_cell_label(study, cell)} | `{cell.dataset}` | {','.join(map(str, cell.seeds))} | "
                     f"{', '.join(f'`{_safe(c)}`' for c in cell.commits) or '—'} | {_cpu_seeds(cell)} | "
                     f"{cell.wall_time_s / 60:.1f} |")
    lines += ["", f"The runs took {total / 60:.1f} min of wall time in all (the sum over runs; parallel workers "
              f"shorten the elapsed time). "
              + (f"They come from one commit (`{_safe(next(iter(commits)))}`)" if len(commits) == 1 else
                 f"They come from {len(commits)} commits ({', '.join(f'`{_safe(c)}`' for c in sorted(commits))}): "
                 f"a cell may mix code versions")
              + (f" and one CPU model ({_safe(next(iter(cpus)))})." if len(cpus) == 1 else
                 f" and {len(cpus)} CPU models ({', '.join(map(_safe, sorted(cpus)))}); the deterministic pins do not carry "
                 f"across CPU models, so cells made on different ones differ by more than their seeds.")]
    own = [c for c in cells.values() if c.runs and c.pe in study.own_pes and not c.arm.startswith("ref:")]
    if own:
        base = [c for c in cells.values() if c.runs and c.pe not in study.own_pes and not c.arm.startswith("ref:")]
        oc, ocpu = sorted({x for c in own for x in c.commits}), sorted({x for c in own for x in c.cpus})
        bc, bcpu = sorted({x for c in base for x in c.commits}), sorted({x for c in base for x in c.cpus})
        same = oc == bc and ocpu == bcpu and len(oc) == 1 and len(ocpu) == 1
        lines += ["", f"**Your PE against the study's runs:** {', '.join(study.own_pes)} ran at commit(s) "
                  f"{', '.join(f'`{_safe(c)}`' for c in oc)} on {', '.join(map(_safe, ocpu)) or 'an unrecorded CPU'}; "
                  f"the baselines at commit(s) {', '.join(f'`{_safe(c)}`' for c in bc)} on "
                  f"{', '.join(map(_safe, bcpu)) or 'an unrecorded CPU'}. "
                  + ("Both come from one commit and one CPU model." if same else
                     "They differ: a difference between your PE and a baseline includes the code and CPU differences "
                     "(results/thread-spread/REPORT.md measures how far a rerun on other threads moves a cell).")]
    if ref_commits or ref_cpus:
        lines += ["", f"The reference cells (another study's runs, read for the correlations, never run by this one) "
                  f"come from commit(s) {', '.join(f'`{_safe(c)}`' for c in sorted(ref_commits))} and CPU model(s) "
                  f"{', '.join(map(_safe, sorted(ref_cpus)))}, and are not counted in the wall time above."]
    return lines + [""]


def _cpu_seeds(cell: Cell) -> str:
    """The cell's CPU model(s); with several, the seeds each one ran ("AMD EPYC (seeds 0-4); Intel Xeon (5-9)")."""
    cpus = cell.cpus
    if len(cpus) <= 1:
        return _safe(cpus[0]) if cpus else "—"
    return "; ".join(f"{_safe(cpu)} (seeds {_span([r.seed for r in cell.runs if r.cpu == cpu])})" for cpu in cpus)


def _span(seeds: list[int]) -> str:
    """Seeds as ranges: 0-4,7."""
    out, xs = [], sorted(seeds)
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(f"{xs[i]}–{xs[j]}" if j > i else f"{xs[i]}")
        i = j + 1
    return ",".join(out)


def _reruns(study: Study, cells: dict, results_label: str) -> list[str]:
    """One sentence on the study's runs rerun from their ``config.yaml`` (the study file's ``reruns`` records, each
    of a run this study holds and made at the commit the run records); nothing without a ``reruns`` file."""
    if study.reruns is None:
        return []
    try:
        records = read_json(study.reruns)
    except (OSError, ValueError):
        records = None
    if not isinstance(records, list):
        return [f"The rerun records `{_safe(study.reruns)}` cannot be read.", ""]
    ours = {}
    for c in cells.values():
        if c.arm.startswith("ref:"):
            continue
        arm = study.arm(c.arm)
        folder = results_label if arm.out in ("", ".") else f"{results_label}/{arm.out}"
        for r in c.runs:  # a run's path is relative to the study's results folder: the record's, to its arm's
            rel = r.path.removesuffix("/results.json")
            ours[(folder, rel.removeprefix(f"{arm.out}/") if arm.out not in ("", ".") else rel)] = r
    recs = [rec for rec in records if isinstance(rec, dict)
            and (run := ours.get((str(rec.get("results")), str(rec.get("run"))))) is not None
            and run.commit is not None and str(rec.get("commit", "")) == run.commit[:len(str(rec.get("commit", "")))]]
    if not recs:
        return [f"None of these runs has a rerun record in `{_safe(study.reruns)}`.", ""]
    same = sum(rec.get("status") == "identical" for rec in recs)
    at = sorted({str(rec.get("rerun_commit", "?")) for rec in recs})
    other = [rec for rec in recs if rec.get("cpu_model") and rec.get("rerun_cpu_model")
             and rec["cpu_model"] != rec["rerun_cpu_model"]]
    worst = max((rec for rec in recs if rec.get("status") == "differs"),
                key=lambda rec: float(rec.get("max_abs_diff") or 0.0), default=None)
    return [f"**Reruns:** {len(recs)} of these runs were rerun from their `config.yaml` in fresh processes, at "
            f"commit(s) {', '.join(f'`{_safe(c)}`' for c in at)} (`{_safe(study.reruns)}`): **{same} of {len(recs)} "
            f"gave identical metrics**"
            + (f"; the largest difference was {float(worst.get('max_abs_diff') or 0):.3g} in "
               f"`{_safe(worst.get('metric'))}`" if worst else "")
            + (f"; {len(other)} reran on another CPU model than their run's" if other else "") + ".", ""]


def _convergence(study: Study, cells: dict) -> list[str]:
    if study.plateau_metric is None or study.plateau_band is None:
        return ["## Convergence", "", "The study file states no plateau band: the report says nothing about "
                "whether training converged.", ""]
    percent = _is_fraction(study.plateau_metric)
    unit = " (points)" if percent else ""
    lines = ["## Convergence", "",
             f"A run plateaued when `{study.plateau_metric}` gained at most {_num(study.plateau_band, percent)}"
             f"{' points' if percent else ''} over the last fifth of training (its last validation against the last "
             f"one at or before 80 % of the steps, from the run's `metrics.csv`).", "",
             f"| cell | dataset | steps | plateaued seeds | gain over the last fifth{unit}, per seed |", "|---|---|---:|---|---|"]
    done = total = 0
    for cell in cells.values():
        if not cell.runs or cell.arm.startswith("ref:"):
            continue
        gains = [plateau_gain(r.curve) for r in cell.runs]
        steps = sorted({r.curve[-1][0] for r in cell.runs if r.curve})
        ok = [r.stop == "reached" or g is not None and g <= study.plateau_band for r, g in zip(cell.runs, gains)]
        reached = sum(r.stop == "reached" for r in cell.runs)
        verdict = cell_plateaued(cell, study.plateau_band)
        total += 1
        done += bool(verdict)
        lines.append(f"| {_cell_label(study, cell)} | `{cell.dataset}` | {', '.join(map(str, steps)) or '—'} | "
                     f"{sum(ok)} of {len(gains)}" + (f" ({reached} reached the target)" if reached else "") + " | "
                     f"{', '.join(_num(g, percent, signed=True) for g in gains)} |")
    rule = study.learned
    if rule is not None:
        dull = not_learned(study, [c for c in cells.values() if c.runs and not c.arm.startswith("ref:")
                                   and study.cannot(c.dataset, c.pe) is None])
        what = (f"`{rule.metric}` ≥ {_num(rule.above, _is_fraction(rule.metric))}"
                f"{' %' if _is_fraction(rule.metric) else ''}" if rule.above is not None else
                f"`{rule.metric}` at least {rule.above_bound:g} of the way from the dataset's exact no-PE bound to 100 %")
        learned_line = (f"A cell *learned* when at least {rule.share:.0%} of its seeds reached {what}: "
                        + ("every cell did." if not dull else "not learned: " + ", ".join(
                            f"{_cell_label(study, c)} on `{c.dataset}`" for c in dull)
                           + ". Nothing is said about a cell that did not learn: its claims are *not testable*."))
    else:
        learned_line = ""
    lines += ["", f"![{_safe(study.plateau_metric)} during training, per PE: mean over seeds, range shaded]"
                  f"({curves_name(study.report)})"]
    lines += ["", f"**{done} of {total} cells plateaued** (every seed)."
              + ("" if done == total else " Where a cell did not plateau, its comparisons rank learning at the "
                 "steps trained, not converged models: the verdicts that read such a cell say so."), ""]
    if learned_line:
        lines += [learned_line, ""]
    return lines


def _learned_table(study: Study, cells: dict) -> list[str]:
    """Per PE and dataset: how many seeds learned (bold: the cell learned), the median steps to learn over them (the
    first validation at or above the threshold), or *cannot represent (<symmetry>)*; one table per arm."""
    rule = study.learned
    if rule is None or len(study.datasets) < 2:
        return []
    lines = ["## What each cell learned", "",
             f"Seeds that learned ({rule.describe()} marks a learned cell, **bold**) and, in brackets, the median "
             f"steps to learn over them (the first validation at or above the threshold)"
             + ("; *cannot represent (<symmetry>)*: an exact symmetry of the PE gives inputs of different labels the "
                "same logits " + (f"(the study's capacity check, `{_safe(study.capacity_checker)}`)"
                                  if study.capacity_checker else "")
                + ", so the cell is no failure to learn and is left out of the count"
                if study.capacity_checker or study.cannot_represent else "")
             + "; —: not in the grid.", ""]
    for arm in study.arms:
        if len(study.arms) > 1:
            lines += [f"Arm `{arm.name}`:", ""]
        lines += ["| PE | " + " | ".join(f"`{d}`" for d in study.datasets) + " | learned |",
                  "|---|" + "---:|" * (len(study.datasets) + 1)]
        for pe in study.pes:
            row, learned, can = [pe], 0, 0
            for d in study.datasets:
                cell = cells.get((arm.name, d, pe))
                if cell is None or not cell.runs:
                    row.append("—")
                    continue
                seeds = cell.learned_seeds(rule)
                text = f"{len(seeds)}/{len(cell.runs)}"
                sym = study.cannot(d, pe)
                if sym is not None:
                    row.append(f"cannot represent ({_safe(sym)}) ({text})")
                    continue
                can += 1
                ok = cell.learned_by(rule)
                learned += ok
                steps = [st for r in cell.runs if r.seed in seeds
                         and (st := r.steps_to(rule.threshold(r.no_pe_bound) or math.inf)) is not None]
                med = f" ({_median(steps):.0f})" if steps else ""
                row.append((f"**{text}**" if ok else text) + med)
            lines.append("| " + " | ".join(row) + f" | {learned} of {can} |")
        lines.append("")
    return lines


def _median(v: list[int]) -> float:
    x = sorted(v)
    n = len(x)
    return float(x[n // 2]) if n % 2 else (x[n // 2 - 1] + x[n // 2]) / 2.0


def _tables(study: Study, cells: dict) -> list[str]:
    lines = ["## Results", ""]
    for dataset in study.datasets:
        group = [c for c in cells.values() if c.dataset == dataset and c.runs]
        if not group:
            continue
        resolutions: list[str] = []
        if study.extrapolation:
            for c in group:
                for r in c.runs:
                    resolutions += [k for k in r.extrapolation if k not in resolutions]
        lines += [f"### `{dataset}`", ""]
        head = ["PE" if len(study.arms) == 1 else "arm / PE", "seeds"]
        head += [f"{m}{' %' if study.percent and _is_fraction(m) else ''} [95 % t-CI]" for m in study.metrics]
        ext_pct = " %" if study.percent and study.extrapolation and _is_fraction(study.extrapolation) else ""
        head += [f"{study.extrapolation}{ext_pct} at {res} (mean)" for res in resolutions]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---|" * len(study.metrics)
                  + "---:|" * len(resolutions)]
        for c in group:
            row = [_cell_label(study, c), ",".join(map(str, c.seeds))]
            for m in study.metrics:
                vals = list(c.values(m).values())
                pct = study.percent and _is_fraction(m)
                r = mean_test(vals, bounds=_bounds(m)) if len(vals) >= 1 else None
                row.append(f"{_num(r.estimate if r else None, pct)} {_interval(r, pct)}".strip() if vals else "—")
            for res in resolutions:
                vals = [run.extrapolation[res][study.extrapolation] for run in c.runs
                        if res in run.extrapolation and study.extrapolation in run.extrapolation[res]]
                pct = study.percent and _is_fraction(study.extrapolation)
                row.append(_num(math.fsum(vals) / len(vals), pct) if vals else "—")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        lines += _layer_table(study, group)
    return lines


def _layer_table(study: Study, group: list[Cell]) -> list[str]:
    """Per-layer lists (``table.layers``: geometry names, or ``checkpoint:WHICH:NAME``): per PE, each list's mean over
    seeds, layer by layer (``a / b / c``)."""
    if not study.layers:
        return []
    lines = ["Per layer (means over seeds, first layer first):", "",
             "| " + " | ".join(["PE" if len(study.arms) == 1 else "arm / PE", *study.layers]) + " |",
             "|---|" + "---|" * len(study.layers)]
    for c in group:
        row = [_cell_label(study, c)]
        for key in study.layers:
            lists = [r.layers(key) for r in c.runs if r.layers(key)]
            depth = min((len(x) for x in lists), default=0)
            row.append(" / ".join(f"{math.fsum(x[i] for x in lists) / len(lists):.2f}" for i in range(depth)) or "—")
        lines.append("| " + " | ".join(row) + " |")
    return lines + [""]


def _compared(c) -> str:
    """What a paired or equivalence claim's difference is: the metric, or ``a's metric − b's`` of one cell, or one
    metric on two datasets."""
    if c.a is not None and c.b is not None and (c.a.dataset or c.dataset) != (c.b.dataset or c.dataset):
        return f"{c.metric} on `{c.a.dataset or c.dataset}` − on `{c.b.dataset or c.dataset}`"
    if c.b_metric and c.b_metric != c.metric and c.a is not None and c.b is not None and c.a.pe == c.b.pe:
        return f"{c.metric} − {c.b_metric}"
    if c.b_metric and c.b_metric != c.metric:
        return f"{c.metric} (a) − {c.b_metric} (b)"
    return str(c.metric)


def _verdict_line(study: Study, v: Verdict) -> str:
    c, r = v.claim, v.result
    if c.test == "not-informative":
        return f"- {c.sentence}: **not informative** ({c.reason})."
    pct = study.percent and c.metric is not None and _is_fraction(c.metric)
    if r is None:
        return f"- {c.sentence}: **{v.word}**" + (f" ({'; '.join(v.notes)})." if v.notes else ".")
    if c.test == "correlation":
        over = f"{r.n} PEs" + (" whose cells learned on both sides" if c.learned_only else "")
        rho = f"{r.estimate:+.2f}" if math.isfinite(r.estimate) else "undefined"
        est = f"Spearman ρ = {rho} over {over}, 95 % CI [{r.lo:+.2f}, {r.hi:+.2f}]" \
            if r.lo is not None and r.hi is not None else f"Spearman ρ = {rho} over {over}"
    elif c.test == "equivalence" and c.b is None:
        est = (f"{c.metric} − {_num(c.null or 0.0, pct)} {_num(r.estimate, pct, signed=True)}"
               f"{' points' if pct else ''}, {100 * r.level:g} % t-CI {_interval(r, pct, signed=True)} against "
               f"±{_num(c.margin, pct)}")
    elif c.test == "equivalence":
        est = (f"{_compared(c)} {_num(r.estimate, pct, signed=True)}{' points' if pct else ''}, "
               f"{100 * r.level:g} % t-CI {_interval(r, pct, signed=True)} against ±{_num(c.margin, pct)}")
    elif c.test == "mean":
        unit = " %" if pct else ""
        what = f"{c.metric} {_num(r.estimate, pct)}{unit} against {_num(c.null or 0.0, pct)}{unit}"
        est = f"{what}, 95 % t-CI {_interval(r, pct)}" if r.lo is not None else what
    else:
        what = f"{_compared(c)} {_num(r.estimate, pct, signed=True)}{' points' if pct else ''}"
        if c.null is not None:
            what += f" against {_num(c.null, pct, signed=True)}"
        est = f"{what}, 95 % t-CI {_interval(r, pct, signed=True)}" if r.lo is not None else what
    parts = [est, f"{r.procedure} {format_p(r.p, r.p_floor)}"]
    if r.tested:
        parts.append(f"p_Holm {format_p(v.p_holm).removeprefix('p ')}")
    if v.seeds:
        parts.append(f"seeds {','.join(map(str, v.seeds))}")
    parts += list(v.notes)
    return f"- {c.sentence}: **{v.word}** ({'; '.join(parts)})."


def _verdicts(study: Study, verdicts: Sequence[Verdict]) -> list[str]:
    if not verdicts:
        return []
    lines = ["## Verdicts", ""]
    for family in study.families:
        members = [v for v in verdicts if v.claim.family == family and v.claim.test != "not-informative"]
        tested = sum(1 for v in members if v.result is not None and v.result.tested)
        lines += [f"Family `{family}`: {tested} test{'s' if tested != 1 else ''} (the claims below that could be "
                  f"tested), Holm–Bonferroni at {ALPHA * 100:g} % family-wise.", ""]
        lines += [_verdict_line(study, v) for v in members] + [""]
    rest = [v for v in verdicts if v.claim.test == "not-informative"]
    if rest:
        lines += ["Claims the design already guarantees (reported, not tested):", ""]
        lines += [_verdict_line(study, v) for v in rest] + [""]
    lines += ["Tests: " + "; ".join(f"*{k}*: {TESTS[k]}" for k in dict.fromkeys(v.claim.test for v in verdicts))
              + ".", ""]
    return lines


def render_report(study: Study, cells: dict[tuple[str, str, str], Cell], verdicts: Sequence[Verdict],
                  problems: Sequence[str], results_label: str) -> str:
    """The report's markdown (``results_label``: the results folder as the report names it, no machine path)."""
    lines = [f"# {study.title}", "",
             f"Written by `bench study report {study.name}` from the study file "
             f"{_source(study)} and the runs under `{results_label}`; `bench study check "
             f"{study.name}` regenerates it byte for byte. Nothing in it is written by hand.", "",
             "## Question", "", study.question, ""]
    lines += _protocol(study, cells, results_label)
    lines += _provenance(study, cells)
    lines += _reruns(study, cells, results_label)
    lines += _convergence(study, cells)
    lines += _learned_table(study, cells)
    lines += _tables(study, cells)
    lines += _verdicts(study, verdicts)
    if study.scope:
        lines += ["## Scope", ""] + [f"- {s}" for s in study.scope] + [""]
    if study.notes:
        lines += ["## Notes", "", "The study file's own text: measurements from runs outside this study's folder are "
                  "quoted there, not recomputed by this report.", ""]
        for title, text in study.notes:
            lines += [f"### {title}", "", text, ""]
    if study.changes:
        lines += ["## Changed from the previous report", ""] + [f"- {s}" for s in study.changes] + [""]
    if problems:
        lines += ["## Problems", ""] + [f"- {p}" for p in problems] + [""]
    return encodable("\n".join(lines).rstrip("\n") + "\n")

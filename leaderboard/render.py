"""Render collected runs as a deterministic markdown leaderboard (docs/architecture.md §5).

Output depends only on the records and problem lines given (no timestamps, no dict-order or
filesystem-order dependence), so regenerating from the same result files gives identical bytes.

Layout: a header naming the command that generated it; an overview (:mod:`.overview`): one matrix of PE
variants × datasets, each cell the primary metric's mean over seeds with its seed count, marked ``*`` as the
section marks the row's Δ (or as the reference row), its column headers linking to the sections; per dataset
(sorted) one table with rows
(model, PE or variant) sorted by model, then the canonical PE order (:data:`CANONICAL_PE_ORDER`,
unknown PEs alphabetically after, variants such as ``ape+rpt`` right after their base PE); then
an "Incomplete runs" and a "Problems" section when there are any.

Cell conventions (also printed in the header):

* metrics: mean ± sample standard deviation (ddof=1) over seeds; the ± part is shown only when
  n ≥ 2 (a single seed has no spread). When a metric is missing from some seeds the cell
  says ``(n=k)``.
* accuracy-like metrics (``acc*``, ``mean_class_acc``, ``top<k>``, ``miou``, ``oacc``, ``macc``, ``map*``, ``f1``, ``precision``,
  ``recall``; stored as fractions in [0, 1]) are printed ×100 with 1 decimal; other metrics with
  4 decimals.
* extrapolation: mean acc1 (%) over seeds at each resolution any run of the dataset reports;
  geometry: EED% of the layer with the lowest EED (1 decimal), peak SSDC_RPI over layers and SSDC
  of the last layer (3 decimals); fragility FS per shift (3 decimals). These show means only.
* statistics of the primary metric (:mod:`.stats`): ``95% t-CI``, the Student-t interval of the
  mean over seeds; ``Δ vs REF``, the mean per-seed difference to the reference row
  (``--reference``, default ``none``; same model and token kind: ``pape+spiking`` against
  ``none+spiking``; seeds present in both rows) with its paired Student-t 95 % interval, the exact
  sign-flip p-value and the paired t-test p; ``*`` marks a difference whose interval excludes 0
  and whose t-test p < 0.05 (both must agree).
* top-k accuracy columns with k ≥ the number of classes (1 by construction) are left out
  (:func:`trivial_top_k`). A table without the
  reference variant keeps its Δ columns; their cells say so (``no none row``).
* a row never averages runs of different configurations or code versions: runs of one (model,
  PE variant) whose configuration fingerprints differ get one row each, labelled with the
  settings that differ (``ape (epochs=4)``; ``config <fp>`` when the files hold no config), and
  runs made by different commits get one row per commit (``ape @<sha>``). A reference row that
  is split this way is no reference (its Δ cells read ``—``).
* ``—`` marks a value no run of the row reports; ``n/a`` an FS the runs report as undefined
  (clean accuracy within 2 standard errors of chance).
* a probe's section states its exact no-PE ceiling, as ``bench run`` recorded it in
  ``dataset_info.no_pe_bound`` (the first run by path that has one).

Nothing here imports torch or the PE, model and dataset packages.
"""
from __future__ import annotations

import json
import math
import os
import re
from collections import defaultdict
from typing import Any, Callable, Iterable, Mapping, Sequence

from pebench.core.fingerprint import config_differences
from pebench.core.io import atomic_write_text

from .collect import RunRecord, collect_results, finite, to_float
from .overview import Entry, Overview, build_overview, overview_note, section_anchors
from .stats import PairedSummary, paired_differences, paired_summary, sign_flip_p, t_mean_ci
from .text import encodable

__all__ = ["CANONICAL_PE_ORDER", "render_leaderboard", "write_leaderboard", "pe_sort_key", "format_number",
           "natural_sort_key", "mean_std", "reduce_geometry", "last_layer_value", "provenance_tags", "tokens_suffix",
           "overview_markdown"]

CANONICAL_PE_ORDER: tuple[str, ...] = (
    "none", "ape", "sincos", "rope-axial", "rope-mixed", "lookhere", "alibi", "pape", "pape-ri", "liere", "comrope",
    "string",
)
#: Fragility columns always present (image shifts, docs/architecture.md §4); other shift kinds follow sorted.
DEFAULT_SHIFTS: tuple[str, ...] = ("jpeg", "blur")
MISSING = "—"
#: FS reported as undefined (clean accuracy within 2 standard errors of chance)
UNDEFINED = "n/a"

_FRACTION_METRIC = re.compile(r"^(acc|accuracy|top[-_]?\d|miou|oacc|macc|map(?!_images)|f1|precision|recall|mean_class_acc)",
                              re.IGNORECASE)  # map_images: the number of images COCOeval saw (detection)


def pe_sort_key(pe: str, label: str | None = None) -> tuple[int, str, int, str]:
    """Sort key: canonical PEs first in :data:`CANONICAL_PE_ORDER`, then others alphabetically;
    a variant label (e.g. ``ape+rpt``) sorts right after its base PE."""
    label = pe if label is None else label
    if pe in CANONICAL_PE_ORDER:
        base = (CANONICAL_PE_ORDER.index(pe), "")
    else:
        base = (len(CANONICAL_PE_ORDER), pe)
    return (base[0], base[1], 0 if label == pe else 1, label)


def is_fraction_metric(name: str) -> bool:
    """Whether a metric is an accuracy-like fraction in [0, 1] (printed as a percentage)."""
    return bool(_FRACTION_METRIC.match(name.rsplit("/", 1)[-1]))


def natural_sort_key(s: str) -> tuple:
    """Sort key ordering the digit runs of ``s`` by value (``"64x64"`` before ``"128x128"``)."""
    # isdecimal, not isdigit: "²" is a digit int() refuses; a run of over 100 digits (a hostile name) is text
    return tuple((0, int(t), "") if t.isdecimal() and len(t) <= 100 else (1, 0, t) for t in re.split(r"(\d+)", s) if t)


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (``n - 1``; None for one value); ``(nan, None)`` if any is not finite."""
    n = len(values)
    if any(not math.isfinite(v) for v in values):
        return float("nan"), None
    mean = math.fsum(values) / n
    if n < 2:
        return mean, None
    var = math.fsum((v - mean) * (v - mean) for v in values) / (n - 1)  # not ** 2: that raises on overflow
    return mean, math.sqrt(var)


def format_number(x: float, decimals: int) -> str:
    """``x`` with ``decimals`` decimals as every leaderboard cell prints it (``nan``, ``inf``; never ``-0.0``)."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    s = f"{x:.{decimals}f}"
    if float(s) == 0.0:  # no "-0.0"
        s = f"{0.0:.{decimals}f}"
    return s


def _metric_cell(values: list[float | None], n_row: int, scale: float, decimals: int) -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return MISSING
    mean, std = mean_std(vals)
    cell = format_number(mean * scale, decimals)
    if std is not None:
        cell += f" ± {format_number(std * scale, decimals)}"
    if len(vals) < n_row:
        cell += f" (n={len(vals)})"
    return cell


def _mean_cell(values: Iterable[float | None], scale: float, decimals: int) -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return MISSING
    mean, _ = mean_std(vals)
    return format_number(mean * scale, decimals)


def _inert(s: str) -> str:
    """File-borne text made inert in markdown: no raw HTML (``&``, ``<``, ``>`` as entities), no inline link
    (``](`` as ``]\\(``, so ``[x](javascript:...)`` is text), one line. Text pebench writes holds none of these,
    so its bytes are unchanged."""
    s = s.replace("\r", " ").replace("\n", " ")
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("](", "]\\(")


def _pipes(s: str) -> str:
    return s.replace("\\", "\\\\").replace("|", "\\|")


def _escape(s: str) -> str:
    """A table cell: backslashes and pipes escaped, then :func:`_inert`."""
    return _inert(_pipes(s))


def _code(s: str) -> str:
    """``s`` as a code span (where nothing is markup), or as inert text when a backtick would end the span."""
    return f"`{s}`" if "`" not in s and "\n" not in s and "\r" not in s else _inert(s)


def reduce_geometry(run: RunRecord, key: str, fn: Callable[[list[float]], float]) -> float | None:
    """``fn`` (``min``, ``max``) over the finite per-layer values of the run's geometry ``key`` (None: none)."""
    if not run.geometry or key not in run.geometry:
        return None
    vals = finite(run.geometry[key])
    return fn(vals) if vals else None


def last_layer_value(run: RunRecord, key: str) -> float | None:
    """The last layer's value of the run's geometry ``key`` (None when missing or not finite)."""
    if not run.geometry or not run.geometry.get(key):
        return None
    v = run.geometry[key][-1]
    return v if v is not None and math.isfinite(v) else None


def _fs_cell(members: Sequence[RunRecord], shift: str) -> str:
    """Mean FS over the seeds that define it; ``n/a`` when runs report the shift but FS is
    undefined in all of them (clean accuracy within 2 standard errors of chance)."""
    cell = _mean_cell([_fs(r, shift) for r in members], 1.0, 3)
    if cell == MISSING and any(r.robustness and shift in r.robustness and "fs" in r.robustness[shift]
                               for r in members):
        return UNDEFINED
    return cell


def _fs(run: RunRecord, shift: str) -> float | None:
    if not run.robustness or shift not in run.robustness:
        return None
    return run.robustness[shift].get("fs")


def _ci_cell(values: list[float | None], frac: bool) -> str:
    """The t-interval of a primary metric (fractions: clipped to [0, 1] and shown as %)."""
    scale, decimals = (100.0, 1) if frac else (1.0, 4)
    ci = t_mean_ci([v for v in values if v is not None], bounds=(0.0, 1.0) if frac else None)
    return MISSING if ci is None else f"[{format_number(ci[0] * scale, decimals)}, {format_number(ci[1] * scale, decimals)}]"


def _paired(row: dict[int, float | None], ref: dict[int, float | None] | None
            ) -> tuple[list[float], PairedSummary | None]:
    """The per-seed differences of ``row`` to ``ref`` and their :func:`.stats.paired_summary` (None: below 2
    pairs or no reference): what a Δ cell prints, its ``*`` the ``significant`` field."""
    diffs = paired_differences(row, ref) if ref is not None else []
    return diffs, paired_summary(diffs)


def _delta_text(diffs: list[float], res: PairedSummary | None, scale: float, decimals: int) -> str:
    """A Δ cell from :func:`_paired`: mean [interval] p t-p, ``*`` when ``res`` says significant; ``t-p=no test``
    where every seed's difference is the same (zero variance is no test)."""
    if res is None:
        return MISSING
    p = sign_flip_p(diffs)
    sign = "+" if res.mean * scale >= 0.5 * 10 ** -decimals else ""
    pt = "no test" if res.p is None else f"{res.p:.3f}"
    return (f"{sign}{format_number(res.mean * scale, decimals)} [{format_number(res.lo * scale, decimals)}, "
            f"{format_number(res.hi * scale, decimals)}] p={p:.3f} t-p={pt}" + ("*" if res.significant else ""))


def reference_note(reference: str) -> str:
    """``no none row`` / ``no rope-axial or none row``: what the Δ cells of a table without the
    reference variant say."""
    return "no " + " or ".join(reference.split(",")) + " row"


def _short(v: object) -> str:
    text = json.dumps(v, sort_keys=True, separators=(",", ":"), default=str)
    return text if len(text) <= 24 else text[:21] + "..."


def provenance_tags(runs: Sequence[RunRecord], config_defaults: Mapping[str, Any] | None) -> dict[str, str]:
    """run path -> "" or the tag that separates it from runs of the same (model, PE variant) made
    with another configuration (the differing settings; a key one configuration lacks counts as its
    value in ``config_defaults``) or another commit (``@sha``)."""
    rows: dict[tuple, list[RunRecord]] = defaultdict(list)
    for r in runs:
        rows[(r.model, r.pe, r.label)].append(r)
    tags: dict[str, str] = {}
    for members in rows.values():
        configs: dict[str, dict] = {}
        for r in sorted(members, key=lambda r: r.path):
            cfg = r.raw.get("config")
            configs.setdefault(r.fingerprint or "", cfg if isinstance(cfg, dict) else {})
        split_config = len(configs) > 1
        split_code = len({r.git_sha or "" for r in members}) > 1
        keys: list[str] = []
        if split_config and all(configs.values()):
            first, *rest = [configs[fp] for fp in sorted(configs)]
            keys = sorted({k for c in rest for k in config_differences(first, c, config_defaults)} - {"seed"})
        for r in members:
            parts = []
            if split_config:
                cfg = configs[r.fingerprint or ""]
                parts.append("(" + (", ".join(f"{k}={_short(cfg.get(k))}" for k in keys) if keys
                                    else f"config {(r.fingerprint or 'unknown')[:8]}") + ")")
            if split_code:
                parts.append(f"@{(r.git_sha or 'unknown')[:7]}")
            tags[r.path] = " ".join(parts)
    return tags


def tokens_suffix(label: str) -> str:
    """The token-kind suffix of a row label (``"+spiking"`` of ``pape+rpt+spiking``; ``""``)."""
    return "".join(f"+{p}" for p in label.split("+")[1:] if p != "rpt")


def _no_pe_bound(run: RunRecord) -> float | None:
    info = run.raw.get("dataset_info")
    value = info.get("no_pe_bound") if isinstance(info, dict) else None
    return to_float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _ceiling_note(runs: Sequence[RunRecord]) -> str:
    """`` No-PE ceiling ...`` when a run of the dataset recorded one (the probes), else ``""``."""
    value = next((v for v in (_no_pe_bound(r) for r in sorted(runs, key=lambda r: r.path)) if v is not None), None)
    return "" if value is None else (f" No-PE ceiling of the test split (exact: no function of the multiset of "
                                     f"patch contents does better): {100 * value:.1f} %.")


_TOP_K = re.compile(r"^(?:.*/)?acc([2-9]|[1-9]\d+)$")


def trivial_top_k(runs: Sequence[RunRecord]) -> set[str]:
    """The top-k accuracy columns (``acc<k>``, k ≥ 2) with k ≥ the number of classes: such a column is 1 by
    construction (the classification task logs ``acc<min(5, classes)>``, so a 4-class probe has ``acc4``).
    Results do not record the class count, so the column is recognised by that property: every value
    of every run is exactly 1."""
    names = {m for r in runs for m in r.metrics if _TOP_K.match(m)}
    return {m for m in names if all(r.metrics.get(m) in (None, 1.0) for r in runs)
            and any(r.metrics.get(m) is not None for r in runs)}


def _table(runs: list[RunRecord], reference: str | None = None,
           config_defaults: Mapping[str, Any] | None = None, entries: list[Entry] | None = None) -> list[str]:
    """The dataset's table as lines; ``entries``, when given, receives each row as the overview shows it
    (:class:`.overview.Entry`: its mean and its Δ cell's ``*``, from the computation that prints them)."""
    # a row: one (model, PE variant, configuration fingerprint, code version); see provenance_tags
    tags = provenance_tags(runs, config_defaults)
    groups: dict[tuple[str, str, str, str], list[RunRecord]] = defaultdict(list)
    for r in runs:
        groups[(r.model, r.pe, r.label, tags[r.path])].append(r)  # type: ignore[index]
    order = sorted(groups, key=lambda k: (k[0], pe_sort_key(k[1], k[2]), k[3]))

    primaries = sorted({r.primary_metric for r in runs})  # type: ignore[type-var]
    others = sorted({m for r in runs for m in r.metrics} - set(primaries) - trivial_top_k(runs))
    metric_names = primaries + others
    resolutions = sorted({res for r in runs for res in (r.extrapolation or {})}, key=natural_sort_key)
    shifts = list(DEFAULT_SHIFTS) + sorted({s for r in runs for s in (r.robustness or {})} - set(DEFAULT_SHIFTS))

    # the reference row of each model and token kind (paired comparisons), when the table has one:
    # a `pape+spiking` row is compared with `none+spiking`. A comma list of references: the first
    # one this table has (e.g. `rope-axial,none`: the detection tables have no rope-axial row)
    refs: dict[tuple[str, str], tuple[str, str, str, str]] = {}
    for candidate in (reference.split(",") if reference else []):
        refs = {(k[0], tokens_suffix(k[2])): k for k in order
                if k[2] == candidate + tokens_suffix(k[2]) and not k[3]}
        if refs:
            reference = candidate
            break
    header = ["Model", "PE", "n"]
    header += [f"{m} (%)" if is_fraction_metric(m) else m for m in metric_names]
    header += [f"{m} 95% t-CI" for m in primaries]
    header += [f"Δ{m} vs {reference}" for m in primaries] if reference else []
    header += [f"acc1@{res} (%)" for res in resolutions]
    header += ["EED% (min layer)", "SSDC_RPI (peak)", "SSDC (last layer)"]
    header += [f"FS-{s}" for s in shifts]
    align = ["---", "---"] + ["---:"] * (len(header) - 2)

    lines = ["| " + " | ".join(_escape(h) for h in header) + " |", "|" + "|".join(align) + "|"]
    for key in order:
        members = sorted(groups[key], key=lambda r: (r.seed, r.path))
        n = len(members)
        row = [key[0], f"{key[2]} {key[3]}" if key[3] else key[2], str(n)]
        for m in metric_names:
            frac = is_fraction_metric(m)
            row.append(_metric_cell([r.metrics.get(m) for r in members], n, 100.0 if frac else 1.0, 1 if frac else 4))
        for m in primaries:
            frac = is_fraction_metric(m)
            row.append(_ci_cell([r.metrics.get(m) for r in members], frac))
        for _m in (primaries if reference and not refs else []):
            row.append(reference_note(reference))  # type: ignore[arg-type]
        own = sorted({r.primary_metric for r in members})[0]  # type: ignore[type-var]  # the row's (cells.py)
        significant = False
        ref_key = refs.get((key[0], tokens_suffix(key[2])))
        for m in (primaries if refs else []):
            frac = is_fraction_metric(m)
            if ref_key == key:
                row.append("(reference)")
                continue
            ref = {r.seed: r.metrics.get(m) for r in groups[ref_key]} if ref_key else None  # type: ignore[misc]
            paired = _paired({r.seed: r.metrics.get(m) for r in members}, ref)  # type: ignore[misc]
            row.append(_delta_text(*paired, 100.0 if frac else 1.0, 1 if frac else 4))
            if m == own:  # the overview's mark: this very cell's `*`
                significant = paired[1] is not None and paired[1].significant
        if entries is not None:
            frac = is_fraction_metric(own)  # type: ignore[arg-type]
            values = [r.metrics.get(own) for r in members]  # type: ignore[arg-type]
            entries.append(Entry(
                dataset=members[0].dataset, model=key[0], pe=key[1], label=key[2], tag=key[3],  # type: ignore[arg-type]
                metric=own, percent=frac, mean_text=_mean_cell(values, 100.0 if frac else 1.0, 1 if frac else 4),  # type: ignore[arg-type]
                n=sum(v is not None for v in values), significant=bool(significant),
                is_reference=bool(refs) and ref_key == key,
                reference_note=reference_note(reference) if reference and not refs else None))
        for res in resolutions:
            row.append(_mean_cell([(r.extrapolation or {}).get(res) for r in members], 100.0, 1))
        row.append(_mean_cell([reduce_geometry(r, "eed_percent", min) for r in members], 1.0, 1))
        row.append(_mean_cell([reduce_geometry(r, "ssdc_rpi", max) for r in members], 1.0, 3))
        row.append(_mean_cell([last_layer_value(r, "ssdc") for r in members], 1.0, 3))
        for s in shifts:
            row.append(_fs_cell(members, s))
        lines.append("| " + " | ".join(_escape(c) for c in row) + " |")
    return lines


TITLE = "Positional-encoding leaderboard"


def _link_text(s: str) -> str:
    """A string from a file as the text of a markdown link in a table cell: backslashes, pipes and brackets
    escaped, then :func:`_inert`."""
    return _inert(_pipes(s).replace("[", "\\[").replace("]", "\\]"))


def overview_markdown(ov: Overview, title: str = TITLE) -> list[str]:
    """The ``## Overview`` section (:mod:`.overview`) as lines. Its column headers link to the sections as
    reference-style links (``[shapes][ov-12]`` with ``[ov-12]: #shapes`` below the table), so the file still
    holds no inline link; the anchors are GitHub's, counted from the ``# title`` and ``## Overview``."""
    anchors = section_anchors(sorted({d for d, _ in ov.columns}), [title, "Overview"])
    labels = {d: f"ov-{i + 1}" for i, d in enumerate(anchors)}
    titles = [f"[{_link_text(d)}][{labels[d]}]" + (f" · {_escape(m)}" if d in ov.split else "") for d, m in ov.columns]
    lines = ["## Overview", "", "| PE | " + " | ".join(titles) + " |", "|---|" + "---:|" * len(ov.columns)]
    for row in ov.rows:
        cells = [e.text if (e := ov.cells.get((row, col))) else MISSING for col in ov.columns]
        lines.append("| " + " | ".join(_escape(t) for t in [ov.row_label(row), *cells]) + " |")
    lines += ["", overview_note(ov, _code, _inert, str), ""]
    return lines + [f"[{labels[d]}]: #{a}" for d, a in anchors.items()]


def _problem_line(line: str) -> str:
    path, sep, msg = line.partition(": ")
    if sep and "`" not in path and "\n" not in path:
        return f"- `{path}`: {_inert(msg)}"
    return f"- {_inert(line)}"


def smoke_note(n: int) -> str:
    """The header's note on smoke runs left out (``""`` when none: headers stay as they were)."""
    return f", {n} smoke run(s) left out: --include-smoke tabulates them" if n else ""


def render_leaderboard(runs: Sequence[RunRecord], problems: Sequence[str], results_label: str = "DIR",
                       reference: str | None = "none", config_defaults: Mapping[str, Any] | None = None,
                       smoke_left_out: int = 0) -> str:
    """Markdown leaderboard from ``collect_results`` output; deterministic for equal inputs.
    ``smoke_left_out``: smoke runs the caller left out (named in the header when any).

    ``results_label`` is what the header shows after ``--results`` (the CLI passes the directory
    as the user gave it; it is part of the output, so keep it stable for byte-identical output).
    ``config_defaults``: as for :func:`collect_results`; here they decide which settings a row that
    is split by configuration names.
    """
    complete = [r for r in runs if r.complete]
    incomplete = sorted((r for r in runs if not r.complete), key=lambda r: r.path)
    by_dataset: dict[str, list[RunRecord]] = defaultdict(list)
    for r in complete:
        by_dataset[r.dataset].append(r)  # type: ignore[index]

    out: list[str] = [
        f"# {TITLE}",
        "",
        f"Generated by `bench leaderboard --results {results_label}"
        f"{'' if reference == 'none' else f' --reference {reference}'}` from {len(complete)} complete run(s) "
        f"({len(incomplete)} incomplete, {len(problems)} problem(s){smoke_note(smoke_left_out)}). Do not edit by "
        f"hand; regenerate.",
        "",
        "Cells are mean ± sample std (ddof=1) over seeds, the ± part only when n ≥ 2; `(n=k)` when a metric "
        "is missing from some seeds. Accuracies are percentages (1 decimal). Extrapolation (acc1 at each "
        "evaluated resolution), geometry (EED% of the lowest layer, peak SSDC_RPI over layers, SSDC of the last "
        "layer) and fragility FS = 1 − A_shift/A_clean are means over seeds. `—`: not reported.",
        "",
        "Primary-metric statistics: `95% t-CI` is the Student-t interval of the mean over seeds (percentages: "
        "clipped to [0, 100]). "
        f"`Δ vs {reference}` is the mean per-seed difference to the `{reference}` row of the same model"
        f"{' (the first of these rows that a table has)' if reference and ',' in reference else ''}, paired "
        "by seed, with its paired Student-t 95 % interval, the exact two-sided sign-flip p-value (`p`) and the "
        "paired t-test p-value (`t-p`; `no test` where every seed's difference is the same: zero variance is no "
        "test, never p = 0 or 1); `*`: the interval excludes 0 and t-p < 0.05 (the sign-flip test cannot "
        "reach p < 0.05 below 6 seeds). Top-k accuracy columns with k ≥ the number of classes (100 % by "
        "construction) are left out. The peak SSDC_RPI column is a maximum over layers (a selection).",
        "",
        "A row never averages runs of different configurations or code versions: runs of one PE variant whose "
        "configuration fingerprints differ get one row each, labelled with the settings that differ "
        "(`(key=value)`), and runs made by different commits get one row per commit (`@sha`).",
    ]
    if not by_dataset:
        out += ["", "No complete runs found."]
    sections: list[str] = []
    entries: list[Entry] = []
    for dataset in sorted(by_dataset):
        ds_runs = by_dataset[dataset]
        tasks = ", ".join(map(_code, sorted({r.task for r in ds_runs})))  # type: ignore[type-var,arg-type]
        prim = ", ".join(map(_code, sorted({r.primary_metric for r in ds_runs})))  # type: ignore[type-var,arg-type]
        sections += ["", f"## {_inert(dataset)}", "", f"Task: {tasks}. Primary metric: {prim}.{_ceiling_note(ds_runs)}",
                     ""]
        sections += _table(ds_runs, reference, config_defaults, entries)
    if entries:
        out += ["", *overview_markdown(build_overview(entries, reference, pe_sort_key), TITLE)]
    out += sections
    if incomplete:
        out += ["", "## Incomplete runs", "", "Not counted in the tables above.", "",
                "| Path | Status |", "|---|---|"]
        out += [f"| {_code(_pipes(r.path))} | {_escape(r.status)} |" for r in incomplete]
    if problems:
        out += ["", "## Problems", "", "Result files (or sections of them) that were skipped:", ""]
        out += [_problem_line(p) for p in problems]
    return encodable("\n".join(out) + "\n")


def write_leaderboard(results_root: str | os.PathLike, out_path: str | os.PathLike,
                      reference: str | None = "none", config_defaults: Mapping[str, Any] | None = None) -> str:
    """Collect ``results_root``, render, write ``out_path`` atomically; return the markdown.

    Raises ``FileNotFoundError`` when ``results_root`` is not a directory.
    """
    runs, problems = collect_results(results_root, config_defaults)
    text = render_leaderboard(runs, problems, results_label=os.fspath(results_root), reference=reference,
                              config_defaults=config_defaults)
    atomic_write_text(out_path, text)
    return text

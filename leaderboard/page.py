"""The leaderboard as one static HTML page (``bench leaderboard --format html``).

One file, nothing fetched at view time: the CSS and the sorting script are inline, the plots are
inline SVG (:mod:`.svg`). First the overview (:mod:`.overview`): one matrix of PE variants × datasets,
each cell the primary metric's mean over seeds and seed count, marked as its section marks the Δ, linking to
its row below. Per dataset: a table with one row per cell (:mod:`.cells`), every column
sortable by a click on its header; the primary-metric cell shows mean ± std with its 95 % interval
and seed count, the Δ cell the paired difference to the reference with its interval and p-values
(the reference row and significant differences are marked); every other number cell shows its
mean over seeds with the Student-t interval and seed count (each seed's value on hover); each row
links to its runs' ``results.json`` and ``config.yaml`` (relative links, ``link_prefix`` = the results folder as seen
from the page's folder). Below the table: SSDC and EED % per layer and the extrapolation curve,
means over seeds, one line per cell.

Every number cell carries its raw value in ``data-v`` (what sorting uses, equal to the JSON
output's number) and ``data-k`` names the JSON field. The page depends only on the records and the
files beside them, so equal inputs give equal bytes.

Result files may come from anyone (a folder checked before a merge): every string read from one (names,
resolutions, shift kinds, paths, problems) is escaped in text and in attributes (:func:`.text.html_escape`),
and every link is relative and percent-encoded (:func:`.text.relative_href`), so no file can add markup, a
script or a ``javascript:`` link to the page.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from .cells import Cell
from .collect import RunRecord
from .export import generated_by
from .overview import Entry, Overview, build_overview, overview_note
from .render import MISSING, UNDEFINED, format_number, natural_sort_key, pe_sort_key, smoke_note
from .svg import line_chart
from .text import encodable, fragment_href, html_escape, relative_href

__all__ = ["render_page"]

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.5em}h2{margin-top:2em;border-bottom:1px solid #ccc}
table.lb{border-collapse:collapse;font-size:12.5px;margin:.5em 0}
table.lb th,table.lb td{border:1px solid #ddd;padding:3px 6px;text-align:right;vertical-align:top;white-space:nowrap}
table.lb th{background:#f3f3f3;cursor:pointer;user-select:none;position:sticky;top:0}
table.lb th[aria-sort=ascending]::after{content:" \\25B2"}table.lb th[aria-sort=descending]::after{content:" \\25BC"}
table.lb td.t,table.lb th.t{text-align:left}
tr.ref td{background:#fff8d6}
.sub{display:block;color:#666;font-size:11px}
.sig{font-weight:bold;color:#0b4f9c}
.badge{background:#e0b000;color:#fff;border-radius:3px;padding:0 4px;font-size:11px}
td.runs a{margin-right:4px}
figure{display:inline-block;margin:.5em 1em .5em 0}
svg.chart{font:11px system-ui,sans-serif}svg.chart .ct{font-size:13px}
.note{color:#555;max-width:70em}
table.ov{border-collapse:collapse;font-size:12.5px;margin:.5em 0}
table.ov th,table.ov td{border:1px solid #ddd;padding:3px 6px;text-align:right;vertical-align:top;white-space:nowrap}
table.ov th{background:#f3f3f3}table.ov .t{text-align:left}table.ov td.ref{background:#fff8d6}
"""

_JS = """
(function () {
  function isEmpty(v) { return v === null || v === ""; }
  function sortTable(table, col, th) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var keyed = rows.map(function (r) {
      return {r: r, v: r.cells[col].getAttribute("data-v"), i: parseInt(r.getAttribute("data-i"), 10)};
    });
    var numeric = keyed.every(function (k) { return isEmpty(k.v) || !isNaN(parseFloat(k.v)); });
    var cur = th.getAttribute("aria-sort");
    var dir = cur ? (cur === "ascending" ? "descending" : "ascending") : (numeric ? "descending" : "ascending");
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir);
    keyed.sort(function (a, b) {
      var ea = isEmpty(a.v), eb = isEmpty(b.v);
      if (ea !== eb) { return ea ? 1 : -1; }
      var c = 0;
      if (!ea) { c = numeric ? parseFloat(a.v) - parseFloat(b.v) : (a.v < b.v ? -1 : (a.v > b.v ? 1 : 0)); }
      if (dir === "descending") { c = -c; }
      return c || a.i - b.i;
    });
    keyed.forEach(function (k) { body.appendChild(k.r); });
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.lb"), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.addEventListener("click", function () { sortTable(table, col, th); });
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") { sortTable(table, col, th); } });
    });
  });
})();
"""


def _v(x: float | None) -> str:
    """A raw number for ``data-v``: Python's shortest round-trip repr; empty when missing."""
    return repr(x) if x is not None and math.isfinite(x) else ""


def _td(text: str, value: str, key: str = "", cls: str = "", sub: str = "") -> str:
    """A cell: ``text`` and ``sub`` are HTML already (the caller escapes what came from a file); ``value``, ``key``
    (``acc1@<resolution>``, ``fs_<shift>``: file-borne) and ``cls`` are escaped here."""
    attrs = (f' data-v="{html_escape(value)}"' + (f' data-k="{html_escape(key)}"' if key else "")
             + (f' class="{html_escape(cls)}"' if cls else ""))
    return f"<td{attrs}>{text}" + (f'<span class="sub">{sub}</span>' if sub else "") + "</td>"


def _num_td(c: Cell, key: str, scale: float, decimals: int, undefined: bool = False) -> str:
    """A mean over seeds with its Student-t interval and seed count below, each seed's value on hover."""
    col = c.columns[key]
    x = col["mean"]
    if x is None or not math.isfinite(x):
        return _td(UNDEFINED if undefined else MISSING, "", key)
    ci = col["ci95"]
    sub = (f"[{format_number(ci[0] * scale, decimals)}, {format_number(ci[1] * scale, decimals)}] · " if ci else "") + f"n={col['n']}"
    seeds = ", ".join(f"{s}: {format_number(v * scale, decimals) if v is not None else MISSING}"
                      for s, v in zip(c.seeds, col["values"]))
    attrs = (f' data-v="{_v(x)}" data-k="{html_escape(key)}" data-lo="{_v(ci[0]) if ci else ""}"'
             f' data-hi="{_v(ci[1]) if ci else ""}"'
             f' title="per seed: {html_escape(seeds)}"')
    return f'<td{attrs}>{format_number(x * scale, decimals)}<span class="sub">{sub}</span></td>'


def _primary_td(c: Cell) -> str:
    scale, dec = (100.0, 1) if c.percent else (1.0, 4)
    if c.mean is None:
        return _td(MISSING, "", "mean")
    text = format_number(c.mean * scale, dec) + (f" ± {format_number(c.std * scale, dec)}" if c.std is not None else "")
    n_val = sum(1 for v in c.values.values() if v is not None)
    ci = (f"95% CI [{format_number(c.ci[0] * scale, dec)}, {format_number(c.ci[1] * scale, dec)}]" if c.ci else "no interval (n < 2)")
    seeds = ", ".join(f"{s}: {format_number(v * scale, dec) if v is not None else MISSING}" for s, v in c.values.items())
    attrs = (f' data-v="{_v(c.mean)}" data-k="mean" data-std="{_v(c.std)}" data-lo="{_v(c.ci[0]) if c.ci else ""}"'
             f' data-hi="{_v(c.ci[1]) if c.ci else ""}" title="per seed: {html_escape(seeds)}"')
    return f'<td{attrs}>{text}<span class="sub">{ci} · n={n_val}</span></td>'


def _tp(d: dict) -> str:
    """The paired t-test p of a Δ, or ``no test`` (zero variance: pebench.leaderboard.stats.paired_summary)."""
    return "no test" if d.get("t_p") is None else f"{d['t_p']:.3f}"


def _delta_td(c: Cell) -> str:
    if c.is_reference:
        return _td('<span class="badge">reference</span>', "", "delta")
    if c.delta is None:
        return _td(html_escape(c.delta_note or MISSING), "", "delta", cls="t")
    scale, dec = (100.0, 1) if c.percent else (1.0, 4)
    d = c.delta
    sign = "+" if d["mean"] * scale >= 0.5 * 10 ** -dec else ""
    text = f"{sign}{format_number(d['mean'] * scale, dec)}" + ("*" if d["significant"] else "")
    sub = (f"[{format_number(d['lo'] * scale, dec)}, {format_number(d['hi'] * scale, dec)}] p={d['p']:.3f} t-p={_tp(d)} "
           f"· {d['n_pairs']} pairs")
    attrs = f' data-v="{_v(d["mean"])}" data-k="delta" data-lo="{_v(d["lo"])}" data-hi="{_v(d["hi"])}"'
    cls = ' class="sig"' if d["significant"] else ""
    return f'<td{attrs}{cls}>{text}<span class="sub">{sub}</span></td>'


def _runs_td(c: Cell, results_root: Path, link_prefix: str) -> str:
    """Links to each run's files: relative and percent-encoded (:func:`.text.relative_href`), so a run folder
    named ``javascript:alert(1)`` is a link to that folder, never a script."""
    links = []
    for r in c.runs:
        folder = r.path.rsplit("/", 1)[0] if "/" in r.path else "."
        item = f'<a href="{html_escape(relative_href(link_prefix, folder, "results.json"))}">s{r.seed}</a>'
        if (results_root / folder / "config.yaml").is_file():
            item += f'<a href="{html_escape(relative_href(link_prefix, folder, "config.yaml"))}">cfg</a>'
        links.append(item)
    return f'<td class="t runs" data-v="{len(c.runs)}">' + " ".join(links) + "</td>"


def _table(cells: Sequence[Cell], results_root: Path, link_prefix: str, start: int) -> list[str]:
    resolutions = sorted({res for c in cells for res in c.extrapolation}, key=natural_sort_key)
    shifts = list(cells[0].fs)
    primaries = sorted({c.primary_metric for c in cells})
    percent = all(c.percent for c in cells)
    reference = next((c.reference for c in cells if c.reference), None)
    ref_label = reference or (cells[0].delta_note or "").removeprefix("no ").removesuffix(" row") or "reference"
    head = ["Model", "PE", "n", f"{' / '.join(primaries)}{' (%)' if percent else ''}", f"Δ vs {ref_label}"]
    head += [f"acc1@{r} (%)" for r in resolutions]
    head += ["EED% (min layer)", "SSDC_RPI (peak)", "SSDC (last layer)"] + [f"FS-{s}" for s in shifts] + ["runs"]
    text_columns = {0, 1, len(head) - 1}  # model, PE, runs: left-aligned
    cls = ['' if i not in text_columns else ' class="t"' for i in range(len(head))]
    out = ['<table class="lb"><thead><tr>' + "".join(f'<th tabindex="0"{cls[i]}>{html_escape(h)}</th>'
                                                     for i, h in enumerate(head)) + "</tr></thead><tbody>"]
    for i, c in enumerate(cells):
        cls = ' class="ref"' if c.is_reference else ""
        tds = [_td(html_escape(c.model), c.model, "model", "t"), _td(html_escape(c.row_label), c.row_label, "row", "t"),
               _td(str(len(c.runs)), str(len(c.runs)), "n"), _primary_td(c), _delta_td(c)]
        tds += [_num_td(c, f"acc1@{r}", 100.0, 1) for r in resolutions]
        tds += [_num_td(c, "eed_min_percent", 1.0, 1), _num_td(c, "ssdc_rpi_peak", 1.0, 3),
                _num_td(c, "ssdc_last_layer", 1.0, 3)]
        tds += [_num_td(c, f"fs_{s}", 1.0, 3, undefined=s in c.fs_undefined) for s in shifts]
        tds.append(_runs_td(c, results_root, link_prefix))
        out.append(f'<tr id="cell-{start + i}" data-i="{i}"{cls}>' + "".join(tds) + "</tr>")
    out.append("</tbody></table>")
    return out


def _entry(c: Cell, link: str) -> Entry:
    """The cell as the overview shows it: its mean and n as its primary cell prints them, its Δ's ``*``."""
    scale, dec = (100.0, 1) if c.percent else (1.0, 4)
    if c.is_reference:
        tip = f"{c.primary_metric}: the reference row"
    elif c.delta is None:
        tip = f"{c.primary_metric}: {c.delta_note or 'no comparison'}"
    else:
        d = c.delta
        tip = (f"{c.primary_metric}: Δ vs {c.reference} {format_number(d['mean'] * scale, dec)} "
               f"[{format_number(d['lo'] * scale, dec)}, {format_number(d['hi'] * scale, dec)}] "
               f"p={d['p']:.3f} t-p={_tp(d)} · {d['n_pairs']} pairs")
    return Entry(dataset=c.dataset, model=c.model, pe=c.pe, label=c.label, tag=c.tag, metric=c.primary_metric,
                 percent=c.percent, mean_text=MISSING if c.mean is None else format_number(c.mean * scale, dec),
                 n=sum(1 for v in c.values.values() if v is not None),
                 significant=bool(c.delta and c.delta["significant"]), is_reference=c.is_reference,
                 reference_note=c.delta_note if c.reference is None else None,  # as the markdown: no ref row
                 mean=c.mean, link=link, tip=tip)


def _overview(ov: Overview) -> list[str]:
    """The overview as a section: a table (not sortable) whose headers link to the sections and whose cells
    link to their rows; every string from a file escaped."""
    head = ['<th class="t">PE</th>'] + [
        f'<th><a href="{html_escape(fragment_href(f"ds-{d}"))}">{html_escape(d)}</a>'
        + (f'<span class="sub">{html_escape(m)}</span>' if d in ov.split else "") + "</th>" for d, m in ov.columns]
    out = ['<section id="overview"><h2>Overview</h2>',
           '<table class="ov"><thead><tr>' + "".join(head) + "</tr></thead><tbody>"]
    for row in ov.rows:
        tds = [f'<td class="t">{html_escape(ov.row_label(row))}</td>']
        for col in ov.columns:
            e = ov.cells.get((row, col))
            if e is None:
                tds.append(f"<td>{MISSING}</td>")
                continue
            text = f'<a href="{html_escape(fragment_href(e.link))}">{html_escape(e.mean_text)}</a>' if e.link else \
                html_escape(e.mean_text)
            text += ("*" if e.significant else "") + (' <span class="badge">ref</span>' if e.is_reference else "")
            cls = ' class="sig"' if e.significant else (' class="ref"' if e.is_reference else "")
            tds.append(f'<td{cls} data-v="{_v(e.mean)}" data-k="{html_escape(e.metric)}" title="{html_escape(e.tip)}">'
                       f'{text}<span class="sub">n={e.n}</span></td>')
        out.append("<tr>" + "".join(tds) + "</tr>")
    return out + ["</tbody></table>", f'<p class="note">{overview_note(ov, _code, html_escape, html_escape)}</p>',
                  "</section>"]


def _code(s: str) -> str:
    return f"<code>{html_escape(s)}</code>"


def _series_label(c: Cell, several_models: bool) -> str:
    return f"{c.model} · {c.row_label}" if several_models else c.row_label


def _figures(cells: Sequence[Cell]) -> list[str]:
    several = len({c.model for c in cells}) > 1
    figs = []
    for key, title, ylabel, ref in (("ssdc", "SSDC per layer (mean over seeds)", "SSDC", 0.0),
                                    ("eed_percent", "EED % per layer (mean over seeds)", "EED % (100·N_eff / D)",
                                     None)):
        have = [c for c in cells if key in c.layers]
        if not have:
            continue
        layers = sorted({lay for c in have for lay in c.layers[key]["layers"]})
        series = [(_series_label(c, several),
                   [dict(zip(c.layers[key]["layers"], c.layers[key]["mean"])).get(lay) for lay in layers]) for c in have]
        figs.append(line_chart(series, [str(lay) for lay in layers], title, "layer", ylabel, ref))
    have = [c for c in cells if any(v is not None for v in c.extrapolation.values())]
    if have:
        resolutions = sorted({res for c in have for res in c.extrapolation}, key=natural_sort_key)
        series = [(_series_label(c, several),
                   [None if c.extrapolation.get(r) is None else 100.0 * c.extrapolation[r] for r in resolutions])
                  for c in have]
        figs.append(line_chart(series, resolutions, "Resolution extrapolation (mean over seeds)",
                               "input resolution", "top-1 accuracy (%)"))
    return [f"<figure>{f}</figure>" for f in figs]


def render_page(cells: Sequence[Cell], runs: Sequence[RunRecord], problems: Sequence[str], results_label: str,
                reference: str | None, results_root: str | Path, link_prefix: str, smoke_left_out: int = 0) -> str:
    """The HTML page (see the module docstring); ``results_root`` is read only to see which runs
    have a ``config.yaml``."""
    root = Path(results_root)
    complete = sum(1 for r in runs if r.complete)
    incomplete = sorted((r for r in runs if not r.complete), key=lambda r: r.path)
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           "<title>Positional-encoding leaderboard</title>", f"<style>{_CSS}</style></head><body>",
           "<h1>Positional-encoding leaderboard</h1>",
           f'<p class="note">Generated by <code>{html_escape(generated_by(results_label, reference, "html"))}</code> '
           f"from "
           f"{complete} complete run(s) ({len(incomplete)} incomplete, {len(problems)} problem(s)"
           f"{html_escape(smoke_note(smoke_left_out))}). Do not edit by "
           "hand; regenerate. Click a column header to sort (again: reverse).</p>",
           '<p class="note">Primary metric: mean ± sample std over seeds; below it the Student-t 95 % '
           "interval of the mean (percentages: clipped to [0, 100]) and the seed count (hover for each seed's value). Δ: mean per-seed difference to the "
           "reference row of the same model (highlighted), paired by seed, with its paired Student-t 95 % interval, "
           "the sign-flip p and the paired t-test p; <span class=\"sig\">*</span>: the interval excludes 0 and "
           "t-p &lt; 0.05. Accuracies in %. Extrapolation, geometry (EED % of the lowest layer, peak SSDC_RPI, SSDC "
           "of the last layer) and fragility FS = 1 − A_shift/A_clean are means over seeds, with their Student-t "
           "95 % interval and seed count below (each seed's value on hover); — not reported, n/a "
           "FS undefined (clean accuracy near chance). Each row links to its runs' results.json (s&lt;seed&gt;) and "
           "config.yaml (cfg).</p>"]
    datasets = sorted({c.dataset for c in cells})
    out.append("<nav>" + " · ".join(f'<a href="{html_escape(fragment_href(f"ds-{d}"))}">{html_escape(d)}</a>'
                                    for d in datasets) + "</nav>")
    if cells:  # the overview (:mod:`.overview`): each of its cells links to its row below (``cell-<i>``)
        ordered = [c for ds in datasets for c in cells if c.dataset == ds]
        entries = [_entry(c, f"cell-{i}") for i, c in enumerate(ordered)]
        out += _overview(build_overview(entries, reference, pe_sort_key))
    start = 0
    for ds in datasets:
        ds_cells = [c for c in cells if c.dataset == ds]
        tasks = ", ".join(sorted({c.task for c in ds_cells}))
        prim = ", ".join(sorted({c.primary_metric for c in ds_cells}))
        out += [f'<section id="ds-{html_escape(ds)}"><h2>{html_escape(ds)}</h2>',
                f"<p>Task: {html_escape(tasks)}. Primary metric: <code>{html_escape(prim)}</code>.</p>"]
        out += _table(ds_cells, root, link_prefix, start)
        out += _figures(ds_cells)
        out.append("</section>")
        start += len(ds_cells)
    if incomplete:
        out += ["<h2>Incomplete runs</h2>", "<p>Not counted in the tables above.</p>", "<ul>"]
        out += [f"<li><code>{html_escape(r.path)}</code>: {html_escape(r.status)}</li>" for r in incomplete]
        out.append("</ul>")
    if problems:
        out += ["<h2>Problems</h2>", "<p>Result files (or sections of them) that were skipped:</p>", "<ul>"]
        out += [f"<li>{html_escape(p)}</li>" for p in problems]
        out.append("</ul>")
    out.append(f"<script>{_JS}</script></body></html>")
    return encodable("\n".join(out) + "\n")

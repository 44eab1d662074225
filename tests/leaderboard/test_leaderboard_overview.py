"""The leaderboard's overview (issue #72 item 6): one matrix, PE variants × datasets, of the primary metric with
the significance mark of each section, before the sections, in the markdown and on the HTML page."""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pebench.leaderboard import collect_results, render_leaderboard
from pebench.leaderboard.formats import render_format
from pebench.leaderboard.overview import markdown_anchor, section_anchors

DATASETS = ("alpha", "beta")
SEEDS = (0, 1, 2)
SHA_A, SHA_B = "aaaaaaa1111", "bbbbbbb2222"
#: (dataset, pe, git sha) -> primary metric per seed. none: the reference; ape: clearly above it (significant);
#: rope-axial: noise around it (not significant) and no run on beta; on alpha, ape was run by two commits (a row each)
VALUES = {
    ("alpha", "none", SHA_A): (0.50, 0.52, 0.51),
    ("alpha", "ape", SHA_A): (0.70, 0.73, 0.71),
    ("alpha", "ape", SHA_B): (0.51, 0.50, 0.53),
    ("alpha", "rope-axial", SHA_A): (0.53, 0.49, 0.515),
    ("beta", "none", SHA_A): (0.30, 0.35, 0.32),
    ("beta", "ape", SHA_A): (0.20, 0.26, 0.21),
}


def _result(dataset: str, pe: str, seed: int, value: float, sha: str, **over: object) -> dict:
    r = {"schema_version": 2, "dataset": dataset, "pe": pe, "variant": pe, "pe_label": pe, "model": "vit-nano",
         "seed": seed, "task": "classification", "status": "complete", "primary_metric": "val/acc1",
         "metrics": {"val/acc1": value, "val/loss": 1.0 - value}, "git_sha": sha, "fingerprint": "fp0",
         "config": {"dataset": dataset, "pe": pe, "seed": seed}, "wall_time_s": 1.0}
    r.update(over)
    return r


def _write(root: Path, rel: str, obj: dict) -> None:
    p = root / rel / "results.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(obj), encoding="utf-8")


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    for (dataset, pe, sha), values in VALUES.items():
        for seed, value in zip(SEEDS, values):
            _write(root, f"{dataset}/{pe}/{sha[:3]}/seed{seed}", _result(dataset, pe, seed, value, sha))
    return root


def _table(lines: list[str]) -> list[list[str]]:
    rows = [l for l in lines if l.startswith("|")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", l.strip()[1:-1])] for l in rows]


def _section_rows(text: str, dataset: str) -> dict[str, tuple[str, str]]:
    """Row label -> (the primary metric's mean as the section prints it, the section's Δ cell)."""
    section = text.split(f"\n## {dataset}\n", 1)[1].split("\n## ", 1)[0]
    header, _, *rows = _table(section.splitlines())
    delta = next(i for i, h in enumerate(header) if h.startswith("Δ"))
    return {r[1]: (r[3].split(" ± ", 1)[0], r[delta]) for r in rows}


def _overview(text: str) -> tuple[list[str], dict[str, list[str]], str]:
    """(column headers, row label -> cells, the text under the table) of the ``## Overview`` section."""
    section = text.split("\n## Overview\n", 1)[1].split("\n## ", 1)[0]
    header, _, *rows = _table(section.splitlines())
    assert header[0] == "PE"
    note = next(l for l in section.splitlines() if l.startswith("Each cell"))
    return header[1:], {r[0]: r[1:] for r in rows}, note


def test_overview_states_each_section_rows_mean_and_mark(results: Path) -> None:
    runs, problems = collect_results(results)
    assert not problems
    text = render_leaderboard(runs, problems, results_label="runs")
    # after the header block, before the first section
    assert text.index("\nA row never averages") < text.index("\n## Overview\n") < text.index("\n## alpha\n")
    columns, rows, note = _overview(text)
    assert columns == ["[alpha][ov-1]", "[beta][ov-2]"]
    assert "\n[ov-1]: #alpha\n[ov-2]: #beta\n" in text
    # reference first, then the sections' order; the row split by commit stays two rows, with its tags
    assert list(rows) == ["none", "ape", f"ape @{SHA_A[:7]}", f"ape @{SHA_B[:7]}", "rope-axial"]
    sections = {d: _section_rows(text, d) for d in DATASETS}
    assert set(sections["alpha"]) == {"none", f"ape @{SHA_A[:7]}", f"ape @{SHA_B[:7]}", "rope-axial"}
    assert set(sections["beta"]) == {"none", "ape"}
    for label, cells in rows.items():
        for dataset, cell in zip(DATASETS, cells):
            if label not in sections[dataset]:
                assert cell == "—", (label, dataset)  # no run of this variant on this dataset
                continue
            mean, delta = sections[dataset][label]
            mark = "*" if delta.endswith("*") else ""
            suffix = ", ref)" if delta == "(reference)" else ")"
            assert cell == f"{mean}{mark} (n=3{suffix}", (label, dataset, cell, delta)
    # the numbers themselves (so the comparison above is not vacuous)
    assert rows["none"] == ["51.0 (n=3, ref)", "32.3 (n=3, ref)"]
    assert rows[f"ape @{SHA_A[:7]}"] == ["71.3* (n=3)", "—"]
    assert rows[f"ape @{SHA_B[:7]}"] == ["51.3 (n=3)", "—"]
    assert rows["ape"] == ["—", "22.3* (n=3)"]
    assert rows["rope-axial"] == ["51.2 (n=3)", "—"]
    # the sentence under the table: the mark's test, level, reference, no multiplicity correction; the metrics
    assert "paired Student-t 95 % interval" in note and "p < 0.05" in note and "no correction for multiple" in note
    assert "alpha: `val/acc1` (%), vit-nano, vs none; beta: `val/acc1` (%), vit-nano, vs none." in note
    assert render_leaderboard(*collect_results(results), results_label="runs") == text  # deterministic


def test_overview_marks_agree_with_the_cells_and_the_page(results: Path) -> None:
    """Every mark of the markdown overview (from the computation that prints the sections' ``*``) is the cell's
    ``delta.significant`` (the JSON output's), and the page's overview shows the same means, marks and n."""
    runs, _ = collect_results(results)
    doc = json.loads(render_format("json", runs, [], results, results / "LB.json"))
    marks = {(c["dataset"], c["row"]): "ref" if c["is_reference"] else "*" if c["delta"]["significant"] else ""
             for c in doc["cells"]}
    assert marks == {("alpha", "none"): "ref", ("alpha", "ape @aaaaaaa"): "*", ("alpha", "ape @bbbbbbb"): "",
                     ("alpha", "rope-axial"): "", ("beta", "none"): "ref", ("beta", "ape"): "*"}
    _, rows, _ = _overview(render_leaderboard(runs, []))
    ov = _Overview()
    ov.feed(render_format("html", runs, [], results, results / "LB.html"))
    html_rows = {r[0]: r[1:] for r in ov.rows if r}  # the header row holds no td
    assert list(html_rows) == list(rows)
    for (dataset, row), mark in marks.items():
        cell = rows[row][DATASETS.index(dataset)]
        assert ("*" in cell) == (mark == "*") and cell.endswith(", ref)") == (mark == "ref"), (dataset, row, cell)
    for row, cells in rows.items():
        assert [c.replace(" (n=3, ref)", "refn=3").replace(" (n=3)", "n=3") for c in cells] == \
            [h.replace(" ref", "ref") for h in html_rows[row]], row


def test_a_dataset_with_two_models_gets_a_column_per_model(tmp_path: Path) -> None:
    for seed in SEEDS:
        for model, base in (("vit-nano", 0.5), ("vit-tiny", 0.6)):
            for pe, add in (("none", 0.0), ("ape", 0.1)):
                _write(tmp_path, f"{model}/{pe}/seed{seed}",
                       _result("alpha", pe, seed, base + add + 0.01 * seed * (pe == "ape"), SHA_A, model=model))
    text = render_leaderboard(*collect_results(tmp_path))
    columns, rows, note = _overview(text)
    assert columns == ["[alpha][ov-1] · vit-nano", "[alpha][ov-1] · vit-tiny"]
    assert rows == {"none": ["50.0 (n=3, ref)", "60.0 (n=3, ref)"], "ape": ["61.0* (n=3)", "71.0* (n=3)"]}
    assert "alpha · vit-nano: `val/acc1` (%), vit-nano, vs none; alpha · vit-tiny:" in note


def test_no_overview_without_complete_runs(tmp_path: Path) -> None:
    _write(tmp_path, "x", _result("alpha", "ape", 0, 0.5, SHA_A, status="running"))
    text = render_leaderboard(*collect_results(tmp_path))
    assert "## Overview" not in text and "No complete runs found." in text


def test_markdown_anchors_follow_github() -> None:
    assert markdown_anchor("probe-set-anchoring") == "probe-set-anchoring"
    assert markdown_anchor("Incomplete runs") == "incomplete-runs"
    assert markdown_anchor("a.b (c)") == "ab-c"
    # a dataset named like a heading above it, or twice the same anchor: GitHub's -1, -2 in document order
    assert section_anchors(["Overview", "a.b", "ab"], ["Positional-encoding leaderboard", "Overview"]) == {
        "Overview": "overview-1", "a.b": "ab", "ab": "ab-1"}


HOSTILE_DATASET = '"><script>alert(1)</script>](javascript:x)|'
HOSTILE_PE = "<img src=x onerror=alert(2)>"


class _Overview(HTMLParser):
    """The overview section of a page: its elements (tag, attrs), its text and its table's body rows (the text
    of each cell)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict]] = []
        self.text = ""
        self.rows: list[list[str]] = []
        self._depth = 0
        self._td = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section" and a.get("id") == "overview":
            self._depth = 1
        elif self._depth:
            self._depth += tag == "section"
            self.elements.append((tag, a))
            if tag == "tr":
                self.rows.append([])
            elif tag == "td":
                self.rows[-1].append("")
                self._td = True

    def handle_endtag(self, tag):
        if self._depth and tag == "section":
            self._depth -= 1
        self._td = self._td and tag != "td"

    def handle_data(self, data):
        if self._depth:
            self.text += data
            if self._td:
                self.rows[-1][-1] += data


def test_html_overview_escapes_file_strings(tmp_path: Path) -> None:
    for seed in SEEDS:
        _write(tmp_path, f"n/{seed}", _result(HOSTILE_DATASET, "none", seed, 0.5 + 0.01 * seed, SHA_A))
        _write(tmp_path, f"h/{seed}", _result(HOSTILE_DATASET, HOSTILE_PE, seed, 0.7 + 0.02 * seed, SHA_A,
                                              variant=HOSTILE_PE, pe_label=HOSTILE_PE))
    runs, problems = collect_results(tmp_path)
    page = render_format("html", runs, problems, tmp_path, tmp_path / "LB.html")
    assert "<script>alert" not in page and "<img" not in page
    ov = _Overview()
    ov.feed(page)
    assert ov.elements, "no overview section"
    assert {tag for tag, _ in ov.elements} <= {"table", "thead", "tbody", "tr", "th", "td", "a", "span", "p", "code",
                                              "h2"}
    assert HOSTILE_DATASET in ov.text and HOSTILE_PE in ov.text  # shown as text, read back exactly
    hrefs = [a["href"] for tag, a in ov.elements if tag == "a"]
    assert hrefs and all(h.startswith("#") and not any(c in h for c in '"<> ') for h in hrefs)
    assert hrefs[0] == "#ds-%22%3E%3Cscript%3Ealert%281%29%3C%2Fscript%3E%5D%28javascript%3Ax%29%7C"
    assert page.index('<section id="overview">') < page.index("<section id=\"ds-")
    # each overview cell links to its row of the section's table
    assert set(hrefs[1:]) == {"#cell-0", "#cell-1"} and 'id="cell-0"' in page and 'id="cell-1"' in page
    # and the markdown overview stays inert: no tag, no inline link, the table's columns intact
    md = render_leaderboard(runs, problems)
    prose = re.sub(r"`[^`\n]*`", "", md)
    assert not re.search(r"<[A-Za-z/!?]", prose) and "](" not in prose
    columns, rows, _ = _overview(md)
    assert len(columns) == 1 and set(rows) == {"none", HOSTILE_PE.replace("<", "&lt;").replace(">", "&gt;")}


def test_committed_leaderboard_opens_with_the_overview() -> None:
    repo = Path(__file__).resolve().parents[2]
    if not (repo / "LEADERBOARD.md").exists():
        pytest.skip("no committed leaderboard")
    text = (repo / "LEADERBOARD.md").read_text(encoding="utf-8")
    first = text.index("\n## ")
    assert text[first:].startswith("\n## Overview\n")
    html = (repo / "LEADERBOARD.html").read_text(encoding="utf-8")
    assert html.index('<section id="overview">') < html.index('<section id="ds-')


def test_a_column_without_the_reference_row_says_why_and_marks_nothing(results: Path) -> None:
    runs, problems = collect_results(results)
    columns, rows, note = _overview(render_leaderboard(runs, problems, reference="rope-axial"))
    assert list(rows)[0] == "rope-axial" and rows["rope-axial"] == ["51.2 (n=3, ref)", "—"]
    assert all("*" not in c and "ref" not in c for c in rows["ape"])  # beta has no rope-axial row
    assert "alpha: `val/acc1` (%), vit-nano, vs rope-axial; beta: `val/acc1` (%), vit-nano, no rope-axial row." in note
    _, rows, note = _overview(render_leaderboard(runs, problems, reference=None))
    assert not any("*" in c or "ref" in c for cells in rows.values() for c in cells)
    assert "no reference is set (`--reference`), so no cell is marked" in note

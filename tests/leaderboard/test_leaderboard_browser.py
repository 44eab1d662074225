"""LEADERBOARD.html in a real headless Chromium: it loads without console errors, a click on a header sorts the
table, and every number in the DOM equals the JSON output (`bench leaderboard --format json`).

The committed page is copied with two scripts added: one first in <head> that records errors and
``console.error`` calls, one last in <body> that clicks headers and writes what it saw into the DOM;
``chromium --dump-dom`` prints the DOM after the scripts ran and the test parses it. file:// only,
with the flags that keep Chromium off the network. Skipped where Debian's ``chromium`` is not installed
(``apt-get install chromium``; not part of CI: about 150 MB).
"""
from __future__ import annotations

import json
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pebench.leaderboard import collect_results
from pebench.leaderboard.formats import render_format
from pebench.leaderboard.render import format_number

REPO = Path(__file__).resolve().parents[2]
RESULTS = "results/embedded"
CHROMIUM = "/usr/bin/chromium"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--host-resolver-rules=MAP * ~NOTFOUND")

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).is_file(), reason=f"{CHROMIUM} not installed (apt-get install chromium)"),
    pytest.mark.skipif(not (REPO / "LEADERBOARD.html").exists(), reason="no committed leaderboard page"),
]

_ERRORS = """<script>window.__errors = [];
window.addEventListener("error", function (e) { window.__errors.push("error: " + e.message); });
(function () { var orig = console.error; console.error = function () {
  window.__errors.push("console.error: " + Array.prototype.join.call(arguments, " ")); orig.apply(console, arguments);
}; })();</script>"""
# table 0: click column 3 (primary metric) once -> descending; table 1: click column 1 (PE) twice -> descending text
_CLICKS = """<script>(function () {
  var tables = document.querySelectorAll("table.lb");
  tables[0].tHead.rows[0].cells[3].click();
  tables[1].tHead.rows[0].cells[1].click();
  tables[1].tHead.rows[0].cells[1].click();
  var pre = document.createElement("pre");
  pre.id = "harness";
  pre.textContent = JSON.stringify({errors: window.__errors, tables: tables.length,
    sort: [tables[0].tHead.rows[0].cells[3].getAttribute("aria-sort"),
           tables[1].tHead.rows[0].cells[1].getAttribute("aria-sort")]});
  document.body.appendChild(pre);
})();</script>"""


class _Dom(HTMLParser):
    """Tables of the dumped DOM: per table, rows as (row id, [td attrs + text]); and the harness text."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[tuple[str, list[dict]]]] = []
        self.harness = ""
        self._td: dict | None = None
        self._in_harness = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "table" and "lb" in (a.get("class") or ""):
            self.tables.append([])
        elif tag == "tr" and a.get("id", "").startswith("cell-"):
            self.tables[-1].append((a["id"], []))
        elif tag == "td" and self.tables and self.tables[-1]:
            self._td = {**a, "text": ""}
            self.tables[-1][-1][1].append(self._td)
        elif tag == "pre" and a.get("id") == "harness":
            self._in_harness = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._td = None
        elif tag == "pre":
            self._in_harness = False

    def handle_data(self, data: str) -> None:
        if self._td is not None:
            self._td["text"] += data
        if self._in_harness:
            self.harness += data


def _parse(html: str) -> _Dom:
    dom = _Dom()
    dom.feed(html)
    return dom


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> tuple[_Dom, _Dom, dict]:
    """(the page as committed, the DOM after load and clicks, the JSON output of the same results)."""
    page = (REPO / "LEADERBOARD.html").read_text(encoding="utf-8")
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in page
    tmp = tmp_path_factory.mktemp("browser")
    test_page = tmp / "LEADERBOARD.html"
    test_page.write_text(page.replace("<head>", "<head>" + _ERRORS, 1).replace("</body>", _CLICKS + "</body>", 1),
                         encoding="utf-8")
    r = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'profile'}", "--dump-dom", test_page.as_uri()],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    head = page.split(" --format html", 1)[0]
    reference = head.split("--reference ", 1)[1].strip() if "--reference " in head else "none"
    runs, problems = collect_results(REPO / RESULTS)
    doc = json.loads(render_format("json", runs, problems, REPO / RESULTS, REPO / "LEADERBOARD.json",
                                   results_label=RESULTS, reference=reference))
    return _parse(page), _parse(r.stdout), doc


def test_page_loads_without_console_errors(loaded) -> None:
    _, dom, _ = loaded
    assert dom.harness, "the harness script did not run"
    report = json.loads(dom.harness)
    assert report["errors"] == [] and report["tables"] == len(dom.tables) > 1


def test_a_click_on_a_header_sorts_the_table(loaded) -> None:
    before, dom, _ = loaded
    assert json.loads(dom.harness)["sort"] == ["descending", "descending"]
    values = [float(tds[3]["data-v"]) for _, tds in dom.tables[0] if tds[3]["data-v"]]
    assert values == sorted(values, reverse=True)
    assert [tds[3]["data-v"] for _, tds in dom.tables[0] if not tds[3]["data-v"]] == \
        [tds[3]["data-v"] for _, tds in dom.tables[0]][len(values):]  # missing values last
    labels = [tds[1]["data-v"] for _, tds in dom.tables[1]]
    original = [tds[1]["data-v"] for _, tds in before.tables[1]]
    assert labels != original and sorted(labels, reverse=True) == labels == sorted(original, reverse=True)
    assert sorted(rid for rid, _ in dom.tables[0]) == sorted(rid for rid, _ in before.tables[0])  # rows moved, kept


def test_the_numbers_in_the_dom_equal_the_json_output(loaded) -> None:
    _, dom, doc = loaded
    rows = {rid: tds for table in dom.tables for rid, tds in table}
    assert len(rows) == len(doc["cells"])
    checked = 0
    for i, cell in enumerate(doc["cells"]):
        tds = {td.get("data-k"): td for td in rows[f"cell-{i}"]}
        assert (tds["model"]["text"], tds["row"]["text"], int(tds["n"]["text"])) == (cell["model"], cell["row"],
                                                                                   cell["n"])
        mean = tds["mean"]
        assert float(mean["data-v"]) == cell["mean"]
        scale, dec = (100.0, 1) if cell["percent"] else (1.0, 4)
        assert mean["text"].startswith(format_number(cell["mean"] * scale, dec))
        if cell["ci95"]:
            assert [float(mean["data-lo"]), float(mean["data-hi"])] == cell["ci95"]
            assert f"[{format_number(cell['ci95'][0] * scale, dec)}, {format_number(cell['ci95'][1] * scale, dec)}]" in mean["text"]
        assert f"n={cell['n']}" in mean["text"]
        if cell["delta"]:
            d = tds["delta"]
            assert [float(d["data-v"]), float(d["data-lo"]), float(d["data-hi"])] == [
                cell["delta"]["mean"], cell["delta"]["lo"], cell["delta"]["hi"]]
        else:
            assert tds["delta"]["data-v"] == "" and (cell["is_reference"] or cell["delta_note"] in tds["delta"]["text"])
        numbers = {f"acc1@{k}": v for k, v in cell["extrapolation"].items()}
        numbers.update({f"fs_{k}": v for k, v in cell["fs"].items()})
        numbers.update({k: cell[k] for k in ("eed_min_percent", "ssdc_rpi_peak", "ssdc_last_layer")})
        for key, value in numbers.items():
            shown = tds[key]["data-v"]
            assert (float(shown) if shown else None) == value == cell["columns"][key]["mean"], (cell["row"], key)
            if shown and cell["columns"][key]["ci95"]:
                assert [float(tds[key]["data-lo"]), float(tds[key]["data-hi"])] == cell["columns"][key]["ci95"]
            if shown:
                assert f"n={cell['columns'][key]['n']}" in tds[key]["text"]
            checked += 1
    assert checked > 300

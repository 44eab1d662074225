"""Hostile result files never run code: nothing from a ``results.json``, a run folder's name or a ``metrics.csv``
becomes markup or a link scheme in the HTML leaderboard, or a command to the terminal in ``bench runs`` and the
problems ``bench leaderboard --check`` prints; a file nested 100k deep, not UTF-8 or too large is one listed
problem (one ``bench: error:`` line for ``bench runs show``) and the rest of the table stays; ``--check`` rejects
extrapolation resolutions and robustness shifts pebench does not write. The property-based tests throw arbitrary
bytes and arbitrary JSON (hostile values under the keys pebench reads) at the collector, the renderers, the check
and the ``bench runs`` listing: accepted, or a listed problem / one line and exit 2, never a traceback.
"""
from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import tempfile
import unicodedata
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import scipy.stats  # noqa: F401 - imported here, not inside the first timed example (t_mean_ci defers it)
from hypothesis import given, settings
from hypothesis import strategies as st

from pebench.cli import main
from pebench.core.errors import ResultsError
from pebench.leaderboard import collect_results
from pebench.leaderboard.check import SHIFT_NAMES, check_results, is_resolution
from pebench.leaderboard.curves import read_history, write_sweep_curves
from pebench.leaderboard.formats import FORMATS, render_format
from pebench.leaderboard.page import _JS
from pebench.leaderboard.runs import collect_runs, format_run, format_runs
from pebench.leaderboard.text import fragment_href, relative_href, terminal_safe

REPO = Path(__file__).resolve().parents[2]
XSS = '"><script>alert(4)</script>'
JS_FOLDER = "javascript:alert(6)"
ANSI = "\x1b[2J\x1b]0;pwned\x07"
GOOD_RUN = "shapes/ape/vit-nano/seed0"
#: what a terminal must never receive from a file: C0 / C1 controls other than the newlines between lines
_CONTROL = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]} - {"\n"}


def _result(**changes) -> dict:
    res = {"schema_version": 2, "dataset": "shapes", "pe": "ape", "variant": "ape", "pe_label": "ape",
           "model": "vit-nano", "seed": 0, "task": "classification", "status": "complete",
           "primary_metric": "val/acc1", "metrics": {"val/acc1": 0.5, "val/loss": 1.0}, "git_sha": "abc123",
           "fingerprint": "fp0", "wall_time_s": 12.5, "config": {"dataset": "shapes", "pe": "ape", "seed": 0},
           "extrapolation": [{"resolution": "32", "acc1": 0.5, "n_tokens": 16, "n_samples": 8},
                             {"resolution": "48", "acc1": 0.4, "n_tokens": 36, "n_samples": 8}],
           "robustness": {"clean_acc": 0.5, "n_samples": 8, "jpeg": {"acc": 0.4, "fs": 0.2},
                          "blur": {"acc": 0.3, "fs": 0.4}}}
    res.update(changes)
    return res


def _write_run(root: Path, rel: str, content: dict | bytes | str, config: bool = True) -> Path:
    folder = root / rel
    folder.mkdir(parents=True, exist_ok=True)
    data = content if isinstance(content, bytes) else (
        content.encode("utf-8", "surrogatepass") if isinstance(content, str) else json.dumps(content).encode("utf-8"))
    (folder / "results.json").write_bytes(data)
    if config:
        (folder / "config.yaml").write_text("dataset: shapes\npe: ape\nseed: 0\n", encoding="utf-8")
    return folder


def _good_folder(root: Path) -> Path:
    _write_run(root, GOOD_RUN, _result())
    return root


def _run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``main(argv)`` with stdout and stderr captured (no pytest fixture: the property tests call it too)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _assert_terminal_safe(text: str) -> None:
    bad = sorted({repr(c) for c in text if c in _CONTROL or unicodedata.category(c) in ("Cf", "Cs", "Zl", "Zp")})
    assert not bad, f"raw control characters {bad} in {text[:400]!r}"


# ------------------------------------------------------------------------------ the HTML page
_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "code", "span", "nav", "a", "section",
         "table", "thead", "tbody", "tr", "th", "td", "figure", "svg", "text", "rect", "line", "polyline", "circle",
         "ul", "li", "script"}
_ATTRS = {"lang", "charset", "name", "content", "class", "href", "id", "data-v", "data-k", "data-lo", "data-hi",
          "data-std", "data-i", "title", "tabindex", "xmlns", "width", "height", "viewbox", "role", "aria-label", "x",
          "y", "text-anchor", "fill", "stroke", "x1", "y1", "x2", "y2", "stroke-dasharray", "stroke-width",
          "transform", "points", "cx", "cy", "r"}


class _Page(HTMLParser):
    """Every element, attribute and script body of a page, as a browser's tokenizer sees them."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts.append(data)

    def attr(self, name: str) -> list[str]:
        return [a[name] for _, a in self.elements if a.get(name) is not None]


def _assert_page_is_inert(text: str) -> _Page:
    """Only the page's own elements and attributes, its one script, and relative links without a scheme."""
    page = _Page(text)
    assert {tag for tag, _ in page.elements} <= _TAGS, {tag for tag, _ in page.elements} - _TAGS
    names = {name for _, attrs in page.elements for name in attrs}
    assert names <= _ATTRS, names - _ATTRS
    assert [tag for tag, _ in page.elements].count("script") == 1 and "".join(page.scripts) == _JS
    for href in page.attr("href"):
        parts = urlsplit(href)
        assert parts.scheme == "" and parts.netloc == "" and not href.startswith(("/", "\\")), href
        assert href.startswith("#") or not any(c in href for c in ':\\"<> '), href
    return page


@pytest.fixture()
def xss_folder(tmp_path: Path) -> Path:
    """A good run and a run folder named ``javascript:alert(6)`` whose results carry a script as an extrapolation
    resolution and as a robustness shift."""
    root = _good_folder(tmp_path / "results")
    hostile = _result(seed=1, fingerprint="fp0",
                      extrapolation=[{"resolution": XSS, "acc1": 0.3, "n_tokens": 4, "n_samples": 8},
                                     {"resolution": "32", "acc1": 0.5, "n_tokens": 16, "n_samples": 8}],
                      robustness={"clean_acc": 0.5, "jpeg": {"acc": 0.4, "fs": 0.2}, XSS: {"acc": 0.1, "fs": 0.8}})
    _write_run(root, JS_FOLDER, hostile)
    return root


def test_the_page_escapes_every_file_string_and_links_no_scheme(xss_folder: Path) -> None:
    out = xss_folder / "LEADERBOARD.html"  # in the results folder: a run's link starts with its folder's name
    code, stdout, _ = _run_cli(["leaderboard", "--results", str(xss_folder), "--format", "html", "--out", str(out)])
    assert code == 0, stdout
    text = out.read_text(encoding="utf-8")
    assert "<script>alert" not in text and "javascript:" not in text
    page = _assert_page_is_inert(text)
    # the file's strings are there, as text and attribute values that read back exactly
    assert f"acc1@{XSS}" in page.attr("data-k") and f"fs_{XSS}" in page.attr("data-k")
    links = [h for h in page.attr("href") if not h.startswith("#")]
    assert f"./{JS_FOLDER.replace(':', '%3A').replace('(', '%28').replace(')', '%29')}/results.json" in links
    assert {unquote(h) for h in links} == {f"./{JS_FOLDER}/results.json", f"./{JS_FOLDER}/config.yaml",
                                           f"{GOOD_RUN}/results.json", f"{GOOD_RUN}/config.yaml"}
    # the markdown holds no raw HTML from the file either
    code, _, _ = _run_cli(["leaderboard", "--results", str(xss_folder), "--out", str(xss_folder / "LB.md")])
    md = (xss_folder / "LB.md").read_text(encoding="utf-8")
    assert code == 0 and "&lt;script&gt;alert(4)&lt;/script&gt;" in md
    _assert_markdown_is_inert(md)


def test_check_names_resolutions_and_shifts_pebench_does_not_write(xss_folder: Path) -> None:
    problems, _ = check_results(xss_folder)
    assert any(p.startswith(f"{JS_FOLDER}/results.json: extrapolation resolution '\"><script>") and "'8x64'" in p
               for p in problems), problems
    assert any(p.startswith(f"{JS_FOLDER}/results.json: robustness shift '\"><script>") and "jpeg" in p
               for p in problems), problems
    code, _, err = _run_cli(["leaderboard", "--check", str(xss_folder)])
    assert code == 2 and "extrapolation resolution" in err and "robustness shift" in err
    assert problems == check_results(xss_folder)[0]  # deterministic
    assert check_results(_good_folder(xss_folder.parent / "good"))[0] == []


@pytest.mark.parametrize("value, ok", [
    ("32", True), ("8x64", True), ("2x1", True), ("064", True), ("0", False), ("8x0", False), (32, False),
    ("1.5x", False), ("64x", False), ("x64", False), ("8x64x64", False), ("٦٤", False), (" 64", False),
    ("64\n", False), (XSS, False)])
def test_resolution_shapes(value, ok) -> None:
    assert is_resolution(value) is ok


def _literal_names(path: Path, name: str) -> set[str]:
    """The string keys (dict) or items (tuple, or tuples as dict values) of the module-level ``name = ...``."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == name:
            value = ast.literal_eval(node.value) if not isinstance(node.value, ast.Dict) else {
                ast.literal_eval(k): (ast.literal_eval(v) if isinstance(v, (ast.Tuple, ast.Dict, ast.Constant))
                                      else None) for k, v in zip(node.value.keys, node.value.values)}
            if isinstance(value, dict) and all(isinstance(v, tuple) for v in value.values()):
                return {s for v in value.values() for s in v}
            return set(value)
    raise AssertionError(f"{name} not found in {path}")


def test_the_check_knows_every_shift_pebench_writes() -> None:
    """check.SHIFT_NAMES (written out: the writers import torch) is the union of the writers' lists."""
    written = (_literal_names(REPO / "analysis" / "robustness.py", "SHIFTS")
               | _literal_names(REPO / "datamodules" / "events" / "event_transforms.py", "STREAM_SHIFTS")
               | _literal_names(REPO / "models" / "tasks" / "segmentation" / "shift.py", "SCENE_SHIFTS"))
    assert set(SHIFT_NAMES) == written


def test_links_and_fragments_are_relative_and_encoded() -> None:
    assert relative_href(".", JS_FOLDER, "results.json") == "./javascript%3Aalert%286%29/results.json"
    assert relative_href("results/embedded", "shapes/ape+rpt/vit-nano/seed0", "config.yaml") == \
        "results/embedded/shapes/ape+rpt/vit-nano/seed0/config.yaml"
    assert relative_href("..", "//evil.example/x", "a b?#%\\") == "../evil.example/x/a%20b%3F%23%25%5C"
    assert relative_href("data:text/html,x") == "./data%3Atext/html,x"
    assert fragment_href('ds-"><b>') == "#ds-%22%3E%3Cb%3E"


# ------------------------------------------------------------------------------ the terminal
def test_runs_and_check_print_no_escape_sequence_from_a_file(tmp_path: Path) -> None:
    root = _good_folder(tmp_path / "results")
    _write_run(root, f"shapes/{ANSI}run\r\x9b2J\u202e/vit-nano/seed1",
               _result(dataset=f"d{ANSI}", pe=f"p{ANSI}", variant=f"v{ANSI}", status=f"s{ANSI}", seed=1,
                       error=f"e{ANSI}", reason=f"r{ANSI}", git_sha=f"g{ANSI}", metrics={f"m{ANSI}": 0.5},
                       config={f"k{ANSI}": f"v{ANSI}"}))
    code, out, err = _run_cli(["runs", "--results", str(root)])
    assert code == 0 and not err
    _assert_terminal_safe(out)
    assert "d\\x1b[2J\\x1b]0;pwned\\x07" in out and "v\\x1b[2J" in out and "1 complete" in out
    show = f"shapes/{ANSI}run\r\x9b2J\u202e/vit-nano/seed1"
    code, out, err = _run_cli(["runs", "show", show, "--results", str(root)])
    assert code == 0 and not err
    _assert_terminal_safe(out)
    assert "k\\x1b[2J" in out and "v\\x1b[2J" in out and "m\\x1b[2J" in out and "run\\r\\x9b2J\\u202e" in out
    code, out, err = _run_cli(["leaderboard", "--check", str(root)])
    assert code == 2
    _assert_terminal_safe(out + err)
    assert "\\x1b[2J" in err


def test_terminal_safe_escapes_controls_only() -> None:
    assert terminal_safe(ANSI) == "\\x1b[2J\\x1b]0;pwned\\x07"
    assert terminal_safe("a\r\nb\tc\x9b\x7f\u202e\u2028\ud800") == "a\\r\\nb\\tc\\x9b\\x7f\\u202e\\u2028\\ud800"
    assert terminal_safe("plain: é, 日本, ±, —, \\x1b") == "plain: é, 日本, ±, —, \\x1b"
    assert terminal_safe(terminal_safe(ANSI)) == terminal_safe(ANSI) and terminal_safe(42) == "42"


# ------------------------------------------------------------------------------ unreadable files
_DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize("content, message", [
    (_DEEP, "nested deeper than 64 levels"),
    (b'{"status": "complete", "dataset": "\xff\xfe"}', "not UTF-8 text"),
    (b'{"status": "complete", "dataset": "\\ud800"', "not valid JSON"),
    (b"1" * 5000, "not valid JSON"),
], ids=["100k-deep", "not-utf8", "truncated", "5000-digit-int"])
def test_an_unreadable_file_is_one_problem_and_the_rest_stays(tmp_path: Path, content: bytes, message: str) -> None:
    root = _good_folder(tmp_path / "results")
    _write_run(root, "shapes/bad/vit-nano/seed0", content)
    bad = "shapes/bad/vit-nano/seed0/results.json"
    runs, problems = collect_results(root)
    assert [r.path for r in runs] == [f"{GOOD_RUN}/results.json"]
    assert len(problems) == 1 and problems[0].startswith(f"{bad}: {message}"), problems
    # bench leaderboard: the table of the good run, the bad file in its Problems section, exit 0 (as for any bad file)
    for fmt in FORMATS:
        out = tmp_path / f"LB.{fmt}"
        code, _, err = _run_cli(["leaderboard", "--results", str(root), "--format", fmt, "--out", str(out)])
        assert code == 0, err
        text = out.read_text(encoding="utf-8")
        assert "vit-nano" in text and (fmt == "csv" or bad in text)
    code, _, err = _run_cli(["leaderboard", "--check", str(root)])
    assert code == 2 and message in err
    # bench runs: the good run and an unreadable row naming why; exit 0
    code, out, _ = _run_cli(["runs", "--results", str(root)])
    assert code == 0 and "1 complete, 1 unreadable" in out and message in out
    # bench runs show of the bad run: one line, exit 2
    code, out, err = _run_cli(["runs", "show", "shapes/bad/vit-nano/seed0", "--results", str(root)])
    lines = err.strip().splitlines()
    assert code == 2 and not out and len(lines) == 1 and lines[0].startswith("bench: error: ") and message in lines[0]


def test_a_file_over_the_size_limit_is_one_problem(tmp_path: Path) -> None:
    root = _good_folder(tmp_path / "results")
    folder = _write_run(root, "shapes/big/vit-nano/seed0", b"")
    with open(folder / "results.json", "wb") as f:
        f.truncate(64 * 1024 * 1024 + 1)  # sparse: nothing written to disk
    runs, problems = collect_results(root)
    assert len(runs) == 1 and problems == ["shapes/big/vit-nano/seed0/results.json: larger than 64 MiB (a results "
                                           "file is far smaller)"]
    assert "larger than 64 MiB" in format_runs(collect_runs(root))
    with pytest.raises(ResultsError, match="larger than 64 MiB"):
        format_run(folder)


def test_a_fifo_named_results_json_does_not_block(tmp_path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    root = _good_folder(tmp_path / "results")
    (root / "shapes" / "fifo").mkdir(parents=True)
    os.mkfifo(root / "shapes" / "fifo" / "results.json")
    assert len(collect_results(root)[0]) == 1
    assert sorted(r["status"] for r in collect_runs(root)) == ["complete", "unreadable"]


def test_hostile_config_yaml_is_one_check_problem(tmp_path: Path) -> None:
    root = _good_folder(tmp_path / "results")
    bomb = "a: &a [" + ",".join(['"lol"'] * 9) + "]\n" + "".join(
        f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    (root / GOOD_RUN / "config.yaml").write_text(bomb, encoding="utf-8")
    problems, _ = check_results(root)
    assert len(problems) == 1 and problems[0].startswith(f"{GOOD_RUN}/config.yaml: unreadable (") and \
        "aliases expand" in problems[0]
    (root / GOOD_RUN / "config.yaml").write_bytes(b"a: " + b"[" * 5000 + b"]" * 5000)
    assert "nested deeper" in check_results(root)[0][0]


def test_hostile_metrics_csv_does_not_end_the_curves(tmp_path: Path) -> None:
    root = _good_folder(tmp_path / "results")
    run = root / GOOD_RUN
    header = "epoch,step,train/loss_epoch,val/loss,val/acc1\n"
    (run / "metrics.attempt0.csv").write_bytes(b"epoch,val/loss\n0,\xff\n")  # not UTF-8: skipped
    (run / "metrics.attempt1.csv").write_text(header + "0,1,1e308,-1e308,0.5\n1,2,x," + "9" * 200_000 + ",\n",
                                              encoding="utf-8")  # a field over csv's limit
    (run / "metrics.csv").write_text(header + "0,1,2.0,1.5,0.4\ninf,2,1,1,1\n1e300,3,1,1,1\n1,4,1.0,nan,0.6\n",
                                     encoding="utf-8")
    hist = read_history(run)
    assert hist["val/acc1"] == {0: 0.4, 1: 0.6} and hist["train/loss_epoch"] == {0: 2.0, 1: 1.0}
    _write_run(root, "$\\frac$/ape/vit-nano/seed0", _result(dataset="$\\frac$", pe="\ud800$x$", variant="\ud800$x$"))
    (root / "$\\frac$/ape/vit-nano/seed0/metrics.csv").write_text(header + "0,1,2.0,1.5,0.4\n", encoding="utf-8")
    assert write_sweep_curves(root, tmp_path / "curves.png") is not None


# ------------------------------------------------------------------------------ property-based
_KEYS = ("status", "dataset", "pe", "variant", "pe_label", "model", "seed", "task", "primary_metric", "metrics",
         "extrapolation", "robustness", "geometry", "config", "fingerprint", "git_sha", "schema_version", "limited",
         "rpt", "dataset_info", "skipped_samples", "wall_time_s", "analysis_errors", "analyses", "error", "reason",
         "interrupted_by", "resume_command", "resumed_from", "versions", "provenance", "token_cap", "run_dir",
         "incomplete_reason", "alpha_sweep", "resolution", "acc1", "fs", "layers", "eed_layers", "ssdc", "ssdc_rpi",
         "eed_percent", "no_pe_bound", "pe_options", "out", "by_reason", "in_batches", "chance", "metric", "jpeg")
_HOSTILE = (XSS, ANSI, JS_FOLDER, "\ud800", "$\\frac$", "\x9b31m\r", "\u202e", "[x](javascript:alert(1))", "a|b`c",
            "64²", "٣", "1" * 150, "", "complete", "64", "8x64", "jpeg", "val/acc1", "/abs/path", "C:\\x", "\x00",
            "shapes", "vit-nano", "ape", "fp0", "abc123")  # the last: the good run's, so both share tables and cells
_text = st.sampled_from(_HOSTILE) | st.sampled_from(_HOSTILE) | st.text(max_size=12)
_numbers = (st.integers(-(2 ** 70), 2 ** 70) | st.sampled_from([10 ** 400, -(10 ** 400), 0, 1, 1e308, -1e308, 5e-324])
            | st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=False))
_scalars = st.none() | st.booleans() | _numbers | _text
_values = st.recursive(_scalars, lambda children: st.lists(children, max_size=4)
                       | st.dictionaries(st.sampled_from(_KEYS) | _text, children, max_size=5), max_leaves=20)
_extrapolation = st.lists(st.fixed_dictionaries(
    {"resolution": _text | _text | _numbers, "acc1": _numbers | st.none() | _numbers | _text},
    optional={"metric": _text, "n_samples": _values, "error": _text}), min_size=1, max_size=4)
_robustness = st.dictionaries(_text, st.fixed_dictionaries({"fs": _numbers | st.none()},
                                                           optional={"acc": _values, "params": _values}) | _scalars,
                              max_size=4)
_geometry = st.fixed_dictionaries({}, optional={k: st.lists(_numbers | st.none() | _text, max_size=4) | _values
                                                for k in ("layers", "eed_layers", "ssdc", "ssdc_rpi", "eed_percent")})
#: results.json dicts: the required keys mostly well-typed, so that the complete-run paths (tables, columns named
#: after resolutions and shifts, plots) are reached with hostile strings and numbers; other shapes come from _values
_results = st.fixed_dictionaries(
    {"status": st.sampled_from(["complete"] * 5 + ["failed", "incomplete", "running", "interrupted", ANSI]),
     "dataset": _text, "pe": _text, "model": _text, "task": _text, "primary_metric": _text,
     "seed": st.integers(0, 3) | st.integers(0, 3) | _values,
     "metrics": st.dictionaries(_text, _numbers | st.none(), max_size=3),
     "extrapolation": _extrapolation | _extrapolation | _values, "robustness": _robustness | _robustness | _values},
    optional={"geometry": _geometry | _values, **{k: _values for k in _KEYS if k not in (
                  "status", "dataset", "pe", "model", "task", "primary_metric", "seed", "metrics", "extrapolation",
                  "robustness", "geometry")}})
_folders = st.sampled_from(["hostile", JS_FOLDER, f"x{ANSI}", "a b%2e", "…", XSS.replace("/", "|")])
_bytes = st.binary(max_size=300) | st.builds(
    lambda head, tail: head + tail,
    st.sampled_from([b'{"status": "complete", "dataset": "', b"[" * 70, b'{"metrics": {"a": ', b"\xef\xbb\xbf{"]),
    st.binary(max_size=40))
_SETTINGS = dict(deadline=timedelta(seconds=4), derandomize=True, database=None)


def _assert_markdown_is_inert(text: str) -> None:
    """No tag and no inline link outside code spans (inside one, nothing is markup)."""
    prose = re.sub(r"`[^`\n]*`", "", text)
    assert not re.search(r"<[A-Za-z/!?]", prose) and "](" not in prose, prose


def _exercise(root: Path, hostile: Path) -> None:
    """Everything that reads the folder: accepted, or listed as a problem; the documented errors only."""
    runs, problems = collect_results(root)
    assert f"{GOOD_RUN}/results.json" in [r.path for r in runs]
    for fmt in FORMATS:
        text = render_format(fmt, runs, problems, root, root / f"LB.{fmt}")
        text.encode("utf-8")  # writable as UTF-8 whatever the file held
        if fmt == "html":
            _assert_page_is_inert(text)
        if fmt == "md":
            _assert_markdown_is_inert(text)
    check_problems, _ = check_results(root)
    for line in check_problems:
        _assert_terminal_safe(terminal_safe(line))
    rows = collect_runs(root)
    assert any(r["run"] == GOOD_RUN and r["status"] == "complete" for r in rows)
    _assert_terminal_safe(format_runs(rows))
    try:
        _assert_terminal_safe(format_run(hostile))
    except ResultsError as e:
        assert "\n" not in str(e)
        _assert_terminal_safe(str(e))


@settings(max_examples=100, **_SETTINGS)
@given(content=_results, folder=_folders)
def test_arbitrary_results_json_is_accepted_or_a_problem(content: dict, folder: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = _good_folder(Path(tmp))
        hostile = _write_run(root, f"shapes/{folder}/vit-nano/seed1",
                             json.dumps(content, allow_nan=True, ensure_ascii=bool(len(str(content)) % 2)))
        _exercise(root, hostile)


@settings(max_examples=150, **_SETTINGS)
@given(content=_values | _bytes)
def test_arbitrary_json_or_bytes_is_accepted_or_a_problem(content) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = _good_folder(Path(tmp))
        data = content if isinstance(content, bytes) else json.dumps(content, allow_nan=True)
        _exercise(root, _write_run(root, "shapes/hostile/vit-nano/seed1", data))


@settings(max_examples=25, **_SETTINGS)
@given(content=_results | _values.map(lambda v: json.dumps(v, allow_nan=True)) | _bytes)
def test_the_commands_answer_arbitrary_files_with_output_or_one_line(content) -> None:
    """``bench leaderboard`` (html), ``--check``, ``bench runs`` and ``bench runs show``: exit 0, or 2 with
    ``bench: error:`` lines; nothing raw reaches the terminal."""
    with tempfile.TemporaryDirectory() as tmp:
        root = _good_folder(Path(tmp) / "results")
        _write_run(root, "shapes/hostile/vit-nano/seed1", json.dumps(content) if isinstance(content, dict) else content)
        argvs = [["leaderboard", "--results", str(root), "--format", "html", "--out", str(Path(tmp) / "LB.html")],
                 ["leaderboard", "--check", str(root)], ["runs", "--results", str(root)],
                 ["runs", "show", "shapes/hostile/vit-nano/seed1", "--results", str(root)]]
        for argv in argvs:
            code, out, err = _run_cli(argv)
            _assert_terminal_safe(out + err)
            assert code in (0, 2), (argv, code, err)
            if code == 2 and argv[1] != "--check":
                assert len(err.strip().splitlines()) == 1 and err.startswith("bench: error: "), err
        _assert_page_is_inert((Path(tmp) / "LB.html").read_text(encoding="utf-8"))

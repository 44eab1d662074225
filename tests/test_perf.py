"""Smoke test of the ``bench perf`` machinery (issue #7): tiny sizes, JSON schema only (no timing asserts);
the suite registry (names known without torch, each suite's module registers its names)."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from pebench.perf import PERF_COMMANDS
from pebench.perf.attention import bench_budget
from pebench.perf.data import bench_analysis
from pebench.perf.model import bench_pe_overhead
from pebench.perf.report import format_markdown, record
from pebench.perf.suites import ALL_SUITES, SUITE_MODULES, SUITES, load_suite
from pebench.perf.timing import interleaved


def test_perf_commands_and_schema(tmp_path, monkeypatch):
    assert {"all", "backbone", "attention-budget", "pe-overhead", "analysis", "data", "attention"} <= set(PERF_COMMANDS)
    calls = []
    t = interleaved({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeats=2, warmup=1)
    assert calls == ["a", "b"] * 3 and set(t) == {"a", "b"}
    r = record("x", "A", "B", 2.0, 4.0, "s", higher_is_better=False, target=1.0)
    assert r["ratio"] == 0.5 and r["meets_target"] is True

    # the real suites at tiny sizes, through the command entry point (writes JSON + markdown)
    from pebench import perf
    # geometry needs a model + dataset: too slow for a smoke test
    suites = {"pe-overhead": bench_pe_overhead, "attention-budget": bench_budget,
              "analysis": lambda quick, tiny: bench_analysis(quick, tiny, with_geometry=False)}
    monkeypatch.setattr(perf, "load_suite", suites.__getitem__)
    js, md = tmp_path / "perf.json", tmp_path / "perf.md"
    assert perf._run("smoke", ["attention-budget", "pe-overhead", "analysis"],
                     ["--tiny", "--json", str(js), "--md", str(md)]) == 0
    rows = json.loads(js.read_text())
    assert len(rows) >= 8  # 4 attention budget rows + 2 PEs vs none + SSDC + EED
    budget = [r for r in rows if r["name"].startswith("attention")]
    assert len(budget) == 4 and sum("target" in r for r in budget) == 2
    mem = next(r for r in budget if "peak memory" in r["name"])
    assert 1.0 < mem["ratio"] < 16.0  # 4x the tokens: more memory, far from N^2 growth
    for row in rows:
        for key, typ in (("name", str), ("a", str), ("b", str), ("a_value", float), ("b_value", float),
                         ("unit", str), ("ratio", float)):
            assert isinstance(row[key], typ), (key, row)
        assert ("target" in row) == ("meets_target" in row)
    overhead = [r for r in rows if r["name"].startswith("pe-overhead")]
    assert overhead and all(r["sdpa_backend"]["fp32"]["backend"] in ("flash (cpu)", "math") for r in overhead)
    assert "| measurement |" in md.read_text() and format_markdown(rows).count("\n") >= len(rows) + 2


def test_bench_perf_cli_defaults_to_all(tmp_path):
    """`bench perf [--json FILE]` (no WHAT) runs every suite (here at smoke sizes, no e2e)."""
    from pebench.cli import build_parser, main
    perf_help = build_parser()._subparsers._group_actions[0].choices["perf"].format_help()
    assert all(name in perf_help for name in PERF_COMMANDS)  # --help lists the registered suites
    js = tmp_path / "perf.json"
    assert main(["perf", "--tiny", "--json", str(js)]) == 0
    names = [r["name"] for r in json.loads(js.read_text())]
    for prefix in ("backbone", "attention fwd+bwd", "pe-overhead", "analysis geometry", "data"):
        assert any(n.startswith(prefix) for n in names), prefix


def test_perf_suite_names_without_torch(tmp_path):
    """`bench --help` lists the suites: importing pebench.perf (and the CLI) must not import torch."""
    code = ("import sys, pebench.perf, pebench.cli; "
            "bad = [m for m in ('torch', 'lightning', 'timm') if m in sys.modules]; "
            "print(list(pebench.perf.PERF_COMMANDS)); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == str(["all", *SUITE_MODULES, "attention"])


def test_perf_suite_modules_register_their_suites():
    """Each suite module registers exactly the suites SUITE_MODULES assigns to it; `all` runs known suites."""
    assert set(ALL_SUITES) <= set(SUITE_MODULES) and len(set(ALL_SUITES)) == len(ALL_SUITES)
    for module in sorted(set(SUITE_MODULES.values())):
        mod = importlib.import_module(f"pebench.perf.{module}")
        registered = {name for name in SUITES.names() if SUITES.get(name).__module__ == mod.__name__}
        assert registered == {n for n, m in SUITE_MODULES.items() if m == module}, module
    for name in SUITE_MODULES:
        assert load_suite(name) is SUITES.get(name) and callable(load_suite(name))
    with pytest.raises(ValueError, match="unknown perf suite 'no-such-suite'.*backbone"):
        load_suite("no-such-suite")

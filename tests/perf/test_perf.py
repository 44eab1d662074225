"""Smoke test of the ``bench perf`` machinery (issue #7): tiny sizes, JSON schema only (no timing asserts);
the suite registry (names known without torch, each suite's module registers its names)."""
from __future__ import annotations

import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pebench.perf import PERF_COMMANDS
from pebench.perf.attention import bench_budget
from pebench.perf.data import bench_analysis
from pebench.perf.model import bench_pe_overhead, step_flops
from pebench.perf.report import format_markdown, record
from pebench.perf.suites import ALL_SUITES, SUITE_MODULES, SUITES, load_suite
from pebench.perf.timing import interleaved, interleaved_times


def test_perf_commands_and_schema(tmp_path, monkeypatch):
    assert {"all", "backbone", "attention-budget", "pe-overhead", "analysis", "data", "attention"} <= set(PERF_COMMANDS)
    calls = []
    t = interleaved({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeats=2, warmup=1)
    assert calls == ["a", "b", "a", "b", "b", "a"] and set(t) == {"a", "b"}  # warm-up, then rounds rotate
    calls.clear()
    times = interleaved_times({k: (lambda k=k: calls.append(k)) for k in "abc"}, repeats=3, warmup=0)
    assert calls == list("abcbcacab") and all(len(v) == 3 for v in times.values())
    r = record("x", "A", "B", 2.0, 4.0, "s", higher_is_better=False, target=1.0)
    assert r["ratio"] == 0.5 and r["meets_target"] is True

    # the real suites at tiny sizes, through the command entry point (writes JSON + markdown)
    from pebench import perf
    # geometry needs a model + dataset: too slow for a smoke test
    suites = {"pe-overhead": bench_pe_overhead, "attention-budget": bench_budget,
              "analysis": lambda quick: bench_analysis(quick, with_geometry=False)}
    monkeypatch.setattr(perf, "load_suite", suites.__getitem__)
    js, md = tmp_path / "perf.json", tmp_path / "perf.md"
    assert perf._run("smoke", ["attention-budget", "pe-overhead", "analysis"],
                     ["--quick", "--json", str(js), "--md", str(md)]) == 0
    rows = json.loads(js.read_text())
    timing = [r for r in rows if r["name"].startswith("perf wall time")]
    assert [r["suite"] for r in timing] == ["attention-budget", "pe-overhead", "analysis"]  # not `all`: no budget row
    rows = [r for r in rows if r not in timing]
    assert len(rows) >= 9  # 5 attention budget rows + 2 PEs vs none + SSDC + EED
    budget = [r for r in rows if r["name"].startswith("attention")]
    assert len(budget) == 5 and sum("target" in r for r in budget) == 2
    mem = next(r for r in budget if "peak memory" in r["name"])
    assert 1.0 < mem["ratio"] < 16.0  # 4x the tokens: more memory, far from N^2 growth
    for row in rows:
        for key, typ in (("name", str), ("a", str), ("b", str), ("a_value", float), ("b_value", float),
                         ("unit", str), ("ratio", float)):
            assert isinstance(row[key], typ), (key, row)
        assert ("target" in row) == ("meets_target" in row)
    overhead = [r for r in rows if r["name"].startswith("pe-overhead")]
    assert overhead and all(r["sdpa_backend"]["fp32"]["backend"] in ("flash (cpu)", "math") for r in overhead)
    # ape adds a table and rope-axial rotates: no counted products beyond none's, so their FLOP floor is 1
    assert all(r["flop_floor"] == 1.0 and r["flops"] == r["flops_none"] > 0 for r in overhead)
    assert "| measurement |" in md.read_text() and format_markdown(rows).count("\n") >= len(rows) + 2


def _check_schema(row: dict) -> None:
    for key, typ in (("name", str), ("a", str), ("b", str), ("a_value", float), ("b_value", float),
                     ("unit", str), ("ratio", float), ("higher_is_better", bool), ("suite", str)):
        assert isinstance(row[key], typ), (key, row)
    assert ("target" in row) == ("meets_target" in row)
    assert row["ratio"] == row["a_value"] / row["b_value"] or not row["b_value"]


def test_bench_perf_quick_runs_every_suite(tmp_path):
    """`bench perf --quick [--json FILE] [--md FILE]` (no WHAT: `all`) runs every suite of ALL_SUITES
    but e2e at smoke-test sizes; the records' structure, not their values (no timing asserts)."""
    from pebench.cli import build_parser, main
    perf_help = build_parser()._subparsers._group_actions[0].choices["perf"].format_help()
    assert all(name in perf_help for name in PERF_COMMANDS)  # --help lists the registered suites
    js, md = tmp_path / "perf.json", tmp_path / "perf.md"
    assert main(["perf", "--quick", "--json", str(js), "--md", str(md)]) == 0
    rows = json.loads(js.read_text())
    for row in rows:
        _check_schema(row)
    ran = [s for s in ALL_SUITES if s != "e2e"]
    *timing, total = [r for r in rows if r["name"].startswith("perf wall time")]
    assert [r["suite"] for r in timing] == ran and total["name"] == "perf wall time all suites"
    assert total["unit"] == "s" and "target" not in total  # --quick: no budget verdict
    assert total["b_value"] == 300.0 and all(r["b_value"] == total["a_value"] for r in timing)  # shares of it
    assert sum(r["a_value"] for r in timing) <= total["a_value"]
    measured = [r for r in rows if not r["name"].startswith("perf wall time")]
    assert {r["suite"] for r in measured} == set(ran)  # every suite gave records
    names = [r["name"] for r in measured]
    for prefix in ("startup", "backbone", "attention fwd+bwd", "pe-overhead", "analysis geometry", "analysis SSDC",
                   "data", "dino", "scene", "detection"):
        assert any(n.startswith(prefix) for n in names), prefix
    for flag in ("--epochs -1", "--batch-size 0", "--lr nan"):  # issue #50 item 9's bounds errors, timed
        row = next(r for r in measured if r["name"] == f"startup bench run {flag} (bounds error)")
        assert row["b_value"] == 1.5 and row["a_value"] > 0 and row["target"] == 1.0
    text = md.read_text()
    assert "--quick" in text.splitlines()[0] and "| measurement |" in text
    assert all(r["name"] in text for r in rows)


def test_every_option_bounds_error_of_bench_run_is_found():
    """`bench perf startup` times one refused value per bounded option of `bench run`, found from
    (their declarations: RunConfig; the issue's three first), --seed among them (Lightning's range)."""
    from pebench.perf.startup import bounds_errors
    pairs = bounds_errors()
    assert pairs[:3] == [("--epochs", "-1"), ("--batch-size", "0"), ("--lr", "nan")]
    flags = [f for f, _ in pairs]
    assert {"--drop-path", "--num-nodes", "--stop-at", "--max-skipped-fraction", "--threads"} <= set(flags)
    assert "--seed" in flags and len(flags) == len(set(flags))


def test_perf_e2e_quick_is_a_fast_dev_run(monkeypatch):
    """`bench perf e2e --quick`: the same subprocess `bench run`, with --fast-dev-run (not run here:
    the real command is tested elsewhere); no budget verdict on the smoke run."""
    from pebench.perf import data
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")
    monkeypatch.setattr(data.subprocess, "run", fake_run)
    monkeypatch.setattr(data, "_train_epoch_data_seconds", lambda quick: (0.5, 64))  # not timed here
    monkeypatch.setattr(data, "matmul_gflops", lambda n=1024, repeats=5: 100.0)
    quick_rows, full_rows = data.bench_e2e(quick=True), data.bench_e2e(quick=False)
    (quick, *_), (full, *_) = quick_rows, full_rows
    runs = [c for c in calls if "run" in c]  # the `bench run` subprocesses
    assert "--fast-dev-run" in runs[0] and "--fast-dev-run" not in runs[1] and len(runs) == 2
    assert calls == runs  # the start-up is read from the run itself, not timed again in another interpreter
    assert "target" not in quick and full["target"] == 1.0 and "fast-dev-run" in quick["note"]
    names = [r["name"] for r in full_rows]  # the breakdown and the machine's matmul throughput follow
    assert any("imports" in n for n in names) and any("training data" in n for n in names)
    assert full_rows[-1]["a_value"] == 100.0 and "matmul" in full_rows[-1]["name"]


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


def test_perf_attention_quick_rows_and_memory_growth(tmp_path):
    """`bench perf attention --quick`: per PE, attention implementation and phase (tiny sizes), the
    eval-phase memory growth table, the markdown page; structure only (no timing asserts)."""
    from pebench.perf.attention import PHASES, layer_impls, main, memory_growth
    js, md = tmp_path / "attn.json", tmp_path / "attn.md"
    assert main(["--quick", "--pes", "none,rope-axial,alibi,pape", "--impls", "sdpa,dense",
                 "--json", str(js), "--md", str(md)]) == 0
    rows = json.loads(js.read_text())
    cells = {(r["n_tokens"], r["phase"], r["pe"], r["variant"], r["impl"]) for r in rows}
    for n in (16, 64):
        for phase in PHASES:
            assert {(n, phase, "none", "default", "sdpa"), (n, phase, "alibi", "default", "dense"),
                    (n, phase, "pape", "default", "sdpa"), (n, phase, "pape", "impl=naive", "dense")} <= cells
    assert len(cells) == len(rows) == 2 * 2 * 5  # no dense for PEs without a bias (the same call as sdpa)
    for r in rows:
        assert r["time_ms"] > 0 and r["peak_mem_mb"] > 0 and r["device"] == "cpu" and isinstance(r["auto"], bool)
    assert all(r["auto"] for r in rows)  # below FLEX_MIN_TOKENS, auto is dense for bias PEs
    growth = memory_growth(rows)
    assert {(g["pe"], g["variant"], g["phase"]) for g in growth} == {
        (p, v, ph) for p, v in (("none", "default"), ("rope-axial", "default"), ("alibi", "default"),
                                ("pape", "default"), ("pape", "impl=naive")) for ph in PHASES}
    assert all(g["n"] == 16 and g["ratio"] > 0 and g["meets_target"] == (g["ratio"] <= 4.5) for g in growth)
    text = md.read_text()
    assert text.startswith("# Attention cost per positional encoding") and "--tokens 16,64" in text
    assert "Peak memory growth at 4×" in text and text.count("| 16 → 64 |") == len(growth)
    # which implementations a PE's layer accepts, per phase (CPU: no FlexAttention backward)
    assert layer_impls("none", None, 16, "cpu", True) == ["sdpa"]
    assert layer_impls("none", None, 16, "cpu", False) == ["sdpa", "flex"]
    assert layer_impls("alibi", None, 16, "cpu", True) == ["dense"]
    assert layer_impls("alibi", None, 16, "cpu", False) == ["dense", "flex"]
    assert layer_impls("pape", "naive", 16, "cpu", False) == ["dense"]
    assert layer_impls("alibi", None, 16, "cuda", True) == ["dense", "flex"]
    assert layer_impls("rpb", None, 16, "cpu", True) == ["dense", "bias-flash"]  # a learned bias: both paths
    assert layer_impls("rpb", None, 16, "cuda", True) == ["dense", "flex"]


def test_budget_step_with_pape_augmentation_held_constant():
    """``attention_step(..., "frozen-augment")``: PaPE's q augmentation runs once, without gradient, and later steps
    reuse it (the same columns the real layer computes from the same inputs); the step then trains no PaPE parameter.
    Refused for any PE but pape."""
    from pebench.perf.attention import attention_step
    dev = torch.device("cpu")
    real, frozen = (attention_step("pape", impl, 16, 8, 1, dev, dtype=torch.float64) for impl in ("sdpa", "frozen-augment"))
    held = frozen.layer.augment
    inner, seen = held.augment, []
    held.augment = lambda *args: seen.append(args) or inner(*args)
    for step in (real, frozen, frozen, frozen):
        step()
    assert len(seen) == 1  # the first frozen step only
    qa, const = held.kept
    assert const is None and not qa.requires_grad
    assert torch.equal(qa, real.layer.augment(*seen[0])[0])  # same seed: the same parameters and inputs
    assert all(p.grad is not None for p in real.layer.parameters() if p.requires_grad)
    assert all(p.grad is None for p in frozen.layer.parameters())
    with pytest.raises(ValueError, match="applies to pe='pape'"):
        attention_step("rope-axial", "frozen-augment", 16, 8, 1, dev)


def test_perf_attention_flex_eval_cell():
    """A forced `flex` cell (evaluation on CPU) runs compiled FlexAttention, untimed compilation first."""
    from pebench.perf.attention import run
    (row,) = run([64], head_dim=16, pes=["alibi"], impls=["flex"], phases=["eval"], repeats=1, verbose=False)
    assert (row["impl"], row["phase"], row["auto"]) == ("flex", "eval", False) and row["peak_mem_mb"] > 0
    with pytest.raises(ValueError, match="unknown implementation"):
        run([64], pes=["alibi"], impls=["auto"], verbose=False)


_DENORMAL_PROBE = """
import torch
from pebench.runner.numerics import denormals_flushed, flush_denormals
torch.set_num_threads(2)
if {mode!r} == "early":
    flush_denormals()
before = denormals_flushed()  # also creates the worker pool
if {mode!r} == "late":
    flush_denormals()
print(before, denormals_flushed())
"""


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="flush-to-zero is an x86 SSE mode (pebench.runner.numerics)")
def test_perf_attention_flushes_denormals_on_every_thread_and_its_page_says_what_it_measured(tmp_path):
    """`bench perf attention` flushes denormals before torch's worker threads exist, as `bench run` does (it did
    not before 2026-12-06, while its page said it did: PaPE's layer, whose logits underflow, then trained
    3.4x slower). The page's sentence comes from a probe that sees the workers: it says no in a process before
    it flushed and after a flush that came once its pool existed, yes in one that flushed first."""
    def probe(mode: str) -> str:
        r = subprocess.run([sys.executable, "-c", _DENORMAL_PROBE.format(mode=mode)], capture_output=True,
                           text=True, timeout=120, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()
    assert probe("late") == "False False"  # not flushed; then the workers made before the flush keep denormals
    assert probe("early") == "True True"
    md = tmp_path / "attn.md"
    r = subprocess.run([sys.executable, "-m", "pebench.cli", "perf", "attention", "--quick", "--pes", "none",
                        "--phases", "eval", "--impls", "sdpa", "--md", str(md)], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert r.returncode == 0, r.stderr
    assert "Denormals are flushed to zero, as in `bench run`." in md.read_text()


def test_contention_records_medians_and_each_rounds_ratio(monkeypatch):
    """bench perf contention (its process launching replaced): per setting and load the medians over ROUNDS rounds
    of the loaded and idle times, each round's loaded / idle ratio kept for the report's interval, and the fair
    share of each load (1 + competing threads / the training's)."""
    from pebench.perf import contention

    calls = []  # (setting, load_procs) in the order the suite measures; the time is the call's number

    def fake_timed(setting, steps, load_procs):
        calls.append((setting, load_procs))
        return float(len(calls))
    monkeypatch.setattr(contention, "_timed", fake_timed)
    rows = contention.bench_contention(quick=False)
    n, levels = len(contention.SETTINGS), contention.LOAD_LEVELS
    per = 1 + len(levels)  # calls per setting and round: idle, then each load
    extra = contention.AUTO_ROUNDS - contention.ROUNDS  # auto alone after the full rounds
    assert levels == (1, 2) and extra > 0 and len(calls) == contention.ROUNDS * n * per + extra * per
    assert calls[contention.ROUNDS * n * per:] == [("auto", load) for _ in range(extra) for load in (0, *levels)]

    def t(setting, load, r):  # the fake time of that measurement
        return float(r * n * per + list(contention.SETTINGS).index(setting) * per + [0, *levels].index(load) + 1)
    for load in levels:
        rec = next(r for r in rows if r["name"].startswith(f"contention default: 10 training steps beside {load} x"))
        idle = [t("default", 0, r) for r in range(contention.ROUNDS)]
        busy = [t("default", load, r) for r in range(contention.ROUNDS)]
        assert rec["b_value"] == sorted(idle)[1] and rec["a_value"] == sorted(busy)[1] and rec["target"] == 2.5
        assert rec["round_ratios"] == [round(b / i, 4) for b, i in zip(busy, idle)]
        assert rec["load_procs"] == load and rec["fair_share"] == 1 + load
    for phase in ("idle", "loaded"):  # each other setting's absolute times against the default's
        rows_p = [r for r in rows if r["name"].startswith(f"contention {phase} ")]
        assert len(rows_p) == (n - 1) * (1 if phase == "idle" else len(levels))
        assert all(len(r["round_ratios"]) == contention.ROUNDS for r in rows_p)
    for load in levels:  # auto: every round, its extra ones included; the cross-setting records: the full rounds
        rec = next(r for r in rows if r["name"].startswith(f"contention auto: 10 training steps beside {load} x"))
        first = contention.ROUNDS * n * per
        idle = [t("auto", 0, r) for r in range(contention.ROUNDS)] + [first + e * per + 1.0 for e in range(extra)]
        busy = [t("auto", load, r) for r in range(contention.ROUNDS)] + [first + e * per + 1.0 + levels.index(load) + 1
                                                                          for e in range(extra)]
        assert rec["round_ratios"] == [round(b / i, 4) for b, i in zip(busy, idle)]
        assert rec["b_value"] == statistics.median(idle) and rec["a_value"] == statistics.median(busy)
        assert f"{contention.AUTO_ROUNDS} round(s)" in rec["note"]
    auto_idle = next(r for r in rows if r["name"] == "contention idle auto / default")
    assert auto_idle["a_value"] == statistics.median([t("auto", 0, r) for r in range(contention.ROUNDS)])
    passive = next(r for r in rows if r["name"] == "contention loaded passive / default beside 2 x 2-thread load")
    assert passive["round_ratios"] == [round(t("passive", 2, r) / t("default", 2, r), 4)
                                       for r in range(contention.ROUNDS)]


def test_data_suite_finds_the_real_dataset_fixtures():
    """The `data` suite times the real-format loaders (UCF101, DvsGesture) on the test fixtures; when the fixtures
    module moved to tests/support/ the suite silently skipped them, so their location is checked here."""
    from pebench.perf import data
    fx = data._fixtures()
    assert fx is not None and callable(fx.ucf101) and callable(fx.dvsgesture)


class _OneAttention(torch.nn.Module):
    """q, k, v from one linear map of ``(B, N, D)``, then one SDPA call (CPU flash kernel)."""

    def __init__(self, D: int, H: int, dq: int) -> None:
        super().__init__()
        self.H, self.dq = H, dq
        self.lin = torch.nn.Linear(D, H * dq * 3, bias=False)

    def forward(self, x):
        B, N, _ = x.shape
        q, k, v = self.lin(x).view(B, N, 3, self.H, self.dq).permute(2, 0, 3, 1, 4)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v).mean(dim=(1, 2))  # (B, dq): "logits"


def test_step_flops_counts_the_cpu_flash_kernel_by_hand():
    """One linear map and one CPU flash SDPA call: the count is the hand formula (forward: q k^T and P v;
    backward: the scores recomputed, then dP, dV, dQ, dK; the linear map: forward, input and weight grads)."""
    B, N, D, H, dq = 2, 16, 8, 2, 4
    model = _OneAttention(D, H, dq)
    x, y = torch.randn(B, N, D, requires_grad=True), torch.randint(0, dq, (B,))
    attn = 2 * B * H * N * N * dq  # one (N x dq) @ (dq x N) product per (batch, head), 2 FLOPs per multiply-add
    lin = 2 * B * N * D * (3 * H * dq)
    assert step_flops(model, x, y) == 2 * attn + 5 * attn + 3 * lin
    assert all(p.grad is None for p in model.parameters())  # the counting step leaves no gradients


def test_cpu_model_read_from_cpuinfo(tmp_path):
    from pebench.perf.report import cpu_model
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)   CPU @ 2.20GHz\n"
                    "processor\t: 1\nmodel name\t: other\n")
    assert cpu_model(str(info)) == "Intel(R) Xeon(R) CPU @ 2.20GHz"  # the first, whitespace collapsed
    assert cpu_model(str(tmp_path / "absent")) in (None, __import__("platform").processor() or None)


def test_contention_load_ends_with_its_parent(tmp_path):
    """A competing process of `bench perf contention` ends by itself when the suite's process is gone (a suite
    killed by a signal runs no `finally` to end it): a parent starts one, writes its pid and exits at once."""
    import os
    import subprocess
    import sys
    import time

    from pebench.perf import contention

    pid_file = tmp_path / "pid"
    parent = ("import os, subprocess, sys\n"
              f"p = subprocess.Popen([sys.executable, '-c', {contention._LOAD!r}, str(os.getpid())])\n"
              f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n")
    subprocess.run([sys.executable, "-c", parent], check=True, timeout=60)
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return  # gone (reaped by init once it exited)
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split(") ")[-1].startswith("Z"):
                return  # exited, not yet reaped
        time.sleep(0.2)
    os.kill(pid, 9)
    raise AssertionError("the competing process outlived its parent by 60 s")


def test_perf_records_carry_the_commit_they_were_measured_at(tmp_path, monkeypatch):
    """`bench perf` writes each record with `commit` (the checkout's HEAD, marked when tracked files differ) and
    names it in the markdown header; a record that already has one keeps it."""
    from pebench.perf import report
    commit = report.code_commit()
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=Path(report.__file__).parent,
                          capture_output=True, text=True)
    if head.returncode == 0:  # a git checkout (CI clones one): the commit is HEAD's
        assert commit.split(" ")[0] == head.stdout.strip()
    monkeypatch.setattr(report, "code_commit", lambda: "abc123def456")
    out = tmp_path / "p.json"
    report.write_outputs([report.record("x", "a", "b", 1.0, 2.0, "s"), {**report.record("y", "a", "b", 1.0, 1.0, "s"),
                                                                         "commit": "old"}],
                         str(out), None, "h", echo=False)
    assert [r["commit"] for r in json.loads(out.read_text())] == ["abc123def456", "old"]


def test_perf_commit_is_read_once_and_ignores_changed_outputs():
    """`code_commit` is read once per process (the suites' header, before they write), and only changed code marks
    it: a command's own outputs (docs/perf.json) do not."""
    from pebench.perf import report
    assert report.code_commit() is report.code_commit()  # cached
    report.code_commit.cache_clear()
    r = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ":/*.py", ":/*.toml"],
                       cwd=Path(report.__file__).parent, capture_output=True, text=True)
    if r.returncode == 0:
        assert ("+uncommitted changes" in report.code_commit()) == bool(r.stdout.strip())


def test_pe_overhead_times_an_untimed_round_first_and_heavy_pes_alone():
    """`pe-overhead`'s interleave: one warm-up step per PE (which sorts out the heavy ones), one untimed round of the
    shared blocks, then `reps` timed rounds; a PE whose warm-up step took over HEAVY_STEP x none's gets its own
    interleave with `none` (HEAVY_REPS rounds, no untimed one)."""
    import time as time_mod

    from pebench.perf import model as perf_model

    calls: dict[str, int] = {}

    def block(name: str, secs: float = 0.0):
        def run():
            calls[name] = calls.get(name, 0) + 1
            if secs:
                time_mod.sleep(secs)
        return run
    single = {"none": block("none step", 0.002), "ape": block("ape step", 0.002), "liere": block("liere step", 0.05)}
    blocks = {pe: block(pe) for pe in single}
    shared, alone = perf_model._overhead_times(single, blocks, reps=4)
    assert set(shared) == {"none", "ape"} and set(alone) == {"liere"}
    assert [len(shared[k]) for k in ("none", "ape")] == [4, 4] and len(alone["liere"]["liere"]) == perf_model.HEAVY_REPS
    assert calls["ape"] == 4 + 1 and calls["liere"] == perf_model.HEAVY_REPS  # the untimed round: shared only
    assert calls["none"] == 4 + 1 + perf_model.HEAVY_REPS
    assert all(calls[f"{pe} step"] == 1 for pe in single)
    calls.clear()
    perf_model._overhead_times(single, blocks, reps=4, warmup=0)
    assert calls["ape"] == 4

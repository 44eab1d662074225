"""``--deterministic`` reproduces a run bit for bit in separate processes and across CPU kernel paths.

The cause of the divergence it guards against (measured, see ``pebench.runner.numerics``): torch picks
AVX2 or AVX-512 CPU kernels from the host, and the two round differently. The second process
below is started as an AVX-512 host would start it (``ATEN_CPU_CAPABILITY=avx512``; on a host
without AVX-512 torch falls back to what it has), so equal numbers show that the pins decide the
kernel path, not the host.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

TINY = {"dataset": "shapes", "pe": "rope-axial", "epochs": 1, "batch_size": 16, "lr": 2e-3, "resolution": 16,
        "data": {"train_size": 64, "val_size": 64}, "analyses": "geometry,robustness", "progress_bar": False,
        "accelerator": "cpu"}
X86 = platform.machine().lower() in ("x86_64", "amd64")


def _start(tmp_path: Path, name: str, extra_env: dict[str, str]) -> tuple[subprocess.Popen, Path]:
    cfg = tmp_path / f"{name}.yaml"  # one file per run: the other process may be reading its own
    cfg.write_text(yaml.safe_dump(TINY))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "LOCAL_RANK", "RANK", "WORLD_SIZE", "ATEN_CPU_CAPABILITY", "MKL_CBWR",
                        "ONEDNN_MAX_CPU_ISA")}
    env.update(extra_env)
    out = tmp_path / name
    proc = subprocess.Popen([sys.executable, "-m", "pebench.cli", "run", "--config", str(cfg), "--deterministic",
                             "--out", str(out)], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    return proc, out


def _finish(proc: subprocess.Popen, out: Path) -> dict:
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    (res,) = list(out.rglob("results.json"))
    return json.loads(res.read_text())


@pytest.mark.slow
def test_deterministic_runs_are_bit_identical_across_processes_and_kernel_paths(tmp_path):
    # both processes at once: their start-up overlaps, and neither can see the other's numbers
    started = [_start(tmp_path, "a", {}), _start(tmp_path, "b", {"ATEN_CPU_CAPABILITY": "avx512"})]
    try:
        a, b = (_finish(*s) for s in started)
    finally:  # a failed first run leaves no second one running after the test
        for proc, _ in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert a["status"] == b["status"] == "complete"
    assert set(a["metrics"]) >= {"val/acc1", "val/loss"}
    for key in ("metrics", "geometry", "robustness"):
        assert a[key] == b[key], key  # identical, not close
    for rec in (a, b):
        pins = rec["numerics"]["deterministic_pins"]
        assert pins["requested"]
        if X86:
            assert pins["applied"] and rec["numerics"]["torch_cpu_capability"] == "AVX2"
            assert pins["env"]["ATEN_CPU_CAPABILITY"] == "avx2"


def test_pins_do_not_apply_once_torch_is_imported(monkeypatch):
    import torch  # noqa: F401 - the situation under test: torch already loaded in this process

    from pebench.runner import numerics

    monkeypatch.setattr(numerics, "_state", {"requested": False, "applied": False, "reason": None, "flush_denormal": False})
    for key in numerics.PINNED_ENV:  # setenv first so that teardown restores the variable's absence
        monkeypatch.setenv(key, "unset")
        monkeypatch.delenv(key)
    applied = numerics.pin_cpu_numerics()
    rec = numerics.numerics_record()
    assert applied is False and rec["deterministic_pins"]["applied"] is False
    assert rec["deterministic_pins"]["reason"]
    assert rec["torch_cpu_capability"]  # what the process really runs is recorded either way
    assert not any(k in os.environ for k in numerics.PINNED_ENV)  # nothing leaks to later children


def test_pins_leave_no_trace_in_this_process():
    """The test above must not leak the pins into later tests (torch.compile under an AVX2 pin on
    an AVX-512 host produced NaN losses, which is why --deterministic --compile is refused)."""
    from pebench.runner import numerics

    assert not any(k in os.environ and os.environ[k] == v for k, v in numerics.PINNED_ENV.items())


def test_deterministic_and_compile_conflict():
    from pebench.cli import main

    assert main(["run", "--deterministic", "--compile", "--print-config"]) == 2

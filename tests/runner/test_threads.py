"""The CLI's OpenMP wait (pebench.runner.threads): passive on a busy machine, a bounded spin on an idle one,
the user's choice kept, a parent's choice re-made, nothing changed once torch is loaded. Fresh interpreters,
so that torch is not imported yet."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pebench.runner.threads import machine_busy

CODE = ("import os, sys\n"
        "{pre}\n"
        "from pebench.runner.threads import choose_omp_wait\n"
        "print(choose_omp_wait({busy}), os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT'),\n"
        "      os.environ.get('PEBENCH_OMP_WAIT'), 'torch' in sys.modules)\n")
_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "PEBENCH_OMP_WAIT")


def _run(pre: str = "", busy: str = "None", **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in _VARS}
    out = subprocess.run([sys.executable, "-c", CODE.format(pre=pre, busy=busy)], env={**base, **env},
                         capture_output=True, text=True, check=True, timeout=300)
    return out.stdout.strip()


@pytest.mark.parametrize("pre,busy,env,want", [
    ("", "True", {}, "passive PASSIVE None passive False"),                     # busy machine: passive
    ("", "False", {}, "spin-30k None 30000 spin-30k False"),                    # idle machine: bounded spin
    ("", "True", {"OMP_WAIT_POLICY": "active"}, "user active None None False"),  # the user's choice is kept
    ("", "False", {"GOMP_SPINCOUNT": "500"}, "user None 500 None False"),        # the user's spin is kept
    ("import torch", "True", {}, "unchanged None None None True"),              # too late: environment untouched
    # a parent bench process chose spin-30k on an idle machine; this one starts on a busy one: decided again
    ("", "True", {"GOMP_SPINCOUNT": "30000", "PEBENCH_OMP_WAIT": "spin-30k"}, "passive PASSIVE None passive False"),
    ("", "False", {"OMP_WAIT_POLICY": "PASSIVE", "PEBENCH_OMP_WAIT": "passive"},
     "spin-30k None 30000 spin-30k False"),
])
def test_choose_omp_wait(pre, busy, env, want):
    assert _run(pre, busy, **env) == want


@pytest.mark.parametrize("lines,want", [
    (["0.10 0.20 0.30 1/80 123"], False),                                # only the reading thread runs
    (["4.0 3.0 2.0 5/94 123"] * 3, True),                                # 4 other runnable threads throughout
    (["4.0 3.0 2.0 5/94 123", "4.0 3.0 2.0 1/94 123", "4.0 3.0 2.0 5/94 123"], False),  # a transient: min is 0
    (["garbage"], None),                                                 # unreadable: unknown
])
def test_machine_busy_reads_the_running_count(tmp_path, lines, want):
    """``/proc/loadavg``'s 4th field counts the reading thread: busy means another runnable thread in every
    sample; a file per sample stands in for the kernel's (the function rereads the path each time)."""
    path = tmp_path / "loadavg"
    reads = iter(lines * 3 if len(lines) == 1 else lines)

    class Reader:  # rewrites the file before each read
        def __fspath__(self) -> str:
            path.write_text(next(reads) + "\n")
            return str(path)

    assert machine_busy(samples=len(lines) if len(lines) > 1 else 3, interval_s=0.0, loadavg=Reader()) is want


def test_machine_busy_without_proc(tmp_path):
    assert machine_busy(loadavg=str(tmp_path / "absent")) is None


def test_bench_cli_chooses_the_wait_before_torch():
    code = ("import os, sys\nfrom pebench.cli.parser import main\n"
            "import contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()): main([])\n"
            "print(os.environ.get('PEBENCH_OMP_WAIT'), 'OMP_WAIT_POLICY' in os.environ or 'GOMP_SPINCOUNT' in os.environ)\n")
    base = {k: v for k, v in os.environ.items() if k not in _VARS}
    out = subprocess.run([sys.executable, "-c", code], env=base, capture_output=True, text=True, check=True,
                         timeout=300)
    assert out.stdout.strip().splitlines()[-1] in ("passive True", "spin-30k True")

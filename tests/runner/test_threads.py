"""The CLI's OpenMP wait policy (pebench.runner.threads): passive by default, the user's choice kept,
nothing changed once torch is loaded. Fresh interpreters, so that torch is not imported yet."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

CODE = ("import os, sys\n"
        "{pre}\n"
        "from pebench.runner.threads import prefer_passive_omp_wait\n"
        "print(prefer_passive_omp_wait(), os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)\n")


def _run(pre: str = "", **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run([sys.executable, "-c", CODE.format(pre=pre)], env={**base, **env}, capture_output=True,
                         text=True, check=True, timeout=300)
    return out.stdout.strip()


@pytest.mark.parametrize("pre,env,want", [
    ("", {}, "True PASSIVE False"),                                 # unset: passive
    ("", {"OMP_WAIT_POLICY": "active"}, "False active False"),      # the user's choice is kept
    ("import torch", {}, "False None True"),                        # too late: environment untouched
    ("", {"GOMP_SPINCOUNT": "10000"}, "False None False"),          # the user's bounded spin is kept
    ("", {"GOMP_SPINCOUNT": "10000", "OMP_WAIT_POLICY": "PASSIVE"}, "True PASSIVE False"),  # both set: kept
])
def test_prefer_passive_omp_wait(pre, env, want):
    assert _run(pre, **env) == want


def test_bench_cli_sets_the_policy_before_torch():
    code = ("import os, sys\nfrom pebench.cli.parser import main\n"
            "import contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()): main([])\n"
            "print(os.environ.get('OMP_WAIT_POLICY'))\n")
    base = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], env=base, capture_output=True, text=True, check=True,
                         timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "PASSIVE"

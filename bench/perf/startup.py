"""``bench perf startup``: wall time of ``bench --help`` and ``bench run --help`` in fresh processes
against the 1-second budget (docs/architecture.md §6): argument parsing must not import torch."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from .report import record
from .suites import SUITES
from .timing import interleaved

__all__ = ["STARTUP_BUDGET_S", "bench_startup", "bench_command"]

#: ``bench --help`` budget (docs/architecture.md §6), seconds of wall time
STARTUP_BUDGET_S = 1.0


def bench_command() -> list[str]:
    """The ``bench`` console script installed beside this interpreter (what a user runs), else
    ``python -m pebench.cli``."""
    script = Path(sys.executable).parent / "bench"
    if script.is_file():
        return [str(script)]
    found = shutil.which("bench")
    return [found] if found else [sys.executable, "-m", "pebench.cli"]


@SUITES.register("startup")
def bench_startup(quick: bool = False) -> list[dict]:
    """Wall time of ``bench --help`` and ``bench run --help`` in fresh processes (medians,
    interleaved, after one warm-up round that fills the OS file cache) against the 1-second
    budget, beside the bare interpreter start (``python -c pass``) for reference."""
    cmd = bench_command()

    def call(argv: list[str]) -> Callable[[], None]:
        return lambda: subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)

    repeats = 1 if quick else 7
    t = interleaved({"help": call([*cmd, "--help"]), "run-help": call([*cmd, "run", "--help"]),
                     "python": call([sys.executable, "-c", "pass"])}, repeats=repeats, warmup=1)
    shown = "the installed `bench` script" if len(cmd) == 1 else "`python -m pebench.cli`"  # no machine path
    note = (f"{shown}, medians of {repeats} fresh processes; bare interpreter start "
            f"(python -c pass) {t['python']:.3f} s")
    return [record("startup bench --help", "wall time", "budget", t["help"], STARTUP_BUDGET_S, "s",
                   higher_is_better=False, target=1.0, note=note),
            record("startup bench run --help", "wall time", "budget", t["run-help"], STARTUP_BUDGET_S, "s",
                   higher_is_better=False, target=1.0)]

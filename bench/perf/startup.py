"""``bench perf startup``: wall time of ``bench --help`` and ``bench run --help`` in fresh processes
against the 1-second budget (docs/architecture.md §6): argument parsing must not import torch; and of every
option-bounds error of ``bench run`` (``--epochs -1``, ``--batch-size 0``, ``--lr nan``, ...) against the
1.5-second budget of issue #50 item 9: a bad value answers before the heavy imports."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from .report import record
from .suites import SUITES
from .timing import interleaved

__all__ = ["STARTUP_BUDGET_S", "BOUNDS_ERROR_BUDGET_S", "bench_startup", "bench_command", "bounds_errors"]

#: ``bench --help`` budget (docs/architecture.md §6), seconds of wall time
STARTUP_BUDGET_S = 1.0
#: an option-bounds error of ``bench run`` (issue #50 item 9), seconds of wall time on an idle 2-core machine
BOUNDS_ERROR_BUDGET_S = 1.5
#: the bounds errors the issue names, in its order: what ``--quick`` times
NAMED_BOUNDS_ERRORS = (("--epochs", "-1"), ("--batch-size", "0"), ("--lr", "nan"))
#: values tried, in order, for each numeric flag of ``bench run``: the first one refused is its bounds error
_BAD_VALUES = ("-1", "0", "nan", "inf")


def bounds_errors() -> list[tuple[str, str]]:
    """``(flag, value)`` for every numeric option of ``bench run`` with a bound: the issue's three
    (:data:`NAMED_BOUNDS_ERRORS`), then for each other option its first value among :data:`_BAD_VALUES` that
    fits the option's type but not its declared range (finite, inside its bounds). Read from the options' declarations (``RunConfig``, torch-free),
    not listed by hand; :func:`bench_startup` then checks that ``bench run`` refuses each one."""
    from pebench.core.errors import ConfigError  # deferred: only the full startup suite needs the declarations
    from pebench.core.options import declared_options  # deferred: as above
    from pebench.runner.config import RunConfig  # deferred: as above

    found = list(NAMED_BOUNDS_ERRORS)
    named = dict(NAMED_BOUNDS_ERRORS)
    for opt in declared_options(RunConfig):
        if opt.kind not in ("int", "float") or opt.cli_flag in named:
            continue
        for value in _BAD_VALUES:
            try:
                number = opt.coerce(value)
            except ConfigError:  # not of the option's type (nan for an int): argparse's error, not a bound
                continue
            try:
                opt.check(number)
            except ConfigError:
                found.append((opt.cli_flag, value))
                break
    return found


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
    budget, beside the bare interpreter start (``python -c pass``) for reference; then each
    option-bounds error of ``bench run`` (:func:`bounds_errors`; ``--quick``: the three the issue names)
    against 1.5 s, medians of 3 fresh processes, interleaved."""
    cmd = bench_command()

    def call(argv: list[str]) -> Callable[[], None]:
        return lambda: subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)

    repeats = 1 if quick else 7
    t = interleaved({"help": call([*cmd, "--help"]), "run-help": call([*cmd, "run", "--help"]),
                     "python": call([sys.executable, "-c", "pass"])}, repeats=repeats, warmup=1)
    shown = "the installed `bench` script" if len(cmd) == 1 else "`python -m pebench.cli`"  # no machine path
    note = (f"{shown}, medians of {repeats} fresh processes; bare interpreter start "
            f"(python -c pass) {t['python']:.3f} s")
    rows = [record("startup bench --help", "wall time", "budget", t["help"], STARTUP_BUDGET_S, "s",
                   higher_is_better=False, target=1.0, note=note),
            record("startup bench run --help", "wall time", "budget", t["run-help"], STARTUP_BUDGET_S, "s",
                   higher_is_better=False, target=1.0)]
    pairs = list(NAMED_BOUNDS_ERRORS) if quick else bounds_errors()
    with tempfile.TemporaryDirectory(prefix="pebench-bounds-") as tmp:

        def refused(flag: str, value: str) -> Callable[[], None]:
            def fn() -> None:  # from an empty folder, as a user would; a run that starts is a bug, not a time
                r = subprocess.run([*cmd, "run", flag, value], cwd=tmp, capture_output=True, text=True, timeout=120)
                if r.returncode != 2 or any(Path(tmp).iterdir()):
                    raise RuntimeError(f"bench run {flag} {value}: exit {r.returncode}, expected the one-line bounds "
                                       f"error (exit 2) and nothing written: {r.stderr.strip()[-300:]}")
            return fn

        tb = interleaved({f"{f} {v}": refused(f, v) for f, v in pairs}, repeats=1 if quick else 3, warmup=0)
    for key, seconds in tb.items():
        rows.append(record(f"startup bench run {key} (bounds error)", "wall time", "budget", seconds,
                           BOUNDS_ERROR_BUDGET_S, "s", higher_is_better=False, target=1.0,
                           note=f"{shown} in an empty folder, median of {1 if quick else 3} fresh processes"))
        print(f"  bench run {key}: {seconds:.2f} s", flush=True)
    return rows

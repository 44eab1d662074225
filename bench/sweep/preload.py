"""``bench sweep --preload``: import ``bench run``'s machinery once per sweep worker, fork each run.

Why. A ``bench run`` process spends about 7 s importing torch, Lightning and torchmetrics before it
does anything (measured on the 2-core machine: ``python -c "import lightning"`` 8.3 s, the whole
``pebench.runner.run`` import 7-10 s). The committed probe sweep runs about 280 short runs on 2 workers, so
imports alone cost it about 16 minutes. :func:`preload_runner` makes each sweep worker import once,
then ``fork()`` a child per run that executes ``bench run``'s command line in-process. The child is
a copy of the preloaded worker: every run still gets a fresh process (its own seeds, global torch
flags, Lightning state), as with the default subprocess runner.

What the preloaded worker sets before importing torch, from the first run it sees, because torch
reads them once at import: ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` (``RunSpec.threads``) and, for
``--deterministic`` runs, the CPU kernel pins (:func:`pebench.runner.numerics.pin_cpu_numerics`). A later
run that needs other values, a run of several processes (``--devices`` / ``--num-nodes`` > 1: its
ranks re-execute the command line), a platform without ``fork`` or a worker that has already
imported torch (the sweep's own process, which runs a single-worker sweep and the final pass) get
the default subprocess runner instead (:func:`pebench.sweep.local.default_runner`).

The parent imports but never runs a torch operation or initialises CUDA, so the children start
with no thread pool and no CUDA context of their own to inherit. Ctrl-C and a killed worker behave
as with the default runner: the child gets SIGINT and time to record ``interrupted``, and asks the
kernel for SIGTERM when its worker dies.
"""
from __future__ import annotations

import importlib
import os
import signal
import sys
import time
import traceback
from typing import Any

from pebench.runner.numerics import pin_cpu_numerics
from pebench.sweep.local import INTERRUPT_GRACE_S, RunSpec, default_runner, die_with_parent, runner_env

__all__ = ["preload_runner", "preloaded_state"]

#: the module whose ``main(argv)`` is ``bench`` (what ``RunSpec.command()`` runs with ``python -m``)
ENTRY_MODULE = "pebench.cli"

#: what this process preloaded with: {"threads": ..., "deterministic": ...}; empty before the first run
_preloaded: dict[str, Any] = {}


def preloaded_state() -> dict[str, Any]:
    """The settings this process preloaded with (empty when it has not preloaded)."""
    return dict(_preloaded)


def _wants(spec: RunSpec) -> dict[str, Any]:
    return {"threads": spec.threads, "deterministic": bool(getattr(spec, "deterministic", False))}


def _can_preload(spec: RunSpec) -> bool:
    if not hasattr(os, "fork") or not getattr(spec, "single_process", False):
        return False
    if _preloaded:
        return _preloaded == _wants(spec)
    return "torch" not in sys.modules  # too late to set threads and pins in this process


def _preload(spec: RunSpec) -> None:
    env = runner_env(spec, base={})  # only the thread variables this run asks for
    for key, value in env.items():
        os.environ.setdefault(key, value)
    if getattr(spec, "deterministic", False):
        pin_cpu_numerics()  # before torch is imported
    # The entry point is named, not imported: the sweep sits below the CLI, and its children run
    # `bench run` exactly as the subprocess runner does (`python -m pebench.cli run ...`).
    importlib.import_module(ENTRY_MODULE)
    import pebench.runner.run  # deferred: start-up time (torch, Lightning, torchmetrics: what every run pays otherwise)

    pebench.runner.run.load_registries()
    _preloaded.update(_wants(spec))
    print(f"bench sweep: worker {os.getpid()} preloaded torch/Lightning; its runs fork from it", file=sys.stderr)


def _run_child(spec: RunSpec) -> None:
    """In the forked child: run ``bench run`` in-process and leave with its exit code (never returns)."""
    code = 1
    try:
        die_with_parent()
        signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C -> KeyboardInterrupt, as in bench run
        argv = spec.command()[3:]  # drop `python -m pebench.cli`
        sys.argv = ["bench", *argv]
        code = int(importlib.import_module(ENTRY_MODULE).main(argv) or 0)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - report and exit like an uncaught exception would
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)  # never unwind into the worker's own code


def _wait(pid: int) -> int:
    """Wait for the child; on Ctrl-C give it SIGINT and the grace period, then kill it and re-raise."""
    try:
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)
    except KeyboardInterrupt:
        try:
            os.kill(pid, signal.SIGINT)
            deadline = time.monotonic() + INTERRUPT_GRACE_S
            while time.monotonic() < deadline:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.2)
            else:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        except KeyboardInterrupt:  # a second Ctrl-C: stop now
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        raise


def preload_runner(spec: RunSpec) -> int:
    """Run ``bench run`` for ``spec`` in a fork of this preloaded worker (see the module docstring);
    falls back to :func:`pebench.sweep.local.default_runner` where forking cannot give the same run."""
    if not _can_preload(spec):
        return default_runner(spec)
    if not _preloaded:
        _preload(spec)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _run_child(spec)
    return _wait(pid)

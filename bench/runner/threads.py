"""CPU thread settings that degrade gracefully on a shared machine (issue #46, item 5).

Cause measured (``bench perf contention``, 2-core CPU shared with other 2-thread pebench jobs): torch's
intra-op threads run on OpenMP, whose default wait policy lets a worker that finished its share of a
parallel region *spin* for its next one. When the cores are oversubscribed, the spinning workers of
every process take the CPU time the others need, and a training whose parallel regions are small (a
vit-nano step runs thousands of them) waits at every barrier for a thread that is not scheduled: the
default ``bench run`` took 916 s instead of 72-98 s idle. With ``OMP_WAIT_POLICY=PASSIVE`` an idle
worker sleeps instead: 10 vit-nano training steps beside two competing 2-thread processes took
1.9x their time without them (10.6 s / 5.6 s), against 4.2x with the default policy (107 s / 25.5 s,
the same machine minutes apart), and the passive loaded run was faster than the default *unloaded* one.
One intra-op thread avoids the barriers but gives up the second core (5.9x).

:func:`choose_omp_wait` picks the wait per process, before torch is imported (the ``bench`` CLI calls it
first thing), from what the machine is doing at that moment: when other threads are runnable
(``/proc/loadavg``'s running count, less this thread, at least 1 in each of 3 samples 5 ms apart) it sets
``OMP_WAIT_POLICY=PASSIVE``; on an idle machine ``GOMP_SPINCOUNT=30000`` (a worker spins 30,000 times, then
sleeps). Why not passive always: a worker woken from sleep starts late at every parallel region, which costs an
idle machine 20-60 % (``bench perf contention``'s idle rows; a PaPE attention layer forward and backward at 1,024
tokens, 2 threads, measured while writing this: 13.2 ms passive, 7.8 ms with a bounded spin of 10,000, 7.6 ms with
libgomp's default), while the bounded spin keeps the default's idle speed and, when a load arrives after the
choice, still bounds the loss (the default spins 300,000 times). Why 30,000 and not 10,000 (the count until
2026-12-06): a worker must outlast the Python between two parallel operations, which in a small layer (vit-nano's
attention, 64 tokens) is 100-300 us. Measured on this 2-core machine (a 256 x 256 matmul after an idle gap: 110 us
when the workers still spin, 150 us when they must be woken), 10,000 spins last 80-160 us and 30,000 spins
320-640 us; with 10,000 pebench's one-layer rpb evaluation ran at 0.90x timm's (the same SDPA call, about 0.1 ms
more Python between the projection and the kernel), with 30,000 and with libgomp's default at 0.96-0.99x.
Where the machine cannot be read (no ``/proc/loadavg``) it sets passive. A policy or spin count the user
exported is kept; the choice is marked in ``PEBENCH_OMP_WAIT`` so that a child ``bench`` process (a sweep's
``bench run``) decides again for itself instead of taking its parent's choice for the user's.

:func:`set_intra_op_threads` applies a run's ``threads`` option (issue #44, item 7): the number of intra-op
threads changes the order of a reduction's partial sums, so the float rounding, and a trained model's test
accuracy can move by points across thread counts. ``bench run`` calls it before anything computes and records
the count in effect in ``config.yaml``, so ``bench run --config <run>/config.yaml`` on a machine with other cores
reruns with the recorded count; a configuration without the key (written before it existed) keeps torch's
default (``OMP_NUM_THREADS``, else the cores), as before.
"""
from __future__ import annotations

import os
import sys
import time

__all__ = ["choose_omp_wait", "machine_busy", "set_intra_op_threads", "WAIT_POLICY_ENV", "SPIN_COUNT_ENV",
           "CHOICE_ENV", "IDLE_SPIN_COUNT", "SPIN_CHOICE"]

WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
#: GNU OpenMP's (libgomp, torch's OpenMP on Linux) bounded active wait, in spins before a worker sleeps
SPIN_COUNT_ENV = "GOMP_SPINCOUNT"
#: set by :func:`choose_omp_wait` to the setting it chose ("passive" | :data:`SPIN_CHOICE`); absent: none chosen by pebench
CHOICE_ENV = "PEBENCH_OMP_WAIT"
#: the bounded spin set on an idle machine, and the name of that choice
IDLE_SPIN_COUNT = "30000"
SPIN_CHOICE = f"spin-{int(IDLE_SPIN_COUNT) // 1000}k"
_SET_BY_CHOICE = {"passive": WAIT_POLICY_ENV, SPIN_CHOICE: SPIN_COUNT_ENV}


def machine_busy(samples: int = 3, interval_s: float = 0.005,
                 loadavg: str | os.PathLike[str] = "/proc/loadavg") -> bool | None:
    """True when other threads want a CPU in every one of ``samples`` reads of ``loadavg``'s running count
    (4th field ``running/total``, which counts this reading thread too) ``interval_s`` apart; None when the
    file cannot be read (not Linux). The minimum over the samples ignores a short-lived process."""
    others = []
    for i in range(samples):
        if i:
            time.sleep(interval_s)
        try:
            with open(loadavg, encoding="ascii") as f:
                others.append(int(f.read().split()[3].split("/")[0]) - 1)
        except (OSError, IndexError, ValueError):
            return None
    return min(others) >= 1


def choose_omp_wait(busy: bool | None = None) -> str:
    """Choose OpenMP's wait for this process and its children (see the module docstring); must run before
    torch is imported. ``busy``: the machine's state (default: :func:`machine_busy`). Returns what is in
    effect: "passive" or :data:`SPIN_CHOICE` (chosen now), "user" (the user's exported policy or spin count, kept), or
    "unchanged" (torch is already imported: its OpenMP runtime read the environment at load)."""
    if "torch" in sys.modules:
        return "unchanged"
    previous = os.environ.pop(CHOICE_ENV, None)
    if previous in _SET_BY_CHOICE:  # a parent bench process chose it, not the user: decide again here
        os.environ.pop(_SET_BY_CHOICE[previous], None)
    if WAIT_POLICY_ENV in os.environ or SPIN_COUNT_ENV in os.environ:
        return "user"
    if busy is None:
        busy = machine_busy()
    choice = SPIN_CHOICE if busy is False else "passive"
    if choice == "passive":
        os.environ[WAIT_POLICY_ENV] = "PASSIVE"
    else:
        os.environ[SPIN_COUNT_ENV] = IDLE_SPIN_COUNT
    os.environ[CHOICE_ENV] = choice
    return choice


def set_intra_op_threads(threads: int | None) -> int:
    """``torch.set_num_threads(threads)`` unless ``threads`` is None (torch's default stays); returns the
    intra-op thread count now in effect, which ``bench run`` records."""
    import torch  # deferred: choose_omp_wait must run before torch loads

    if threads is not None:
        torch.set_num_threads(int(threads))
    return torch.get_num_threads()

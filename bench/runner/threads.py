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

:func:`prefer_passive_omp_wait` sets the passive policy for this process and its children (sweep
workers, DDP ranks) unless the user chose a policy; it must run before torch is imported (the
``bench`` CLI calls it first thing). ``OMP_WAIT_POLICY=ACTIVE`` restores spinning. A user who exported
``GOMP_SPINCOUNT`` (GNU OpenMP, torch's OpenMP on Linux: a waiting worker spins that many times, then
sleeps; unset, libgomp spins 300,000 times under the default policy and 0 times under PASSIVE) chose a wait
of their own, and no policy is set for them. ``bench perf contention`` measures the trade-off of each
(``docs/performance.md``): passive costs time on an idle machine (a worker woken from sleep starts late),
a bounded spin costs less idle and more under load.

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

__all__ = ["prefer_passive_omp_wait", "set_intra_op_threads", "WAIT_POLICY_ENV", "SPIN_COUNT_ENV"]

WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
#: GNU OpenMP's (libgomp, torch's OpenMP on Linux) bounded active wait, in spins before a worker sleeps
SPIN_COUNT_ENV = "GOMP_SPINCOUNT"


def prefer_passive_omp_wait() -> bool:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless a wait policy or a ``GOMP_SPINCOUNT`` is set already; True when
    the passive policy is in effect for threads created from now on (False when the user chose another wait
    or torch is already imported, whose OpenMP runtime read the environment at load)."""
    if "torch" in sys.modules:
        return False
    if SPIN_COUNT_ENV in os.environ and WAIT_POLICY_ENV not in os.environ:
        return False  # the user's bounded spin: their choice of wait, kept as it is
    os.environ.setdefault(WAIT_POLICY_ENV, "PASSIVE")
    return os.environ[WAIT_POLICY_ENV].strip().upper() == "PASSIVE"


def set_intra_op_threads(threads: int | None) -> int:
    """``torch.set_num_threads(threads)`` unless ``threads`` is None (torch's default stays); returns the
    intra-op thread count now in effect, which ``bench run`` records."""
    import torch  # deferred: prefer_passive_omp_wait must run before torch loads

    if threads is not None:
        torch.set_num_threads(int(threads))
    return torch.get_num_threads()

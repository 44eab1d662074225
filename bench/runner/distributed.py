"""DDP settings and multi-node checks of a run (used by :mod:`pebench.runner.run`): Lightning's DDP strategy
with a finite timeout, one-line errors for a rendezvous that fails, a multi-node launch without its
environment, and a batch that the processes cannot split evenly (README "Multi-GPU, multi-node and SLURM").
"""
from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import lightning as L
import torch
from lightning.pytorch.strategies import DDPStrategy

from pebench.core.errors import ConfigError

__all__ = ["DDP_TIMEOUT", "MULTI_NODE_ENV", "ddp_strategy", "ddp_timeout", "is_rendezvous_failure",
           "rendezvous_message", "check_multi_node", "refuse_indivisible_batch"]


#: how long a DDP process waits for the others (the rendezvous of all ranks, every collective)
#: before it fails instead of hanging; PyTorch's default is 30 minutes. ``PEBENCH_DDP_TIMEOUT_S``
#: overrides it.
DDP_TIMEOUT = timedelta(minutes=10)
#: environment variables that place a process in a multi-node job when no scheduler (SLURM,
#: torchrun, LSF, MPI) is detected
MULTI_NODE_ENV = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK")


def ddp_strategy() -> Any:
    """``--strategy ddp``: Lightning's DDP with ``find_unused_parameters=False`` (every PE holds only
    parameters its input type uses, so the per-step search of the autograd graph for unused ones is
    not needed; DDP raises an error naming any parameter that gets no gradient) and a finite
    :data:`DDP_TIMEOUT`."""
    return DDPStrategy(find_unused_parameters=False, timeout=ddp_timeout())


def ddp_timeout() -> timedelta:
    """:data:`DDP_TIMEOUT`, or ``PEBENCH_DDP_TIMEOUT_S`` seconds when that is set (slow shared
    filesystems; tests)."""
    value = os.environ.get("PEBENCH_DDP_TIMEOUT_S")
    if not value:
        return DDP_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ConfigError(f"PEBENCH_DDP_TIMEOUT_S must be a positive number of seconds, got {value!r}")
    return timedelta(seconds=seconds)


def is_rendezvous_failure(e: BaseException) -> bool:
    """The processes of a DDP job did not all meet (torch's store timed out or was unreachable)."""
    dist = getattr(torch, "distributed", None)
    kinds = tuple(getattr(dist, n) for n in ("DistStoreError", "DistNetworkError") if hasattr(dist, n))
    return bool(kinds) and isinstance(e, kinds)


def rendezvous_message(e: BaseException, trainer: L.Trainer) -> str:
    """The one line a failed rendezvous (:func:`is_rendezvous_failure`) ends the run with: what failed, the
    rendezvous variables, and how to launch the job so that every node meets."""
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    where = ", ".join(f"{v}={os.environ.get(v, '(unset)')}" for v in MULTI_NODE_ENV)
    return (f"DDP rendezvous failed: {first} ({where}; {trainer.world_size} processes expected on "
            f"{trainer.num_nodes} node(s)); start the same `bench run` on every node within "
            f"{int(ddp_timeout().total_seconds())} s with NODE_RANK 0..{trainer.num_nodes - 1} and node 0's "
            f"MASTER_ADDR/MASTER_PORT, or launch under SLURM or torchrun")


def check_multi_node(trainer: L.Trainer) -> None:
    """``--num-nodes K > 1`` outside a scheduler needs the rendezvous variables on every node;
    without them node 0 would wait for nodes that never come."""
    env = trainer._accelerator_connector.cluster_environment
    if trainer.num_nodes > 1 and type(env).__name__ == "LightningEnvironment":
        missing = [v for v in MULTI_NODE_ENV if not os.environ.get(v)]
        if missing:
            raise ConfigError(f"--num-nodes {trainer.num_nodes} needs a multi-node launch: run under SLURM or "
                              f"torchrun, or set {', '.join(MULTI_NODE_ENV)} on every node (missing: "
                              f"{', '.join(missing)}; MASTER_ADDR/MASTER_PORT: node 0's address and a free port, "
                              f"NODE_RANK: 0..{trainer.num_nodes - 1})")


def refuse_indivisible_batch(batch: int, world: int) -> None:
    """Raise the one-line error for a global batch that ``world`` processes cannot split evenly."""
    raise ConfigError(f"batch_size {batch} is not divisible by the number of processes {world} "
                      f"(devices x num_nodes); the global batch is split evenly across them")

"""Shared pieces of the tests that start processes: a free TCP port for a gloo rendezvous, and the
environment of a ``bench`` subprocess that must not think it is already a rank of some job."""
from __future__ import annotations

import os
import socket

#: variables that would place a child in the test runner's own distributed job (or import path)
_JOB_VARS = ("PYTHONPATH", "LOCAL_RANK", "RANK", "WORLD_SIZE")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (for ``init_process_group`` / ``MASTER_PORT``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(**extra: str) -> dict[str, str]:
    """``os.environ`` without the job variables, with ``extra`` set."""
    env = {k: v for k, v in os.environ.items() if k not in _JOB_VARS}
    env.update(extra)
    return env

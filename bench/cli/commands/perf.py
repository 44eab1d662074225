"""``bench perf [WHAT] [ARGS...]``: the performance suites of :mod:`pebench.perf` (one module per suite)."""
from __future__ import annotations

import argparse

from pebench.perf import PERF_COMMANDS
from pebench.runner.config import ConfigError

__all__ = ["cmd_perf"]


def cmd_perf(args: argparse.Namespace) -> int:
    fn = PERF_COMMANDS.get(args.what)
    if fn is None:
        raise ConfigError(f"unknown benchmark {args.what!r}; available: {', '.join(PERF_COMMANDS)}")
    rc = fn(list(args.args))
    return int(rc or 0)

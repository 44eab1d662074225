"""``bench runs [show RUN]``: list run directories (filtered by dataset, PE, model, status) and inspect one, from
their ``results.json`` files alone (torch-free; what is read and shown is :mod:`pebench.leaderboard.runs`)."""
from __future__ import annotations

import argparse
from pathlib import Path

from pebench.core.errors import ConfigError
from pebench.leaderboard.runs import collect_runs, filter_runs, format_run, format_runs, resolve_run

__all__ = ["cmd_runs", "csv_set"]


def csv_set(text: str | None) -> set[str] | None:
    items = {t.strip() for t in (text or "").split(",") if t.strip()}
    return items or None


def cmd_runs(args: argparse.Namespace) -> int:
    """``bench runs [show RUN]`` (see the module docstring)."""
    root = Path(args.results)
    if args.action == "show":
        if not args.run:
            raise ConfigError("bench runs show needs a run, e.g. bench runs show shapes/pape/vit-nano/seed0")
        print(format_run(resolve_run(args.run, root)))
        return 0
    if args.action not in (None, "list"):
        raise ConfigError(f"unknown runs action {args.action!r}; use `bench runs` or `bench runs show RUN`")
    if args.run:
        raise ConfigError(f"unexpected argument {args.run!r}; to inspect a run: bench runs show {args.run}")
    if not root.is_dir():
        raise ConfigError(f"results directory {str(root)!r} does not exist (bench run writes to runs/ by default; "
                          f"pass --results DIR)")
    flt = argparse.Namespace(dataset=csv_set(args.dataset), pe=csv_set(args.pe), model=csv_set(args.model),
                             status=csv_set(args.status))
    rows = filter_runs(collect_runs(root), flt)
    if not rows:
        print(f"no runs under {str(root)!r}" + (" match the filters" if any(vars(flt).values()) else ""))
        return 0
    print(format_runs(rows))
    return 0

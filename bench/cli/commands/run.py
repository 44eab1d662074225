"""``bench run``: one configuration trained, validated and analysed (:func:`pebench.runner.run.run`), after the
checks that need no torch (option bounds, a complete run of the same configuration: said, nothing trained)."""
from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from typing import Sequence

from pebench.leaderboard.summary import format_summary
from pebench.runner.config import (
    check_option_values,
    config_to_yaml,
    merged_config,
    run_config_from_args,
)
from pebench.runner.guards import complete_run, complete_run_line
from pebench.runner.numerics import pin_cpu_numerics

__all__ = ["cmd_run"]


def cmd_run(args: argparse.Namespace, argv: Sequence[str] = ()) -> int:
    early = merged_config(args)
    check_option_values(early)  # bounds before torch is imported: a bad value answers at once
    command = " ".join(["bench", *(shlex.quote(a) for a in argv if a != "--force")])
    if not args.print_config and not args.force:  # a complete run of this configuration: say so, train nothing
        done = complete_run(early)  # torch-free: results.json and the fingerprint
        if done is not None:
            print(complete_run_line(done, command))
            return 0
    if early.deterministic:
        pin_cpu_numerics()  # before torch is imported: CPU kernel paths pinned (see pebench.runner.numerics)
    from lightning.pytorch.utilities import rank_zero_only  # deferred: start-up time (Lightning, torch; after the pins)

    from pebench.runner.run import load_registries, run  # deferred: start-up time (torch, Lightning, the registries)
    from pebench.tasks import default_task  # deferred: start-up time (torch: the dataset classes)

    load_registries()
    cfg = run_config_from_args(args)
    if args.print_config:
        sys.stdout.write(config_to_yaml(cfg))
        return 0
    # resolved (torch is imported now): a --data-option tokens=... run directory, or a file without
    # dataset_default_task (written before it was recorded), is matched here
    done = None if args.force else complete_run(
        cfg if cfg.task is not None else dataclasses.replace(cfg, task=default_task(cfg.dataset)))
    if done is not None:
        print(complete_run_line(done, command))
        return 0
    results = run(cfg, keep_complete=not args.force)  # a complete run on other data: refused, not overwritten
    if rank_zero_only.rank != 0:
        return 0  # DDP: rank 0 owns the run directory, the analyses and the exit status
    print(format_summary(results))
    return 0 if results.get("status") in ("complete", None) else 3

"""``bench sweep``: datasets x PEs x seeds, each run a ``bench run`` (the pass-through flags checked with the run
parser first), on this machine (``--workers``, ``--preload``: :mod:`pebench.sweep.local`, :mod:`pebench.sweep.preload`)
or as a SLURM array (``--launcher slurm``: :mod:`pebench.sweep.slurm`)."""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from pebench.cli.commands import csv_list
from pebench.leaderboard.summary import format_table
from pebench.runner.config import ConfigError, config_to_dict, run_config_from_args, variant_name
from pebench.runner.integrity import check_writable, fingerprint
from pebench.sweep import local as sweep
from pebench.sweep import slurm as sweep_slurm
from pebench.sweep.preload import preload_runner
from pebench.tasks import resolve_task

__all__ = ["cmd_sweep", "sweep_threads"]


_SWEEP_FIXED = {"dataset", "pe", "seed", "model", "out"}


def sweep_threads(workers: int) -> int:
    """Torch threads per run of a sweep with ``workers`` parallel workers: usable cores // workers."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, cores // max(1, workers))


def cmd_sweep(args: argparse.Namespace, extra: list[str], parser: argparse.ArgumentParser) -> int:
    from pebench.datamodules import get_datamodule_class  # deferred: start-up time (torch)
    from pebench.encodings import get_pe_class, list_pes  # deferred: start-up time (torch)
    from pebench.runner.run import load_registries  # deferred: start-up time (torch, Lightning)

    slurm = args.launcher == "slurm"
    if slurm:  # SLURM flags checked before anything is imported, resolved or created
        slurm_opts = sweep_slurm.slurm_options(args, args.out)
        sweep_slurm.check_slurm_commands()
        if args.workers != 1 or args.preload:
            raise ConfigError(f"{'--preload' if args.preload else '--workers'} applies to --launcher local; with "
                              f"--launcher slurm every run is its own array task (see --array-parallelism)")
    else:
        sweep_slurm.check_local_launcher(args)
    load_registries()
    # Validate the pass-through flags with the run parser (typos fail now, not in every run).
    run_args, unknown = parser.parse_known_args(["run", *extra])
    if unknown:
        raise ConfigError(f"unrecognized arguments: {' '.join(unknown)}")
    fixed = sorted(k for k in _SWEEP_FIXED if getattr(run_args, k, None) is not None)
    if fixed:
        raise ConfigError(f"bench sweep sets --{fixed[0].replace('_', '-')} itself; use --datasets/--pes/--seeds/"
                          f"--model/--out")
    if run_args.rpt is not None:
        raise ConfigError("bench sweep sets --rpt itself; name the variant in --pes, e.g. --pes ape,ape+rpt")
    try:
        seeds = [int(s) for s in csv_list(args.seeds)]
    except ValueError:
        raise ConfigError(f"--seeds must be a comma list of integers, got {args.seeds!r}") from None
    datasets = csv_list(args.datasets)
    explicit_pes = args.pes is not None
    pes = csv_list(args.pes) if explicit_pes else list_pes()
    combos = []
    for d in datasets:
        mod = get_datamodule_class(d).modality
        for p in pes:
            rpt = p.endswith(sweep.RPT_SUFFIX)
            base = p[: -len(sweep.RPT_SUFFIX)] if rpt else p
            if rpt and base == "none":
                raise ConfigError(f"conflicting variant {p!r}: random permutation training needs a PE")
            if mod in get_pe_class(base).modalities:
                combos.append((d, p))
            else:
                print(f"bench: note: skipping {d} x {p} (PE {p!r} does not apply to {mod} data)", file=sys.stderr)
    if args.workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {args.workers}")
    if args.retries < 0:
        raise ConfigError(f"--retries must be >= 0, got {args.retries}")
    specs = []
    for d, p in combos:
        specs += sweep.plan_sweep([d], [p], seeds, args.model, args.out, extra_args=extra)
    # Resolve every run's configuration now: a bad pass-through flag (e.g. --epochs 0) stops the
    # sweep with one line before anything is created, and each run gets its fingerprint (a complete
    # run is skipped only when it was made with this configuration) and its share of the cores.
    threads = sweep_threads(args.workers)
    cfgs = [resolve_task(run_config_from_args(parser.parse_args(s.command()[3:]))) for s in specs]
    # the run directory bench run will write (e.g. <pe>+spiking with --data-option tokens=spiking)
    specs = [dataclasses.replace(s, fingerprint=fingerprint(config_to_dict(c)), threads=threads,
                                 variant=variant_name(c), deterministic=bool(c.deterministic),
                                 single_process=str(c.devices) == "1" and int(c.num_nodes) == 1)
             for s, c in zip(specs, cfgs)]
    if slurm:
        for c in cfgs:  # --devices must be a number: it is the count of SLURM tasks per node
            sweep_slurm.job_resources(c, slurm_opts.gpus_per_task)
        check_writable(args.out)
        rows = sweep_slurm.submit_sweep(specs, cfgs, slurm_opts, retries=args.retries)
        print(format_table(["run", "status", "job"], [[r["key"], r["status"], r["job_id"] or ""] for r in rows]))
        queued = sum(r["status"] == "queued" for r in rows)
        print(f"submitted {queued} run(s) to SLURM; `bench runs --results {args.out}` shows their state")
        return 0
    check_writable(args.out)
    runner = None
    if args.preload:
        runner = preload_runner
    outcomes = sweep.run_sweep(specs, runner=runner, retries=args.retries, workers=args.workers)
    rows = [[o.get("key"), o.get("status"), o.get("attempts")] for o in outcomes]
    print(format_table(["run", "status", "attempts"], rows))
    return 1 if any(o.get("status") == "failed" for o in outcomes) else 0

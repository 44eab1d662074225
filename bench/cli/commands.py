"""``bench list | runs | leaderboard | sweep | eval | analyze | perf`` (``bench run`` lives in ``cli.py`` /
``run.py``; ``bench runs`` in ``pebench.leaderboard.runs``)."""
from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pebench.core.io import atomic_write_json, atomic_write_text, read_json
from pebench.core.options import format_value
from pebench.leaderboard import collect_results
from pebench.leaderboard.check import check_results
from pebench.leaderboard.collect import split_smoke
from pebench.leaderboard.curves import write_sweep_curves
from pebench.leaderboard.formats import render_format
from pebench.leaderboard.runs import add_provenance
from pebench.leaderboard.runs import cmd_runs as _cmd_runs
from pebench.leaderboard.summary import format_summary, format_table
from pebench.perf import PERF_COMMANDS
from pebench.runner.config import (
    ConfigError,
    RunConfig,
    config_to_dict,
    list_presets,
    load_preset,
    load_yaml_config,
    merge,
    preset_info,
    run_config_from_args,
    variant_name,
)
from pebench.runner.integrity import check_writable, fingerprint
from pebench.runner.numerics import flush_denormals
from pebench.sweep import local as sweep
from pebench.sweep import slurm as sweep_slurm
from pebench.sweep.preload import preload_runner
from pebench.tasks import default_task, get_task_setup, list_tasks, resolve_task

__all__ = ["cmd_list", "cmd_runs", "cmd_leaderboard", "cmd_sweep", "cmd_eval", "cmd_analyze", "cmd_perf"]


def _csv(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


# ----------------------------------------------------------------------------------- list
def _option_rows(owner: str, options: list[dict[str, Any]]) -> list[list[str]]:
    """Rows of a ``bench list --options`` table from :meth:`~pebench.core.options.Option.describe` dicts."""
    return [[owner, o["key"], o["type"] + (f" {{{', '.join(map(str, o['choices']))}}}" if o.get("choices") else ""),
             format_value(o["default"]), o["help"]] for o in options]


def cmd_list(args: argparse.Namespace) -> int:
    what = args.what
    if what == "presets":  # YAML files only: no registry, no torch
        print(presets_listing())
        return 0
    from pebench.datamodules import (  # deferred: start-up time (torch)
        MODALITIES,
        data_options,
        get_datamodule_class,
        list_datamodules,
    )
    from pebench.encodings import get_pe_class, list_pes, pe_options  # deferred: start-up time (torch)
    from pebench.models import list_models, model_config  # deferred: start-up time (torch)
    from pebench.runner.run import load_registries  # deferred: start-up time (torch, Lightning)

    load_registries()
    if what in ("datasets", "all"):
        rows = []

        def listing_order(name: str) -> tuple:  # embedded sets first, then real ones; by modality, then name
            c = get_datamodule_class(name)
            return c.needs_data_root, MODALITIES.index(c.modality) if c.modality in MODALITIES else 99, name

        for name in sorted(list_datamodules(), key=listing_order):
            c = get_datamodule_class(name)
            synthetic = "(synthetic, generated on the fly)"
            if callable(getattr(c, "no_pe_bound", None)):  # probes: the exact no-PE ceiling of the test split
                synthetic = f"(synthetic probe; no-PE ceiling {100 * c.no_pe_bound():.1f} %)"
            rows.append([name, c.modality, "yes" if c.needs_data_root else "no",
                         c.expected_layout if c.needs_data_root else synthetic])
        print("datasets\n" + format_table(["name", "modality", "--data-root", "expected layout"], rows))
        from pebench.cli.docs import sources_listing  # deferred: it imports the registries (torch)

        print(sources_listing())
        if getattr(args, "options", False):
            rows = [r for name in list_datamodules()
                    for r in _option_rows(name, [o.describe() for o in data_options(get_datamodule_class(name))])]
            print("dataset options (bench run --data-option KEY=VALUE; read from each datamodule's constructor)\n"
                  + format_table(["dataset", "key", "type", "default", "meaning"], rows))
    if what in ("pes", "all"):
        rows = [[n, ", ".join(get_pe_class(n).modalities), "yes" if get_pe_class(n).additive else "no"]
                for n in list_pes()]
        print("positional encodings\n" + format_table(["name", "modalities", "additive"], rows))
        if getattr(args, "options", False):
            rows = [r for n in list_pes() for r in _option_rows(n, pe_options(n))]
            print("PE options (bench run --pe-option KEY=VALUE; the declarations build_pe validates against)\n"
                  + format_table(["pe", "key", "type", "default", "meaning"], rows))
    if what in ("models", "all"):
        rows = [[n, c.embed_dim, c.depth, c.num_heads, c.embed_dim // c.num_heads] for n, c in ((n, model_config(n)) for n in list_models())]
        print("models\n" + format_table(["name", "dim", "depth", "heads", "head dim"], rows))
    if what in ("presets", "all"):
        print(presets_listing())
    if what in ("analyses", "all"):
        print(analyses_listing(getattr(args, "options", False)))
    if what in ("tasks", "all"):
        setups = {n: get_task_setup(n) for n in list_tasks()}
        rows = [[n, ", ".join(s.accepts), ", ".join(s.modalities or ("any",)), str(len(s.options))]
                for n, s in setups.items()]
        print("tasks (bench run --task NAME)\n" + format_table(["name", "label kinds", "modalities", "options"], rows))
        if getattr(args, "options", False):
            rows = [r for n, s in setups.items() for r in _option_rows(n, [o.describe() for o in s.options])]
            print("task options (bench run --task-option KEY=VALUE; each task's TaskSetup.options)\n"
                  + format_table(["task", "key", "type", "default", "meaning"], rows))
    return 0


def analyses_listing(options: bool = False) -> str:
    """``bench list analyses``: each registered analysis, its results.json key, whether ``--analyses all`` runs
    it and what it measures; with ``--options`` every ``--analysis-option`` key (from the declarations)."""
    from pebench.analysis.registry import describe_analyses  # deferred: start-up time (torch)

    described = describe_analyses()
    rows = [[a["name"], a["key"], "yes" if a["in_all"] else "when named", a["what"]] for a in described]
    out = "analyses (bench run --analyses NAME,...)\n" + format_table(["name", "results.json key", "in all", "what"], rows)
    if options:
        rows = [r for a in described for r in _option_rows(a["name"], a["options"])]
        out += ("\nanalysis options (bench run --analysis-option KEY=VALUE; each analysis' own declaration)\n"
                + format_table(["analysis", "key", "type", "default", "meaning"], rows))
    return out


def presets_listing() -> str:
    """``bench list presets``: each preset's task, dataset, model and schedule (from its run options), then
    what it is and which published setting it follows (its ``description`` and ``follows`` keys)."""
    names = list_presets()
    if not names:
        return "presets (bench run --preset NAME)\n(none installed)"
    rows, about = [], []
    for name in names:
        cfg, info = merge(load_preset(name)), preset_info(name)
        rows.append([name, cfg.task or "(the dataset's)", cfg.dataset, cfg.model, str(cfg.resolution or "default"),
                     f"{cfg.epochs} x {cfg.batch_size}", format_value(cfg.lr), cfg.precision])
        about.append(f"{name}: {info['description'] or '(no description)'}\n    follows: {info['follows'] or '(not said)'}")
    return ("presets (bench run --preset NAME; every option of one: bench run --preset NAME --print-config)\n"
            + format_table(["name", "task", "dataset", "model", "resolution", "epochs x batch", "lr", "precision"], rows)
            + "\n" + "\n".join(about))


# ----------------------------------------------------------------------------------- runs
def cmd_runs(args: argparse.Namespace) -> int:
    return _cmd_runs(args)


# ----------------------------------------------------------------------------------- leaderboard
def _tracked_by_git(path: Path) -> bool:
    """True when ``path`` exists and is a file git tracks (committed results must not be overwritten by a
    default); False outside a work tree or without git."""
    if not path.is_file():
        return False
    try:
        res = subprocess.run(["git", "ls-files", "--error-unmatch", "--", path.name], cwd=path.resolve().parent,
                             capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return res.returncode == 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """Write the leaderboard in ``--format`` (md: also ``<out>_curves.png``), or ``--check`` a results folder."""
    # RunConfig's defaults fill the keys that files without a recorded fingerprint lack (torch-free)
    defaults = config_to_dict(RunConfig())
    if args.check is not None:
        if not Path(args.check).is_dir():
            raise ConfigError(f"results directory {args.check!r} does not exist")
        problems, summary = check_results(args.check, defaults)
        for line in problems:
            print(f"{Path(args.check) / line.split(': ', 1)[0]}: {line.split(': ', 1)[1]}", file=sys.stderr)
        if problems:
            print(f"bench: error: {len(problems)} problem(s) in {args.check}", file=sys.stderr)
            return 2
        print(f"ok: {args.check}: {summary}")
        return 0
    if not Path(args.results).is_dir():
        raise ConfigError(f"results directory {args.results!r} does not exist")
    runs, problems = collect_results(args.results, defaults)
    runs, smoke = split_smoke(runs, include_smoke=getattr(args, "include_smoke", False))  # --fast-dev-run etc.
    if not any(r.complete for r in runs):
        raise ConfigError(f"no complete run in {args.results!r} ({len(runs)} incomplete, {len(problems)} "
                          f"problem(s)" + (f", {smoke} smoke run(s) left out: --include-smoke tabulates them"
                                           if smoke else "") + "); nothing to tabulate")
    out = Path(args.out or f"LEADERBOARD.{args.format}")
    if args.out is None and not getattr(args, "force", False) and _tracked_by_git(out):
        raise ConfigError(f"refusing to overwrite {out}, a file tracked by git, with the default --out "
                          f"(name it: --out {out}, or give --force)")
    text = render_format(args.format, runs, problems, args.results, out, reference=getattr(args, "reference", "none"),
                         config_defaults=defaults, smoke_left_out=smoke)
    atomic_write_text(out, text)
    print(f"wrote {out}")
    if args.format == "md":
        curves = write_sweep_curves(args.results, out.with_name(f"{out.stem}_curves.png"))
        if curves is not None:
            print(f"wrote {curves}")
    return 0


# ----------------------------------------------------------------------------------- sweep
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
        seeds = [int(s) for s in _csv(args.seeds)]
    except ValueError:
        raise ConfigError(f"--seeds must be a comma list of integers, got {args.seeds!r}") from None
    datasets = _csv(args.datasets)
    explicit_pes = args.pes is not None
    pes = _csv(args.pes) if explicit_pes else list_pes()
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


# ----------------------------------------------------------------------------------- eval
def cmd_eval(args: argparse.Namespace) -> int:
    import torch  # deferred: start-up time (torch)

    from pebench.analysis import plot_extrapolation, save_plot  # deferred: start-up time (torch)
    from pebench.analysis.plots import run_info  # deferred: start-up time (torch)
    from pebench.datamodules import get_datamodule_class  # deferred: start-up time (torch)
    from pebench.runner.provenance import git_sha  # deferred: start-up time (keeps the parser's imports small)
    from pebench.runner.run import load_registries  # deferred: start-up time (torch, Lightning)

    flush_denormals()  # as in bench run (see pebench.runner.numerics)
    run_dir = Path(args.run)
    cfg_path, ckpt = run_dir / "config.yaml", run_dir / "last.ckpt"
    if not cfg_path.is_file():
        raise ConfigError(f"{str(run_dir)!r} is not a run directory (no config.yaml)")
    if not ckpt.is_file():
        raise ConfigError(f"no checkpoint {str(ckpt)!r}; train the run first")
    load_registries()
    cfg = merge(load_yaml_config(cfg_path))
    # the task's LightningModule and its extrapolation: top-1 (classification), mAP (detection), mIoU
    # (segmentation) per size
    task_name = cfg.task or default_task(cfg.dataset)
    setup = get_task_setup(task_name)
    task_cls = setup.checkpoint_class()
    if task_cls is None:  # e.g. dino: no metric at other resolutions
        able = [t for t in list_tasks() if get_task_setup(t).checkpoint_class() is not None]
        able_text = " and ".join([", ".join(able[:-1]), able[-1]] if len(able) > 1 else able)
        raise ConfigError(f"bench eval re-evaluates {able_text} checkpoints (their metric at other "
                          f"resolutions); {str(run_dir)!r} is a --task {task_name} run")
    hooks = setup.analysis_hooks()
    resolutions = _csv(args.resolutions) or list(cfg.extrapolation_resolutions or [])
    if not resolutions:
        raise ConfigError("no resolutions given: pass --resolutions, e.g. 24,32,48")
    dm = get_datamodule_class(cfg.dataset)(batch_size=cfg.batch_size, num_workers=cfg.num_workers, seed=cfg.seed,
                                           resolution=cfg.resolution, data_root=cfg.data_root, **cfg.data)
    try:
        task = task_cls.load_from_checkpoint(str(ckpt), map_location="cpu")
    except Exception as e:  # noqa: BLE001 - any failure to load is a bad checkpoint for the user
        raise ConfigError(f"cannot load {str(ckpt)!r}: corrupt or incompatible checkpoint "
                          f"({type(e).__name__}: {' '.join(str(e).split())[:200]})") from None
    hp = task.hparams
    if hp.get("pe") != cfg.pe or hp.get("model") != cfg.model or hp.get("num_classes") != dm.num_classes:
        raise ConfigError(f"checkpoint {str(ckpt)!r} does not match config.yaml (pe/model/num_classes differ)")
    if torch.cuda.is_available():
        task = task.cuda()
    task.eval()
    hooks.check_resolutions(task, dm, resolutions)  # a size the model cannot take: exit 2, results.json untouched
    print(f"bench eval: {run_dir} at {len(resolutions)} size(s): {', '.join(map(str, resolutions))} ...", file=sys.stderr,
          flush=True)
    t0 = time.perf_counter()
    rows = hooks.evaluate_extrapolation(task, dm, resolutions)
    print(f"bench eval: evaluated in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    res_path = run_dir / "results.json"
    results: dict[str, Any] = read_json(res_path) if res_path.is_file() else {}
    command = f"bench eval --run {args.run}" + (f" --resolutions {args.resolutions}" if args.resolutions else "")
    entry = add_provenance(results, "extrapolation", rows, command, git_sha())
    atomic_write_json(res_path, results)
    save_plot(plot_extrapolation, rows, run_dir / "extrapolation.png",
              run=run_info({**config_to_dict(cfg), "variant": results.get("variant")}, dm.num_classes))
    if entry["replaced"] is not None:
        print(f"bench: note: replaced the extrapolation rows of {entry['replaced']['added_by']} "
              f"({entry['replaced']['samples']} samples per size); they are kept in results.json "
              f"provenance", file=sys.stderr)
    print(format_summary({k: v for k, v in results.items() if k not in ("geometry", "robustness", "alpha_sweep")}))
    return 0


# ----------------------------------------------------------------------------------- analyze
def cmd_analyze(args: argparse.Namespace) -> int:
    """``bench analyze``: pebench's analyses on a pretrained timm ViT (see :mod:`pebench.cli.analyze`)."""
    from pebench.cli.analyze import run_analyze  # deferred: start-up time (torch, timm: loaded only for this command)

    return run_analyze(args)


# ----------------------------------------------------------------------------------- perf
def cmd_perf(args: argparse.Namespace) -> int:
    fn = PERF_COMMANDS.get(args.what)
    if fn is None:
        raise ConfigError(f"unknown benchmark {args.what!r}; available: {', '.join(PERF_COMMANDS)}")
    rc = fn(list(args.args))
    return int(rc or 0)

"""``bench eval --run DIR [--resolutions LIST]``: a trained run's checkpoint re-evaluated at other input sizes
(its task's extrapolation rows, added to ``results.json`` with their provenance, and ``extrapolation.png``)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from pebench.cli.commands import csv_list
from pebench.core.errors import UserError
from pebench.core.io import UnreadableJSON, atomic_write_json, local_file, read_json, remove_stale_temp_files
from pebench.leaderboard.runs import add_provenance
from pebench.leaderboard.summary import format_summary
from pebench.leaderboard.text import terminal_safe
from pebench.runner.config import (
    ConfigError,
    check_resolution_syntax,
    config_to_dict,
    load_yaml_config,
    merge,
)
from pebench.runner.integrity import run_dir_lock
from pebench.runner.numerics import flush_denormals
from pebench.tasks import default_task, get_task_setup, list_tasks

__all__ = ["cmd_eval", "check_args"]


def check_args(args: argparse.Namespace) -> None:
    """``--resolutions`` checked before torch is imported."""
    if args.resolutions is None:
        return
    items = [r.strip() for r in str(args.resolutions).split(",")]
    if not any(items):
        raise ConfigError("--resolutions is empty; expected a comma list such as 24,32,48")
    for r in items:
        check_resolution_syntax(r, "--resolutions")


def cmd_eval(args: argparse.Namespace) -> int:
    """Lock the run directory, check the run is complete, evaluate, add the rows to ``results.json``."""
    flush_denormals()  # as in bench run (see pebench.runner.numerics)
    run_dir = Path(args.run)
    cfg_path, ckpt = run_dir / "config.yaml", run_dir / "last.ckpt"
    if not cfg_path.is_file():
        raise ConfigError(f"{str(run_dir)!r} is not a run directory (no config.yaml)")
    if not ckpt.is_file():
        raise ConfigError(f"no checkpoint {str(ckpt)!r}; train the run first")
    lock = run_dir_lock(run_dir)  # bench eval writes results.json: a running `bench run` (or eval) holds it
    try:
        remove_stale_temp_files(run_dir)  # a killed earlier write's temp files (we hold the lock)
        return _evaluate(args, run_dir, cfg_path, ckpt)
    finally:
        lock.release()


def _complete_results(run_dir: Path) -> dict[str, Any]:
    """The run's ``results.json``, read before anything is evaluated: a run that is not complete (still
    training, interrupted, failed) or whose file is unreadable is one line, exit 2."""
    res_path = run_dir / "results.json"
    if not res_path.is_file():
        raise ConfigError(f"{str(run_dir)!r} has no results.json; bench eval evaluates complete runs")
    try:
        results = read_json(res_path)
    except (OSError, UnreadableJSON) as e:
        raise ConfigError(f"cannot read {str(res_path)!r}: {e}", phase="results") from None
    if not isinstance(results, dict):
        raise ConfigError(f"{str(res_path)!r} is not a JSON object", phase="results")
    status = results.get("status")
    if status != "complete":
        raise ConfigError(f"run {str(run_dir)!r} is not complete (results.json says status "
                          f"{terminal_safe(str(status))!r}); bench eval evaluates complete runs: finish it first "
                          f"(bench run with the same flags resumes it)")
    return results


def _evaluate(args: argparse.Namespace, run_dir: Path, cfg_path: Path, ckpt: Path) -> int:
    import torch  # deferred: start-up time (torch)

    from pebench.analysis import plot_extrapolation, save_plot  # deferred: start-up time (torch)
    from pebench.analysis.plots import run_info  # deferred: start-up time (torch)
    from pebench.datamodules import get_datamodule_class  # deferred: start-up time (torch)
    from pebench.runner.provenance import git_sha  # deferred: start-up time (keeps the parser's imports small)
    from pebench.runner.run import load_registries  # deferred: start-up time (torch, Lightning)

    results = _complete_results(run_dir)
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
    resolutions = csv_list(args.resolutions) or list(cfg.extrapolation_resolutions or [])
    if not resolutions:
        raise ConfigError("no resolutions given: pass --resolutions, e.g. 24,32,48")
    dm = get_datamodule_class(cfg.dataset)(batch_size=cfg.batch_size, num_workers=cfg.num_workers, seed=cfg.seed,
                                           resolution=cfg.resolution, data_root=cfg.data_root, **cfg.data)
    try:
        # weights_only: a checkpoint's pickle may hold only tensors and plain containers, never code
        task = task_cls.load_from_checkpoint(str(local_file(ckpt)), map_location="cpu", weights_only=True)
    except UserError:
        raise
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

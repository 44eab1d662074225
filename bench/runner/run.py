"""``bench run``: validate a :class:`RunConfig`, train, validate, analyse, write the run directory.

Run directory (docs/architecture.md §5): ``<out>/<dataset>/<pe-variant>/<model>/seed<S>/`` with
``config.yaml`` (resolved, written at start), ``results.json`` (``status`` ``running`` at start,
``complete`` / ``incomplete`` / ``failed`` at the end), ``metrics.csv`` (CSVLogger), ``last.ckpt``
(every epoch), analysis plots ``*.png``. Only global rank 0 writes, always atomically.

Kill-and-resume: when ``last.ckpt`` exists and ``results.json`` is not ``complete``, training
resumes from it (or from a newer SLURM ``hpc_ckpt_*.ckpt``); a complete run of the same
configuration is reported and not retrained by ``bench run`` (:mod:`pebench.runner.guards`), and is
re-run from scratch with ``--force``. Resumption is exact at epoch boundaries: the training order depends only on
(seed, epoch) and every training step is reseeded from (seed, epoch, batch) (``StepSeed``), so
a killed and resumed run ends with the same metrics as an uninterrupted one (CPU,
``--deterministic``, ``num_workers=0``; with worker processes, random augmentation inside the
workers is not restored). Nothing is created before validation passes.

DDP: the global batch is ``batch_size``; each of the ``W = devices x num_nodes`` ranks loads
``batch_size // W`` (``batch_size`` must be divisible by ``W``). See ``_loaders.py`` for the
samplers. ``--strategy ddp`` is Lightning's DDP without the search for unused parameters (every
PE holds only the parameters its input type uses) and with a 10-minute timeout; ``--num-nodes K``
outside SLURM/torchrun needs MASTER_ADDR, MASTER_PORT and NODE_RANK. Ranks > 0 return once
training and validation are done; rank 0 runs the analyses and owns the exit status.

One configuration per run directory: ``results.json`` records the configuration ``fingerprint``
(:mod:`pebench.runner.integrity`); a directory holding another configuration is refused (exit code 2,
the differing keys named) before anything is touched, and ``<run_dir>/.run.lock`` keeps a second
``bench run`` out. SIGINT / SIGTERM end the run with ``status: interrupted`` and the command that
resumes it (``resume_command``). Checkpoints, resume and interrupts live in :mod:`pebench.runner.resume`, the DDP
settings and multi-node checks in :mod:`pebench.runner.distributed`.
"""
from __future__ import annotations

import atexit
import dataclasses
import math
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import lightning as L
import torch
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.callbacks import Callback, TQDMProgressBar
from lightning.pytorch.utilities.exceptions import SIGTERMException

from pebench.analysis.evaluators import RESULT_KEYS as ANALYSIS_KEYS  # analysis name -> results.json key
from pebench.analysis.evaluators import run_analyses
from pebench.analysis.plots import plot_eed_checkpoints, run_info, save_plot
from pebench.analysis.registry import get_analysis
from pebench.core.child_pythonpath import shield_torch_children
from pebench.core.errors import RunFailedError, UserError
from pebench.core.fingerprint import data_fingerprint
from pebench.core.io import atomic_write_json, atomic_write_yaml, read_json, remove_stale_temp_files
from pebench.core.schema import SCHEMA_VERSION
from pebench.datamodules import DataRootError, get_datamodule_class, list_datamodules
from pebench.datamodules.events.event_transforms import spiking_analyses
from pebench.datamodules.events.spiking import cap_report
from pebench.datamodules.probes.probe_sets import set_probe_analyses
from pebench.encodings import PEConfigError, get_pe_class, list_pes, variant_label
from pebench.leaderboard.curves import write_run_curves
from pebench.models import ResolutionError, list_models
from pebench.models.attention import AttentionImplError, check_forced_impl, check_impl_name, check_pe_impl
from pebench.models.vit import attention_impls_used, set_attention_impl, set_coord_augment
from pebench.runner.callbacks import StepSeed, ValSampleCounter, skip_report
from pebench.runner.config import (
    ConfigError,
    RunConfig,
    config_to_dict,
    parse_analyses,
    resolve,
    run_dir_for,
    variant_name,
)
from pebench.runner.distributed import (
    DDP_TIMEOUT,  # noqa: F401  (re-exported: the default DDP timeout)
    check_multi_node,
    ddp_strategy,
    is_rendezvous_failure,
    refuse_indivisible_batch,
    rendezvous_message,
)
from pebench.runner.guards import batch_clamp, batch_clamp_line, check_precision_device, limited_record
from pebench.runner.integrity import (
    check_out_dir,
    check_same_configuration,
    check_writable,
    fingerprint,
    fingerprint_keys,
    run_dir_lock,
)
from pebench.runner.loggers import build_loggers, check_logger_installed, quiet_lightning
from pebench.runner.numerics import flush_denormals, numerics_record
from pebench.runner.provenance import git_sha, versions
from pebench.runner.resume import (
    AtomicCheckpointIO,
    InterruptSignals,
    RunInterrupted,
    epochs_done,
    last_checkpoint_callback,
    load_checkpoint,
    resume_checkpoint_path,
    resume_command,
)
from pebench.runner.samplers import install_samplers, restore_loaders
from pebench.runner.stopping import load_best, stopped_record, stopping_callbacks
from pebench.runner.threads import set_intra_op_threads
from pebench.tasks import get_task_setup, resolve_task

__all__ = ["run", "prepare", "load_registries", "RESULT_KEYS", "ANALYSIS_KEYS", "train_grid_for",
           "dataset_info"]

RESULT_KEYS = ("dataset", "pe", "variant", "pe_label", "model", "seed", "task", "status", "primary_metric", "metrics",
               "val_samples", "skipped_samples", "analyses", "config", "versions", "git_sha", "wall_time_s",
               "n_params", "run_dir", "resumed_from", "dataset_info", "data")


def load_registries() -> None:
    """Import every PE and dataset module now (the registries are lazy: this is for a process that
    forks many runs, e.g. a preloading sweep worker)."""
    list_pes()
    list_datamodules()


def train_grid_for(dm: Any) -> tuple[int, ...] | None:
    """Token grid at the training resolution (``None`` for point clouds)."""
    if dm.modality == "points" or getattr(dm, "tokens", "frames") in ("spiking", "occupied"):  # token sets: no grid
        return None
    shape = tuple(dm.input_shape())
    sizes = shape[-2:] if dm.modality == "image" else shape[-3:]
    patch = (dm.patch_size,) * 2 if dm.modality == "image" else (dm.tubelet, dm.patch_size, dm.patch_size)
    for s, p in zip(sizes, patch):
        if s % p:
            what = "H x W" if dm.modality == "image" else "T x H x W"
            raise ResolutionError(f"input size {'x'.join(map(str, sizes))} ({what}) of dataset {dm.name!r} is not "
                                  f"divisible by its patch size {'x'.join(map(str, patch))}; choose a --resolution "
                                  f"that is a multiple of it")
    return tuple(s // p for s, p in zip(sizes, patch))


def _batch_limit(v: float | None) -> float | int | None:
    """``--limit-*-batches``: a fraction (<= 1) stays a float, a count (> 1) becomes the int Lightning
    expects (it rejects a float above 1)."""
    return int(v) if v is not None and v > 1 else v


def _strict_json(obj: Any) -> Any:
    """Non-finite floats -> None, so results.json is standard JSON (no ``NaN`` / ``Infinity``)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _strict_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_strict_json(v) for v in obj]
    return obj


def _check_data_root(dm: Any, max_fraction: float) -> dict[str, Any]:
    """Build the sample lists now (``dm.preflight``: unreadable pickles, no images, listed files
    missing raise ``DataRootError``) and refuse a split with more than ``max_fraction`` of its listed
    files missing, before anything is written. -> what ``results.json`` records as ``data``: the split sizes and,
    for a data root, :func:`~pebench.core.fingerprint.data_fingerprint` of its files (no path)."""
    sizes = dm.preflight()
    for split, (listed, missing, first) in sorted(getattr(dm, "missing_by_split", {}).items()):
        if listed and missing / listed > max_fraction:
            raise DataRootError(f"{dm.name}: {missing} of the {listed} {split} files listed do not exist "
                                f"(first: {first!r}), more than max_skipped_fraction={max_fraction:g}; "
                                f"expected layout: {dm.expected_layout}")
    root = getattr(dm, "data_root", None)
    return {"splits": dict(sizes or {}),
            "fingerprint": data_fingerprint(str(root)) if getattr(dm, "needs_data_root", False) and root else None}


@dataclass(frozen=True)
class Prepared:
    """Everything :func:`prepare` builds for one run (nothing written yet)."""

    cfg: RunConfig                 # resolved configuration
    dm: Any                        # the datamodule (a task may wrap it, e.g. DINO's multi-crop views)
    task: L.LightningModule        # tokenizer -> backbone -> head -> loss/metrics
    setup: Any                     # the task's TaskSetup (primary metric, analysis hooks, extra results)
    trainer: L.Trainer
    run_dir: Path
    analyses: tuple[str, ...]      # the analyses that will run after training, in order
    explicit_analyses: bool        # asked for by name (a skipped one then makes the run incomplete)
    counter: ValSampleCounter      # per-rank sample counts, reduced over ranks
    pe_label: str                  # the PE and its non-default options (the leaderboard's row label)
    dataset_info: dict[str, Any]   # what results.json records about the dataset (no_pe_bound)
    data_record: dict[str, Any]    # which data the run saw: split sizes, the data root's fingerprint


def prepare(cfg: RunConfig, check_run_dir: bool = False, keep_complete: bool = False) -> Prepared:
    """Validate everything that can be validated without touching the disk; build the pieces.

    ``check_run_dir``: also check, before Lightning prints anything, that the output root is writable
    and that the run directory holds no run of another configuration (``bench run`` does; rebuilding a
    run's model for an analysis does not). ``keep_complete``: refuse a run directory holding a complete run
    of this configuration on other data (see :func:`run`).
    Raises :class:`~pebench.core.errors.UserError` subclasses for user errors (exit code 2 in the CLI).
    The steps run in this order (it decides which of several errors is reported).
    """
    load_registries()
    cfg = resolve(cfg)
    dm_cls, pe_cls = _check_model_and_pe(cfg)
    analyses, explicit = _requested_analyses(cfg, dm_cls, pe_cls)
    setup = get_task_setup(resolve_task(cfg).task)
    analyses = setup.analyses(analyses, explicit)
    check_logger_installed(cfg.logger)
    dm = _build_datamodule(cfg, dm_cls, setup)
    analyses = _token_set_analyses(cfg, dm, analyses, explicit)
    grid = train_grid_for(dm)
    data_record = _check_data_root(dm, cfg.max_skipped_fraction)
    clamp = batch_clamp(dm, cfg.batch_size)  # a batch larger than the training split: full-batch, said in one line
    if clamp is not None:
        print(batch_clamp_line(cfg.batch_size, clamp, cfg.dataset), file=sys.stderr)
    task = _build_task(cfg, setup, dm, grid, analyses)
    run_dir = _check_placement(cfg, check_run_dir)
    if keep_complete:
        _refuse_other_data(run_dir, data_record)  # before the trainer: Lightning prints when it is built
    counter = ValSampleCounter()
    trainer = _build_trainer(cfg, setup, dm, run_dir, counter)
    return Prepared(cfg=cfg, dm=dm, task=task, setup=setup, trainer=trainer, run_dir=run_dir, analyses=tuple(analyses),
                    explicit_analyses=explicit, counter=counter, pe_label=variant_label(cfg.pe, cfg.pe_options),
                    dataset_info=dataset_info(dm_cls), data_record=data_record)


def _check_model_and_pe(cfg: RunConfig) -> tuple[Any, Any]:
    """The dataset's and the PE's classes (unknown names raise the registries' errors), after checking the
    model name and that the PE applies to the dataset's modality."""
    dm_cls = get_datamodule_class(cfg.dataset)
    pe_cls = get_pe_class(cfg.pe)
    if cfg.model not in list_models():
        raise ConfigError(f"unknown model {cfg.model!r}; available: {', '.join(list_models())}")
    if dm_cls.modality not in tuple(pe_cls.modalities):
        raise PEConfigError(f"PE {cfg.pe!r} does not apply to {dm_cls.modality} data (dataset {cfg.dataset!r}); "
                            f"it supports: {', '.join(pe_cls.modalities)}")
    return dm_cls, pe_cls


def _requested_analyses(cfg: RunConfig, dm_cls: Any, pe_cls: Any) -> tuple[list[str], bool]:
    """``--analyses`` parsed (none for a ``--fast-dev-run`` that names none) and whether they were named;
    a named analysis that does not apply to the PE is an error (``all`` selects only those that apply)."""
    analyses, explicit = parse_analyses(cfg.analyses, synthetic=not dm_cls.needs_data_root,
                                        additive_pe=bool(getattr(pe_cls, "additive", False)))
    if cfg.fast_dev_run and not explicit:
        analyses = []  # a smoke test: analyses only when asked for
    for name in analyses:
        reason = get_analysis(name).applies(pe_cls)
        if reason is not None:
            raise PEConfigError(f"analysis {name!r} does not apply to PE {cfg.pe!r}: {reason}; drop it from "
                                f"--analyses or use --analyses all")
    return analyses, explicit


def _build_datamodule(cfg: RunConfig, dm_cls: Any, setup: Any) -> Any:
    """The dataset's datamodule from the run options and ``--data-option``, as the task wraps it."""
    try:
        dm = dm_cls(batch_size=cfg.batch_size, num_workers=cfg.num_workers, seed=cfg.seed,
                    resolution=cfg.resolution, data_root=cfg.data_root, **cfg.data)
    except TypeError as e:
        raise ConfigError(f"invalid data options for dataset {cfg.dataset!r}: {e}") from None
    return setup.prepare_data(cfg, dm)  # e.g. DINO's multi-crop views + k-NN loaders around the dataset's


def _token_set_analyses(cfg: RunConfig, dm: Any, analyses: list[str], explicit: bool) -> list[str]:
    """The analyses that read a set of tokens (spiking events, the set probes' occupied cells)."""
    named = explicit and cfg.analyses not in ("all", ["all"])
    if getattr(dm, "tokens", "frames") == "spiking":
        analyses = spiking_analyses(analyses, named)
    if getattr(dm, "tokens", "frames") == "occupied":  # the set probes: no analysis reads a set of tokens yet
        analyses = set_probe_analyses(analyses, named, cfg.dataset)
    return analyses


def _build_task(cfg: RunConfig, setup: Any, dm: Any, grid: tuple[int, ...] | None, analyses: list[str]
                ) -> L.LightningModule:
    """The task's LightningModule (seeded), with coordinate augmentation and the attention implementation set,
    the extrapolation sizes checked and, with ``--compile``, its backbone compiled."""
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    try:
        task = setup.build(cfg, dm, grid)
    except TypeError as e:
        if "keyword argument" in str(e):
            raise PEConfigError(f"invalid --pe-option for PE {cfg.pe!r}: {e}") from None
        raise
    try:
        set_coord_augment(task, cfg.coord_aug)  # every backbone of the task; training only
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if cfg.extrapolation_resolutions and "extrapolation" in analyses:  # bad sizes fail now, not as rows later
        setup.analysis_hooks().check_resolutions(task, dm, cfg.extrapolation_resolutions)
    try:
        set_attention_impl(task, check_impl_name(cfg.attention_impl))
        check_pe_impl(check_impl_name(cfg.attention_impl), task.backbone.pe.layer(0))
    except AttentionImplError as e:
        raise ConfigError(str(e)) from None
    if cfg.compile:
        shield_torch_children()  # inductor's CPU probes must not see the repository's encodings/ folder
        task.backbone.compile()  # nn.Module.compile: forward compiled in place, state_dict keys unchanged
    return task


def _check_placement(cfg: RunConfig, check_run_dir: bool) -> Path:
    """The run directory, after the checks of where the run goes: the global batch divisible over the devices,
    (``check_run_dir``) no other configuration in the run directory and a writable output root, and a precision
    the accelerator runs."""
    if isinstance(cfg.devices, int) and cfg.devices > 0 and cfg.batch_size % (cfg.devices * cfg.num_nodes):
        refuse_indivisible_batch(cfg.batch_size, cfg.devices * cfg.num_nodes)
    run_dir = run_dir_for(cfg)
    if check_run_dir:  # user errors before the Trainer's banners
        check_same_configuration(run_dir, config_to_dict(cfg))  # resume / re-run only the same configuration
        check_out_dir(cfg.out)
    check_precision_device(cfg.precision, cfg.accelerator)  # 16-mixed on a CPU: exit 2, not a silent bf16 run
    return run_dir


def _build_trainer(cfg: RunConfig, setup: Any, dm: Any, run_dir: Path, counter: ValSampleCounter) -> L.Trainer:
    """Lightning's Trainer with pebench's callbacks and loggers; sets ``dm.batch_size`` to the per-rank batch."""
    quiet_lightning()
    strategy = ddp_strategy() if cfg.strategy == "ddp" else cfg.strategy
    callbacks: list[Callback] = [counter, StepSeed(cfg.seed), last_checkpoint_callback(run_dir)]
    if cfg.progress_bar:
        callbacks.append(TQDMProgressBar())
    callbacks += stopping_callbacks(cfg, setup.primary_metric(dm), run_dir)
    loggers = build_loggers(cfg, run_dir)
    try:
        trainer = L.Trainer(
            accelerator=cfg.accelerator, devices=cfg.devices, strategy=strategy, num_nodes=cfg.num_nodes,
            precision=cfg.precision, max_epochs=cfg.epochs, deterministic=cfg.deterministic,
            fast_dev_run=cfg.fast_dev_run, limit_train_batches=_batch_limit(cfg.limit_train_batches),
            limit_val_batches=_batch_limit(cfg.limit_val_batches), max_time=cfg.max_time, logger=loggers, callbacks=callbacks,
            default_root_dir=run_dir, enable_progress_bar=cfg.progress_bar, use_distributed_sampler=False,
            num_sanity_val_steps=0, log_every_n_steps=10, enable_model_summary=False,
            **({"val_check_interval": cfg.val_every, "check_val_every_n_epoch": None} if cfg.val_every else {}),
            plugins=[AtomicCheckpointIO()])
    except (MisconfigurationException, ValueError, TypeError, ImportError) as e:  # ImportError: tpu w/o torch_xla
        raise ConfigError(f"invalid trainer options: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    check_multi_node(trainer)
    try:
        check_forced_impl(check_impl_name(cfg.attention_impl), trainer.strategy.root_device.type, training=True)
    except AttentionImplError as e:
        raise ConfigError(str(e)) from None
    world = trainer.num_devices * trainer.num_nodes
    if cfg.batch_size % world:
        refuse_indivisible_batch(cfg.batch_size, world)
    dm.batch_size = cfg.batch_size // world  # per-rank batch; the global batch stays cfg.batch_size
    return trainer


def dataset_info(dm_cls: type) -> dict[str, Any]:
    """What ``results.json`` records about the dataset for readers that do not import datamodules (the
    leaderboard): ``no_pe_bound``, the exact no-PE ceiling of a probe's test split (null for other sets)."""
    bound = getattr(dm_cls, "no_pe_bound", None)
    return {"no_pe_bound": bound() if callable(bound) else None}


def _analyses(task: Any, dm: Any, names: list[str], run_dir: Path, config: dict, hooks: Any = None
              ) -> tuple[dict, bool]:
    """Run each requested analysis (``hooks``: the task's robustness / extrapolation functions, see
    :class:`pebench.analysis.evaluators.TaskAnalyses`); -> (results.json entries, all finished)."""
    if not names:
        return {"analyses": []}, True
    out: dict[str, Any] = {"analyses": list(names)}
    errors: dict[str, str] = {}
    task.eval()
    for i, name in enumerate(names, 1):
        print(f"bench: analysis {i}/{len(names)}: {name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            res = run_analyses(task, dm, [name], run_dir, config, hooks=hooks) or {}
        except Exception as e:  # noqa: BLE001 - recorded; the run is then not "complete"
            errors[name] = f"{type(e).__name__}: {e}"
            print(f"bench: warning: analysis {name!r} failed: {errors[name]}", file=sys.stderr)
            continue
        for k, v in (res.get("analysis_times_s") or {}).items():
            out.setdefault("analysis_times_s", {})[k] = v
        print(f"bench: analysis {i}/{len(names)}: {name} done in {time.perf_counter() - t0:.1f} s", file=sys.stderr,
              flush=True)
        key = ANALYSIS_KEYS[name]
        if key in res:
            out[key] = res[key]
        else:
            errors[name] = "the analysis returned no result"
    if errors:
        out["analysis_errors"] = errors
    return out, not errors


def _write_curves(run_dir: Path, results: dict[str, Any]) -> None:
    """``curves.png`` from metrics.csv and, for DINO, ``eed_checkpoints.png`` (rank 0); a plotting failure is a
    warning, not a failed run."""
    try:
        write_run_curves(run_dir, results)
    except Exception as e:  # noqa: BLE001 - the metrics are safe in metrics.csv either way
        print(f"bench: warning: curves.png not written: {type(e).__name__}: {e}", file=sys.stderr)
    if results.get("eed_checkpoints"):  # --task dino: EED / SSDC over depth per checkpoint
        try:
            save_plot(plot_eed_checkpoints, results["eed_checkpoints"], run_dir / "eed_checkpoints.png",
                      run=run_info(results.get("config")))
        except Exception as e:  # noqa: BLE001 - the numbers are safe in results.json either way
            print(f"bench: warning: eed_checkpoints.png not written: {type(e).__name__}: {e}", file=sys.stderr)


def initial_results(cfg: RunConfig, parts: Prepared, config: dict[str, Any], ckpt: str | None) -> dict[str, Any]:
    """The ``results.json`` of a run that starts now (status ``running``; the resumed checkpoint recorded)."""
    dm, task, run_dir = parts.dm, parts.task, parts.run_dir
    results: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,  # pebench.core.schema: readers migrate older files
        "dataset": cfg.dataset, "pe": cfg.pe, "variant": variant_name(cfg), "pe_label": parts.pe_label,
        "model": cfg.model, "seed": cfg.seed, "task": cfg.task, "status": "running", "metrics": {},
        "primary_metric": parts.setup.primary_metric(dm),
        "skipped_samples": {}, "analyses": list(parts.analyses), "config": config, "versions": versions(),
        "numerics": numerics_record(),
        "git_sha": git_sha(), "wall_time_s": None, "n_params": sum(p.numel() for p in task.parameters()),
        "run_dir": run_dir.relative_to(cfg.out).as_posix(), "resumed_from": None, "val_samples": None,
        "fingerprint": fingerprint(config), "fingerprint_keys": fingerprint_keys(config),
        "dataset_info": parts.dataset_info,
        "data": parts.data_record,  # split sizes and the data root's fingerprint: which data this run saw
        "limited": limited_record(cfg),  # --fast-dev-run / --limit-*-batches: a smoke run, off leaderboards
        "batch_size_effective": batch_clamp(dm, cfg.batch_size),  # the whole training split when the batch exceeds it
        # the task a run without --task trains on this dataset: a rerun is matched without importing the dataset
        "dataset_default_task": str(getattr(get_datamodule_class(cfg.dataset), "default_task", "classification")),
    }
    if ckpt is not None:
        try:
            meta = load_checkpoint(ckpt)  # weights_only: a planted pickle never runs (one line, exit 2)
        except UserError as e:
            raise ConfigError(f"cannot resume: {e}", phase="checkpoint") from None
        try:
            results["resumed_from"] = {"checkpoint": Path(ckpt).name, "epoch": epochs_done(meta),
                                       "global_step": int(meta.get("global_step", 0))}
        except (TypeError, ValueError) as e:
            raise ConfigError(f"cannot resume from {ckpt}: corrupt or incompatible checkpoint "
                              f"({type(e).__name__}); delete it to start over") from None
        del meta
    return results


def claim_run_dir(run_dir: Path, config: dict[str, Any], ckpt: str | None, write: Any) -> Any:
    """Rank 0: lock ``run_dir`` (a second ``bench run`` on it stops here, exit 2), check it holds this
    configuration, clear a previous run's artefacts (or keep a resumed one's log), write ``config.yaml`` and
    ``results.json`` (``running``). Returns the lock."""
    lock = run_dir_lock(run_dir)
    atexit.register(lock.release)
    try:
        removed = remove_stale_temp_files(run_dir)  # a killed write's temp files (no live writer: we hold the lock)
        if removed:
            print(f"bench: removed {len(removed)} temp file(s) a killed earlier attempt left: {', '.join(removed)}",
                  file=sys.stderr)
        check_same_configuration(run_dir, config)  # again, now that no other run can write it
        if ckpt is None:  # fresh start: drop artefacts of a previous (complete) run
            for name in ("last.ckpt", "metrics.csv"):
                (run_dir / name).unlink(missing_ok=True)
        elif (run_dir / "metrics.csv").is_file():  # CSVLogger truncates it; keep the earlier attempt's log
            n = len(list(run_dir.glob("metrics.attempt*.csv")))
            os.replace(run_dir / "metrics.csv", run_dir / f"metrics.attempt{n}.csv")
        atomic_write_yaml(run_dir / "config.yaml", {"schema_version": SCHEMA_VERSION, **config})
        write("running")
    except BaseException:  # e.g. a full disk: the directory is free again for the next attempt
        lock.release()
        raise
    print(f"bench: run directory {run_dir}" + (f" (resuming from {Path(ckpt).name})" if ckpt else ""),
          file=sys.stderr)
    return lock


def train_and_measure(cfg: RunConfig, parts: Prepared, ckpt: str | None, results: dict[str, Any]) -> str | None:
    """Fit, then validate (and test, where the dataset has a held-out split) the weights ``--eval-checkpoint``
    names; record metrics, the task's extra keys and the sample counts in ``results``. Returns the data problem
    that makes the run incomplete (too many skipped samples), or ``None``."""
    dm, task, trainer = parts.dm, parts.task, parts.trainer
    trainer.fit(task, datamodule=dm, ckpt_path=ckpt, weights_only=True)  # no pickled code runs
    evaluated = load_best(trainer, task)  # --eval-checkpoint best: the best validation's weights from here on
    if evaluated is not None:
        results["evaluated_checkpoint"] = evaluated
    val = trainer.validate(task, datamodule=dm, verbose=False)
    metrics = dict(val[0] if val else {})
    if getattr(dm, "has_test_split", False):  # a held-out (e.g. out-of-distribution) test split: test/*
        test = trainer.test(task, datamodule=dm, verbose=False)
        metrics.update(test[0] if test else {})
    results["metrics"] = {k: float(v) for k, v in sorted(metrics.items())}
    results.update(parts.setup.extra_results(task))
    results["val_samples"] = parts.counter.total
    results["skipped_samples"], data_problem = skip_report(task, dm, parts.counter, cfg.max_skipped_fraction)
    if getattr(dm, "tokens", "frames") == "spiking":  # how often the per-sample token cap was hit
        results["token_cap"] = cap_report(dm.spiking.max_tokens, parts.counter.cap)
    return data_problem


def analyse_and_judge(cfg: RunConfig, parts: Prepared, config: dict[str, Any], results: dict[str, Any]) -> bool:
    """Rank 0 after training: the analyses, the stopping record, the attention paths used and the curves, into
    ``results``. Returns whether the run is complete as far as these go (analyses finished, not cut short by
    an interruption or ``--max-time``)."""
    dm, task, trainer, run_dir = parts.dm, parts.task, parts.trainer, parts.run_dir
    no_samples = results["val_samples"] == 0 or (parts.counter.train_skipped and not parts.counter.train_kept)
    extra, finished = _analyses(task, dm, [] if no_samples else list(parts.analyses), run_dir, config,
                                hooks=parts.setup.analysis_hooks())
    results.update(extra)
    complete = finished or (extra.get("analyses") == "unavailable" and not parts.explicit_analyses)
    stopped = stopped_record(trainer, cfg)
    if stopped is not None:
        results["stopped_at_target"] = stopped
    ended_by_rule = bool(stopped and (stopped["reached"] or stopped["gave_up"]))  # not by --max-time
    if trainer.interrupted or (cfg.max_time and trainer.current_epoch < cfg.epochs and not cfg.fast_dev_run
                               and not ended_by_rule):
        complete = False
    results["attention_impl"] = attention_impls_used(task)  # per phase, as run (pebench.models.attention)
    _write_curves(run_dir, results)
    return bool(complete)


def raise_failure(e: Exception, trainer: Any, run_dir: Path) -> NoReturn:
    """Re-raise a run's failure (``results.json`` already says ``failed``): a DDP rendezvous failure as a user
    error, a :class:`RunFailedError` saying whether a checkpoint was kept, anything else as the bug it is."""
    if is_rendezvous_failure(e):
        raise ConfigError(rendezvous_message(e, trainer), phase="run") from None
    if isinstance(e, RunFailedError):  # say what is true about the files left behind
        kept = "last.ckpt kept" if (run_dir / "last.ckpt").is_file() else "no checkpoint had been written yet"
        raise RunFailedError(f"{e} (training stopped; {kept}; results.json status failed)") from None
    raise e  # a bug: the CLI shows its traceback


def _refuse_other_data(run_dir: Path, data_record: dict[str, Any]) -> None:
    """A run directory holding a complete run on other data (the recorded data-root fingerprint differs from
    the one just taken): one line, exit 2, nothing overwritten (``bench run --force`` retrains it)."""
    try:
        old = read_json(run_dir / "results.json")
    except (OSError, ValueError):
        return
    if not isinstance(old, dict) or old.get("status") != "complete":
        return
    recorded = old.get("data", {}).get("fingerprint") if isinstance(old.get("data"), dict) else None
    now = data_record.get("fingerprint")
    if isinstance(recorded, dict) and isinstance(now, dict) and recorded.get("sha256") != now.get("sha256"):
        raise ConfigError(f"run directory {str(run_dir)!r} holds a complete run of this configuration on other data "
                          f"(its data root had {recorded.get('files')} files, fingerprint "
                          f"{str(recorded.get('sha256'))[:12]}; this one has {now.get('files')}, "
                          f"{str(now.get('sha256'))[:12]}); to train it again on this data: --force, or use a new --out",
                          phase="data")


def run(cfg: RunConfig, keep_complete: bool = False) -> dict[str, Any]:
    """Train and evaluate one configuration; returns the results dict (see README).

    ``keep_complete`` (``bench run`` without ``--force``): a run directory that holds a complete run of this
    configuration on other data (its recorded data-root fingerprint) is refused, after the new data root is
    checked, instead of being trained again."""
    t0 = time.time()
    flush_denormals()  # CPU: denormals to zero (PaPE's logits underflow; see pebench.runner.numerics)
    # before anything computes; config.yaml records the count in effect, so a rerun from it uses the same
    cfg = dataclasses.replace(cfg, threads=set_intra_op_threads(cfg.threads))
    parts = prepare(cfg, check_run_dir=True, keep_complete=keep_complete)
    cfg, dm, trainer, run_dir = parts.cfg, parts.dm, parts.trainer, parts.run_dir
    rank0 = trainer.global_rank == 0
    config = config_to_dict(cfg)
    if rank0:
        check_writable(cfg.out)
    ckpt = resume_checkpoint_path(run_dir)
    results = initial_results(cfg, parts, config, ckpt)

    def write(status: str | None = None) -> None:
        if status:
            results["status"] = status
        results["wall_time_s"] = round(time.time() - t0, 3)
        if rank0:
            atomic_write_json(run_dir / "results.json", _strict_json(results))

    lock = claim_run_dir(run_dir, config, ckpt, write) if rank0 else None
    orig = install_samplers(dm, cfg.seed)
    signals = InterruptSignals()
    try:
        data_problem = train_and_measure(cfg, parts, ckpt, results)
        if trainer.world_size > 1 and torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.barrier()
            torch.distributed.destroy_process_group()  # analyses run on rank 0 alone
        if not rank0:
            return results
        restore_loaders(dm, orig)
        if data_problem:  # status incomplete with the reason; no analyses on an empty split
            results["incomplete_reason"] = data_problem
            print(f"bench: warning: {data_problem}", file=sys.stderr)
        complete = analyse_and_judge(cfg, parts, config, results) and not data_problem
        write("complete" if complete else "incomplete")
    except (KeyboardInterrupt, SystemExit) as e:
        # Ctrl-C / SIGTERM (Lightning turns a KeyboardInterrupt inside fit into sys.exit(1))
        if isinstance(e, SystemExit) and signals.received is None and not isinstance(e, SIGTERMException):
            raise
        signum = signals.received or (signal.SIGTERM if isinstance(e, SIGTERMException) else signal.SIGINT)
        results["interrupted_by"] = signal.Signals(signum).name
        results["resume_command"] = resume_command(run_dir, cfg.out)
        write("interrupted")
        raise RunInterrupted(signum, results["resume_command"]) from None
    except Exception as e:
        results["error"] = f"{type(e).__name__}: {e}"
        write("failed")
        raise_failure(e, trainer, run_dir)
    finally:
        signals.restore()
        if lock is not None:
            lock.release()
    return results

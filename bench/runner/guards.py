"""Checks that keep ``bench run``'s promises to a first-time user (issue #50).

* :func:`complete_run` -- a run directory that already holds a complete run of the configuration asked
  for is not trained again: ``bench run`` prints one line (run directory, status, primary metric, how to
  re-run: ``--force``) and exits 0. It reads ``results.json`` and compares fingerprints
  (:mod:`pebench.core.fingerprint`) without importing torch, so the answer takes well under a second; with a
  ``--data-root``, the data root's files are fingerprinted too (a listing, no contents read) and must be the
  ones the run saw, else the run path checks the new root and refuses to overwrite the complete run.
* :func:`batch_clamp` -- a global batch larger than the training split trains full-batch (one batch of the
  whole split per epoch, as the loader does); ``bench run`` says so in one line naming both numbers and
  ``results.json`` records ``batch_size_effective``.
* :func:`check_precision_device` -- ``--precision 16-mixed`` (float16 autocast) on a CPU is a user error:
  Lightning would silently train in bf16-mixed instead.
* :func:`limited_record` -- what ``results.json`` records about a run shortened by ``--fast-dev-run`` or
  ``--limit-*-batches`` (``limited``); the leaderboard keeps such runs off its tables unless asked.

Everything above the function bodies that import torch is torch-free (the CLI imports this module first).
"""
from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from typing import Any

from pebench.core.errors import ConfigError
from pebench.core.fingerprint import data_fingerprint, fingerprint
from pebench.core.io import read_json
from pebench.core.locks import RunLock
from pebench.runner.config import DEFAULT_PE_PREFERENCE, RunConfig, config_to_dict, run_dir_for
from pebench.runner.integrity import RUN_LOCK_NAME, config_differences

__all__ = ["default_pe_guess", "complete_run", "complete_run_line", "batch_clamp", "batch_clamp_line", "check_precision_device",
           "limited_record"]


def default_pe_guess() -> str | None:
    """The default run's PE without importing torch: the first of ``DEFAULT_PE_PREFERENCE`` whose module
    file ships in ``pebench.encodings`` (the registry imports ``<name with - as _>.py`` for a name), or
    ``None`` when that cannot be told (then the caller takes the slow path, which asks the registry)."""
    try:
        spec = importlib.util.find_spec("pebench.encodings")  # imports pebench only, not the package
    except (ImportError, ValueError):
        return None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        for name in DEFAULT_PE_PREFERENCE:
            if (Path(loc) / f"{name.replace('-', '_')}.py").is_file():
                return name
    return None


def complete_run(cfg: RunConfig) -> dict[str, Any] | None:
    """The ``results.json`` of a complete run of exactly ``cfg`` (same fingerprint, seed and analyses), or
    ``None`` (no such directory, not complete, another configuration, or not decidable without torch:
    ``--data-option tokens=...``, whose run directory depends on the dataset class's default, or no
    ``--task`` and a file without ``dataset_default_task``).

    ``cfg`` may be unresolved (``pe`` None: the default PE is guessed torch-free; a resolved ``cfg`` is
    used as it is). The fingerprinted keys are compared as :func:`~pebench.runner.integrity.config_differences`
    does for a resume; ``analyses`` too (not fingerprinted, but asking for other analyses is asking for
    work the directory does not hold)."""
    if "tokens" in (cfg.data or {}):
        return None
    pe = cfg.pe or default_pe_guess()
    if pe is None:
        return None
    cfg = dataclasses.replace(cfg, pe=pe)
    run_dir = run_dir_for(cfg)
    try:
        res = read_json(run_dir / "results.json")  # bounded: a hostile file is "not complete"
    except (OSError, ValueError):
        return None
    if not isinstance(res, dict) or res.get("status") != "complete" or not isinstance(res.get("config"), dict):
        return None
    if _locked(run_dir):  # another bench run (e.g. a --force) holds it: the normal path names the holder
        return None
    if cfg.task is None:  # the dataset's own task, as the run recorded it (older files: not decidable here)
        default = res.get("dataset_default_task")
        if not isinstance(default, str) or not default:
            return None
        cfg = dataclasses.replace(cfg, task=default)
    new = config_to_dict(cfg)
    old = res["config"]
    if config_differences(old, new) or old.get("analyses", "auto") != new["analyses"]:
        return None
    recorded = res.get("fingerprint")
    if isinstance(recorded, str) and recorded and recorded != fingerprint(new):
        return None
    if not _same_data(res, cfg.data_root):  # another data root's files: the run path checks it, then refuses
        return None
    return {**res, "run_dir": str(run_dir)}


def _same_data(res: dict[str, Any], data_root: str | None) -> bool:
    """Whether the data root given now holds the files the complete run saw (its recorded
    :func:`~pebench.core.fingerprint.data_fingerprint`); ``True`` for embedded data and for files written
    before the fingerprint was recorded. A root that is not a directory is not the same data: the run path
    then reports it as a bad data root."""
    data = res.get("data")
    recorded = data.get("fingerprint") if isinstance(data, dict) else None
    if not data_root or not isinstance(recorded, dict):
        return True
    if not Path(data_root).is_dir():
        return False
    return data_fingerprint(str(data_root)).get("sha256") == recorded.get("sha256")


def _locked(run_dir: Path) -> bool:
    """Whether ``<run_dir>/.run.lock`` is held by a live process (a stale lock does not count)."""
    lock = RunLock(run_dir / RUN_LOCK_NAME)
    data, mtime = lock._read()
    return data is not None and not lock._is_stale(data, mtime)


def complete_run_line(res: dict[str, Any], command: str) -> str:
    """The one line ``bench run`` prints for a complete run it does not retrain."""
    name = res.get("primary_metric")
    metrics = res.get("metrics") if isinstance(res.get("metrics"), dict) else {}
    value = metrics.get(name) if isinstance(name, str) else None
    shown = f"{name} {value:.4f}" if isinstance(value, (int, float)) else f"{name or 'primary metric'} not recorded"
    return (f"bench: {res['run_dir']}: already complete ({shown}; results.json), not trained again; "
            f"to train it again from scratch: {command} --force")


def batch_clamp(dm: Any, batch_size: int) -> int | None:
    """The effective batch when the global ``batch_size`` is larger than the training split: its size ``n`` (the
    loader then yields one batch of ``n`` per epoch, a full-batch run); ``None`` when the batch fits, or for
    datamodules whose training split cannot be sized (eval-only sets raise their own error later).

    A clamp, not an error: the shipped ``*-smoke`` presets train on the tests' tiny fixtures with a batch
    larger than their few samples. ``bench run`` announces it in one line naming both numbers
    (:func:`batch_clamp_line`) and ``results.json`` records ``batch_size_effective``."""
    try:
        n = len(dm.train_dataset())
    except (TypeError, NotImplementedError, AttributeError):
        return None
    return n if 0 < n < batch_size else None


def batch_clamp_line(batch_size: int, n: int, dataset: str) -> str:
    return (f"bench: note: --batch-size {batch_size} is larger than the training split of dataset {dataset!r} "
            f"({n} samples): every epoch is one full batch of {n} (results.json: batch_size_effective {n})")


def _run_device(accelerator: str) -> str:
    """The device type Lightning's ``accelerator`` choice resolves to on this machine (cuda, mps or cpu)."""
    import torch  # deferred: only prepare() calls this, after torch is imported

    acc = str(accelerator).lower()
    if acc in ("cpu", "cuda", "mps"):
        return acc
    if acc in ("auto", "gpu"):
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return "mps"
        return "cpu" if acc == "auto" else "none"
    return acc


def check_precision_device(precision: str, accelerator: str) -> None:
    """``--precision 16-mixed`` (float16 autocast) on a CPU is a :class:`ConfigError`: Lightning would warn
    and train in bf16-mixed, a setting the user did not ask for."""
    if str(precision) not in ("16-mixed", "16"):
        return
    if _run_device(accelerator) == "cpu":
        raise ConfigError(f"--precision {precision} (float16 autocast) needs a GPU; this run would train on the "
                          f"CPU, where float16 autocast is not supported: use --precision bf16-mixed (what Lightning "
                          f"would silently substitute) or 32-true (the default)")


def limited_record(cfg: RunConfig) -> dict[str, Any] | None:
    """``results.json``'s ``limited`` entry: which of ``--fast-dev-run`` / ``--limit-train-batches`` /
    ``--limit-val-batches`` shortened the run (a smoke run: its numbers are not results), or ``None``."""
    out: dict[str, Any] = {}
    if cfg.fast_dev_run:
        out["fast_dev_run"] = True
    for key in ("limit_train_batches", "limit_val_batches"):
        v = getattr(cfg, key)
        if v is not None and v != 1.0:
            out[key] = v
    return out or None

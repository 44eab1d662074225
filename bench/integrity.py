"""Run-directory integrity: one configuration per run directory, one process at a time.

* **Fingerprint.** ``fingerprint(config)`` is the SHA-256 of the resolved run configuration
  (``config_to_dict``) without the keys in :data:`NON_RESULT_KEYS` and the replicate key ``seed``,
  serialised as canonical JSON (sorted keys, no whitespace). Runs with the same fingerprint are
  seeds of one experiment, which the leaderboard may average; ``results.json`` records it
  (``fingerprint``, ``fingerprint_keys``) beside ``seed``. A run directory is resumed, re-run or
  skipped by a sweep only when the configuration asked for now matches the one it holds, seed
  included (:func:`check_same_configuration`; the seed also names the directory); otherwise
  ``bench run`` stops with one line naming the differing keys, before it touches anything. The
  leaderboard never averages runs whose fingerprints (or code versions) differ.
* **Lock.** :func:`run_dir_lock` takes ``<run_dir>/.run.lock`` (pid, host, process start time;
  created with ``O_CREAT | O_EXCL``): a second ``bench run`` on the same directory stops with one
  line naming the holder; a lock left by a dead process on this host is taken over. (``bench
  sweep`` workers hold a separate ``.lock`` around the ``bench run`` they start.)
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
from pathlib import Path
from typing import Any, Mapping

import yaml

from .core.errors import ConfigError

__all__ = ["NON_RESULT_KEYS", "REPLICATE_KEYS", "RUN_LOCK_NAME", "grouping_fingerprint", "fingerprint", "fingerprint_keys", "config_differences",
           "previous_config", "check_same_configuration", "run_dir_lock", "RunDirBusy"]

#: Configuration keys that do not change what a run computes, left out of the fingerprint:
#: where results are written or read from (``out``; ``data_root``: the same data set at another path),
#: how fast data loads (``num_workers``: each worker is seeded from the run's seed; the sample
#: stream is statistically the same), what is shown or logged (``progress_bar``, ``tensorboard``, ``logger``),
#: a wall-clock budget (``max_time``: a run stopped by it is not ``complete``, and resuming with a
#: larger one continues to the same end point), which analyses to run (``analyses``: it adds or
#: leaves out sections, the numbers of a section do not depend on it) and the threshold above which
#: skipped samples make a run not complete (``max_skipped_fraction``: it changes the status, not a
#: number), and how attention is computed (``attention_impl``: every implementation computes the same
#: function, equal to float rounding; ``results.json`` records the one used). Everything else is kept,
#: including ``devices``, ``num_nodes``, ``strategy``,
#: ``accelerator`` and ``precision`` (the per-rank batch composition and the arithmetic change with
#: them), ``analysis_options`` and ``extrapolation_resolutions`` (they change analysis numbers).
NON_RESULT_KEYS: tuple[str, ...] = ("out", "data_root", "num_workers", "progress_bar", "tensorboard", "logger",
                                    "max_time", "analyses", "max_skipped_fraction", "attention_impl")
#: keys that index replicates of one experiment: compared on resume, left out of the fingerprint
REPLICATE_KEYS: tuple[str, ...] = ("seed",)
RUN_LOCK_NAME = ".run.lock"


def fingerprint_keys(config: Mapping[str, Any]) -> list[str]:
    """The keys of ``config`` that enter the fingerprint, sorted."""
    return sorted(k for k in config if k not in NON_RESULT_KEYS and k not in REPLICATE_KEYS)


def fingerprint(config: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of ``config`` without :data:`NON_RESULT_KEYS` and
    :data:`REPLICATE_KEYS`."""
    sub = {k: config[k] for k in fingerprint_keys(config)}
    text = json.dumps(sub, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def grouping_fingerprint(results: Mapping[str, Any]) -> str | None:
    """The fingerprint of a ``results.json`` dict: the recorded ``fingerprint``, else (files written
    before fingerprints were recorded) that of its ``config`` with ``RunConfig``'s defaults for keys
    it lacks; ``None`` without either."""
    fp = results.get("fingerprint")
    if isinstance(fp, str) and fp:
        return fp
    cfg = results.get("config")
    if isinstance(cfg, Mapping):
        return fingerprint({**_defaults(), **cfg})
    return None


def config_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Fingerprinted and replicate keys whose values differ between ``old`` and ``new``, sorted (a
    key missing on one side counts as ``RunConfig``'s default, else as different)."""
    keys = set(fingerprint_keys(old)) | set(fingerprint_keys(new)) | set(REPLICATE_KEYS)
    defaults = _defaults()
    old, new = {**defaults, **old}, {**defaults, **new}
    canon = lambda v: json.dumps(v, sort_keys=True, default=str)  # noqa: E731
    return sorted(k for k in keys if k not in old or k not in new or canon(old[k]) != canon(new[k]))


def _defaults() -> dict[str, Any]:
    """``RunConfig``'s defaults: a key that a run directory written by an older version lacks had
    its default value then (options are only ever added with the old behaviour as default)."""
    from .config import RunConfig, config_to_dict

    return config_to_dict(RunConfig())


def previous_config(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The configuration a run directory holds: ``results.json``'s ``config``, else ``config.yaml``;
    ``None`` when it holds neither (a new directory)."""
    d = Path(run_dir)
    try:
        with open(d / "results.json", encoding="utf-8") as f:
            res = json.load(f)
        if isinstance(res, dict) and isinstance(res.get("config"), dict):
            return res["config"]
    except (OSError, ValueError):
        pass
    try:
        cfg = yaml.safe_load((d / "config.yaml").read_text(encoding="utf-8"))
        if isinstance(cfg, dict):
            return cfg
    except (OSError, yaml.YAMLError):
        pass
    return None


def _show(v: Any) -> str:
    s = json.dumps(v, sort_keys=True, default=str)
    return s if len(s) <= 40 else s[:37] + "..."


def check_same_configuration(run_dir: str | os.PathLike, config: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` (one line: differing keys, old -> new, what to do) when ``run_dir``
    holds a run of another configuration, or checkpoints of an unknown one."""
    d = Path(run_dir)
    old = previous_config(d)
    if old is None:
        ckpts = [p for p in [d / "last.ckpt", *sorted(d.glob("hpc_ckpt_*.ckpt"))] if p.is_file()]
        if ckpts:
            raise ConfigError(f"cannot resume from {ckpts[0]}: the run directory holds no configuration "
                              f"(config.yaml or results.json's config), so the checkpoint's is unknown; delete it "
                              f"to start over, or use a new --out")
        return
    diff = config_differences(old, config)
    if diff:
        shown = ", ".join(f"{k}: {_show(old[k]) if k in old else '(absent)'} -> "
                          f"{_show(config[k]) if k in config else '(absent)'}" for k in diff)
        raise ConfigError(f"run directory {str(d)!r} holds a run of another configuration ({shown}); "
                          f"resume it with `bench run --config {d / 'config.yaml'}`, or use a new --out "
                          f"or delete {d}")


class RunDirBusy(ConfigError):
    """Another live process holds the run directory's lock (exit code 2)."""


def run_dir_lock(run_dir: str | os.PathLike):
    """Take ``<run_dir>/.run.lock`` (breaking a stale one); -> the held lock (call ``release()``).

    Raises :class:`RunDirBusy` naming the holder when another live process holds it.
    """
    from .sweep import RunLock  # the sweep's O_EXCL lock with stale-pid detection

    lock = RunLock(Path(run_dir) / RUN_LOCK_NAME)
    if lock.acquire():
        return lock
    info = lock.holder() or {}
    where = "this host" if info.get("hostname") == socket.gethostname() else f"host {info.get('hostname')}"
    raise RunDirBusy(f"run directory {str(run_dir)!r} is in use by pid {info.get('pid')} on {where} "
                     f"(lock {Path(run_dir) / RUN_LOCK_NAME}); wait for it to finish, or delete the lock "
                     f"if that process is gone")

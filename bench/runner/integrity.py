"""Run-directory integrity: one configuration per run directory, one process at a time.

* **Fingerprint.** ``fingerprint(config)`` (defined in :mod:`pebench.core.fingerprint`, re-exported
  here) is the SHA-256 of the resolved run configuration (``config_to_dict``) without the keys in
  :data:`NON_RESULT_KEYS` and the replicate key ``seed``, serialised as canonical JSON (sorted keys,
  no whitespace); the comparisons here fill keys an older file lacks with ``RunConfig``'s defaults.
  Runs with the same fingerprint are seeds of one experiment, which the leaderboard may average;
  ``results.json`` records it (``fingerprint``, ``fingerprint_keys``) beside ``seed``. A run
  directory is resumed, re-run or skipped by a sweep only when the configuration asked for now
  matches the one it holds, seed included (:func:`check_same_configuration`; the seed also names
  the directory); otherwise ``bench run`` stops with one line naming the differing keys, before it
  touches anything. The leaderboard never averages runs whose fingerprints (or code versions) differ.
* **Lock.** :func:`run_dir_lock` takes ``<run_dir>/.run.lock`` (pid, host, process start time;
  created with ``O_CREAT | O_EXCL``): a second ``bench run`` on the same directory stops with one
  line naming the holder; a lock left by a dead process on this host is taken over. (``bench
  sweep`` workers hold a separate ``.lock`` around the ``bench run`` they start.)
"""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any, Mapping

from pebench.core import fingerprint as _fingerprints
from pebench.core.errors import ConfigError
from pebench.core.fingerprint import NON_RESULT_KEYS, REPLICATE_KEYS, fingerprint, fingerprint_keys
from pebench.core.io import load_yaml_untrusted, read_json
from pebench.core.locks import RunLock  # O_EXCL lock file with stale-pid detection
from pebench.runner.config import RunConfig, config_to_dict

__all__ = ["NON_RESULT_KEYS", "REPLICATE_KEYS", "RUN_LOCK_NAME", "check_writable", "check_out_dir",
           "grouping_fingerprint", "fingerprint", "fingerprint_keys", "config_differences", "previous_config",
           "check_same_configuration", "run_dir_lock", "RunDirBusy"]

RUN_LOCK_NAME = ".run.lock"


def grouping_fingerprint(results: Mapping[str, Any]) -> str | None:
    """The fingerprint of a ``results.json`` dict: the recorded ``fingerprint``, else (files written
    before fingerprints were recorded) that of its ``config`` with ``RunConfig``'s defaults for keys
    it lacks; ``None`` without either."""
    return _fingerprints.grouping_fingerprint(results, _defaults())


def config_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Fingerprinted and replicate keys whose values differ between ``old`` and ``new``, sorted (a
    key missing on one side counts as ``RunConfig``'s default, else as different)."""
    return _fingerprints.config_differences(old, new, _defaults())


def _defaults() -> dict[str, Any]:
    """``RunConfig``'s defaults: a key that a run directory written by an older version lacks had
    its default value then (options are only ever added with the old behaviour as default)."""
    return config_to_dict(RunConfig())


def previous_config(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The configuration a run directory holds: ``results.json``'s ``config``, else ``config.yaml``;
    ``None`` when it holds neither (a new directory)."""
    d = Path(run_dir)
    try:
        res = read_json(d / "results.json")  # bounded: a hostile file is "no configuration", not a traceback
        if isinstance(res, dict) and isinstance(res.get("config"), dict):
            return res["config"]
    except (OSError, ValueError):
        pass
    try:
        cfg = load_yaml_untrusted((d / "config.yaml").read_text(encoding="utf-8"))
        if isinstance(cfg, dict):
            return cfg
    except (OSError, ValueError):  # UnicodeDecodeError and UnreadableYAML are ValueErrors
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
    lock = RunLock(Path(run_dir) / RUN_LOCK_NAME)
    if lock.acquire():
        return lock
    info = lock.holder() or {}
    where = "this host" if info.get("hostname") == socket.gethostname() else f"host {info.get('hostname')}"
    raise RunDirBusy(f"run directory {str(run_dir)!r} is in use by pid {info.get('pid')} on {where} "
                     f"(lock {Path(run_dir) / RUN_LOCK_NAME}); wait for it to finish, or delete the lock "
                     f"if that process is gone")


def check_writable(out: str | Path) -> None:
    """Create ``out`` and write/remove a probe file, or raise :class:`ConfigError`."""
    p = Path(out)
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / f".bench-write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise ConfigError(f"output directory {str(p)!r} is not writable: {e.strerror or e}") from None


def check_out_dir(out: str | Path) -> None:
    """Whether ``out`` can be created and written, without creating anything: its nearest existing
    ancestor must be a writable directory. Else :class:`ConfigError` (before Lightning prints anything;
    :func:`check_writable` then probes with a real file once the run starts)."""
    p = Path(out).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    if not p.is_dir():
        raise ConfigError(f"output directory {str(out)!r} is not writable: {str(p)!r} is not a directory")
    if not os.access(p, os.W_OK | os.X_OK):
        raise ConfigError(f"output directory {str(out)!r} is not writable: no write permission on {str(p)!r}")

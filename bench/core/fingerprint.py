"""Configuration fingerprints: which runs are seeds of one experiment (torch-free, no pebench imports).

``fingerprint(config)`` is the SHA-256 of a resolved run configuration (a ``config_to_dict``
mapping) without the keys in :data:`NON_RESULT_KEYS` and the replicate key ``seed``, serialised as
canonical JSON (sorted keys, no whitespace). Runs with the same fingerprint are seeds of one
experiment, which the leaderboard may average.

A configuration written by an older version may lack keys added since; such a key had its default
value then (options are only ever added with the old behaviour as default). The functions that
compare or re-fingerprint stored configurations therefore take ``defaults``: the current run
configuration's default values (``pebench.runner.integrity`` passes ``RunConfig``'s). Without them a
missing key counts as different from any value.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Mapping

__all__ = ["NON_RESULT_KEYS", "REPLICATE_KEYS", "LATER_KEYS", "fingerprint_keys", "fingerprint", "grouping_fingerprint",
           "config_differences", "data_fingerprint", "DATA_FINGERPRINT_MAX_STAT"]

#: Configuration keys that do not change what a run computes, left out of the fingerprint:
#: where results are written or read from (``out``; ``data_root``: the same data set at another path),
#: how fast data loads (``num_workers``: each worker is seeded from the run's seed; the sample
#: stream is statistically the same), what is shown or logged (``progress_bar``, ``tensorboard``, ``logger``),
#: a wall-clock budget (``max_time``: a run stopped by it is not ``complete``, and resuming with a
#: larger one continues to the same end point), which analyses to run (``analyses``: it adds or
#: leaves out sections, the numbers of a section do not depend on it) and the threshold above which
#: skipped samples make a run not complete (``max_skipped_fraction``: it changes the status, not a
#: number), the file's ``schema_version`` (``config.yaml`` records it: pebench.core.schema), and how attention is computed (``attention_impl``: every implementation computes the same
#: function, equal to float rounding; ``results.json`` records the one used), and the intra-op thread count
#: (``threads``: the same computation with another reduction order, equal to float rounding; ``config.yaml``
#: records it so that a rerun uses it, pebench.runner.threads). Everything else is kept, including ``devices``, ``num_nodes``, ``strategy``,
#: ``accelerator`` and ``precision`` (the per-rank batch composition and the arithmetic change with
#: them), ``analysis_options`` and ``extrapolation_resolutions`` (they change analysis numbers).
NON_RESULT_KEYS: tuple[str, ...] = ("out", "data_root", "num_workers", "progress_bar", "tensorboard", "logger",
                                    "max_time", "analyses", "max_skipped_fraction", "attention_impl",
                                    "schema_version", "threads")
#: keys that index replicates of one experiment: compared on resume, left out of the fingerprint
REPLICATE_KEYS: tuple[str, ...] = ("seed",)
#: result-changing keys added after fingerprints were first recorded, with the value that means the old
#: behaviour: at that value a key is left out of the fingerprint, so a configuration from before it
#: existed keeps its recorded fingerprint (``coord_aug``: the coordinate augmentation, off by default;
#: ``lr_schedule``, ``val_every``, ``stop_at``, ``give_up``: the schedule after warm-up, validation every N
#: steps, the validation target that ends training, the step by which a run must have left a plateau;
#: ``eval_checkpoint``: which weights are evaluated)
LATER_KEYS: dict[str, Any] = {"coord_aug": "none", "lr_schedule": "cosine", "val_every": None, "stop_at": None,
                               "give_up": None, "eval_checkpoint": "last"}


def fingerprint_keys(config: Mapping[str, Any]) -> list[str]:
    """The keys of ``config`` that enter the fingerprint, sorted (:data:`LATER_KEYS` only when not at
    their old-behaviour value)."""
    return sorted(k for k in config if k not in NON_RESULT_KEYS and k not in REPLICATE_KEYS
                  and not (k in LATER_KEYS and config[k] == LATER_KEYS[k]))


def fingerprint(config: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of ``config`` without :data:`NON_RESULT_KEYS` and
    :data:`REPLICATE_KEYS`."""
    sub = {k: config[k] for k in fingerprint_keys(config)}
    text = json.dumps(sub, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def grouping_fingerprint(results: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> str | None:
    """The fingerprint of a ``results.json`` dict: the recorded ``fingerprint``, else (files written
    before fingerprints were recorded) that of its ``config`` with ``defaults`` for keys it lacks;
    ``None`` without either."""
    fp = results.get("fingerprint")
    if isinstance(fp, str) and fp:
        return fp
    cfg = results.get("config")
    if isinstance(cfg, Mapping):
        return fingerprint({**(defaults or {}), **cfg})
    return None


def config_differences(old: Mapping[str, Any], new: Mapping[str, Any],
                       defaults: Mapping[str, Any] | None = None) -> list[str]:
    """Fingerprinted and replicate keys whose values differ between ``old`` and ``new``, sorted (a
    key missing on one side counts as its value in ``defaults``, else as different)."""
    keys = set(fingerprint_keys(old)) | set(fingerprint_keys(new)) | set(REPLICATE_KEYS)
    old, new = {**(defaults or {}), **old}, {**(defaults or {}), **new}

    def canon(v: Any) -> str:
        return json.dumps(v, sort_keys=True, default=str)

    return sorted(k for k in keys if k not in old or k not in new or canon(old[k]) != canon(new[k]))


#: files whose sizes a data fingerprint reads; past this it covers names only (a walk of ImageNet's 1.3 M files
#: with a stat each takes tens of seconds on a network file system)
DATA_FINGERPRINT_MAX_STAT = 200_000


def data_fingerprint(root: str, max_stat: int = DATA_FINGERPRINT_MAX_STAT) -> dict[str, Any]:
    """A cheap fingerprint of the files under a data root, which ``results.json`` records as ``data``: SHA-256 over
    every regular file's path relative to ``root`` and its size in bytes (names only once more than
    ``max_stat`` files were seen), with the file count and total size. Contents are not read: it tells another
    copy of a data set, a missing annotation file or a different subset from the one a run saw, not a file
    edited in place to the same size. Symbolic links to directories are not followed (a link to a file counts
    with its target's size); unreadable directories are skipped. Machine paths are not part of it."""
    h = hashlib.sha256()
    files, total, sized = 0, 0, True
    for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: None):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(filenames):
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            size = -1
            if sized:
                try:
                    size = os.stat(os.path.join(dirpath, name)).st_size
                except OSError:
                    size = -1
            files += 1
            total += max(size, 0)
            if files > max_stat:
                sized = False
            h.update(json.dumps([rel.replace(os.sep, "/"), size]).encode("utf-8", "surrogateescape"))
    return {"files": files, "bytes": total if sized else None, "sha256": h.hexdigest(),
            "method": "sha256 of (relative path, size) per file" if sized else
                      f"sha256 of relative paths (sizes of the first {max_stat} files)"}

"""Collect ``results.json`` files written by ``bench run`` (docs/architecture.md §5) into validated records.

Layout: ``<out>/<dataset>/<pe>/<model>/seed<S>/results.json``; the collector does not rely on the
layout and finds every ``results.json`` below the root (recursively). It never raises on a bad
file: each problem becomes one line ``<path relative to root>: <what was wrong>`` in the returned
``problems`` list, and the file is skipped. Files are read with :func:`pebench.core.io.read_json`, so one
that is too large, not UTF-8 or nested deeper than any file pebench writes (``[[[...]]]`` 100k deep) is such
a problem too, never a crash of the whole collection.

Rules
-----
* A file must be a JSON object with a string ``status``; otherwise it is malformed.
* A run whose ``status`` is not ``"complete"`` is returned as an *incomplete* record (only its path,
  status and whatever identifying fields are well-typed); it is never aggregated.
* A complete run needs ``dataset``, ``pe``, ``model``, ``task``, ``primary_metric`` (non-empty
  strings), ``seed`` (int) and ``metrics`` (object of name -> number or null). A missing or
  wrongly-typed required key makes the whole file malformed (skipped, reported).
* Optional analysis sections (``geometry``, ``robustness``, ``extrapolation``) with a wrong shape
  are dropped *individually* and reported; the run's metrics still count. Non-finite numbers
  (``NaN`` as written by ``json.dumps(allow_nan=True)``) are kept; the renderer prints them.
* The row label names the PE variant: the ``pe_label`` that ``bench run`` recorded (the PE, plus
  its non-default options: ``pebench.encodings.variant_label``), then ``+rpt`` when trained with
  random permutations (``rpt`` true, in ``config`` or at top level, or ``+rpt`` in the ``variant``),
  then the token kind when it is not the dataset's default (``+spiking``: the ``variant``'s other
  suffixes). A file without ``pe_label`` (written before it was recorded) is labelled with the PE
  alone when its ``config.pe_options`` is empty, else with every option (``pe[k=v,...]``, sorted),
  since which ones are defaults is known only to the PE classes, which this package does not import.
* Each record carries its configuration ``fingerprint`` (``pebench.core.fingerprint.grouping_fingerprint``:
  the recorded one, or for older files that of their ``config``, with ``config_defaults`` for the
  keys it lacks) and ``git_sha``; the renderer never averages records whose fingerprints or code
  versions differ.
* Two complete runs with the same (dataset, model, label, seed, fingerprint, git_sha) are
  duplicates: the first by path order is kept, the other is reported.
* A run shortened by ``--fast-dev-run`` or ``--limit-train-batches`` / ``--limit-val-batches`` is a
  *smoke* run (``RunRecord.smoke``: ``bench run`` records ``limited``; older files are read from their
  ``config``): its numbers are not results, and ``bench leaderboard`` leaves it off the tables unless
  given ``--include-smoke`` (:func:`split_smoke`), naming how many it left out in the header.

Nothing here imports torch or the PE, model and dataset packages: everything a table states is read
from the result files.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from pebench.core.errors import ResultsError
from pebench.core.fingerprint import grouping_fingerprint
from pebench.core.io import UnreadableJSON, read_json
from pebench.core.schema import (
    REQUIRED_KEYS,
    SCHEMA_VERSION,
    json_type_name,
    migrate,
    required_key_errors,
    schema_version,
)

__all__ = ["RunRecord", "collect_results", "REQUIRED_KEYS", "is_smoke", "split_smoke", "to_float"]

GEOMETRY_LIST_KEYS = ("layers", "ssdc", "ssdc_rpi", "eed_percent")


@dataclass(frozen=True)
class RunRecord:
    """One parsed ``results.json``.

    For complete runs (``complete`` is true) every required field is set and well-typed; for
    incomplete runs only ``path`` and ``status`` are guaranteed, the rest may be ``None``.
    """

    path: str  # POSIX path relative to the collection root
    status: str
    dataset: str | None = None
    pe: str | None = None
    label: str | None = None  # row label: variant, "<pe>+rpt", or pe
    model: str | None = None
    seed: int | None = None
    task: str | None = None
    primary_metric: str | None = None
    metrics: dict[str, float | None] = field(default_factory=dict)
    # geometry: key in GEOMETRY_LIST_KEYS -> per-layer list (entries float or None)
    geometry: dict[str, list[float | None]] | None = None
    # robustness: shift kind -> {"fs": float, "acc": float | None, ...numbers}
    robustness: dict[str, dict[str, float | None]] | None = None
    # extrapolation: resolution string -> acc1 (float or None)
    extrapolation: dict[str, float | None] | None = None
    skipped_samples: int | None = None
    fingerprint: str | None = None  # configuration fingerprint (seeds of one experiment share it)
    git_sha: str | None = None  # code version that produced the run
    schema_version: int = SCHEMA_VERSION  # the version the file was written with (read through pebench.core.schema)
    smoke: bool = False  # shortened by --fast-dev-run / --limit-*-batches (is_smoke): not a result
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def complete(self) -> bool:
        return self.status == "complete"


def is_smoke(data: Mapping[str, Any]) -> bool:
    """Whether a ``results.json`` dict is a smoke run: ``limited`` recorded (``bench run`` writes which of
    ``fast_dev_run`` / ``limit_train_batches`` / ``limit_val_batches`` shortened it), or, in a file from
    before that key, its ``config`` sets ``fast_dev_run`` or a batch limit other than 1 (all batches)."""
    if data.get("limited"):
        return True
    cfg = data.get("config")
    if not isinstance(cfg, Mapping):
        return False
    if cfg.get("fast_dev_run") is True:
        return True
    return any(_is_number(cfg.get(k)) and cfg.get(k) != 1 for k in ("limit_train_batches", "limit_val_batches"))


def split_smoke(runs: list[RunRecord], include_smoke: bool = False) -> tuple[list[RunRecord], int]:
    """``(runs to tabulate, smoke runs left out)``: complete smoke runs are left out unless ``include_smoke``
    (incomplete ones stay: the leaderboard lists them apart anyway)."""
    if include_smoke:
        return list(runs), 0
    kept = [r for r in runs if not (r.complete and r.smoke)]
    return kept, len(runs) - len(kept)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def to_float(v: int | float) -> float:
    """A JSON number as a float; an integer too large for one (``1`` and 400 zeros: never written by pebench,
    which records floats and small counts) is ``±inf`` instead of an ``OverflowError``."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


_type_name = json_type_name
_check_required = required_key_errors


def _num_list(v: Any) -> list[float | None] | None:
    if not isinstance(v, list):
        return None
    out: list[float | None] = []
    for x in v:
        if x is None:
            out.append(None)
        elif _is_number(x):
            out.append(to_float(x))
        else:
            return None
    return out


def _parse_geometry(v: Any) -> tuple[dict[str, list[float | None]] | None, str | None]:
    if not isinstance(v, dict):
        return None, f"expected an object, got {_type_name(v)}"
    for key in ("layers", "eed_layers"):  # layer indices: sorted and matched against each other by the page
        if key in v and not (isinstance(v[key], list) and all(_is_int(x) for x in v[key])):
            return None, f"entry {key!r} should be a list of layer indices (integers)"
    out: dict[str, list[float | None]] = {}
    bad: list[str] = []
    for key in GEOMETRY_LIST_KEYS:
        if key not in v:
            continue
        lst = _num_list(v[key])
        if lst is None:
            bad.append(key)
        else:
            out[key] = lst
    if bad:
        return None, "entries " + ", ".join(repr(k) for k in bad) + " should be lists of numbers"
    return out, None


def _parse_robustness(v: Any) -> tuple[dict[str, dict[str, float | None]] | None, str | None]:
    if not isinstance(v, dict):
        return None, f"expected an object, got {_type_name(v)}"
    out: dict[str, dict[str, float | None]] = {}
    for kind, entry in v.items():
        if not isinstance(entry, dict) and (entry is None or _is_number(entry) or isinstance(entry, str)):
            continue  # run-level scalars beside the shifts (clean_acc, n_samples; dense tasks: metric, fs_rule)
        if not isinstance(entry, dict) or not ("fs" in entry and (entry["fs"] is None or _is_number(entry["fs"]))):
            return None, f"entry {kind!r} should be an object with a numeric 'fs'"
        out[str(kind)] = {
            str(k): (to_float(x) if _is_number(x) else None) for k, x in entry.items() if x is None or _is_number(x)
        }
    return out, None


def _parse_extrapolation(v: Any) -> tuple[dict[str, float | None] | None, str | None]:
    if not isinstance(v, list):
        return None, f"expected a list, got {_type_name(v)}"
    out: dict[str, float | None] = {}
    for i, entry in enumerate(v):
        if not isinstance(entry, dict) or "resolution" not in entry:
            return None, f"item {i} should be an object with 'resolution' and 'acc1'"
        res = entry["resolution"]
        if isinstance(res, bool) or not isinstance(res, (str, int)):
            return None, f"item {i}: 'resolution' should be a string, got {_type_name(res)}"
        if "acc1" not in entry and entry.get("metric"):
            continue  # a dense task's row (mAP / mIoU per size): not an acc1@size column
        acc = entry.get("acc1")
        if not (acc is None or _is_number(acc)):
            return None, f"item {i}: 'acc1' should be a number, got {_type_name(acc)}"
        key = str(res)
        if key in out:
            return None, f"resolution {key!r} listed twice"
        out[key] = to_float(acc) if acc is not None else None
    return out, None


def _pe_label(data: dict[str, Any], pe: str, options: dict[str, Any]) -> str:
    """The recorded ``pe_label``; for older files the PE, plus every option when it has any."""
    recorded = data.get("pe_label")
    if isinstance(recorded, str) and recorded:
        return recorded
    if not options:
        return pe
    return pe + "[" + ",".join(f"{k}={options[k]}" for k in sorted(options)) + "]"


def _label(data: dict[str, Any]) -> str:
    """The row label: ``<pe label>[+rpt][+<tokens>]`` (see the module docstring)."""
    pe = data["pe"]
    cfg = data.get("config") if isinstance(data.get("config"), dict) else {}
    variant = data.get("variant")
    # variant = <pe>[+rpt][+<tokens>] (pebench.runner.config.variant_name); older files: <pe>[+rpt]
    parts = variant[len(pe):].split("+")[1:] if isinstance(variant, str) and variant.startswith(pe) else []
    rpt = data.get("rpt") is True or cfg.get("rpt") is True or "rpt" in parts
    opts = cfg.get("pe_options") if isinstance(cfg.get("pe_options"), dict) else {}
    base = _pe_label(data, pe, opts)
    return (f"{base}+rpt" if rpt else base) + "".join(f"+{p}" for p in parts if p != "rpt")


def _provenance(data: dict[str, Any], config_defaults: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """(configuration fingerprint, git sha) of a results dict; None where unknown."""
    sha = data.get("git_sha")
    return grouping_fingerprint(data, config_defaults), sha if isinstance(sha, str) and sha else None


def _load(path: Path, rel: str, problems: list[str], config_defaults: Mapping[str, Any] | None) -> RunRecord | None:
    # read_json: a file of anyone's (too large, not UTF-8, nested 100k deep, not JSON) is one problem line
    try:
        data = read_json(path)
    except OSError as e:
        problems.append(f"{rel}: unreadable ({type(e).__name__}: {e})")
        return None
    except UnreadableJSON as e:
        problems.append(f"{rel}: {e}")
        return None
    if not isinstance(data, dict):
        problems.append(f"{rel}: expected a JSON object at top level, got {_type_name(data)}")
        return None
    original = data
    try:
        written = schema_version(data)
        data = migrate(data)  # older schema versions are read through explicit migrations (pebench.core.schema)
    except ResultsError as e:
        problems.append(f"{rel}: {e}")
        return None
    status = data.get("status")
    if not isinstance(status, str) or not status:
        what = "missing required key 'status'" if "status" not in data else (
            f"key 'status' should be a non-empty string, got {_type_name(status)}")
        problems.append(f"{rel}: {what}")
        return None

    if status != "complete":
        def s(key: str) -> str | None:
            v = data.get(key)
            return v if isinstance(v, str) and v else None

        seed = data.get("seed")
        return RunRecord(
            path=rel, status=status, dataset=s("dataset"), pe=s("pe"), model=s("model"),
            seed=seed if _is_int(seed) else None, task=s("task"), primary_metric=s("primary_metric"),
            label=_label(data) if s("pe") else None, raw=original, schema_version=written, smoke=is_smoke(data),
        )

    errors = _check_required(data)
    if errors:
        problems.append(f"{rel}: " + "; ".join(errors))
        return None

    metrics = {str(k): (to_float(v) if v is not None else None) for k, v in data["metrics"].items()}
    if data["primary_metric"] not in metrics:
        problems.append(f"{rel}: primary metric {data['primary_metric']!r} not in 'metrics' (shown as —)")

    sections: dict[str, Any] = {}
    for key, parser in (("geometry", _parse_geometry), ("robustness", _parse_robustness),
                        ("extrapolation", _parse_extrapolation)):
        if key not in data or data[key] is None:
            sections[key] = None
            continue
        value, err = parser(data[key])
        if err is not None:
            problems.append(f"{rel}: ignored '{key}': {err}")
        sections[key] = value

    skipped = data.get("skipped_samples")
    fp, sha = _provenance(data, config_defaults)
    return RunRecord(
        path=rel, status=status, dataset=data["dataset"], pe=data["pe"], label=_label(data),
        model=data["model"], seed=data["seed"], task=data["task"], primary_metric=data["primary_metric"],
        metrics=metrics, geometry=sections["geometry"], robustness=sections["robustness"],
        extrapolation=sections["extrapolation"], skipped_samples=skipped if _is_int(skipped) else None,
        fingerprint=fp, git_sha=sha, raw=original, schema_version=written, smoke=is_smoke(data),
    )


def collect_results(root: str | os.PathLike,
                    config_defaults: Mapping[str, Any] | None = None) -> tuple[list[RunRecord], list[str]]:
    """Find and parse every ``results.json`` below ``root``.

    ``config_defaults``: the run configuration's default values (``bench leaderboard`` passes
    ``RunConfig``'s), used only for files that recorded no ``fingerprint``: a configuration key such
    a file lacks had its default value then. Without them such a file's fingerprint is that of its
    ``config`` as written.

    Returns ``(runs, problems)``: ``runs`` holds complete *and* incomplete records (check
    ``RunRecord.complete``), sorted by path; ``problems`` holds one human-readable line per skipped
    file or ignored section, sorted by path. Raises ``FileNotFoundError`` (one clear message) only
    when ``root`` itself is not a directory.
    """
    root_path = Path(root)
    if not root_path.is_dir():
        raise FileNotFoundError(f"results directory not found: {os.fspath(root)}")
    files = sorted(root_path.glob("**/results.json"), key=lambda p: p.relative_to(root_path).as_posix())
    runs: list[RunRecord] = []
    problems: list[str] = []
    seen: dict[tuple[Any, ...], str] = {}
    for path in files:
        if not path.is_file():
            continue
        rel = path.relative_to(root_path).as_posix()
        record = _load(path, rel, problems, config_defaults)
        if record is None:
            continue
        if record.complete:
            key = (record.dataset, record.model, record.label, record.seed, record.fingerprint, record.git_sha)
            if key in seen:
                problems.append(f"{rel}: duplicate of {seen[key]} (same dataset, model, PE, seed, configuration "
                                f"and code version); skipped")
                continue
            seen[key] = rel
        runs.append(record)
    return runs, problems


def finite(values: list[float | None]) -> list[float]:
    """The finite numbers of ``values`` (drops ``None`` and NaN/inf)."""
    return [v for v in values if v is not None and math.isfinite(v)]

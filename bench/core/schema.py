"""The schema of a run's ``results.json`` and ``config.yaml``: its version, the typed :class:`RunResult`, and
the migrations that read files written by older versions.

``bench run`` (:mod:`pebench.runner.run`) writes ``schema_version`` = :data:`SCHEMA_VERSION` into both files;
the leaderboard (:mod:`pebench.leaderboard.collect`) and ``bench run --config`` read every file through
:func:`migrate`, so committed files are never rewritten: an older file is brought to the current layout in
memory, one explicit step per version (:data:`MIGRATIONS`).

========  =======================================================================================
version   what changed
========  =======================================================================================
1         (no ``schema_version`` key) the layout of docs/architecture.md §5 up to this version
2         ``schema_version`` recorded in ``results.json`` and ``config.yaml``; nothing else moves
========  =======================================================================================

A file of a *newer* version than this code reads, or with a ``schema_version`` that is not a positive
integer, is a :class:`~pebench.core.errors.ResultsError` naming the version. Torch-free: the leaderboard
imports this module.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .errors import ResultsError

__all__ = ["SCHEMA_VERSION", "REQUIRED_KEYS", "MIGRATIONS", "RunResult", "schema_version", "migrate",
           "required_key_errors", "json_type_name"]

#: the version this code writes
SCHEMA_VERSION = 2

#: keys every complete run has, with their JSON types
REQUIRED_KEYS: dict[str, str] = {
    "dataset": "string",
    "pe": "string",
    "model": "string",
    "seed": "integer",
    "task": "string",
    "status": "string",
    "primary_metric": "string",
    "metrics": "object",
}


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 only records the version: a version-1 file has the same keys."""
    return {**data, "schema_version": 2}


#: ``from_version -> step`` (each step returns a new dict one version up; the input is never modified)
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}


def schema_version(data: Mapping[str, Any]) -> int:
    """The version a file was written with (1 when it records none); :class:`ResultsError` when the
    recorded value is not a positive integer or newer than :data:`SCHEMA_VERSION`."""
    v = data.get("schema_version", 1)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ResultsError(f"schema_version must be a positive integer, got {v!r}")
    if v > SCHEMA_VERSION:
        raise ResultsError(f"schema_version {v} is newer than this pebench reads (up to {SCHEMA_VERSION}); "
                           f"update pebench to read it")
    return v


def migrate(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` brought to :data:`SCHEMA_VERSION` through the explicit steps (a new dict)."""
    out = dict(data)
    v = schema_version(out)
    while v < SCHEMA_VERSION:
        out = MIGRATIONS[v](out)
        v += 1
    return out


def json_type_name(v: Any) -> str:
    """The JSON type name of a parsed value (``null``, ``boolean``, ``integer``, ``number``, ...)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def required_key_errors(data: Mapping[str, Any]) -> list[str]:
    """What is wrong with the required keys of a complete run (empty when nothing is)."""
    errors: list[str] = []
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        errors.append("missing required key(s) " + ", ".join(repr(k) for k in missing))
    for key, expected in REQUIRED_KEYS.items():
        if key not in data:
            continue
        v = data[key]
        ok = {"string": isinstance(v, str) and v != "",
              "integer": isinstance(v, int) and not isinstance(v, bool),
              "object": isinstance(v, dict)}[expected]
        if not ok:
            shown = "empty string" if v == "" else json_type_name(v)
            want = ("a non-empty string" if expected == "string"
                    else f"an {expected}" if expected[0] in "aeiou" else f"a {expected}")
            errors.append(f"key {key!r} should be {want}, got {shown}")
    metrics = data.get("metrics")
    if isinstance(metrics, dict):
        bad = sorted(str(k) for k, v in metrics.items() if not (v is None or _is_number(v)))
        if bad:
            errors.append("non-numeric value(s) in 'metrics': " + ", ".join(repr(k) for k in bad))
    return errors


@dataclass(frozen=True)
class RunResult:
    """A complete run's ``results.json`` at the current schema: the required keys typed, the rest in ``data``.

    Built with :meth:`from_dict` (migrates, then validates; :class:`ResultsError` with every problem on one
    line). ``bench run`` validates what it writes through it; the leaderboard reads through it.
    """

    dataset: str
    pe: str
    model: str
    seed: int
    task: str
    status: str
    primary_metric: str
    metrics: dict[str, float]
    schema_version: int = SCHEMA_VERSION
    data: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunResult":
        migrated = migrate(data)
        errors = required_key_errors(migrated)
        if errors:
            raise ResultsError("; ".join(errors))
        metrics = {str(k): (float(v) if v is not None else math.nan) for k, v in migrated["metrics"].items()}
        return cls(dataset=migrated["dataset"], pe=migrated["pe"], model=migrated["model"], seed=migrated["seed"],
                   task=migrated["task"], status=migrated["status"], primary_metric=migrated["primary_metric"],
                   metrics=metrics, schema_version=migrated["schema_version"], data=migrated)

    @property
    def complete(self) -> bool:
        return self.status == "complete"

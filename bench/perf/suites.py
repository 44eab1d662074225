"""The ``bench perf`` suite registry: each suite's name, the module that defines it, the ``all`` order.

A suite is a function ``suite(quick=False) -> list[record]`` (records:
:mod:`pebench.perf.report`) that its module registers with ``@SUITES.register(name)``. The suite
modules import torch, and ``bench --help`` lists the suite names without loading torch, so the
names and their modules are listed here (:data:`SUITE_MODULES`) and a module is imported only when
one of its suites runs (:func:`load_suite`). Adding a suite: a function registered in a module of
this package, and one line in :data:`SUITE_MODULES` (and in :data:`ALL_SUITES` to run it in ``all``).
"""
from __future__ import annotations

import importlib
from typing import Callable

from ..core.registry import Registry

__all__ = ["SUITES", "SUITE_MODULES", "ALL_SUITES", "Suite", "load_suite"]

#: ``suite(quick=False)`` -> records (``quick``: smoke-test sizes, one repeat)
Suite = Callable[..., list[dict]]

SUITES: Registry = Registry("perf suite")

#: suite name -> module of :mod:`pebench.perf` that registers it; the order of ``bench perf --help``
SUITE_MODULES: dict[str, str] = {
    "backbone": "model",
    "attention-budget": "attention",
    "pe-overhead": "model",
    "analysis": "data",
    "data": "data",
    "e2e": "data",
    "startup": "startup",
    "dino": "dino",
    "scene": "scene",
    "detection": "detection",
    "analyze": "analyze",
    "peers": "peers",
    "contention": "contention",
}

#: what ``bench perf all`` runs, in this order (``e2e`` is left out under ``--quick``)
ALL_SUITES: tuple[str, ...] = ("startup", "backbone", "attention-budget", "pe-overhead", "analysis", "data",
                               "dino", "scene", "detection", "e2e")


def load_suite(name: str) -> Suite:
    """The suite function registered as ``name``, importing its module first."""
    if name not in SUITE_MODULES:
        raise ValueError(f"unknown perf suite {name!r}; available: {', '.join(SUITE_MODULES)}")
    importlib.import_module(f"{__package__}.{SUITE_MODULES[name]}")  # deferred: start-up time (imports torch)
    return SUITES.get(name)

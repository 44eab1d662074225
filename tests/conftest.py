"""Shared test configuration.

Tests are grouped by the layer they test (``tests/<layer>/``, mirroring the package); ``tests/studies/``
holds the tests of the study scripts in ``benchmarks/`` and is marked ``studies`` (``pytest -m "not studies"``
runs the product's tests alone; ``.ci/run`` runs both). Helper modules shared by several test files live in
``tests/support/`` (on the path through ``pythonpath`` in ``pyproject.toml``).
"""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (``-n``, set in ``pyproject.toml``) every worker runs its tests with one intra-op thread
    unless the user chose a count: the workers already fill the cores, and two 2-thread workers on 2 cores would
    oversubscribe them (OpenMP's barriers then wait for threads that are not scheduled). The ``bench`` processes
    the tests start inherit it. Set before torch is imported in the worker (this file imports no torch)."""
    import os

    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # pythonpath puts the repository root on sys.path, and torch passes sys.path to the Python children it
    # starts while compiling, where encodings/ would shadow the standard library (pebench.core.child_pythonpath)
    from pebench.core.child_pythonpath import shield_torch_children

    shield_torch_children()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    studies = REPO / "tests" / "studies"
    for item in items:
        if studies in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.studies)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository's root folder (read-only use: committed docs, results, pyproject.toml)."""
    return REPO


@pytest.fixture(autouse=True)
def _environment_restored():
    """Each test sees the environment the session started with: in-process ``bench`` calls set variables for
    their children (OMP_WAIT_POLICY, the --deterministic pins). With the tests grouped by layer, the compiled
    FlexAttention tests failed after the CLI tests (inductor: "requires AVX512 or AVX2 vec ISA") and passed alone;
    inductor caches its CPU ISA check, so the cache is cleared whenever the environment is restored."""
    import os
    import sys

    before = dict(os.environ)
    yield
    if dict(os.environ) != before:
        os.environ.clear()
        os.environ.update(before)
        isa = sys.modules.get("torch._inductor.cpu_vec_isa")
        for name in ("valid_vec_isa_list", "pick_vec_isa"):
            fn = getattr(isa, name, None)
            if hasattr(fn, "cache_clear"):
                fn.cache_clear()


# Property-based tests (hypothesis): the same examples on every run (derandomize: a CI failure reproduces here) and
# no example database written into the checkout.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("pebench", database=None, derandomize=True)
_hypothesis_settings.load_profile("pebench")

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

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

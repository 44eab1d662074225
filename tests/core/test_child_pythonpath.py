"""pebench.core.child_pythonpath: the Python children torch starts while compiling (vector-ISA probe, compile
workers) get torch's own environment (``torch._inductor.utils.python_subprocess_env``), and with the repository
root on ``sys.path`` they must still start."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from torch._inductor.utils import python_subprocess_env

from pebench.core import child_pythonpath
from pebench.core.child_pythonpath import TORCH_PYTHONPATH_VAR, shadowing_entries, shield_torch_children

START = [sys.executable, "-c", "import encodings, sys; print(encodings.__file__)"]


@pytest.fixture
def root_first_on_path(monkeypatch, repo_root):
    """sys.path as under ``python -m`` from the repository root, and no variable set yet."""
    monkeypatch.delenv(TORCH_PYTHONPATH_VAR, raising=False)
    monkeypatch.setattr(sys, "path", [str(repo_root), *sys.path])


def test_the_repository_root_shadows_and_the_standard_library_does_not(root_first_on_path, repo_root):
    found = {os.path.realpath(p or os.getcwd()) for p in shadowing_entries()}
    assert str(repo_root.resolve()) in found  # (pytest's rootdir insertion adds tests/, whose encodings/ too)
    assert os.path.dirname(os.path.realpath(os.__file__)) not in found
    assert shadowing_entries([os.path.dirname(os.__file__), "/nonexistent"]) == []


def test_without_the_shield_torchs_child_dies_and_with_it_starts(root_first_on_path, repo_root):
    dead = subprocess.run(START, env=python_subprocess_env(), capture_output=True, text=True, cwd="/")
    assert dead.returncode != 0 and "encodings" in dead.stderr  # the failure the module exists for

    value = shield_torch_children()
    assert value is not None and os.environ[TORCH_PYTHONPATH_VAR] == value
    assert str(repo_root) not in value.split(os.pathsep)
    alive = subprocess.run(START, env=python_subprocess_env(), capture_output=True, text=True, cwd="/")
    assert alive.returncode == 0, alive.stderr
    stdlib = os.path.dirname(os.path.realpath(os.__file__))
    assert os.path.realpath(alive.stdout.strip()).startswith(stdlib + os.sep)


def test_a_users_variable_and_a_clean_path_are_left_alone(monkeypatch):
    monkeypatch.setenv(TORCH_PYTHONPATH_VAR, "/mine")
    assert shield_torch_children() is None and os.environ[TORCH_PYTHONPATH_VAR] == "/mine"
    monkeypatch.delenv(TORCH_PYTHONPATH_VAR)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not child_pythonpath.shadowing_entries([p])])
    assert shield_torch_children() is None and TORCH_PYTHONPATH_VAR not in os.environ

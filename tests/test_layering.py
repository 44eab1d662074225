"""The layering of pebench, checked with import-linter (the contracts are in pyproject.toml,
``[tool.importlinter]``), and the rules that import-linter cannot state.

The folders are mapped into the ``pebench`` package by setuptools ``package-dir``, which import-linter's
graph builder does not follow; the test lays out the package as an installed copy would be (a tree of
symbolic links named by the same mapping) and runs ``lint-imports`` on it.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGE_DIR: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]
PACKAGES: list[str] = PYPROJECT["tool"]["setuptools"]["packages"]


def package_folder(package: str) -> Path:
    """The folder of a (sub)package under the ``package-dir`` mapping (longest mapped prefix)."""
    prefix = max((p for p in PACKAGE_DIR if package == p or package.startswith(p + ".")), key=len)
    return ROOT / PACKAGE_DIR[prefix] / Path(*package[len(prefix):].split(".")[1:])


def package_tree(dest: Path) -> Path:
    """``dest/pebench/...`` as an installed copy: each mapped package a directory of links to its
    folder's entries, except sub-folders that are mapped to a package of their own (``models/tasks/`` is
    ``pebench.tasks``, not ``pebench.models.tasks``)."""
    mapped = {(ROOT / folder).resolve() for folder in PACKAGE_DIR.values()}
    for package, folder in PACKAGE_DIR.items():
        target = dest.joinpath(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for entry in (ROOT / folder).iterdir():
            if entry.name == "__pycache__" or (entry.is_dir() and entry.resolve() in mapped):
                continue
            link = target / entry.name
            if not link.exists():
                link.symlink_to(entry, target_is_directory=entry.is_dir())
    return dest


def test_import_linter_contracts_are_kept(tmp_path):
    tree = package_tree(tmp_path / "tree")
    lint = Path(sys.executable).with_name("lint-imports")
    cmd = [str(lint)] if lint.exists() else [sys.executable, "-m", "importlinter.cli"]
    env = {**os.environ, "PYTHONPATH": str(tree)}  # the link tree, never the repository root
    r = subprocess.run([*cmd, str(ROOT / "pyproject.toml"), "--no-cache", "--no-logo"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert "broken" not in r.stdout.split("Contracts:")[-1].split("\n")[0] or " 0 broken" in r.stdout


#: a function-local import is allowed only with a comment saying why: an optional dependency, or
#: start-up time (the CLI's ``--help`` and the leaderboard must not import torch)
DEFERRED_MARK = "# deferred:"


def _local_imports() -> list[tuple[str, int, str]]:
    out = []
    for folder in sorted({package_folder(p) for p in PACKAGES}):
        for path in sorted(folder.glob("*.py")):
            lines = path.read_text().splitlines()
            for node in ast.walk(ast.parse("\n".join(lines))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for sub in ast.walk(node):
                        if isinstance(sub, (ast.Import, ast.ImportFrom)):
                            out.append((str(path.relative_to(ROOT)), sub.lineno, lines[sub.lineno - 1]))
    return sorted(set(out))


def test_every_package_folder_is_listed():
    """Every folder holding an ``__init__.py`` under a mapped folder is a listed package (else it would not
    be installed, nor checked here)."""
    listed = {package_folder(p).resolve() for p in PACKAGES}
    found = {init.parent.resolve() for folder in set(PACKAGE_DIR.values()) for init in (ROOT / folder).rglob("__init__.py")}
    assert not found - listed, sorted(str(f.relative_to(ROOT)) for f in found - listed)


def test_every_function_local_import_says_why():
    unexplained = [f"{p}:{n}: {line.strip()}" for p, n, line in _local_imports()
                   if DEFERRED_MARK not in line]
    assert not unexplained, "function-local imports without a '# deferred: <reason>' comment:\n" + "\n".join(
        unexplained)

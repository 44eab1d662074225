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
from pathlib import Path

import tomllib

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


# ------------------------------------------------------------------ the studies stay apart from the product
#: the product's folders (the package-dir mapping's targets): they must not depend on the study scripts
PRODUCT_FOLDERS = ("bench", "encodings", "models", "datamodules", "analysis", "leaderboard")
#: where `benchmarks` may be imported: the package itself and the tests of its scripts
STUDY_FOLDERS = (ROOT / "benchmarks", ROOT / "tests" / "studies")
#: folders that hold no source of the repository (generated, installed or run outputs)
NOT_SOURCE = {".git", "__pycache__", "build", "dist", "runs", "results", ".venv", ".benchmarks", ".pytest_cache",
              ".import_linter_cache", "lightning_logs"}
#: calls that load or run a module or file given as a string
LOADERS = {"import_module", "__import__", "spec_from_file_location", "run_path", "run_module", "run", "Popen",
           "call", "check_call", "check_output"}


def _source_files(suffix: str = ".py") -> list[Path]:
    """The repository's files ending in ``suffix``, outside the folders in :data:`NOT_SOURCE` (not descended)."""
    out = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in NOT_SOURCE and not d.endswith(".egg-info")]
        out += [Path(folder) / f for f in files if f.endswith(suffix)]
    return sorted(out)


def _names_benchmarks(text: str) -> bool:
    """Whether a string names the study package, one of its modules or one of its files."""
    return text == "benchmarks" or text.startswith(("benchmarks.", "benchmarks/"))


def benchmarks_uses(path: Path) -> list[str]:
    """``line: what`` for every import of ``benchmarks`` in the Python file ``path``: an import statement, or a
    call that loads or runs a module or file of it by name (``importlib.import_module("benchmarks.x")``,
    ``spec_from_file_location(..., ROOT / "benchmarks" / "x.py")``, ``subprocess.run([..., "-m", "benchmarks.x"])``)."""
    text = path.read_text(encoding="utf-8")
    if "benchmarks" not in text:  # every way listed names the package in the source
        return []
    found = []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if _names_benchmarks(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _names_benchmarks(node.module or ""):
            found.append(f"{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func in LOADERS:
                strings = [c.value for arg in [*node.args, *(k.value for k in node.keywords)] for c in ast.walk(arg)
                           if isinstance(c, ast.Constant) and isinstance(c.value, str)]
                found += [f"{node.lineno}: {func}(... {s!r} ...)" for s in strings if _names_benchmarks(s)]
    return found


def test_the_check_finds_every_way_of_importing_the_studies(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import benchmarks.reports\nfrom benchmarks import findings\nimport benchmarks_other\n"
                      "importlib.import_module('benchmarks.probe_recipe')\n"
                      "spec_from_file_location('x', ROOT / 'benchmarks' / 'x.py')\n"
                      "subprocess.run([sys.executable, '-m', 'benchmarks.ddp_findings'])\n"
                      "print('benchmarks.x')  # printing a name is no import\n", encoding="utf-8")
    assert [u.split(":")[0] for u in benchmarks_uses(sample)] == ["1", "2", "4", "5", "6"]


def test_only_the_studies_import_the_study_package():
    """``benchmarks`` (the study scripts) is imported only by itself and by tests/studies/: the product, the
    product's tests and the examples never depend on a study script."""
    uses = [f"{p.relative_to(ROOT)}:{u}" for p in _source_files()
            if not any(folder in p.parents for folder in STUDY_FOLDERS) for u in benchmarks_uses(p)]
    assert not uses, "\n".join(uses)


def test_the_product_names_no_study_script():
    """No file of the product (code, presets) names a study script by file or module name; pointing to a
    document (benchmarks/README.md) is fine."""
    scripts = sorted(p for p in (ROOT / "benchmarks").iterdir() if p.suffix in (".py", ".sh") and p.stem != "__init__")
    assert scripts
    names = [s.name for s in scripts] + [f"benchmarks.{s.stem}" for s in scripts if s.suffix == ".py"]
    hits = []
    for folder in PRODUCT_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts or path.suffix in (".pyc", ".png", ".pt"):
                continue
            for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                hits += [f"{path.relative_to(ROOT)}:{i}: {n}" for n in names if n in line]
    assert not hits, "\n".join(hits)


def test_ci_runs_the_study_tests_too():
    """``.ci/run`` runs plain ``pytest``: no marker expression (here or in ``addopts``) deselects the
    ``studies`` tests, which tests/conftest.py marks (this test lives outside tests/studies/ so that a
    deselection cannot hide it)."""
    command = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    pytest_part = command.split("pytest", 1)[1] if "pytest" in command else None
    assert pytest_part is not None and " -m" not in pytest_part and "-k" not in pytest_part, command
    addopts = PYPROJECT["tool"]["pytest"]["ini_options"]["addopts"]
    assert "-m" not in addopts.split() and "studies" not in addopts, addopts
    assert any(m.startswith("studies:") for m in PYPROJECT["tool"]["pytest"]["ini_options"]["markers"])

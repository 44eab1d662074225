"""No module of the product or of the studies uses another module's ``_private`` names.

A name with a leading underscore is the business of the module that defines it (PEP 8, "Descriptive: Naming
Styles": "weak internal use indicator"); what several modules need is a public name in the module where it
belongs. A cross-module private use is, found by reading the source (``ast``) of ``bench/``, ``encodings/``,
``models/``, ``datamodules/``, ``analysis/``, ``leaderboard/`` (the ``pebench`` package) and ``benchmarks/``:

* ``from <module> import _name`` where ``<module>`` (absolute or relative) is a ``pebench`` or ``benchmarks``
  module other than the importing one;
* ``m._name`` or ``getattr(m, "_name")`` where ``m`` was bound to such a module by ``import pebench.x as m``,
  ``import pebench.x`` or ``from pebench import x``;
* a ``_name`` listed in a module's ``__all__`` (it would be exported by ``from m import *``);
* an import of a ``_module`` (``from pebench.datamodules._x import y``, ``import pebench.datamodules._x``, or
  relative) by a module outside the package that holds it (``pebench.datamodules`` and its subpackages may
  import ``pebench.datamodules._x``; ``pebench.tasks`` or ``pebench.datamodules.probes`` may not import
  ``pebench.datamodules.synthetic._y``).

Dunder names (``__version__``) are not private.
"""
from __future__ import annotations

import ast
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
    "package-dir"]
#: top-level packages whose modules are checked (and whose names count as "a module of ours")
OWN_ROOTS = ("pebench", "benchmarks")


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_files() -> dict[Path, str]:
    """Every ``.py`` file of the product and of the studies, with its module name under the ``package-dir``
    mapping (``models/tasks/base.py`` is ``pebench.tasks.base``; a package's ``__init__.py`` is the package)."""
    folders = {(ROOT / folder).resolve(): package for package, folder in PACKAGE_DIR.items()}
    folders[(ROOT / "benchmarks").resolve()] = "benchmarks"
    out: dict[Path, str] = {}
    for folder in folders:
        for path in folder.rglob("*.py"):
            # the longest mapped folder holding the file names its package (models/tasks/ is pebench.tasks)
            owner = max((f for f in folders if f in path.parents), key=lambda f: len(f.parts))
            parts = [folders[owner], *path.relative_to(owner).with_suffix("").parts]
            out[path] = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return dict(sorted(out.items()))


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module an ``ImportFrom`` reads from (relative levels counted from ``module``)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _ours(module: str) -> bool:
    return module.split(".")[0] in OWN_ROOTS


def foreign_private_module(source: str, importer: str) -> str | None:
    """The first ``_module`` on the dotted path ``source`` whose package does not hold ``importer`` (the
    importing module), or None: a private module is the business of its own package and its subpackages."""
    parts = source.split(".")
    for i, part in enumerate(parts):
        owner = ".".join(parts[:i])
        if is_private(part) and importer != owner and not importer.startswith(f"{owner}."):
            return ".".join(parts[: i + 1])
    return None


def private_uses(path: Path, module: str, known: set[str]) -> list[str]:
    """``file:line name`` for every cross-module private use in ``path`` (the module ``module``); ``known`` is
    the set of module names of ours (to tell ``from pebench import x`` binding a module from one binding a name)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    where = path.relative_to(ROOT)
    is_package = path.name == "__init__.py"
    aliases: dict[str, str] = {}  # local name -> our module it is bound to
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if _ours(a.name):
                    private = foreign_private_module(a.name, module)
                    if private is not None:
                        found.append((node.lineno, f"module {private}"))
                    if a.asname:
                        aliases[a.asname] = a.name
                    else:  # `import pebench.x.y` binds `pebench`; attribute chains are resolved below
                        aliases[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(node, module, is_package)
            if not _ours(source):
                continue
            private = foreign_private_module(source, module)
            if private is not None:
                found.append((node.lineno, f"module {private}"))
            for a in node.names:
                if is_private(a.name) and source != module:
                    found.append((node.lineno, f"{source}.{a.name}"))
                if f"{source}.{a.name}" in known:
                    aliases[a.asname or a.name] = f"{source}.{a.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            target = _dotted(node.value, aliases, known)
            if target and target != module:
                found.append((node.lineno, f"{target}.{node.attr}"))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and is_private(node.args[1].value)):
            target = _dotted(node.args[0], aliases, known)
            if target and target != module:
                found.append((node.lineno, f"{target}.{node.args[1].value}"))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
                found += [(c.lineno, f"__all__ {c.value}") for c in ast.walk(node.value)
                          if isinstance(c, ast.Constant) and isinstance(c.value, str) and is_private(c.value)]
    return [f"{where}:{line} {name}" for line, name in sorted(set(found))]


def _dotted(node: ast.expr, aliases: dict[str, str], known: set[str]) -> str | None:
    """The module of ours an expression (``m``, ``pebench.runner.run``) names, or None."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, aliases, known)
        if base is not None and f"{base}.{node.attr}" in known:
            return f"{base}.{node.attr}"
    return None


def all_private_uses() -> list[str]:
    files = module_files()
    known = set(files.values())
    return [use for path, module in files.items() for use in private_uses(path, module, known)]


def test_the_scan_finds_every_kind_of_private_use(tmp_path, monkeypatch):
    """Each form is found (and named with its line); same-module, dunder and foreign-package uses are not."""
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from pebench.runner.run import _prepare, run\n"           # 1: found
        "from ..core import _x\n"                                 # 2: found (relative)
        "from . import _own\n"                                    # 3: found (pebench.runner._own is not us)
        "import pebench.runner.resume as r\n"
        "from pebench.runner import run as rr\n"
        "import pebench.runner.stopping\n"
        "r._last()\n"                                             # 7: found
        "rr._helper\n"                                            # 8: found
        "pebench.runner.stopping._Stop\n"                         # 9: found
        "getattr(r, '_cb')\n"                                     # 10: found
        "__all__ = ['run', '_hidden', '__version__']\n"           # 11: found (only _hidden)
        "from os import _exit\nfrom pebench.core import __version__\n"
        "from .sample import _mine\nx._y\n"
        "from pebench.datamodules._common import Base\n"          # 16: found (a _module of another package)
        "import pebench.datamodules.synthetic._render as rr2\n"   # 17: found
        "from ..datamodules.synthetic._render.deep import SPLITS\n"  # 18: found (relative; the first _module)
        "from ._helpers import ok\nimport pebench.runner._x2.y\n"  # 19, 20: not found (its own package's)
        , encoding="utf-8")
    known = {"pebench", "pebench.runner", "pebench.runner.run", "pebench.runner.resume", "pebench.runner.stopping",
             "pebench.runner.sample"}
    uses = private_uses(sample, "pebench.runner.sample", known)
    assert uses == [f"sample.py:{n} {name}" for n, name in [
        (1, "pebench.runner.run._prepare"), (2, "pebench.core._x"), (3, "pebench.runner._own"),
        (7, "pebench.runner.resume._last"), (8, "pebench.runner.run._helper"),
        (9, "pebench.runner.stopping._Stop"), (10, "pebench.runner.resume._cb"), (11, "__all__ _hidden"),
        (16, "module pebench.datamodules._common"), (17, "module pebench.datamodules.synthetic._render"),
        (18, "module pebench.datamodules.synthetic._render")]]


def test_a_private_module_is_its_own_packages_business():
    """Its package and subpackages may import it; a sibling or another package may not."""
    assert foreign_private_module("pebench.datamodules._x", "pebench.datamodules.images.mnist") is None
    assert foreign_private_module("pebench.datamodules._x", "pebench.datamodules") is None
    assert foreign_private_module("pebench.datamodules.synthetic._r", "pebench.datamodules.probes.sets") == \
        "pebench.datamodules.synthetic._r"
    assert foreign_private_module("pebench.datamodules._x", "pebench.datamodules_extra.y") == "pebench.datamodules._x"
    assert foreign_private_module("pebench.datamodules._x", "pebench.tasks.dino.multicrop") == "pebench.datamodules._x"


def test_the_scan_names_modules_by_the_package_dir_mapping():
    files = module_files()
    assert files[ROOT / "models" / "tasks" / "base.py"] == "pebench.tasks.base"
    assert files[ROOT / "bench" / "runner" / "__init__.py"] == "pebench.runner"
    assert files[ROOT / "benchmarks" / "reports.py"] == "benchmarks.reports"


def test_no_module_uses_another_modules_private_names():
    uses = all_private_uses()
    assert not uses, f"{len(uses)} cross-module uses of _private names (make them public where they belong):\n" + \
        "\n".join(uses)


if __name__ == "__main__":  # the count, for a closing note: python tests/test_private_imports.py
    print("\n".join(all_private_uses()))

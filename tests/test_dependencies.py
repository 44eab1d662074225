"""pyproject.toml declares exactly what the product imports, at floors that have the safe APIs it relies on.

The product is the packages under ``bench/``, ``encodings/``, ``models/``, ``datamodules/``, ``analysis/`` and
``leaderboard/`` (not ``tests/``, ``benchmarks/`` or ``examples/``). Its imports are read with ``ast`` (module-level
and function-local ones alike; standard library by ``sys.stdlib_module_names``), each top-level module mapped to its
distribution (:data:`MODULE_TO_DIST` where the names differ), and checked:

* every imported distribution is declared: a dependency, or an extra for a module only an optional feature imports
  (:data:`OPTIONAL`), and then only in that feature's files and inside a function, so that ``bench run`` (which
  imports every dataset module into its registry) never needs the extra;
* every dependency is imported somewhere (``tqdm`` was declared and never imported);
* the modules imported by name at run time (``--logger``'s packages, the perf peers) are declared in their extras;
* the ``test`` extra holds every feature extra but the loggers', so CI's ``pip install -e ".[test]"`` runs every test;
* the floors of ``torch``, ``torchvision``, ``lightning`` and ``onnx`` are at least the releases with the APIs the
  checkpoint loaders rely on (:data:`FLOORS`);
* the dependencies, at their installed versions, admit numpy 2 (nuscenes-devkit, which requires numpy<2, is the
  ``nuscenes`` extra), and ``bench run --dataset nuscenes`` without the devkit is one line naming the extra, exit 2.
"""
from __future__ import annotations

import ast
import importlib.metadata as md
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PRODUCT = ("bench", "encodings", "models", "datamodules", "analysis", "leaderboard")
FIRST_PARTY = {"pebench"}

#: top-level module -> distribution, where the names differ (otherwise the distribution is the module's name)
MODULE_TO_DIST = {
    "PIL": "pillow", "yaml": "pyyaml", "cv2": "opencv-python-headless", "skimage": "scikit-image",
    "sklearn": "scikit-learn", "torch_geometric": "torch-geometric", "nuscenes": "nuscenes-devkit",
    "rotary_embedding_torch": "rotary-embedding-torch", "x_transformers": "x-transformers",
}
#: modules the product imports for one optional feature only -> (the extra that declares it, the only files that may
#: import it); those imports must be function-local (the registry imports every dataset module for any run)
OPTIONAL: dict[str, tuple[str, frozenset[str]]] = {
    "nuscenes": ("nuscenes", frozenset({"datamodules/scenes/nuscenes.py"})),
    "onnx": ("onnx", frozenset({"analysis/checkpoint_import.py"})),
    "rotary_embedding_torch": ("perf", frozenset({"bench/perf/peers.py"})),
    "x_transformers": ("perf", frozenset({"bench/perf/peers.py"})),
}
#: extras that are not product features: the tests' tools, the perf peers, the union of the features
NON_FEATURE_EXTRAS = frozenset({"test", "perf", "all"})
#: feature extras the test extra does not install (the logger tests skip, saying so, without them)
NOT_IN_TEST_EXTRA = frozenset({"tensorboard", "wandb"})
#: distribution -> the lowest release with the APIs pebench's safe loading relies on (the declared floor must not
#: be below it). torch 2.6: torch.load defaults to weights_only=True, torch.serialization.add_safe_globals;
#: torchvision 0.21: the release for torch 2.6; lightning 2.6.0: load_from_checkpoint / Trainer.fit take
#: weights_only, 2.6.6: load_from_checkpoint no longer imports a callable named by the checkpoint's hyper-parameters;
#: onnx 1.16: CVE-2024-27318 (external-data path traversal) fixed.
#: What this does not do: CI installs the newest releases only, so no floor is ever installed or run; an API from a
#: release later than its floor used tomorrow is not caught here (raise the floor and this table together).
FLOORS = {"torch": "2.6", "torchvision": "0.21", "lightning": "2.6.6", "onnx": "1.16"}
#: releases the ranges must keep admitting (the builds on the dev machines)
ADMITTED = {"torch": "2.14.1", "torchvision": "0.29.1"}


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _dist(module: str) -> str:
    return canonicalize_name(MODULE_TO_DIST.get(module, module))


def _product_files() -> list[Path]:
    return sorted(p for d in PRODUCT for p in (ROOT / d).rglob("*.py"))


def _imports() -> dict[str, list[tuple[str, int, bool]]]:
    """Third-party top-level module -> [(file, line, function-local)] for every absolute import in the product."""
    found: dict[str, list[tuple[str, int, bool]]] = defaultdict(list)
    for path in _product_files():
        tree = ast.parse(path.read_text(), str(path))

        def visit(node: ast.AST, local: bool) -> None:
            for child in ast.iter_child_nodes(node):
                names: list[str] = []
                if isinstance(child, ast.Import):
                    names = [a.name for a in child.names]
                elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                    names = [child.module]
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in FIRST_PARTY:
                        found[top].append((_rel(path), child.lineno, local))
                visit(child, local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

        visit(tree, False)
    return found


IMPORTS = _imports()


def _requirements(specs: list[str]) -> dict[str, Requirement]:
    out = {}
    for s in specs:
        r = Requirement(s)
        out[canonicalize_name(r.name)] = r
    return out


MAIN = _requirements(PYPROJECT["project"]["dependencies"])
EXTRAS = {name: _requirements(specs) for name, specs in PYPROJECT["project"]["optional-dependencies"].items()}


def _literal(path: str, name: str) -> object:
    """The literal value of the module-level assignment ``name = ...`` in ``path`` (read, not imported)."""
    for node in ast.parse((ROOT / path).read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path} no longer assigns {name} at module level; update tests/test_dependencies.py")


def test_the_import_scan_sees_module_level_and_function_local_imports():
    assert {(f, local) for f, _, local in IMPORTS["submitit"]} == {("bench/sweep/slurm.py", True)}  # deferred
    assert ("bench/core/io.py", False) in {(f, local) for f, _, local in IMPORTS["yaml"]}  # module level
    assert IMPORTS["nuscenes"] and all(local for _, _, local in IMPORTS["nuscenes"])  # only deferred imports
    assert "os" not in IMPORTS and "pebench" not in IMPORTS and "__future__" not in IMPORTS


def test_every_product_import_is_declared():
    problems = []
    for module, sites in sorted(IMPORTS.items()):
        dist, where = _dist(module), ", ".join(f"{f}:{n}" for f, n, _ in sites[:3])
        if dist in MAIN:
            if module in OPTIONAL:
                problems.append(f"{module} ({dist}) is a dependency but listed in OPTIONAL; drop one of the two")
            continue
        if module not in OPTIONAL:
            extras = [e for e, reqs in EXTRAS.items() if dist in reqs]
            problems.append(f"import {module} ({where}) needs distribution {dist!r}, which is not in "
                            f"[project] dependencies" + (f" (only in the extras {extras}: imports of an optional "
                                                         f"feature go in OPTIONAL here)" if extras else "")
                            + "; declare it (and map the module in MODULE_TO_DIST if the names differ)")
            continue
        extra, files = OPTIONAL[module]
        if dist not in EXTRAS.get(extra, {}):
            problems.append(f"import {module} ({where}): extra {extra!r} does not declare {dist!r}")
        for f, n, local in sites:
            if f not in files:
                problems.append(f"{f}:{n} imports {module}, which only the {extra!r} extra installs; only "
                                f"{sorted(files)} may")
            elif not local:
                problems.append(f"{f}:{n} imports {module} at module level; the {extra!r} extra is optional, so "
                                f"import it inside the function that needs it")
    assert not problems, "\n".join(problems)


def test_every_dependency_is_imported_by_the_product():
    imported = {_dist(m) for m in IMPORTS}
    unused = sorted(set(MAIN) - imported)
    assert not unused, f"declared in [project] dependencies but never imported by the product: {unused}"


def test_optional_table_has_no_stale_entries():
    stale = sorted(set(OPTIONAL) - set(IMPORTS))
    assert not stale, f"OPTIONAL names modules the product no longer imports: {stale}"


def test_modules_imported_by_name_are_declared_in_their_extras():
    """``--logger tensorboard|wandb`` imports its package by name (``importlib``), and ``bench perf peers`` looks
    the peers up with ``find_spec``: no import statement names them, so the tables are read here."""
    loggers = _literal("bench/runner/loggers.py", "_LOGGER_PACKAGES")
    assert isinstance(loggers, dict) and loggers
    problems = [f"--logger {name}: extra {extra!r} does not declare {_dist(module)!r}"
                for name, (module, extra) in loggers.items() if _dist(module) not in EXTRAS.get(extra, {})]
    peers = _literal("bench/perf/peers.py", "PEERS")
    assert isinstance(peers, dict) and peers
    problems += [f"perf peer {name}: the perf extra does not declare {canonicalize_name(name)!r}"
                 for name, module in peers.items() if canonicalize_name(name) not in EXTRAS["perf"]
                 or _dist(module) != canonicalize_name(name)]
    assert not problems, "\n".join(problems)


def test_module_to_dist_agrees_with_installed_metadata():
    """Each mapping used by the product (and installed here) is what the installed distributions say."""
    provided = md.packages_distributions()
    wrong = [f"{m} -> {MODULE_TO_DIST[m]}, but installed by {provided[m]}" for m in IMPORTS
             if m in MODULE_TO_DIST and m in provided
             and _dist(m) not in {canonicalize_name(d) for d in provided[m]}]
    assert not wrong, "\n".join(wrong)


def test_test_extra_holds_every_feature_extra_and_all_is_their_union():
    features = {e for e in EXTRAS if e not in NON_FEATURE_EXTRAS}
    missing = [f"{e}: {d}" for e in sorted(features - NOT_IN_TEST_EXTRA) for d in EXTRAS[e] if d not in EXTRAS["test"]]
    assert not missing, f"the test extra (CI installs .[test]) lacks feature extras' distributions: {missing}"
    assert set(EXTRAS["all"]) == {d for e in features for d in EXTRAS[e]}, "the all extra is not the features' union"
    assert "hypothesis" in EXTRAS["test"]


def test_a_distribution_declared_twice_has_one_specifier():
    seen: dict[str, dict[str, str]] = defaultdict(dict)
    for where, reqs in [("dependencies", MAIN), *EXTRAS.items()]:
        for d, r in reqs.items():
            seen[d][where] = str(r.specifier)
    differ = {d: w for d, w in seen.items() if len(set(w.values())) > 1}
    assert not differ, f"the same distribution with different ranges: {differ}"


def _lower_bound(r: Requirement) -> Version | None:
    bounds = [Version(s.version) for s in r.specifier if s.operator in (">=", "==", "~=", ">")]
    return max(bounds) if bounds else None


def test_floors_have_the_safe_loading_apis():
    """A declared-range check only (see :data:`FLOORS`): nothing old is installed."""
    problems = []
    for dist, floor in FLOORS.items():
        declared = [(w, r) for w, reqs in [("dependencies", MAIN), *EXTRAS.items()] for d, r in reqs.items()
                    if d == dist]
        assert declared, f"{dist} is not declared anywhere"
        for where, r in declared:
            low = _lower_bound(r)
            if low is None or low < Version(floor):
                problems.append(f"{where}: {r} admits releases below {floor}")
    for dist, version in ADMITTED.items():
        if not MAIN[dist].specifier.contains(version, prereleases=True):
            problems.append(f"{MAIN[dist]} no longer admits {version}")
    assert not problems, "\n".join(problems)


def _closure_numpy_caps() -> list[str]:
    """Requirements on numpy that exclude 2.0, in the installed closure of the [project] dependencies."""
    caps, seen, todo = [], set(), [(r, "pebench") for r in MAIN.values()]
    while todo:
        req, parent = todo.pop()
        name = canonicalize_name(req.name)
        if name == "numpy" and not req.specifier.contains("2.0.0"):
            caps.append(f"{parent} requires {req}")
        key = (name, tuple(sorted(req.extras)))
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for spec in requires:
            sub = Requirement(spec)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in ["", *req.extras]):
                todo.append((sub, f"{name}"))
    return caps


def test_dependencies_admit_numpy_2():
    """``pip install -e .`` must be free to install numpy 2: no dependency, at its installed version, caps numpy
    below 2 (nuscenes-devkit does; it is the nuscenes extra). Installed versions only, not a resolver run."""
    assert "nuscenes-devkit" not in MAIN
    assert MAIN["numpy"].specifier.contains("2.0.0")
    caps = _closure_numpy_caps()
    assert not caps, f"these requirements pin numpy below 2: {caps}"


MISSING_DEVKIT = "bench: error: dataset 'nuscenes' needs nuscenes-devkit, which is not installed: " \
                 "pip install -e '.[nuscenes]'"


def test_missing_devkit_is_one_line_naming_the_extra(tmp_path):
    """``bench run --dataset nuscenes`` with nuscenes-devkit absent (simulated: ``sys.modules['nuscenes'] = None``):
    exit 2, one line naming the extra, and no run directory made."""
    code = ("import sys; sys.modules['nuscenes'] = None\n"
            "from pebench.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    out = tmp_path / "runs"
    for data_root in (tmp_path / "absent", tmp_path):  # before the data root is looked at, and with one that exists
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        r = subprocess.run([sys.executable, "-c", code, "run", "--dataset", "nuscenes", "--data-root", str(data_root),
                            "--out", str(out)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 2, r.stderr[-2000:]
        assert r.stderr.strip().splitlines() == [MISSING_DEVKIT], r.stderr[-2000:]
        assert not out.exists()


def test_require_devkit_names_a_broken_install(tmp_path, monkeypatch):
    """An installed devkit whose own import fails is not reported as missing: the failure is named."""
    from pebench.core.errors import ConfigError
    from pebench.datamodules.scenes import nuscenes as N

    monkeypatch.setitem(sys.modules, "nuscenes", None)
    with pytest.raises(ConfigError, match=r"needs nuscenes-devkit, which is not installed: pip install -e '\.\[nuscenes\]'"):
        N.require_devkit()
    fake = tmp_path / "nuscenes"
    fake.mkdir()
    (fake / "__init__.py").write_text("import pebench_no_such_module_for_this_test\n")
    for name in [m for m in sys.modules if m == "nuscenes" or m.startswith("nuscenes.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"installed but cannot be imported \(ModuleNotFoundError: No module named "
                                          r"'pebench_no_such_module_for_this_test'\); reinstall it"):
        N.require_devkit()

"""Reading result files never imports torch.

`bench leaderboard`, `bench runs`, `bench runs show` and `bench --help` each run in a fresh
interpreter on a small results folder (copies of committed runs); when the command returns, neither
torch nor lightning nor the PE, model, dataset or analysis packages may have been imported.
``pebench.leaderboard`` itself imports nothing of pebench but ``pebench.core``.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "results" / "embedded"
#: committed run directories copied into the small results folder (a probe: its ceiling note is read too)
RUNS = ("shapes/ape/vit-nano/seed0", "shapes/ape/vit-nano/seed1", "shapes/pape/vit-nano/seed0",
        "probe-decay/ape/vit-probe/seed0")
#: modules a command that only reads result files must not import
HEAVY = ("torch", "lightning", "pebench.encodings", "pebench.models", "pebench.datamodules", "pebench.analysis",
         "pebench.runner.run")

# runs pebench.cli.main(argv) and prints, as its last line, the exit status and every imported module
_WRAPPER = """
import json, sys
from pebench.cli import main
try:
    rc = main(sys.argv[1:])
except SystemExit as e:
    rc = e.code
print(json.dumps({"rc": rc, "modules": sorted(sys.modules)}))
"""


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def _bench(argv: list[str], cwd: Path) -> tuple[int, list[str], str]:
    """(exit status, imported modules, stdout) of `bench <argv>` in a fresh interpreter."""
    r = subprocess.run([sys.executable, "-c", _WRAPPER, *argv], cwd=cwd, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    out, _, last = r.stdout.rstrip("\n").rpartition("\n")
    report = json.loads(last)
    return report["rc"], report["modules"], out


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    if not all((COMMITTED / run / "results.json").is_file() for run in RUNS):
        pytest.skip("the committed runs are not in this checkout")
    root = tmp_path_factory.mktemp("weight") / "results"
    for run in RUNS:
        (root / run).mkdir(parents=True)
        for name in ("results.json", "metrics.csv"):
            if (COMMITTED / run / name).is_file():
                shutil.copy(COMMITTED / run / name, root / run / name)
    return root


@pytest.mark.parametrize("argv", [
    ["leaderboard", "--results", "results", "--out", "LB.md"],
    ["runs", "--results", "results"],
    ["runs", "--results", "results", "show", "shapes/ape/vit-nano/seed0"],
    ["--help"],
], ids=["leaderboard", "runs", "runs-show", "help"])
def test_commands_that_read_results_import_no_torch(results: Path, argv: list[str]) -> None:
    rc, modules, out = _bench(argv, results.parent)
    assert rc == 0, out
    assert not _heavy(modules), _heavy(modules)
    if argv[0] == "leaderboard":
        text = (results.parent / "LB.md").read_text(encoding="utf-8")
        assert "## probe-decay" in text and "No-PE ceiling of the test split" in text and "## shapes" in text
        assert (results.parent / "LB_curves.png").is_file()
    elif argv[0] == "runs" and "show" in argv:
        assert out.startswith("run results/shapes/ape/vit-nano/seed0") and "results.json" in out
    elif argv[0] == "runs":
        assert "shapes" in out and "probe-decay" in out


def test_the_leaderboard_package_imports_only_core() -> None:
    code = ("import json, sys\n"
            "import pebench.leaderboard, pebench.leaderboard.runs, pebench.leaderboard.curves\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('pebench', 'torch', 'lightning'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    modules = json.loads(r.stdout.strip().splitlines()[-1])
    outside = [m for m in modules if m != "pebench" and not m.startswith(("pebench.core", "pebench.leaderboard"))]
    assert not outside, outside

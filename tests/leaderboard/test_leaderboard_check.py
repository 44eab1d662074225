"""`bench leaderboard --check DIR`: one bad results folder per problem, each reported in one line naming the file
(exit 2); the committed results are accepted."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import pytest

from pebench.cli import main
from pebench.leaderboard.check import absolute_paths, check_results

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "results" / "embedded"
RUNS = [f"shapes/{pe}/vit-nano/seed{s}" for pe in ("sincos", "ape") for s in (0, 1, 2)]


@pytest.fixture()
def good(tmp_path: Path) -> Path:
    """Six committed shapes runs (results.json + config.yaml): a folder the check accepts."""
    if not all((COMMITTED / run / "results.json").is_file() for run in RUNS):
        pytest.skip("the committed runs are not in this checkout")
    root = tmp_path / "results"
    for run in RUNS:
        (root / run).mkdir(parents=True)
        for name in ("results.json", "config.yaml"):
            shutil.copy(COMMITTED / run / name, root / run / name)
    return root


def _edit(root: Path, run: str, change: Callable[[dict], None]) -> None:
    path = root / run / "results.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _schema(root: Path) -> None:
    _edit(root, "shapes/ape/vit-nano/seed1", lambda d: d.pop("metrics"))


def _not_json(root: Path) -> None:
    (root / "shapes/ape/vit-nano/seed1/results.json").write_text("{oops", encoding="utf-8")


def _running(root: Path) -> None:
    _edit(root, "shapes/ape/vit-nano/seed1", lambda d: d.update(status="running"))


def _other_commit(root: Path) -> None:
    _edit(root, "shapes/ape/vit-nano/seed1", lambda d: d.update(git_sha="0" * 40))


def _no_commit(root: Path) -> None:
    _edit(root, "shapes/ape/vit-nano/seed1", lambda d: d.pop("git_sha"))


def _other_fingerprint(root: Path) -> None:
    _edit(root, "shapes/ape/vit-nano/seed1", lambda d: d.update(fingerprint="f" * 64))


def _missing_seed(root: Path) -> None:
    shutil.rmtree(root / "shapes/ape/vit-nano/seed2")


def _duplicate(root: Path) -> None:
    shutil.copytree(root / "shapes/ape/vit-nano/seed1", root / "again/shapes/ape/vit-nano/seed1")


def _absolute_in_results(root: Path) -> None:
    _edit(root, "shapes/ape/vit-nano/seed1", lambda d: d.update(run_dir="/home/someone/runs/shapes/ape/vit-nano/seed1"))


def _absolute_in_config(root: Path) -> None:
    path = root / "shapes/ape/vit-nano/seed1/config.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("\nout: .\n", "\nout: /scratch/runs\n"), encoding="utf-8")


def _no_config(root: Path) -> None:
    (root / "shapes/ape/vit-nano/seed1/config.yaml").unlink()


BAD = {  # name -> (make it bad, the file the one problem line names, a phrase of the line)
    "schema": (_schema, "shapes/ape/vit-nano/seed1/results.json", "missing required key(s) 'metrics'"),
    "not-json": (_not_json, "shapes/ape/vit-nano/seed1/results.json", "not valid JSON"),
    "incomplete": (_running, "shapes/ape/vit-nano/seed1/results.json", "status 'running', not complete"),
    "two-commits": (_other_commit, "shapes/ape/vit-nano/seed1/results.json", "another commit"),
    "no-commit": (_no_commit, "shapes/ape/vit-nano/seed1/results.json", "no git_sha recorded"),
    "two-configurations": (_other_fingerprint, "shapes/ape/vit-nano/seed1/results.json", "another configuration"),
    "missing-seed": (_missing_seed, "shapes/ape/vit-nano/seed0/results.json", "lacks seed(s) 2"),
    "duplicate": (_duplicate, "shapes/ape/vit-nano/seed1/results.json", "duplicate"),
    "absolute-path-results": (_absolute_in_results, "shapes/ape/vit-nano/seed1/results.json",
                              "absolute path in run_dir"),
    "absolute-path-config": (_absolute_in_config, "shapes/ape/vit-nano/seed1/config.yaml", "absolute path in out"),
    "no-config": (_no_config, "shapes/ape/vit-nano/seed1/config.yaml", "missing"),
}


def test_a_good_folder_is_accepted(good: Path, capsys) -> None:
    problems, summary = check_results(good)
    assert problems == [] and summary.startswith("6 complete run(s) in 2 cell(s) of 1 dataset(s), 3 seed(s) per cell; "
                                                 "schema version ")
    assert main(["leaderboard", "--check", str(good)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ok: ") and out.count("\n") == 1


@pytest.mark.parametrize("name", list(BAD))
def test_each_problem_is_one_line_naming_the_file(good: Path, name: str, capsys) -> None:
    make_bad, file, phrase = BAD[name]
    make_bad(good)
    problems, _ = check_results(good)
    if name == "duplicate":  # the copy is reported from whichever path sorts second
        assert len(problems) == 1 and phrase in problems[0], problems
    else:
        assert len(problems) == 1 and problems[0].startswith(f"{file}: ") and phrase in problems[0], problems
    assert main(["leaderboard", "--check", str(good)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[0].startswith(str(good) + "/") and err[1] == f"bench: error: 1 problem(s) in {good}"


def test_an_empty_or_missing_folder_is_an_error(tmp_path: Path, capsys) -> None:
    assert check_results(tmp_path)[0] == ["results.json: no results.json found below the folder"]
    assert main(["leaderboard", "--check", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_absolute_paths_are_found_in_nested_values_only() -> None:
    value = {"metrics": {"val/acc1": 0.5}, "config": {"out": ".", "data_root": "C:\\data"}, "x": ["~/a", "b/c"]}
    assert list(absolute_paths(value)) == [("config.data_root", "C:\\data"), ("x[0]", "~/a")]


@pytest.mark.parametrize("study", ["embedded", "dino", *(f"probe-sweep-200-steps/probe-{p}" for p in (
                                       "translation", "rotation", "context", "extrapolation", "decay", "anchoring")),
                                   "probe-sweep-200-steps/probe-lr/lr5e-3",
                                   "probe-sweep-200-steps/probe-lr/lr1.5e-2",
                                   "ddp-agreement/one-process", "ddp-agreement/ddp-2", "probe-recipe/constant-5e-3",
                                   "probe-recipe/constant-5e-3-b32", "alibi-study/default", "alibi-study/scale8",
                                   "alibi-study/target-default", "alibi-study/target-scale8",
                                   "alibi-study/target-learnable", "alibi-study/target-lr1e-3",
                                   "alibi-study/target-cls", "event-tokens/frames", "event-tokens/spiking",
                                   "primitives-scene", "hops"])
def test_the_committed_results_are_accepted(study: str) -> None:
    if not (REPO / "results" / study).is_dir():
        pytest.skip("no committed results")
    problems, summary = check_results(REPO / "results" / study)
    assert problems == [] and summary

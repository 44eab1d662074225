"""benchmarks/strip_machine_paths.py: the machine paths of a run made elsewhere become paths relative to its
study folder, nothing else in the files changes, a second pass changes nothing, and the committed results
need no rewrite (every committed run already records relative paths)."""
from __future__ import annotations

import json
from pathlib import Path

from benchmarks import strip_machine_paths

REPO = Path(__file__).resolve().parents[2]


def _run(study: Path, out: str) -> Path:
    run = study / "shapes" / "pape" / "vit-nano" / "seed0"
    run.mkdir(parents=True)
    results = {"config": {"dataset": "shapes", "epochs": 4, "out": out}, "metrics": {"val/acc1": 0.123456789},
               "run_dir": f"{out}/shapes/pape/vit-nano/seed0", "status": "complete"}
    (run / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (run / "config.yaml").write_text(f"dataset: shapes\nepochs: 4\nout: {out}\nseed: 0\n", encoding="utf-8")
    return run


def test_machine_paths_become_relative_and_nothing_else_changes(tmp_path):
    run = _run(tmp_path / "study", "/scratch/someone/out")
    changed, problems = strip_machine_paths.process(tmp_path / "study", write=True)
    assert not problems and sorted(changed) == [run / "config.yaml", run / "results.json"]
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert results["run_dir"] == "shapes/pape/vit-nano/seed0" and results["config"]["out"] == "."
    assert results["metrics"] == {"val/acc1": 0.123456789} and results["config"]["epochs"] == 4
    assert (run / "config.yaml").read_text(encoding="utf-8") == "dataset: shapes\nepochs: 4\nout: .\nseed: 0\n"
    assert strip_machine_paths.process(tmp_path / "study", write=True) == ([], [])  # idempotent


def test_a_run_folder_that_does_not_match_its_recorded_run_dir_is_reported_and_left(tmp_path):
    run = _run(tmp_path / "study", "/scratch/out")
    moved = tmp_path / "study" / "elsewhere"
    run.rename(moved)
    before = (moved / "results.json").read_text(encoding="utf-8")
    changed, problems = strip_machine_paths.process(tmp_path / "study", write=True)
    assert changed == [] and len(problems) == 1 and "does not end with" in problems[0]
    assert (moved / "results.json").read_text(encoding="utf-8") == before


def test_the_committed_results_need_no_rewrite():
    assert strip_machine_paths.main(["--results", str(REPO / "results"), "--check"]) == 0

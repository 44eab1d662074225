"""benchmarks/rerun_check.py: which committed runs it selects, how it compares metrics, its bad-input lines."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import rerun_check  # noqa: E402

ARCHIVE = REPO / "results" / "probe-sweep-200-steps"


def test_selects_the_lowest_seeds_of_every_matching_cell():
    runs = rerun_check.select(ARCHIVE / "probe-decay", 2, None, {"pape", "alibi"})
    assert [str(p.relative_to(ARCHIVE)) for p in runs] == [
        f"probe-decay/{pe}/vit-probe/seed{s}" for pe in ("alibi", "pape") for s in (0, 1)]
    assert rerun_check.select(ARCHIVE, 1, {"probe-context"}, {"nope"}) == []


def test_compare_reports_the_largest_difference_and_a_missing_metric():
    old = {"metrics": {"val/acc1": 0.5, "test/acc1": 0.25}}
    assert rerun_check.compare(old, {"metrics": {"val/acc1": 0.5, "test/acc1": 0.25}}) == (0.0, "")
    assert rerun_check.compare(old, {"metrics": {"val/acc1": 0.5, "test/acc1": 0.5}}) == (0.25, "test/acc1")
    assert rerun_check.compare(old, {"metrics": {"val/acc1": 0.5}}) == (float("inf"), "test/acc1")


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert rerun_check.main(["--results", str(tmp_path / "missing")]) == 2
    assert rerun_check.main(["--results", str(ARCHIVE), "--per-cell", "0"]) == 2
    assert rerun_check.main(["--results", str(ARCHIVE), "--keep", str(tmp_path)]) == 2
    assert rerun_check.main(["--results", str(ARCHIVE), "--pes", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("rerun_check: expected") for line in err)

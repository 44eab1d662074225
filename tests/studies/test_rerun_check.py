"""benchmarks/rerun_check.py: which committed runs it selects, how it compares metrics, its bad-input lines."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from benchmarks import rerun_check

REPO = Path(__file__).resolve().parents[2]

ARCHIVE = REPO / "results" / "probe-sweep-200-steps"


def test_selects_the_lowest_seeds_of_every_matching_cell():
    runs = rerun_check.select(ARCHIVE / "probe-decay", 2, None, {"pape", "alibi"})
    assert [str(p.relative_to(ARCHIVE)) for p in runs] == [
        f"probe-decay/{pe}/vit-probe/seed{s}" for pe in ("alibi", "pape") for s in (0, 1)]
    assert rerun_check.select(ARCHIVE, 1, {"probe-context"}, {"nope"}) == []
    rpt = rerun_check.select(REPO / "results" / "embedded", 1, {"probe-anchoring"}, {"pape", "pape+rpt"})
    assert [p.parent.parent.name for p in rpt] == ["pape", "pape+rpt"]  # RPT runs are a cell of their own


def test_compare_reports_the_largest_difference_and_a_missing_metric():
    old = {"metrics": {"val/acc1": 0.5, "test/acc1": 0.25}}
    assert rerun_check.compare(old, {"metrics": {"val/acc1": 0.5, "test/acc1": 0.25}}) == (0.0, "")
    assert rerun_check.compare(old, {"metrics": {"val/acc1": 0.5, "test/acc1": 0.5}}) == (0.25, "test/acc1")
    assert rerun_check.compare(old, {"metrics": {"val/acc1": 0.5}}) == (float("inf"), "test/acc1")
    coco = {"metrics": {"test/map_large": None, "test/map": float("nan")}}  # null and NaN on both sides: equal
    assert rerun_check.compare(coco, {"metrics": {"test/map_large": None, "test/map": float("nan")}}) == (0.0, "")
    assert rerun_check.compare(coco, {"metrics": {"test/map_large": 0.1, "test/map": float("nan")}}) == (
        float("inf"), "test/map_large")


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert rerun_check.main(["--results", str(tmp_path / "missing")]) == 2
    assert rerun_check.main(["--results", str(ARCHIVE), "--per-cell", "0"]) == 2
    assert rerun_check.main(["--results", str(ARCHIVE), "--keep", str(tmp_path)]) == 2
    assert rerun_check.main(["--results", str(ARCHIVE), "--pes", "nope"]) == 2
    assert rerun_check.main(["--results", str(ARCHIVE), "--workers", "0"]) == 2
    assert rerun_check.main(["--results", str(ARCHIVE), "--threads", "0"]) == 2
    (tmp_path / "taken.json").write_text("[]")
    assert rerun_check.main(["--results", str(ARCHIVE), "--json", str(tmp_path / "taken.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 7 and all(line.startswith("rerun_check: expected") for line in err)


def test_reruns_in_parallel_and_writes_one_record_per_run(tmp_path, capsys):
    """A stand-in ``bench`` copies the committed results.json, changing one metric for seed 1 only."""
    for s in (0, 1):
        src = ARCHIVE / "probe-decay" / "alibi" / "vit-probe" / f"seed{s}"
        dst = tmp_path / "res" / "probe-decay" / "alibi" / "vit-probe" / f"seed{s}"
        dst.mkdir(parents=True)
        for f in ("results.json", "config.yaml"):
            shutil.copy(src / f, dst / f)
    fake = tmp_path / "fake-bench"
    fake.write_text(
        "#!" + sys.executable + "\n"
        "import json, sys, pathlib\n"
        "cfg, out = pathlib.Path(sys.argv[3]), pathlib.Path(sys.argv[5])\n"
        "r = json.loads((cfg.parent / 'results.json').read_text())\n"
        "r['git_sha'] = 'abcdef0123'\n"
        "if r['seed'] == 1: r['metrics']['val/acc1'] += 0.5\n"
        "threads = sys.argv[sys.argv.index('--threads') + 1]\n"
        "if threads != '1': r['metrics']['test/acc1'] += 0.25  # another reduction order\n"
        "out.mkdir(parents=True); (out / 'results.json').write_text(json.dumps(r))\n")
    fake.chmod(0o755)
    out = tmp_path / "check.json"
    code = rerun_check.main(["--results", str(tmp_path / "res"), "--per-cell", "2", "--workers", "2",
                             "--bench", str(fake), "--json", str(out)])
    assert code == 1
    recs = json.loads(out.read_text())
    assert [(r["run"], r["status"], r["rerun_commit"]) for r in recs] == [
        ("probe-decay/alibi/vit-probe/seed0", "identical", "abcdef0"),
        ("probe-decay/alibi/vit-probe/seed1", "differs", "abcdef0")]
    assert recs[1]["max_abs_diff"] == 0.5 and recs[1]["metric"] == "val/acc1"
    assert capsys.readouterr().out.strip().splitlines()[-1] == "1 of 2 reruns identical"
    assert rerun_check.main(["--results", str(tmp_path / "res"), "--per-cell", "1", "--bench", str(fake),
                             "--json", str(out), "--append"]) == 0
    assert [r["run"] for r in json.loads(out.read_text())] == [
        "probe-decay/alibi/vit-probe/seed0", "probe-decay/alibi/vit-probe/seed1", "probe-decay/alibi/vit-probe/seed0"]
    assert rerun_check.main(["--results", str(ARCHIVE), "--json", str(tmp_path / "new.json"), "--append"]) == 2
    # --threads N: the rerun gets N threads instead of the recorded 1; the record names both and the primary metric
    assert rerun_check.main(["--results", str(tmp_path / "res"), "--per-cell", "1", "--bench", str(fake),
                             "--threads", "2", "--json", str(tmp_path / "t2.json")]) == 1
    (rec,) = json.loads((tmp_path / "t2.json").read_text())
    committed = json.loads((tmp_path / "res" / rec["run"] / "results.json").read_text())["metrics"]["test/acc1"]
    assert (rec["threads"], rec["recorded_threads"], rec["primary_metric"]) == (2, 1, "test/acc1")
    assert rec["primary_committed"] == committed and abs(rec["primary_rerun"] - committed - 0.25) < 1e-12


def test_compare_covers_every_recorded_output_not_only_the_metrics():
    old = {"metrics": {"val/acc1": 0.5}, "geometry": {"ssdc": [0.1, 0.2], "layers": [0, 1]},
           "stopped_at_target": {"step": 300, "reached": True}, "evaluated_checkpoint": "best"}
    same = json.loads(json.dumps(old))
    assert rerun_check.compare(old, same) == (0.0, "")
    moved = json.loads(json.dumps(old))
    moved["geometry"]["ssdc"][1] = 0.25
    worst, which = rerun_check.compare(old, moved)
    assert which == "geometry.ssdc[1]" and abs(worst - 0.05) < 1e-12
    stopped = json.loads(json.dumps(old))
    stopped["stopped_at_target"]["step"] = 325
    assert rerun_check.compare(old, stopped) == (25.0, "stopped_at_target.step")
    other = json.loads(json.dumps(old))
    other["evaluated_checkpoint"] = "last"
    assert rerun_check.compare(old, other) == (float("inf"), "evaluated_checkpoint")
    shorter = json.loads(json.dumps(old))
    shorter["geometry"]["ssdc"] = [0.1]
    assert rerun_check.compare(old, shorter) == (float("inf"), "geometry.ssdc")


def test_reports_cite_only_reruns_of_the_runs_still_committed(tmp_path, monkeypatch):
    """A sweep rerun at a later commit replaces its runs; rerun records of the replaced runs stop counting."""
    from benchmarks.reports import reproduced
    for seed, sha in ((0, "aaaaaaa111"), (1, "bbbbbbb222")):
        d = tmp_path / "res" / "probe-x" / "ape" / "vit-probe" / f"seed{seed}"
        d.mkdir(parents=True)
        (d / "results.json").write_text(json.dumps({"git_sha": sha}))
    recs = [{"results": "res", "run": f"probe-x/ape/vit-probe/seed{s}", "commit": "aaaaaaa", "rerun_commit": "ccccccc",
             "status": "identical", "max_abs_diff": 0.0, "metric": ""} for s in (0, 1, 2)]
    (tmp_path / "rerun.json").write_text(json.dumps(recs))
    monkeypatch.chdir(tmp_path)
    text = reproduced(tmp_path / "rerun.json", "res", ["probe-x"])
    assert "reran 1 of these runs" in text and "**1 of 1 gave identical metrics**" in text  # seed1: other commit
    (tmp_path / "res" / "probe-x" / "ape" / "vit-probe" / "seed0" / "results.json").write_text('{"git_sha": "ddd"}')
    assert reproduced(tmp_path / "rerun.json", "res", ["probe-x"]).startswith("These runs have not been rerun")


def test_reports_name_another_cpu_and_moved_primary_metrics(tmp_path, monkeypatch):
    """Reruns on another CPU model: the sentence names both CPUs, whether they ran at the runs' own commit, and how
    many of them gave identical metrics against the reruns on the runs' own CPU model; primary metrics that moved
    are counted with the largest move."""
    from benchmarks.reports import reproduced
    recs = []
    for seed, (status, diff, committed, again) in enumerate((("identical", 0.0, 0.5, 0.5),
                                                             ("differs", 0.06, 0.8, 0.75))):
        d = tmp_path / "res" / "probe-x" / "ape" / "vit-probe" / f"seed{seed}"
        d.mkdir(parents=True)
        (d / "results.json").write_text(json.dumps({"git_sha": "aaaaaaa111"}))
        recs.append({"results": "res", "run": f"probe-x/ape/vit-probe/seed{seed}", "commit": "aaaaaaa",
                     "rerun_commit": "aaaaaaa", "status": status, "max_abs_diff": diff, "metric": "val/loss",
                     "primary_committed": committed, "primary_rerun": again, "cpu_model": "CPU A",
                     "rerun_cpu_model": "CPU B"})
    (tmp_path / "rerun.json").write_text(json.dumps(recs))
    monkeypatch.chdir(tmp_path)
    text = reproduced(tmp_path / "rerun.json", "res", ["probe-x"])
    assert "**1 of 2 gave identical metrics**" in text and "1 changed their primary metric (largest by 0.05)" in text
    assert ("2 of the reruns ran on another CPU model than their runs (made on CPU A, rerun on CPU B), with the same "
            "deterministic pins and at the commit the runs record: 1 of those 2 gave identical metrics") in text
    recs[0]["rerun_cpu_model"] = "CPU A"  # seed 0 rerun on its own CPU model; seed 1 at another commit too
    recs[1]["rerun_commit"] = "bbbbbbb"
    (tmp_path / "rerun.json").write_text(json.dumps(recs))
    text = reproduced(tmp_path / "rerun.json", "res", ["probe-x"])
    assert ("1 of the reruns ran on another CPU model than their runs (made on CPU A, rerun on CPU B), with the same "
            "deterministic pins: 0 of those 1 gave identical metrics, against 1 of 1 on the CPU model") in text

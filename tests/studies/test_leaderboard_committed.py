"""The committed LEADERBOARD.md and LEADERBOARD.html are exactly what `bench leaderboard` makes of the committed
results (so are the committed reports, each what its study script in benchmarks/ writes)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import (
    perf_findings,
    probe_recipe,
)
from pebench.datamodules import get_datamodule_class
from pebench.encodings import variant_label
from pebench.leaderboard import collect_results, render_leaderboard
from pebench.leaderboard.formats import render_format
from pebench.runner.run import dataset_info, load_registries

REPO = Path(__file__).resolve().parents[2]
RESULTS = "results/embedded"


@pytest.mark.skipif(not (REPO / "LEADERBOARD.md").exists(), reason="no committed leaderboard")
def test_committed_leaderboard_regenerates_byte_identical():
    runs, problems = collect_results(REPO / RESULTS)
    complete = [r for r in runs if r.complete]
    assert complete, "the committed results hold no complete run"
    committed = (REPO / "LEADERBOARD.md").read_text(encoding="utf-8")
    head = committed.split("` from ", 1)[0]  # "... `bench leaderboard --results DIR [--reference PE]"
    reference = head.split("--reference ", 1)[1].strip() if "--reference " in head else "none"
    text = render_leaderboard(runs, problems, results_label=RESULTS, reference=reference)
    assert text == committed


@pytest.mark.skipif(not (REPO / "LEADERBOARD.html").exists(), reason="no committed leaderboard page")
def test_committed_leaderboard_page_regenerates_byte_identical():
    """LEADERBOARD.html is `bench leaderboard --format html` of the committed results, with the reference of
    LEADERBOARD.md, its run links relative to the repository root."""
    runs, problems = collect_results(REPO / RESULTS)
    committed = (REPO / "LEADERBOARD.html").read_text(encoding="utf-8")
    head = committed.split(" --format html", 1)[0]
    reference = head.split("--reference ", 1)[1].strip() if "--reference " in head else "none"
    text = render_format("html", runs, problems, REPO / RESULTS, REPO / "LEADERBOARD.html", results_label=RESULTS,
                         reference=reference)
    assert text == committed


@pytest.mark.skipif(not (REPO / "results").exists(), reason="no committed results")
def test_committed_results_record_what_the_leaderboard_reads():
    """Every committed results.json holds ``pe_label`` and ``dataset_info`` with the values bench run records
    now, computed here from the file's own ``pe``, ``config.pe_options`` and ``dataset`` (read only: a file
    that lacks them is reported, never rewritten)."""
    load_registries()
    wrong = []
    for path in sorted((REPO / "results").glob("**/results.json")):
        results = json.loads(path.read_text(encoding="utf-8"))
        cfg = results.get("config") if isinstance(results.get("config"), dict) else {}
        expected = {"pe_label": variant_label(results["pe"], cfg.get("pe_options") or {}),
                    "dataset_info": dataset_info(get_datamodule_class(results["dataset"]))}
        recorded = {k: results.get(k, "(missing)") for k in expected}
        if recorded != expected:
            wrong.append(f"{path.relative_to(REPO)}: {recorded} != {expected}")
    assert not wrong, "\n".join(wrong[:20])


@pytest.mark.skipif(not (REPO / RESULTS).exists(), reason="no committed results")
def test_committed_results_have_three_seeds_per_complete_row():
    runs, _ = collect_results(REPO / RESULTS)
    seeds: dict[tuple[str, str], set[int]] = {}
    for r in runs:
        if r.complete:
            seeds.setdefault((r.dataset, r.label), set()).add(r.seed)
    assert seeds and all(len(s) >= 3 for s in seeds.values()), seeds


@pytest.mark.skipif(not (REPO / "results" / "probe-recipe").exists(), reason="no committed recipe study")
def test_probe_recipe_report_regenerates_from_the_committed_results(tmp_path):
    """results/probe-recipe/REPORT.md is exactly what benchmarks/probe_recipe.py makes of the committed runs."""
    report = tmp_path / "REPORT.md"
    assert probe_recipe.main(["--results", str(REPO / "results" / "probe-recipe"), "--baseline",
                              str(REPO / "results" / "probe-sweep-200-steps"), "--report", str(report)]) == 0
    committed = REPO / "results" / "probe-recipe" / "REPORT.md"
    assert report.read_text(encoding="utf-8") == committed.read_text(encoding="utf-8")


@pytest.mark.parametrize("study,reference", [("primitives-scene", "sincos"), ("hops", "none")])
def test_small_study_leaderboards_regenerate_byte_identical(study, reference):
    """results/<study>/LEADERBOARD.md (benchmarks/scene_hops_study.sh) is `bench leaderboard` of its runs."""
    folder = REPO / "results" / study
    if not (folder / "LEADERBOARD.md").exists():
        pytest.skip("no committed study")
    runs, problems = collect_results(folder)
    assert [r for r in runs if r.complete] and not problems
    text = render_leaderboard(runs, problems, results_label=f"results/{study}", reference=reference)
    assert text == (folder / "LEADERBOARD.md").read_text(encoding="utf-8")


def test_the_archived_200_step_sweep_holds_exactly_the_stale_mean_class_acc_its_readme_names():
    """results/probe-sweep-200-steps keeps its runs as commit dce1ba0 wrote them, the torchmetrics compute-group
    bug included (mean_class_acc 1.0 while acc1 < 1; fixed in 56f0f99). Its README names the runs; no script that
    reads the archive uses the field."""
    root = REPO / "results" / "probe-sweep-200-steps"
    stale = set()
    for f in root.rglob("results.json"):
        m = json.loads(f.read_text(encoding="utf-8")).get("metrics", {})
        for split in ("val", "test"):
            acc, mca = m.get(f"{split}/acc1"), m.get(f"{split}/mean_class_acc")
            if acc is not None and mca == 1.0 and acc < 1.0:
                stale.add(f"{f.parent.relative_to(root).as_posix()} ({split})")
    readme = (root / "README.md").read_text(encoding="utf-8")
    named = {line[3:].split("`")[0] + line.split("`")[2] for line in readme.splitlines() if line.startswith("* `")}
    assert stale and named == stale
    for script in ("alibi_findings.py", "probe_recipe.py"):
        assert "mean_class_acc" not in (REPO / "benchmarks" / script).read_text(encoding="utf-8")


def test_perf_findings_alone_sentence_reads_the_runs_threshold():
    """The *alone* sentence under the training-step table gives the threshold the run sorted its PEs by: the
    records' ``heavy_step`` field, or (records before it existed) the heavy PEs' notes; none without either."""
    committed = [r for r in json.loads((REPO / "docs" / "perf.json").read_text(encoding="utf-8"))
                 if r["suite"] == "pe-overhead"]
    plain = [{**{k: v for k, v in r.items() if k != "heavy_step"},
              "note": (r.get("note") or "").split("; timed in its own")[0]} for r in committed]
    assert "*alone*:" not in perf_findings.overhead_table(plain)
    old = [{**r, "note": r["note"] + "; timed in its own interleave with none (its step > 1.5x none's)"}
           if r["a"] == "pe=liere" else r for r in plain]  # the notes of runs before 2026-12-06
    assert "| liere (*alone*) |" in perf_findings.overhead_table(old)
    assert "warm-up step took over 1.5× `none`'s" in perf_findings.overhead_table(old)
    assert "warm-up step took over 2× `none`'s" in perf_findings.overhead_table([{**r, "heavy_step": 2.0}
                                                                                for r in old])


def test_perf_findings_rpb_split_sentence_says_which_phase_is_slower():
    """Under the peers table, the rpb comparison's forward / backward split (when the records hold it) with the
    direction of each phase read from the numbers."""
    def split(phase, ours, timm):
        return {"name": f"peers train {phase} split one layer rpb vs timm RelPosBias", "a_value": ours,
                "b_value": timm, "ratio": ours / timm, "target": None, "note": "medians of 200 training steps each"}
    text = perf_findings.peers_table([split("forward", 3.0, 4.2), split("backward", 6.7, 5.8),
                                      split("optimizer", 1.2, 1.2)])
    assert "pebench's forward is faster than timm's (3.00 ms against 4.20 ms), its backward slower (6.70 ms against " \
           "5.80 ms)" in text and "split" not in text.split("\n")[2]  # the split records are not table rows
    assert "Where the `rpb`" not in perf_findings.peers_table([split("forward", 3.0, 4.2)])


def test_perf_findings_dino_floor_only_where_the_rest_costs_at_least_the_classification_steps():
    """The DINO bullet claims a floor of 1 + the teacher's share only when the rest of the step costs at least the
    classification steps; otherwise it says what the rest would have to cost (a measured step below such a 'floor'
    was once on the page)."""
    def rec(name, ratio, target=None):
        return {"name": f"{name} vit-nano12 b64 2x32px + 4x16px", "ratio": ratio, "target": target,
                "meets_target": None if target is None else ratio <= target, "higher_is_better": False,
                "suite": "dino"}
    def bullet(rest):
        perf = [rec("dino train step", 1.16, 1.1), rec("dino teacher forward", 0.205),
                rec("dino step without its teacher forward", rest, 1.1)]
        return next(line for line in perf_findings.misses(perf, []).splitlines() if "DINO's step" in line)
    assert "asks the rest of the step to cost at most 0.90 of them" in bullet(0.956) and "gets below" not in bullet(0.956)
    assert "gets below 1.21×" in bullet(1.02)  # 1 + 0.205


def test_perf_findings_names_the_commits_the_records_carry():
    """The page's provenance names the commit(s) of `bench perf all` and `bench perf attention` when their records
    carry one, and says nothing of commits when they do not."""
    perf = [{"name": "x", "commit": "abc"}, {"name": "y", "commit": "abc"}]
    attn = [{"n_tokens": 256, "commit": "def"}]
    text = perf_findings.provenance(perf, attn, Path("perf.json"), Path("perf_attention.json"))
    assert text.endswith(" Measured at commit `abc` (`bench perf all`), `def` (`bench perf attention`).")
    bare = perf_findings.provenance([{"name": "x"}], [{"n_tokens": 256}], Path("perf.json"),
                                    Path("perf_attention.json"))
    assert "commit" not in bare

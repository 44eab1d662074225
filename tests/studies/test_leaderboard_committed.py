"""The committed LEADERBOARD.md and LEADERBOARD.html are exactly what `bench leaderboard` makes of the committed
results (so are the committed reports, each what its study script in benchmarks/ writes)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import (
    perf_findings,
    probe_recipe,
    ssdc_findings,
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


@pytest.mark.skipif(not (REPO / RESULTS / "probe-anchoring").exists(), reason="no committed probe-anchoring results")
def test_ssdc_report_regenerates_from_the_committed_results(tmp_path):
    """results/embedded/probe-anchoring/REPORT.md (the SSDC / EED claims on probe-anchoring) is exactly what
    benchmarks/ssdc_findings.py makes of the committed results."""
    report = tmp_path / "REPORT.md"
    assert ssdc_findings.main(["--results", str(REPO / RESULTS), "--report", str(report)]) == 0
    committed = REPO / RESULTS / "probe-anchoring" / "REPORT.md"
    assert report.read_text(encoding="utf-8") == committed.read_text(encoding="utf-8")


def test_performance_page_regenerates_from_the_committed_measurements(tmp_path):
    """docs/performance.md is exactly what benchmarks/perf_findings.py makes of docs/perf.json and
    docs/perf_attention.json, and says that the CUDA targets are unmeasured."""
    page = tmp_path / "performance.md"
    assert perf_findings.main(["--perf", str(REPO / "docs" / "perf.json"), "--attention",
                               str(REPO / "docs" / "perf_attention.json"), "--peers",
                               str(REPO / "docs" / "perf_peers.json"), "--contention",
                               str(REPO / "docs" / "perf_contention.json"), "--analyze",
                               str(REPO / "docs" / "perf_analyze.json"), "--doc", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    assert text == (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    assert "**unmeasured**: no CUDA device" in text and "/root" not in text and "/tmp" not in text


def test_perf_findings_liere_sentence_reads_its_floor_and_the_official_comparison():
    """The LieRE floor (no target: left out of the peers table) and its comparison reach the misses text."""
    floor = {"name": "peers train floor one attention layer liere", "ratio": 0.6, "higher_is_better": False}
    vs = {"name": "peers train one attention layer liere vs LieRE's official algorithm", "ratio": 1.8, "target": 1.0,
          "meets_target": True, "higher_is_better": True, "interval95": [1.7, 2.1]}
    text = perf_findings._liere_peer_sentence([floor, vs])
    assert "alone take 60%" in text and "at 1.80× [1.70, 2.10] the official algorithm's" in text
    assert perf_findings._liere_peer_sentence([vs]) == ""
    assert "floor" not in perf_findings.peers_table([floor, vs]) and "| one attention layer liere vs" in \
        perf_findings.peers_table([floor, vs])


def test_perf_findings_learned_bias_sentence_reads_the_layer_cost_at_the_smallest_n():
    """A learned-bias PE that misses the step target gets its attention layer's training cost against `none`'s at
    the smallest N `bench perf attention` measured (`auto` rows), only for the missed PEs."""
    def step(pe, tokens, rounds):
        return {"suite": "pe-overhead", "name": f"pe-overhead train vit-nano ({tokens} tok) {pe}", "a": f"pe={pe}",
                "ratio": sum(rounds) / len(rounds), "round_ratios": rounds}
    perf = [step("fire", 64, [0.80, 0.81, 0.79]), step("fire", 256, [0.70, 0.72, 0.71]),
            step("rpb", 64, [0.95, 0.97, 0.96]), step("rpb", 256, [0.90, 0.92, 0.91])]
    attn = [{"pe": pe, "phase": "train", "n_tokens": n, "auto": True, "variant": "default", "time_ms": t,
             "peak_mem_mb": 1.0, "impl": "bias-flash"}
            for pe, n, t in (("none", 256, 1.0), ("fire", 256, 2.5), ("rpb", 256, 1.5), ("none", 1024, 4.0),
                             ("fire", 1024, 20.0))]
    line = next(x for x in perf_findings.misses(perf, attn).splitlines() if x.startswith("* **fire**"))
    assert "one attention layer at N = 256 trains in fire 2.50× `none`'s time" in line and "rpb" not in line
    assert "trains in" not in next(x for x in perf_findings.misses(perf, []).splitlines() if x.startswith("* **fire**"))


def test_perf_findings_pape_augmentation_sentence_reads_the_budget_records():
    """PaPE's bullet says what its q augmentation costs in the budget's layer (PaPE's time minus the step with the
    augmentation held constant) and what the budget leaves above that step; nothing without the held record."""
    budget = {"name": "attention fwd+bwd N=1024 d=64 pape vs rope-axial", "a_value": 9.7, "b_value": 7.7,
              "ratio": 9.7 / 7.7, "target": 1.15}
    held = {"name": "attention fwd+bwd N=1024 d=64 pape, augmentation held constant", "a_value": 8.1, "b_value": 7.7,
            "ratio": 8.1 / 7.7}
    text = perf_findings._augment_sentence([budget, held])
    assert "the layer costs 1.05× RoPE-axial's" in text and "take 1.60 ms of PaPE's 9.70 ms" in text
    assert "the 1.15× budget leaves 0.75 ms above that step." in text
    assert perf_findings._augment_sentence([budget, {**held, "a_value": 9.0}]).endswith("leaves nothing above that step.")
    assert perf_findings._augment_sentence([budget]) == ""


def test_perf_findings_all_budget_miss_lists_the_suites_largest_first():
    """A missed `bench perf all` budget gets a bullet with each suite's wall time, largest first; a met one none."""
    def rec(suite, secs, total):
        return {"name": f"perf wall time {suite}", "a_value": secs, "b_value": total, "ratio": secs / total,
                "higher_is_better": False, "target": None, "meets_target": None, "suite": suite}
    wall = {"name": "perf wall time all suites", "a_value": 312.0, "b_value": 300.0, "ratio": 1.04, "target": 1.0,
            "meets_target": False, "higher_is_better": False, "suite": "all"}
    perf = [rec("startup", 14.1, 312), rec("e2e", 88.4, 312), rec("pe-overhead", 103.0, 312), wall]
    text = perf_findings.misses(perf, [])
    assert "* **`bench perf all`** took 312 s against its 300 s budget: pe-overhead 103 s, e2e 88 s, startup 14 s " \
           "(each suite's wall time" in text
    assert "bench perf all" not in perf_findings.misses(perf[:3] + [{**wall, "a_value": 280.0, "meets_target": True}], [])


def test_perf_findings_peer_and_contention_tables():
    """The peers verdict comes from the record's median interval against 1 (met / missed / inconclusive), the
    memory verdict from its ratio; contention rows are loaded / idle against the record's target."""
    def peer(phase, what, ratio, iv):
        return {"name": f"peers {phase} {what}", "ratio": ratio, "target": 1.0, "meets_target": ratio >= 1,
                "higher_is_better": True, "interval95": iv}

    def mem(phase, what, ratio):
        return {"name": f"peers {phase} peak memory {what}", "ratio": ratio, "target": 1.0,
                "meets_target": ratio <= 1, "higher_is_better": False}
    rows = [peer("train", "A vs B", 1.2, [1.05, 1.3]), mem("train", "A vs B", 1.1),
            peer("eval", "A vs B", 0.9, [0.8, 0.95]), peer("train", "C vs D", 1.1, [0.9, 1.2]),
            {"name": "perf wall time peers", "ratio": 1.0}]
    table = perf_findings.peers_table(rows)
    assert "| A vs B | train | 1.20 [1.05, 1.30] | met | 1.10 | **no** |" in table
    assert "| A vs B | eval | 0.90 [0.80, 0.95] | missed | — | — |" in table
    assert "| C vs D | train | 1.10 [0.90, 1.20] | inconclusive | — | — |" in table
    assert perf_findings.peers_table(None).startswith("Not measured")
    cont = perf_findings.contention_table([
        {"name": "contention passive: 10 steps / idle", "ratio": 1.9, "target": 2.5, "meets_target": True,
         "higher_is_better": False},
        {"name": "contention idle passive / default", "ratio": 1.1, "target": None},
        {"name": "contention loaded passive / default", "ratio": 0.5, "target": None, "a_value": 4.0,
         "b_value": 8.0}])
    assert "| passive: 10 steps / idle | 1.90× | ≤ 2.5× | yes |" in cont
    assert "| idle time, passive / default | 1.10× | — | — |" in cont
    assert "| loaded time, passive / default | 0.50× (4.00 s / 8.00 s) | — | — |" in cont
    rounds = perf_findings.contention_table([  # with rounds: the geometric-mean t-interval decides the verdict
        {"name": "contention default: 10 steps / idle", "ratio": 2.0, "target": 2.5, "meets_target": True,
         "higher_is_better": False, "round_ratios": [1.5, 2.0, 3.0]},
        {"name": "contention 1-thread: 10 steps / idle", "ratio": 1.2, "target": 2.5, "meets_target": True,
         "higher_is_better": False, "round_ratios": [1.1, 1.2, 1.3]}])
    iv = perf_findings.round_interval([1.5, 2.0, 3.0])
    assert iv[1] > 2.5 and f"| default: 10 steps / idle | 2.00× [{iv[0]:.2f}, {iv[1]:.2f}] | ≤ 2.5× | inconclusive |" \
        in rounds
    assert "| 1-thread: 10 steps / idle | 1.20× [0.97, 1.47]" in rounds and rounds.rstrip().endswith("| ≤ 2.5× | yes |")
    fair = perf_findings.contention_table([{"name": "contention auto: 10 steps beside 1 x 2-thread load / idle",
                                            "ratio": 1.8, "target": 2.5, "meets_target": True,
                                            "higher_is_better": False, "fair_share": 2.0}])
    assert "| auto: 10 steps beside 1 x 2-thread load / idle (fair share 2×) | 1.80× | ≤ 2.5× | yes |" in fair
    analyze = perf_findings.analyze_section([
        {"name": "analyze geometry, ViT over 8 photos", "a": "bench analyze", "b": "one forward", "a_value": 90.0,
         "b_value": 10.0, "ratio": 9.0, "note": "1 + 2K = 5 probe passes (clean; ...)"},
        {"name": "analyze geometry wall time, ViT over 8 photos", "a_value": 90.0, "b_value": 180.0, "ratio": 0.5,
         "meets_target": True}])
    assert "took 90 s against 10.0 s for one forward (9.00×); budget 180 s: met (0.50× the budget)" in analyze
    assert "5 probe passes alone cost about 5 × 10.0 = 50 s" in analyze
    both = perf_findings.analyze_section([  # with one permutation: reported beside the default, which keeps the target
        {"name": "analyze geometry, ViT over 8 photos", "a": "bench analyze", "b": "one forward", "a_value": 170.0,
         "b_value": 10.0, "ratio": 17.0, "note": "1 + 2K = 17 probe passes (clean; ...)"},
        {"name": "analyze geometry, one permutation, ViT over 8 photos", "a": "bench analyze --k1", "b": "one forward",
         "a_value": 36.0, "b_value": 10.0, "ratio": 3.6},
        {"name": "analyze geometry wall time, ViT over 8 photos", "a_value": 170.0, "b_value": 180.0, "ratio": 0.944,
         "meets_target": True},
        {"name": "analyze geometry wall time, one permutation, ViT over 8 photos", "a_value": 36.0, "b_value": 180.0,
         "ratio": 0.2}])
    assert "took 170 s against 10.0 s for one forward (17.00×); budget 180 s: met (0.94× the budget)" in both
    assert "With one permutation, `bench analyze --k1` took 36 s (3.60× the forward pass; 0.20× the budget)" in both
    assert perf_findings.analyze_section(None).startswith("Not measured")


def test_perf_findings_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{}", encoding="utf-8")
    for perf in (tmp_path / "missing.json", tmp_path / "bad.json"):
        with pytest.raises(SystemExit) as e:
            perf_findings.main(["--perf", str(perf), "--attention", str(REPO / "docs" / "perf_attention.json")])
        assert e.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert "expected the JSON of bench perf all" in err[-1]




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

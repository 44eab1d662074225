"""The probe study scripts' rules on constructed runs: benchmarks/probe_findings.py ("learned" = at least 4
of 5 seeds, verdicts on the seeds that learned, steps to learn from metrics.csv) and
benchmarks/probe_recipe.py (per-recipe cells, steps to learn, the computed comparison)."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from benchmarks import probe_cells, probe_claims, probe_findings, probe_recipe, ssdc_findings
from benchmarks.probe_report_parts import learned_matrix, not_learned_table
from benchmarks.verdicts import Family, basis, two_pass

REPO = Path(__file__).resolve().parents[2]

TEMPLATE = REPO / "results" / "probe-sweep-200-steps" / "probe-decay" / "rope-axial" / "vit-probe" / "seed0"


def _write_run(root: Path, seed: int, val: float, test: float, curve: list[tuple[int, float]] | None,
               pe: str = "rope-axial", probe: str = "probe-decay", stopped: int | None = None) -> None:
    """A complete run made from a committed one, with the given accuracies and validation curve."""
    run = root / probe / pe / "vit-probe" / f"seed{seed}"
    run.mkdir(parents=True)
    res = json.loads((TEMPLATE / "results.json").read_text())
    res.update(seed=seed, pe=pe, variant=pe, pe_label=pe, dataset=probe,
               run_dir=f"{probe}/{pe}/vit-probe/seed{seed}")
    res["metrics"] = {**res["metrics"], "val/acc1": val, "test/acc1": test}
    res["config"] = {**res["config"], "seed": seed, "pe": pe, "dataset": probe,
                     "val_every": 25 if curve is not None else None}
    if stopped is not None:
        res["stopped_at_target"] = {"target": 0.98, "metric": "val/acc1", "reached": val > 0.98, "global_step": stopped}
    (run / "results.json").write_text(json.dumps(res))
    shutil.copy(TEMPLATE / "config.yaml", run / "config.yaml")
    with (run / "metrics.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["epoch", "step", "train/loss_step", "val/acc1"])
        for step, v in curve or [(99, val)]:
            w.writerow([0, step - 1, 0.5, ""])
            w.writerow([0, step - 1, "", v])


def test_learned_needs_four_of_five_seeds_and_verdicts_read_only_those(tmp_path):
    vals = [0.99, 0.98, 0.97, 0.99, 0.50]  # seed 4 stayed at chance: 4 of 5 learned
    curves = [[(25, 0.5), (50, v)] for v in vals[:4]] + [[(25, 0.5), (50, 0.5)]]
    for s, (v, c) in enumerate(zip(vals, curves)):
        _write_run(tmp_path, s, v, v - 0.01, c, stopped=50)
    cell = probe_cells.load(str(tmp_path))["probe-decay"]["rope-axial"]
    assert cell.learned_seeds == 4 and cell.learned
    only = cell.learned_only()
    assert only.n == 4 and sorted(only.test) == [0, 1, 2, 3]
    assert cell.steps_to_learn == {0: 50, 1: 50, 2: 50, 3: 50, 4: None} and cell.median_steps_to_learn() == "50"
    fam = Family("test")
    assert "keeps it" in probe_claims._keeps(cell, fam) and "4 seeds that learned (post-selection)" in \
        probe_claims._keeps(cell, fam)
    three = cell.replaced(val={**cell.val, 3: 0.5}, ends={**cell.ends, 3: "budget"})  # 3 of 5: not learned
    assert not three.learned and "learned in 3 of 5 seeds (the other 2 trained all 50 steps; val ≥" in three.not_learned()
    gave_up = three.replaced(ends={**three.ends, 3: "gave up"}, steps={**three.steps, 3: 25})
    assert gave_up.budget() == "the other 2: 1 gave up at step 25, 1 trained all 50 steps"
    assert cell.replaced(val={s: 0.5 for s in range(5)}, ends={s: "budget" for s in range(5)}).budget() == \
        "all 5 trained all 50 steps"


def test_report_counts_probes_learned_how_runs_ended_and_the_sweep_time(tmp_path):
    res = tmp_path / "embedded"
    for s in range(5):  # rope-axial: 5 of 5 learned (reached the target); sincos: 1 of 5 (budget)
        _write_run(res, s, 0.99, 0.97, [(25, 0.5), (50, 0.99)], stopped=50)
        _write_run(res, s, 0.99 if s == 0 else 0.5, 0.6, [(25, 0.5), (400, 0.99 if s == 0 else 0.5)], pe="sincos",
                   stopped=400)
    sha = json.loads((TEMPLATE / "results.json").read_text())["git_sha"][:7]  # the runs' commit
    (tmp_path / "probe_sweep_time.txt").write_text(f"start 2026-12-02T10:00:00Z commit {sha}\nend 2026-12-02T10:30:00Z\n"
                                                   f"start 2026-12-02T11:00:00Z commit {sha}\nend 2026-12-02T11:15:30Z\n"
                                                   "start 2026-12-02T12:00:00Z commit fffffff\nend 2026-12-02T13:00:00Z\n")
    data = probe_cells.load(str(res))
    assert probe_findings.probes_learned(data) == {"rope-axial": (1, 1), "sincos": (0, 1)}
    report, png = tmp_path / "REPORT.md", tmp_path / "learning.png"
    assert probe_findings.main(["--results", str(res), "--report", str(report), "--png", str(png)]) == 0
    text = report.read_text(encoding="utf-8")
    assert "| rope-axial | **5/5** (50) | 1 of 1 |" in text and "| sincos | 1/5 (400) | 0 of 1 |" in text
    assert "Runs: 10; reached the target 6, gave up on the plateau 0, trained the whole budget 4." in text
    # the wall time of the runs' commit only (the fffffff pair is another sweep's)
    assert f"- commit `{sha}`: `probe-decay`; seeds 0–4; 10 complete runs (0 incomplete)" in text
    assert "**45.5 min** of wall time" in text and "fffffff" not in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_runs_validated_once_per_epoch_have_no_steps_to_learn(tmp_path):
    for s in range(3):
        _write_run(tmp_path, s, 0.9, 0.9, None)
    cell = probe_cells.load(str(tmp_path))["probe-decay"]["rope-axial"]
    assert cell.steps_to_learn == {} and cell.median_steps_to_learn() == "n/m"
    assert "steps to learn" not in "\n".join(probe_findings.table("probe-decay", {"rope-axial": cell}))


def test_recipe_study_counts_learned_seeds_and_steps_and_compares_recipes(tmp_path, capsys):
    slow, fast = tmp_path / "study" / "slow", tmp_path / "study" / "fast"
    for s in range(3):
        _write_run(slow, s, 0.99 if s else 0.5, 0.9, [(25, 0.5), (50, 0.5), (75, 0.99 if s else 0.5)], stopped=75)
        _write_run(fast, s, 0.99, 0.9, [(25, 0.99)], stopped=25)
    data = probe_recipe.load(tmp_path / "study")
    runs = data["slow"][("probe-decay", "rope-axial")]
    assert [r.steps_to(0.75) for r in runs] == ["—", "75", "75"] and [r.steps for r in runs] == [75] * 3
    table = probe_recipe.cell_table(data)
    assert "| `probe-decay` | rope-axial | `slow` | 2/3 | —, 75, 75 | 75 | 82.7 | 82.7 |" in table
    comp = probe_recipe.comparison(data)
    assert "| `fast` | 3/3 | 75 |" in comp and "| `slow` | 2/3 | 225 |" in comp
    assert probe_recipe.main(["--results", str(tmp_path / "study")]) == 0
    assert "# Probe recipe study" in capsys.readouterr().out
    assert probe_recipe.main(["--results", str(tmp_path / "missing")]) == 2


def test_prediction_groups_follow_the_pe_declarations_and_cover_every_pe():
    """The findings' groups say what the PEs declare (relative, rotation-invariant, distance decay), and every
    registered PE is in a translation / extrapolation group: a new PE cannot silently drop out of the verdicts."""
    from pebench.encodings import get_pe_class, list_pes

    assert all(get_pe_class(pe).relative for pe in probe_cells.RELATIVE)
    assert not any(get_pe_class(pe).relative for pe in probe_cells.ABSOLUTE)
    assert all(get_pe_class(pe).rotation_invariant for pe in probe_cells.DISTANCE_ONLY)
    assert all(get_pe_class(pe).distance_decay for pe in probe_cells.DECAY)
    assert not any(get_pe_class(pe).distance_decay for pe in probe_cells.NO_DECAY)
    assert not any(get_pe_class(pe).rotation_invariant for pe in probe_cells.DIRECTIONAL)
    groups = (probe_cells.RELATIVE, probe_cells.ABSOLUTE, probe_cells.MEASURED_ONLY,
              probe_cells.DISTANCE_ONLY)
    for pe in list_pes():
        if pe != "none":
            assert sum(pe in g for g in groups) == 1, pe
            assert (pe in probe_cells.DECAY) != (pe in probe_cells.NO_DECAY) or pe in ("ape", "sincos"), pe


def test_ssdc_findings_use_the_same_four_of_five_rule_and_read_the_seeds_that_learned():
    """benchmarks/ssdc_findings.py decides "learned the position bit" per seed, 4 of 5, like probe_findings."""
    vs = ssdc_findings.load(str(REPO / "results" / "probe-sweep-200-steps"))
    v = vs["rope-axial"]  # 4 of its 5 seeds learned the position bit in that sweep
    assert v.learned_seeds == 4 and v.learned
    assert len(v.learned_only().runs) == 4 and all(x >= 0.75 for x in v.learned_only().metric("val/acc1").values())
    assert not vs["rope-axial+rpt"].learned  # RPT reads content only: 50 %


def _cells(tmp_path, spec: dict[str, list[tuple[float, float]]], probe: str = "probe-decay"):
    """Cells of ``probe`` made from per-PE lists of (val, test) per seed."""
    for pe, vt in spec.items():
        for s, (v, t) in enumerate(vt):
            _write_run(tmp_path, s, v, t, None, pe=pe, probe=probe)
    return probe_cells.load(str(tmp_path))[probe]


def test_verdicts_need_the_holm_adjusted_p_and_say_their_basis(tmp_path):
    """rope-axial beats sincos at raw p < 0.05 on 3 seeds; alone that is held, but in a family of 20 such
    tests Holm's adjustment (x20) leaves it inconclusive. Each verdict names its checkpoint and seeds."""
    cells = _cells(tmp_path, {"rope-axial": [(0.99, 0.90), (0.99, 0.95), (0.99, 0.93)],
                              "sincos": [(0.99, 0.80), (0.99, 0.83), (0.99, 0.84)]})
    diffs = [0.10, 0.12, 0.09]
    from pebench.leaderboard.stats import paired_t_p
    raw = paired_t_p(diffs)
    assert raw < 0.05 < 20 * raw  # significant alone, not after 20 tests

    def one(fam):
        return probe_claims._beats(cells, "rope-axial", "sincos", fam)

    def twenty(fam):
        return [probe_claims._beats(cells, "rope-axial", "sincos", fam) for _ in range(20)]

    alone, fam1 = two_pass("one", one)
    many, fam20 = two_pass("twenty", twenty)
    assert alone.startswith("**held**") and fam1.m == 1
    assert many[0].startswith("**inconclusive**") and fam20.m == 20 and fam20.adjusted[0] == pytest.approx(20 * raw)
    assert "3 seeds where both learned (post-selection); provisional: < 10 seeds" in alone
    assert "last-step weights" in alone  # the template run evaluated its last step
    assert f"p_Holm = {min(1.0, 20 * raw):.2g}" in many[0]


def test_keeps_is_an_equivalence_test_inside_the_stated_margin(tmp_path):
    """test − val of −0.5 points with little spread: TOST inside ±KEEP_MARGIN says "keeps it"; −20 points says
    "loses it"; −4 points with a wide spread is inside neither."""
    keep = _cells(tmp_path / "a", {"pape": [(0.99, 0.985), (0.98, 0.976), (0.97, 0.964), (0.99, 0.984)]})["pape"]
    lose = _cells(tmp_path / "b", {"pape": [(0.99, 0.79), (0.98, 0.77), (0.97, 0.78), (0.99, 0.80)]})["pape"]
    wide = _cells(tmp_path / "c", {"pape": [(0.99, 0.99), (0.98, 0.86), (0.97, 0.97), (0.99, 0.97)]})["pape"]
    assert probe_claims._keeps(keep, Family("k")).startswith("keeps it")
    assert "TOST inside ±5.0" in probe_claims._keeps(keep, Family("k"))
    assert probe_claims._keeps(lose, Family("k")).startswith("loses it")
    assert probe_claims._keeps(wide, Family("k")).startswith("inconclusive")


def test_a_cell_the_pe_cannot_represent_is_not_a_failure_to_learn(tmp_path):
    """alibi on probe-translation: rotation-invariant, so the N / S mirror twins get the same logits
    (pebench.analysis.probe_capacity); the report says "cannot represent", leaves it out of the learned counts
    and the not-learned list, and its verdicts are not testable. rope-axial can represent it."""
    cells = _cells(tmp_path, {"alibi": [(0.25, 0.25)] * 3, "rope-axial": [(0.99, 0.9)] * 3}, "probe-translation")
    assert cells["alibi"].cannot == "cannot represent (rotation-invariant)" and cells["rope-axial"].cannot is None
    data = {"probe-translation": cells}
    assert probe_findings.probes_learned(data) == {"alibi": (0, 0), "rope-axial": (1, 1)}
    matrix = "\n".join(learned_matrix(data, ["probe-translation"], probe_findings.probes_learned(data)))
    assert "| alibi | cannot represent (rotation-invariant) (0/3) | 0 of 0 |" in matrix
    missing = "\n".join(not_learned_table(data))
    assert "- `probe-translation`: every PE that can represent its label learned it" in missing
    assert "- `probe-translation`, alibi: cannot represent (rotation-invariant)" in missing
    assert probe_claims._keeps(cells["alibi"], Family("c")).startswith("not testable (cannot represent")


def test_context_and_anchoring_test_splits_are_labelled_in_distribution(tmp_path):
    cells = _cells(tmp_path, {"rope-axial": [(0.99, 0.9)] * 2}, "probe-context")
    assert "test (ID: fresh scenes) %" in "\n".join(probe_findings.table("probe-context", cells))
    cells = _cells(tmp_path / "t", {"rope-axial": [(0.99, 0.9)] * 2}, "probe-decay")
    assert "test (OOD) %" in "\n".join(probe_findings.table("probe-decay", cells))


def test_two_pass_refuses_a_second_pass_that_computes_other_tests():
    calls = iter([[0.01, 0.2], [0.01, 0.3]])

    def compute(fam):
        return [fam.p(p) for p in next(calls)]

    with pytest.raises(RuntimeError, match="not the first pass's"):
        two_pass("f", compute)
    assert basis(12, "best-val checkpoint", False) == "best-val checkpoint; 12 seeds"
    assert basis(5, "best-val checkpoint", True) == \
        "best-val checkpoint; 5 seeds that learned (post-selection); provisional: < 10 seeds"


def test_ssdc_rpt_claim_is_not_testable_when_the_rpt_model_reads_content_only():
    """RPT variants at the content-only 50 % learned no position: "RPT removes anchoring" is not testable on them
    (it would be true of any model that never used position), and the fragility correlation reads only the
    variants that learned the position bit."""
    vs = ssdc_findings.load(str(REPO / "results" / "probe-sweep-200-steps"))
    assert "content-only 50 %" in ssdc_findings._rpt_untestable(vs["rope-axial+rpt"], vs["rope-axial"])
    learned = ssdc_findings.Variant("rope-axial+rpt", list(vs["rope-axial"].runs.values()))
    assert ssdc_findings._rpt_untestable(learned, vs["rope-axial"]) is None
    alpha, rhos = ssdc_findings.alpha_rows(vs)
    text, fam = two_pass("t", lambda f: ssdc_findings.claims(vs, rhos, f))
    assert "all variants" not in "\n".join(text) and fam.m == len(fam.adjusted) > 0


def test_set_probe_verdicts_keep_lose_and_the_positive_control(tmp_path):
    """The set probes' claims (issue #44 item 1): a relative PE keeps its accuracy on the shifted twins, an absolute
    one loses it, and probe-set-anchoring is beaten by an absolute PE while every relative PE cannot represent it."""
    for s in range(10):
        _write_run(tmp_path, s, 0.99, 0.99 - 0.001 * s, [(25, 0.99)], pe="rope-axial", probe="probe-set-translation",
                   stopped=25)
        _write_run(tmp_path, s, 0.95, 0.45 + 0.01 * s, [(25, 0.95)], pe="ape", probe="probe-set-translation",
                   stopped=25)
        _write_run(tmp_path, s, 0.9, 0.85 + 0.004 * s, [(25, 0.9)], pe="ape", probe="probe-set-anchoring", stopped=25)
        _write_run(tmp_path, s, 0.5, 0.5, [(25, 0.5)], pe="rope-axial", probe="probe-set-anchoring", stopped=400)
    data = probe_cells.load(str(tmp_path))
    assert data["probe-set-anchoring"]["rope-axial"].cannot.startswith("cannot represent")
    assert data["probe-set-translation"]["rope-axial"].cannot is None
    (tally, lines), _ = two_pass("t", lambda fam: probe_findings._claims_pass(data, fam))
    text = "\n".join(lines)
    assert "  - rope-axial: **held** — keeps it (test − val -0.5" in text
    assert "  - ape: **held** — loses it (test − val -45.5" in text
    assert "  - ape: **held** (test 86.8 %" in text and "learned in 10 of 10 seeds" in text
    assert "their test accuracy, all seeds, for the record): rope-axial 50.0 %." in text
    assert tally.claims["Anchoring on a set (positive control): absolute PEs beat the 50 % content ceiling"][
        "held"] == ["ape"]
    assert tally.claims["Translation on a set: absolute PEs lose it"]["held"] == ["ape"]

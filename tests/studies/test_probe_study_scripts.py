"""The probe scripts that are not yet study files, on constructed runs: benchmarks/probe_recipe.py (per-recipe cells,
steps to learn, the computed comparison) and benchmarks/ssdc_findings.py ("learned" = at least 4 of 5 seeds, verdicts
on the seeds that learned). The probe sweep itself is the study `probes` (tests/studies/test_probe_study.py)."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from benchmarks import probe_recipe, ssdc_findings
from benchmarks.verdicts import basis, two_pass

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


def test_ssdc_findings_use_the_same_four_of_five_rule_and_read_the_seeds_that_learned():
    """benchmarks/ssdc_findings.py decides "learned the position bit" per seed, 4 of 5, like probe_findings."""
    vs = ssdc_findings.load(str(REPO / "results" / "probe-sweep-200-steps"))
    v = vs["rope-axial"]  # 4 of its 5 seeds learned the position bit in that sweep
    assert v.learned_seeds == 4 and v.learned
    assert len(v.learned_only().runs) == 4 and all(x >= 0.75 for x in v.learned_only().metric("val/acc1").values())
    assert not vs["rope-axial+rpt"].learned  # RPT reads content only: 50 %


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



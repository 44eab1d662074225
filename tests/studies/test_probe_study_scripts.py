"""The probe scripts that are not yet study files, on constructed runs: benchmarks/probe_recipe.py (per-recipe cells,
steps to learn, the computed comparison) and the verdict family of benchmarks/verdicts.py. The probe sweep and the
SSDC claims on probe-anchoring are the studies `probes` and `anchoring` (tests/studies/test_probe_study.py)."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from benchmarks import probe_recipe
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


def test_two_pass_refuses_a_second_pass_that_computes_other_tests():
    calls = iter([[0.01, 0.2], [0.01, 0.3]])

    def compute(fam):
        return [fam.p(p) for p in next(calls)]

    with pytest.raises(RuntimeError, match="not the first pass's"):
        two_pass("f", compute)
    assert basis(12, "best-val checkpoint", False) == "best-val checkpoint; 12 seeds"
    assert basis(5, "best-val checkpoint", True) == \
        "best-val checkpoint; 5 seeds that learned (post-selection); provisional: < 10 seeds"



"""Training to a validation target: ``--lr-schedule constant``, ``--val-every N``, ``--stop-at X``
(the probe recipe, bench study run probes)."""
from __future__ import annotations

import csv
import json
import math

import pytest
import torch

from pebench.cli import main
from pebench.tasks.classification.module import warmup_cosine

TINY = ["run", "--dataset", "shapes", "--pe", "ape", "--epochs", "3", "--batch-size", "16", "--lr", "1e-3",
        "--data-option", "train_size=64", "--data-option", "val_size=32", "--analyses", "none",
        "--no-progress-bar", "--accelerator", "cpu", "--val-every", "2", "--lr-schedule", "constant"]


def _factors(schedule: str, total: int = 20, warmup_epochs: float = 1.0, epochs: int = 4) -> list[float]:
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = warmup_cosine(opt, total, warmup_epochs, epochs, schedule)["lr_scheduler"]["scheduler"]
    return [sched.lr_lambdas[0](s) for s in range(total)]


def test_constant_schedule_holds_the_peak_after_the_same_warm_up():
    cos, const = _factors("cosine"), _factors("constant")
    assert cos[:5] == const[:5] == [(s + 1) / 5 for s in range(5)]  # 1 of 4 epochs of 20 steps
    assert const[5:] == [1.0] * 15
    assert cos[5:] == [0.5 * (1 + math.cos(math.pi * (s - 5) / 15)) for s in range(5, 20)]
    with pytest.raises(ValueError, match="cosine, constant"):
        _factors("step")


def _run(tmp_path, stop_at: str, *extra: str) -> tuple[dict, list[dict]]:
    out = tmp_path / "runs"
    assert main([*TINY, "--stop-at", stop_at, *extra, "--out", str(out)]) == 0
    run_dir = out / "shapes" / "ape" / "vit-nano" / "seed0"
    rows = list(csv.DictReader((run_dir / "metrics.csv").open()))
    return json.loads((run_dir / "results.json").read_text()), rows


def test_stop_at_a_reached_target_ends_training_at_that_validation(tmp_path):
    res, rows = _run(tmp_path, "-1")  # any accuracy is above -1: the first validation (step 2) stops it
    assert res["status"] == "complete"
    assert res["stopped_at_target"] == {"target": -1.0, "give_up": None, "metric": "val/acc1", "reached": True,
                                        "gave_up": False, "global_step": 2}
    val_steps = [int(r["step"]) for r in rows if r.get("val/acc1")]
    assert val_steps[0] == 1  # validated after 2 optimizer steps (0-based step 1), not at the epoch's end


def test_stop_at_an_unreached_target_trains_the_whole_budget(tmp_path):
    res, rows = _run(tmp_path, "2")  # accuracy never exceeds 2: all 3 epochs of 4 steps
    assert res["status"] == "complete"
    assert res["stopped_at_target"]["reached"] is False and res["stopped_at_target"]["global_step"] == 12
    val_steps = sorted({int(r["step"]) for r in rows if r.get("val/acc1")})
    assert val_steps[:6] == [1, 3, 5, 7, 9, 11]  # every 2 steps, across epoch boundaries


def test_give_up_ends_a_run_still_below_its_line_at_the_first_validation_from_that_step(tmp_path):
    res, rows = _run(tmp_path, "2", "--give-up", "5:2")  # never above 2: gives up at the validation at step 6
    assert res["status"] == "complete"
    stop = res["stopped_at_target"]
    assert stop["gave_up"] is True and stop["reached"] is False and stop["global_step"] == 6 and stop["give_up"] == "5:2"


def test_eval_checkpoint_best_evaluates_the_best_validations_weights(tmp_path):
    out = tmp_path / "runs"
    assert main([*TINY, "--eval-checkpoint", "best", "--lr", "3e-3", "--out", str(out)]) == 0
    run_dir = out / "shapes" / "ape" / "vit-nano" / "seed0"
    res = json.loads((run_dir / "results.json").read_text())
    rows = list(csv.DictReader((run_dir / "metrics.csv").open()))
    during = [(float(r["val/acc1"]), int(r["step"]) + 1) for r in rows if r.get("val/acc1")][:-1]  # the last: final
    best = max(v for v, _ in during)
    ev = res["evaluated_checkpoint"]
    assert ev["which"] == "best" and ev["metric"] == "val/acc1" and ev["value"] == pytest.approx(best)
    assert ev["global_step"] == next(s for v, s in during if v == best)  # the first validation with the best value
    assert res["metrics"]["val/acc1"] == pytest.approx(best, abs=1e-6)  # re-validated on the loaded weights
    assert (run_dir / "best.ckpt").is_file()

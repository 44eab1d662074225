"""The opt-in ``extrapolation-rules`` analysis: one trained model evaluated under each extrapolation rule
of its PE (``--analysis-option extrapolation_rules=...``), the PE's own rule restored, rules validated."""
from __future__ import annotations

import pytest
import torch

import pebench.datamodules.synthetic.shapes  # noqa: F401  (registers the synthetic sets)
from pebench.analysis.evaluators import run_analyses
from pebench.analysis.extrapolation import evaluate_extrapolation, evaluate_extrapolation_rules, rules_to_compare
from pebench.core.errors import ConfigError
from pebench.datamodules import get_datamodule_class
from pebench.tasks.classification import ClassificationTask


@pytest.fixture(scope="module")
def shapes16():
    return get_datamodule_class("shapes")(batch_size=8, val_size=8, train_size=8, resolution=16)


def _task(pe: str) -> ClassificationTask:
    torch.manual_seed(0)
    return ClassificationTask("image", 8, pe=pe, train_grid=(4, 4)).eval()


def test_rows_per_rule_native_equals_the_plain_analysis_and_rule_is_restored(shapes16):
    task = _task("rope-axial")
    out = evaluate_extrapolation_rules(task, shapes16, ["16", "32"], ["native", "pi", "yarn"], max_samples=8)
    assert list(out) == ["native", "pi", "yarn"]
    assert out["native"] == evaluate_extrapolation(task, shapes16, ["16", "32"], max_samples=8)
    for rows in out.values():
        assert [r["resolution"] for r in rows] == ["16", "32"] and all(r["n_samples"] == 8 for r in rows)
        assert rows[0] == out["native"][0]  # the training size: every rule is the native one there
    assert task.backbone.pe.extrapolation == "native"


def test_a_rule_changes_the_model_off_the_training_grid(shapes16):
    """Logits at 32 px (8 x 8 tokens, trained on 4 x 4) differ between native and pi; equal at 16 px."""
    from pebench.encodings.extrapolation import set_extrapolation

    task = _task("rope-axial")
    x32 = torch.randn(2, 3, 32, 32)
    x16 = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        nat32, nat16 = task(x32), task(x16)
        with set_extrapolation(task.backbone.pe, "pi"):
            pi32, pi16 = task(x32), task(x16)
    assert (pi32 - nat32).abs().max() > 1e-6 and torch.equal(pi16, nat16)  # untrained: small but not 0


def test_registered_opt_in_and_validated(shapes16):
    task = _task("ape")
    res = run_analyses(task, shapes16, "extrapolation-rules", None, {
        "seed": 0, "extrapolation_resolutions": ["16", "24"],
        "analysis_options": {"extrapolation_samples": 8, "extrapolation_rules": "native,normalized"}})
    assert list(res["extrapolation_rules"]) == ["native", "normalized"]
    assert rules_to_compare("all", ("native", "pi")) == ["native", "pi"]
    with pytest.raises(ConfigError, match="ntk"):
        rules_to_compare("native,ntk", ("native", "pi", "normalized"))
    none = run_analyses(_task("alibi"), shapes16, "extrapolation-rules", None, {"seed": 0})
    assert none["extrapolation_rules"] is None  # alibi has no extrapolation option: not run

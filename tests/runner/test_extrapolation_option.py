"""``--pe-option extrapolation=<rule>`` end to end: a fast-dev-run records the rule in results.json (config and
the variant label) and the opt-in ``extrapolation-rules`` analysis compares the named rules on the checkpoint;
a rule a PE does not have is a one-line user error (exit 2)."""
from __future__ import annotations

import json

import pytest

from pebench.cli import main


@pytest.mark.slow
def test_rule_recorded_and_rules_compared(tmp_path):
    out = tmp_path / "runs"
    rc = main(["run", "--dataset", "shapes", "--pe", "rope-axial", "--pe-option", "extrapolation=yarn",
               "--fast-dev-run", "--batch-size", "4", "--no-progress-bar", "--analyses", "extrapolation,extrapolation-rules",
               "--analysis-option", "extrapolation_rules=native,yarn", "--analysis-option", "extrapolation_samples=8",
               "--extrapolation-resolutions", "32,64", "--out", str(out)])
    assert rc == 0
    res = json.loads((out / "shapes" / "rope-axial" / "vit-nano" / "seed0" / "results.json").read_text())
    assert res["config"]["pe_options"] == {"extrapolation": "yarn"}
    assert res["pe_label"] == "rope-axial[extrapolation=yarn]"
    rules = res["extrapolation_rules"]
    assert list(rules) == ["native", "yarn"]
    assert [r["resolution"] for r in rules["yarn"]] == ["32", "64"]
    assert rules["yarn"] == res["extrapolation"]  # the run's own rule is yarn


def test_unknown_rule_is_a_user_error(tmp_path, capsys):
    rc = main(["run", "--dataset", "shapes", "--pe", "alibi", "--pe-option", "extrapolation=pi", "--fast-dev-run",
               "--out", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: error:") and "extrapolation" in err and len(err.strip().splitlines()) == 1

"""benchmarks/dino_findings.py: the mid-depth dip, the verdict rules, and (when the study is committed)
that results/dino/REPORT.md is exactly what the script makes of the committed runs."""
from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import dino_findings

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "results" / "dino"


@pytest.fixture()
def findings():
    return dino_findings


def _run(knn0: float, knn1: float, eed0: list[float], eed1: list[float]) -> dict:
    ckpt = {"probe_size": 256, "global_step": 128, "eed_tap": "norm1"}
    return {"config": {"model": "vit-nano", "epochs": 4, "batch_size": 64},
            "metrics": {"test/knn_top1_init": knn0, "test/knn_top1": knn1,
                        "test/linear_top1_init": 0.5, "test/linear_top1": 0.6},
            "eed_checkpoints": [{**ckpt, "epoch": 0, "eed_percent": eed0}, {**ckpt, "epoch": 4, "eed_percent": eed1}]}


def test_dip_is_the_smaller_end_minus_the_lowest_middle_layer(findings):
    assert findings.dip([60.0, 23.0, 30.0, 92.0]) == pytest.approx(37.0)   # U-shape: positive
    assert findings.dip([90.0, 91.0, 92.0, 93.0]) == pytest.approx(-1.0)   # monotone: about 0 / negative
    with pytest.raises(ValueError, match="at least 3 layers"):
        findings.dip([1.0, 2.0])


def test_verdicts_follow_the_paired_intervals(findings):
    u, flat = [60.0, 25.0, 28.0, 90.0], [90.0, 91.0, 90.5, 92.0]
    data = {
        # objects/pape learned (k-NN +10, +12, +11) with a U-shape of 35 +- 1 points
        ("objects", "pape"): {s: _run(0.10, 0.21 + 0.01 * s, flat, [60.0, 25.0 - s, 28.0, 90.0]) for s in range(3)},
        ("objects", "none"): {s: _run(0.10, 0.10 + 0.01 * (s - 1), flat, u) for s in range(3)},   # no gain
        ("textures", "pape"): {s: _run(0.45, 0.55 + 0.01 * s, flat, [90.0, 91.0 + s, 90.5, 92.0]) for s in range(3)},
        ("textures", "none"): {s: _run(0.45, 0.40 - 0.01 * s, flat, flat) for s in range(3)},   # k-NN fell
    }
    text = findings.summarise(data)
    assert "objects / pape: **yes**" in text
    assert "objects / none: **not shown**" in text
    assert "textures / none: **no: k-NN fell**" in text
    assert "  - pape: **reproduced** (dip +36.0" in text              # objects dip above 0
    assert "  - none: **not testable** (DINO did not learn `objects`" in text
    # objects dip minus textures dip, paired by seed: 36 - (-(1 + s)) ... all well above 0
    assert text.count("**reproduced**") == 2
    assert "objects / pape: +" in text                               # PE vs none is measured, with no verdict
    assert "Every run was made at commit `unknown`." in text  # the synthetic runs record no commit
    data[("textures", "none")][0]["git_sha"] = "0123456789abcdef"
    assert "made at 2 different commits: `0123456`, `unknown`." in findings.summarise(data)
    # the linear probe's gain is reported for every cell, measured (0.5 -> 0.6 in every run: +10 points)
    linear = text.split("**Linear-probe gain**", 1)[1].split("- **Object-centric", 1)[0]
    assert linear.count("+10.0 [+10.0, +10.0]") == 4


def test_no_runs_says_so(findings):
    assert "No complete DINO runs" in findings.summarise({})


@pytest.mark.skipif(not RESULTS.exists(), reason="no committed DINO study")
def test_dino_report_regenerates_from_the_committed_results(findings, tmp_path):
    report = tmp_path / "REPORT.md"
    assert findings.main(["--results", str(RESULTS), "--report", str(report)]) == 0
    assert report.read_text(encoding="utf-8") == (RESULTS / "REPORT.md").read_text(encoding="utf-8")


@pytest.mark.skipif(not RESULTS.exists(), reason="no committed DINO study")
@pytest.mark.parametrize("dataset", ["objects", "textures"])
def test_presets_are_cells_of_the_committed_study(dataset):
    """`bench run --preset <set>-dino --pe X` reproduces the study's runs: same fingerprint."""
    import json

    from pebench.runner.config import config_to_dict, load_preset, merge, resolve
    from pebench.runner.integrity import fingerprint

    found = sorted((RESULTS / dataset).glob("*/*/seed*/results.json"))
    assert found
    for path in found:
        res = json.loads(path.read_text())
        cfg = config_to_dict(resolve(merge(load_preset(f"{dataset}-dino"), {"pe": res["pe"]})))
        assert fingerprint(cfg) == res["fingerprint"], path

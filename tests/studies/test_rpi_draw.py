"""``benchmarks/rpi_draw.py``: its spread ratio and Welch interval against scipy, its rule, and its committed report
regenerating byte for byte from the committed JSON."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from benchmarks import rpi_draw

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "results" / "rpi-draw"


def _res(shared: list[np.ndarray], per_sample: list[np.ndarray]) -> dict:
    """A study.json with K passes per draw for two layers of each model (``shared[l]``, ``per_sample[l]``: (K,))."""
    def entry(vals):
        return {"mean": [float(v.mean()) for v in vals], "sd": [float(v.std(ddof=1)) for v in vals], "seconds": 1.0}
    models = {m: {"shared": entry(shared), "per-sample": entry(per_sample)} for m in rpi_draw.MODELS}
    return {"commit": "abc", "timm_model": "vit_small_patch14_dinov2", "wall_time_s": 5.0, "models": models,
            "protocol": {"images": 4, "set": "crops", "resolution": 56, "permutations": len(shared[0]), "seed": 0,
                         "tap": "attn_in", "distance": "l1", "batch_size": 2, "threads": 2, "torch": "x"}}


def test_spread_ratio_welch_interval_and_rule_against_scipy():
    rng = np.random.default_rng(0)
    shared = [rng.normal(0.3, 0.02, 8), rng.normal(0.5, 0.03, 8)]
    per = [rng.normal(0.35, 0.004, 8), rng.normal(0.52, 0.02, 8)]
    s = rpi_draw.summary(_res(shared, per))["pretrained"]
    for layer in range(2):
        assert s["ratio"][layer] == pytest.approx(per[layer].std(ddof=1) / (shared[layer].std(ddof=1) / math.sqrt(8)))
        ci = stats.ttest_ind(per[layer], shared[layer], equal_var=False).confidence_interval(0.95)
        d = s["diff"][layer]
        assert d[0] == pytest.approx(per[layer].mean() - shared[layer].mean())
        assert (d[1], d[2]) == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert s["median_ratio"] == pytest.approx(float(np.median(s["ratio"])))
    assert s["adopt"] == (s["median_ratio"] <= 1.0)
    text = rpi_draw.render(_res(shared, per))
    assert "| pretrained | 0 |" in text and "**Verdict**" in text


def test_one_pass_is_refused(capsys):
    with pytest.raises(SystemExit) as e:
        rpi_draw.main(["--out", "x", "--permutations", "1"])
    assert e.value.code == 2 and "--permutations must be at least 2" in capsys.readouterr().err


@pytest.mark.skipif(not (COMMITTED / "study.json").exists(), reason="no committed rpi-draw study")
def test_committed_report_regenerates_byte_identical(tmp_path):
    out = tmp_path / "REPORT.md"
    assert rpi_draw.main(["--results", str(COMMITTED / "study.json"), "--report", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == (COMMITTED / "REPORT.md").read_text(encoding="utf-8")
    res = json.loads((COMMITTED / "study.json").read_text(encoding="utf-8"))
    assert "/work/" not in json.dumps(res) and res["protocol"]["permutations"] >= 2

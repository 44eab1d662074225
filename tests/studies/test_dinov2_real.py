"""Study 2 (``benchmarks/dinov2_real.py``): its measurements are the geometry analysis', its bootstrap
resamples images, and its committed report regenerates byte for byte from the committed JSON."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import TensorDataset

from benchmarks import dinov2_real, dinov2_report
from pebench.analysis.geometry import geometry, rpi_permutation
from pebench.analysis.pretrained import TimmTask

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "results" / "dinov2-real"


class _Images:
    """What the geometry analysis reads of a datamodule: ``val_dataset()`` in order and ``batch_size``."""

    def __init__(self, x: torch.Tensor) -> None:
        self.ds, self.batch_size = TensorDataset(x, torch.zeros(len(x), dtype=torch.long)), 4

    def val_dataset(self, resolution=None) -> TensorDataset:
        return self.ds


def test_measurements_are_the_geometry_analysis_and_unit_weights_reproduce_them():
    torch.manual_seed(0)
    task = TimmTask("vit_small_patch14_dinov2", {"depth": 2, "img_size": 56}).eval()
    x = torch.randn(6, 3, 56, 56, generator=torch.Generator().manual_seed(1))
    perms = [rpi_permutation(16, 0, k) for k in range(2)]
    weights = torch.tensor([[1] * 6, [2, 0, 1, 1, 0, 2], [0, 0, 0, 3, 3, 0]])
    got = dinov2_real.measure(task, x, perms, weights, batch=4, eed_boot=True)
    want = geometry(task, _Images(x), probe_size=None, seed=0, rpi_permutations=2, null=False)
    for key in ("ssdc", "ssdc_rpi", "eed_percent"):
        np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-9, err_msg=key)
    # the all-ones resample is the set itself (per-image sums kept in float32 for the bootstrap)
    for key, point in (("ssdc_boot", "ssdc"), ("ssdc_rpi_boot", "ssdc_rpi"), ("eed_boot", "eed_percent")):
        np.testing.assert_allclose(got[key][0].numpy(), got[point], rtol=0, atol=1e-4, err_msg=key)
    # another resample is the same estimator on the drawn images (image 0 twice, 2, 3, 5 twice)
    drawn = x[[0, 0, 2, 3, 5, 5]]
    again = geometry(task, _Images(drawn), probe_size=None, seed=0, rpi_permutations=2, null=False)
    np.testing.assert_allclose(got["ssdc_boot"][1].numpy(), again["ssdc"], rtol=0, atol=1e-4)
    np.testing.assert_allclose(got["eed_boot"][1].numpy(), again["eed_percent"], rtol=0, atol=1e-4)
    assert not np.allclose(got["ssdc_boot"][1].numpy(), got["ssdc"], atol=1e-6)  # resamples do move it


def test_verdict_statistics():
    eed = np.array([60, 60, 60, 60, 25, 25, 25, 25, 90, 90, 90, 90], dtype=float)
    assert float(dinov2_report.dip(eed)) == pytest.approx(35.0)
    assert float(dinov2_report.dip(np.full(12, 50.0))) == 0.0
    # basic bootstrap: replicates reflected about the estimate (2 * 0.2 - boot = 0.3, 0.2, 0.1)
    assert dinov2_report.p_greater(0.2, np.array([0.1, 0.2, 0.3])) == 0.25  # none on the wrong side: 1 / (B + 1)
    assert dinov2_report.p_greater(0.2, np.array([0.1, 0.2, 0.5])) == 0.5  # 2 * 0.2 - 0.5 < 0
    lo, hi = dinov2_report.interval(1.0, np.linspace(0.0, 1.0, 401))  # replicates below the estimate
    assert (lo, hi) == pytest.approx((1.025, 1.975))  # the interval reflects the shift


@pytest.mark.skipif(not (COMMITTED / "study.json").is_file(), reason="the study's results are not committed")
def test_committed_report_regenerates_from_the_committed_json(tmp_path):
    res = json.loads((COMMITTED / "study.json").read_text(encoding="utf-8"))
    # the verdicts are what the numbers say (the JSON keeps 7 significant digits)
    for got, stored in zip(dinov2_report.verdict_tests(res), res["verdicts"], strict=True):
        assert {k: got[k] for k in ("claim", "kind", "statistic", "holds")} == \
            {k: stored[k] for k in ("claim", "kind", "statistic", "holds")}
        numbers = ("value", "p", "p_holm")
        assert [got[k] for k in numbers] + got["interval"] == \
            pytest.approx([stored[k] for k in numbers] + stored["interval"], rel=1e-6, abs=1e-9)
    report = tmp_path / "REPORT.md"
    assert dinov2_real.main(["--results", str(COMMITTED / "study.json"), "--report", str(report)]) == 0
    assert report.read_text(encoding="utf-8") == (COMMITTED / "REPORT.md").read_text(encoding="utf-8")
    text = report.read_text(encoding="utf-8")
    assert "fine-tuned for saliency is not stated" in text and "/work/" not in text and "/tmp/" not in text

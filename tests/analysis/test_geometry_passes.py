"""The geometry analysis' shortcuts (issue #43 item 7) compute the same numbers as the direct definitions.

* EED% and the top-1 eigenvalue share come from one eigendecomposition per layer
  (:func:`~pebench.analysis.eed.eed_and_top1_from_moments`), taken on one intra-op thread;
* SSDC's ``{−D_ij}`` ranks are remembered per grid (every layer and pass ranks the same one);
  references: numpy's ``eigvalsh`` of ``np.cov`` and ``scipy.stats.spearmanr``.
"""
from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from pebench.analysis.eed import eed_and_top1_from_moments, eed_from_moments, top1_share_from_moments
from pebench.analysis.metrics import EEDMetric
from pebench.analysis.ssdc import ssdc_from_similarity

ssdc_module = importlib.import_module("pebench.analysis.ssdc")  # the package re-exports a function of this name


def _moments(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    x = x.double()
    return x.sum(0), x.T @ x, x.shape[0]


def test_eed_and_top1_from_one_eigendecomposition_match_numpy():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(500, 24, generator=g) @ torch.randn(24, 24, generator=g)  # correlated features
    lam = np.clip(np.linalg.eigvalsh(np.cov(x.double().numpy().T, bias=True)), 0, None)
    p = lam / lam.sum()
    want_eed = 100 * math.exp(-(p[p > 0] * np.log(p[p > 0])).sum()) / 24
    e, t = eed_and_top1_from_moments(*_moments(x))
    assert float(e) == pytest.approx(want_eed, rel=1e-10)
    assert float(t) == pytest.approx(lam[-1] / lam.sum(), rel=1e-10)
    # the same numbers as the two single-purpose functions (each its own eigendecomposition)
    assert float(e) == pytest.approx(float(eed_from_moments(*_moments(x))), rel=1e-12)
    assert float(t) == pytest.approx(float(top1_share_from_moments(*_moments(x))), rel=1e-12)
    m = EEDMetric(24)
    m.update(x[:200])
    m.update(x[200:])
    both = m.compute_with_top1_share()
    assert float(both[0]) == pytest.approx(float(e), rel=1e-10) and float(both[1]) == pytest.approx(float(t), rel=1e-10)
    nan_e, nan_t = eed_and_top1_from_moments(*_moments(x[:1]))  # one token: no covariance
    assert math.isnan(float(nan_e)) and math.isnan(float(nan_t))


def test_eigendecomposition_restores_the_thread_count():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        eed_and_top1_from_moments(*_moments(torch.randn(50, 8)))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_remembered_distance_ranks_give_scipy_ssdc_every_time(monkeypatch):
    """The rank vector is remembered once per grid and handed out as a copy: SSDC of several similarity
    matrices in a row (the caller centres the ranks in place) each equals scipy's."""
    monkeypatch.setattr(ssdc_module, "_DISTANCE_RANKS", {})
    axes = torch.meshgrid(torch.arange(6.0), torch.arange(5.0), indexing="ij")
    coords = torch.stack(axes, -1).reshape(-1, 2)  # (30, 2)
    d = np.abs(coords[:, None].numpy() - coords[None].numpy()).sum(-1)
    iu = np.triu_indices(30, 1)
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        z = torch.nn.functional.normalize(torch.randn(30, 16, generator=g) + coords @ torch.randn(2, 16, generator=g), dim=-1)
        S = (z @ z.T).double()
        want = spearmanr(S.numpy()[iu], -d[iu]).statistic
        assert float(ssdc_from_similarity(S, coords)) == pytest.approx(want, abs=1e-12)
    assert len(ssdc_module._DISTANCE_RANKS) == 1  # one grid, ranked once
    float(ssdc_from_similarity(S, coords, "euclidean"))
    assert len(ssdc_module._DISTANCE_RANKS) == 2  # another distance is another entry

"""Holm-Bonferroni adjustment and the TOST equivalence test of paired differences (pebench.leaderboard.stats:
``holm_adjust``, ``equivalence_test``), each against an independent computation: Holm's step-down procedure run at
every candidate level, and scipy's one-sided one-sample t-tests (statsmodels is not a dependency; its
``multipletests(method="holm")`` and ``ttost_paired`` compute the same definitions)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from pebench.leaderboard.stats import equivalence_test, holm_adjust, t_mean_ci


def _holm_rejects(p: list[float], alpha: float) -> list[bool]:
    """Holm's procedure at family-wise level ``alpha``: walk the sorted p-values, reject while
    ``p_(j) <= alpha / (m - j + 1)``, stop at the first that is not."""
    m = len(p)
    out = [False] * m
    for j, i in enumerate(sorted(range(m), key=lambda i: p[i])):
        if p[i] > alpha / (m - j):
            break
        out[i] = True
    return out


def _smallest_rejecting_level(p: list[float], i: int) -> float:
    """The adjusted p-value by its definition: the smallest level at which Holm's procedure rejects
    hypothesis ``i``. The procedure changes only at levels ``(m - j) p_k``, so those (capped at 1) are
    the candidates."""
    m = len(p)
    cands = sorted({min(1.0, (m - j) * q) for q in p for j in range(m)} | {1.0})
    return next(a for a in cands if _holm_rejects(p, a)[i])


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> running max 0.06
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02], abs=1e-15)
    assert holm_adjust([0.5]) == [0.5]
    assert holm_adjust([]) == []
    assert holm_adjust([0.3, 0.4]) == pytest.approx([0.6, 0.6])
    assert holm_adjust([0.9, 0.8, 0.7]) == [1.0, 1.0, 1.0]  # capped at 1


@pytest.mark.parametrize("seed", range(6))
def test_holm_matches_the_step_down_procedure(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 9))
    p = rng.uniform(0, 0.2, m) ** 2
    if seed % 2:
        p[: m // 2] = p[0]  # ties
    p = p.tolist()
    adj = holm_adjust(p)
    for i in range(m):
        assert adj[i] == pytest.approx(_smallest_rejecting_level(p, i), rel=1e-12, abs=1e-15)
    for alpha in (0.01, 0.05, 0.1):
        assert [a <= alpha for a in adj] == _holm_rejects(p, alpha)
    assert all(a >= q for a, q in zip(adj, p))  # never below the raw p-value


@pytest.mark.parametrize("bad", [[0.1, float("nan")], [1.2], [-0.01], [[0.1, 0.2]]])
def test_holm_rejects_bad_p_values(bad):
    with pytest.raises(ValueError):
        holm_adjust(bad)


@pytest.mark.parametrize("seed, margin", itertools.product(range(5), [0.02, 0.05, (-0.01, 0.04)]))
def test_tost_matches_scipy_one_sided_tests(seed, margin):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 9))
    d = rng.normal(rng.uniform(-0.03, 0.03), 0.02, n)
    low, high = (-margin, margin) if np.isscalar(margin) else margin
    r = equivalence_test(d.tolist(), margin, alpha=0.05)
    p_lo = stats.ttest_1samp(d - low, 0.0, alternative="greater").pvalue   # H0: mean <= low
    p_hi = stats.ttest_1samp(d - high, 0.0, alternative="less").pvalue     # H0: mean >= high
    assert r.p == pytest.approx(max(p_lo, p_hi), rel=1e-10, abs=1e-14)
    assert r.estimate == pytest.approx(d.mean(), abs=1e-15) and r.level == pytest.approx(0.90)
    ci = t_mean_ci(d.tolist(), level=0.90)  # the 1 - 2 alpha interval
    assert (r.lo, r.hi) == pytest.approx(ci, abs=1e-12)
    # duality: equivalent at alpha exactly when the 1 - 2 alpha interval lies inside the margin
    assert (low < ci[0] and ci[1] < high) == (r.p < 0.05)


def _equivalent(diffs, margin, alpha=0.05) -> bool:
    r = equivalence_test(diffs, margin, alpha=alpha)
    return r.p is not None and r.p < alpha


def test_tost_on_constructed_data():
    tight = [0.001, -0.002, 0.0015, 0.0, -0.001]
    assert _equivalent(tight, 0.01)
    assert not _equivalent(tight, 0.001)  # the interval is wider than this margin
    shifted = [0.05, 0.06, 0.055, 0.052, 0.058]
    assert not _equivalent(shifted, 0.02)
    assert _equivalent(shifted, (0.04, 0.07))
    one = equivalence_test([0.01], 0.05)
    assert not one.tested and one.reason == "fewer than 2 units"
    with pytest.raises(ValueError, match="finite"):
        equivalence_test([0.01, float("nan")], 0.05)
    const = equivalence_test([0.01, 0.01, 0.01], 0.05)
    assert not const.tested and const.lo == const.hi == 0.01 and "zero variance" in const.reason  # never p = 0
    assert not _equivalent([0.06, 0.06], 0.05)
    for margin in (0.0, -0.1, (0.1, 0.0), float("inf")):
        with pytest.raises(ValueError):
            equivalence_test(tight, margin)
    with pytest.raises(ValueError):
        equivalence_test(tight, 0.01, alpha=0.6)

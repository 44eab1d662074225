"""The study statistics of pebench.leaderboard.stats (issue #72 item 3: TestResult, mean_test, paired_test,
equivalence_test, spearman_test, bootstrap_test, jackknife_test, holm, format_p), each against scipy.stats or a
published worked example, on random (hypothesis and plain numpy draws) and degenerate inputs.

Rules checked on every result (:func:`_check`): an interval contains its estimate; a p-value is in (0, 1] and never
below its floor; no test means ``p is None`` with a reason (zero variance is never p = 0); correlation intervals stay
in [-1, 1]. Resampled p-values do not depend on the order of the units.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pebench.leaderboard import stats as S

FINITE = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, allow_subnormal=False)
# magnitudes in [1e-6, 1e6] or 0: scipy's own arithmetic (variance of the raw values) neither under- nor overflows,
# so the comparisons below are against a scipy result that is itself right (tiny scales are tested separately)
MODERATE = st.one_of(st.just(0.0), st.floats(1e-6, 1e6), st.floats(-1e6, -1e-6))
SMALL_POOL = st.sampled_from([0.0, 0.5, 1.0, 1.5, -2.0, 0.1, 0.2, 0.3, 1e-300, 3.0])  # ties and equal values
ALTERNATIVES = st.sampled_from(["two-sided", "greater", "less"])
LEVELS = st.sampled_from([0.8, 0.9, 0.95, 0.99])
FAST = settings(max_examples=40, deadline=None)


def _mean(u):
    return float(np.mean(u))


def _check(r: S.TestResult) -> S.TestResult:
    """The invariants every result keeps."""
    assert isinstance(r, S.TestResult)
    assert r.n >= 0
    assert (r.lo is None) == (r.hi is None)
    if r.lo is not None:
        assert r.lo <= r.estimate <= r.hi, r
    if r.p is None:
        assert not r.tested
        assert r.reason, r
    else:
        assert r.tested
        assert 0.0 < r.p <= 1.0, r
        if r.p_floor is not None:
            assert 0.0 < r.p_floor <= 1.0
            assert r.p >= r.p_floor * (1 - 1e-12), r
    if r.procedure.startswith("Spearman") and r.lo is not None:
        assert -1.0 <= r.lo <= r.hi <= 1.0
    return r


def _close(a, b, rel=1e-10):
    """a == b to ``rel`` relative (infinities equal)."""
    if math.isinf(a) or math.isinf(b):
        return a == b
    return a == pytest.approx(b, rel=rel, abs=1e-300)


def _interval_close(r, ci, rel=1e-10):
    scale = max(abs(r.estimate), abs(r.hi - r.lo) if math.isfinite(r.hi - r.lo) else abs(r.estimate), 1e-300)
    for ours, ref in ((r.lo, float(ci.low)), (r.hi, float(ci.high))):
        if math.isinf(ref):
            assert ours == ref
        else:
            assert ours == pytest.approx(ref, rel=rel, abs=rel * scale)


def _rounding(v, scale=None):
    v = np.asarray(v, dtype=np.float64)
    scale = float(np.max(np.abs(v))) if scale is None else scale
    return float(np.ptp(v)) <= 1e-12 * scale


# ----------------------------------------------------------------------------------------------------- mean / paired


@FAST
@given(st.lists(MODERATE, min_size=2, max_size=30), MODERATE, ALTERNATIVES, LEVELS)
def test_mean_test_equals_ttest_1samp(values, null, alternative, level):
    r = _check(S.mean_test(values, null, alternative, level))
    if _rounding(values):
        assert r.p is None and r.lo == r.hi == r.estimate and r.reason.startswith("zero variance: every value is")
        return
    ref = stats.ttest_1samp(values, null, alternative=alternative)
    assert r.procedure == "one-sample t" and r.n == len(values) and r.df == len(values) - 1
    assert r.alternative == alternative and r.level == level
    assert _close(r.statistic, float(ref.statistic))
    assert r.p == (S._TINY_P if ref.pvalue == 0.0 else pytest.approx(float(ref.pvalue), rel=1e-10))
    assert r.estimate == pytest.approx(float(np.mean(values)), rel=1e-12, abs=1e-300)
    _interval_close(r, ref.confidence_interval(level))


@FAST
@given(st.integers(2, 25).flatmap(lambda n: st.tuples(st.lists(MODERATE, min_size=n, max_size=n),
                                                      st.lists(MODERATE, min_size=n, max_size=n))),
       ALTERNATIVES, LEVELS)
def test_paired_test_equals_ttest_rel(ab, alternative, level):
    a, b = ab
    r = _check(S.paired_test(a, b, alternative, level))
    d = np.subtract(a, b)
    if _rounding(d, float(max(np.max(np.abs(a)), np.max(np.abs(b))))):
        assert r.p is None and r.lo == r.hi == r.estimate
        assert r.reason.startswith("zero variance: every difference is")
        return
    ref = stats.ttest_rel(a, b, alternative=alternative)
    assert r.procedure == "paired t" and r.n == len(a)
    assert _close(r.statistic, float(ref.statistic))
    assert r.p == (S._TINY_P if ref.pvalue == 0.0 else pytest.approx(float(ref.pvalue), rel=1e-10))
    _interval_close(r, ref.confidence_interval(level))


@pytest.mark.parametrize("seed", range(8))
def test_t_tests_equal_scipy_on_random_draws(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    a = rng.normal(0.7, 0.05, n)
    b = a - rng.normal(0.01 * (seed % 3), 0.02, n)
    for alternative in ("two-sided", "greater", "less"):
        for level in (0.9, 0.95):
            r = _check(S.paired_test(a, b, alternative, level))
            ref = stats.ttest_rel(a, b, alternative=alternative)
            assert r.statistic == pytest.approx(float(ref.statistic), rel=1e-10)
            assert r.p == pytest.approx(float(ref.pvalue), rel=1e-10)
            _interval_close(r, ref.confidence_interval(level))
            m = _check(S.mean_test(a, 0.69, alternative, level))
            ref = stats.ttest_1samp(a, 0.69, alternative=alternative)
            assert m.statistic == pytest.approx(float(ref.statistic), rel=1e-10)
            assert m.p == pytest.approx(float(ref.pvalue), rel=1e-10)
            _interval_close(m, ref.confidence_interval(level))
    # the interval the leaderboard prints (t_mean_ci) is mean_test's, and its paired summary's p is the paired test's
    lo, hi = S.t_mean_ci(a)
    r = S.mean_test(a)
    assert (r.lo, r.hi) == (lo, hi)
    assert S.paired_test(a, b).p == pytest.approx(S.paired_summary(list(a - b)).p, rel=1e-10)


@pytest.mark.filterwarnings("ignore:Precision loss occurred:RuntimeWarning")  # scipy's, on the references
def test_t_tests_on_degenerate_inputs():
    for f in (lambda v: S.mean_test(v), lambda v: S.paired_test(v, [0.0] * len(v))):
        r = _check(f([]))
        assert r.n == 0 and r.p is None and r.lo is None and math.isnan(r.estimate) and r.reason == "no units"
        r = _check(f([0.25]))
        assert r.n == 1 and r.p is None and r.lo is None and r.estimate == 0.25 and r.reason == "fewer than 2 units"
        r = _check(f([0.25, 0.75]))  # n = 2: defined, with 1 degree of freedom
        assert r.p is not None and r.df == 1.0
    # all values equal: the point, no test; never p = 0 (scipy: p = 0 here, its mean of five 0.03 is off by rounding
    # so its variance is 1e-36, not 0; NaN for other values)
    r = _check(S.mean_test([0.03] * 5))
    assert (r.estimate, r.lo, r.hi, r.p) == (0.03, 0.03, 0.03, None)
    assert r.reason == "zero variance: every value is +0.03000"
    assert stats.ttest_1samp([0.03] * 5, 0.0).pvalue == 0.0
    # all differences equal and non-zero, exactly (dyadic values) and up to rounding (0.97 - 0.94 vs 1.97 - 1.94):
    # scipy reads the latter as p ~ 1e-30; the leaderboard's paired summary gives no test (not significant) for both
    r = _check(S.paired_test([1.5, 2.5, 3.5], [1.0, 2.0, 3.0]))
    assert r.p is None and r.estimate == r.lo == r.hi == 0.5 and r.reason == "zero variance: every difference is +0.5000"
    summary = S.paired_summary([0.5, 0.5, 0.5])
    assert summary.mean == 0.5 and summary.p is None and not summary.significant
    a, b = [0.97, 1.97, 2.97, 0.83], [0.94, 1.94, 2.94, 0.80]
    assert stats.ttest_rel(a, b).pvalue < 1e-20
    r = _check(S.paired_test(a, b))
    assert r.p is None and r.estimate == pytest.approx(0.03) and r.lo == r.hi == r.estimate
    assert r.reason == "zero variance: every difference is +0.03000 (to within floating-point rounding)"
    r = _check(S.paired_test([0.5, 0.6], [0.5, 0.6]))  # all differences zero
    assert r.p is None and r.estimate == 0.0 and r.reason == "zero variance: every difference is +0.000"


def test_t_tests_at_extreme_scales():
    """Spreads of 1e-300 (scipy's variance underflows: t = inf, p = 0) and values near 1e308 (its mean overflows) are
    tested as the same data scaled by a power of two, which is exact."""
    x = [1e-300, 2e-300, 4e-300]
    ref = stats.ttest_1samp([1.0, 2.0, 4.0], 0.0)
    r = _check(S.mean_test(x))
    assert r.statistic == pytest.approx(float(ref.statistic), rel=1e-12)
    assert r.p == pytest.approx(float(ref.pvalue), rel=1e-12)
    big = [1.5e308, 1.7e308, 1.2e308]
    r = _check(S.mean_test(big))
    ref = stats.ttest_1samp([1.5, 1.7, 1.2], 0.0)
    assert r.p == pytest.approx(float(ref.pvalue), rel=1e-12) and r.estimate == pytest.approx(1.4666666666666667e308)
    # a p that underflows double precision is the smallest normal double, with a reason; never 0
    v = 1.0 + 1e-9 * np.random.default_rng(0).normal(size=200)
    assert stats.ttest_1samp(v, 0.0).pvalue == 0.0
    r = _check(S.mean_test(v))
    assert r.p == S._TINY_P and "underflows" in r.reason


def test_t_test_bounds_clip_the_interval_and_keep_the_estimate():
    acc = [0.99, 1.0, 0.98, 1.0]
    free, clipped = S.mean_test(acc), _check(S.mean_test(acc, bounds=(0.0, 1.0)))
    assert free.hi > 1.0 and clipped.hi == 1.0 and clipped.lo == free.lo and clipped.p == free.p
    one_sided = _check(S.mean_test(acc, alternative="greater", bounds=(0.0, 1.0)))
    assert one_sided.hi == 1.0 and one_sided.lo > free.lo
    assert _check(S.paired_test([0.9, 0.8, 0.7], [0.1, 0.05, 0.0], bounds=(-1.0, 1.0))).hi <= 1.0
    with pytest.raises(ValueError, match="inside bounds"):
        S.mean_test([0.5, 1.2], bounds=(0.0, 1.0))
    with pytest.raises(ValueError, match="bounds"):
        S.mean_test([0.5, 0.6], bounds=(1.0, 0.0))


def test_bad_inputs_raise_one_line_value_errors():
    calls = [lambda: S.mean_test([1.0, float("nan")]), lambda: S.mean_test([1.0, float("inf")]),
             lambda: S.mean_test([1.0, 2.0], null=float("nan")), lambda: S.paired_test([1.0], [1.0, 2.0]),
             lambda: S.paired_test([1.0, 2.0], [1.0, -float("inf")]), lambda: S.mean_test([1.0, 2.0], alternative="two"),
             lambda: S.mean_test([1.0, 2.0], level=1.0), lambda: S.equivalence_test([1.0, 2.0], -0.1),
             lambda: S.equivalence_test([1.0, 2.0], (0.1, -0.1)), lambda: S.equivalence_test([1.0, 2.0], 0.1, alpha=0.5),
             lambda: S.spearman_test([1.0, 2.0], [1.0]), lambda: S.spearman_test([1.0, float("nan")], [1.0, 2.0]),
             lambda: S.bootstrap_test([1.0, float("inf")], _mean), lambda: S.bootstrap_test([[1.0], [np.nan]], _mean),
             lambda: S.bootstrap_test([1.0, 2.0], lambda u: float("nan")),
             lambda: S.jackknife_test([1.0, 2.0, 3.0], lambda u: math.inf if len(u) < 3 else 1.0),  # inf left one out
             lambda: S.mean_test([[1.0, 2.0]])]
    for call in calls:
        with pytest.raises(ValueError) as e:
            call()
        assert "\n" not in str(e.value)


# ------------------------------------------------------------------------------------------------------------- TOST


def _tost_reference(d, low, high):
    p_lo = stats.ttest_1samp(d, low, alternative="greater").pvalue
    p_hi = stats.ttest_1samp(d, high, alternative="less").pvalue
    return max(float(p_lo), float(p_hi))


@FAST
@given(st.lists(MODERATE, min_size=2, max_size=20), st.floats(1e-3, 1e6), st.sampled_from([0.01, 0.05, 0.1]))
def test_equivalence_test_equals_two_one_sided_scipy_tests(diffs, margin, alpha):
    r = _check(S.equivalence_test(diffs, margin, alpha))
    assert r.procedure == "TOST" and r.level == pytest.approx(1 - 2 * alpha)
    if _rounding(diffs):
        assert r.p is None and r.lo == r.hi == r.estimate
        return
    ref = _tost_reference(diffs, -margin, margin)
    assert r.p == (S._TINY_P if ref == 0.0 else pytest.approx(ref, rel=1e-10))
    _interval_close(r, stats.ttest_1samp(diffs, 0.0).confidence_interval(1 - 2 * alpha))
    # duality: equivalent at alpha iff the 1 - 2 alpha interval lies inside the margin (away from the boundary)
    if abs(r.p - alpha) > 1e-9 * alpha:
        assert (r.p < alpha) == (-margin < r.lo and r.hi < margin)


@pytest.mark.parametrize("seed", range(6))
def test_equivalence_test_on_random_draws_and_asymmetric_margins(seed):
    rng = np.random.default_rng(seed)
    d = rng.normal(0.002 * seed, 0.01, int(rng.integers(3, 20)))
    for margin in (0.01, 0.02, (-0.005, 0.03), (-0.02, 0.001)):
        low, high = (-margin, margin) if np.isscalar(margin) else margin
        r = _check(S.equivalence_test(d, margin, 0.05))
        assert r.p == pytest.approx(_tost_reference(d, low, high), rel=1e-10)
        assert (r.p < 0.05) == (low < r.lo and r.hi < high)


def test_equivalence_test_on_degenerate_inputs():
    r = _check(S.equivalence_test([0.01, 0.01, 0.01], 0.05))
    assert r.p is None and r.estimate == r.lo == r.hi == 0.01 and r.reason.startswith("zero variance")
    assert _check(S.equivalence_test([0.01], 0.05)).p is None
    assert _check(S.equivalence_test([], 0.05)).p is None


# --------------------------------------------------------------------------------------------------------- Spearman


def _exact_reference(x, y, alternative="two-sided"):
    """scipy's exact permutation test of the pairing, with Spearman's rho from average ranks (Pearson's r of the
    ranks: Spearman's definition) as the statistic: the n! permutations of x against y."""
    ry = stats.rankdata(y)
    return stats.permutation_test((np.asarray(x, dtype=float),),
                                  lambda a, axis=-1: stats.pearsonr(stats.rankdata(a, axis=axis), ry, axis=axis).statistic,
                                  permutation_type="pairings", n_resamples=np.inf, vectorized=True,
                                  alternative=alternative)


def test_spearman_worked_example():
    """Wikipedia, "Spearman's rank correlation coefficient", example: IQ against hours of TV a week for 10 people,
    sum d^2 = 194, rho = 1 - 6 * 194 / (10 * (10^2 - 1)) = -29/165 = -0.1758."""
    iq = [106, 100, 86, 101, 99, 103, 97, 113, 112, 110]
    tv = [7, 27, 2, 50, 28, 29, 20, 12, 6, 17]
    r = _check(S.spearman_test(iq, tv))
    assert r.estimate == pytest.approx(-29 / 165, rel=1e-14)
    assert r.n == 10 and r.p_floor == 2 / 10000 and r.p > 0.3  # far from significant


@pytest.mark.parametrize("seed", range(6))
def test_spearman_exact_p_equals_scipy_permutation_test(seed):
    rng = np.random.default_rng(seed)
    n = 3 + seed % 5  # 3..7
    x = rng.normal(size=n) if seed % 2 else rng.integers(0, 3, n).astype(float)  # ties in the odd draws
    y = x + rng.normal(size=n)
    assume_nonconstant = np.ptp(x) > 0 and np.ptp(y) > 0
    if not assume_nonconstant:
        x[0] += 1.0
    for alternative in ("two-sided", "greater", "less"):
        r = _check(S.spearman_test(x, y, alternative=alternative))
        ref = _exact_reference(x, y, alternative)
        assert r.p == pytest.approx(float(ref.pvalue), rel=1e-12)
        assert r.estimate == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
        # the floor, from the enumerated null distribution (brute force: every pairing's rho)
        perms = np.array(list(itertools.permutations(range(n))))
        rhos = stats.pearsonr(stats.rankdata(np.asarray(y)[perms], axis=-1), stats.rankdata(x), axis=-1).statistic
        at_min = np.sum(np.isclose(rhos, rhos.min(), atol=1e-12))
        at_max = np.sum(np.isclose(rhos, rhos.max(), atol=1e-12))
        want = {"two-sided": 2 * min(at_min, at_max), "greater": at_max, "less": at_min}[alternative]
        assert r.p_floor == pytest.approx(min(1.0, want / math.factorial(n)), rel=1e-12)


def test_spearman_exact_at_n_8_and_a_perfect_pairing_reaches_the_floor():
    x = np.arange(8.0)
    y = np.array([0.3, 0.1, 0.5, 0.4, 0.9, 0.7, 0.8, 1.2])
    r = _check(S.spearman_test(x, y))
    assert r.p == pytest.approx(float(_exact_reference(x, y).pvalue), rel=1e-12)
    perfect = _check(S.spearman_test(x, x ** 2))
    assert perfect.estimate == 1.0 and perfect.lo == perfect.hi == 1.0  # the degenerate Fisher interval
    assert perfect.p == perfect.p_floor == 2 / math.factorial(8)
    assert S.format_p(perfect.p, perfect.p_floor) == "p ≤ 5e-05 (floor)"
    negative = _check(S.spearman_test(x, -x))
    assert negative.estimate == -1.0 and negative.lo == negative.hi == -1.0


@pytest.mark.parametrize("seed", range(4))
def test_spearman_monte_carlo_equals_scipy_with_the_same_generator(seed):
    """Above 8 pairs: scipy's permutation_test of spearmanr on the pairs sorted by (x, y), generator
    default_rng(seed), gives the same p; the floor is 2 / (B + 1) two-sided."""
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(9, 30))
    x = rng.integers(0, 6, n).astype(float) if seed % 2 else rng.normal(size=n)
    y = 0.3 * x + rng.normal(size=n)
    r = _check(S.spearman_test(x, y, resamples=999, seed=seed))
    order = np.lexsort((y, x))
    xs, ys = x[order], y[order]
    ref = stats.permutation_test((xs,), lambda a: stats.spearmanr(a, ys).statistic, permutation_type="pairings",
                                 n_resamples=999, rng=np.random.default_rng(seed))
    assert r.p == pytest.approx(float(ref.pvalue), rel=1e-12)
    assert r.p_floor == 2 / 1000
    assert r.estimate == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    # Bonett-Wright Fisher interval by hand
    rho = r.estimate
    half = stats.norm.ppf(0.975) * math.sqrt((1 + rho ** 2 / 2) / (n - 3))
    assert (r.lo, r.hi) == (pytest.approx(math.tanh(math.atanh(rho) - half)),
                            pytest.approx(math.tanh(math.atanh(rho) + half)))
    one_sided = _check(S.spearman_test(x, y, resamples=999, seed=seed, alternative="greater"))
    assert one_sided.p_floor == 1 / 1000


@FAST
@given(st.integers(9, 16).flatmap(lambda n: st.tuples(
    st.lists(st.one_of(FINITE, SMALL_POOL), min_size=n, max_size=n),
    st.lists(st.one_of(FINITE, SMALL_POOL), min_size=n, max_size=n),
    st.permutations(range(n)))))
def test_spearman_monte_carlo_p_does_not_depend_on_the_order_of_the_pairs(data):
    x, y, perm = data
    r = _check(S.spearman_test(x, y, resamples=499))
    again = S.spearman_test(x, y, resamples=499)
    shuffled = _check(S.spearman_test([x[i] for i in perm], [y[i] for i in perm], resamples=499))
    assert repr(r) == repr(again)  # repr: NaN estimates (constant x) compare equal
    assert repr(shuffled) == repr(r)
    if r.tested:
        assert r.p_floor == 2 / 500
        assert r.estimate == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)


def test_spearman_on_degenerate_inputs():
    for n in (0, 1):
        r = _check(S.spearman_test(list(range(n)), list(range(n))))
        assert r.p is None and r.lo is None and r.reason == "fewer than 3 pairs"
    r = _check(S.spearman_test([1.0, 2.0], [3.0, 1.0]))
    assert r.p is None and r.estimate == -1.0 and r.lo is None and r.reason == "fewer than 3 pairs"
    r = _check(S.spearman_test([1.0, 2.0, 3.0], [1.0, 3.0, 2.0]))  # exact over 3! pairings, no Fisher interval
    assert r.p == 1.0 and r.p_floor == pytest.approx(1 / 3) and r.lo is None and r.estimate == pytest.approx(0.5)
    for x, y, which in (([2.0] * 5, [1, 2, 3, 4, 5], "x is"), ([1, 2, 3, 4, 5], [0.0] * 5, "y is"),
                        ([1.0] * 4, [1.0] * 4, "x and y are")):
        r = _check(S.spearman_test(x, y))
        assert r.p is None and r.lo is None and math.isnan(r.estimate)
        assert r.reason == f"{which} constant: no rank correlation"
    # ties everywhere but the last value: rho from average ranks, as spearmanr
    x, y = [1, 1, 1, 1, 1, 2], [3, 3, 1, 1, 2, 5]
    r = _check(S.spearman_test(x, y))
    assert r.estimate == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert r.p == pytest.approx(float(_exact_reference(x, y).pvalue), rel=1e-12)
    # |rho| = 1 with ties, Monte Carlo: interval the point, inside [-1, 1]; nearly 1 with few pairs: inside [-1, 1]
    x = [1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    r = _check(S.spearman_test(x, [2 * v for v in x], resamples=999))
    assert r.estimate == r.lo == r.hi == 1.0 and r.p == r.p_floor == 2 / 1000
    r = _check(S.spearman_test([1, 2, 3, 4, 5], [1, 2, 3, 5, 4]))
    assert -1.0 <= r.lo < r.estimate < r.hi <= 1.0


# ------------------------------------------------------------------------------------------- bootstrap / jackknife


@pytest.mark.parametrize("seed", range(4))
def test_bootstrap_percentile_equals_scipy_with_the_same_draws(seed):
    """scipy.stats.bootstrap(method="percentile") draws the same resample indices from the same generator, so for
    the mean of sorted (canonical-order) values the interval is the same up to summation order."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.exponential(1.0, int(rng.integers(5, 40))))
    r = _check(S.bootstrap_test(x.tolist(), _mean, resamples=2000, seed=seed))
    ref = stats.bootstrap((x,), np.mean, n_resamples=2000, method="percentile", rng=np.random.default_rng(seed))
    assert r.procedure == "bootstrap (percentile)" and r.reason == "no null value given: interval only"
    assert (r.lo, r.hi) == (pytest.approx(float(ref.confidence_interval.low), rel=1e-12),
                            pytest.approx(float(ref.confidence_interval.high), rel=1e-12))


def test_bootstrap_percentile_matches_scipy_up_to_monte_carlo_error():
    """Independent streams (input unsorted, another seed), 20,000 resamples each: the bounds agree to 5 % of the
    interval's width (the Monte Carlo error of a 2.5 % quantile at B = 20,000 is about 0.5 % of the width)."""
    x = np.random.default_rng(7).normal(3.0, 2.0, 30)
    r = _check(S.bootstrap_test(x.tolist(), _mean, resamples=20_000, seed=1))
    ref = stats.bootstrap((x,), np.mean, n_resamples=20_000, method="percentile", rng=np.random.default_rng(99))
    width = r.hi - r.lo
    assert abs(r.lo - ref.confidence_interval.low) < 0.05 * width
    assert abs(r.hi - ref.confidence_interval.high) < 0.05 * width


def test_bootstrap_p_by_its_formula_and_floor():
    x = [0.2, 0.5, 0.1, 0.9, 0.4, 0.3]
    B = 2000
    r = _check(S.bootstrap_test(x, _mean, resamples=B, seed=3, null=0.35))
    xs = sorted(x)
    idx = np.random.default_rng(3).integers(0, len(xs), (B, len(xs)))
    theta = np.array([np.mean([xs[i] for i in row]) for row in idx])
    want = min(1.0, 2 * min(np.sum(theta <= 0.35) + 1, np.sum(theta >= 0.35) + 1) / (B + 1))
    assert r.p == pytest.approx(want, rel=1e-12) and r.p_floor == 2 / (B + 1)
    far = _check(S.bootstrap_test(x, _mean, null=-5.0))  # every resample above the null: the floor
    assert far.p == far.p_floor == 2 / 2001
    assert S.format_p(far.p, far.p_floor) == "p ≤ 0.001 (floor)"


def _min_gap(units):
    """The smallest distance between two units: 0 in almost every bootstrap resample (duplicates), so the
    percentile interval excludes the full-sample value."""
    v = sorted(float(np.mean(u)) for u in units)
    return min(b - a for a, b in zip(v, v[1:]))


def test_bootstrap_falls_back_to_the_jackknife_for_a_biased_statistic():
    x = [0.0, 1.0, 2.5, 4.5, 7.0, 10.0, 13.2, 17.0]
    r = _check(S.bootstrap_test(x, _min_gap, null=0.0))
    assert r.procedure == "jackknife" and r.estimate == 1.0
    assert r.reason == "percentile interval excluded the estimate; jackknife used"
    jk = S.jackknife_test(x, _min_gap, null=0.0)
    assert (r.lo, r.hi, r.p) == (jk.lo, jk.hi, jk.p) and r.lo <= 1.0 <= r.hi
    # the number of distinct units: n on the sample, about 0.63 n on a resample; its jackknife has zero variance
    distinct = _check(S.bootstrap_test([[v] for v in x], lambda u: float(len({float(a[0]) for a in u})), null=1.0))
    assert distinct.procedure == "jackknife" and distinct.p is None and distinct.lo == distinct.hi == 8.0
    assert distinct.reason == ("percentile interval excluded the estimate; jackknife used; "
                               "zero variance: every leave-one-out statistic is +7.000")


def _pooled_mean(units):
    return float(np.concatenate(units).sum() / sum(u.size for u in units))


def test_bootstrap_over_units_that_are_arrays():
    """One array per unit (a photograph's tokens): units are resampled whole; the pooled mean is a ratio."""
    rng = np.random.default_rng(5)
    units = [rng.normal(i % 3, 1.0, int(rng.integers(1, 9))) for i in range(12)]
    r = _check(S.bootstrap_test(units, _pooled_mean, resamples=2000, seed=2, null=0.0))
    canon = sorted(units, key=lambda a: (a.shape, a.tolist()))
    idx = np.random.default_rng(2).integers(0, 12, (2000, 12))
    theta = [_pooled_mean([canon[i] for i in row]) for row in idx]
    lo, hi = np.quantile(theta, [0.025, 0.975])
    assert r.estimate == pytest.approx(_pooled_mean(units), rel=1e-12)
    assert (r.lo, r.hi) == (pytest.approx(lo, rel=1e-12), pytest.approx(hi, rel=1e-12))
    shuffled = S.bootstrap_test([units[i] for i in rng.permutation(12)], _pooled_mean, resamples=2000, seed=2,
                                null=0.0)
    assert (shuffled.lo, shuffled.hi, shuffled.p, shuffled.estimate) == (r.lo, r.hi, r.p, r.estimate)


@FAST
@given(st.lists(st.one_of(FINITE, SMALL_POOL), min_size=2, max_size=12).flatmap(
    lambda v: st.tuples(st.just(v), st.permutations(v))))
def test_bootstrap_and_jackknife_do_not_depend_on_the_order_of_the_units(data):
    x, perm = data
    for f in (lambda v: S.bootstrap_test(v, _mean, resamples=200, null=0.0),
              lambda v: S.jackknife_test(v, _mean, null=0.0)):
        a, b = _check(f(x)), _check(f(perm))
        assert (a.procedure, a.estimate, a.lo, a.hi, a.p, a.p_floor) == (b.procedure, b.estimate, b.lo, b.hi, b.p,
                                                                         b.p_floor)


def test_bootstrap_on_degenerate_inputs():
    r = _check(S.bootstrap_test([], _mean))
    assert r.n == 0 and r.p is None and math.isnan(r.estimate) and r.lo is None
    r = _check(S.bootstrap_test([0.4], _mean, null=0.0))
    assert r.n == 1 and r.p is None and r.estimate == 0.4 and r.reason == "fewer than 2 units"
    r = _check(S.bootstrap_test([0.4] * 6, _mean, null=0.0))  # every resample equal: no test, not p = 2 / (B + 1)
    assert r.p is None and r.lo == r.hi == r.estimate == pytest.approx(0.4)
    assert r.reason.startswith("zero variance: every resampled statistic is +0.4000")
    assert _check(S.bootstrap_test([0.1, 0.3], _mean, null=0.0)).p is not None


@pytest.mark.parametrize("seed", range(6))
def test_jackknife_of_the_mean_is_the_t_test(seed):
    """For the mean the jackknife standard error is exactly s / sqrt(n) (Efron & Tibshirani 1993, ch. 11), so the
    jackknife t-test and interval are scipy's one-sample t-test and interval."""
    rng = np.random.default_rng(seed)
    x = rng.normal(1.0, 0.5, int(rng.integers(2, 40)))
    for level in (0.9, 0.95):
        r = _check(S.jackknife_test(x.tolist(), _mean, level=level, null=0.8))
        ref = stats.ttest_1samp(x, 0.8)
        assert r.procedure == "jackknife" and r.df == len(x) - 1
        assert r.statistic == pytest.approx(float(ref.statistic), rel=1e-9)
        assert r.p == pytest.approx(float(ref.pvalue), rel=1e-8)
        _interval_close(r, ref.confidence_interval(level), rel=1e-9)


def test_jackknife_on_degenerate_inputs():
    assert _check(S.jackknife_test([], _mean)).p is None
    r = _check(S.jackknife_test([2.0], _mean, null=0.0))
    assert r.p is None and r.estimate == 2.0 and r.reason == "fewer than 2 units"
    r = _check(S.jackknife_test([0.7] * 4, _mean, null=0.0))
    assert r.p is None and r.lo == r.hi == r.estimate and r.reason.startswith("zero variance")
    r = _check(S.jackknife_test([0.1, 0.2, 0.3], _mean))  # no null: interval only
    assert r.p is None and r.lo < r.estimate < r.hi and r.reason == "no null value given: interval only"
    r = _check(S.jackknife_test([1e-300, 3e-300, 2e-300], _mean, null=0.0))  # tiny deviations do not underflow
    assert r.p == pytest.approx(float(stats.ttest_1samp([1.0, 3.0, 2.0], 0.0).pvalue), rel=1e-9)


# -------------------------------------------------------------------------------------------------- every procedure


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 8).flatmap(lambda n: st.tuples(st.lists(st.one_of(FINITE, SMALL_POOL), min_size=n, max_size=n),
                                                     st.lists(st.one_of(FINITE, SMALL_POOL), min_size=n, max_size=n))),
       ALTERNATIVES)
def test_every_procedure_keeps_the_invariants(xy, alternative):
    x, y = xy
    n = len(x)
    _check(S.mean_test(x, 0.0, alternative))
    _check(S.paired_test(x, y, alternative))
    _check(S.equivalence_test(x, 0.5))
    _check(S.spearman_test(x, y, alternative=alternative, resamples=199))
    _check(S.bootstrap_test(x, _mean, resamples=200, null=0.0))
    _check(S.jackknife_test(x, _mean, null=0.0))
    if n >= 2 and np.ptp(x) == 0.0:
        for r in (S.mean_test(x), S.equivalence_test(x, 0.5), S.bootstrap_test(x, _mean, resamples=50, null=0.0),
                  S.jackknife_test(x, _mean, null=0.0)):
            assert r.p is None and r.reason.startswith("zero variance")


# --------------------------------------------------------------------------------------------------- holm, format_p


def test_holm_worked_example_with_untested_claims():
    """Wikipedia, "Holm-Bonferroni method", example: four hypotheses with p = 0.01, 0.04, 0.03, 0.005 at alpha
    0.05; sorted 0.005 < 0.01 < 0.03 < 0.04 against 0.05/4, 0.05/3, 0.05/2, 0.05/1: H4 and H1 are rejected, the
    procedure stops at H3 (0.03 > 0.025), so H3 and H2 are not. Adjusted: 0.02, 0.03, 0.06, 0.06. Two untested claims
    (None) stay None and do not enlarge the family (m stays 4)."""
    adj = S.holm([0.01, None, 0.04, 0.03, None, 0.005])
    assert adj[1] is None and adj[4] is None
    assert [adj[i] for i in (0, 2, 3, 5)] == pytest.approx([0.03, 0.06, 0.06, 0.02], abs=1e-15)
    assert [a <= 0.05 for a in adj if a is not None] == [True, False, False, True]
    assert S.holm([0.01, 0.04, 0.03, 0.005]) == S.holm_adjust([0.01, 0.04, 0.03, 0.005])
    assert S.holm([None, None]) == [None, None] and S.holm([]) == []
    with pytest.raises(ValueError):
        S.holm([0.1, 1.5])


def test_format_p():
    assert S.format_p(None) == "no test"
    assert S.format_p(0.0123) == "p = 0.0123"
    assert S.format_p(0.5, 2 / 2001) == "p = 0.5000"
    assert S.format_p(5e-5) == "p < 0.0001"
    assert S.format_p(0.0005, 0.0005) == "p ≤ 0.0005 (floor)"
    assert S.format_p(1 / 10_000, 1 / 10_000) == "p ≤ 0.0001 (floor)"
    assert S.format_p(2 / 2001, 2 / 2001) == "p ≤ 0.001 (floor)"  # 0.0009995 rounded up: still a true bound
    assert S.format_p(1 / 3, 1 / 3) == "p ≤ 0.34 (floor)"


def test_result_type():
    r = S.mean_test([0.1, 0.2, 0.4])
    assert r.tested and not S.mean_test([0.1]).tested
    with pytest.raises(AttributeError):
        r.p = 0.5  # frozen
    assert S.TestResult.__test__ is False

"""Statistics of the leaderboard, the study engine and the study scripts: one module, every procedure tested against
scipy.stats (tests/leaderboard/test_study_statistics.py, test_stats_family.py, test_leaderboard_stats.py).

Every interval and test is one of the procedures below :class:`TestResult` (:func:`mean_test`, :func:`paired_test`,
:func:`equivalence_test`, :func:`spearman_test`, :func:`bootstrap_test`, :func:`jackknife_test`, :func:`holm`).
The leaderboard reads them through three small forms:

* :func:`t_mean_ci`: :func:`mean_test`'s Student-t interval ``mean ± t_{0.975, n-1} · sd / sqrt(n)`` (sd with
  ddof = 1), None below 2 values; clipped to a bounded metric's range when given one (accuracies, mAP: [0, 1]).
  With the 3-5 seeds of the committed studies a percentile bootstrap over seeds cannot reach outside the seeds'
  own range (with 3 seeds its 95 % interval is the [min, max] of the seeds), so none is printed as one.
* :func:`paired_summary`: :func:`mean_test` of per-seed differences, as a Δ cell prints it.
* :func:`sign_flip_p`: exact two-sided sign-flip permutation test of the mean per-seed difference
  (under H0 each difference is symmetric about 0): the fraction of the ``2^n`` sign patterns
  whose |mean| is at least the observed one. Its smallest possible value is ``2 / 2^n``, i.e.
  0.0625 with 5 seeds, so at 5 % it needs at least 6 paired seeds.

:func:`holm_adjust`: Holm-Bonferroni adjusted p-values of a family of ``m`` tests (Holm 1979, "A simple sequentially
rejective multiple test procedure", Scand. J. Statist. 6): with the p-values sorted,
``p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))``; rejecting where ``p~ <= alpha`` is Holm's step-down procedure at
family-wise error rate ``alpha`` (:func:`holm` is it for families with untested members).
"""
from __future__ import annotations

import inspect
import itertools
import math
import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np

__all__ = ["BOOTSTRAP_RESAMPLES", "BOOTSTRAP_SEED", "t_mean_ci", "paired_differences", "sign_flip_p", "holm_adjust"]

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
_EXACT_MAX_N = 20  # 2^20 sign patterns; above, a Monte-Carlo estimate with the fixed seed


def t_mean_ci(values: Sequence[float], level: float = 0.95,
              bounds: tuple[float, float] | None = None) -> tuple[float, float] | None:
    """The Student-t interval of :func:`mean_test` (one procedure for the leaderboard and the study engine); None when
    ``n < 2`` or a value is not finite. All values equal (up to rounding): the point (no spread to widen it).
    ``bounds``: the range the metric cannot leave (an accuracy's ``(0, 1)``); the interval is clipped to it, which
    keeps its coverage (the true mean lies inside the range) and stops it from reading e.g. 101 %."""
    x = [float(v) for v in values]
    if len(x) < 2 or not all(math.isfinite(v) for v in x):
        return None
    r = mean_test(x, level=level, bounds=bounds)
    assert r.lo is not None and r.hi is not None  # two or more finite values always give an interval
    return r.lo, r.hi


def paired_differences(row: Mapping[int, float | None], reference: Mapping[int, float | None]) -> list[float]:
    """``row[s] - reference[s]`` for every seed ``s`` both report (finite values), by seed."""
    out = []
    for s in sorted(set(row) & set(reference)):
        a, b = row[s], reference[s]
        if a is not None and b is not None and math.isfinite(a) and math.isfinite(b):
            out.append(a - b)
    return out


def sign_flip_p(diffs: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> float:
    """Two-sided sign-flip permutation p-value of ``mean(diffs) = 0``: exact up to 20 pairs (every sign pattern, the
    observed one among them, so ``p >= 2 / 2^n``); above, ``resamples`` random patterns on the differences in sorted
    order (so the p does not depend on the order they were given in) and ``p = (#{|mean*| >= |mean|} + 1) /
    (resamples + 1)``, never 0."""
    d = np.sort(np.asarray(list(diffs), dtype=np.float64))
    n = d.size
    if n == 0:
        return float("nan")
    obs = abs(d.mean())
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    if n <= _EXACT_MAX_N:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))  # (2^n, n)
    else:
        signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(resamples, n))
    stats = np.abs((signs * d).mean(axis=1))
    if n <= _EXACT_MAX_N:
        return float(np.mean(stats >= obs - tol))
    return float((np.count_nonzero(stats >= obs - tol) + 1) / (len(stats) + 1))


def holm_adjust(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the order given (module docstring). ``ValueError`` for a
    p-value that is not a number in [0, 1]."""
    p = np.asarray(list(pvalues), dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"holm_adjust takes a flat sequence of p-values, got shape {p.shape}")
    if not np.all((p >= 0.0) & (p <= 1.0)):  # also rejects NaN
        raise ValueError(f"p-values must lie in [0, 1], got {p.tolist()}")
    m = p.size
    order = np.argsort(p, kind="stable")  # ascending
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])  # (m - j + 1) p_(j), j = 1..m
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)  # step-down: never below an earlier one
    return adjusted.tolist()


# ---------------------------------------------------------------------------------------------------------------------
# Study statistics (issue #72 item 3): one result type for every test the study engine and the leaderboard print.
#
# Rules every function below enforces (and tests/leaderboard/test_study_statistics.py checks on random and
# degenerate inputs, against scipy.stats or a published worked example):
#
# * the caller passes the independent units (seeds, photographs, scenes); resampling procedures resample those;
# * an interval always contains the estimate printed beside it (``lo <= estimate <= hi``);
# * zero variance is "no test": ``p is None`` with a ``reason``, never ``p = 0``; a p-value is always in (0, 1]
#   (a p-value that underflows double precision is reported as the smallest normal double, and ``reason`` says so);
# * correlation intervals stay inside [-1, 1];
# * resampled and exact permutation p-values carry ``p_floor``, the smallest p the procedure could have returned,
#   and do not depend on the order of the units (they are put in a canonical order before resampling);
# * resampled tests default to at least 2,000 resamples.
# ---------------------------------------------------------------------------------------------------------------------

__all__ += ["TestResult", "mean_test", "paired_test", "equivalence_test", "spearman_test", "bootstrap_test",
            "jackknife_test", "holm", "format_p"]

_ALTERNATIVES = ("two-sided", "greater", "less")
_TINY_P = float(np.finfo(np.float64).tiny)  # smallest normal double: where a p-value underflows, it is reported as this
_UNDERFLOW = "p underflows double precision; reported as the smallest normal double (2.2e-308)"
_EXACT_PERMUTATION_MAX_N = 8  # 8! = 40,320 pairings, enumerated; above, Monte Carlo
# A spread below this fraction of the inputs' magnitude is floating-point rounding, not variance: differences of
# decimal-derived doubles (0.97 - 0.94 vs 1.97 - 1.94) differ in the last bits, and a t-test of them reads p = 1e-30.
_ROUNDING_SPREAD = 1e-12


@dataclass(frozen=True)
class TestResult:
    """One estimate with its interval and test.

    ``procedure``: what was computed ("paired t", "one-sample t", "TOST", "Spearman (permutation)",
    "bootstrap (percentile)", "jackknife"). ``estimate``: the point estimate the interval and p belong to (NaN where
    there is none: no units, a constant input to a correlation). ``lo, hi``: the interval at ``level`` (TOST:
    ``1 - 2 alpha``), None when there is none; whenever given, ``lo <= estimate <= hi`` (a one-sided test's interval is
    one-sided: an infinite, or clipped, bound on the other side). ``p``: None when there is no test (``tested`` is
    False) and ``reason`` says why; otherwise ``0 < p <= 1``. ``n``: the number of independent units used.
    ``p_floor``: the smallest p the procedure could have returned (resampled and exact permutation tests), else None;
    ``p >= p_floor``. ``statistic``/``df``: the test statistic and its degrees of freedom where it has them.
    ``alternative``: "two-sided", "greater" or "less" ("equivalence" for TOST, whose alternative is that the mean lies
    inside the margin).
    """

    __test__ = False  # not a pytest test class, although its name starts with "Test"

    procedure: str
    estimate: float
    lo: float | None
    hi: float | None
    level: float
    p: float | None
    n: int
    reason: str | None = None
    p_floor: float | None = None
    statistic: float | None = None
    df: float | None = None
    alternative: str = "two-sided"

    @property
    def tested(self) -> bool:
        """Whether a test was run (``p is not None``)."""
        return self.p is not None


def _finite_1d(values: Sequence[float], name: str) -> np.ndarray:
    """``values`` as a 1-D float64 array; ValueError (one line) for another shape or a value that is not finite."""
    try:
        x = np.asarray(list(values), dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a sequence of numbers: {e}") from None
    if x.ndim != 1:
        raise ValueError(f"{name} must be a flat sequence of numbers, got shape {x.shape}")
    bad = np.flatnonzero(~np.isfinite(x))
    if bad.size:
        raise ValueError(f"{name} must be finite: {name}[{int(bad[0])}] is {x[bad[0]]!r}")
    return x


def _check_level(level: float, name: str = "level") -> None:
    try:
        ok = 0.0 < float(level) < 1.0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{name} must lie in (0, 1), got {level!r}")


def _check_alternative(alternative: str) -> None:
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative must be one of {', '.join(_ALTERNATIVES)}; got {alternative!r}")


def _check_finite_scalar(v: float, name: str) -> float:
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v!r}")
    return v


def _positive_p(p: float) -> tuple[float, str | None]:
    """``(p, reason)``: a p-value that underflowed to 0 becomes the smallest normal double, with a reason."""
    p = float(p)
    if not p > 0.0:
        return _TINY_P, _UNDERFLOW
    return min(p, 1.0), None


def _every(what: str, value: float, rounding: bool = False) -> str:
    return f"zero variance: every {what} is {value:+#.4g}" + (" (to within floating-point rounding)" if rounding else "")


def _rounding_spread(v: np.ndarray, scale: float | None = None) -> bool:
    """Whether the spread of ``v`` is zero or floating-point rounding: ``ptp(v) <= 1e-12 * scale`` (``scale``: the
    magnitude of the numbers the values were computed from; ``max |v|`` by default)."""
    spread = float(np.ptp(v))
    if scale is None:
        scale = float(np.max(np.abs(v)))
    return spread == 0.0 or spread <= _ROUNDING_SPREAD * scale


def _t_test(x: np.ndarray, null: float, alternative: str, level: float,
            bounds: tuple[float, float] | None, procedure: str, what: str, scale: float | None = None) -> TestResult:
    """The one-sample t-test and Student-t interval shared by :func:`mean_test` and :func:`paired_test`.

    scipy runs on the values scaled by a power of two (``2^-e``, ``e`` the exponent of ``max |x|``): that is exact in
    floating point, so wherever scipy's own arithmetic neither overflows nor underflows the statistic and p equal
    ``scipy.stats.ttest_1samp(x, null)`` bit for bit, and where it would (a spread of 1e-300, values near 1e308) the
    test is still defined. A spread that is zero or rounding (:func:`_rounding_spread` with ``scale``) is no test."""
    from scipy import stats  # deferred: scipy.stats takes about 1 s to import; `bench runs` never needs it

    _check_alternative(alternative)
    _check_level(level)
    null = _check_finite_scalar(null, "null")
    if bounds is not None:
        b0, b1 = _check_finite_scalar(bounds[0], "bounds[0]"), _check_finite_scalar(bounds[1], "bounds[1]")
        if not b0 < b1:
            raise ValueError(f"bounds must be (lo, hi) with lo < hi, got {bounds!r}")
        if x.size and (x.min() < b0 or x.max() > b1):
            raise ValueError(f"values must lie inside bounds {bounds!r}; got range [{x.min()!r}, {x.max()!r}]")
    n = int(x.size)
    if n == 0:
        return TestResult(procedure, float("nan"), None, None, level, None, 0, reason="no units",
                          alternative=alternative)
    if n < 2:
        return TestResult(procedure, float(x[0]), None, None, level, None, 1, reason="fewer than 2 units",
                          alternative=alternative)
    if _rounding_spread(x, scale):
        exact = np.ptp(x) == 0.0
        v = float(x[0]) if exact else math.fsum(x.tolist()) / n
        return TestResult(procedure, v, v, v, level, None, n, reason=_every(what, v, not exact), df=float(n - 1),
                          alternative=alternative)
    e = math.frexp(float(np.max(np.abs(x))))[1]
    with np.errstate(over="ignore", under="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        xs = np.ldexp(x, -e)
        ns = float(np.ldexp(null, -e))
        res = stats.ttest_1samp(xs, ns, alternative=alternative)
        ci = res.confidence_interval(level)
        mean = float(np.ldexp(float(np.mean(xs)), e))
        lo, hi = float(np.ldexp(float(ci.low), e)), float(np.ldexp(float(ci.high), e))
    lo, hi = min(lo, mean), max(hi, mean)  # exact already; guards the last bit
    if bounds is not None:
        lo, hi = max(lo, float(bounds[0])), min(hi, float(bounds[1]))
    p, reason = _positive_p(res.pvalue)
    return TestResult(procedure, mean, lo, hi, level, p, n, reason=reason, statistic=float(res.statistic),
                      df=float(res.df), alternative=alternative)


def mean_test(values: Sequence[float], null: float = 0.0, alternative: str = "two-sided", level: float = 0.95,
              bounds: tuple[float, float] | None = None) -> TestResult:
    """Student-t interval of the mean (sd with ddof = 1) and the one-sample t-test of ``mean = null`` (Student 1908;
    equal to ``scipy.stats.ttest_1samp(values, null, alternative=alternative)``).

    The interval is the one dual to the test: two-sided ``mean ± t_{(1+level)/2, n-1} sd / sqrt(n)``; for
    ``alternative="greater"`` the one-sided ``[mean - t_{level, n-1} sd / sqrt(n), inf)`` and for "less" its mirror
    (as ``TtestResult.confidence_interval``). ``bounds=(lo, hi)``: the metric's range (an accuracy's ``(0, 1)``); the
    interval is clipped to it (values outside it are a ValueError, so it still contains the estimate).
    Fewer than 2 values: no interval, no test. All values equal: the interval is the point and there is no test
    (``reason`` "zero variance: every value is ..."), never p = 0; a spread below ``1e-12 max |values|`` counts as
    equal (floating-point rounding: a t-test of it would read p ~ 1e-30), so there this differs from scipy."""
    return _t_test(_finite_1d(values, "values"), null, alternative, level, bounds, "one-sample t", "value")


def paired_test(a: Sequence[float], b: Sequence[float], alternative: str = "two-sided", level: float = 0.95,
                bounds: tuple[float, float] | None = None) -> TestResult:
    """Paired t-test and Student-t interval of the mean difference ``a[i] - b[i]`` (equal to
    ``scipy.stats.ttest_rel(a, b, alternative=alternative)``, i.e. :func:`mean_test` of the differences against 0).
    ``a`` and ``b`` must have the same length (pair ``i`` is one independent unit, e.g. one seed). ``bounds``: the
    range of a *difference* (``(-1, 1)`` for accuracies). All differences equal: no test ("zero variance: every
    difference is ..."), never p = 0, whether the common difference is 0 or not. Equal up to rounding counts as equal:
    a spread of the differences below ``1e-12 max(|a|, |b|)`` (``0.97 - 0.94`` and ``1.97 - 1.94`` differ in the last
    bits; scipy's t-test of them reads p ~ 1e-30)."""
    x, y = _finite_1d(a, "a"), _finite_1d(b, "b")
    if x.size != y.size:
        raise ValueError(f"paired_test needs a and b of the same length, got {x.size} and {y.size}")
    with np.errstate(over="ignore"):
        d = x - y
    scale = float(max(np.max(np.abs(x)), np.max(np.abs(y)))) if x.size else None
    return _t_test(_finite_1d(d, "a - b"), 0.0, alternative, level, bounds, "paired t", "difference", scale)


def equivalence_test(diffs: Sequence[float], margin: float | tuple[float, float], alpha: float = 0.05) -> TestResult:
    """TOST equivalence test (Schuirmann 1987, J. Pharmacokin. Biopharm. 15) that the mean of ``diffs`` lies inside
    the margin: ``margin`` a positive number (``(-margin, +margin)``) or ``(low, high)`` with ``low < high``.

    ``p = max`` of the two one-sided t-tests ``scipy.stats.ttest_1samp(d, low, alternative="greater")`` and
    ``ttest_1samp(d, high, alternative="less")``; equivalent at level ``alpha`` when ``p < alpha``, which is the same
    as the ``1 - 2 alpha`` Student-t interval (``lo, hi``, ``level = 1 - 2 alpha``) lying inside ``(low, high)``.
    ``statistic`` is the t of the one-sided test that gives ``p``. All differences equal (up to rounding, as in
    :func:`mean_test`), or fewer than 2: no test."""
    from scipy import stats  # deferred: scipy.stats takes about 1 s to import; `bench runs` never needs it

    if np.isscalar(margin):
        low, high = -float(margin), float(margin)  # type: ignore[arg-type]
    else:
        low, high = float(margin[0]), float(margin[1])  # type: ignore[index]
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"TOST margin must be a positive number or (low, high) with low < high, got {margin!r}")
    _check_level(alpha, "alpha")
    if not float(alpha) < 0.5:
        raise ValueError(f"TOST alpha must lie in (0, 0.5), got {alpha!r}")
    d = _finite_1d(diffs, "diffs")
    level = 1.0 - 2.0 * alpha
    inner = _t_test(d, 0.0, "two-sided", level, None, "TOST", "difference")
    if not inner.tested:
        return replace(inner, statistic=None, alternative="equivalence")
    n = int(d.size)
    e = math.frexp(float(np.max(np.abs(d))))[1]
    with np.errstate(over="ignore", under="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ds = np.ldexp(d, -e)
        r_lo = stats.ttest_1samp(ds, float(np.ldexp(low, -e)), alternative="greater")   # H0: mean <= low
        r_hi = stats.ttest_1samp(ds, float(np.ldexp(high, -e)), alternative="less")     # H0: mean >= high
    binding = r_lo if float(r_lo.pvalue) >= float(r_hi.pvalue) else r_hi
    p, reason = _positive_p(max(float(r_lo.pvalue), float(r_hi.pvalue)))
    return TestResult("TOST", inner.estimate, inner.lo, inner.hi, level, p, n, reason=reason,
                      statistic=float(binding.statistic), df=float(n - 1), alternative="equivalence")


def _centred_ranks(v: np.ndarray) -> np.ndarray:
    """``2 * rank - (n + 1)`` with average ranks for ties: integers (float64), so sums of their products are exact."""
    from scipy import stats  # deferred: scipy.stats takes about 1 s to import; `bench runs` never needs it

    return 2.0 * stats.rankdata(v, method="average") - (v.size + 1)


def spearman_test(x: Sequence[float], y: Sequence[float], level: float = 0.95, resamples: int = 9999,
                  seed: int = 0, alternative: str = "two-sided") -> TestResult:
    """Spearman's rank correlation (average ranks for ties; the value of ``scipy.stats.spearmanr(x, y).statistic``)
    with a permutation test of the pairing and a Fisher-z interval.

    * p: permutation test of the pairing (``scipy.stats.permutation_test`` with ``permutation_type="pairings"``,
      permuting the x ranks against the y ranks; scipy's p: two-sided ``2 * min`` of the one-sided fractions, capped at
      1). Exact, over all ``n!`` pairings, when ``n <= 8`` (or ``resamples >= n!``); ``p_floor`` is then the smallest
      p attainable from that null distribution (``2 * min(#pairings at the minimum, #at the maximum) / n!``
      two-sided). Otherwise Monte Carlo with ``resamples`` random pairings from ``numpy.random.default_rng(seed)``,
      ``p = (#as extreme + 1) / (resamples + 1)`` per side (Phipson & Smyth 2010), so ``p_floor = 1 / (resamples + 1)``
      one-sided and ``2 / (resamples + 1)`` two-sided. Before resampling the pairs are sorted lexicographically by
      ``(x, y)``, so the result does not depend on the order of the input pairs, and equal calls give equal p.
    * interval: Fisher's z = atanh(rho) with the Bonett & Wright (2000, Psychometrika 65) standard error
      ``sqrt((1 + rho^2 / 2) / (n - 3))``, normal quantile, back-transformed with tanh: inside [-1, 1] and containing
      rho (``|rho| = 1``: the point ``[rho, rho]``). Needs ``n >= 4``.
    * Fewer than 3 pairs, or a constant x or y: no test (``reason`` says which).

    rho is computed from the exact integer sums of centred ranks (equal to ``spearmanr`` up to rounding; exactly
    ``±1`` for a perfectly monotone pairing)."""
    from scipy import stats  # deferred: scipy.stats takes about 1 s to import; `bench runs` never needs it

    _check_level(level)
    _check_alternative(alternative)
    if int(resamples) < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples!r}")
    resamples = int(resamples)
    xa, ya = _finite_1d(x, "x"), _finite_1d(y, "y")
    if xa.size != ya.size:
        raise ValueError(f"spearman_test needs x and y of the same length, got {xa.size} and {ya.size}")
    n = int(xa.size)
    proc = "Spearman (permutation)"
    if n < 2:
        return TestResult(proc, float("nan"), None, None, level, None, n, reason="fewer than 3 pairs",
                          alternative=alternative)
    x_const, y_const = np.ptp(xa) == 0.0, np.ptp(ya) == 0.0
    if x_const or y_const:
        which = "x and y are" if x_const and y_const else ("x is" if x_const else "y is")
        return TestResult(proc, float("nan"), None, None, level, None, n, reason=f"{which} constant: no rank correlation",
                          alternative=alternative)
    order = np.lexsort((ya, xa))  # by x, then y: equal pairs are interchangeable, so the sorted data are canonical
    rx, ry = _centred_ranks(xa[order]), _centred_ranks(ya[order])
    sxy = int(np.dot(rx, ry))
    sxx, syy = int(np.dot(rx, rx)), int(np.dot(ry, ry))
    root = math.isqrt(sxx * syy)
    if root * root == sxx * syy:
        rho = sxy / root
    else:
        rho = sxy / math.sqrt(sxx * syy)
    rho = max(-1.0, min(1.0, rho))
    if n < 3:
        return TestResult(proc, rho, None, None, level, None, n, reason="fewer than 3 pairs", statistic=rho,
                          alternative=alternative)

    def dot(xr: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.sum(xr * ry, axis=axis)

    exact = n <= _EXACT_PERMUTATION_MAX_N or resamples >= math.factorial(n)
    rng = np.random.default_rng(seed)
    # scipy >= 1.15 names the generator `rng`; 1.10-1.14 (pyproject allows scipy >= 1.10) `random_state`
    rng_kw = "rng" if "rng" in inspect.signature(stats.permutation_test).parameters else "random_state"
    batch = None if exact else max(1, min(resamples, 1_000_000 // n))  # memory only: results do not depend on it
    res = stats.permutation_test((rx,), dot, permutation_type="pairings", vectorized=True,
                                 n_resamples=np.inf if exact else resamples, batch=batch, alternative=alternative,
                                 **{rng_kw: rng})
    if exact:
        null = np.asarray(res.null_distribution)
        total = null.size
        at_min, at_max = int(np.count_nonzero(null == null.min())), int(np.count_nonzero(null == null.max()))
        floor = {"two-sided": 2 * min(at_min, at_max), "greater": at_max, "less": at_min}[alternative] / total
    else:
        floor = (2.0 if alternative == "two-sided" else 1.0) / (resamples + 1)
    floor = min(1.0, floor)
    p = float(res.pvalue)
    lo: float | None
    hi: float | None
    reason: str | None
    if n >= 4:
        if abs(rho) == 1.0:
            lo = hi = rho
        else:
            zc = float(stats.norm.ppf(0.5 + level / 2.0))
            z, se = math.atanh(rho), math.sqrt((1.0 + rho * rho / 2.0) / (n - 3))
            lo, hi = min(math.tanh(z - zc * se), rho), max(math.tanh(z + zc * se), rho)
        reason = None
    else:
        lo = hi = None
        reason = "no interval below 4 pairs (Fisher z needs n - 3 > 0)"
    return TestResult(proc, rho, lo, hi, level, p, n, reason=reason, p_floor=floor, statistic=rho,
                      alternative=alternative)


def _canonical_units(units: Sequence[Any]) -> list[Any]:
    """The units as Python floats (every unit a number) or float64 arrays (one per unit), in a canonical order: by
    size, then values, then sign bits (so that -0.0 and 0.0 are ordered too). Units with equal keys are identical, so
    anything computed from the sorted list does not depend on the order the caller gave. ValueError for a value that
    is not finite."""
    items = list(units)
    if all(np.ndim(u) == 0 for u in items):
        vals = _finite_1d([float(u) for u in items], "units")
        keyed = sorted(((float(v), bool(np.signbit(v))) for v in vals))
        return [v for v, _ in keyed]
    arrays = []
    for i, u in enumerate(items):
        a = np.atleast_1d(np.asarray(u, dtype=np.float64))
        if not np.all(np.isfinite(a)):
            raise ValueError(f"units must be finite: unit {i} holds a value that is not finite")
        arrays.append(a)
    arrays.sort(key=lambda a: (a.shape, a.ravel().tolist(), np.signbit(a).ravel().tolist()))
    return arrays


def _stat_value(statistic: Callable[[list[Any]], float], units: list[Any], where: str) -> float:
    v = float(statistic(units))
    if not math.isfinite(v):
        raise ValueError(f"statistic returned {v!r} on {where}; it must be finite")
    return v


def _units_start(units: Sequence[Any], statistic: Callable[[list[Any]], float], level: float, null: float | None,
                 proc: str) -> TestResult | tuple[list[Any], int, float, float | None]:
    """What :func:`jackknife_test` and :func:`bootstrap_test` do first: check ``level`` and ``null``, put the units in
    their canonical order and take the estimate; fewer than 2 units is the finished result (no interval, no test)."""
    _check_level(level)
    if null is not None:
        null = _check_finite_scalar(null, "null")
    us = _canonical_units(units)
    n = len(us)
    if n < 2:
        est = _stat_value(statistic, us, "the units") if n else float("nan")
        return TestResult(proc, est, None, None, level, None, n, reason="fewer than 2 units")
    return us, n, _stat_value(statistic, us, "the units"), null


def jackknife_test(units: Sequence[Any], statistic: Callable[[list[Any]], float], level: float = 0.95,
                   null: float | None = None) -> TestResult:
    """Delete-one-unit jackknife (Efron & Tibshirani 1993, *An Introduction to the Bootstrap*, ch. 11).

    ``units``: per-unit values or one array per independent unit; ``statistic``: a symmetric function of a list of
    units (floats, or float64 arrays) returning a float. With ``theta_(i)`` the statistic without unit ``i`` and
    pseudo-values ``n theta - (n - 1) theta_(i)``, the standard error is ``sd(pseudo-values) / sqrt(n)``
    ``= sqrt((n - 1) / n * sum (theta_(i) - mean theta_(.))^2)``. Interval: ``theta ± t_{(1+level)/2, n-1} SE`` around
    the full-sample estimate (so it contains it); ``null`` given: two-sided ``t = (theta - null) / SE`` with ``n - 1``
    degrees of freedom. For the mean this is exactly the one-sample t-test and interval. Zero SE (every leave-one-out
    statistic equal, up to a rounding-level spread below ``1e-12`` of their magnitude) or fewer than 2 units: no
    test."""
    from scipy import stats  # deferred: scipy.stats takes about 1 s to import; `bench runs` never needs it

    proc = "jackknife"
    start = _units_start(units, statistic, level, null, proc)
    if isinstance(start, TestResult):
        return start
    us, n, est, null = start
    loo = np.array([_stat_value(statistic, us[:i] + us[i + 1:], f"the units without unit {i}") for i in range(n)])
    if _rounding_spread(loo):
        return TestResult(proc, est, est, est, level, None, n,
                          reason=_every("leave-one-out statistic", loo[0], np.ptp(loo) > 0.0), df=float(n - 1))
    dev = loo - loo.mean()
    m = float(np.max(np.abs(dev)))
    se = m * math.sqrt((n - 1) / n * float(np.sum((dev / m) ** 2)))  # scaled: no underflow of tiny deviations
    if not se > 0.0:
        return TestResult(proc, est, est, est, level, None, n, reason=_every("leave-one-out statistic", loo[0]),
                          df=float(n - 1))
    half = float(stats.t.ppf(0.5 + level / 2.0, n - 1)) * se
    lo, hi = min(est - half, est), max(est + half, est)
    if null is None:
        return TestResult(proc, est, lo, hi, level, None, n, reason="no null value given: interval only",
                          df=float(n - 1))
    t = (est - null) / se
    p, reason = _positive_p(2.0 * float(stats.t.sf(abs(t), n - 1)))
    return TestResult(proc, est, lo, hi, level, p, n, reason=reason, statistic=t, df=float(n - 1))


def bootstrap_test(units: Sequence[Any], statistic: Callable[[list[Any]], float], level: float = 0.95,
                   resamples: int = 2000, seed: int = 0, null: float | None = None) -> TestResult:
    """Percentile bootstrap over independent units (Efron & Tibshirani 1993, ch. 13).

    ``units``: per-unit values, or one array per independent unit (e.g. one photograph's tokens); ``statistic``: a
    symmetric function of a list of units (floats, or float64 arrays) returning a float (a mean, a pooled ratio).
    The units are put in a canonical order (:func:`_canonical_units`), then ``resamples`` resamples of ``n`` units
    with replacement are drawn as ``numpy.random.default_rng(seed).integers(0, n, (resamples, n))`` (the draws
    ``scipy.stats.bootstrap`` makes) and the interval is the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles
    (linear interpolation) of the resampled statistics: for the mean, ``scipy.stats.bootstrap(method="percentile")``.

    If that interval does not contain the estimate (a biased statistic: one that depends on duplicates, e.g. a
    nearest-neighbour distance), the delete-one-unit jackknife (:func:`jackknife_test`) is returned instead, with
    ``reason = "percentile interval excluded the estimate; jackknife used"``.

    ``null`` given: two-sided bootstrap p ``= min(1, 2 min(#(theta* <= null) + 1, #(theta* >= null) + 1) / (B + 1))``
    with ``B = resamples``, so ``p_floor = 2 / (B + 1)``. Every resampled statistic equal (up to rounding): no test.
    Fewer than 2 units: no interval, no test."""
    if int(resamples) < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples!r}")
    resamples = int(resamples)
    proc = "bootstrap (percentile)"
    start = _units_start(units, statistic, level, null, proc)
    if isinstance(start, TestResult):
        return start
    us, n, est, null = start
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    theta = np.array([_stat_value(statistic, [us[i] for i in row], "a resample") for row in idx.tolist()])
    a = (1.0 - level) / 2.0
    lo, hi = (float(v) for v in np.quantile(theta, [a, 1.0 - a]))
    if not lo <= est <= hi:
        jk = jackknife_test(us, statistic, level, null)
        why = "percentile interval excluded the estimate; jackknife used"
        return replace(jk, reason=why if jk.reason is None else f"{why}; {jk.reason}")
    if _rounding_spread(theta):
        return TestResult(proc, est, lo, hi, level, None, n,
                          reason=_every("resampled statistic", theta[0], np.ptp(theta) > 0.0))
    if null is None:
        return TestResult(proc, est, lo, hi, level, None, n, reason="no null value given: interval only")
    below, above = int(np.count_nonzero(theta <= null)), int(np.count_nonzero(theta >= null))
    p = min(1.0, 2.0 * min(below + 1, above + 1) / (resamples + 1))
    return TestResult(proc, est, lo, hi, level, p, n, p_floor=min(1.0, 2.0 / (resamples + 1)))


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values (:func:`holm_adjust`, Holm 1979) of the tested claims, in the order given.
    None (a claim with no test, e.g. zero variance) stays None and does not enter the family: ``m`` is the number of
    p-values that are not None, since an untested claim can neither be rejected nor inflate the family-wise error."""
    ps = list(pvalues)
    idx = [i for i, p in enumerate(ps) if p is not None]
    adjusted = holm_adjust([float(ps[i]) for i in idx])  # type: ignore[arg-type]
    out: list[float | None] = [None] * len(ps)
    for i, q in zip(idx, adjusted):
        out[i] = q
    return out


def _ceil_2sig(v: float) -> str:
    """``v`` rounded *up* to 2 significant digits, printed: a floor printed this way is still a true bound."""
    k = math.floor(math.log10(v)) - 1
    c = math.ceil(v / 10.0 ** k * (1.0 - 1e-12)) * 10.0 ** k
    return f"{c:.2g}"


def format_p(p: float | None, p_floor: float | None = None) -> str:
    """A p-value as printed in the reports: ``"no test"`` for None, ``"p ≤ 0.0005 (floor)"`` when p is the procedure's
    floor (the floor rounded up to 2 significant digits), ``"p < 0.0001"`` below 1e-4, else ``"p = 0.0123"``."""
    if p is None:
        return "no test"
    if p_floor is not None and p <= p_floor * (1.0 + 1e-9):
        return f"p ≤ {_ceil_2sig(p_floor)} (floor)"
    if p < 1e-4:
        return "p < 0.0001"
    return f"p = {p:.4f}"


class PairedSummary(NamedTuple):
    """What the leaderboard prints for a row against its reference: the mean per-seed difference, its 95 %
    Student-t interval, the paired t-test p (``None``: no test, e.g. zero variance) and whether the difference is
    significant (the interval excludes 0 and p < 0.05; never from a p that does not exist)."""

    mean: float
    lo: float
    hi: float
    p: float | None
    significant: bool
    reason: str | None


def paired_summary(diffs: Sequence[float], level: float = 0.95) -> PairedSummary | None:
    """:func:`mean_test` of per-seed differences against 0, as the leaderboard's Δ cells print it; None below 2
    finite differences. Zero variance is no test (``p`` None, not significant)."""
    d = [float(x) for x in diffs if x is not None and math.isfinite(x)]
    if len(d) < 2:
        return None
    r = mean_test(d, level=level)
    assert r.lo is not None and r.hi is not None
    significant = r.p is not None and r.p < 1.0 - level and (r.lo > 0.0 or r.hi < 0.0)
    return PairedSummary(r.estimate, r.lo, r.hi, r.p, significant, r.reason)


__all__ += ["PairedSummary", "paired_summary"]

"""Statistics of the leaderboard and the study reports: intervals over seeds and paired comparisons.

The intervals every table and verdict uses are Student-t intervals (:func:`t_mean_ci`,
:func:`paired_t_interval`): with the 3-5 seeds of the committed studies the percentile bootstrap
below cannot reach outside the seeds' own range (with 3 seeds its 95 % interval is the [min, max]
of the seeds), so it is kept only for comparison and is never printed as a 95 % interval.

* :func:`t_mean_ci`: ``mean ± t_{0.975, n-1} · sd / sqrt(n)`` (sd with ddof = 1), None below 2 values;
  clipped to a bounded metric's range when given one (accuracies, mAP: [0, 1]).
* :func:`paired_t_interval`: the same interval for the mean of per-seed differences, with the paired
  t-test of the same differences; ``significant`` needs both (the interval excludes 0 *and* p < 0.05,
  which for the two-sided t at the same level is the same condition, asserted rather than assumed).

* :func:`bootstrap_mean_ci`: percentile bootstrap interval of the mean over seeds (Efron &
  Tibshirani 1993, ch. 13): resample the ``n`` seed values with replacement ``resamples`` times,
  take the 2.5 % and 97.5 % quantiles (numpy's linear interpolation) of the resampled means.
  The generator is ``numpy.random.default_rng(seed)`` with a fixed seed, so equal inputs give
  equal bytes.
* :func:`paired_bootstrap`: the same interval for the mean of per-seed *differences*. With few
  seeds the percentile bootstrap is liberal (it cannot see tails it never sampled); kept for
  comparison, not used by the leaderboard or the reports.
* :func:`sign_flip_p`: exact two-sided sign-flip permutation test of the mean per-seed difference
  (under H0 each difference is symmetric about 0): the fraction of the ``2^n`` sign patterns
  whose |mean| is at least the observed one. Its smallest possible value is ``2 / 2^n``, i.e.
  0.0625 with 5 seeds, so at 5 % it needs at least 6 paired seeds.
* :func:`paired_t_p`: two-sided paired t-test of the mean per-seed difference (``scipy.stats.ttest_1samp``
  on the differences). It assumes roughly normal differences but, unlike the sign-flip test, can
  reach p < 0.05 with 5 seeds. :func:`paired_t_interval` pairs it with the t-interval; the leaderboard
  marks a difference significant (``*``) only when both agree.

Families and equivalence (issue #44; used by the reports):

* :func:`holm_adjust`: Holm-Bonferroni adjusted p-values of a family of ``m`` tests (Holm 1979, "A simple
  sequentially rejective multiple test procedure", Scand. J. Statist. 6): with the p-values sorted,
  ``p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))``; rejecting where ``p~ <= alpha`` is Holm's step-down
  procedure at family-wise error rate ``alpha``.
* :func:`tost_paired`: two one-sided tests (Schuirmann 1987, J. Pharmacokin. Biopharm. 15) that the mean of
  per-seed differences lies inside the equivalence margin ``(-margin, +margin)``: Student-t tests of
  ``H0: mean <= -margin`` and ``H0: mean >= +margin``; ``p = max`` of the two, equivalent when ``p < alpha``,
  which is the same as the ``1 - 2 alpha`` t-interval lying inside the margin.
"""
from __future__ import annotations

import itertools
import math
from typing import Mapping, NamedTuple, Sequence

import numpy as np

__all__ = ["BOOTSTRAP_RESAMPLES", "BOOTSTRAP_SEED", "t_mean_ci", "paired_t_interval", "bootstrap_mean_ci",
           "paired_differences", "paired_bootstrap", "sign_flip_p", "paired_t_p", "holm_adjust", "Tost",
           "tost_paired"]

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
_EXACT_MAX_N = 20  # 2^20 sign patterns; above, a Monte-Carlo estimate with the fixed seed


def t_mean_ci(values: Sequence[float], level: float = 0.95,
              bounds: tuple[float, float] | None = None) -> tuple[float, float] | None:
    """Student-t interval of the mean of ``values``; None when ``n < 2`` or a value is not finite.
    All values equal: the point (no spread to widen it). ``bounds``: the range the metric cannot
    leave (an accuracy's ``(0, 1)``); the interval is clipped to it, which keeps its coverage (the
    true mean lies inside the range) and stops it from reading e.g. 101 %."""
    from scipy import stats  # deferred: scipy.stats takes about 1 s to import; `bench runs` never needs it

    x = np.asarray(list(values), dtype=np.float64)
    n = x.size
    if n < 2 or not np.all(np.isfinite(x)):
        return None
    mean = math.fsum(x.tolist()) / n
    if np.ptp(x) == 0.0:
        return mean, mean
    half = float(stats.t.ppf(0.5 + level / 2.0, n - 1)) * float(x.std(ddof=1)) / math.sqrt(n)
    if bounds is not None:
        return max(mean - half, bounds[0]), min(mean + half, bounds[1])
    return mean - half, mean + half


def paired_t_interval(diffs: Sequence[float], level: float = 0.95) -> tuple[float, float, float, float, bool] | None:
    """``(mean difference, lo, hi, t-test p, significant)`` of per-seed differences: the Student-t interval
    of their mean and the two-sided paired t-test; significant when the interval excludes 0 and
    p < 1 - level. None below 2 pairs."""
    ci = t_mean_ci(diffs, level)
    if ci is None:
        return None
    lo, hi = ci
    p = paired_t_p(diffs)
    excludes = bool(lo > 0.0 or hi < 0.0)
    return math.fsum(diffs) / len(diffs), lo, hi, p, excludes and p < 1.0 - level


def bootstrap_mean_ci(values: Sequence[float], level: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
                      seed: int = BOOTSTRAP_SEED) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean of ``values``; None when ``n < 2`` or a value is
    not finite."""
    x = np.asarray(list(values), dtype=np.float64)
    n = x.size
    if n < 2 or not np.all(np.isfinite(x)):
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))  # (R, n) seed indices
    means = x[idx].mean(axis=1)  # (R,)
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [a, 1.0 - a])
    return float(lo), float(hi)


def paired_differences(row: Mapping[int, float | None], reference: Mapping[int, float | None]) -> list[float]:
    """``row[s] - reference[s]`` for every seed ``s`` both report (finite values), by seed."""
    out = []
    for s in sorted(set(row) & set(reference)):
        a, b = row[s], reference[s]
        if a is not None and b is not None and math.isfinite(a) and math.isfinite(b):
            out.append(a - b)
    return out


def paired_bootstrap(diffs: Sequence[float], level: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
                     seed: int = BOOTSTRAP_SEED) -> tuple[float, float, float, bool] | None:
    """``(mean difference, lo, hi, significant)``: percentile bootstrap interval of the mean of
    per-seed differences; significant when it excludes 0. None below 2 pairs."""
    ci = bootstrap_mean_ci(diffs, level, resamples, seed)
    if ci is None:
        return None
    lo, hi = ci
    return math.fsum(diffs) / len(diffs), lo, hi, bool(lo > 0.0 or hi < 0.0)


def sign_flip_p(diffs: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> float:
    """Two-sided sign-flip permutation p-value of ``mean(diffs) = 0`` (exact up to 20 pairs)."""
    d = np.asarray(list(diffs), dtype=np.float64)
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
    return float(np.mean(stats >= obs - tol))


def paired_t_p(diffs: Sequence[float]) -> float:
    """Two-sided paired t-test p-value of ``mean(diffs) = 0``; NaN below 2 pairs. All differences equal:
    0 when they are non-zero (no spread to doubt them), 1 when they are 0."""
    from scipy import stats  # deferred: scipy.stats takes about 1 s to import; `bench runs` never needs it

    d = np.asarray(list(diffs), dtype=np.float64)
    if d.size < 2:
        return float("nan")
    if np.ptp(d) == 0.0:
        return 0.0 if d[0] != 0.0 else 1.0
    return float(stats.ttest_1samp(d, 0.0).pvalue)


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


class Tost(NamedTuple):
    """Result of :func:`tost_paired`: mean difference, the ``1 - 2 alpha`` t-interval ``(lo, hi)``, the one-sided
    p-values against the lower and upper margin, ``p = max`` of them, and the verdict ``p < alpha``."""

    mean: float
    lo: float
    hi: float
    p_lower: float
    p_upper: float
    p: float
    equivalent: bool


def tost_paired(diffs: Sequence[float], margin: float | tuple[float, float], alpha: float = 0.05) -> Tost | None:
    """TOST equivalence test of per-seed differences against the margin (module docstring): ``margin`` a
    positive number (the interval ``(-margin, margin)``) or ``(low, high)`` with ``low < high``. None below 2
    finite differences. All differences equal (no spread): the mean is known exactly, so ``p`` is 0 inside the
    margin and 1 outside."""
    from scipy import stats  # deferred: scipy.stats takes about 1 s to import; `bench runs` never needs it

    low, high = (-float(margin), float(margin)) if np.isscalar(margin) else (float(margin[0]), float(margin[1]))
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"TOST margin must be a positive number or (low, high) with low < high, got {margin!r}")
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"TOST alpha must lie in (0, 0.5), got {alpha!r}")
    d = np.asarray(list(diffs), dtype=np.float64)
    if d.size < 2 or not np.all(np.isfinite(d)):
        return None
    n = d.size
    mean = math.fsum(d.tolist()) / n
    if np.ptp(d) == 0.0:
        p_lo, p_hi = (0.0 if mean > low else 1.0), (0.0 if mean < high else 1.0)
        return Tost(mean, mean, mean, p_lo, p_hi, max(p_lo, p_hi), max(p_lo, p_hi) < alpha)
    se = float(d.std(ddof=1)) / math.sqrt(n)
    t = stats.t(n - 1)
    p_lo = float(t.sf((mean - low) / se))    # H0: mean <= low
    p_hi = float(t.cdf((mean - high) / se))  # H0: mean >= high
    half = float(t.ppf(1.0 - alpha)) * se
    p = max(p_lo, p_hi)
    return Tost(mean, mean - half, mean + half, p_lo, p_hi, p, p < alpha)

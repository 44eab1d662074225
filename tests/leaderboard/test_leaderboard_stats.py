"""Leaderboard statistics: bootstrap intervals, paired significance, and how the table shows them."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from scipy import stats

from pebench.leaderboard import collect_results, render_leaderboard
from pebench.leaderboard.stats import (
    paired_differences,
    paired_summary,
    sign_flip_p,
    t_mean_ci,
)


def test_paired_differences_pair_by_seed():
    row = {0: 0.9, 1: 0.8, 2: None, 4: 0.7}
    ref = {0: 0.5, 1: 0.6, 2: 0.4, 3: 0.3, 4: float("nan")}
    assert paired_differences(row, ref) == pytest.approx([0.4, 0.2])


def test_sign_flip_is_exact():
    d = [0.3, -0.1, 0.2, 0.05]
    obs = abs(np.mean(d))
    ref = np.mean([abs(np.mean(np.array(s) * d)) >= obs - 1e-12 for s in itertools.product((1, -1), repeat=4)])
    assert sign_flip_p(d) == pytest.approx(ref)
    assert sign_flip_p([1.0] * 5) == pytest.approx(2 / 32)  # 5 seeds can never reach p < 0.05
    assert sign_flip_p([0.0, 0.0]) == 1.0


def _write(root, dataset, pe, seed, acc, **extra):
    d = root / dataset / pe / "vit-nano" / f"seed{seed}"
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps({
        "dataset": dataset, "pe": pe, "model": "vit-nano", "seed": seed, "task": "classification",
        "status": "complete", "primary_metric": "test/acc1", "metrics": {"test/acc1": acc}, **extra}))


def _row(text, label):
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) > 2 and cells[1] == label:
            return cells
    raise AssertionError(label)


def _header(text):
    return [c.strip() for c in next(l for l in text.splitlines() if l.startswith("| Model")).strip("|").split("|")]


def test_table_shows_interval_and_marker(tmp_path):
    none = [0.25, 0.26, 0.24, 0.25, 0.27, 0.25]
    rope = [0.90, 0.92, 0.88, 0.91, 0.93, 0.90]
    ape = [0.30, 0.20, 0.28, 0.22, 0.27, 0.24]
    for s in range(6):
        _write(tmp_path, "probe-x", "none", s, none[s])
        _write(tmp_path, "probe-x", "rope-axial", s, rope[s])
        _write(tmp_path, "probe-x", "ape", s, ape[s])
    runs, problems = collect_results(tmp_path)
    text = render_leaderboard(runs, problems)
    head = _header(text)
    ci, delta = head.index("test/acc1 95% t-CI"), head.index("Δtest/acc1 vs none")
    lo, hi = t_mean_ci(rope)
    assert _row(text, "rope-axial")[ci] == f"[{lo * 100:.1f}, {hi * 100:.1f}]"
    assert _row(text, "none")[delta] == "(reference)"
    t_p = stats.ttest_rel(rope, none).pvalue
    assert _row(text, "rope-axial")[delta].endswith(f"p=0.031 t-p={t_p:.3f}*")
    assert _row(text, "rope-axial")[delta].startswith(f"+{(np.mean(rope) - np.mean(none)) * 100:.1f} [")
    assert not _row(text, "ape")[delta].endswith("*")
    assert "No-PE ceiling" not in text  # probe-x is not a registered probe
    # another reference; a reference no row has: the delta column says so; deterministic bytes
    assert "Δtest/acc1 vs ape" in render_leaderboard(runs, problems, reference="ape")
    missing = render_leaderboard(runs, problems, reference="lookhere")
    assert _row(missing, "ape")[_header(missing).index("Δtest/acc1 vs lookhere")] == "no lookhere row"
    # a comma list: each table takes the first reference it has
    fallback = render_leaderboard(runs, problems, reference="lookhere,ape,none")
    assert "Δtest/acc1 vs ape" in fallback and "Δtest/acc1 vs none" not in fallback
    assert _row(fallback, "ape")[_header(fallback).index("Δtest/acc1 vs ape")] == "(reference)"
    assert render_leaderboard(runs, problems) == text


def test_probe_sections_state_the_no_pe_ceiling(tmp_path):
    """The ceiling is the one bench run recorded (``dataset_info.no_pe_bound``); sections of runs that
    recorded none (other datasets, older files) state none."""
    for s in range(2):
        _write(tmp_path, "probe-decay", "rope-axial", s, 0.8 + 0.01 * s, dataset_info={"no_pe_bound": 0.5})
        _write(tmp_path, "probe-context", "rope-axial", s, 0.8, dataset_info={"no_pe_bound": 1 / 3})
        _write(tmp_path, "shapes", "rope-axial", s, 0.8, dataset_info={"no_pe_bound": None})
        _write(tmp_path, "probe-old", "rope-axial", s, 0.8)
    text = render_leaderboard(*collect_results(tmp_path))
    notes = {line.split("## ", 1)[1]: next(l for l in text.split(line, 1)[1].splitlines() if l.startswith("Task:"))
             for line in text.splitlines() if line.startswith("## ")}
    ceiling = " No-PE ceiling of the test split (exact: no function of the multiset of patch contents does better): "
    assert notes["probe-decay"].endswith(ceiling + "50.0 %.") and notes["probe-context"].endswith(ceiling + "33.3 %.")
    assert "No-PE ceiling" not in notes["shapes"] and "No-PE ceiling" not in notes["probe-old"]


def test_t_interval_matches_scipy_and_agrees_with_the_t_test():
    vals = [0.61, 0.72, 0.55, 0.80, 0.66]
    lo, hi = t_mean_ci(vals)
    ref = stats.t.interval(0.95, len(vals) - 1, loc=np.mean(vals), scale=stats.sem(vals))
    assert (lo, hi) == pytest.approx(ref, abs=1e-12)
    assert t_mean_ci([0.4]) is None and t_mean_ci([0.5, 0.5]) == (0.5, 0.5)
    # with 3 seeds the t-interval reaches past the seeds' range (a percentile bootstrap cannot)
    lo3, hi3 = t_mean_ci([0.2, 0.3, 0.4])
    assert lo3 < 0.2 and hi3 > 0.4
    for d in ([0.1, 0.2, 0.15, 0.12, 0.3], [0.3, -0.28, 0.25, -0.3, 0.02], [0.05, 0.01, 0.04]):
        mean, lo, hi, p, sig, _ = paired_summary(d)
        assert sig == (lo > 0 or hi < 0) == (p < 0.05)

    # a bounded metric's interval is clipped to its range; an inner interval is untouched
    near_one = [1.0, 0.98, 1.0, 0.9, 1.0]
    raw = stats.t.interval(0.95, 4, loc=np.mean(near_one), scale=stats.sem(near_one))
    assert raw[1] > 1.0 and t_mean_ci(near_one, bounds=(0.0, 1.0)) == pytest.approx((raw[0], 1.0), abs=1e-12)
    assert t_mean_ci(vals, bounds=(0.0, 1.0)) == t_mean_ci(vals)


def test_leaderboard_clips_a_percentage_interval_at_100(tmp_path):
    """The 95% t-CI column and the JSON export of an accuracy never pass 100 %."""
    for s, acc in enumerate((1.0, 0.98, 1.0, 0.9, 1.0)):
        _write(tmp_path, "shapes-x", "none", s, acc, metrics={"test/acc1": acc})
    runs, problems = collect_results(tmp_path)
    row = next(line for line in render_leaderboard(runs, problems).splitlines() if line.startswith("| vit"))
    assert ", 100.0]" in row and "[" in row


def test_top_k_at_or_above_the_class_count_is_left_out(tmp_path):
    """A 4-class probe logs acc4 (= 1 by construction): no column; a real top-5 of 8 classes stays."""
    for s in range(2):
        _write(tmp_path, "probe-x", "none", s, 0.25, metrics={"test/acc1": 0.25, "test/acc4": 1.0})
        _write(tmp_path, "shapes-x", "none", s, 0.5, metrics={"test/acc1": 0.5, "test/acc5": 0.9 + 0.05 * s})
    runs, problems = collect_results(tmp_path)
    text = render_leaderboard(runs, problems)
    assert "test/acc4" not in text and "test/acc5 (%)" in text


def test_monte_carlo_sign_flip_is_never_zero_and_order_free():
    from pebench.leaderboard.stats import sign_flip_p

    d = [0.5 + 0.01 * i for i in range(30)]  # far from 0: no random pattern reaches it
    p = sign_flip_p(d, resamples=999)
    assert p == pytest.approx(1 / 1000) and p > 0
    rng = np.random.default_rng(1)
    e = rng.normal(0.1, 1.0, 25).tolist()
    assert sign_flip_p(e) == sign_flip_p(list(reversed(e))) == sign_flip_p(sorted(e))

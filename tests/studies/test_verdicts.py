"""benchmarks/verdicts.py: the weights a verdict names come from the runs' configs, and a family adjusts what
its first pass recorded (Holm, pebench.leaderboard.stats.holm_adjust)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from benchmarks.verdicts import FWER, selection, two_pass


def _run(ckpt):
    return SimpleNamespace(raw={"config": {} if ckpt is None else {"eval_checkpoint": ckpt}})


def test_selection_reads_eval_checkpoint_with_last_as_the_old_default():
    assert selection([_run("best"), _run("best")]) == "best-val checkpoint"
    assert selection([_run(None), _run("last")]) == "last-step weights"
    assert selection([_run("best"), _run(None)]) == "best-val / last-step weights"


def test_family_adjusts_in_the_order_recorded_and_rejects_at_the_fwer():
    raw = [0.01, 0.04, 0.03, 0.005]

    def compute(fam):
        return [fam.p(p) for p in raw]

    adjusted, fam = two_pass("t", compute)
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02]) and fam.m == 4
    assert [a < FWER for a in adjusted] == [True, False, False, True]
    assert "the 4 tests" in fam.rule()


def test_second_pass_must_run_every_test():
    n = iter([2, 1])

    def compute(fam):
        return [fam.p(0.01) for _ in range(next(n))]

    with pytest.raises(RuntimeError, match="ran 1 of 2 tests"):
        two_pass("t", compute)

"""Families of verdicts in the study reports (issue #44, item 3): each report's tests with a p-value are one
family, controlled by Holm-Bonferroni at :data:`FWER` family-wise (``pebench.leaderboard.stats.holm_adjust``;
Holm 1979, Scand. J. Statist. 6), and a verdict other than *inconclusive* needs its adjusted p below it.

A report computes its verdicts twice with one :class:`Family`: the first pass only collects the raw p-values
(:meth:`Family.p` hands each one back and the text is discarded), :meth:`Family.close` adjusts them, and the
second pass, which computes the same tests in the same order, gets each test's adjusted p from
:meth:`Family.p` and writes the verdicts from it (:func:`two_pass`). A second pass that computes another
sequence of p-values is an error, not a silent mismatch.

:func:`basis` is the clause every verdict carries: the checkpoint its accuracies come from, the seeds it
reads and whether they were selected after training (only seeds that learned: post-selection), and, below
:data:`MIN_SEEDS`, that the verdict is provisional.
"""
from __future__ import annotations

from typing import Callable, TypeVar

from pebench.leaderboard.stats import holm_adjust

__all__ = ["FWER", "MIN_SEEDS", "Family", "two_pass", "basis", "fmt_p", "selection"]

#: family-wise error rate of every report's family
FWER = 0.05
#: seeds a cell needs before a verdict on it is more than provisional (the issue's rule; the committed
#: sweeps ran 3-5 seeds per cell, which their CPU budgets allowed)
MIN_SEEDS = 10

T = TypeVar("T")


class Family:
    """The raw p-values of one report's tests in the order computed, then their Holm-adjusted values."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.raw: list[float] = []
        self.adjusted: list[float] | None = None
        self._i = 0

    @property
    def m(self) -> int:
        return len(self.raw)

    def p(self, raw: float) -> float:
        """First pass: record ``raw`` and return it. Second pass: the adjusted p of the test at this position
        (``RuntimeError`` when the test is not the one the first pass recorded there)."""
        raw = float(raw)
        if self.adjusted is None:
            self.raw.append(raw)
            return raw
        i, self._i = self._i, self._i + 1
        if i >= self.m or self.raw[i] != raw:
            raise RuntimeError(f"family {self.name!r}: test {i} of the second pass is not the first pass's")
        return self.adjusted[i]

    def close(self) -> None:
        """Adjust the recorded p-values (Holm) and start the second pass."""
        self.adjusted = holm_adjust(self.raw)
        self._i = 0

    def rule(self) -> str:
        """The family in one sentence, for the report."""
        return (f"**Multiplicity:** the {self.m} tests with a p-value below form one family ({self.name}), "
                f"controlled by Holm–Bonferroni at {100 * FWER:.0f} % family-wise; each shows its raw p and its "
                f"Holm-adjusted p (p_Holm), and a verdict other than *inconclusive* needs p_Holm < {FWER:g}.")


def two_pass(name: str, compute: Callable[[Family], T]) -> tuple[T, Family]:
    """``compute(family)`` run twice (module docstring): the second pass's result, with the family."""
    fam = Family(name)
    compute(fam)
    fam.close()
    out = compute(fam)
    if fam._i != fam.m:
        raise RuntimeError(f"family {name!r}: the second pass ran {fam._i} of {fam.m} tests")
    return out, fam


def fmt_p(raw: float, adjusted: float) -> str:
    """``p = 0.012, p_Holm = 0.31``."""
    return f"p = {raw:.2g}, p_Holm = {adjusted:.2g}"


def basis(n: int, selection: str, post_selection: bool) -> str:
    """The verdict's basis: ``selection`` (e.g. "best-val checkpoint"), the ``n`` seeds it reads (those that
    learned, post-selection, when ``post_selection``) and "provisional" below :data:`MIN_SEEDS` seeds."""
    seeds = f"{n} seed{'s' if n != 1 else ''}" + (" that learned (post-selection)" if post_selection else "")
    return f"{selection}; {seeds}" + (f"; provisional: < {MIN_SEEDS} seeds" if n < MIN_SEEDS else "")


def selection(runs) -> str:
    """The weights the runs' test split read, from their configs' ``eval_checkpoint`` (absent: ``last``, the
    default before the option existed): "best-val checkpoint", "last-step weights", or both when they differ."""
    ckpts = sorted({str((r.raw.get("config") or {}).get("eval_checkpoint") or "last") for r in runs})
    return {("best",): "best-val checkpoint", ("last",): "last-step weights"}.get(tuple(ckpts),
                                                                                 "best-val / last-step weights")

"""Progress inside a long analysis: one line per unit of work, to whoever asked for it.

``bench analyze`` on a 12-block ViT at 224 px spends minutes inside one analysis (issue #50 item 5): the
geometry analysis makes ``1 + 2K`` passes over its probe (the clean pass, ``K`` RPI permutations of the
trained model, ``K`` of its untrained twin), the α sweep one robustness and RPI measurement per α, the
extrapolation one evaluation per input size. Each pass yields every layer of the tap at once (one forward
pass per batch), so a pass, not a layer, is the unit a line reports.

:func:`reporting` installs a reporter (a ``str -> None`` callable) for a block; :class:`Steps` counts an
analysis' units and reports each as ``<analysis>: <unit> i/n (<what>) done in <t> s``; the first line also says what
the remaining units will take at that pace (``bench analyze``'s default protocol says its cost after one pass). With no reporter
installed (``bench run``, the tests, ``bench analyze --no-progress-bar``) nothing is printed or formatted.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["reporting", "Steps"]

_REPORTER: ContextVar[Callable[[str], None] | None] = ContextVar("pebench_analysis_progress", default=None)


@contextmanager
def reporting(reporter: Callable[[str], None] | None) -> Iterator[None]:
    """Send the progress lines of the analyses run inside the block to ``reporter`` (``None``: silence them,
    e.g. the geometry passes nested in one step of the α sweep)."""
    token = _REPORTER.set(reporter)
    try:
        yield
    finally:
        _REPORTER.reset(token)


class Steps:
    """The ``total`` units (``unit``: "pass", "size", ...) of one analysis; :meth:`done` reports each."""

    def __init__(self, analysis: str, total: int, unit: str) -> None:
        self.analysis, self.total, self.unit = analysis, int(total), unit
        self.count = 0
        self.reporter = _REPORTER.get()  # the reporter when the analysis started
        self.t0 = time.perf_counter()

    def done(self, what: str) -> None:
        """One more unit finished: ``what`` says which (e.g. "RPI permutation 2/8, untrained twin")."""
        self.count += 1
        now = time.perf_counter()
        if self.reporter is not None:
            took = now - self.t0
            line = f"{self.analysis}: {self.unit} {self.count}/{self.total} ({what}) done in {took:.1f} s"
            left = self.total - self.count
            if self.count == 1 and left > 0:  # the cost, said once the first unit has measured it
                line += f"; the other {left} {self.unit}(s) will take about {_duration(took * left)}"
            self.reporter(line)
        self.t0 = now


def _duration(seconds: float) -> str:
    """``42 s`` / ``3.5 min`` / ``1.2 h``: an estimate's order of magnitude, not a promise."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"

"""results/alibi-study/REPORT.md is what ``python -m benchmarks.alibi_findings`` prints from the committed
files (the study of ALiBi's options; the options themselves are tested in tests/encodings/test_alibi_options.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "results" / "alibi-study" / "REPORT.md"


@pytest.mark.skipif(not REPORT.exists(), reason="no committed ALiBi study")
def test_committed_alibi_study_report_regenerates():
    """Run as the report says it is made: a module of the benchmarks package, from the repository root."""
    r = subprocess.run([sys.executable, "-m", "benchmarks.alibi_findings"], cwd=REPO, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == REPORT.read_text(encoding="utf-8")

"""results/ddp-agreement/REPORT.md (DDP against one process, the default run) is exactly what
benchmarks/ddp_findings.py writes from the committed runs."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "results" / "ddp-agreement"


def test_ddp_agreement_report_regenerates(tmp_path):
    report = tmp_path / "REPORT.md"
    r = subprocess.run([sys.executable, "-m", "benchmarks.ddp_findings", "--results", str(RESULTS),
                        "--report", str(report)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert report.read_text(encoding="utf-8") == (RESULTS / "REPORT.md").read_text(encoding="utf-8")


def test_agreement_is_claimed_only_through_the_equivalence_test():
    """"equivalent" needs the TOST inside ± EQUIV_MARGIN: small paired differences pass, differences as wide as the
    margin do not, and a single seed is too few."""
    from benchmarks.ddp_findings import EQUIV_MARGIN, _equivalence

    assert "**equivalent**" in _equivalence([0.001, -0.002, 0.003, 0.0, 0.002])
    wide = [EQUIV_MARGIN, -EQUIV_MARGIN, 0.5 * EQUIV_MARGIN, -0.8 * EQUIV_MARGIN, EQUIV_MARGIN]
    assert "**not shown equivalent**" in _equivalence(wide)
    assert "too few" in _equivalence([0.001])
    assert "provisional: 5 < 10 seeds" in _equivalence([0.001, -0.002, 0.003, 0.0, 0.002])

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

"""results/bias-pe-readout/REPORT.md is what ``python -m benchmarks.bias_pe_readout report`` prints from the
committed ``diagnosis.json`` alone (the rpb / fire readout diagnosis; no training here)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "results" / "bias-pe-readout"


@pytest.mark.skipif(not (RESULTS / "diagnosis.json").exists(), reason="no committed rpb / fire readout diagnosis")
def test_bias_pe_readout_report_regenerates():
    """Run as the report says it is made: a module of the benchmarks package, from the repository root."""
    r = subprocess.run([sys.executable, "-m", "benchmarks.bias_pe_readout", "report"], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == (RESULTS / "REPORT.md").read_text(encoding="utf-8")


@pytest.mark.skipif(not (RESULTS / "diagnosis.json").exists(), reason="no committed rpb / fire readout diagnosis")
def test_bias_pe_readout_json_records_its_commit_and_no_machine_paths():
    text = (RESULTS / "diagnosis.json").read_text(encoding="utf-8")
    d = json.loads(text)
    assert re.fullmatch(r"[0-9a-f]{40}", d["provenance"]["commit"])
    assert "/work/" not in text and "/home/" not in text and "/tmp/" not in text
    assert {r["probe"] for r in d["runs"]} <= {"probe-decay", "probe-context"}

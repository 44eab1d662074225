"""Smoke test of ``bench perf detection`` (issue #13): tiny sizes, through the command entry point;
record schema and finite positive ratios only (no timing thresholds)."""
from __future__ import annotations

import json
import math

from pebench.perf import PERF_COMMANDS


def test_perf_detection_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # the suite writes shapes-det into a temp folder, never ~/.cache
    assert "detection" in PERF_COMMANDS
    js, md = tmp_path / "det.json", tmp_path / "det.md"
    assert PERF_COMMANDS["detection"](["--quick", "--json", str(js), "--md", str(md)]) == 0
    rows = [r for r in json.loads(js.read_text()) if not r["name"].startswith("perf wall time")]
    assert [r["name"].split(" ")[:2] for r in rows] == [["detection", "train"], ["detection", "data"]]
    step, data = rows
    for row in rows:
        for key, typ in (("name", str), ("a", str), ("b", str), ("a_value", float), ("b_value", float),
                         ("unit", str), ("ratio", float)):
            assert isinstance(row[key], typ), (key, row)
        assert row["unit"] == "samples/s" and row["higher_is_better"] is True
        assert row["a_value"] > 0 and row["b_value"] > 0 and math.isfinite(row["ratio"]) and row["ratio"] > 0
        assert math.isclose(row["ratio"], row["a_value"] / row["b_value"])
        assert ("target" in row) == ("meets_target" in row)
    assert (step["a"], step["b"]) == ("detection samples/s", "classification samples/s")
    assert "8x8 tokens" in step["name"] and "b4" in step["name"]  # shapes-det side 64, patch 8; tiny batch
    # the loader row's consumer is the detection step measured in the first row
    assert data["b_value"] == step["a_value"] and data["target"] == 1.0
    assert not (tmp_path / ".cache" / "pebench" / "shapes-det").exists()
    text = md.read_text()
    assert "| measurement |" in text and step["name"] in text and data["name"] in text

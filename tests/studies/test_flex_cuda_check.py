"""benchmarks/flex_cuda_check.py on CPU (forward only: torch has no CPU FlexAttention backward): its row for a
bias PE says flex equals the dense reference, and a failing flex is reported, not raised."""
from __future__ import annotations

import pytest
import torch

from benchmarks import flex_cuda_check

pytestmark = pytest.mark.studies


def test_a_cpu_row_compares_flex_with_dense():
    row = flex_cuda_check.check("alibi", 64, torch.device("cpu"))
    assert row["phase"] == "forward" and row["tokens"] == 65 and "flex_error" not in row
    assert 0 <= row["out_rel"] < 1e-5 and row["flex_ms"] > 0 and row["dense_ms"] > 0


def test_a_failing_flex_is_a_row_with_its_error(monkeypatch):
    from pebench.models import attention as attn_mod

    def broken(*args, **kwargs):
        raise RuntimeError("no kernel here\nsecond line")

    monkeypatch.setattr(attn_mod, "_flex", broken)
    row = flex_cuda_check.check("lookhere", 16, torch.device("cpu"))
    assert row["flex_error"] == "RuntimeError: no kernel here" and "out_rel" not in row

"""Capacity before learning (pebench.analysis.probe_capacity): which probe x PE cells a PE cannot represent.

The expected table is written out here from the probes' labels and the PEs' symmetries (module docstring of
probe_capacity; docs/probes.md), not computed from the code under test: a distance-only PE (alibi) cannot
tell a scene from its mirror image, which changes the label of the direction probes, probe-rotation and
probe-anchoring; a relative PE cannot tell a set scene from its translate, which changes probe-set-anchoring's;
``none`` ignores position; an absolute PE (ape) has no such symmetry; rpb needs a raster.
"""
from __future__ import annotations

import pytest

from pebench.analysis.probe_capacity import CAPACITY_PROBES, capacity
from pebench.encodings.registry import get_pe_class

CANVAS = ("probe-translation", "probe-extrapolation", "probe-rotation", "probe-anchoring", "probe-decay",
          "probe-context")
SETS = ("probe-set-translation", "probe-set-extrapolation", "probe-set-anchoring")
MIRROR_BREAKS = {"probe-translation", "probe-extrapolation", "probe-rotation", "probe-anchoring",
                 "probe-set-translation", "probe-set-extrapolation", "probe-set-anchoring"}
SHIFT_BREAKS = {"probe-set-anchoring"}


def expected(probe: str, pe: str) -> str:
    if pe == "none":
        return "cannot represent (position-blind)"
    if pe == "rpb" and probe in SETS:
        return "does not apply"
    if pe == "alibi" and probe in SHIFT_BREAKS:
        return "cannot represent (relative)"  # alibi is relative too; the shift is checked first
    if pe == "alibi" and probe in MIRROR_BREAKS:
        return "cannot represent (rotation-invariant)"
    if pe in ("rope-axial", "rpb") and probe in SHIFT_BREAKS:
        return "cannot represent (relative)"
    return "representable"


def test_probe_list():
    assert set(CAPACITY_PROBES) == set(CANVAS) | set(SETS)


@pytest.mark.parametrize("pe", ["none", "alibi", "rope-axial", "ape", "rpb"])
@pytest.mark.parametrize("probe", CANVAS + SETS)
def test_capacity_table(probe, pe):
    ok, reason = capacity(probe, pe)
    want = expected(probe, pe)
    assert reason.startswith(want), (probe, pe, reason)
    assert ok == (want == "representable")


def test_the_cap_is_rechecked_on_the_model(monkeypatch):
    """A declared symmetry that the untrained model does not have is an error, not a verdict."""
    monkeypatch.setattr(get_pe_class("rope-axial"), "rotation_invariant", True)
    with pytest.raises(RuntimeError, match="declares rotation_invariant"):
        capacity.__wrapped__("probe-rotation", "rope-axial")


def test_pape_ri_is_capped_like_alibi():
    for probe in ("probe-extrapolation", "probe-anchoring", "probe-rotation"):
        ok, reason = capacity(probe, "pape-ri")
        assert not ok and reason.startswith("cannot represent (rotation-invariant)"), (probe, reason)
    assert capacity("probe-decay", "pape-ri").representable


def test_bad_probe():
    with pytest.raises(ValueError, match="capacity covers"):
        capacity("probe-motion", "rope-axial")

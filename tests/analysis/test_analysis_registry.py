"""Analyses registered like PEs (issue #42 item 4): the registry's names, keys, options and selection, and
``run_analyses`` driven by it writing exactly what calling the analysis functions directly with the
former dispatch's arguments writes (byte-identical JSON)."""
from __future__ import annotations

import json
import types
from dataclasses import dataclass

import pytest
import torch

import pebench.datamodules.synthetic.shapes  # noqa: F401  (registers the synthetic sets)
from pebench.analysis import registry
from pebench.analysis.alpha import alpha_sweep
from pebench.analysis.evaluators import run_analyses
from pebench.analysis.extrapolation import evaluate_extrapolation
from pebench.analysis.geometry import geometry
from pebench.analysis.robustness import robustness
from pebench.core.errors import ConfigError
from pebench.core.options import option
from pebench.datamodules import get_datamodule_class
from pebench.tasks.classification import ClassificationTask


def test_names_keys_order_and_what_all_selects():
    names = registry.list_analyses()
    assert names[:4] == ["geometry", "robustness", "alpha", "extrapolation"]
    assert {"attention", "coord-robustness"} <= set(names)
    assert registry.result_keys()["alpha"] == "alpha_sweep"
    additive, rotary = types.SimpleNamespace(additive=True), types.SimpleNamespace(additive=False)
    assert registry.select_analyses("all", additive) == (["geometry", "robustness", "alpha", "extrapolation"], True)
    assert registry.select_analyses("all", rotary)[0] == ["geometry", "robustness", "extrapolation"]
    assert registry.select_analyses("extrapolation,geometry", rotary) == (["geometry", "extrapolation"], True)
    assert registry.select_analyses("none", rotary) == ([], True)
    with pytest.raises(ConfigError, match="unknown analysis 'geometri'; .*available: geometry"):
        registry.select_analyses("geometri", rotary)


def test_options_come_from_the_declarations():
    decl = registry.analysis_options()
    assert decl["ssdc_tap"].choices == ("attn_in", "block_out") and decl["probe_size"].minimum == 1
    defaults = registry.option_defaults()
    assert defaults["rpi_permutations"] == 8 and defaults["alpha_samples"] == 128 and defaults["rpi_null"] is True
    assert defaults["rpi_draw"] == "shared"
    opts = registry.check_analysis_options({"rpi_null": "false", "coord_jitter_sizes": [0, 1]})
    assert opts["rpi_null"] is False and opts["coord_jitter_sizes"] == (0.0, 1.0)
    for bad, msg in (({"probe_size": 0}, r"analysis option probe_size must be >= 1 \(samples\), got 0"),
                     ({"rpi_permutations": 2.5}, "rpi_permutations must be an integer"),
                     ({"ssdc_distance": "cosine"}, "ssdc_distance must be one of l1, euclidean"),
                     ({"rpi_draw": "each"}, "rpi_draw must be one of shared, per-sample"),
                     ({"coord_offset_sizes": [1, -1]}, "coord_offset_sizes must be >= 0 and finite"),
                     ({"coord_offset_sizes": [1, "x"]}, "coord_offset_sizes must be a list of numbers"),
                     ({"nope": 1}, "unknown analysis option 'nope'")):
        with pytest.raises(ConfigError, match=msg):
            registry.check_analysis_options(bad)
    rows = {r["name"]: r for r in registry.describe_analyses()}
    assert rows["alpha"]["key"] == "alpha_sweep" and rows["attention"]["in_all"] is False
    assert [o["key"] for o in rows["extrapolation"]["options"]] == ["extrapolation_samples"]


def test_a_key_declared_twice_must_be_the_same_declaration():
    @dataclass(frozen=True)
    class Clash:
        probe_size: int = option(12, "another probe size")

    with pytest.raises(ValueError, match="analysis option 'probe_size' of 'clash' differs"):
        registry.register_analysis("clash", order=99, options=Clash)(type("ClashAnalysis", (registry.Analysis,), {}))
    assert "clash" not in registry.list_analyses()


@pytest.mark.slow
def test_registry_driven_output_is_byte_identical_to_the_direct_calls():
    """What ``run_analyses(..., "all")`` writes equals, byte for byte, the four analysis functions called with
    the arguments the former if/elif dispatch passed (same order, same options)."""
    dm = get_datamodule_class("shapes")(batch_size=2, val_size=2, train_size=2, resolution=8)
    torch.manual_seed(0)
    task = ClassificationTask("image", 8, pe="sincos", train_grid=(2, 2)).eval()
    opts = {"probe_size": 2, "robustness_samples": 2, "alpha_samples": 2, "alpha_probe_size": 2,
            "extrapolation_samples": 2, "rpi_permutations": 1, "rpi_null": True, "ssdc_tap": "block_out"}
    cfg = {"seed": 3, "extrapolation_resolutions": ["8", "12"], "analysis_options": opts}
    out = run_analyses(task, dm, "all", None, cfg)
    assert list(out["analysis_times_s"]) == ["geometry", "robustness", "alpha", "extrapolation"]
    del out["analysis_times_s"]
    direct = {
        "geometry": geometry(task, dm, probe_size=2, seed=3, tap="block_out", eed_tap="attn_in", distance=None,
                             rpi_permutations=1, null=True),
        "robustness": robustness(task, dm, seed=3, max_samples=2),
        "alpha_sweep": alpha_sweep(task, dm, seed=3, max_samples=2, probe_size=2, tap="block_out",
                                   rpi_permutations=1, distance=None),
        "extrapolation": evaluate_extrapolation(task, dm, ["8", "12"], max_samples=2),
    }
    assert list(out) == list(direct)
    assert json.dumps(out) == json.dumps(direct)

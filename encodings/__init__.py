"""Positional encodings for ViTs (docs/ARCHITECTURE.md §3): one file per PE, a shared interface, a registry.

    from pebench.encodings import build_pe, list_pes
    pe = build_pe("ape", dim=128, num_heads=4, depth=4, spatial_dims=2, grid=(8, 8))
    pe_options("pape")                                   # [{key, type, default, choices, help}, ...]
    variant_label("pape", {"init": "pebench"})           # "pape[init=pebench]"
"""
from .base import ALL_MODALITIES, IdentityLayerPE, LayerPE, PEConfigError, PositionalEncoding, batch_coords
from .options import PEOption, pe_options, variant_label
from .registry import build_pe, get_pe_class, list_pes, register_pe

# Importing a PE module registers it. Keep this list in the CLI's preferred order.
from . import none, ape, sincos, rope_axial, rope_mixed, lookhere, alibi, pape, pape_ri  # noqa: E402,F401
from . import liere  # noqa: E402,F401
from . import comrope  # noqa: E402,F401
from . import string_pe  # noqa: E402,F401  (``string``; not string.py, which would shadow the stdlib module)

__all__ = ["PositionalEncoding", "LayerPE", "IdentityLayerPE", "PEConfigError", "ALL_MODALITIES",
           "batch_coords", "build_pe", "list_pes", "get_pe_class", "register_pe", "PEOption", "pe_options",
           "variant_label"]

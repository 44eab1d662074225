"""Positional encodings for ViTs (docs/architecture.md §3): one file per PE, a shared interface, a registry.

    from pebench.encodings import build_pe, list_pes
    pe = build_pe("ape", dim=128, num_heads=4, depth=4, spatial_dims=2, grid=(8, 8))
    pe_options("pape")                                   # [{key, type, default, choices, help}, ...]
    variant_label("pape", {"init": "pebench"})           # "pape[init=pebench]"
"""
from pebench.core.options import Option

from .base import ALL_MODALITIES, IdentityLayerPE, LayerPE, PEConfigError, PositionalEncoding, batch_coords
from .registry import build_pe, get_pe_class, list_pes, pe_options, register_pe, variant_label

__all__ = ["PositionalEncoding", "LayerPE", "IdentityLayerPE", "PEConfigError", "ALL_MODALITIES",
           "batch_coords", "build_pe", "list_pes", "get_pe_class", "register_pe", "Option", "pe_options",
           "variant_label"]

"""``none``: the ablated model without any positional encoding.

Attention is then permutation-equivariant in the tokens regardless of coords; a model with
this PE sees a bag of patches. CLS, non-grid tokens and unseen grids need no treatment.
"""
from __future__ import annotations

from .base import PositionalEncoding
from .registry import register_pe

__all__ = ["NoPE"]


@register_pe("none", order=0)
class NoPE(PositionalEncoding):
    """No positional information at all (identity everywhere)."""

    relative = True
    rotation_invariant = True
    distance_decay = False
    learned = False

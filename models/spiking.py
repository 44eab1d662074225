"""The spiking-patch tokenizer: padded spiking-patch tokens -> embedded tokens with ``(t, y, x)`` coords.

The tokens themselves (firing rule, volumes, the padded batch type :class:`EventTokens`) are made on
the data side, in the loaders' workers: :mod:`pebench.datamodules.events.spiking` (the method and its
source are described there). This module embeds them: one linear map of the ``log1p`` count volume.
"""
from __future__ import annotations

from typing import Any

from torch import nn

from pebench.datamodules.events.spiking import EventTokens

from .tokenizers import TokenBatch

__all__ = ["SpikingPatchTokenizer"]


class SpikingPatchTokenizer(nn.Module):
    """Padded spiking-patch tokens -> :class:`TokenBatch` (linear embedding of the log1p volume)."""

    def __init__(self, embed_dim: int, patch_size: int, buckets: int = 8, **settings: Any) -> None:
        """``settings``: the data loader's other tokenizer settings (threshold, refractory, time
        scale, cap), kept in ``self.settings`` and the task's hyper-parameters as a record only."""
        super().__init__()
        self.patch_size, self.buckets = int(patch_size), int(buckets)
        self.settings = dict(settings)
        self.spatial_dims = 3
        self.proj = nn.Linear(2 * self.buckets * self.patch_size ** 2, embed_dim)

    def forward(self, tokens: EventTokens) -> TokenBatch:
        vol = tokens.volumes
        expect = (2, self.buckets, self.patch_size, self.patch_size)
        if tuple(vol.shape[2:]) != expect:
            raise ValueError(f"spiking tokens of shape {tuple(vol.shape[2:])}, the tokenizer expects {expect}")
        x = self.proj(vol.flatten(2).to(self.proj.weight.dtype))  # (B, N, D)
        return TokenBatch(x, tokens.coords, None, tokens.mask)

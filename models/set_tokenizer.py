"""The set-probe tokenizer: a padded batch of glyph patches at their coordinates -> :class:`TokenBatch`.

The set probes (:mod:`pebench.datamodules.probes.probe_sets`) give each scene as the set of its occupied
``P x P`` cells with their ``(y, x)`` cell coordinates and a key mask, not as an image. This embeds each
patch with one linear map of its flattened pixels, which is what :class:`~pebench.models.tokenizers.ImageTokenizer`'s
patch convolution (kernel = stride = ``P``) computes for a patch of an image, and passes the coordinates and
the mask through unchanged (``grid=None``: the tokens are not a raster).
"""
from __future__ import annotations

from torch import nn

from pebench.datamodules.probes.probe_sets import GlyphTokens

from .tokenizers import TokenBatch

__all__ = ["SetPatchTokenizer"]


class SetPatchTokenizer(nn.Module):
    """:class:`GlyphTokens` ``(patches (B, N, C, P, P), coords (B, N, 2), mask (B, N))`` -> :class:`TokenBatch`."""

    def __init__(self, embed_dim: int, patch_size: int = 4, in_chans: int = 3) -> None:
        super().__init__()
        self.patch_size, self.in_chans = int(patch_size), int(in_chans)
        self.spatial_dims = 2
        self.proj = nn.Linear(in_chans * patch_size * patch_size, embed_dim)

    def forward(self, tokens: GlyphTokens) -> TokenBatch:
        if not isinstance(tokens, GlyphTokens):
            raise TypeError(f"the set tokenizer takes GlyphTokens (a set probe's batch), got {type(tokens).__name__}")
        expect = (self.in_chans, self.patch_size, self.patch_size)
        if tuple(tokens.patches.shape[2:]) != expect:
            raise ValueError(f"glyph patches of shape {tuple(tokens.patches.shape[2:])}, the tokenizer expects {expect}")
        x = self.proj(tokens.patches.flatten(2).to(self.proj.weight.dtype))  # (B, N, D)
        return TokenBatch(x, tokens.coords.to(x.dtype), None, tokens.mask)

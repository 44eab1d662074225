"""LookHere's bias has no parameters: :meth:`LookHereLayer.bias` keeps it for the same coords tensor (the
tokenizers' grid coords come back every block of every step) and rebuilds it for other or edited coords, and
above :data:`BIAS_CACHE_MAX` entries. The kept tensor is the one the formula gives, bit for bit."""
from __future__ import annotations

import torch

from pebench.encodings import build_pe
from pebench.encodings import lookhere as lookhere_mod


def _grid(h: int, w: int) -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing="ij")
    return torch.stack([yy, xx], -1).reshape(-1, 2)  # (N, 2)


def test_bias_is_kept_per_coords_tensor_and_equals_the_formula(monkeypatch):
    layer = build_pe("lookhere", dim=64, num_heads=4, depth=2, spatial_dims=2, grid=(6, 7)).layer(1)
    c = _grid(6, 7)
    first = layer.bias(c)
    assert layer.bias(c) is first  # same coords object, unmodified: the kept tensor
    assert torch.equal(first, layer._bias(c))  # what the formula gives, bit for bit
    other = c.clone()
    assert layer.bias(other) is not first and torch.equal(layer.bias(other), first)  # another tensor: rebuilt
    c.add_(1.0)  # an in-place edit bumps the version: rebuilt (the bias is relative, so equal again)
    again = layer.bias(c)
    assert again is not first and torch.equal(again, first)
    monkeypatch.setattr(lookhere_mod, "BIAS_CACHE_MAX", 4 * 42 * 42 - 1)  # just below this bias's size
    big = layer.bias(other)
    assert layer.bias(other) is not big and torch.equal(big, first)  # not kept

"""ALiBi's pebench options ``slope_scale`` and ``learnable_slopes`` (encodings/alibi.py).

The default must stay the published method bit for bit (Press et al., ICLR 2022: fixed slopes
``2^(-8h/H)``); the variants are checked against a bias written out here in float64.
"""
from __future__ import annotations

import math

import pytest
import torch

from pebench.encodings import PEConfigError, build_pe
from pebench.encodings.alibi import alibi_slopes
from pebench.models import build_backbone, grid_coords

H = 4


def coords(n: int = 7, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 2, generator=g, dtype=torch.float64) * 8 - 4


def reference_bias(c: torch.Tensor, scale: float) -> torch.Tensor:
    """``-scale * 2^(-8h/H) * ||r_j - r_i||`` entry by entry with Python floats."""
    n = c.shape[0]
    out = torch.empty(H, n, n, dtype=torch.float64)
    for h in range(H):
        m = scale * 2.0 ** (-8 * (h + 1) / H)
        for i in range(n):
            for j in range(n):
                out[h, i, j] = -m * math.dist(c[j].tolist(), c[i].tolist())
    return out


def alibi(**options):
    return build_pe("alibi", dim=32, num_heads=H, depth=2, spatial_dims=2, **options)


def test_default_is_the_old_bias_bit_for_bit():
    c = coords().float()
    old_slopes = torch.tensor(alibi_slopes(H), dtype=torch.float64).to(torch.float32)
    old = -old_slopes[:, None, None] * torch.cdist(c[None], c[None], compute_mode="donot_use_mm_for_euclid_dist")[:, None]
    for pe in (alibi(), alibi(slope_scale=1.0, learnable_slopes=False)):
        assert not list(pe.parameters()) and pe.no_weight_decay() == set()
        assert pe.layer(0) is pe.layer(1)
        assert torch.equal(pe.layer(0).bias(c), old)


@pytest.mark.parametrize("scale", [1.0, 0.5, 8.0])
@pytest.mark.parametrize("learnable", [False, True])
def test_variants_match_float64_reference(scale, learnable):
    pe = alibi(slope_scale=scale, learnable_slopes=learnable).double()
    c = coords()
    got = pe.layer(0).bias(c)[0]
    torch.testing.assert_close(got, reference_bias(c, scale), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("learnable", [False, True])
def test_translation_invariant(learnable):
    pe = alibi(slope_scale=4.0, learnable_slopes=learnable).double()
    c = coords()
    shifted = c + torch.tensor([2.5, -7.25], dtype=torch.float64)
    torch.testing.assert_close(pe.layer(0).bias(shifted), pe.layer(0).bias(c), rtol=1e-12, atol=1e-12)


def test_gradient_reaches_learnable_slopes():
    torch.manual_seed(0)
    bb = build_backbone("vit-nano", pe="alibi", spatial_dims=2, grid=(4, 4), learnable_slopes=True)
    name = "pe.alibi.slopes"
    params = dict(bb.named_parameters())
    assert name in params and name in bb.no_weight_decay()
    torch.testing.assert_close(params[name].detach().double(),
                               torch.tensor(alibi_slopes(bb.pe.num_heads), dtype=torch.float64), rtol=1e-7, atol=0)
    x = torch.randn(2, 16, bb.embed_dim)
    bb(x, grid_coords((4, 4)), (4, 4)).pow(2).mean().backward()
    g = params[name].grad
    assert g is not None and torch.isfinite(g).all() and g.abs().min() > 0


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf")])
def test_bad_slope_scale(bad):
    with pytest.raises(PEConfigError, match="slope_scale"):
        alibi(slope_scale=bad)

"""``fire`` (Li et al., ICLR 2024) against its formula written out in float64, including the progressive
normaliser once the learned threshold is below the query's farthest-key distance, and FlexAttention's
score_mod against the dense bias."""
from __future__ import annotations

import math

import pytest
import torch
from torch.nn.attention.flex_attention import flex_attention

from pebench.encodings import PEConfigError, build_pe
from pebench.models import attention as attn_mod
from pebench.models import build_backbone
from pebench.models.attention import attend


def _fire_bias(coords, c, L, w1, b1, w2, b2, eps=1e-6):
    """b[h, i, j] = MLP(psi(|r_j - r_i|) / (psi(max(L, max_j' |r_j' - r_i|)) + eps))_h, loops over pairs."""
    n = coords.shape[0]
    H = len(w2)
    out = torch.zeros(H, n, n, dtype=torch.float64)
    for i in range(n):
        far = max(math.dist(coords[i].tolist(), coords[j].tolist()) for j in range(n))
        norm = math.log(abs(c * max(L, far)) + 1) + eps
        for j in range(n):
            x = math.log(abs(c * math.dist(coords[i].tolist(), coords[j].tolist())) + 1) / norm
            hid = [max(0.0, w1[u] * x + b1[u]) for u in range(len(w1))]
            for h in range(H):
                out[h, i, j] = sum(w2[h][u] * hid[u] for u in range(len(w1))) + b2[h]
    return out


@pytest.mark.parametrize("multiplier", [1.0, 0.004])
@pytest.mark.parametrize("p", [2, 3])
def test_fire_bias_is_the_published_formula(p, multiplier):
    """multiplier 1: L = 512 caps every normaliser; 0.004: L = 2.048, below most farthest-key distances,
    so the per-query normaliser psi(R_i) is exercised."""
    torch.manual_seed(0)
    pe = build_pe("fire", dim=24, num_heads=3, depth=2, spatial_dims=p, num_prefix_tokens=1).double()
    lay = pe.layer(1)
    with torch.no_grad():
        lay.L_multiplier.fill_(multiplier)
        lay.c.fill_(0.37)
        for prm in (lay.fc1_weight, lay.fc1_bias, lay.fc2_weight, lay.fc2_bias):
            prm.copy_(torch.randn_like(prm))
    coords = torch.rand(9, p, dtype=torch.float64) * 5
    got = lay.bias(coords)  # (1, H, 1 + N, 1 + N)
    w1, b1 = lay.fc1_weight.tolist(), lay.fc1_bias.tolist()
    w2, b2 = lay.fc2_weight.tolist(), lay.fc2_bias.tolist()
    want = _fire_bias(coords, 0.37, 512.0 * multiplier, w1, b1, w2, b2)
    torch.testing.assert_close(got[0, :, 1:, 1:], want, rtol=1e-12, atol=1e-12)
    assert (got[0, :, 0, :] == 0).all() and (got[0, :, :, 0] == 0).all()  # CLS: no bias


@pytest.mark.parametrize("multiplier", [1.0, 0.004])
@pytest.mark.parametrize("shape", ["grid", "batch"])
def test_fire_unique_evaluation_equals_dense_with_gradients(shape, multiplier):
    """impl=unique (the MLP once per distinct (distance, normaliser) key) against impl=dense (every pair), float64:
    the bias and the gradients of every parameter; a grid's 36 tokens give 1296 pairs but few keys."""
    torch.manual_seed(1)
    pes = {impl: build_pe("fire", dim=24, num_heads=3, depth=1, spatial_dims=2, num_prefix_tokens=1, impl=impl).double()
           for impl in ("unique", "dense")}
    pes["dense"].load_state_dict(pes["unique"].state_dict())
    for pe in pes.values():
        with torch.no_grad():
            pe.layer(0).L_multiplier.fill_(multiplier)  # 0.004: L = 2.048, below most R_i (per-query normaliser)
    if shape == "grid":
        coords = torch.stack(torch.meshgrid(torch.arange(6.0), torch.arange(6.0), indexing="ij"), -1).reshape(-1, 2)
    else:
        coords = torch.rand(2, 30, 2, dtype=torch.float64) * 4
    coords = coords.double()
    out, grads = {}, {}
    for impl, pe in pes.items():
        lay = pe.layer(0)
        b = lay.bias(coords)
        out[impl] = b
        (b * torch.linspace(-1, 1, b.numel(), dtype=torch.float64).view_as(b)).sum().backward()
        grads[impl] = {n: p.grad.clone() for n, p in lay.named_parameters()}
    torch.testing.assert_close(out["unique"], out["dense"], rtol=1e-12, atol=1e-12)
    for n, g in grads["dense"].items():
        torch.testing.assert_close(grads["unique"][n], g, rtol=1e-10, atol=1e-12, msg=n)
    assert any(g.abs().sum() > 0 for n, g in grads["unique"].items() if n in ("c", "L_multiplier")) or multiplier == 1.0
    if shape == "grid":  # 6 x 6: 36 tokens, 1296 pairs, 20 distinct distances (dx^2 + dy^2 with dx, dy in 0..5)
        assert torch.unique(torch.cdist(coords, coords)).numel() == len({a * a + b * b for a in range(6) for b in range(6)})


def test_fire_impl_option():
    with pytest.raises(PEConfigError, match="PE 'fire': option impl must be one of unique, dense, got 'loop'"):
        build_pe("fire", dim=32, num_heads=4, depth=1, spatial_dims=2, impl="loop")


def test_fire_defaults_are_published_and_layers_are_independent():
    """MLP 1 -> 32 -> H with nn.Linear's default init (U(+-1/sqrt(fan_in))), kept inside a backbone (whose
    own nn.Linear re-init draws std 0.02), c = 0.1, L = 512 fixed times a learned multiplier 1."""
    torch.manual_seed(0)
    pe = build_backbone("vit-nano", pe="fire", spatial_dims=2, grid=(8, 8)).pe
    lay = pe.layer(0)
    assert lay.fc1_weight.shape == (32,) and lay.fc2_weight.shape == (4, 32) and lay.fc2_bias.shape == (4,)
    assert float(lay.fc1_weight.abs().max()) <= 1 and float(lay.fc1_weight.std()) > 0.4  # U(-1, 1): sd 0.58
    bound = 1 / math.sqrt(32)
    assert float(lay.fc2_weight.abs().max()) <= bound and float(lay.fc2_weight.std()) > 0.5 * bound / math.sqrt(3)
    assert float(lay.c) == pytest.approx(0.1) and float(lay.init_L) == 512.0 and float(lay.L_multiplier) == 1.0
    assert not any(n.endswith("init_L") for n, _ in pe.named_parameters())  # fixed, not learned
    assert pe.layer(0) is not pe.layer(1)
    assert not torch.equal(pe.layer(0).fc1_weight, pe.layer(1).fc1_weight)


@pytest.mark.parametrize("kw", [{"mlp_width": 0}, {"init_c": 0.0}, {"init_L": -1.0}])
def test_fire_bad_options(kw):
    with pytest.raises(PEConfigError):
        build_pe("fire", dim=32, num_heads=4, depth=1, spatial_dims=2, **kw)


@pytest.mark.parametrize("prefix", [0, 1])
def test_fire_flex_score_mod_equals_dense(prefix, monkeypatch):
    monkeypatch.setattr(attn_mod, "_COMPILED_FLEX", flex_attention)  # numerics through eager FlexAttention
    torch.manual_seed(1)
    pe = build_pe("fire", dim=32, num_heads=4, depth=1, spatial_dims=2, num_prefix_tokens=prefix).double()
    with torch.no_grad():
        pe.layer(0).L_multiplier.fill_(0.01)
    coords = torch.rand(2, 20, 2, dtype=torch.float64) * 7
    q, k, v = (torch.randn(2, 4, 20 + prefix, 8, dtype=torch.float64) for _ in range(3))
    key_mask = torch.ones(2, 20 + prefix, dtype=torch.bool)
    key_mask[1, -4:] = False
    with torch.no_grad():
        dense, _ = attend(q, k, v, None, pe.layer(0), coords, key_mask, scale=8 ** -0.5, impl="dense")
        flex, used = attend(q, k, v, None, pe.layer(0), coords, key_mask, scale=8 ** -0.5, impl="flex")
    assert used == "flex"
    torch.testing.assert_close(flex, dense, rtol=1e-10, atol=1e-10)

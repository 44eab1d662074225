"""``rope-mixed``'s initialisation options (encodings/rope_mixed.py): Golden Gate RoPE's generalised
golden-ratio directions, Spiral RoPE's evenly spaced directions, uniform random directions, frozen or
learned; each checked in float64 against its defining property with numpy / scipy."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special
import scipy.stats
import torch

from pebench.encodings import PEConfigError, build_pe
from pebench.encodings.rope_mixed import init_mixed_freqs
from pebench.tasks.classification.module import ClassificationTask


def _freqs(init: str, p: int, dim: int = 128, heads: int = 4, depth: int = 1, **kw) -> np.ndarray:
    pe = build_pe("rope-mixed", dim=dim, num_heads=heads, depth=depth, spatial_dims=p, init=init, **kw)
    return np.stack([layer.freqs.detach().double().numpy() for layer in pe.layers])  # (L, p, H, F)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_golden_gate_directions_are_the_generalised_golden_ratio_sequence(p):
    dim, H, theta = 128, 4, 10.0
    F = dim // H // 2
    f = _freqs("golden-gate", p, dim, H, depth=2)
    g = max(r.real for r in np.roots([1.0] + [0.0] * (p - 1) + [-1.0, -1.0]) if abs(r.imag) < 1e-12)
    assert abs(g ** (p + 1) - g - 1) < 1e-12 and (p > 1 or abs(g - (1 + math.sqrt(5)) / 2) < 1e-12)
    i = np.arange(1, H * F + 1, dtype=np.float64)[:, None]
    z = np.mod(i * g ** -np.arange(1, p + 1, dtype=np.float64), 1.0)  # (H F, p) in (0, 1)
    u = scipy.stats.norm.ppf(z)
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    w = np.exp(np.linspace(-math.log(theta), 0.0, F))  # log-spaced 1/theta .. 1
    want = (u.reshape(H, F, p) * w[None, :, None]).transpose(2, 0, 1)  # (p, H, F)
    np.testing.assert_allclose(f[0], want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(f[0], f[1])  # deterministic: every layer starts the same
    np.testing.assert_allclose(np.linalg.norm(f[0], axis=0), np.broadcast_to(w, (H, F)), rtol=1e-6)


def test_golden_gate_covers_angles_more_evenly_than_random_directions():
    """p = 2: the 128 directions of 4 heads x 32 pairs (as axes: u ~ -u) leave a smaller largest gap on the
    half circle than any of 20 sets of uniform random directions (a low-discrepancy sequence)."""
    def max_gap(f):
        a = np.sort(np.mod(np.arctan2(f[1], f[0]).ravel(), math.pi))
        return np.max(np.diff(np.concatenate([a, a[:1] + math.pi])))

    golden = max_gap(_freqs("golden-gate", 2, 256, 4)[0])
    torch.manual_seed(0)
    random = [max_gap(_freqs("uniform", 2, 256, 4)[0]) for _ in range(20)]
    assert golden < min(random) and golden < 4 * math.pi / 128


@pytest.mark.parametrize("K", [2, 3, 4, 8])
def test_spiral_directions_are_evenly_spaced_with_a_rope_ladder_per_group(K):
    dim, H, theta = 128, 4, 10.0
    F = dim // H // 2
    G = F // K
    f = _freqs("spiral", 2, dim, H, directions=K)[0]  # (2, H, F)
    for j in range(K):
        block = f[:, :, j * G:(j + 1) * G]  # (2, H, G)
        mag = np.linalg.norm(block, axis=0)
        np.testing.assert_allclose(mag, np.broadcast_to(theta ** (-np.arange(G) / G), (H, G)), rtol=1e-6)
        ang = np.arctan2(block[1], block[0])
        np.testing.assert_allclose(ang, j * math.pi / K, atol=1e-6)  # direction j: angle j pi / K
    assert not f[:, :, K * G:].any()  # leftover pairs start at 0


def test_spiral_with_two_directions_is_axial_rope():
    """K = 2 directions (angles 0 and pi/2) with the per-group ladder are rope-axial with base theta."""
    torch.manual_seed(0)
    spiral = build_pe("rope-mixed", dim=64, num_heads=2, depth=1, spatial_dims=2, init="spiral", directions=2,
                      theta=7.0).double()
    axial = build_pe("rope-axial", dim=64, num_heads=2, depth=1, spatial_dims=2, grid=(4, 4), base=7.0).double()
    q = torch.randn(2, 2, 9, 32, dtype=torch.float64)
    k = torch.randn(2, 2, 9, 32, dtype=torch.float64)
    c = torch.rand(9, 2, dtype=torch.float64) * 8 - 4
    with torch.no_grad():
        a = spiral.layer(0).qk(q, k, None, c)
        b = axial.layer(0).qk(q, k, None, c)
    # the frequencies are float32 parameters (their rounding, ~1e-7 relative, bounds the agreement)
    torch.testing.assert_close(a[0] @ a[1].transpose(-1, -2), b[0] @ b[1].transpose(-1, -2), rtol=1e-5, atol=1e-5)
    assert (a[0] @ a[1].transpose(-1, -2) - q @ k.transpose(-1, -2)).abs().max() > 1e-2  # it does rotate


@pytest.mark.parametrize("p", [2, 3])
def test_uniform_directions_are_uniform_on_the_sphere(p):
    torch.manual_seed(0)
    f = _freqs("uniform", p, 512, 8, depth=2)  # 2 layers x 8 heads x 32 pairs
    u = f / np.linalg.norm(f, axis=1, keepdims=True)  # (L, p, H, F)
    if p == 2:  # the angle is uniform on [0, 2 pi)
        ang = np.mod(np.arctan2(u[:, 1], u[:, 0]).ravel(), 2 * math.pi)
        assert scipy.stats.kstest(ang, scipy.stats.uniform(0, 2 * math.pi).cdf).pvalue > 1e-3
    else:  # Archimedes: each coordinate of a uniform point on S^2 is uniform on [-1, 1]
        for a in range(3):
            assert scipy.stats.kstest(u[:, a].ravel(), scipy.stats.uniform(-1, 2).cdf).pvalue > 1e-3
    assert not np.allclose(f[0], f[1])  # independent per layer
    np.testing.assert_allclose(np.linalg.norm(f[0], axis=0)[0], np.exp(np.linspace(-math.log(10.0), 0, 32)),
                               rtol=1e-6)


def test_default_is_still_the_published_rope_mixed_init():
    torch.manual_seed(3)
    pe = build_pe("rope-mixed", dim=64, num_heads=4, depth=1, spatial_dims=2)
    torch.manual_seed(3)
    torch.testing.assert_close(pe.layers[0].freqs.detach(), init_mixed_freqs(2, 4, 16, 10.0), rtol=0, atol=0)
    assert pe.init == "mixed" and all(p.requires_grad for p in pe.parameters())


@pytest.mark.parametrize("init", ["mixed", "golden-gate", "spiral", "uniform"])
def test_frozen_frequencies_get_no_gradient_and_stay_out_of_the_optimiser(init):
    task = ClassificationTask("image", 4, pe="rope-mixed", pe_options={"init": init, "learn_freqs": False},
                              train_grid=(8, 8))
    pe = task.backbone.pe
    assert not any(p.requires_grad for p in pe.parameters())
    in_groups = {id(p) for g in task.param_groups() for p in g["params"]}
    assert not any(id(p) in in_groups for p in pe.parameters())
    learned = ClassificationTask("image", 4, pe="rope-mixed", pe_options={"init": init}, train_grid=(8, 8))
    assert all(id(p) in {id(q) for g in learned.param_groups() for q in g["params"]}
               for p in learned.backbone.pe.parameters())


def test_option_errors():
    with pytest.raises(PEConfigError, match="2-D"):
        build_pe("rope-mixed", dim=64, num_heads=2, depth=1, spatial_dims=3, init="spiral")
    with pytest.raises(PEConfigError, match="init=spiral only"):
        build_pe("rope-mixed", dim=64, num_heads=2, depth=1, spatial_dims=2, directions=4)
    with pytest.raises(PEConfigError, match="directions must be"):
        build_pe("rope-mixed", dim=64, num_heads=2, depth=1, spatial_dims=2, init="spiral", directions=17)
    with pytest.raises(PEConfigError, match="init"):
        build_pe("rope-mixed", dim=64, num_heads=2, depth=1, spatial_dims=2, init="golden")

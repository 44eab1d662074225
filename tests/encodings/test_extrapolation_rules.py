"""Extrapolation rules (``--pe-option extrapolation=<rule>``, pebench.encodings.extrapolation) against each
rule's published formula, written out here independently in float64: position interpolation (Chen et al.
2023), NTK-aware base scaling, YaRN's per-frequency ramp and temperature (Peng et al. 2023), DINOv3's
normalised coordinates; ape's table read at mapped coordinates by hand-written bilinear interpolation."""
from __future__ import annotations

import math

import pytest
import torch

from pebench.encodings import PEConfigError, build_pe, variant_label
from pebench.encodings.extrapolation import set_extrapolation
from pebench.encodings.rope_axial import layout_frequencies
from pebench.models import build_backbone, grid_coords

D_HEAD, BASE = 16, 100.0
TRAIN, EVAL = (16, 12), (32, 20)  # s = (2, 5/3); token ratio 10/3


def _rotate(q: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Pairs (2j, 2j+1) of q (N, d) rotated by theta (N, d/2), as complex numbers."""
    z = torch.complex(q[:, 0::2], q[:, 1::2]) * torch.exp(1j * theta)
    return torch.stack([z.real, z.imag], dim=-1).flatten(-2)


def _expected_angles(rule: str, c: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Pair angles (N, d/2) of rope-axial's axial layout (F = 4 pairs per axis, w_j = 100^(-j/4)) under
    ``rule`` from TRAIN to EVAL, and the factor on q and k."""
    F = D_HEAD // 4
    theta = torch.zeros(c.shape[0], D_HEAD // 2, dtype=torch.float64)
    for a in range(2):
        s = EVAL[a] / TRAIN[a]
        for j in range(F):
            w = BASE ** (-j / F)
            pos = c[:, a]
            if rule == "pi":
                pos = pos * TRAIN[a] / EVAL[a]
            elif rule == "normalized":  # DINOv3: patch centres (i + 0.5) / E in [0, 1], read in training units
                pos = (pos + 0.5) / EVAL[a] * TRAIN[a] - 0.5
            elif rule == "ntk":  # base' = base * s^(|D| / (|D| - 2)), |D| = 2F channels in the ladder
                w = (BASE * s ** (2 * F / (2 * F - 2))) ** (-j / F)
            elif rule == "yarn":
                r = TRAIN[a] / (2 * math.pi / w)  # rotations of this pair over the training extent
                gamma = min(1.0, max(0.0, (r - 1) / (32 - 1)))
                w = (1 - gamma) * w / s + gamma * w
            theta[:, a * F + j] = pos * w
    factor = 0.1 * math.log((EVAL[0] * EVAL[1]) / (TRAIN[0] * TRAIN[1])) + 1 if rule == "yarn" else 1.0
    return theta, factor


@pytest.mark.parametrize("rule", ["native", "pi", "ntk", "yarn", "normalized"])
def test_rope_axial_rules_match_their_formulas(rule):
    pe = build_pe("rope-axial", dim=2 * D_HEAD, num_heads=2, depth=1, spatial_dims=2, grid=TRAIN,
                  extrapolation=rule).double().eval()
    c = grid_coords(EVAL).double()
    q = torch.randn(1, 2, c.shape[0], D_HEAD, dtype=torch.float64)
    got, _ = pe.layer(0).qk(q, q.clone(), None, c)
    theta, factor = _expected_angles(rule, c)
    for h in range(2):
        torch.testing.assert_close(got[0, h], factor * _rotate(q[0, h], theta), rtol=1e-12, atol=1e-12)


def test_yarn_ramp_is_partial_in_this_setting():
    """The YaRN case above exercises all three regimes of the ramp: pair 0 of the 16-wide axis has
    r = 16 / (2 pi) > 1 (partly kept), the others r < 1 (fully interpolated)."""
    r = [16 / (2 * math.pi / BASE ** (-j / 4)) for j in range(4)]
    assert 1 < r[0] < 32 and all(x < 1 for x in r[1:])


@pytest.mark.parametrize("rule", ["pi", "ntk", "yarn", "normalized"])
def test_rules_leave_training_and_the_training_grid_alone(rule):
    torch.manual_seed(0)
    native = build_pe("rope-axial", dim=32, num_heads=2, depth=1, spatial_dims=2, grid=TRAIN).double()
    ruled = build_pe("rope-axial", dim=32, num_heads=2, depth=1, spatial_dims=2, grid=TRAIN,
                     extrapolation=rule).double()
    q = torch.randn(2, 2, 16 * 12, 16, dtype=torch.float64)
    at_train = grid_coords(TRAIN).double()
    ruled.eval()
    assert torch.equal(ruled.layer(0).qk(q, q, None, at_train)[0], native.layer(0).qk(q, q, None, at_train)[0])
    ruled.train()  # training: the native rotation on any grid
    big = grid_coords(EVAL).double()
    qb = torch.randn(1, 2, big.shape[0], 16, dtype=torch.float64)
    assert torch.equal(ruled.layer(0).qk(qb, qb, None, big)[0], native.layer(0).qk(qb, qb, None, big)[0])


def test_ntk_and_yarn_leave_a_smaller_grid_alone_pi_does_not():
    small = (8, 6)
    c = grid_coords(small).double()
    q = torch.randn(1, 1, c.shape[0], 16, dtype=torch.float64)
    out = {}
    for rule in ("native", "ntk", "yarn", "pi"):
        pe = build_pe("rope-axial", dim=16, num_heads=1, depth=1, spatial_dims=2, grid=TRAIN,
                      extrapolation=rule).double().eval()
        out[rule] = pe.layer(0).qk(q, q, None, c)[0]
    torch.testing.assert_close(out["ntk"], out["native"], rtol=0, atol=1e-15)
    torch.testing.assert_close(out["yarn"], out["native"], rtol=0, atol=1e-15)
    assert (out["pi"] - out["native"]).abs().max() > 1e-3


def test_pi_on_a_video_layout_scales_each_axis():
    """mrope layout, 3-D: pair k rotated by sum_a (c_a / s_a) M[a, k] (M from layout_frequencies)."""
    train, ev = (2, 4, 4), (4, 8, 6)
    pe = build_pe("rope-axial", dim=32, num_heads=1, depth=1, spatial_dims=3, grid=train, layout="mrope",
                  extrapolation="pi").double().eval()
    c = grid_coords(ev).double()
    q = torch.randn(1, 1, c.shape[0], 32, dtype=torch.float64)
    got, _ = pe.layer(0).qk(q, q, None, c)
    M = layout_frequencies("mrope", 32, 3, BASE)  # (3, 16)
    theta = sum((c[:, a:a + 1] * train[a] / ev[a]) * M[a] for a in range(3))  # (N, 16)
    torch.testing.assert_close(got[0, 0], _rotate(q[0, 0], theta), rtol=1e-12, atol=1e-12)


def _bilinear(table: torch.Tensor, grid, u: torch.Tensor) -> torch.Tensor:
    """table (prod(grid), D) at continuous positions u (N, 2), clamped to the grid, by hand."""
    rows = []
    for y, x in u.tolist():
        y, x = min(max(y, 0.0), grid[0] - 1), min(max(x, 0.0), grid[1] - 1)
        y0, x0 = min(int(math.floor(y)), grid[0] - 2), min(int(math.floor(x)), grid[1] - 2)
        wy, wx = y - y0, x - x0
        at = lambda i, j: table[i * grid[1] + j]  # noqa: E731
        rows.append((1 - wy) * (1 - wx) * at(y0, x0) + (1 - wy) * wx * at(y0, x0 + 1)
                    + wy * (1 - wx) * at(y0 + 1, x0) + wy * wx * at(y0 + 1, x0 + 1))
    return torch.stack(rows)


@pytest.mark.parametrize("rule", ["pi", "normalized"])
@pytest.mark.parametrize("ev", [(9, 11), (3, 4)])
def test_ape_table_rules(rule, ev):
    train = (5, 6)
    torch.manual_seed(0)
    pe = build_pe("ape", dim=8, num_heads=2, depth=1, spatial_dims=2, grid=train, extrapolation=rule).double().eval()
    c = grid_coords(ev).double()
    got = pe.encode_tokens(torch.zeros(1, c.shape[0], 8, dtype=torch.float64), c, ev)[0]
    s = torch.tensor([ev[0] / train[0], ev[1] / train[1]], dtype=torch.float64)
    u = c / s if rule == "pi" else (c + 0.5) / s - 0.5
    torch.testing.assert_close(got, _bilinear(pe.table[0].detach(), train, u), rtol=1e-12, atol=1e-12)
    pe.train()  # training: the native lookup (resampled table)
    native = build_pe("ape", dim=8, num_heads=2, depth=1, spatial_dims=2, grid=train).double()
    native.load_state_dict(pe.state_dict())
    assert torch.equal(pe.encode_tokens(torch.zeros(1, c.shape[0], 8, dtype=torch.float64), c, ev),
                       native.encode_tokens(torch.zeros(1, c.shape[0], 8, dtype=torch.float64), c, ev))


def test_option_validation_label_and_switching():
    with pytest.raises(PEConfigError, match="extrapolation"):
        build_pe("rope-axial", dim=32, num_heads=2, depth=1, spatial_dims=2, grid=(4, 4), extrapolation="linear")
    with pytest.raises(PEConfigError, match="training grid"):  # points: no grid to interpolate from
        build_pe("rope-axial", dim=32, num_heads=2, depth=1, spatial_dims=3, extrapolation="pi")
    with pytest.raises(PEConfigError):  # ntk is not a table rule
        build_pe("ape", dim=32, num_heads=2, depth=1, spatial_dims=2, grid=(4, 4), extrapolation="ntk")
    assert variant_label("rope-axial", {"extrapolation": "yarn"}) == "rope-axial[extrapolation=yarn]"
    assert variant_label("rope-axial", {"extrapolation": "native"}) == "rope-axial"
    bb = build_backbone("vit-nano", pe="rope-axial", spatial_dims=2, grid=(4, 4)).eval()
    with set_extrapolation(bb.pe, "pi"):
        assert bb.pe.extrapolation == "pi" and bb.pe.layer(0).rule == "pi"
    assert bb.pe.extrapolation == "native"
    with pytest.raises(PEConfigError, match="no extrapolation option"):
        with set_extrapolation(build_pe("alibi", dim=32, num_heads=2, depth=1, spatial_dims=2), "pi"):
            pass

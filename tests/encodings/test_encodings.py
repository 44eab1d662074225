"""Tests of every positional encoding against independent references (issue #3).

Each PE's per-layer attention is compared with a naive O(N^2) attention written here from the
PE's formula; backbone-level properties (translation / rotation invariance, permutation
equivariance, extrapolation to unseen grids) are checked on ``vit-nano``.
"""
from __future__ import annotations

import math
import pathlib
import subprocess
import sys

import pytest
import torch
from rotation_refs import rotated_qk

from pebench.encodings import PEConfigError, build_pe, get_pe_class, list_pes
from pebench.models import Attention, build_backbone, grid_coords

#: every registered PE (a new PE file is picked up without editing a list)
ALL = list_pes()
REPO = pathlib.Path(__file__).resolve().parents[2]


def randomise_pe(pe: torch.nn.Module, seed: int = 0) -> None:
    """Move learnable PE parameters away from their (near-zero) init so every term matters."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, prm in pe.named_parameters():
            if name.endswith(("a_weight", "b_weight")):
                prm.copy_(torch.randn(prm.shape, generator=g, dtype=prm.dtype) * 0.3)
            elif name.endswith(("b_bias", "wp")):
                prm.copy_(torch.randn(prm.shape, generator=g, dtype=prm.dtype) * 0.3)
            elif name.endswith("upper") and pe.name == "string":  # STRING's S starts at 0 (P = I)
                prm.copy_(torch.randn(prm.shape, generator=g, dtype=prm.dtype) * 0.3)


def random_coords(n: int, p: int, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, p, generator=g, dtype=torch.float64) * 6 - 3).to(dtype)


# ----------------------------------------------------------------------------------------------
# reference PE terms, written from the papers' formulas
# ----------------------------------------------------------------------------------------------
def rotate_ref(t: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Textbook rotation of channel pairs (2j, 2j+1) as complex numbers: t (B,H,N,d), theta (B|1,H|1,N,F)."""
    d = t.shape[-1]
    z = torch.complex(t[..., 0::2], t[..., 1::2])  # (B, H, N, d/2)
    full = torch.zeros(*theta.shape[:-1], d // 2, dtype=t.dtype)
    full[..., : theta.shape[-1]] = theta
    z = z * torch.exp(1j * full)
    return torch.stack([z.real, z.imag], dim=-1).flatten(-2)


def rotate_half_ref(t: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """DINOv3's channel layout: channel j rotated with channel j + d/2 by theta_j, t (B,H,N,d), theta (B|1,1,N,F)."""
    d = t.shape[-1]
    z = torch.complex(t[..., : d // 2], t[..., d // 2:])  # (B, H, N, d/2)
    full = torch.zeros(*theta.shape[:-1], d // 2, dtype=t.dtype)
    full[..., : theta.shape[-1]] = theta
    z = z * torch.exp(1j * full)
    return torch.cat([z.real, z.imag], dim=-1)


def pe_terms(name, pe, layer_idx, q, k, x, coords, P):
    """(q, k, bias) for the reference attention; bias (B|1, H, N, N) over patch tokens or None."""
    H, d = q.shape[1], q.shape[-1]
    c = coords.unsqueeze(0) if coords.dim() == 2 else coords  # (B|1, N, p)
    p = c.shape[-1]
    diff = c[:, None, :, :] - c[:, :, None, :]  # (B|1, N, N, p): r_j - r_i
    dist = diff.pow(2).sum(-1).sqrt()  # (B|1, N, N)
    qp, kp = q[:, :, P:], k[:, :, P:]
    xs = x[:, P:]
    if name in ("liere", "comrope", "string"):  # full rotation matrices (tests/rotation_refs.py)
        q, k = rotated_qk(pe, layer_idx, q, k, coords, P)
        return q, k, None
    if name in ("rope-axial", "rope-mixed"):
        if name == "rope-axial":
            F_ = d // (2 * p)
            omega = torch.tensor([100.0 ** (-j / F_) for j in range(F_)], dtype=q.dtype)
            theta = torch.cat([c[..., a:a + 1] * omega for a in range(p)], dim=-1)[:, None]  # (B|1,1,N,pF)
        else:
            f = pe.layers[layer_idx].freqs.detach()  # (p, H, d/2)
            theta = sum(c[:, None, :, a:a + 1] * f[a][None, :, None, :] for a in range(p))  # (B|1,H,N,d/2)
        q = torch.cat([q[:, :, :P], rotate_ref(qp, theta)], dim=2)
        k = torch.cat([k[:, :, :P], rotate_ref(kp, theta)], dim=2)
        return q, k, None
    if name == "rope-dinov3":  # DINOv3: patch centres over the grid the coords span -> [-1, 1], periods 100^(k/F)
        F_ = d // (2 * p)
        flat = c.reshape(-1, p)
        extent = (flat.amax(0) - flat.amin(0)).round() + 1  # (p,): a layer called on its own
        u = 2 * (c + 0.5) / extent - 1  # (B|1, N, p)
        period = 100.0 ** (torch.arange(F_, dtype=q.dtype) / F_)
        theta = (2 * math.pi * u[..., None] / period).flatten(-2)[:, None]  # (B|1, 1, N, pF), axis-major
        q = torch.cat([q[:, :, :P], rotate_half_ref(qp, theta)], dim=2)
        k = torch.cat([k[:, :, :P], rotate_half_ref(kp, theta)], dim=2)
        return q, k, None
    if name == "fire":  # Li et al. 2024 on Euclidean distances: f(psi(|r_j - r_i|) / psi(max(L, R_i)))
        L = pe.layers[layer_idx]
        c_, thr = L.c.detach(), abs(L.L_multiplier.detach() * 512.0)
        psi = lambda t: torch.log(torch.abs(c_ * t) + 1)  # noqa: E731
        far = dist.amax(-1, keepdim=True)  # (B|1, N, 1): each query's farthest key
        xin = psi(dist) / (psi(torch.clamp(far, min=thr)) + 1e-6)  # (B|1, N, N)
        w1, b1 = L.fc1_weight.detach(), L.fc1_bias.detach()
        w2, b2 = L.fc2_weight.detach(), L.fc2_bias.detach()
        hid = torch.relu(xin[..., None] * w1 + b1)  # (B|1, N, N, 32)
        return q, k, torch.einsum("znmu,hu->zhnm", hid, w2) + b2[:, None, None]
    if name == "rpb":  # grid coords (see the caller): Swin's table at r_i - r_j + G - 1, no resampling
        T = pe.layers[layer_idx].table.detach()  # (H, 2G_1 - 1, ...)
        off = (-diff).round().long() + torch.tensor([g - 1 for g in pe.train_grid])  # (B|1, N, N, p)
        return q, k, T[(slice(None), *off[0].unbind(-1))].unsqueeze(0)  # (1, H, N, N)
    if name == "alibi":
        slopes = torch.tensor([2.0 ** (-8 * (h + 1) / H) for h in range(H)], dtype=q.dtype)
        return q, k, -slopes[:, None, None] * dist[:, None]
    if name == "lookhere":
        assert H == 4  # LH-90 with 4 heads: the four corner (quadrant) heads, slope 1/2
        lay = torch.linspace(1.5, 0.5, pe.depth, dtype=q.dtype)[layer_idx]
        dy, dx = diff[..., -2], diff[..., -1]
        biases = []
        for sy, sx in ((-1, -1), (-1, 1), (1, -1), (1, 1)):  # up-left, up-right, down-left, down-right
            vis = (dy * sy >= 0) & (dx * sx >= 0)
            pen = -2.0 * lay * 0.5 * (dy ** 2 + dx ** 2).sqrt()
            biases.append(torch.where(vis, pen, torch.full_like(pen, -1e9)))
        return q, k, torch.stack(biases, 1)
    if name == "pape":
        L = pe.layers[layer_idx]
        m = L.m
        a = -torch.nn.functional.softplus(xs @ L.a_weight.T + L.a_bias).unflatten(-1, (H, m)).transpose(1, 2)
        b = (xs @ L.b_weight.T + L.b_bias).unflatten(-1, (H, m)).transpose(1, 2)  # (B, H, N, m)
        delta = torch.einsum("zijp,hmp->zhijm", diff, L.wp)  # (B|1, H, N, N, m): W_p (r_j - r_i)
        f = 1 / math.sqrt(d) if pe.logit_scale == "all" else 1.0  # published: 1/sqrt(d) on the PE terms too
        return q, k, f * (a[:, :, :, None, :] * delta ** 2 + b[:, :, :, None, :] * delta).sum(-1)
    if name == "pape-ri":
        L = pe.layers[layer_idx]
        a = -torch.nn.functional.softplus(xs @ L.a_weight.T + L.a_bias).transpose(1, 2)  # (B, H, N)
        f = 1 / math.sqrt(d) if pe.logit_scale == "all" else 1.0
        return q, k, f * (a * L.scale[:, None] ** 2)[..., None] * (dist ** 2)[:, None]
    return q, k, None  # none, ape, sincos: nothing inside attention


def reference_attention(name, pe, attn, x, coords, P, layer_idx=0):
    B, T, D = x.shape
    H, d = attn.num_heads, attn.head_dim
    q, k, v = attn.qkv(x).reshape(B, T, 3, H, d).permute(2, 0, 3, 1, 4)
    q, k, bias = pe_terms(name, pe, layer_idx, q, k, x, coords, P)
    logits = q @ k.transpose(-1, -2) / math.sqrt(d)  # (B, H, T, T)
    if bias is not None:
        logits = logits + torch.nn.functional.pad(bias, (P, 0, P, 0))
    out = logits.softmax(-1) @ v
    return attn.proj(out.transpose(1, 2).reshape(B, T, D))


PEBENCH_PRIOR = {"pape": {"init": "pebench", "logit_scale": "content"},
                 "pape-ri": {"init": "pebench", "logit_scale": "content", "head_scale": "learnable"}}


@pytest.mark.parametrize("P", [0, 1])
@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("name", ALL + ["pape[pebench]", "pape-ri[pebench]"])
def test_layer_matches_reference_attention(name, p, P):
    torch.manual_seed(0)
    D, H, depth = 32, 4, 3
    grid = (3, 4) if p == 2 else (2, 2, 3)
    opts = {}
    if name.endswith("[pebench]"):
        name = name.split("[")[0]
        opts = PEBENCH_PRIOR[name]
    coords = grid_coords(grid).double() if name in ("ape", "rpb") else random_coords(12, p)
    pe = build_pe(name, dim=D, num_heads=H, depth=depth, spatial_dims=p, num_prefix_tokens=P, grid=grid,
                  **opts).double()
    randomise_pe(pe)
    attn = Attention(D, H).double()
    x = torch.randn(2, P + 12, D, dtype=torch.float64)
    for li in (0, depth - 1):
        got = attn(x, coords, pe.layer(li))
        want = reference_attention(name, pe, attn, x, coords, P, li)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


# ----------------------------------------------------------------------------------------------
# closed forms
# ----------------------------------------------------------------------------------------------
def test_rope_axial_textbook_rotation():
    pe = build_pe("rope-axial", dim=8, num_heads=1, depth=1, spatial_dims=2).double()
    # d = 8, p = 2: F = 2 pairs per axis, w = (1, 100^(-1/2) = 0.1); pairs 0,1 <- y, pairs 2,3 <- x
    coords = torch.tensor([[1.0, 2.0]], dtype=torch.float64)  # (y, x)
    q = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 0.0], dtype=torch.float64).view(1, 1, 1, 8)
    got, _ = pe.layer(0).qk(q, q.clone(), None, coords)
    c, s = math.cos, math.sin
    want = [c(1), s(1),                      # (1, 0) rotated by 1 * 1
            -s(0.1), c(0.1),                 # (0, 1) rotated by 1 * 0.1
            c(2) - s(2), s(2) + c(2),        # (1, 1) rotated by 2 * 1
            2 * c(0.2), 2 * s(0.2)]          # (2, 0) rotated by 2 * 0.1
    torch.testing.assert_close(got.view(-1), torch.tensor(want, dtype=torch.float64))


def test_rope_axial_cls_identity_and_base_option():
    pe = build_pe("rope-axial", dim=8, num_heads=1, depth=1, spatial_dims=2, num_prefix_tokens=1, base=10000)
    q = torch.randn(1, 1, 3, 8)
    qr, _ = pe.layer(0).qk(q, q, None, torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    torch.testing.assert_close(qr[:, :, 0], q[:, :, 0])  # CLS not rotated
    # base 10000, F=2: second frequency 0.01
    a = 1.0 * 0.01  # y = 1 times the second frequency
    torch.testing.assert_close(qr[0, 0, 1, 2:4],
                               torch.stack([q[0, 0, 1, 2] * math.cos(a) - q[0, 0, 1, 3] * math.sin(a),
                                            q[0, 0, 1, 3] * math.cos(a) + q[0, 0, 1, 2] * math.sin(a)]))


def test_sincos_closed_form():
    pe = build_pe("sincos", dim=8, num_heads=1, depth=1, spatial_dims=2).double()
    y, xx = 3.0, 5.0
    got = pe.encode_tokens(torch.zeros(1, 1, 8, dtype=torch.float64), torch.tensor([[y, xx]], dtype=torch.float64), None)
    s, c = math.sin, math.cos
    want = [s(y), s(0.01 * y), c(y), c(0.01 * y), s(xx), s(0.01 * xx), c(xx), c(0.01 * xx)]
    torch.testing.assert_close(got.view(-1), torch.tensor(want, dtype=torch.float64))
    pe.alpha = 0.5
    torch.testing.assert_close(pe.encode_tokens(torch.zeros(1, 1, 8, dtype=torch.float64),
                                                torch.tensor([[y, xx]], dtype=torch.float64), None).view(-1),
                               0.5 * torch.tensor(want, dtype=torch.float64))


def test_rope_mixed_init_and_no_weight_decay():
    torch.manual_seed(0)
    pe = build_pe("rope-mixed", dim=128, num_heads=4, depth=2, spatial_dims=3)
    names = dict(pe.named_parameters())
    assert pe.no_weight_decay() == {"layers.0.freqs", "layers.1.freqs"}
    assert set(pe.no_weight_decay()) <= set(names)
    f = pe.layers[0].freqs  # (3, H, 16)
    assert f.shape == (3, 4, 16)
    assert (f[0].abs().sum(-1) > 0).all()  # third (time) axis: not zero-initialised, every head
    assert not torch.allclose(pe.layers[0].freqs, pe.layers[1].freqs)  # per-layer random angles
    # 2-D: the paper's init, |(f_y, f_x)| of each used pair is the magnitude 10^(-k/L)
    pe2 = build_pe("rope-mixed", dim=128, num_heads=4, depth=1, spatial_dims=2)
    mag = pe2.layers[0].freqs.norm(dim=0)  # (H, 16)
    L = 8
    want = torch.tensor([10.0 ** (-k / L) for k in range(L)] * 2)
    torch.testing.assert_close(mag, want.expand(4, -1), rtol=1e-5, atol=1e-6)


def test_no_weight_decay_names_exist():
    for name in ALL:
        pe = build_pe(name, dim=32, num_heads=4, depth=2, spatial_dims=2, grid=(4, 4))
        assert set(pe.no_weight_decay()) <= dict(pe.named_parameters()).keys(), name


# ----------------------------------------------------------------------------------------------
# backbone-level properties
# ----------------------------------------------------------------------------------------------
def nano(name, p, grid, seed=0, **kw):
    torch.manual_seed(seed)
    m = build_backbone("vit-nano", pe=name, spatial_dims=p, grid=grid, **kw).double().eval()
    randomise_pe(m.pe, seed)
    return m


@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("name", ALL)
def test_translation_invariance(name, p):
    grid = (4, 4) if p == 2 else (2, 3, 3)
    coords = grid_coords(grid).double()
    m = nano(name, p, grid)
    x = torch.randn(2, coords.shape[0], 128, dtype=torch.float64)
    with torch.no_grad():
        y0 = m(x, coords, grid)
        shift = torch.tensor([1.0, 2.0, 3.0][:p], dtype=torch.float64)
        if name == "ape":  # ape looks rows up by coords: shift inside a larger grid
            big = tuple(g + 3 for g in grid)
            y1 = m(x, coords + shift, big)
        else:
            y1 = m(x, coords + shift + 0.37, grid)
    _check_declaration(name, "relative", y0, y1)  # each PE declares it; this checks the declaration


def _check_declaration(name: str, attr: str, y0: torch.Tensor, y1: torch.Tensor) -> None:
    """PE ``name`` declares ``attr`` True or False, and the outputs before / after the transformation agree
    (to 1e-8) exactly when it declares True (otherwise they differ by more than 1e-3)."""
    declared = getattr(get_pe_class(name), attr)
    assert declared in (True, False), f"PE {name!r} must declare {attr} = True or False"
    if declared:
        torch.testing.assert_close(y1, y0, rtol=1e-8, atol=1e-8)
    else:
        assert (y1 - y0).abs().max() > 1e-3


@pytest.mark.parametrize("name", ALL)
def test_rotation_invariance_declaration(name):
    """Every PE declares rotation_invariant; rotating a square grid by 90 degrees (each token keeps its
    content) leaves the output unchanged exactly when it says so."""
    grid = (4, 4)
    coords = grid_coords(grid).double()  # (y, x)
    rotated = torch.stack([coords[:, 1], grid[0] - 1 - coords[:, 0]], dim=-1)
    m = nano(name, 2, grid)
    x = torch.randn(2, coords.shape[0], 128, dtype=torch.float64)
    with torch.no_grad():
        y0, y1 = m(x, coords, grid), m(x, rotated, grid)
    _check_declaration(name, "rotation_invariant", y0, y1)


@pytest.mark.parametrize("name", ALL)
def test_learned_and_distance_decay_declarations(name):
    """``learned``: trainable parameters at the default options. ``distance_decay``: at initialisation
    (bench card's probe, shared content) keys within 1.5 cells get more attention than keys beyond 6."""
    from pebench.cli.commands.card import pe_card  # deferred: only this test needs the card

    cls = get_pe_class(name)
    assert cls.learned in (True, False) and cls.distance_decay in (True, False), name
    pe = build_pe(name, dim=128, num_heads=4, depth=2, spatial_dims=2, grid=(8, 8))
    assert any(p.requires_grad for p in pe.parameters()) == cls.learned, name
    if cls.distance_decay:
        torch.manual_seed(0)
        card = pe_card(build_backbone("vit-nano", pe=name, spatial_dims=2, grid=(8, 8)).eval(), samples=2)
        assert card["att <=1.5"] > card["att >6"], (name, card)


@pytest.mark.parametrize("p", [2, 3])
def test_pape_ri_rotation_invariant_pape_not(p):
    torch.manual_seed(1)
    coords = random_coords(20, p, seed=3)
    if p == 2:
        t = 0.7361
        R = torch.tensor([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]], dtype=torch.float64)
    else:
        R, _ = torch.linalg.qr(torch.randn(3, 3, dtype=torch.float64))
    x = torch.randn(2, 20, 128, dtype=torch.float64)
    for impl in ("sdpa", "naive"):
        m = nano("pape-ri", p, None, impl=impl)
        with torch.no_grad():
            torch.testing.assert_close(m(x, coords @ R.T), m(x, coords), rtol=1e-8, atol=1e-8)
    m = nano("pape", p, None)
    with torch.no_grad():
        assert (m(x, coords @ R.T) - m(x, coords)).abs().max() > 1e-4


@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("name", ALL)
def test_permutation_equivariance(name, p):
    cls = p == 2  # with and without a CLS token
    grid = (4, 5) if p == 2 else (2, 2, 5)
    coords = grid_coords(grid).double()
    m = nano(name, p, grid, class_token=cls)
    x = torch.randn(2, 20, 128, dtype=torch.float64)
    perm = torch.randperm(20, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        y = m(x, coords, grid)
        yp = m(x[:, perm], coords[perm], grid)
    P = int(cls)
    torch.testing.assert_close(yp[:, P:], y[:, P:][:, perm], rtol=1e-8, atol=1e-8)
    if cls:
        torch.testing.assert_close(yp[:, 0], y[:, 0], rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("name", ALL)
def test_extrapolation_to_unseen_grids(name, p):
    grid = (4, 4) if p == 2 else (1, 2, 2)
    torch.manual_seed(0)
    m = build_backbone("vit-nano", pe=name, spatial_dims=p, grid=grid).eval()
    with torch.no_grad():
        for f in (1, 2, 4):
            g = tuple(s * f for s in grid)
            c = grid_coords(g)
            y = m(torch.randn(1, c.shape[0], 128), c, g)
            assert y.shape == (1, c.shape[0], 128) and torch.isfinite(y).all(), (name, g)


def test_ape_at_training_grid_is_the_table():
    grid = (3, 5)
    pe = build_pe("ape", dim=16, num_heads=2, depth=1, spatial_dims=2, grid=grid)
    out = pe.encode_tokens(torch.zeros(1, 15, 16), grid_coords(grid), grid)
    torch.testing.assert_close(out[0], pe.table[0].detach())


def test_lookhere_directions_and_self():
    pe = build_pe("lookhere", dim=32, num_heads=4, depth=2, spatial_dims=2)
    c = grid_coords((3, 3))
    b = pe.layer(0).bias(c)[0]  # (H, 9, 9)
    centre = 4  # (1, 1)
    assert (b.diagonal(dim1=-2, dim2=-1) == 0).all()  # a token always sees itself at no cost
    # 4 heads = LH-90's corner heads. Head 0 looks up-left: (0, 0), (0, 1), (1, 0) visible, (2, 2) and
    # (1, 2) not; head 3 looks down-right
    assert b[0, centre, 0] > -1e8 and b[0, centre, 1] > -1e8 and b[0, centre, 3] > -1e8
    assert b[0, centre, 8] <= -1e8 and b[0, centre, 5] <= -1e8
    assert b[3, centre, 8] > -1e8 and b[3, centre, 0] <= -1e8
    # head 2 looks down-left: (2, 1) visible at distance penalty 2 * 1.5 * 0.5 * 1, (0, 1) not
    assert b[2, centre, 7] == pytest.approx(-1.5) and b[2, centre, 1] <= -1e8
    # video: spatial axes only
    pe3 = build_pe("lookhere", dim=32, num_heads=4, depth=1, spatial_dims=3, num_prefix_tokens=1)
    b3 = pe3.layer(0).bias(grid_coords((2, 2, 2)))
    assert b3.shape == (1, 4, 9, 9) and (b3[..., 0, :] == 0).all() and (b3[..., :, 0] == 0).all()


# ----------------------------------------------------------------------------------------------
# errors and packaging
# ----------------------------------------------------------------------------------------------
def test_unknown_pe_lists_available():
    with pytest.raises(ValueError) as e:
        build_pe("nope", dim=32, num_heads=4, depth=1, spatial_dims=2)
    msg = str(e.value)
    assert "nope" in msg and all(n in msg for n in ALL)


def test_lookhere_refuses_points_and_bad_dims():
    assert "points" not in get_pe_class("lookhere").modalities
    with pytest.raises(PEConfigError):
        build_pe("lookhere", dim=32, num_heads=4, depth=1, spatial_dims=3, modality="points")
    for p in (1, 4):
        with pytest.raises(PEConfigError):
            build_pe("lookhere", dim=32, num_heads=4, depth=1, spatial_dims=p)


@pytest.mark.parametrize("name,kw", [("pape", {"impl": "fast"}), ("pape", {"num_parabolas": 0}),
                                     ("pape-ri", {"impl": "x"}), ("rope-axial", {"base": 0.5}),
                                     ("lookhere", {"fov": 0}), ("sincos", {"base": 1})])
def test_bad_options_raise_peconfigerror(name, kw):
    with pytest.raises(PEConfigError):
        build_pe(name, dim=32, num_heads=4, depth=1, spatial_dims=2, **kw)


def test_import_from_repo_root_does_not_shadow_stdlib():
    r = subprocess.run([sys.executable, "-c", "import pebench.encodings; print(len(pebench.encodings.list_pes()))"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(len(list_pes()))


def test_coords_cache_hits_only_the_same_unmodified_coords():
    """CoordsCache (PaPE key columns, RoPE sin/cos): a hit needs the same tensor object, the same
    version and the same key; inference-mode calls never store; coords needing grad never cache."""
    from pebench.encodings.base import CoordsCache
    cache, calls = CoordsCache(), []

    def compute(c):
        calls.append(1)
        return c.sum().item()

    c = torch.ones(4, 2)
    assert cache.get(c, "k", lambda: compute(c)) == 8 and cache.get(c, "k", lambda: compute(c)) == 8
    assert len(calls) == 1  # hit
    cache.get(c, "other", lambda: compute(c))
    assert len(calls) == 2  # another key: miss
    c.mul_(2)  # in place: version bump
    assert cache.get(c, "other", lambda: compute(c)) == 16 and len(calls) == 3
    c2 = c.clone()
    assert cache.get(c2, "other", lambda: compute(c2)) == 16 and len(calls) == 4  # another object
    cache.clear()
    with torch.inference_mode():
        cache.get(c, "k", lambda: compute(c))
    assert cache._entry is None
    g = torch.ones(4, 2, requires_grad=True)
    cache.get(g, "k", lambda: 0.0)
    assert cache._entry is None


def test_rope_tables_follow_in_place_coord_edits():
    """rope-axial caches its sin/cos per coords tensor: editing the coords in place (or passing
    other coords) gives the rotation of the new coords, equal to a fresh module's."""
    torch.manual_seed(0)
    pe, fresh = (build_pe("rope-axial", dim=32, num_heads=2, depth=2, spatial_dims=2) for _ in range(2))
    q, k, x = torch.randn(3, 2, 6, 16), torch.randn(3, 2, 6, 16), torch.randn(3, 6, 32)
    c = torch.rand(6, 2) * 4
    first = pe.layer(0).qk(q, k, x, c)
    assert all(torch.equal(a, b) for a, b in zip(first, pe.layer(1).qk(q, k, x, c)))  # shared, cached
    with torch.no_grad():
        c.add_(1.5)
    got = pe.layer(0).qk(q, k, x, c)
    want = fresh.layer(0).qk(q, k, x, c.clone())
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    assert not torch.allclose(got[0], first[0])

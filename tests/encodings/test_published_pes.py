"""The default PEs against their published definitions, and the PE options machinery (issue #11).

Each published formula is written out here independently and naively (loops / einsum over
i, j), from the papers and the authors' public code as the PE modules' docstrings describe it;
the default ``pape``, ``pape-ri``, ``lookhere`` and ``ape`` are checked against it.
"""
from __future__ import annotations

import inspect
import math

import pytest
import torch
import torch.nn.functional as F

from pebench.encodings import PEConfigError, build_pe, get_pe_class, list_pes, pe_options, variant_label
from pebench.encodings.options import SHARED_KWARGS
from pebench.models import Attention, build_backbone, grid_coords


# ----------------------------------------------------------------------------------------------
# options: one declaration validates, lists and labels
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list_pes())
def test_option_declarations_match_constructor(name):
    cls = get_pe_class(name)
    sig = inspect.signature(cls.__init__)
    ctor = {k: p.default for k, p in sig.parameters.items() if k != "self" and k not in SHARED_KWARGS}
    declared = {o["key"]: o["default"] for o in pe_options(name)}
    assert set(declared) == set(ctor), name
    for k, d in declared.items():
        want = tuple(ctor[k]) if isinstance(ctor[k], (list, tuple)) else ctor[k]
        assert d == want, (name, k)
    for o in pe_options(name):
        assert o["help"] and "\n" not in o["help"]
        assert o["type"] == (o["type"].removesuffix(" or none") + " or none" if o["default"] is None else o["type"])
        assert o["type"].removesuffix(" or none") in ("int", "float", "str", "bool", "floats"), (name, o)


def test_variant_label():
    assert variant_label("pape", {}) == "pape"
    assert variant_label("pape", None) == "pape"
    defaults = {o["key"]: o["default"] for o in pe_options("pape")}
    assert variant_label("pape", defaults) == "pape"
    assert variant_label("pape", {"num_parabolas": 50.0, "impl": "sdpa"}) == "pape"  # 50.0 == 50
    assert variant_label("pape", {"num_parabolas": 8, "impl": "naive"}) == "pape[impl=naive,num_parabolas=8]"
    assert variant_label("lookhere", {"layer_slopes": [1.5, 0.5]}) == "lookhere"  # YAML list == tuple default
    assert variant_label("lookhere", {"layer_slopes": [1, 0.5]}) == "lookhere[layer_slopes=[1.0;0.5]]"
    assert variant_label("none", {"bogus": True}) == "none[bogus=true]"  # undeclared keys are never hidden
    assert variant_label("not-a-pe", {"b": 1, "a": "x"}) == "not-a-pe[a=x,b=1]"


def test_build_pe_validates_options():
    kw = dict(dim=16, num_heads=2, depth=1, spatial_dims=2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        build_pe("ape", bogus=1, **kw)
    with pytest.raises(PEConfigError, match="impl"):
        build_pe("pape", impl="fast", **kw)
    with pytest.raises(PEConfigError, match="num_parabolas"):
        build_pe("pape", num_parabolas="many", **kw)
    assert build_pe("pape", num_parabolas=4.0, **kw).num_parabolas == 4  # coerced


# ----------------------------------------------------------------------------------------------
# naive references, written from the published definitions
# ----------------------------------------------------------------------------------------------
def _naive_attention(attn, x, pe_logit, P):
    """softmax over j of S_ij, S given as a function (b, h, i, j, q_i, k_j) -> float, patch-only
    PE terms; a plain loop attention in float64 (x: (B, P + N, D))."""
    B, T, D = x.shape
    H, d = attn.num_heads, attn.head_dim
    q, k, v = attn.qkv(x).reshape(B, T, 3, H, d).permute(2, 0, 3, 1, 4)  # (B, H, T, d)
    out = torch.zeros(B, H, T, d, dtype=x.dtype)
    for b in range(B):
        for h in range(H):
            for i in range(T):
                s = torch.stack([pe_logit(b, h, i, j, q[b, h, i], k[b, h, j]) for j in range(T)])
                out[b, h, i] = s.softmax(0) @ v[b, h]
    return attn.proj(out.transpose(1, 2).reshape(B, T, D))


@pytest.mark.parametrize("impl", ["sdpa", "naive"])
@pytest.mark.parametrize("P", [0, 1])
def test_pape_default_is_the_published_logit(impl, P):
    """Default pape: S_ij = (<q_i,k_j> - <softplus(A x_i), D_ij^2> - <B' x_i, D_ij>) / sqrt(d),
    D_ij = W_p (r_j - r_i), no biases, with the default-initialised parameters (the harness's
    form; pebench's B is -B'). Prefix (CLS) tokens: no PE term."""
    torch.manual_seed(0)
    D, H, p, N, m = 16, 2, 2, 7, 3
    d = D // H
    pe = build_pe("pape", dim=D, num_heads=H, depth=1, spatial_dims=p, num_prefix_tokens=P, num_parabolas=m,
                  impl=impl).double()
    L = pe.layer(0)
    assert {n for n, _ in L.named_parameters()} == {"a_weight", "b_weight", "wp"}  # no biases
    attn = Attention(D, H).double()
    r = torch.rand(N, p, dtype=torch.float64) * 6
    x = torch.randn(2, P + N, D, dtype=torch.float64)
    A = L.a_weight.detach().view(H, m, D)
    Bp = -L.b_weight.detach().view(H, m, D)
    W = L.wp.detach()  # (H, m, p)

    def logit(b, h, i, j, qi, kj):
        s = qi @ kj
        if i >= P and j >= P:
            xi = x[b, i]
            delta = W[h] @ (r[j - P] - r[i - P])  # (m,)
            s = s - (F.softplus(A[h] @ xi) * delta ** 2).sum() - ((Bp[h] @ xi) * delta).sum()
        return s / math.sqrt(d)

    with torch.no_grad():
        got = attn(x, r, L)
        want = _naive_attention(attn, x, logit, P)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def _assert_uniform(t: torch.Tensor, bound: float) -> None:
    """Values in [-bound, bound] and spread like U(-bound, bound): max |t| near the bound,
    std near bound / sqrt(3), mean near 0 (loose, n >= 256 draws)."""
    t = t.detach().flatten()
    assert t.numel() >= 256
    assert t.abs().max() <= bound and t.abs().max() > 0.9 * bound
    assert abs(t.std().item() / (bound / math.sqrt(3)) - 1) < 0.15
    assert abs(t.mean().item()) < 0.15 * bound


def test_pape_default_init_is_nn_linear():
    """W_p, A, B drawn as nn.Linear's default weight init: U(+-1/sqrt(fan_in)) (kaiming-uniform
    with a = sqrt(5)), fan_in = D for A and B (Linear(D, 2Hm)) and p for W_p (Linear(p, Hm))."""
    torch.manual_seed(0)
    D, H, m = 64, 4, 50
    for p in (2, 3):
        pe = build_pe("pape", dim=D, num_heads=H, depth=2, spatial_dims=p, num_parabolas=m)
        for L in pe.layers:
            assert L.a_weight.shape == L.b_weight.shape == (H * m, D) and L.wp.shape == (H, m, p)
            _assert_uniform(L.a_weight, 1 / math.sqrt(D))
            _assert_uniform(L.b_weight, 1 / math.sqrt(D))
            _assert_uniform(L.wp, 1 / math.sqrt(p))
            assert not L.a_bias.any() and not L.b_bias.any() and not L.a_bias.requires_grad
        assert not any(n.endswith("bias") for n, _ in pe.named_parameters())
        assert pe.no_weight_decay() == set()  # the harness's AdamW decays W_p too
    # the same bound nn.Linear itself uses (its default weight init, a 2-D weight)
    lin = torch.nn.Linear(D, 2 * H * m, bias=False)
    assert lin.weight.abs().max() <= 1 / math.sqrt(D) and lin.weight.abs().max() > 0.9 / math.sqrt(D)


def test_pape_pebench_variant_kept_as_options():
    torch.manual_seed(0)
    pe = build_pe("pape", dim=128, num_heads=4, depth=1, spatial_dims=2, grid=(16, 16), init="pebench",
                  logit_scale="content")
    L = pe.layer(0)
    assert {"a_bias", "b_bias"} <= {n for n, _ in L.named_parameters()}
    assert abs(L.wp.std().item() / (2 / (16 * math.sqrt(50))) - 1) < 0.1
    assert L.a_weight.std().item() < 0.03 and L.pe_factor == 1.0
    assert variant_label("pape", {"init": "pebench", "logit_scale": "content"}) == \
        "pape[init=pebench,logit_scale=content]"
    with pytest.raises(PEConfigError, match="init=pebench"):
        build_pe("pape", dim=16, num_heads=2, depth=1, spatial_dims=2, wp_std=0.1)


@pytest.mark.parametrize("impl", ["sdpa", "naive"])
def test_pape_ri_default_is_the_published_logit(impl):
    """Default pape-ri: S_ij = (<q_i,k_j> - softplus(A x_i)_h ||s_h (r_j - r_i)||^2) / sqrt(d),
    A without bias, s_h a fixed buffer drawn from U(+-1/sqrt(p))."""
    torch.manual_seed(0)
    D, H, p, N = 16, 2, 3, 6
    d = D // H
    pe = build_pe("pape-ri", dim=D, num_heads=H, depth=1, spatial_dims=p, impl=impl).double()
    L = pe.layer(0)
    attn = Attention(D, H).double()
    r = torch.rand(N, p, dtype=torch.float64) * 6
    x = torch.randn(2, N, D, dtype=torch.float64)
    A, s = L.a_weight.detach(), L.scale.detach()  # (H, D), (H,)

    def logit(b, h, i, j, qi, kj):
        return (qi @ kj - F.softplus(A[h] @ x[b, i]) * ((s[h] * (r[j] - r[i])) ** 2).sum()) / math.sqrt(d)

    with torch.no_grad():
        torch.testing.assert_close(attn(x, r, L), _naive_attention(attn, x, logit, 0), rtol=1e-10, atol=1e-10)


def test_pape_ri_scale_is_a_fixed_random_buffer():
    torch.manual_seed(0)
    for p in (2, 3):
        pe = build_pe("pape-ri", dim=32, num_heads=8, depth=40, spatial_dims=p)
        assert not any(n.endswith("scale") for n, _ in pe.named_parameters())
        assert all(n.endswith(("scale",)) for n, _ in pe.named_buffers() if "scale" in n)
        s = torch.cat([L.scale for L in pe.layers])  # 320 draws
        assert "layers.0.scale" in pe.state_dict()  # saved with the model, so a checkpoint reproduces it
        _assert_uniform(s, 1 / math.sqrt(p))
        assert {n for n, _ in pe.layers[0].named_parameters()} == {"a_weight"}  # no bias
        _assert_uniform(torch.cat([L.a_weight.flatten() for L in pe.layers]), 1 / math.sqrt(32))
        assert pe.no_weight_decay() == set()
    pe = build_pe("pape-ri", dim=32, num_heads=2, depth=1, spatial_dims=2, head_scale="learnable")
    assert "layers.0.scale" in dict(pe.named_parameters()) and pe.no_weight_decay() == {"layers.0.scale"}


# ----------------------------------------------------------------------------------------------
# LookHere LH-90 (official config "corners-triangles-none", global slope 2, layer slopes 1.5 -> 0.5)
# ----------------------------------------------------------------------------------------------
def _lh90_reference_layout(H):
    """(kind, direction name, head slope) per head, as the official code lays out 12 and 16 heads."""
    corners = ["up-left", "up-right", "down-left", "down-right"]
    triangles = ["up", "down", "left", "right"]
    none = [("none", "-", s) for s in (0.25, 0.0625, 0.015625, 0.00390625)]
    if H == 12:
        return [("corner", c, 0.5) for c in corners] + [("triangle", t, 0.5) for t in triangles] + none
    assert H == 16
    return ([("corner", c, 0.5) for c in corners] + [("corner", c, 0.25) for c in corners]
            + [("triangle", t, 0.5) for t in triangles] + none)


def _visible(kind, name, dy, dx):
    """Integer-grid visibility, written with comparisons only (up = -y, left = -x)."""
    if kind == "none":
        return True
    if kind == "corner":
        vy, vx = name.split("-")
        return (dy <= 0 if vy == "up" else dy >= 0) and (dx <= 0 if vx == "left" else dx >= 0)
    return {"up": dy <= -abs(dx), "down": dy >= abs(dx), "left": dx <= -abs(dy), "right": dx >= abs(dy)}[name]


@pytest.mark.parametrize("H", [12, 16])
def test_lookhere_lh90_layout_and_biases(H):
    depth, grid = 3, (4, 5)
    pe = build_pe("lookhere", dim=8 * H, num_heads=H, depth=depth, spatial_dims=2)
    layout = _lh90_reference_layout(H)
    assert [(h.kind.replace("unmasked", "none"), h.name if h.kind != "unmasked" else "-", h.slope)
            for h in pe.heads] == layout
    c = grid_coords(grid)  # (N, 2) (y, x)
    N = c.shape[0]
    for li in range(depth):
        s_l = 1.5 + (0.5 - 1.5) * li / (depth - 1)
        got = pe.layer(li).bias(c)[0]  # (H, N, N)
        want = torch.empty(H, N, N)
        for h, (kind, name, slope) in enumerate(layout):
            for i in range(N):
                for j in range(N):
                    dy, dx = (c[j] - c[i]).tolist()
                    dist = math.hypot(dy, dx)
                    want[h, i, j] = -2 * s_l * slope * dist if _visible(kind, name, dy, dx) else -1e9
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("H", range(1, 17))
def test_lookhere_head_count_rule(H):
    """The documented rule: u = min(4, H // 3, max(H - 4, 0)) unmasked heads with slopes 4^-(k+1);
    directional heads dealt corners, triangles, corners, ... in groups of four at slopes
    2^-(round+1); with H >= 4 the directional heads alone see every key from every query."""
    pe = build_pe("lookhere", dim=4 * H, num_heads=H, depth=2, spatial_dims=2)
    heads = pe.heads
    u = min(4, H // 3, max(H - 4, 0))
    assert len(heads) == H and [h.kind for h in heads[H - u:]] == ["unmasked"] * u
    assert [h.slope for h in heads[H - u:]] == [4.0 ** -(k + 1) for k in range(u)]
    n_dir = H - u
    groups = [("corner", r) if g % 2 == 0 else ("triangle", r) for g, r in ((g, g // 2) for g in range(8))]
    expect = []
    for g, (kind, rnd) in enumerate(groups):
        expect += [(kind, 2.0 ** -(rnd + 1))] * max(0, min(4, n_dir - 4 * g))
    expect.sort(key=lambda t: (t[0] != "corner", -t[1]))  # corners (by round), then triangles
    assert [(h.kind, h.slope) for h in heads[:n_dir]] == expect
    if H >= 4:
        b = pe.layer(0).bias(grid_coords((5, 5)))[0, :n_dir]  # (n_dir, N, N)
        assert ((b > -1e8).any(0)).all()
    if H in (12, 16):
        assert u == 4


def test_lookhere_unmasked_heads_option():
    pe = build_pe("lookhere", dim=32, num_heads=4, depth=1, spatial_dims=2, unmasked_heads=1)
    assert [h.kind for h in pe.heads] == ["corner"] * 3 + ["unmasked"]
    assert variant_label("lookhere", {"unmasked_heads": 1}) == "lookhere[unmasked_heads=1]"
    with pytest.raises(PEConfigError):
        build_pe("lookhere", dim=32, num_heads=4, depth=1, spatial_dims=2, unmasked_heads=5)


# ----------------------------------------------------------------------------------------------
# APE: only the parameters its input type uses; init options
# ----------------------------------------------------------------------------------------------
def _count(m):
    return sum(p.numel() for p in m.parameters())


def test_ape_parameter_counts():
    D = 128  # vit-nano
    img = build_backbone("vit-nano", pe="ape", spatial_dims=2, grid=(8, 8))
    assert _count(img) - _count(build_backbone("vit-nano", pe="none", spatial_dims=2, grid=(8, 8))) == 64 * D
    assert _count(img.pe) == 64 * D and img.pe.coord_mlp is None  # the table only
    vid = build_backbone("vit-nano", pe="ape", spatial_dims=3, grid=(2, 4, 4))
    assert _count(vid.pe) == 32 * D
    pts = build_backbone("vit-nano", pe="ape", spatial_dims=3, grid=None)  # point groups: the MLP only
    hidden = 128
    assert pts.pe.table is None and _count(pts.pe) == (3 * hidden + hidden) + (hidden * D + D)
    with pytest.raises(PEConfigError, match="grid"):
        img.pe.encode_tokens(torch.zeros(1, 3, D), torch.rand(3, 2), None)  # a table APE given non-grid tokens


def test_ape_init_options():
    torch.manual_seed(0)
    kw = dict(dim=64, num_heads=2, depth=1, spatial_dims=2, grid=(16, 16))
    timm_std = build_pe("ape", init="timm", **kw).table.std().item()
    ssdc = build_pe("ape", init="ssdc", **kw).table
    assert abs(timm_std / 0.02 - 1) < 0.1  # trunc_normal_(std=0.02) (cut at +-2, i.e. 100 sigma)
    assert abs(ssdc.std().item() - 1) < 0.05 and ssdc.abs().max() > 3  # N(0, 1), not truncated

"""PaPE: the SDPA (q/k augmentation) path equals the naive N x N path, and the naive logits
equal a direct loop evaluation of the formula (issues #3, #11), for the published
parameterisation (the default) and pebench's prior (init=pebench, logit_scale=content)."""
from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from pebench.encodings import build_pe
from pebench.models import Attention, build_backbone


def randomise(module: torch.nn.Module, seed: int = 0) -> None:
    """Move PaPE parameters off their init (b != 0, varied a, random W_p) while keeping the PE
    logits O(1-10), so float32 comparisons stay well conditioned."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, prm in module.named_parameters():
            if name.endswith(("a_weight", "b_weight")):
                prm.copy_(torch.randn(prm.shape, generator=g) / prm.shape[-1] ** 0.5)
            elif name.endswith("b_bias"):
                prm.copy_(torch.randn(prm.shape, generator=g) * 0.3)
            elif name.endswith("wp"):
                prm.copy_(torch.randn(prm.shape, generator=g) * 0.3 / prm.shape[-2] ** 0.5)


#: PaPE variants whose sdpa and naive paths must agree: the published default and pebench's prior
#: (init=pebench brings the biases, logit_scale=content leaves the PE terms unscaled).
VARIANTS = {"pape": [{}, {"init": "pebench", "logit_scale": "content"}],
            "pape-ri": [{}, {"init": "pebench", "logit_scale": "content", "head_scale": "learnable"}]}
CASES = [(name, v) for name in VARIANTS for v in range(2)]


def coords_for(p: int, n: int = 15, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, p, generator=g) * 8 - 2  # non-grid, off-centre


def assert_grads_match(a: torch.nn.Module, b: torch.nn.Module, tol: float) -> None:
    """Every parameter gradient equal, with tolerance ``tol`` relative to the tensor's scale."""
    pb = dict(b.named_parameters())
    for k, prm in a.named_parameters():
        assert prm.grad is not None and pb[k].grad is not None, k
        scale = max(1.0, pb[k].grad.abs().max().item())
        torch.testing.assert_close(prm.grad, pb[k].grad, rtol=tol, atol=tol * scale, msg=lambda m: f"{k}: {m}")


def assert_same_outputs_and_grads(fa, fb, x: torch.Tensor, modules: tuple, tol: float) -> None:
    """``fa(x)`` == ``fb(x)``, and after backward of the same random weighting the input
    gradients and every parameter gradient of each ``(module_a, module_b)`` pair, to ``tol``."""
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = fa(xa), fb(xb)
    torch.testing.assert_close(ya, yb, rtol=tol, atol=tol)
    w = torch.randn_like(ya)
    (ya * w).sum().backward()
    (yb * w).sum().backward()
    torch.testing.assert_close(xa.grad, xb.grad, rtol=tol, atol=tol)
    for ma, mb in modules:
        assert_grads_match(ma, mb, tol)


@pytest.mark.parametrize("cls", [0, 1])
@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("name,variant", CASES)
def test_sdpa_equals_naive_attention_layer_fp32(name, variant, p, cls):
    """One attention layer in float32: outputs and gradients (inputs, attention and PE
    parameters) of impl='sdpa' equal impl='naive' to 1e-5, for both parameterisations."""
    torch.manual_seed(0)
    D, H, N = 64, 4, 15
    kw = dict(dim=D, num_heads=H, depth=1, spatial_dims=p, num_prefix_tokens=cls, **VARIANTS[name][variant])
    pe_s = build_pe(name, impl="sdpa", **kw)
    randomise(pe_s)
    pe_n = build_pe(name, impl="naive", **kw)
    pe_n.load_state_dict(pe_s.state_dict())
    attn_s = Attention(D, H)
    attn_n = copy.deepcopy(attn_s)
    c = coords_for(p, N)
    x = torch.randn(2, cls + N, D)
    assert_same_outputs_and_grads(lambda t: attn_s(t, c, pe_s.layer(0)), lambda t: attn_n(t, c, pe_n.layer(0)), x,
                                  ((attn_s, attn_n), (pe_s, pe_n)), 1e-5)
    assert pe_s.layers[0].a_weight.grad.abs().sum() > 0  # the PE parameters do receive gradient


@pytest.mark.parametrize("name,p,cls,variant", [("pape", 2, True, 0), ("pape", 3, False, 1), ("pape-ri", 3, True, 0),
                                                ("pape-ri", 2, False, 1)])
def test_sdpa_equals_naive_backbone(name, p, cls, variant):
    """Whole vit-nano: float32 outputs agree to 1e-5; in float64 outputs and all gradients agree
    to 1e-9 (float32 gradients through 4 blocks differ from the float64 truth by ~1e-5 relative
    for *both* impls, so the exactness of the fold is checked in float64)."""
    torch.manual_seed(0)
    opts = VARIANTS[name][variant]
    sdpa = build_backbone("vit-nano", pe=name, spatial_dims=p, class_token=cls, impl="sdpa", **opts)
    randomise(sdpa)
    naive = build_backbone("vit-nano", pe=name, spatial_dims=p, class_token=cls, impl="naive", **opts)
    naive.load_state_dict(sdpa.state_dict())
    c = coords_for(p)
    x = torch.randn(2, 15, 128)
    with torch.no_grad():
        torch.testing.assert_close(sdpa(x, c), naive(x, c), rtol=1e-5, atol=1e-5)
    sdpa.double()
    naive.double()
    c, x = c.double(), x.double()
    assert_same_outputs_and_grads(lambda t: sdpa(t, c), lambda t: naive(t, c), x, ((sdpa, naive),), 1e-9)


@pytest.mark.parametrize("variant", [0, 1])
@pytest.mark.parametrize("cls", [0, 1])
@pytest.mark.parametrize("p", [2, 3])
def test_naive_logits_equal_loop_formula(p, cls, variant):
    D, H, m, N = 16, 2, 5, 6
    opts = VARIANTS["pape"][variant]
    pe = build_pe("pape", dim=D, num_heads=H, depth=1, spatial_dims=p, num_prefix_tokens=cls,
                  num_parabolas=m, impl="naive", **opts).double()
    factor = 1 / math.sqrt(D // H) if not opts else 1.0  # published: 1/sqrt(d) on the PE terms too
    randomise(pe)
    L = pe.layer(0)
    c = coords_for(p, N).double()
    x = torch.randn(1, cls + N, D, dtype=torch.float64)
    q = torch.randn(1, H, cls + N, D // H, dtype=torch.float64)
    L.qk(q, q, x, c)
    got = L.bias(c)[0]  # (H, T, T)
    want = torch.zeros(H, cls + N, cls + N, dtype=torch.float64)
    for h in range(H):
        for i in range(N):
            xi = x[0, cls + i]
            a = -F.softplus(L.a_weight[h * m:(h + 1) * m] @ xi + L.a_bias[h * m:(h + 1) * m])
            b = L.b_weight[h * m:(h + 1) * m] @ xi + L.b_bias[h * m:(h + 1) * m]
            for j in range(N):
                delta = L.wp[h] @ (c[j] - c[i])  # (m,)
                want[h, cls + i, cls + j] = factor * ((a * delta ** 2).sum() + (b * delta).sum())
    torch.testing.assert_close(got, want.detach(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("variant", [0, 1])
@pytest.mark.parametrize("cls", [0, 1])
@pytest.mark.parametrize("p", [2, 3])
def test_sdpa_logits_exact_up_to_per_query_constant(p, cls, variant):
    """q'k'^T / sqrt(d) - q k^T / sqrt(d) reproduces the naive logits up to a per-row constant."""
    D, H, N = 32, 2, 10
    kw = dict(dim=D, num_heads=H, depth=1, spatial_dims=p, num_prefix_tokens=cls, **VARIANTS["pape"][variant])
    s = build_pe("pape", impl="sdpa", **kw).double()
    randomise(s)
    n = build_pe("pape", impl="naive", **kw).double()
    n.load_state_dict(s.state_dict())
    c, d = coords_for(p, N).double(), D // H
    x = torch.randn(2, cls + N, D, dtype=torch.float64)
    q, k = torch.randn(2, 2, H, cls + N, d, dtype=torch.float64)
    qa, ka = s.layer(0).qk(q, k, x, c)
    extra = p * (p + 1) // 2 + p + cls
    assert qa.shape[-1] == ka.shape[-1] == math.ceil((d + extra) / 8) * 8  # 5 / 9 extra dims (+1 with CLS)
    torch.testing.assert_close(qa[..., :d], q)
    if cls:
        assert (qa[:, :, 0, d:] == 0).all()  # prefix queries: zero augmentation
    pe_logits = (qa @ ka.transpose(-1, -2) - q @ k.transpose(-1, -2)) / math.sqrt(d)
    n.layer(0).qk(q, k, x, c)
    ref = n.layer(0).bias(c)
    diff = pe_logits - ref  # constant along each row
    torch.testing.assert_close(diff, diff[..., :1].expand_as(diff), rtol=1e-9, atol=1e-9)


def test_pape_ri_sdpa_extra_dims_and_grid_init():
    pe = build_pe("pape-ri", dim=64, num_heads=2, depth=2, spatial_dims=3, grid=(4, 8, 8), init="pebench",
                  head_scale="learnable")
    assert pe.no_weight_decay() == {"layers.0.scale", "layers.1.scale"}
    torch.testing.assert_close(pe.layers[0].scale.detach(), torch.full((2,), 0.25))
    q = torch.randn(1, 2, 5, 32)
    qa, ka = pe.layer(0).qk(q, q, torch.randn(1, 5, 64), torch.randn(5, 3))
    assert qa.shape[-1] == 40  # 32 + (p + 1) = 36 -> padded to 40


def test_pape_init_trains_like_a_local_prior():
    """pebench's prior (init=pebench, logit_scale=content): a ~ -1, b ~ 0 and E[PE logit] ~ -4 |dr|^2 / G^2."""
    torch.manual_seed(0)
    G = 16
    pe = build_pe("pape", dim=128, num_heads=4, depth=1, spatial_dims=2, grid=(G, G), impl="naive", init="pebench",
                  logit_scale="content")
    L = pe.layer(0)
    c = torch.tensor([[0.0, 0.0], [G / 2, 0.0], [0.0, float(G)]])
    x = torch.nn.functional.layer_norm(torch.randn(1, 3, 128), (128,))
    L.qk(torch.zeros(1, 4, 3, 32), torch.zeros(1, 4, 3, 32), x, c)
    b = L.bias(c)[0].mean(0)  # averaged over heads
    assert -3 < b[0, 1].item() < -0.2 and -10 < b[0, 2].item() < -1.5
    assert pe.no_weight_decay() == {"layers.0.wp"}


def test_naive_bias_requires_qk_first():
    pe = build_pe("pape", dim=32, num_heads=2, depth=1, spatial_dims=2, impl="naive")
    with pytest.raises(RuntimeError):
        pe.layer(0).bias(torch.zeros(3, 2))


@pytest.mark.parametrize("name", ["pape", "pape-ri"])
def test_coord_feature_cache_follows_the_coords(name):
    """The per-layer cache of centred coords / key features is reused only for the same,
    unmodified coords tensor: an in-place edit, another tensor, or inference mode give the
    freshly computed result, and entries made under inference_mode never reach training."""
    torch.manual_seed(0)
    pe = build_pe(name, dim=32, num_heads=2, depth=1, spatial_dims=2)
    randomise(pe)
    L = pe.layer(0)
    ref = build_pe(name, dim=32, num_heads=2, depth=1, spatial_dims=2)
    ref.load_state_dict(pe.state_dict())
    x, q, k = torch.randn(2, 15, 32), torch.randn(2, 2, 15, 16), torch.randn(2, 2, 15, 16)

    def fresh(c):  # a new layer each time: nothing cached
        ref.layer(0)._coord_cache.clear()
        return ref.layer(0).qk(q, k, x, c)

    c = coords_for(2)
    with torch.inference_mode():
        L.qk(q, k, x, c)
    assert L._coord_cache._entry is None  # nothing stored in inference mode
    out1 = L.qk(q, k, x, c)
    assert L._coord_cache._entry is not None and L._coord_cache._entry[0] is c
    out2 = L.qk(q, k, x, c)  # hit
    for a, b in zip(out2, fresh(c)):
        torch.testing.assert_close(a, b)
    with torch.no_grad():
        c.mul_(2.0)  # in-place edit: version bump -> miss
    out3 = L.qk(q, k, x, c)
    for a, b in zip(out3, fresh(c)):
        torch.testing.assert_close(a, b)
    assert not torch.allclose(out3[1], out1[1])
    c2 = c.clone()  # equal values, another object
    for a, b in zip(L.qk(q, k, x, c2), fresh(c2)):
        torch.testing.assert_close(a, b)
    with torch.inference_mode():  # a training-mode entry may be read in inference mode
        for a, b in zip(L.qk(q, k, x, c2), fresh(c2)):
            torch.testing.assert_close(a, b)


@pytest.mark.parametrize("variant", [0, 1])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_fused_query_augment_equals_composite(p, variant):
    """The one-node fused q augmentation (hand-written backward) equals the autograd composite:
    outputs and the gradients of x and every PaPE parameter, float64, 3 heads."""
    torch.manual_seed(0)
    D, H, N, B = 24, 3, 11, 2
    pe = build_pe("pape", dim=D, num_heads=H, depth=1, spatial_dims=p, num_parabolas=7,
                  **VARIANTS["pape"][variant]).double()
    randomise(pe)
    L = pe.layer(0)
    r = coords_for(p, N).double().expand(B, -1, -1)
    r = r - r.mean(1, keepdim=True)
    width = L.extra_dims + (-(D // H + L.extra_dims)) % 8
    x = torch.randn(B, N, D, dtype=torch.float64)
    outs = []
    for fn in (L.augment, L.augment_reference):
        xr = x.clone().requires_grad_()
        pe.zero_grad(set_to_none=True)
        qa, const = fn(xr, r, width, 2.5, False)
        assert qa.shape == (B, H, N, width) and const is None
        assert (qa[..., L.extra_dims:] == 0).all()  # padding columns stay zero
        g = torch.randn(qa.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        (qa * g).sum().backward()
        outs.append((qa.detach(), xr.grad, {k: v.grad.clone() for k, v in pe.named_parameters()}))
    (qf, gxf, gpf), (qr, gxr, gpr) = outs
    torch.testing.assert_close(qf, qr, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gxf, gxr, rtol=1e-12, atol=1e-12)
    for k in gpr:
        torch.testing.assert_close(gpf[k], gpr[k], rtol=1e-12, atol=1e-12, msg=lambda m: f"{k}: {m}")


@pytest.mark.parametrize("name", ["pape", "pape-ri"])
def test_bf16_autocast_forward_backward(name):
    """Under (CPU) bf16 autocast the PaPE fold runs in float32 inside a bf16 model: forward and
    backward work and the output stays near the float32 one."""
    torch.manual_seed(0)
    m = build_backbone("vit-nano", pe=name, spatial_dims=2, grid=(4, 4))
    randomise(m)
    x, c = torch.randn(2, 16, 128), coords_for(2, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = m(x, c)
    y.float().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in m.pe.parameters())
    with torch.no_grad():
        torch.testing.assert_close(y.float(), m(x, c), rtol=0.05, atol=0.05)


def test_fused_query_augment_gradcheck():
    """The hand-written backward of the fused node against finite differences
    (``torch.autograd.gradcheck``, float64): x and every PaPE parameter, 2 heads, p = 3."""
    from pebench.encodings._pape_fused import pape_query_augment
    torch.manual_seed(0)
    H, m, p, D, B, N, width = 2, 3, 3, 5, 2, 4, 10
    r = torch.randn(B, N, p, dtype=torch.float64)
    args = [torch.randn(s, dtype=torch.float64, requires_grad=True) * f
            for s, f in (((B, N, D), 1.0), ((H * m, D), 0.5), ((H * m,), 0.5), ((H * m, D), 0.5), ((H * m,), 0.5),
                         ((H, m, p), 0.5))]
    args = [a.detach().requires_grad_() for a in args]
    x, aw, ab, bw, bb, wp = args

    def fn(x, aw, ab, bw, bb, wp):
        return pape_query_augment(x, r, aw, ab, bw, bb, wp, width, 1.7)

    assert torch.autograd.gradcheck(fn, (x, aw, ab, bw, bb, wp), eps=1e-6, atol=1e-6, rtol=1e-5)

    def no_bias(x, aw, bw, wp):  # biases None (the published PaPE): the same as zero biases
        return pape_query_augment(x, r, aw, None, bw, None, wp, width, 1.7)

    assert torch.autograd.gradcheck(no_bias, (x, aw, bw, wp), eps=1e-6, atol=1e-6, rtol=1e-5)
    zeros = torch.zeros(H * m, dtype=torch.float64)
    torch.testing.assert_close(no_bias(x, aw, bw, wp), fn(x, aw, zeros, bw, zeros, wp), rtol=0, atol=1e-15)

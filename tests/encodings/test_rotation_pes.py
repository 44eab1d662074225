"""The learned-rotation PEs (liere, comrope, string), rope-axial's video layouts and p-RoPE.

Every PE is compared in float64 with a naive reference built from the paper's formula
(tests/rotation_refs.py: ``scipy.linalg.expm``, explicit rotation matrices, a double-loop attention);
then the properties: orthogonal rotations, logits that depend on coordinate differences only (LieRE:
its documented departure), permutation equivariance, padding masks, backbones for p = 2 and 3, and a
``bench run --fast-dev-run`` of each on an image and a video dataset.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from rotation_refs import layout_pair_angles, naive_logits, rotation_matrices

from pebench.cli import main
from pebench.encodings import PEConfigError, build_pe, pe_options, variant_label
from pebench.encodings.rope_axial import LAYOUTS
from pebench.models import Attention, build_backbone, grid_coords

#: (PE, options) pairs under test: every new PE and variant, and the non-axial rope-axial layouts (``hope``, whose
#: temporal spacing is drawn in training, against the paper and the official code in test_rope_hope.py)
CASES = [("liere", {}), ("liere", {"block_size": 8, "per_layer": False}), ("comrope", {}),
         ("comrope", {"variant": "ap", "block_size": 4}),
         ("comrope", {"block_size": 4, "coord_scale": [0.5, 0.25, 1.0]}), ("string", {}),
         ("string", {"p_form": "circulant"})] + \
        [("rope-axial", {"layout": lay}) for lay in LAYOUTS[1:] if lay != "hope"] + \
        [("rope-axial", {"p": 0.75}), ("rope-axial", {"p": 0.5, "layout": "videorope"})]  # p-RoPE
IDS = [variant_label(n, o) for n, o in CASES]
RELATIVE = [(n, o) for n, o in CASES if n != "liere"]
D, H = 32, 2  # head dim 16


def _opts(o: dict, p: int) -> dict:
    o = dict(o)
    if "coord_scale" in o:
        o["coord_scale"] = o["coord_scale"][:p]
    return o


def randomise(pe: torch.nn.Module, seed: int = 0) -> None:
    """Move parameters that start at a special value (STRING's S = 0) to generic ones."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, prm in pe.named_parameters():
            if name.endswith("upper") and pe.name == "string":
                prm.copy_(torch.randn(prm.shape, generator=g, dtype=prm.dtype) * 0.3)


def make(name: str, opts: dict, p: int, P: int = 0, depth: int = 2, grid=None):
    torch.manual_seed(0)
    pe = build_pe(name, dim=D, num_heads=H, depth=depth, spatial_dims=p, num_prefix_tokens=P, grid=grid,
                  **_opts(opts, p)).double()
    randomise(pe)
    return pe


def coords_of(n: int, p: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, p, generator=g, dtype=torch.float64) * 4 - 2


# ----------------------------------------------------------------------------------------------
# against the naive references
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("P", [0, 1])
@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("name,opts", CASES, ids=IDS)
def test_logits_match_naive_reference(name, opts, p, P):
    grid = (4, 5) if p == 2 else (3, 4, 5)
    pe = make(name, opts, p, P, grid=grid)
    N = 7
    c = coords_of(N, p)
    q = torch.randn(2, H, P + N, D // H, dtype=torch.float64)
    k = torch.randn(2, H, P + N, D // H, dtype=torch.float64)
    for li in (0, pe.depth - 1):
        qr, kr = pe.layer(li).qk(q, k, None, c)
        got = (qr @ kr.transpose(-1, -2)).detach().numpy()
        np.testing.assert_allclose(got, naive_logits(pe, li, q, k, c, P), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name,opts", CASES, ids=IDS)
def test_attention_output_matches_reference(name, opts):
    """The block's attention (SDPA, CLS token, batched coords) against softmax of the naive logits."""
    torch.manual_seed(1)
    p, P, N = 3, 1, 6
    pe = make(name, opts, p, P)
    attn = Attention(D, H).double()
    x = torch.randn(2, P + N, D, dtype=torch.float64)
    c = torch.stack([coords_of(N, p, 1), coords_of(N, p, 2)])  # (B, N, p): per-sample coords
    q, k, v = attn.qkv(x).reshape(2, P + N, 3, H, D // H).permute(2, 0, 3, 1, 4)
    with torch.no_grad():
        got = attn(x, c, pe.layer(0))
        logits = torch.stack([torch.from_numpy(naive_logits(pe, 0, q[b:b + 1], k[b:b + 1], c[b], P))[0]
                              for b in range(2)])  # (B, H, T, T)
        out = (logits / math.sqrt(D // H)).softmax(-1) @ v
        want = attn.proj(out.transpose(1, 2).reshape(2, P + N, D))
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


def test_rotations_are_orthogonal_and_norm_preserving():
    c = coords_of(5, 3)
    for name, opts in CASES:
        pe = make(name, opts, 3, 1)
        for R in rotation_matrices(pe, 0, c).reshape(-1, D // H, D // H):
            np.testing.assert_allclose(R.T @ R, np.eye(D // H), atol=1e-10)
        q = torch.randn(2, H, 6, D // H, dtype=torch.float64)
        with torch.no_grad():
            qr, _ = pe.layer(0).qk(q, q, None, c)
        torch.testing.assert_close(qr.norm(dim=-1), q.norm(dim=-1), rtol=1e-12, atol=1e-12)
        if name == "string" and opts.get("p_form", "cayley") == "cayley":  # CLS: P (the identity of R = P^T RoPE P)
            orth = pe.layer(0).orthogonal(q.dtype).detach()  # (H, d, d)
            torch.testing.assert_close(qr[:, :, 0], torch.einsum("hij,bhj->bhi", orth, q[:, :, 0]))
        elif name == "comrope":  # impl eig returns D U^T q: CLS gets U^T (the logits of R = I; test_comrope_fast.py)
            basis = pe.layer(0).phase_tables(c, q.dtype)[0].detach()  # (H, d, d)
            torch.testing.assert_close(qr[:, :, 0], torch.einsum("bhi,hij->bhj", q[:, :, 0], basis))
        else:
            torch.testing.assert_close(qr[:, :, 0], q[:, :, 0], rtol=0, atol=0)  # CLS: identity


# ----------------------------------------------------------------------------------------------
# relative positions
# ----------------------------------------------------------------------------------------------
def _logits(pe, c, seed=3):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, H, c.shape[-2], D // H, generator=g, dtype=torch.float64)
    k = torch.randn(2, H, c.shape[-2], D // H, generator=g, dtype=torch.float64)
    with torch.no_grad():
        qr, kr = pe.layer(0).qk(q, k, None, c)
    return qr @ kr.transpose(-1, -2)


@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("name,opts", RELATIVE, ids=[variant_label(n, o) for n, o in RELATIVE])
def test_relative_pes_see_coordinate_differences_only(name, opts, p):
    pe = make(name, opts, p)
    c = torch.stack([coords_of(9, p, 4), coords_of(9, p, 5)])  # (B, N, p)
    shift = torch.randn(2, 1, p, dtype=torch.float64, generator=torch.Generator().manual_seed(6)) * 5
    torch.testing.assert_close(_logits(pe, c + shift), _logits(pe, c), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("p", [2, 3])
def test_liere_is_not_relative_as_documented(p):
    """LieRE's generators need not commute: a general shift changes the logits; a shift along one axis
    with the other coordinates 0 does not; commuting generators make it exactly relative."""
    pe = make("liere", {"block_size": 8}, p)
    c = coords_of(9, p, 4)
    shift = torch.tensor([1.3, -0.7, 0.4][:p], dtype=torch.float64)
    assert (_logits(pe, c + shift) - _logits(pe, c)).abs().max() > 1e-3
    line = torch.zeros(9, p, dtype=torch.float64)
    line[:, 0] = coords_of(9, 1, 7)[:, 0]
    one_axis = torch.zeros(p, dtype=torch.float64)
    one_axis[0] = 2.1
    torch.testing.assert_close(_logits(pe, line + one_axis), _logits(pe, line), rtol=1e-9, atol=1e-9)
    with torch.no_grad():  # generators of every axis proportional to axis 0's: they commute
        up = pe.layers[0].upper
        for a in range(1, p):
            up[:, a] = up[:, 0] * (0.5 + a)
    torch.testing.assert_close(_logits(pe, c + shift), _logits(pe, c), rtol=1e-9, atol=1e-9)


def test_comrope_generators_commute_liere_ones_do_not():
    for name, opts, commute in (("comrope", {}, True), ("comrope", {"variant": "ap", "block_size": 4}, True),
                                ("liere", {"block_size": 8}, False)):
        g = make(name, opts, 3).layers[0].generators().detach()  # (H, p, m, b, b)
        comm = g[:, 0] @ g[:, 1] - g[:, 1] @ g[:, 0]
        assert (comm.abs().max() < 1e-9) == commute, name
        torch.testing.assert_close(g, -g.transpose(-1, -2))  # skew-symmetric


# ----------------------------------------------------------------------------------------------
# backbones: equivariance, padding, both dimensionalities
# ----------------------------------------------------------------------------------------------
def nano(name, opts, p, grid, class_token=False):
    torch.manual_seed(0)
    m = build_backbone("vit-nano", pe=name, spatial_dims=p, grid=grid, class_token=class_token,
                       **_opts(opts, p)).double().eval()
    randomise(m.pe)
    return m


@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("name,opts", CASES, ids=IDS)
def test_permutation_equivariance(name, opts, p):
    grid = (4, 5) if p == 2 else (2, 2, 5)
    coords = grid_coords(grid).double()
    m = nano(name, opts, p, grid, class_token=True)
    x = torch.randn(2, 20, 128, dtype=torch.float64)
    perm = torch.randperm(20, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        y = m(x, coords, grid)
        yp = m(x[:, perm], coords[perm], grid)
    torch.testing.assert_close(yp[:, 1:], y[:, 1:][:, perm], rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(yp[:, 0], y[:, 0], rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("name,opts", CASES, ids=IDS)
def test_padding_mask_is_honoured(name, opts):
    """Padded tokens (any content, any coords) change nothing for the valid ones."""
    p, N, pad = 3, 10, 4
    m = nano(name, opts, p, (2, 3, 3), class_token=True)
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2, N, 128, generator=g, dtype=torch.float64)
    c = torch.rand(2, N, p, generator=g, dtype=torch.float64) * 4
    xp = torch.cat([x, torch.randn(2, pad, 128, generator=g, dtype=torch.float64) * 9], 1)
    cp = torch.cat([c, torch.rand(2, pad, p, generator=g, dtype=torch.float64) * 50], 1)
    mask = torch.cat([torch.ones(2, N, dtype=torch.bool), torch.zeros(2, pad, dtype=torch.bool)], 1)
    mask[1, N - 3:N] = False  # sample 1 has fewer valid tokens
    with torch.no_grad():
        y = m(xp, cp, None, mask)
        ref0 = m(x[:1], c[:1], None)
        ref1 = m(x[1:, :N - 3], c[1:, :N - 3], None)
    torch.testing.assert_close(y[:1, :1 + N], ref0, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(y[1:, :1 + N - 3], ref1, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("name", ["liere", "comrope", "string"])
def test_backbone_trains_the_pe(name, p):
    """build_backbone for p = 2 and 3: finite outputs on the training grid and a larger one, and
    gradients on every PE parameter (float32, the training dtype)."""
    grid = (4, 4) if p == 2 else (2, 4, 4)
    torch.manual_seed(0)
    m = build_backbone("vit-nano", pe=name, spatial_dims=p, grid=grid, class_token=True)
    for g in (tuple(2 * s for s in grid), grid):  # backward through the training grid's forward
        c = grid_coords(g)
        y = m(torch.randn(2, c.shape[0], 128), c, g)
        assert y.shape == (2, 1 + c.shape[0], 128) and torch.isfinite(y).all()
    y.square().mean().backward()
    for n, prm in m.pe.named_parameters():
        assert prm.grad is not None and torch.isfinite(prm.grad).all() and prm.grad.abs().sum() > 0, n
    assert m.pe.no_weight_decay() == {n for n, _ in m.pe.named_parameters()}


# ----------------------------------------------------------------------------------------------
# published defaults
# ----------------------------------------------------------------------------------------------
def test_liere_defaults():
    torch.manual_seed(0)
    pe = build_pe("liere", dim=128, num_heads=4, depth=3, spatial_dims=2, grid=(8, 5))
    assert pe.block_size == 32 and len(pe.layers) == 3  # one dense head-sized block, per layer
    up = pe.layers[0].upper  # (H, p, 1, 32*31/2)
    assert up.shape == (4, 2, 1, 496)
    assert up.min() >= 0 and up.max() < 2 * math.pi and up.max() > 0.95 * 2 * math.pi  # U(0, 2 pi)
    assert not torch.equal(pe.layers[0].upper, pe.layers[1].upper)
    torch.testing.assert_close(pe.layers[0].scale, torch.tensor([1 / 7, 1 / 4], dtype=torch.float64))
    shared = build_pe("liere", dim=128, num_heads=4, depth=3, spatial_dims=3, per_layer=False)
    assert len(shared.layers) == 1 and shared.layer(2) is shared.layer(0)
    assert shared.layers[0].scale.tolist() == [1.0, 1.0, 1.0]  # no training grid (points)


def test_comrope_defaults():
    torch.manual_seed(0)
    pe = build_pe("comrope", dim=128, num_heads=4, depth=2, spatial_dims=3, grid=(4, 8, 6))
    L = pe.layers[0]
    assert pe.variant == "ld" and pe.block_size == 8
    assert L.base.shape == (4, 4, 8, 8) and L.theta.shape == (3, 4)
    assert abs(L.base.std().item() - 1.0) < 0.15  # init_std = 1
    assert L.scale.tolist() == [1 / 8] * 3  # 1 / largest spatial side, time included
    ap = build_pe("comrope", dim=128, num_heads=4, depth=1, spatial_dims=2, variant="ap")
    g = ap.layers[0].generators().detach()  # (H, p, m, b, b): block k only on axis k mod 2
    assert (g[:, 0, 1::2] == 0).all() and (g[:, 1, 0::2] == 0).all()
    assert not hasattr(ap.layers[0], "theta")


def test_string_defaults():
    torch.manual_seed(0)
    pe = build_pe("string", dim=128, num_heads=4, depth=2, spatial_dims=2)
    L = pe.layers[0]
    torch.testing.assert_close(L.orthogonal(torch.float32), torch.eye(32).expand(4, 32, 32))  # P = I at init
    mixed = build_pe("rope-mixed", dim=128, num_heads=4, depth=1, spatial_dims=2)
    with torch.no_grad():
        mixed.layers[0].freqs.copy_(L.freqs)
    q, c = torch.randn(1, 4, 6, 32), torch.rand(6, 2) * 4
    with torch.no_grad():
        pairs = list(zip(L.qk(q, q, None, c), mixed.layer(0).qk(q, q, None, c)))
    for a, b in pairs:
        torch.testing.assert_close(a, b)  # STRING at init = the RoPE-Mixed it wraps
    circ = build_pe("string", dim=128, num_heads=4, depth=1, spatial_dims=3, p_form="circulant")
    assert circ.layers[0].cols.shape == (3, 4, 32)


def test_layouts_published_sections_and_axial_default():
    # at head dim 128 (64 pairs) the rules give the published sections
    c = torch.eye(3, dtype=torch.float64)  # unit t, y, x
    for layout, sections in (("mrope", (16, 24, 24)), ("mrope-interleaved", (24, 20, 20)),
                             ("videorope", (16, 24, 24))):
        pe = build_pe("rope-axial", dim=512, num_heads=4, depth=1, spatial_dims=3, layout=layout)
        M = pe.rope.freq_matrix  # (3, 64)
        if layout == "videorope":
            assert torch.allclose(M[0], 2 * 100.0 ** (-torch.arange(64, dtype=torch.float64) / 64))
            assert (M[1:] > 0).sum(1).tolist() == [24, 24] and (M[1:, -16:] == 0).all()  # t: lowest 16
        else:
            assert tuple((M > 0).sum(1).tolist()) == sections
        np.testing.assert_allclose((c @ M).numpy(), layout_pair_angles(layout, c.numpy(), 128, 100.0))
    assert build_pe("rope-axial", dim=128, num_heads=4, depth=1, spatial_dims=3).rope.freq_matrix is None
    with pytest.raises(PEConfigError):
        build_pe("rope-axial", dim=128, num_heads=4, depth=1, spatial_dims=1, layout="mrope")


def test_p_rope_truncates_the_lowest_frequencies_and_p1_is_rope():
    c = coords_of(6, 2)
    q = torch.randn(2, 4, 6, 32, dtype=torch.float64)
    old = build_pe("rope-axial", dim=128, num_heads=4, depth=1, spatial_dims=2).double()
    one = build_pe("rope-axial", dim=128, num_heads=4, depth=1, spatial_dims=2, p=1.0).double()
    for a, b in zip(old.layer(0).qk(q, q, None, c), one.layer(0).qk(q, q, None, c)):
        assert torch.equal(a, b)  # p = 1 is plain RoPE, bit for bit
    F = 8  # head dim 32 over 2 axes
    assert torch.equal(one.rope.omega(c.device, torch.float64),
                       100.0 ** (-torch.arange(F, dtype=torch.float64) / F))
    pr = build_pe("rope-axial", dim=128, num_heads=4, depth=1, spatial_dims=2, p=0.75)
    w = pr.rope.omega(c.device, torch.float64)
    assert torch.equal(w[:6], one.rope.omega(c.device, torch.float64)[:6]) and (w[6:] == 0).all()  # floor(0.75 * 8)
    zero = build_pe("rope-axial", dim=128, num_heads=4, depth=1, spatial_dims=2, p=0.0).double()
    assert torch.equal(zero.layer(0).qk(q, q, None, c)[0], q)  # p = 0: no rotation (NoPE)
    assert variant_label("rope-axial", {"p": 0.75}) == "rope-axial[p=0.75]"
    M = build_pe("rope-axial", dim=512, num_heads=4, depth=1, spatial_dims=3, layout="mrope", p=0.5).rope.freq_matrix
    assert (M[:, 32:] == 0).all() and (M[:, :32].sum(0) > 0).all()  # one ladder of 64 pairs: the lowest 32 dropped


@pytest.mark.parametrize("coords_batched", [False, True])
@pytest.mark.parametrize("opts", [{}, {"block_size": 8}], ids=["dense", "blocks"])
def test_liere_products_give_the_same_rotation_and_gradients(opts, coords_batched):
    """``product=shared`` (one (B, b) x (b, b) product per token, head and block) against ``broadcast`` (the
    matmul that copies the table per sample, the path before 2026-12-06): the same q, k and gradients of q,
    k and the generators in float64, CLS row included; per-sample coords take the batched matmul in both."""
    p, P, N, B = 2, 1, 6, 3
    c = torch.stack([coords_of(N, p, s) for s in range(B)]) if coords_batched else coords_of(N, p)
    got = []
    for product, grad in (("shared", "spectral"), ("broadcast", "autograd"), ("shared", "autograd")):
        pe = make("liere", {**opts, "product": product, "expm_grad": grad}, p, P)
        assert all(lay.product == product and lay.expm_grad == grad for lay in pe.layers)
        torch.manual_seed(3)
        q = torch.randn(B, H, P + N, D // H, dtype=torch.float64, requires_grad=True)
        k = torch.randn(B, H, P + N, D // H, dtype=torch.float64, requires_grad=True)
        qr, kr = pe.layer(0).qk(q, k, None, c)
        loss = (qr @ kr.transpose(-1, -2)).sin().sum()
        grads = torch.autograd.grad(loss, (q, k, pe.layers[0].upper))
        got.append((qr.detach(), kr.detach(), *grads))
    for other in got[1:]:
        for a, b in zip(got[0], other):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    lay = build_pe("liere", dim=D, num_heads=H, depth=1, spatial_dims=p).layers[0]
    assert (lay.product, lay.expm_grad) == ("shared", "spectral")  # the defaults


def _skew(n: int, batch: int, scale: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(batch, n, n, generator=g, dtype=torch.float64) * scale
    return a - a.mT


@pytest.mark.parametrize("case", ["generic", "large", "zero", "repeated", "odd"])
def test_skew_expm_spectral_gradient_matches_matrix_exp(case):
    """The spectral gradient of expm at a real skew matrix against matrix_exp's backward (float64), where
    eigenvalues are distinct, large (LieRE's init reaches norms of tens), all zero (a CLS row, the origin),
    repeated (equal 2 x 2 blocks) and for an odd size (a zero eigenvalue); values are matrix_exp's own."""
    from pebench.encodings._rotation import skew_expm
    if case == "repeated":
        blk = torch.tensor([[0.0, -1.3], [1.3, 0.0]], dtype=torch.float64)
        a = torch.block_diag(blk, blk, blk, 0.5 * blk).unsqueeze(0)
    else:
        n = 7 if case == "odd" else 8
        a = _skew(n, 3, {"generic": 1.0, "large": 8.0, "zero": 0.0, "odd": 1.0}[case], 0)
    g = torch.randn(a.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    x = a.clone().requires_grad_(True)
    want_r = torch.linalg.matrix_exp(x)
    (want,) = torch.autograd.grad(want_r, x, g)
    y = a.clone().requires_grad_(True)
    got_r = skew_expm(y, "spectral")
    (got,) = torch.autograd.grad(got_r, y, g)
    assert torch.equal(got_r, want_r)  # the same forward
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10 * max(1.0, want.abs().max().item()))


def test_skew_expm_gradcheck_and_float32_accuracy():
    from pebench.encodings._rotation import skew_expm
    a = _skew(5, 2, 1.0, 2).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: skew_expm(t - t.mT, "spectral"), (a,))
    big = _skew(32, 4, 3.0, 3)  # LieRE-sized blocks, float32 against the float64 gradient
    g = torch.randn(big.shape, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    x64 = big.clone().requires_grad_(True)
    (ref,) = torch.autograd.grad(torch.linalg.matrix_exp(x64), x64, g)
    x32 = big.float().requires_grad_(True)
    (got,) = torch.autograd.grad(skew_expm(x32, "spectral"), x32, g.float())
    assert (got.double() - ref).abs().max() / ref.abs().max() < 1e-5
    with pytest.raises(PEConfigError, match="spectral, autograd"):
        skew_expm(big, "pade")


def test_apply_block_rotation_rejects_an_unknown_product():
    from pebench.encodings._rotation import apply_block_rotation
    with pytest.raises(PEConfigError, match="shared, broadcast"):
        apply_block_rotation(torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 1, 4, 4), 0, "dense")


@pytest.mark.parametrize("name,kw", [("liere", {"block_size": 1}), ("liere", {"block_size": 64}),
                                     ("liere", {"coord_scale": [1.0]}), ("liere", {"product": "dense"}),
                                     ("liere", {"expm_grad": "pade"}),
                                     ("comrope", {"variant": "xx"}),
                                     ("comrope", {"block_size": 5}), ("comrope", {"init_std": 0.0}),
                                     ("comrope", {"coord_scale": [1.0, -1.0]}), ("string", {"p_form": "dft"}),
                                     ("string", {"theta": 1.0}), ("rope-axial", {"layout": "diagonal"}),
                                     ("rope-axial", {"p": 1.5}), ("rope-axial", {"p": -0.1})])
def test_bad_options_raise_peconfigerror(name, kw):
    with pytest.raises(PEConfigError):
        build_pe(name, dim=128, num_heads=4, depth=1, spatial_dims=2, **kw)


# ----------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------
def test_list_pes_options_shows_the_new_options(capsys):
    assert main(["list", "pes", "--options"]) == 0
    out = capsys.readouterr().out
    rows = [[cell.strip() for cell in line.split("|")] for line in out.splitlines() if "|" in line]
    keys = {(r[1], r[2]) for r in rows if len(r) > 3}
    for name in ("liere", "comrope", "string", "cpe", "rope-axial"):
        for o in pe_options(name):
            assert (name, o["key"]) in keys, (name, o["key"])
    assert "mrope-interleaved" in out and "videorope" in out


@pytest.mark.slow
@pytest.mark.parametrize("dataset,pe,opt", [("shapes", "liere", None), ("shapes", "comrope", None),
                                            ("shapes", "string", None), ("moving-shapes", "liere", None),
                                            ("moving-shapes", "comrope", None), ("moving-shapes", "string", None),
                                            ("moving-shapes", "rope-axial", "layout=videorope")])
def test_fast_dev_run(dataset, pe, opt, tmp_path):
    out = tmp_path / "runs"
    argv = ["run", "--dataset", dataset, "--pe", pe, "--fast-dev-run", "--batch-size", "4", "--no-progress-bar",
            "--out", str(out)] + (["--pe-option", opt] if opt else [])
    assert main(argv) == 0
    res, = [json.loads(f.read_text()) for f in out.rglob("results.json")]
    assert res["status"] == "complete" and res["pe"] == pe
    assert 0.0 <= res["metrics"][res["primary_metric"]] <= 1.0

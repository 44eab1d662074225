"""``cpe``: the official PEG's initialisation and weight-decay exclusion (Twins ``PosCNN`` / timm
``PosConv``), pebench's earlier recipe as options, and ``placement=every`` (a PEG of its own before every
block, PTv3's xCPE placement) on a grid and on points, against explicit references in float64."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.stats
import torch

from pebench.encodings import PEConfigError, build_pe
from pebench.models import build_backbone, grid_coords
from pebench.tasks.classification.module import ClassificationTask

D = 16


# ----------------------------------------------------------------------------------------------
# initialisation and weight decay
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [1, 2, 3])
def test_official_init_is_normal_with_std_sqrt_2_over_fan_out_and_zero_bias(p):
    torch.manual_seed(0)
    dim = 512
    pe = build_pe("cpe", dim=dim, num_heads=8, depth=2, spatial_dims=p, grid=(4,) * p)
    w = pe.conv.weight.detach().double().flatten().numpy()  # dim * 3^p values
    std = math.sqrt(2.0 / 3 ** p)  # fan_out = 3^p * dim / groups(dim)
    assert scipy.stats.kstest(w, scipy.stats.norm(0.0, std).cdf).pvalue > 1e-3
    assert abs(w.std() / std - 1) < 0.1  # and not the earlier uniform +-1/sqrt(3^p) (std 1/sqrt(3^(p+1)))
    assert torch.equal(pe.conv.bias.detach(), torch.zeros(dim))


def test_torch_init_option_keeps_pytorchs_default_uniform():
    torch.manual_seed(0)
    pe = build_pe("cpe", dim=512, num_heads=8, depth=2, spatial_dims=2, grid=(4, 4), init="torch")
    bound = 1.0 / 3.0  # 1 / sqrt(fan_in), fan_in = 3 x 3 x 1 (depthwise)
    w = pe.conv.weight.detach().double().flatten().numpy()
    b = pe.conv.bias.detach().double().numpy()
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert scipy.stats.kstest(w, scipy.stats.uniform(-bound, 2 * bound).cdf).pvalue > 1e-3
    assert scipy.stats.kstest(b, scipy.stats.uniform(-bound, 2 * bound).cdf).pvalue > 1e-3


def _decay_of(task) -> dict[str, bool]:
    ids = {id(p): n for n, p in task.named_parameters()}
    return {ids[id(p)]: g["weight_decay"] > 0 for g in task.param_groups() for p in g["params"]}


@pytest.mark.parametrize("opts,decayed", [({}, False), ({"decay": True}, True),
                                          ({"placement": "every"}, False), ({"placement": "every", "decay": True}, True)])
def test_peg_is_excluded_from_weight_decay_unless_asked(opts, decayed):
    task = ClassificationTask("image", 4, pe="cpe", pe_options=opts, train_grid=(8, 8))
    decay = _decay_of(task)
    peg = {n: d for n, d in decay.items() if n.startswith("backbone.pe.")}
    kernels = [n for n in peg if n.endswith("weight")]
    assert kernels and all(peg[n] is decayed for n in kernels)
    assert not any(peg[n] for n in peg if n.endswith("bias"))  # biases: never decayed
    assert decay["backbone.blocks.0.attn.qkv.weight"]  # other weights still are
    assert set(task.backbone.pe.no_weight_decay()) == (set() if decayed else {n[len("backbone.pe."):] for n in peg})


def test_knn_form_excluded_from_weight_decay():
    pe = build_pe("cpe", dim=D, num_heads=2, depth=3, spatial_dims=3)
    assert pe.mode == "knn" and pe.no_weight_decay() == {n for n, _ in pe.named_parameters()}
    every = build_pe("cpe", dim=D, num_heads=2, depth=3, spatial_dims=3, placement="every")
    assert {"knn_biases", "offset_mlps.2.0.weight"} <= every.no_weight_decay()
    assert every.knn_biases.shape == (3, D) and len(every.offset_mlps) == 3


def test_option_errors():
    with pytest.raises(PEConfigError, match="placement"):
        build_pe("cpe", dim=D, num_heads=2, depth=3, spatial_dims=2, grid=(3, 3), placement="twice")
    with pytest.raises(PEConfigError, match="after_block does not apply"):
        build_pe("cpe", dim=D, num_heads=2, depth=3, spatial_dims=2, grid=(3, 3), placement="every", after_block=1)
    with pytest.raises(PEConfigError, match="init"):
        build_pe("cpe", dim=D, num_heads=2, depth=3, spatial_dims=2, grid=(3, 3), init="xavier")
    with pytest.raises(PEConfigError, match="knn form"):
        build_pe("cpe", dim=D, num_heads=2, depth=3, spatial_dims=3, init="torch")


# ----------------------------------------------------------------------------------------------
# placement=every against explicit references
# ----------------------------------------------------------------------------------------------
def _conv_ref(conv, x, grid):
    """depthwise conv (kernel 3 per axis, zero padding, bias) of row-major grid tokens x (B, N, D), by loops."""
    w, b = conv.weight.detach()[:, 0], conv.bias.detach()
    cells = list(itertools.product(*[range(g) for g in grid]))
    index = {c: n for n, c in enumerate(cells)}
    out = torch.zeros_like(x)
    for c in cells:
        acc = b.expand(x.shape[0], -1).clone()
        for tap in itertools.product(range(3), repeat=len(grid)):
            nb = tuple(ci + t - 1 for ci, t in zip(c, tap))
            if nb in index:
                acc = acc + w[(slice(None), *tap)] * x[:, index[nb]]
        out[:, index[c]] = acc
    return out


def _knn_ref(mlp, bias, k, x, coords, valid):
    """sum over the k nearest real tokens of mlp(offset / scale) * x_j + b, brute force; padded rows 0."""
    B, N, _ = x.shape
    out = torch.zeros_like(x)
    for b in range(B):
        real = [j for j in range(N) if valid[b, j]]
        kk = min(k, len(real))
        chosen, far = {}, []
        for i in real:
            d = sorted((float((coords[b, j] - coords[b, i]).norm()), j) for j in real)
            chosen[i] = [j for _, j in d[:kk]]
            far.append(d[kk - 1][0])
        scale = sum(far) / len(far) if sum(far) > 0 else 1.0
        for i in real:
            out[b, i] = bias.detach() + sum(mlp((coords[b, j] - coords[b, i]) / scale).detach() * x[b, j]
                                            for j in chosen[i])
    return out


def _reference_forward(bb, x, coords, peg):
    """The backbone's forward written out: embedding (+ CLS), then for every block l: x + PEG_l(x), block l."""
    P = bb.num_prefix_tokens
    h = bb.pe.encode_tokens(x, coords, None)
    if P:
        h = torch.cat([bb.cls_token.expand(h.shape[0], -1, -1), h], 1)
    for l, blk in enumerate(bb.blocks):
        h = torch.cat([h[:, :P], h[:, P:] + peg(l, h[:, P:])], 1)
        h = blk(h, coords, bb.pe.layer(l))
    return bb.norm(h)


@pytest.mark.parametrize("class_token", [False, True])
def test_every_block_grid_form_matches_reference(class_token):
    torch.manual_seed(0)
    grid = (3, 4)
    bb = build_backbone("vit-nano", pe="cpe", spatial_dims=2, grid=grid, class_token=class_token,
                        placement="every").double().eval()
    pe = bb.pe
    assert len(pe.convs) == bb.depth and [pe.peg_index(i) for i in range(-1, bb.depth)] == [*range(bb.depth), None]
    coords = grid_coords(grid).double()
    x = torch.randn(2, 12, bb.embed_dim, dtype=torch.float64)
    with torch.no_grad():
        got = bb(x, coords, grid)
        want = _reference_forward(bb, x, coords, lambda l, h: _conv_ref(pe.convs[l], h, grid))
        # each PEG counts: without the one before block 0 the output changes
        assert (got - _reference_forward(bb, x, coords, lambda l, h: _conv_ref(pe.convs[l], h, grid) * (l > 0))
                ).abs().max() > 1e-6
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    # the taps see the same stream: attn_in of block 0 is norm1(x + PEG_0(x))
    with torch.no_grad():
        taps = bb.forward_intermediates(x, coords, grid, tap="attn_in")
        h0 = x + _conv_ref(pe.convs[0], x, grid)
    torch.testing.assert_close(taps[0], bb.blocks[0].norm1(h0), rtol=1e-10, atol=1e-10)


def test_every_block_point_form_with_padding_matches_reference():
    torch.manual_seed(0)
    bb = build_backbone("vit-nano", pe="cpe", spatial_dims=3, placement="every", k=5).double().eval()
    pe = bb.pe
    assert pe.mode == "knn" and len(pe.offset_mlps) == bb.depth
    with torch.no_grad():
        pe.knn_biases.normal_()  # a non-zero bias per PEG
    B, N = 2, 9
    coords = torch.randn(B, N, 3, dtype=torch.float64)
    x = torch.randn(B, N, bb.embed_dim, dtype=torch.float64)
    valid = torch.ones(B, N, dtype=torch.bool)
    valid[1, 6:] = False
    with torch.no_grad():
        got = bb(x, coords, None, valid)
        # the reference runs each sample alone on its real tokens (padding neither contributes nor receives)
        for b in range(B):
            n = int(valid[b].sum())
            xs, cs = x[b:b + 1, :n], coords[b:b + 1, :n]
            want = _reference_forward(bb, xs, cs, lambda l, h: _knn_ref(pe.offset_mlps[l], pe.knn_biases[l], pe.k,
                                                                        h, cs, torch.ones(1, n, dtype=torch.bool)))
            torch.testing.assert_close(got[b:b + 1, :n], want, rtol=1e-10, atol=1e-10)

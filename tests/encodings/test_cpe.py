"""The conditional PE ``cpe`` (CPVT's PEG; encodings/cpe.py) and the coordinate augmentation
``--coord-aug`` (encodings/coord_augment.py), against independent straightforward references.

cpe on a grid is compared with a depthwise convolution written as explicit loops over the grid
cells and kernel taps; its kNN form with a brute-force neighbour search per token. Both are checked
for permutation equivariance, padding masks (padded tokens neither contribute nor receive) and the
CLS token, inside ``build_backbone`` for p = 2, p = 3 and points, and end to end with a fast-dev-run.
"""
from __future__ import annotations

import itertools
import json
import math

import pytest
import torch

from pebench.cli import main
from pebench.encodings import PEConfigError, build_pe
from pebench.encodings.coord_augment import PRESETS, CoordAugment, build_coord_augment
from pebench.models import build_backbone, grid_coords
from pebench.models.vit import set_coord_augment
from pebench.runner.config import RunConfig, config_to_dict, resolve, variant_name
from pebench.runner.integrity import fingerprint

D = 16


def _pe(p, grid, P=0, **kw):
    torch.manual_seed(0)
    return build_pe("cpe", dim=D, num_heads=2, depth=3, spatial_dims=p, num_prefix_tokens=P, grid=grid, **kw).double()


# ----------------------------------------------------------------------------------------------
# references
# ----------------------------------------------------------------------------------------------
def conv_reference(pe, x, grid):
    """x + depthwise conv (kernel 3 per axis, zero padding, bias) of row-major grid tokens x (B, N, D),
    with explicit loops over the cells and the kernel taps."""
    w = pe.conv.weight.detach()[:, 0]  # (D, 3, ..., 3)
    b = pe.conv.bias.detach()
    cells = list(itertools.product(*[range(g) for g in grid]))
    index = {c: n for n, c in enumerate(cells)}
    out = x.clone()
    for c in cells:
        acc = b.clone().expand(x.shape[0], -1).clone()  # (B, D)
        for tap in itertools.product(range(3), repeat=len(grid)):
            nb = tuple(ci + t - 1 for ci, t in zip(c, tap))
            if nb in index:  # outside the grid: the zero padding
                acc = acc + w[(slice(None), *tap)] * x[:, index[nb]]
        out[:, index[c]] = x[:, index[c]] + acc
    return out


def knn_reference(pe, x, coords, valid):
    """x + sum over the k nearest real tokens of mlp(offset / scale) * x_j + b, brute force per token;
    padded tokens unchanged."""
    B, N, _ = x.shape
    out = x.clone()
    for b in range(B):
        real = [j for j in range(N) if valid[b, j]]
        k = min(pe.k, len(real))
        chosen, far = {}, []
        for i in real:
            d = sorted((float((coords[b, j] - coords[b, i]).norm()), j) for j in real)  # ties: token order
            chosen[i] = [j for _, j in d[:k]]
            far.append(d[k - 1][0])
        scale = sum(far) / len(far) if sum(far) > 0 else 1.0
        for i in real:
            acc = pe.knn_bias.detach().clone()
            for j in chosen[i]:
                acc = acc + pe.offset_mlp((coords[b, j] - coords[b, i]) / scale).detach() * x[b, j]
            out[b, i] = x[b, i] + acc
    return out


# ----------------------------------------------------------------------------------------------
# the PEG against the references
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("P", [0, 1])
@pytest.mark.parametrize("grid", [(3, 4), (2, 3, 4)])
def test_grid_conv_matches_loop_reference(grid, P):
    p = len(grid)
    pe = _pe(p, grid, P)
    coords = grid_coords(grid).double()
    N = coords.shape[0]
    x = torch.randn(2, P + N, D, dtype=torch.float64)
    with torch.no_grad():
        got = pe.after_block(0, x, coords, grid, None)
        assert torch.equal(pe.after_block(1, x, coords, grid, None), x)  # only after block after_block
    torch.testing.assert_close(got[:, P:], conv_reference(pe, x[:, P:], grid), rtol=1e-12, atol=1e-12)
    assert torch.equal(got[:, :P], x[:, :P])  # CLS untouched
    # placement by coords, not token order: permuted and translated tokens, same map
    perm = torch.randperm(N, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        moved = pe.after_block(0, torch.cat([x[:, :P], x[:, P:][:, perm]], 1), coords[perm] * 1.0 + 7.25, grid, None)
    torch.testing.assert_close(moved[:, P:], got[:, P:][:, perm], rtol=1e-12, atol=1e-12)


def test_grid_conv_applies_to_any_grid_and_per_sample_coords():
    pe = _pe(2, (4, 4))
    for grid in ((2, 2), (5, 7), (9, 3)):
        coords = grid_coords(grid).double()
        x = torch.randn(2, coords.shape[0], D, dtype=torch.float64)
        with torch.no_grad():
            torch.testing.assert_close(pe.after_block(0, x, coords, grid, None), conv_reference(pe, x, grid))
            per_sample = torch.stack([coords, coords * 2.0 - 1.0])  # (B, N, p): an increasing affine map
            torch.testing.assert_close(pe.after_block(0, x, per_sample, grid, None), conv_reference(pe, x, grid))


def test_grid_padding_mask_neither_contributes_nor_receives():
    grid = (3, 4)
    pe = _pe(2, grid, P=1)
    coords = grid_coords(grid).double()
    x = torch.randn(2, 1 + 12, D, dtype=torch.float64)
    pad_x = torch.randn(2, 3, D, dtype=torch.float64) * 100
    pad_c = torch.tensor([[0.5, 0.5], [9.0, 9.0], [-3.0, 1.0]], dtype=torch.float64)  # anywhere
    xm = torch.cat([x, pad_x], 1)
    cm = torch.cat([coords, pad_c], 0)
    mask = torch.ones(2, 1 + 15, dtype=torch.bool)
    mask[:, 13:] = False
    with torch.no_grad():
        got = pe.after_block(0, xm, cm, grid, mask)
        want = pe.after_block(0, x, coords, grid, None)
    torch.testing.assert_close(got[:, :13], want, rtol=1e-12, atol=1e-12)
    assert torch.equal(got[:, 13:], pad_x)  # padded tokens receive nothing


@pytest.mark.parametrize("p", [2, 3])
def test_knn_matches_brute_force(p):
    pe = _pe(p, None, P=1)
    assert pe.mode == "knn" and pe.k == 3 ** p
    g = torch.Generator().manual_seed(3)
    N = 30
    coords = torch.rand(2, N, p, generator=g, dtype=torch.float64) * 5
    x = torch.randn(2, 1 + N, D, generator=g, dtype=torch.float64)
    valid = torch.ones(2, N, dtype=torch.bool)
    valid[1, 22:] = False
    mask = torch.cat([torch.ones(2, 1, dtype=torch.bool), valid], 1)
    with torch.no_grad():
        got = pe.after_block(0, x, coords, None, mask)
        want = knn_reference(pe, x[:, 1:], coords, valid)
    torch.testing.assert_close(got[:, 1:], want, rtol=1e-10, atol=1e-10)
    assert torch.equal(got[:, 0], x[:, 0])
    # the padded tokens neither contribute: moving them and changing their content changes nothing
    x2, c2 = x.clone(), coords.clone()
    x2[1, 23:] = 1e3
    c2[1, 22:] = 0.01
    with torch.no_grad():
        torch.testing.assert_close(pe.after_block(0, x2, c2, None, mask)[1, :23], got[1, :23], rtol=1e-12, atol=1e-12)


def test_knn_with_fewer_tokens_than_k_and_unit_free_offsets():
    pe = _pe(3, None, k=50)
    coords = torch.rand(1, 7, 3, dtype=torch.float64)
    x = torch.randn(1, 7, D, dtype=torch.float64)
    valid = torch.ones(1, 7, dtype=torch.bool)
    with torch.no_grad():
        got = pe.after_block(0, x, coords, None, None)
        torch.testing.assert_close(got, knn_reference(pe, x, coords, valid))
        # offsets are divided by the sample's neighbour distance: a change of unit changes nothing
        torch.testing.assert_close(pe.after_block(0, x, coords * 1000.0, None, None), got)


def test_options_and_errors():
    assert _pe(2, (4, 4)).mode == "grid" and _pe(2, None).mode == "knn"
    assert _pe(2, (4, 4), mode="knn").mode == "knn"
    assert _pe(2, (4, 4), after_block=2).after_block_index == 2
    for bad in ({"after_block": 3}, {"after_block": -1}, {"mode": "sparse"}, {"k": 0}):
        with pytest.raises(PEConfigError):
            _pe(2, None, **bad)
    with pytest.raises(PEConfigError, match="1-, 2- or 3-D"):
        _pe(4, None, mode="grid")
    pe = _pe(2, (3, 3))
    with pytest.raises(ValueError, match="mode=knn"):
        pe.after_block(0, torch.zeros(1, 9, D, dtype=torch.float64), grid_coords((3, 3)).double(), None, None)


# ----------------------------------------------------------------------------------------------
# inside the backbone
# ----------------------------------------------------------------------------------------------
def _nano(p, grid, cls=False, **kw):
    torch.manual_seed(0)
    return build_backbone("vit-nano", pe="cpe", spatial_dims=p, grid=grid, class_token=cls, **kw).double().eval()


@pytest.mark.parametrize("grid", [(4, 5), (2, 2, 5)])
def test_backbone_permutation_equivariance_on_grids(grid):
    p, cls = len(grid), len(grid) == 2
    m = _nano(p, grid, cls)
    coords = grid_coords(grid).double()
    x = torch.randn(2, 20, 128, dtype=torch.float64)
    perm = torch.randperm(20, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        y, yp = m(x, coords, grid), m(x[:, perm], coords[perm], grid)
    P = int(cls)
    torch.testing.assert_close(yp[:, P:], y[:, P:][:, perm], rtol=1e-9, atol=1e-9)
    if cls:
        torch.testing.assert_close(yp[:, 0], y[:, 0], rtol=1e-9, atol=1e-9)
    # the PEG carries position: swapping two tokens' content against their coords changes outputs
    swap = torch.arange(20)
    swap[[0, 7]] = swap[[7, 0]]
    with torch.no_grad():
        assert (m(x[:, swap], coords, grid)[:, P:].mean(1) - y[:, P:].mean(1)).abs().max() > 1e-6


def test_backbone_points_with_padding():
    m = _nano(3, None)
    g = torch.Generator().manual_seed(2)
    coords = torch.randn(2, 24, 3, generator=g, dtype=torch.float64)
    x = torch.randn(2, 24, 128, generator=g, dtype=torch.float64)
    mask = torch.ones(2, 24, dtype=torch.bool)
    mask[1, 16:] = False
    perm = torch.randperm(24, generator=g)
    with torch.no_grad():
        y = m(x, coords, None, mask)
        yp = m(x[:, perm], coords[:, perm], None, mask[:, perm])
        alone = m(x[1:, :16], coords[1:, :16], None)  # the padded scene without its padding
    torch.testing.assert_close(yp, y[:, perm], rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(y[1:, :16], alone, rtol=1e-9, atol=1e-9)


def test_taps_see_the_stream_with_the_peg():
    grid = (3, 3)
    m = _nano(2, grid, cls=True, after_block=1)
    coords = grid_coords(grid).double()
    x = torch.randn(2, 9, 128, dtype=torch.float64)
    with torch.no_grad():
        out = m.forward_intermediates(x, coords, grid, tap="block_out", return_prefix=True)
        ins = m.forward_intermediates(x, coords, grid, tap="attn_in", return_prefix=True)
        torch.testing.assert_close(m.norm(out[-1]), m(x, coords, grid))
        # independent loop: the PEG acts on block 1's output, before block 2 reads it
        h = torch.cat([m.cls_token.expand(2, -1, -1), x], 1)
        for i, blk in enumerate(m.blocks):
            h = blk(h, coords, m.pe.layer(i))
            if i == 1:
                h = torch.cat([h[:, :1], conv_reference(m.pe, h[:, 1:], grid)], 1)
            torch.testing.assert_close(out[i], h)
            if i + 1 < len(m.blocks):
                torch.testing.assert_close(ins[i + 1], m.blocks[i + 1].norm1(h))


def test_fast_dev_run(tmp_path):
    out = tmp_path / "runs"
    rc = main(["run", "--dataset", "shapes", "--pe", "cpe", "--fast-dev-run", "--batch-size", "4",
               "--no-progress-bar", "--coord-aug", "dinov3", "--out", str(out)])
    assert rc == 0
    res = json.loads((out / "shapes" / "cpe+coordaug" / "vit-nano" / "seed0" / "results.json").read_text())
    assert res["status"] == "complete" and res["pe"] == "cpe" and res["config"]["coord_aug"] == "dinov3"


# ----------------------------------------------------------------------------------------------
# coordinate augmentation
# ----------------------------------------------------------------------------------------------
def test_coord_aug_is_the_identity_in_evaluation():
    aug = CoordAugment(shift=0.3, jitter=1.5, rescale=2.0).eval()
    c = grid_coords((4, 6))
    assert aug(c, 3, (4, 6)) is c
    assert build_coord_augment("none") is None and PRESETS["dinov3"] == (None, None, 2.0)
    with pytest.raises(ValueError):
        build_coord_augment("bogus")
    for bad in ({"shift": -0.1}, {"jitter": 0.5}, {"rescale": math.inf}):
        with pytest.raises(ValueError):
            CoordAugment(**bad)


def _normalised(c, grid):
    lo, hi = c.amin(-2, keepdim=True), c.amax(-2, keepdim=True)
    half = torch.tensor([g / 2 for g in grid], dtype=c.dtype)
    return (c - (lo + hi) / 2) / half


def test_coord_aug_distribution_in_training():
    grid, B = (4, 6), 4000
    c = grid_coords(grid).double()
    u = _normalised(c, grid)  # (N, 2), DINOv3's box [-1, 1] (cell centres)
    assert u.abs().max() < 1 and torch.allclose(u.amax(0), torch.tensor([0.75, 5 / 6], dtype=torch.float64))
    torch.manual_seed(0)
    out = CoordAugment(rescale=2.0).train()(c, B, grid)  # DINOv3's recipe
    assert out.shape == (B, 24, 2)
    centre = (c.amin(0) + c.amax(0)) / 2
    factor = (out - centre) / (c - centre).masked_fill((c - centre) == 0, 1)  # (B, N, 2)
    r = factor[:, 0, 0]
    torch.testing.assert_close(factor, r.view(B, 1, 1).expand_as(factor))  # one factor, all axes and tokens
    lr = r.log() / math.log(2.0)  # log-uniform in [1/2, 2]: uniform in [-1, 1]
    assert lr.abs().max() <= 1 and abs(float(lr.mean())) < 0.05 and abs(float(lr.var()) - 1 / 3) < 0.03
    # shift then per-axis jitter, in the normalised box, mapped back with the grid's half size
    torch.manual_seed(1)
    out = CoordAugment(shift=0.5, jitter=3.0).train()(c, B, grid)
    half = torch.tensor([2.0, 3.0], dtype=torch.float64)
    v = (out - centre) / half  # (B, N, 2) = (u + s) * j
    j = (v[:, 1] - v[:, 0]) / (u[1] - u[0]).masked_fill((u[1] - u[0]) == 0, 1)  # tokens 0, 1 differ in x
    jx = j[:, 1]
    s = v[:, 0, 1] / jx - u[0, 1]
    assert (jx.log().abs() <= math.log(3.0) + 1e-9).all() and (s.abs() <= 0.5 + 1e-9).all()
    assert abs(float(s.mean())) < 0.03 and abs(float(s.var()) - 0.25 / 3) < 0.01


def test_coord_aug_deterministic_per_seed_and_reaches_the_pe():
    grid = (4, 4)
    c = grid_coords(grid).double()
    aug = CoordAugment(shift=0.1, jitter=1.2, rescale=2.0).train()
    torch.manual_seed(7)
    a = aug(c, 2, grid)
    torch.manual_seed(7)
    assert torch.equal(aug(c, 2, grid), a)
    assert not torch.equal(aug(c, 2, grid), a)
    # in the backbone: training forwards see augmented coords, evaluation the tokens' own
    torch.manual_seed(0)
    m = build_backbone("vit-nano", pe="rope-axial", spatial_dims=2, grid=grid).double()
    x = torch.randn(2, 16, 128, dtype=torch.float64)
    with torch.no_grad():
        m.eval()
        plain_eval = m(x, c, grid)
        m.train()
        torch.manual_seed(3)
        want = m(x, CoordAugment(rescale=2.0).train()(c, 2, grid), grid)
        set_coord_augment(m, "dinov3")
        torch.manual_seed(3)
        torch.testing.assert_close(m(x, c, grid), want)
        m.eval()
        assert torch.equal(m(x, c, grid), plain_eval)


def test_coord_aug_refused_by_the_ape_table():
    torch.manual_seed(0)
    table = build_backbone("vit-nano", pe="ape", spatial_dims=2, grid=(4, 4))
    with pytest.raises(ValueError, match="integer grid coords"):
        set_coord_augment(table, "dinov3")
    set_coord_augment(table, "none")
    points = build_backbone("vit-nano", pe="ape", spatial_dims=3, grid=None)  # the coords MLP takes any coords
    set_coord_augment(points, "dinov3")
    assert isinstance(points.coord_aug, CoordAugment)


def test_coord_aug_config_variant_and_fingerprint():
    base = config_to_dict(resolve(RunConfig(pe="rope-axial")))
    aug = resolve(RunConfig(pe="rope-axial", coord_aug="dinov3"))
    assert variant_name(aug) == "rope-axial+coordaug"
    assert fingerprint(config_to_dict(aug)) != fingerprint(base)
    old = {k: v for k, v in base.items() if k != "coord_aug"}  # a configuration from before the option
    assert fingerprint(old) == fingerprint(base)

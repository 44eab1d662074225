"""The q/k basis fold (``LayerPE.qk_basis``): a PE whose ``qk`` starts with a token-independent per-head map
(STRING's Cayley ``P``, ComRoPE's ``U^T`` under ``impl=eig``) hands that map to the attention, which folds it
into the q/k projection weights (``pebench.models.vit.fold_qk_basis``). Checked here in float64: the folded
backbone equals the per-token path (``fold_basis=false``, the path before the fold) in outputs and in every
parameter's gradient, with and without a class token; the layer contract ``qk(q, k) == qk_after_basis(M q,
M k)``; and the fold itself against the per-head product written out.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pebench.encodings import build_pe, list_pes
from pebench.models import build_backbone
from pebench.models.vit import fold_qk_basis

GRID = (5, 6)
CASES = [("string", {}), ("comrope", {}), ("comrope", {"variant": "ap"}), ("comrope", {"block_size": 4})]
IDS = [f"{pe}-{','.join(f'{k}={v}' for k, v in o.items()) or 'default'}" for pe, o in CASES]


def raster() -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.arange(GRID[0], dtype=torch.float64), torch.arange(GRID[1], dtype=torch.float64),
                            indexing="ij")
    return torch.stack([yy, xx], -1).reshape(-1, 2)  # (N, 2)


def twin_backbones(pe: str, opts: dict, class_token: bool):
    """The same float64 backbone (same parameters, basis moved off the identity) with the fold on and off."""
    out = []
    for fold in (True, False):
        torch.manual_seed(0)
        out.append(build_backbone("vit-nano", pe=pe, spatial_dims=2, grid=GRID, class_token=class_token,
                                  fold_basis=fold, **opts).double())
    with torch.no_grad():  # STRING starts at P = I: give it a generic P
        for n, prm in out[0].named_parameters():
            if n.endswith(".upper"):
                prm.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(2))
    out[1].load_state_dict(out[0].state_dict())
    return out


@pytest.mark.parametrize("class_token", [False, True])
@pytest.mark.parametrize("pe,opts", CASES, ids=IDS)
def test_fold_equals_per_token_path_with_gradients(pe, opts, class_token):
    folded, tokens = twin_backbones(pe, opts, class_token)
    x = torch.randn(2, GRID[0] * GRID[1], 128, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    outs = []
    for model in (folded, tokens):
        y = model(x, raster(), GRID)
        (y.square().sum() + y[:, 0].sum()).backward()
        outs.append(y)
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-12, atol=1e-12)
    grads = [dict(m.named_parameters()) for m in (folded, tokens)]
    for name, prm in grads[0].items():
        assert prm.grad is not None, name
        torch.testing.assert_close(prm.grad, grads[1][name].grad, rtol=1e-10, atol=1e-11, msg=name)


@pytest.mark.parametrize("pe,opts", CASES, ids=IDS)
def test_layer_contract_qk_after_basis(pe, opts):
    """``qk(q, k) == qk_after_basis(M q, M k)`` for ``M = qk_basis``, prefix rows included."""
    torch.manual_seed(0)
    enc = build_pe(pe, dim=64, num_heads=2, depth=1, spatial_dims=2, num_prefix_tokens=1, grid=GRID, **opts).double()
    with torch.no_grad():
        for n, prm in enc.named_parameters():
            if n.endswith(".upper"):
                prm.normal_(0.0, 0.3)
    layer = enc.layer(0)
    g = torch.Generator().manual_seed(3)
    q, k = (torch.randn(2, 2, 1 + 30, 32, generator=g, dtype=torch.float64) for _ in range(2))
    m = layer.qk_basis(torch.float64)
    assert m is not None and m.shape == (2, 32, 32)
    qa, ka = layer.qk_after_basis(q @ m.transpose(-1, -2), k @ m.transpose(-1, -2), None, raster())
    qr, kr = layer.qk(q, k, None, raster())
    torch.testing.assert_close(qa, qr, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ka, kr, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("pe,opts", [("string", {"fold_basis": False}), ("string", {"p_form": "circulant"}),
                                     ("comrope", {"impl": "expm"}), ("comrope", {"block_size": 3}),
                                     ("comrope", {"fold_basis": False}), ("rope-mixed", {}), ("pape", {})])
def test_no_basis_where_nothing_folds(pe, opts):
    enc = build_pe(pe, dim=48, num_heads=2, depth=1, spatial_dims=2, grid=GRID, **opts)
    assert enc.layer(0).qk_basis(torch.float32) is None


@pytest.mark.parametrize("with_bias", [True, False])
def test_fold_qk_basis_is_the_per_head_product(with_bias):
    g = torch.Generator().manual_seed(4)
    H, d, D = 3, 4, 10
    lin = torch.nn.Linear(D, 3 * H * d, bias=with_bias).double()
    m = torch.randn(H, d, d, generator=g, dtype=torch.float64)
    x = torch.randn(5, 7, D, generator=g, dtype=torch.float64)
    plain = lin(x).view(5, 7, 3, H, d)
    want = plain.clone()
    want[:, :, :2] = torch.einsum("hij,btshj->btshi", m, plain[:, :, :2])  # q and k: M per head; v: unchanged
    got = F.linear(x, *fold_qk_basis(lin.weight, lin.bias, m)).view(5, 7, 3, H, d)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert torch.equal(got[:, :, 2], plain[:, :, 2])  # v through the identity: exactly unchanged


@pytest.mark.parametrize("with_bias", [True, False])
def test_fold_qk_basis_gradients_are_the_per_head_products(with_bias):
    """Gradients of the folded weight, bias and map against the written-out product's, in float64."""
    g = torch.Generator().manual_seed(5)
    H, d, D = 3, 4, 10
    lin = torch.nn.Linear(D, 3 * H * d, bias=with_bias).double()
    m = torch.randn(H, d, d, generator=g, dtype=torch.float64, requires_grad=True)
    x = torch.randn(5, 7, D, generator=g, dtype=torch.float64)
    upstream = torch.randn(5, 7, 3, H, d, generator=g, dtype=torch.float64)
    grads = []
    for fold in (True, False):
        if fold:
            out = F.linear(x, *fold_qk_basis(lin.weight, lin.bias, m)).view(5, 7, 3, H, d)
        else:
            plain = lin(x).view(5, 7, 3, H, d)
            qk = torch.einsum("hij,btshj->btshi", m, plain[:, :, :2])
            out = torch.cat([qk, plain[:, :, 2:]], dim=2)
        params = [m, lin.weight] + ([lin.bias] if with_bias else [])
        grads.append(torch.autograd.grad((out * upstream).sum(), params))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("pe", list_pes())
def test_every_layer_that_declares_a_basis_overrides_qk_after_basis(pe):
    """The base ``qk_after_basis`` is ``qk`` (right only without a map): every registered PE whose layer returns a
    ``qk_basis`` at its defaults overrides it."""
    from pebench.encodings.base import LayerPE
    try:
        enc = build_pe(pe, dim=64, num_heads=2, depth=1, spatial_dims=2, grid=GRID)
    except (ValueError, TypeError):  # a PE that does not build on 2-D grids
        pytest.skip(f"{pe} does not build here")
    layer = enc.layer(0)
    if layer.qk_basis(torch.float32) is not None:
        assert type(layer).qk_after_basis is not LayerPE.qk_after_basis, pe


def test_comrope_speeds_are_not_reused_across_parameter_updates():
    """ComRoPE hands the speeds of qk_basis's decomposition to qk_after_basis; after the base matrices change (an
    optimizer step) a qk_after_basis without a new qk_basis decomposes again instead of using the old speeds."""
    torch.manual_seed(0)
    layer = build_pe("comrope", dim=64, num_heads=2, depth=1, spatial_dims=2, grid=GRID).double().layer(0)
    g = torch.Generator().manual_seed(3)
    q, k = (torch.randn(1, 2, 30, 32, generator=g, dtype=torch.float64) for _ in range(2))
    m = layer.qk_basis(torch.float64)
    with torch.no_grad():
        layer.base.mul_(1.5)  # an update between the two calls
    fresh = layer.qk_after_basis(q, k, None, raster())
    layer._pending_speeds = None
    again = layer.qk_after_basis(q, k, None, raster())
    torch.testing.assert_close(fresh, again, rtol=0, atol=0)
    assert m is not None

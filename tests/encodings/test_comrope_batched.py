"""ComRoPE's per-forward tables batched over the layers (``ComRoPE.encode_tokens`` -> ``_prepare_layers``): one
``eigh`` over every layer's base matrices and one phasor table, handed to the layers, instead of each layer
decomposing its own. Checked against the per-layer path (``batch_layers = False``, the computation before):
equal in float64 with every parameter's gradient, bit for bit in float32 (same per-matrix decomposition, same
per-layer ``(N, p) x (p, m)`` product, same elementwise ops), with and without a class token and the fold, and
under windowed attention (whose blocks get other coords: the layers compute their own phasors). Stale tables
(after an optimizer step) are not used, and a model that ran a forward deep-copies and pickles.
"""
from __future__ import annotations

import copy
import pickle

import pytest
import torch

from pebench.encodings import comrope
from pebench.encodings.comrope import spectra
from pebench.models import build_backbone

GRID = (5, 6)
CASES = [({}, False), ({}, True), ({"variant": "ap"}, False), ({"fold_basis": False}, True),
         ({"block_size": 4}, False)]
IDS = [f"{','.join(f'{k}={v}' for k, v in o.items()) or 'default'}-cls{int(c)}" for o, c in CASES]


def raster(dtype=torch.float64) -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.arange(GRID[0], dtype=dtype), torch.arange(GRID[1], dtype=dtype), indexing="ij")
    return torch.stack([yy, xx], -1).reshape(-1, 2)  # (N, 2)


def twins(opts: dict, class_token: bool, dtype: torch.dtype, attn_window: int | None = None):
    """Two copies of one backbone: layer tables batched (the default) and per layer."""
    out = []
    for batched in (True, False):
        torch.manual_seed(0)
        model = build_backbone("vit-nano", pe="comrope", spatial_dims=2, grid=GRID, class_token=class_token,
                               attn_window=attn_window, **opts).to(dtype)
        model.pe.batch_layers = batched
        out.append(model)
    out[1].load_state_dict(out[0].state_dict())
    return out


def forward_backward(model, x: torch.Tensor, coords: torch.Tensor) -> tuple[torch.Tensor, dict]:
    y = model(x, coords, GRID)
    (y.square().sum() + y[:, 0].sum()).backward()
    return y, {n: p.grad for n, p in model.named_parameters()}


@pytest.mark.parametrize("opts,class_token", CASES, ids=IDS)
def test_batched_tables_equal_per_layer_tables_float64_with_gradients(opts, class_token, monkeypatch):
    batched, alone = twins(opts, class_token, torch.float64)
    x = torch.randn(2, GRID[0] * GRID[1], 128, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    calls = []
    monkeypatch.setattr(comrope, "spectra", lambda base, dtype: calls.append(base.shape) or spectra(base, dtype))
    y1, g1 = forward_backward(batched, x, raster())
    assert calls == [(4,) + batched.pe.layers[0].base.shape]  # one decomposition for all 4 layers
    y2, g2 = forward_backward(alone, x, raster())
    assert len(calls) == 1 + 4  # one per layer
    torch.testing.assert_close(y1, y2, rtol=1e-12, atol=1e-12)
    for name, grad in g1.items():
        assert grad is not None, name
        torch.testing.assert_close(grad, g2[name], rtol=1e-10, atol=1e-11, msg=name)
    assert all(lay._prepared is None for lay in batched.pe.layers)  # consumed by the forward


@pytest.mark.parametrize("opts,class_token", CASES[:3], ids=IDS[:3])
def test_batched_tables_are_bit_identical_in_float32(opts, class_token):
    batched, alone = twins(opts, class_token, torch.float32)
    x = torch.randn(3, GRID[0] * GRID[1], 128, generator=torch.Generator().manual_seed(1))
    y1, g1 = forward_backward(batched, x, raster(torch.float32))
    y2, g2 = forward_backward(alone, x, raster(torch.float32))
    assert torch.equal(y1, y2)
    for name, grad in g1.items():
        assert torch.equal(grad, g2[name]), name


def test_windowed_attention_layers_compute_their_own_phasors():
    """Windowed blocks receive per-window coords, not the tables' coords: the layers fall back to their own."""
    batched, alone = twins({}, False, torch.float64, attn_window=8)
    x = torch.randn(2, GRID[0] * GRID[1], 128, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    y1, g1 = forward_backward(batched, x, raster())
    y2, g2 = forward_backward(alone, x, raster())
    torch.testing.assert_close(y1, y2, rtol=1e-12, atol=1e-12)
    for name, grad in g1.items():
        torch.testing.assert_close(grad, g2[name], rtol=1e-10, atol=1e-11, msg=name)


def test_tables_prepared_before_an_update_are_not_used_after_it():
    model = twins({}, False, torch.float64)[0]
    x = torch.randn(1, GRID[0] * GRID[1], 128, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    model.pe.encode_tokens(x, raster(), GRID)  # tables for the current parameters
    layer = model.pe.layers[0]
    assert layer._prepared is not None
    with torch.no_grad():
        layer.base.mul_(1.5)  # an optimizer step between the tables and their use
    basis = layer.qk_basis(torch.float64)
    torch.testing.assert_close(basis, layer.spectrum(torch.float64)[0].transpose(-1, -2), rtol=0, atol=0)


def test_a_model_that_ran_a_forward_deep_copies_and_pickles():
    """Tables left on layers a forward did not reach hold an autograd graph; copies leave them out."""
    model = twins({}, True, torch.float32)[0]
    x = torch.randn(1, GRID[0] * GRID[1], 128)
    model.pe.encode_tokens(x, raster(torch.float32), GRID)  # prepared, never consumed
    clone = copy.deepcopy(model)
    assert all(lay._prepared is None for lay in clone.pe.layers)
    pickle.loads(pickle.dumps(model))
    torch.testing.assert_close(clone(x, raster(torch.float32), GRID), model(x, raster(torch.float32), GRID))

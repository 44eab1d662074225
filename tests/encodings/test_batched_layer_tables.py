"""Per-forward tables batched over the layers, handed to them by the PE's ``encode_tokens``: ComRoPE's bases,
speeds and phasors (one ``eigh`` over every layer's base matrices) and Cayley-STRING's ``P`` and phasors (one
solve over every layer's skew matrices), instead of each layer computing its own. Checked against the per-layer
path (``batch_layers = False``, the computation before): equal in float64 with every parameter's gradient, bit
for bit in float32 (same per-matrix decomposition or solve, same per-layer coordinate products, same elementwise
ops), with and without a class token and the fold, and under windowed attention (whose blocks get other coords:
the layers compute their own phasors). Stale tables (after an optimizer step) are not used, and a model that ran
a forward deep-copies and pickles.
"""
from __future__ import annotations

import copy
import pickle

import pytest
import torch

from pebench.encodings import comrope, rope_mixed, string_pe
from pebench.encodings.comrope import spectra
from pebench.encodings.rope_mixed import mixed_phasors
from pebench.encodings.string_pe import cayley
from pebench.models import build_backbone

GRID = (5, 6)
CASES = [("comrope", {}, False), ("comrope", {}, True), ("comrope", {"variant": "ap"}, False),
         ("comrope", {"fold_basis": False}, True), ("comrope", {"block_size": 4}, False),
         ("string", {}, False), ("string", {}, True), ("string", {"fold_basis": False}, True),
         ("rope-mixed", {}, False), ("rope-mixed", {}, True)]
IDS = [f"{pe}-{','.join(f'{k}={v}' for k, v in o.items()) or 'default'}-cls{int(c)}" for pe, o, c in CASES]
BITWISE = [0, 1, 2, 5, 6, 8, 9]
PES = ["comrope", "string", "rope-mixed"]


def raster(dtype=torch.float64) -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.arange(GRID[0], dtype=dtype), torch.arange(GRID[1], dtype=dtype), indexing="ij")
    return torch.stack([yy, xx], -1).reshape(-1, 2)  # (N, 2)


def twins(pe: str, opts: dict, class_token: bool, dtype: torch.dtype, attn_window: int | None = None):
    """Two copies of one backbone: layer tables batched (the default) and per layer. STRING's ``P`` starts at
    the identity: moved to a generic orthogonal matrix."""
    out = []
    for batched in (True, False):
        torch.manual_seed(0)
        model = build_backbone("vit-nano", pe=pe, spatial_dims=2, grid=GRID, class_token=class_token,
                               attn_window=attn_window, **opts).to(dtype)
        model.pe.batch_layers = batched
        out.append(model)
    with torch.no_grad():
        for n, prm in out[0].named_parameters():
            if n.endswith(".upper"):
                prm.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(2))
    out[1].load_state_dict(out[0].state_dict())
    return out


def forward_backward(model, x: torch.Tensor, coords: torch.Tensor) -> tuple[torch.Tensor, dict]:
    y = model(x, coords, GRID)
    (y.square().sum() + y[:, 0].sum()).backward()
    return y, {n: p.grad for n, p in model.named_parameters()}


@pytest.mark.parametrize("pe,opts,class_token", CASES, ids=IDS)
def test_batched_tables_equal_per_layer_tables_float64_with_gradients(pe, opts, class_token, monkeypatch):
    batched, alone = twins(pe, opts, class_token, torch.float64)
    x = torch.randn(2, GRID[0] * GRID[1], 128, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    calls = []  # the decompositions (comrope) or solves (string) and the shapes they ran on
    if pe == "comrope":
        monkeypatch.setattr(comrope, "spectra", lambda base, dtype: calls.append(base.shape) or spectra(base, dtype))
        one, per_layer = batched.pe.layers[0].base.shape, 4
    elif pe == "string":
        monkeypatch.setattr(string_pe, "cayley", lambda s: calls.append(s.shape) or cayley(s))
        one, per_layer = (4, 32, 32), 4
    else:  # rope-mixed: the phasor tables
        monkeypatch.setattr(rope_mixed, "mixed_phasors", lambda c, f, *a: calls.append(f.shape) or mixed_phasors(c, f, *a))
        one, per_layer = batched.pe.layers[0].freqs.shape, 4
    y1, g1 = forward_backward(batched, x, raster())
    assert calls == [(4,) + one]  # one for all 4 layers
    y2, g2 = forward_backward(alone, x, raster())
    assert calls[1:] == [one] * per_layer
    torch.testing.assert_close(y1, y2, rtol=1e-12, atol=1e-12)
    for name, grad in g1.items():
        assert grad is not None, name
        torch.testing.assert_close(grad, g2[name], rtol=1e-10, atol=1e-11, msg=name)
    assert all(lay._prepared is None for lay in batched.pe.layers)  # consumed by the forward


@pytest.mark.parametrize("pe,opts,class_token", [CASES[i] for i in BITWISE], ids=[IDS[i] for i in BITWISE])
def test_batched_tables_are_bit_identical_in_float32(pe, opts, class_token):
    batched, alone = twins(pe, opts, class_token, torch.float32)
    x = torch.randn(3, GRID[0] * GRID[1], 128, generator=torch.Generator().manual_seed(1))
    y1, g1 = forward_backward(batched, x, raster(torch.float32))
    y2, g2 = forward_backward(alone, x, raster(torch.float32))
    assert torch.equal(y1, y2)
    for name, grad in g1.items():
        assert torch.equal(grad, g2[name]), name


@pytest.mark.parametrize("pe", PES)
def test_windowed_attention_layers_compute_their_own_phasors(pe):
    """Windowed blocks receive per-window coords, not the tables' coords: the layers fall back to their own."""
    batched, alone = twins(pe, {}, False, torch.float64, attn_window=8)
    x = torch.randn(2, GRID[0] * GRID[1], 128, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    y1, g1 = forward_backward(batched, x, raster())
    y2, g2 = forward_backward(alone, x, raster())
    torch.testing.assert_close(y1, y2, rtol=1e-12, atol=1e-12)
    for name, grad in g1.items():
        torch.testing.assert_close(grad, g2[name], rtol=1e-10, atol=1e-11, msg=name)


@pytest.mark.parametrize("pe", PES)
def test_tables_prepared_before_an_update_are_not_used_after_it(pe):
    model = twins(pe, {"fold_basis": False} if pe != "rope-mixed" else {}, False, torch.float64)[0]
    x = torch.randn(1, GRID[0] * GRID[1], 128, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(6)
    q, k = (torch.randn(1, 4, GRID[0] * GRID[1], 32, dtype=torch.float64, generator=g) for _ in range(2))
    coords = raster()
    model.pe.encode_tokens(x, coords, GRID)  # tables for the current parameters
    layer = model.pe.layers[0]
    assert layer._prepared is not None
    with torch.no_grad():  # an optimizer step between the tables and their use
        next(layer.parameters()).mul_(1.5)
    got = layer.qk(q, k, None, coords)  # the stale tables must not be used ...
    assert layer._prepared is None
    want = layer.qk(q, k, None, coords)  # ... so this equals the layer's own computation
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("pe", PES)
def test_a_model_that_ran_a_forward_deep_copies_and_pickles(pe):
    """Tables left on layers a forward did not reach hold an autograd graph; copies leave them out."""
    model = twins(pe, {}, True, torch.float32)[0]
    x = torch.randn(1, GRID[0] * GRID[1], 128)
    model.pe.encode_tokens(x, raster(torch.float32), GRID)  # prepared, never consumed
    clone = copy.deepcopy(model)
    assert all(lay._prepared is None for lay in clone.pe.layers)
    pickle.loads(pickle.dumps(model))
    torch.testing.assert_close(clone(x, raster(torch.float32), GRID), model(x, raster(torch.float32), GRID))


@pytest.mark.parametrize("pe", PES)
def test_per_sample_coords_in_evaluation_are_not_batched_over_layers(pe):
    """Per-sample coords ``(B, N, p)`` without gradients: every layer's ``(B, ...)`` table at once would multiply
    the evaluation's peak memory by the depth, so the layers compute theirs one at a time; shared coords, or
    training, still batch. The outputs agree either way."""
    model = twins(pe, {}, False, torch.float32)[0].eval()
    x = torch.randn(3, GRID[0] * GRID[1], 128)
    per_sample = raster(torch.float32).expand(3, -1, -1) + torch.rand(3, 1, 2)  # (B, N, p): a shift per sample
    with torch.no_grad():
        model.pe.encode_tokens(x, per_sample, GRID)
        assert all(lay._prepared is None for lay in model.pe.layers)
        model.pe.encode_tokens(x, raster(torch.float32), GRID)
        assert all(lay._prepared is not None for lay in model.pe.layers)
    model.pe.encode_tokens(x, per_sample, GRID)  # with gradients: batched
    assert all(lay._prepared is not None for lay in model.pe.layers)
    with torch.no_grad():
        alone = model(x, per_sample, GRID)
    batched = model.train()(x, per_sample, GRID)  # no dropout in vit-nano: train mode changes nothing else
    torch.testing.assert_close(alone, batched, rtol=1e-5, atol=1e-5)

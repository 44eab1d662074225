"""``rpb``: the Swin/BEiT table and SwinV2's CPB against timm's ``RelPosBias`` / ``RelPosMlp`` (same weights,
same bias matrix, at the training grid and at a larger one), the offset convention written out in float64,
3-D lookup, FlexAttention against dense, and the errors."""
from __future__ import annotations

import pytest
import torch
from timm.layers.pos_embed_rel import RelPosBias as TimmRelPosBias
from timm.layers.pos_embed_rel import RelPosMlp
from torch.nn.attention.flex_attention import flex_attention

from pebench.encodings import PEConfigError, build_pe
from pebench.models import attention as attn_mod
from pebench.models import grid_coords
from pebench.models.attention import attend

G, H = (4, 5), 3


def _table_layer(grid=G, prefix=0):
    torch.manual_seed(0)
    return build_pe("rpb", dim=4 * H, num_heads=H, depth=2, spatial_dims=len(grid), grid=grid,
                    num_prefix_tokens=prefix).layer(1)


def test_table_is_timm_relposbias_at_the_training_grid_and_resampled_like_timm():
    lay = _table_layer()
    ref = TimmRelPosBias(G, H)
    with torch.no_grad():
        ref.relative_position_bias_table.copy_(lay.table.reshape(H, -1).T)  # timm: (offsets, H), row-major
        torch.testing.assert_close(lay.bias(grid_coords(G)), ref.get_bias(), rtol=0, atol=0)
        big = (7, 9)
        ref.set_window_size(big)  # timm's resize_rel_pos_bias_table (BEiT's rule)
        torch.testing.assert_close(lay.bias(grid_coords(big)), ref.get_bias(), rtol=0, atol=0)


@pytest.mark.parametrize("window,pretrained", [(G, (0, 0)), ((7, 9), G)])
def test_cpb_is_timm_relposmlp_swin(window, pretrained):
    """SwinV2's CPB: at the training grid, and at a larger one normalised by the training grid
    (timm's pretrained_window_size); timm in eval mode (its extra dropout off)."""
    torch.manual_seed(0)
    lay = build_pe("rpb", dim=4 * H, num_heads=H, depth=1, spatial_dims=2, grid=G, variant="cpb").layer(0)
    ref = RelPosMlp(window, H, hidden_dim=512, mode="swin", pretrained_window_size=pretrained).eval()
    with torch.no_grad():
        ref.mlp.fc1.weight.copy_(lay.cpb[0].weight)
        ref.mlp.fc1.bias.copy_(lay.cpb[0].bias)
        ref.mlp.fc2.weight.copy_(lay.cpb[2].weight)
        torch.testing.assert_close(lay.bias(grid_coords(window)), ref.get_bias(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("grid", [(3, 4), (2, 3, 3)])
def test_bias_is_the_table_at_query_minus_key_offset(grid):
    """float64, loops: bias[h, i, j] = T[h, r_i - r_j + G - 1] on the training grid; prefix rows / cols 0."""
    lay = _table_layer(grid, prefix=1).double()
    c = grid_coords(grid).double()
    got = lay.bias(c)[0]
    T = lay.table.detach()
    for i in range(c.shape[0]):
        for j in range(c.shape[0]):
            idx = tuple(int(c[i, a] - c[j, a]) + grid[a] - 1 for a in range(len(grid)))
            assert torch.equal(got[:, 1 + i, 1 + j], T[(slice(None), *idx)])
    assert (got[:, 0] == 0).all() and (got[:, :, 0] == 0).all()


def test_init_weight_decay_and_no_coord_augment():
    pe = build_pe("rpb", dim=32, num_heads=4, depth=2, spatial_dims=2, grid=(8, 8))
    t = pe.layer(0).table
    assert t.shape == (4, 15, 15) and 0.015 < float(t.std()) < 0.025  # trunc. normal std 0.02 (cut at +-2, as timm)
    assert pe.no_weight_decay() == {"layers.0.table", "layers.1.table"}
    assert not pe.accepts_coord_augment
    cpb = build_pe("rpb", dim=32, num_heads=4, depth=1, spatial_dims=2, grid=(8, 8), variant="cpb")
    assert cpb.no_weight_decay() == set() and cpb.layer(0).cpb[2].bias is None


@pytest.mark.parametrize("variant", ["table", "cpb"])
@pytest.mark.parametrize("prefix", [0, 1])
def test_flex_score_mod_equals_dense(variant, prefix, monkeypatch):
    """Off the training grid too (a 6 x 7 raster: the table resampled), with padding."""
    monkeypatch.setattr(attn_mod, "_COMPILED_FLEX", flex_attention)  # numerics through eager FlexAttention
    torch.manual_seed(2)
    lay = build_pe("rpb", dim=32, num_heads=4, depth=1, spatial_dims=2, grid=(4, 5), variant=variant,
                   num_prefix_tokens=prefix).double().layer(0)
    coords = grid_coords((6, 7)).double()
    n = coords.shape[0] + prefix
    q, k, v = (torch.randn(2, 4, n, 8, dtype=torch.float64) for _ in range(3))
    key_mask = torch.ones(2, n, dtype=torch.bool)
    key_mask[1, -5:] = False
    with torch.no_grad():
        dense, _ = attend(q, k, v, None, lay, coords, key_mask, scale=8 ** -0.5, impl="dense")
        flex, used = attend(q, k, v, None, lay, coords, key_mask, scale=8 ** -0.5, impl="flex")
    assert used == "flex"
    torch.testing.assert_close(flex, dense, rtol=1e-10, atol=1e-10)


def test_errors():
    with pytest.raises(PEConfigError, match="training grid"):
        build_pe("rpb", dim=32, num_heads=4, depth=1, spatial_dims=3)
    with pytest.raises(PEConfigError, match="points"):
        build_pe("rpb", dim=32, num_heads=4, depth=1, spatial_dims=3, grid=(2, 2, 2), modality="points")
    with pytest.raises(PEConfigError):
        build_pe("rpb", dim=32, num_heads=4, depth=1, spatial_dims=2, grid=(4, 4), variant="mlp")


def test_offset_index_is_kept_per_coords_tensor_and_redone_when_they_change():
    """The flat offset index is computed once per coords tensor (the cache behind the peer comparison with timm's
    RelPosBias, which keeps it as a buffer): the same tensor gives the same bias, bit for bit; an in-place change
    of the coords, other coords and a grid beyond the table recompute it."""
    lay = _table_layer()
    c = grid_coords(G)
    first = lay.bias(c)
    assert lay._index is not None and lay._index[0] is c
    torch.testing.assert_close(lay.bias(c), first, rtol=0, atol=0)
    fresh = _table_layer()  # no cache: the reference
    c.copy_(c.flip(0))  # the tokens in the other order: a new index
    torch.testing.assert_close(lay.bias(c), fresh.bias(c.clone()), rtol=0, atol=0)
    other = grid_coords((6, 7))
    torch.testing.assert_close(lay.bias(other), fresh.bias(other.clone()), rtol=0, atol=0)
    assert lay._index[0] is other


@pytest.mark.parametrize("variant", ["table", "cpb"])
def test_evaluation_keeps_the_bias_until_a_parameter_or_the_coords_change(variant):
    """Without grad the bias of one coords tensor is built once and returned again (the same tensor); an optimiser
    step, a ``load_state_dict``, an in-place change of the coords and other coords each give the bias built afresh,
    equal bit for bit to a layer that never kept one; with grad nothing is kept and the table gets its gradient."""
    torch.manual_seed(0)
    pe = build_pe("rpb", dim=4 * H, num_heads=H, depth=1, spatial_dims=2, grid=G, variant=variant)
    lay = pe.layer(0)
    c = grid_coords(G)

    def fresh(coords):  # the reference: a layer with the same parameters that never kept a bias
        ref = build_pe("rpb", dim=4 * H, num_heads=H, depth=1, spatial_dims=2, grid=G, variant=variant)
        ref.load_state_dict(pe.state_dict())
        with torch.no_grad():
            return ref.layer(0)._build_bias(coords.clone())

    with torch.no_grad():
        first = lay.bias(c)
        assert lay.bias(c) is first
        torch.testing.assert_close(first, fresh(c), rtol=0, atol=0)
    opt = torch.optim.SGD(pe.parameters(), lr=0.5)
    lay.bias(c).square().sum().backward()  # with grad: built, not kept
    assert lay._eval_bias is None and all(p.grad is not None for p in pe.parameters())
    opt.step()
    with torch.no_grad():
        after_step = lay.bias(c)
        assert not torch.equal(after_step, first)
        torch.testing.assert_close(after_step, fresh(c), rtol=0, atol=0)
    other = build_pe("rpb", dim=4 * H, num_heads=H, depth=1, spatial_dims=2, grid=G, variant=variant)
    pe.load_state_dict(other.state_dict())
    with torch.inference_mode():
        loaded = lay.bias(c)
        torch.testing.assert_close(loaded, fresh(c), rtol=0, atol=0)
        c.copy_(c.flip(0))
        torch.testing.assert_close(lay.bias(c), fresh(c), rtol=0, atol=0)
        c2 = grid_coords((6, 7))
        torch.testing.assert_close(lay.bias(c2), fresh(c2), rtol=0, atol=0)


def test_coords_made_under_inference_mode_are_not_kept():
    """Coords created under ``inference_mode`` carry no version counter (an in-place change could not be told):
    their index and bias are built on every call, equal to those of the same coords made normally."""
    lay = _table_layer()
    with torch.inference_mode():
        c = grid_coords(G).clone()
        got = lay.bias(c)
        assert lay._eval_bias is None and (lay._index is None or lay._index[0] is not c)
    torch.testing.assert_close(got, _table_layer().bias(grid_coords(G)), rtol=0, atol=0)

"""Windowed attention over serialized point tokens (issue #15; ``attn_window``, :mod:`pebench.models.vit`).

References are independent of the implementation: full attention run separately on each window's real
tokens of each scene (no masks, no padding, window borders computed here from the documented rule),
and receptive fields derived by set algebra from that rule and compared with autograd's.
"""
from __future__ import annotations

import pytest
import torch

from pebench.encodings import build_pe, get_pe_class, list_pes
from pebench.models.vit import ViTBackbone, check_attn_window, window_layout

POINT_PES = [p for p in list_pes() if "points" in get_pe_class(p).modalities]
DIM, HEADS = 32, 2


def _backbone(pe: str, depth: int = 2, window: int | None = None, seed: int = 0) -> ViTBackbone:
    torch.manual_seed(seed)
    bb = ViTBackbone(DIM, depth, HEADS, build_pe(pe, dim=DIM, num_heads=HEADS, depth=depth, spatial_dims=3),
                     attn_window=window).double().eval()
    for p in bb.parameters():  # non-trivial PE parameters (APE / PaPE tables start near zero)
        with torch.no_grad():
            p.add_(0.05 * torch.randn_like(p))
    return bb


def _scenes(counts: list[int], seed: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A padded batch (padding last, as the scene tokenizer makes it): x (B, T, D), coords (B, T, 3) m, mask."""
    g = torch.Generator().manual_seed(seed)
    B, T = len(counts), max(counts)
    x = torch.randn(B, T, DIM, generator=g, dtype=torch.float64)
    coords = torch.rand(B, T, 3, generator=g, dtype=torch.float64) * 4.0
    mask = torch.arange(T).unsqueeze(0) < torch.tensor(counts).unsqueeze(1)
    coords = coords.masked_fill(~mask.unsqueeze(-1), 0.0)  # the tokenizer's padding centres
    return x, coords, mask


def _windows(n: int, W: int, block: int) -> list[tuple[int, int]]:
    """The documented rule: windows of W consecutive tokens; odd blocks shift the borders by W // 2 when
    the scene has more than W tokens (first window W // 2 long); a scene of <= W tokens is one window."""
    if n <= W:
        return [(0, n)]
    start = W // 2 if block % 2 else W
    cuts = [0, *range(start, n, W), n]
    return list(zip(cuts[:-1], cuts[1:]))


def _reference(bb: ViTBackbone, x: torch.Tensor, coords: torch.Tensor, n: int, W: int) -> torch.Tensor:
    """One scene's n real tokens, each block's attention run separately per window: -> (n, D)."""
    h = bb.pe.encode_tokens(x[None, :n], coords[None, :n], None)
    for i, blk in enumerate(bb.blocks):
        h = torch.cat([blk(h[:, a:e], coords[None, a:e], bb.pe.layer(i)) for a, e in _windows(n, W, i)], 1)
        h = bb.pe.after_block(i, h, coords[None, :n], None, None)  # over the whole scene (cpe), else identity
    return bb.norm(h)[0]


@pytest.mark.parametrize("pe", POINT_PES)
def test_window_at_least_n_is_full_attention_exactly(pe):
    x, coords, mask = _scenes([11, 7])
    full = _backbone(pe)(x, coords, None, mask)
    for W in (11, 64):
        assert torch.equal(_backbone(pe, window=W)(x, coords, None, mask), full), (pe, W)
    feats = _backbone(pe, window=11).forward_intermediates(x, coords, None, mask)
    assert all(torch.equal(a, b) for a, b in zip(feats, _backbone(pe).forward_intermediates(x, coords, None, mask)))


@pytest.mark.parametrize("pe", POINT_PES)
def test_windows_equal_per_window_full_attention_reference(pe):
    # scene 0: 23 tokens (4 windows, shifted on block 1); scene 1: 9 (> W, shifted); scene 2: 5 (<= W: one
    # window in every block, though the batch is windowed)
    counts, W = [23, 9, 5], 6
    x, coords, mask = _scenes(counts)
    bb = _backbone(pe, window=W)
    out = bb(x, coords, None, mask)
    assert torch.isfinite(out).all()
    for b, n in enumerate(counts):
        torch.testing.assert_close(out[b, :n], _reference(bb, x[b], coords[b], n, W), rtol=1e-9, atol=1e-9)
    # the same through forward_intermediates (what the geometry analysis reads): its last block output
    last = bb.forward_intermediates(x, coords, None, mask, norm=True)[-1]
    torch.testing.assert_close(last, out, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("pe", ["pape", "alibi", "rope-axial"])
def test_padding_does_not_change_real_tokens(pe):
    counts, W = [23, 9], 4
    x, coords, mask = _scenes(counts)
    bb = _backbone(pe, window=W)
    out = bb(x, coords, None, mask)
    g = torch.Generator().manual_seed(5)
    junk_x = x.masked_scatter(~mask.unsqueeze(-1), 1e3 * torch.randn(x.shape, generator=g, dtype=x.dtype))
    junk_c = coords.masked_scatter(~mask.unsqueeze(-1), 50.0 * torch.rand(coords.shape, generator=g,
                                                                         dtype=coords.dtype))
    out2 = bb(junk_x, junk_c, None, mask)
    torch.testing.assert_close(out2[mask], out[mask], rtol=1e-6, atol=1e-6)  # coords enter PaPE's centring only
    alone = bb(x[1:, :9], coords[1:, :9], None, None)  # the 9-token scene without batch padding
    torch.testing.assert_close(alone[0], out[1, :9], rtol=1e-9, atol=1e-9)


def test_layout_and_half_window_shift_on_odd_blocks():
    idx, pad, shift, n_win = window_layout(torch.tensor([10, 3]), 10, 4, shifted=False)
    assert n_win == 3 and shift.tolist() == [0, 0]
    assert idx[0].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9] and pad[0].tolist() == [False] * 10 + [True] * 2
    idx, pad, shift, n_win = window_layout(torch.tensor([10, 3]), 10, 4, shifted=True)
    assert n_win == 3 and shift.tolist() == [2, 0]  # the 3-token scene fits one window: never shifted
    assert idx[0].tolist() == [0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9] and pad[0].tolist() == [True] * 2 + [False] * 10
    assert pad[1].tolist() == [False] * 10 + [True] * 2
    # receptive fields through 3 blocks (unshifted, shifted, unshifted) from the rule vs autograd
    n, W = 12, 4
    x, coords, _ = _scenes([n])
    bb = _backbone("rope-axial", depth=3, window=W)
    x.requires_grad_(True)
    feats = bb.forward_intermediates(x, coords, None, None)  # block outputs 1..3, each (1, n, D)
    pick = torch.eye(n, dtype=x.dtype)[:, None, :, None].expand(n, 1, n, DIM)  # one output token per row
    deps = [{t} for t in range(n)]
    for blk in range(3):
        win = {t: set(range(a, e)) for a, e in _windows(n, W, blk) for t in range(a, e)}
        deps = [set().union(*(deps[u] for u in win[t])) for t in range(n)]
        (jac,) = torch.autograd.grad(feats[blk], x, pick, retain_graph=True, is_grads_batched=True)  # (n, 1, n, D)
        for t in range(n):
            seen = {u for u in range(n) if jac[t, 0, u].abs().sum() > 0}
            assert seen == deps[t], (blk, t, seen, deps[t])
    assert deps[0] == set(range(8))  # by hand: block 2's window [0, 4) holds tokens 2, 3, whose block-1 window
    # [2, 6) reached tokens 0..7 through block 0


def test_bad_window_values_are_one_line_errors(tmp_path, capsys):
    for bad in (0, 1, -4, 2.5, True, "x", "8.0"):
        with pytest.raises(ValueError, match="attn_window must be an integer >= 2"):
            check_attn_window(bad)
    assert check_attn_window("16") == 16 and check_attn_window("none") is None and check_attn_window(None) is None
    with pytest.raises(ValueError, match="class token"):
        ViTBackbone(DIM, 1, HEADS, build_pe("pape", dim=DIM, num_heads=HEADS, depth=1, spatial_dims=3,
                                            num_prefix_tokens=1), class_token=True, attn_window=8)
    from pebench.cli import main

    out = str(tmp_path / "r")
    for opts, words in ((["attn_window=1"], "attn_window must be an integer >= 2"),
                        (["attn_window=8", "patching=fps"], "patching=serialize")):
        args = ["run", "--dataset", "primitives-scene", "--out", out]
        for o in opts:
            args += ["--task-option", o]
        assert main(args) == 2
        err = [ln for ln in capsys.readouterr().err.splitlines()
               if ln.strip() and not ln.startswith(("GPU available", "TPU available"))]
        assert len(err) == 1 and err[0].startswith("bench: error: ") and words in err[0], err
    assert not (tmp_path / "r").exists()


def test_segmentation_task_option_reaches_the_backbone():
    from pebench.tasks.segmentation import SegmentationTask
    from pebench.tasks.segmentation.setup import _extra_results

    g = torch.Generator().manual_seed(3)
    inp = {"coord": torch.rand(1, 200, 3, generator=g) * 3, "feat": torch.rand(1, 200, 3, generator=g),
           "mask": torch.ones(1, 200, dtype=torch.bool)}  # 13 tokens of 16 points
    tasks = {}
    for w in (None, 4, 13):
        torch.manual_seed(0)
        tasks[w] = SegmentationTask(num_classes=5, feat_dim=3, pe="pape", patch_size=16, grid_size=0.05,
                                    attn_window=w).eval()
    with torch.no_grad():
        out = {w: t(inp) for w, t in tasks.items()}
    assert torch.equal(out[13], out[None]) and not torch.allclose(out[4], out[None])
    assert _extra_results(tasks[4])["segmentation"]["attention"].startswith("windowed (4 z-order tokens")
    assert _extra_results(tasks[None])["segmentation"]["attention"].startswith("full")

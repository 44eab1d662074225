"""``rope-axial layout=hope``: HoPE (Li et al., NeurIPS 2025, "HoPE: Hybrid of Position Embedding for Long Context
Vision-Language Models", arXiv 2505.20444), in float64 against

* the paper's formulas, written out here: one RoPE ladder ``w_k = base^(-k/F)`` over the ``F = d/2`` pairs; hybrid
  frequency allocation, the lowest ``F // 4`` pairs (the temporal ones) at frequency zero, the others alternating
  ``y, x`` from the highest; the diagonal positions ``(y + g t, x + g t)`` with the temporal spacing ``g`` (dynamic
  temporal scaling: drawn per video in training from ``{0.5, 0.75, 1, 1.25, 1.5}``, chosen in inference);
* an independent port of the official code's behaviour as read in hrlics/HoPE ``modeling_hope.py``
  (``get_dynamic_rope_index``: ``t' = g t + offset``, ``h' = h - (H - 1) // 2 + t'``, ``w'`` likewise;
  ``apply_hybrid_multimodal_rotary_pos_emb``: Qwen2-VL's half-split channels, spatial section alternating rows
  ``h, w``, temporal section ``cos = 1, sin = 0``), with Qwen2-VL's sections ``(16, 24, 24)`` of 64 pairs scaled
  as pebench scales them (temporal ``F // 4``). Qwen rotates channel ``j`` with ``j + d/2``, pebench the pair
  ``(2j, 2j + 1)``: compared through that channel permutation.
"""
from __future__ import annotations

import pytest
import torch

from pebench.encodings import PEConfigError, build_pe
from pebench.models import build_backbone, grid_coords

D_HEAD, H = 16, 2  # F = 8 pairs: 6 spatial (y, x, y, x, y, x), 2 zero-frequency
SCALES = (0.5, 0.75, 1.0, 1.25, 1.5)


def hope_angles_ref(c: torch.Tensor, d: int, base: float, g) -> torch.Tensor:
    """The paper's angles (B|1, N, d/2) of coords c (B|1, N, 3) = (t, y, x); g a number or (B,) per sample."""
    F = d // 2
    n_t = F // 4
    g = torch.as_tensor(g, dtype=c.dtype).reshape(-1, 1)  # (B|1, 1)
    t, y, x = c.unbind(-1)
    theta = torch.zeros(*c.shape[:-1], F, dtype=c.dtype)
    for k in range(F - n_t):
        w = base ** (-k / F)
        pos = y if k % 2 == 0 else x
        theta[..., k] = w * (pos + g * t)
    return theta  # pairs F - n_t .. F - 1: frequency zero


def rotate_ref(t: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Pairs (2j, 2j+1) of t (B, H, N, d) rotated by theta (B|1, N, d/2) as complex numbers."""
    z = torch.complex(t[..., 0::2], t[..., 1::2]) * torch.exp(1j * theta[:, None])
    return torch.stack([z.real, z.imag], dim=-1).flatten(-2)


def official_hope_rotate(q: torch.Tensor, grid: tuple[int, int, int], g: float, base: float,
                         offset: float) -> torch.Tensor:
    """Port of the official behaviour (hrlics/HoPE, modeling_hope.py) for one video of ``grid = (T, H, W)`` frames
    after ``offset`` text tokens: q (B, heads, T*H*W, d) in Qwen's half-split layout, rotated."""
    d = q.shape[-1]
    half = d // 2
    T, Hh, W = grid
    tt, hh, ww = (a.flatten().double() for a in torch.meshgrid(torch.arange(T), torch.arange(Hh), torch.arange(W),
                                                               indexing="ij"))
    t_id = tt * g + offset  # dynamic temporal scaling, then the position after the text
    ids = torch.stack([t_id, hh - (Hh - 1) // 2 + t_id, ww - (W - 1) // 2 + t_id])  # (3, N): rows t, h, w
    inv_freq = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)  # Qwen2-VL's (d/2,)
    freqs = ids[:, :, None] * inv_freq  # (3, N, d/2)
    n_t = half // 4  # the temporal section (16 of 64 in Qwen2-VL)
    ang = torch.zeros(freqs.shape[1], half, dtype=torch.float64)  # temporal section: cos 1, sin 0 (NoPE)
    for j in range(half - n_t):  # the spatial section (h + w), rows alternating h, w
        ang[:, j] = freqs[1 if j % 2 == 0 else 2, :, j]
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)  # (N, d): channel j and j + d/2
    rotated_half = torch.cat([-q[..., half:], q[..., :half]], dim=-1)
    return q * cos + rotated_half * sin


def qwen_to_pairs(t: torch.Tensor) -> torch.Tensor:
    """Qwen's channel j, j + d/2 -> pebench's pair (2j, 2j + 1)."""
    half = t.shape[-1] // 2
    return torch.stack([t[..., :half], t[..., half:]], dim=-1).flatten(-2)


def hope(grid=(4, 3, 5), P=0, **opts):
    return build_pe("rope-axial", dim=H * D_HEAD, num_heads=H, depth=2, spatial_dims=3, num_prefix_tokens=P,
                    grid=grid, layout="hope", **opts).double()


@pytest.mark.parametrize("g", [0.75, 1.0, 1.5])
@pytest.mark.parametrize("base", [100.0, 10000.0])
@pytest.mark.parametrize("P", [0, 1])
def test_evaluation_matches_the_papers_formulas(g, base, P):
    pe = hope(P=P, base=base, hope_eval_scale=g).eval()
    gen = torch.Generator().manual_seed(0)
    for c in (grid_coords((4, 3, 5)).double(), torch.rand(2, 23, 3, generator=gen, dtype=torch.float64) * 6 - 3):
        N = c.shape[-2]
        q, k = (torch.randn(2, H, P + N, D_HEAD, generator=gen, dtype=torch.float64) for _ in range(2))
        pe.encode_tokens(torch.zeros(2, N, H * D_HEAD, dtype=torch.float64), c, None)
        qr, kr = pe.layer(0).qk(q, k, None, c)
        theta = hope_angles_ref(c if c.dim() == 3 else c[None], D_HEAD, base, g)
        torch.testing.assert_close(qr[:, :, P:], rotate_ref(q[:, :, P:], theta), rtol=0, atol=1e-12)
        torch.testing.assert_close(kr[:, :, P:], rotate_ref(k[:, :, P:], theta), rtol=0, atol=1e-12)
        assert torch.equal(qr[:, :, :P], q[:, :, :P])  # prefix tokens: no position
        F = D_HEAD // 2
        torch.testing.assert_close(qr[..., 2 * (F - F // 4):], q[..., 2 * (F - F // 4):], rtol=0, atol=0)  # NoPE pairs


@pytest.mark.parametrize("g", [0.5, 0.75, 1.25])
@pytest.mark.parametrize("grid", [(4, 3, 5), (2, 4, 4), (3, 1, 6)])
def test_equals_the_official_code_as_read(grid, g):
    """Rotated vectors through the channel permutation (pebench given the official positions' constant offsets)
    and the attention logits (pebench on plain grid coords: the offsets cancel)."""
    base, offset = 100.0, 7.0
    T, Hh, W = grid
    N = T * Hh * W
    gen = torch.Generator().manual_seed(1)
    q, k = (torch.randn(2, H, N, D_HEAD, generator=gen, dtype=torch.float64) for _ in range(2))
    q_off, k_off = official_hope_rotate(q, grid, g, base, offset), official_hope_rotate(k, grid, g, base, offset)
    pe = hope(grid=grid, hope_eval_scale=g).eval()
    c = grid_coords(grid).double()
    shifted = c + torch.tensor([0.0, offset - (Hh - 1) // 2, offset - (W - 1) // 2], dtype=torch.float64)
    qp, kp = pe.layer(0).qk(qwen_to_pairs(q), qwen_to_pairs(k), None, shifted)
    torch.testing.assert_close(qp, qwen_to_pairs(q_off), rtol=0, atol=1e-12)
    torch.testing.assert_close(kp, qwen_to_pairs(k_off), rtol=0, atol=1e-12)
    qp, kp = pe.layer(0).qk(qwen_to_pairs(q), qwen_to_pairs(k), None, c)
    torch.testing.assert_close(qp @ kp.transpose(-1, -2), q_off @ k_off.transpose(-1, -2), rtol=0, atol=1e-11)


def test_training_draws_each_samples_spacing_from_the_set_once_per_forward():
    grid = (4, 3, 5)
    pe = hope(grid=grid).train()
    c = grid_coords(grid).double()
    B, N = 6, c.shape[0]
    gen = torch.Generator().manual_seed(2)
    q, k = (torch.randn(B, H, N, D_HEAD, generator=gen, dtype=torch.float64) for _ in range(2))
    x = torch.zeros(B, N, H * D_HEAD, dtype=torch.float64)
    seen = []
    for step in range(40):
        torch.manual_seed(step)
        pe.encode_tokens(x, c, grid)
        g = pe.rope.time_scales(c)  # (B,): this forward's draws
        assert g.shape == (B,) and all(float(v) in SCALES for v in g)
        seen += g.tolist()
        qr, kr = pe.layer(0).qk(q, k, None, c)
        for b in range(B):
            theta = hope_angles_ref(c[None], D_HEAD, 100.0, float(g[b]))
            torch.testing.assert_close(qr[b:b + 1], rotate_ref(q[b:b + 1], theta), rtol=0, atol=1e-12)
        assert all(torch.equal(a, b_) for a, b_ in zip((qr, kr), pe.layer(1).qk(q, k, None, c)))  # every block
        torch.manual_seed(step)
        pe.encode_tokens(x, c, grid)
        assert torch.equal(pe.rope.time_scales(c), g)  # the same seed draws the same spacings
    counts = [seen.count(s) for s in SCALES]
    assert all(n > len(seen) / 10 for n in counts), counts  # uniform over the set (240 draws, ~48 each)


def test_evaluation_uses_the_fixed_spacing_and_draws_nothing():
    grid = (4, 3, 5)
    pe = hope(grid=grid, hope_eval_scale=0.75)
    c = grid_coords(grid).double()
    x = torch.zeros(1, c.shape[0], H * D_HEAD, dtype=torch.float64)
    pe.train().encode_tokens(x, c, grid)  # a training forward's draws ...
    pe.eval()
    state = torch.get_rng_state()
    pe.encode_tokens(x, c, grid)
    assert torch.equal(torch.get_rng_state(), state) and pe.rope.time_scales(c) is None  # ... are not used here
    q = torch.randn(1, H, c.shape[0], D_HEAD, dtype=torch.float64)
    qr, _ = pe.layer(0).qk(q, q, None, c)
    torch.testing.assert_close(qr, rotate_ref(q, hope_angles_ref(c[None], D_HEAD, 100.0, 0.75)), rtol=0, atol=1e-12)


def test_relative_in_evaluation_and_for_each_drawn_spacing():
    grid = (4, 3, 3)
    c = grid_coords(grid).double()
    torch.manual_seed(0)
    m = build_backbone("vit-nano", pe="rope-axial", spatial_dims=3, grid=grid, layout="hope").double()
    x = torch.randn(2, c.shape[0], 128, dtype=torch.float64)
    shift = torch.tensor([1.5, -2.0, 0.25], dtype=torch.float64)
    with torch.no_grad():
        m.eval()
        torch.testing.assert_close(m(x, c + shift, grid), m(x, c, grid), rtol=1e-9, atol=1e-9)
        m.train()
        torch.manual_seed(3)
        a = m(x, c, grid)
        torch.manual_seed(3)
        torch.testing.assert_close(m(x, c + shift, grid), a, rtol=1e-9, atol=1e-9)


def test_on_images_hope_is_videorope():
    c = grid_coords((4, 6)).double()
    q = torch.randn(2, H, c.shape[0] + 1, D_HEAD, dtype=torch.float64)
    got = [build_pe("rope-axial", dim=H * D_HEAD, num_heads=H, depth=1, spatial_dims=2, num_prefix_tokens=1,
                    layout=lay).double().train().layer(0).qk(q, q, None, c)[0] for lay in ("hope", "videorope")]
    torch.testing.assert_close(got[0], got[1], rtol=0, atol=0)


def test_time_reaches_the_logits_only_through_the_diagonal_offset():
    """Two tokens at the same (y, x) in different frames: the spatial pairs turn by w_k g dt, the zero-frequency
    pairs not at all; with the diagonal removed (same y + g t, x + g t) nothing turns."""
    pe = hope(hope_eval_scale=1.25).eval()
    a = torch.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 2.0], [2.0, -1.5, -0.5]], dtype=torch.float64)  # third: same y', x'
    q = torch.randn(1, H, 3, D_HEAD, dtype=torch.float64)
    same = q[:, :, :1].expand(-1, -1, 3, -1)
    qr, _ = pe.layer(0).qk(same, same, None, a)
    assert not torch.allclose(qr[:, :, 0], qr[:, :, 1])
    torch.testing.assert_close(qr[:, :, 0], qr[:, :, 2], rtol=0, atol=1e-12)


@pytest.mark.parametrize("kw,msg", [({"layout": "videorope", "hope_scales": [1.0, 2.0]}, "layout=hope only"),
                                    ({"layout": "axial", "hope_eval_scale": 0.75}, "layout=hope only"),
                                    ({"layout": "hope", "hope_scales": [0.0, 1.0]}, "hope_scales"),
                                    ({"layout": "hope", "hope_eval_scale": -1.0}, "hope_eval_scale"),
                                    ({"layout": "hope", "hope_scales": []}, "hope_scales")])
def test_mistakes_are_one_line_peconfigerrors(kw, msg):
    with pytest.raises(PEConfigError, match=msg) as e:
        build_pe("rope-axial", dim=32, num_heads=2, depth=1, spatial_dims=3, grid=(2, 2, 2), **kw)
    assert "\n" not in str(e.value)

"""``rope-dinov3`` against timm's port of DINOv3's RoPE (``timm.layers.RotaryEmbeddingDinoV3``, which timm states
matches facebookresearch/dinov3's ``RopePositionEmbedding``), in float64: the sin/cos tables and the rotation of
the same random q, k, on square and non-square grids, for every ``normalize_coords`` mode, base and min/max period
parameterisation, both channel layouts, with and without the training augmentation (seeded: the same random calls
draw the same numbers), and timm's train/eval differences. Then what the module docstring states for video
(time normalised on its own), across grid sizes, for prefix tokens, and the errors.

Exactness notes. timm builds its grid in float32 and its periods in float32; the float64 comparisons replace
timm's period buffer by the float64 values of DINOv3's formula (written out here) and use grids whose normalised
coordinates are exact in float32 (denominators powers of two); other grids are compared at float32 accuracy.
"""
from __future__ import annotations

import math

import pytest
import torch

from pebench.encodings import PEConfigError, build_pe, get_pe_class
from pebench.encodings.coord_augment import CoordAugment
from pebench.models import build_backbone, grid_coords

timm_sincos = pytest.importorskip("timm.layers.pos_embed_sincos")
if not hasattr(timm_sincos, "RotaryEmbeddingDinoV3"):
    pytest.skip("this timm has no RotaryEmbeddingDinoV3", allow_module_level=True)
TimmDinoV3 = timm_sincos.RotaryEmbeddingDinoV3

H, D_HEAD = 2, 16  # F = 4 frequencies per axis for images
EXACT = [(8, 8), (4, 8), (16, 4), (2, 16)]  # (i + 0.5) / D exact in float32 for every mode
OTHER = [(3, 5), (7, 6), (14, 14), (5, 3)]
PERIODS = [{"base": 100.0}, {"base": 37.5}, {"min_period": 0.5, "max_period": 90.0}]
MODES = ["separate", "min", "max"]


def dinov3_periods_ref(d: int, base: float | None = None, min_period: float | None = None,
                       max_period: float | None = None) -> torch.Tensor:
    """DINOv3's periods (RopePositionEmbedding._init_weights), float64: base^(2k / (d/2)), k < d/4, or
    min_period * (max_period / min_period)^linspace(0, 1, d/4)."""
    if min_period is not None:
        return min_period * (max_period / min_period) ** torch.linspace(0, 1, d // 4, dtype=torch.float64)
    return base ** (2 * torch.arange(d // 4, dtype=torch.float64) / (d // 2))


def timm_module(periods: dict, mode: str, rotate_half: bool = True, exact: bool = True, **aug) -> torch.nn.Module:
    """timm's module; ``exact``: float64 with DINOv3's periods in float64 (timm computes them in float32)."""
    m = TimmDinoV3(D_HEAD, temperature=periods.get("base", 100.0), min_period=periods.get("min_period"),
                   max_period=periods.get("max_period"), normalize_coords=mode, rotate_half=rotate_half,
                   shift_coords=aug.get("shift"), jitter_coords=aug.get("jitter"), rescale_coords=aug.get("rescale"),
                   dtype=torch.float64 if exact else torch.float32)
    if exact:
        with torch.no_grad():
            m.periods.copy_(dinov3_periods_ref(D_HEAD, **periods))
    return m


def ours(periods: dict, mode: str, rotate_half: bool = True, P: int = 0, depth: int = 2, grid=(8, 8), **opts):
    return build_pe("rope-dinov3", dim=H * D_HEAD, num_heads=H, depth=depth, spatial_dims=len(grid),
                    num_prefix_tokens=P, grid=grid, normalize_coords=mode, rotate_half=rotate_half, **periods, **opts)


def _timm_rotate(t: torch.Tensor, emb: torch.Tensor, P: int, half: bool) -> torch.Tensor:
    """timm's Eva attention: prefix rows as they are, patch rows through apply_rot_embed_cat."""
    return torch.cat([t[:, :, :P], timm_sincos.apply_rot_embed_cat(t[:, :, P:], emb, half=half)], dim=2)


def _compare(pe, tm, shape, P, atol):
    """Tables and rotated q, k of ``pe`` (after encode_tokens with the grid) against timm's ``get_embed(shape)``."""
    c = grid_coords(shape).double()
    N = c.shape[0]
    pe.encode_tokens(torch.zeros(1, N, H * D_HEAD, dtype=torch.float64), c, shape)
    emb = tm.get_embed(list(shape)).double()  # (N, 2d): [sin, cos]
    sin_t, cos_t = emb.chunk(2, -1)
    sin, cos = pe.tables(c, dtype=torch.float64)
    torch.testing.assert_close(sin[0], sin_t, rtol=0, atol=atol)
    torch.testing.assert_close(cos[0], cos_t, rtol=0, atol=atol)
    g = torch.Generator().manual_seed(3)
    q, k = (torch.randn(2, H, P + N, D_HEAD, generator=g, dtype=torch.float64) for _ in range(2))
    for block in range(pe.depth):
        qr, kr = pe.layer(block).qk(q, k, None, c)
        torch.testing.assert_close(qr, _timm_rotate(q, emb, P, tm.rotate_half), rtol=0, atol=atol * 10)
        torch.testing.assert_close(kr, _timm_rotate(k, emb, P, tm.rotate_half), rtol=0, atol=atol * 10)
        torch.testing.assert_close(qr[:, :, :P], q[:, :, :P], rtol=0, atol=0)  # prefix rows: no position


@pytest.mark.parametrize("rotate_half", [True, False])
@pytest.mark.parametrize("periods", PERIODS, ids=["base100", "base37.5", "minmax"])
@pytest.mark.parametrize("mode", MODES)
def test_equals_timm_in_float64(mode, periods, rotate_half):
    tm = timm_module(periods, mode, rotate_half).eval()
    for shape in EXACT:
        pe = ours(periods, mode, rotate_half, P=1).double().eval()
        _compare(pe, tm, shape, P=1, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_equals_timm_on_grids_not_exact_in_float32(mode):
    """Other grids: timm's float32 grid (i + 0.5) / D is the only difference (angles <= 2 pi: < 2e-6)."""
    for periods in PERIODS:
        tm = timm_module(periods, mode).eval()
        for shape in OTHER:
            _compare(ours(periods, mode, P=2).double().eval(), tm, shape, P=2, atol=2e-6)


def test_timm_float32_periods_are_dinov3s_formula():
    """timm's own (float32) period buffers are DINOv3's formula to float32 accuracy: the float64 tests only
    remove that rounding."""
    for periods in PERIODS:
        tm = timm_module(periods, "separate", exact=False)
        torch.testing.assert_close(tm.periods.double(), dinov3_periods_ref(D_HEAD, **periods), rtol=1e-6, atol=0)


AUGS = [{"shift": 0.3}, {"jitter": 1.7}, {"rescale": 2.0}, {"shift": 0.1, "jitter": 1.3, "rescale": 2.0}]


@pytest.mark.parametrize("aug", AUGS, ids=["shift", "jitter", "rescale", "all"])
@pytest.mark.parametrize("mode", MODES)
def test_training_augmentation_equals_timms_in_float64(mode, aug):
    """Seeded: timm's own steps (centred grid, _apply_coord_augs, _get_pos_embed_from_coords) on a float64 grid
    draw the same numbers as rope-dinov3 on float64 coords, and give the same tables; both consume the same
    random numbers."""
    periods = {"base": 100.0}
    tm = timm_module(periods, mode, **aug).train()
    for shape in EXACT[:3]:
        pe = ours(periods, mode, aug_draws="forward", **aug).double().train()
        c = grid_coords(shape).double()
        torch.manual_seed(11)
        pe.encode_tokens(torch.zeros(1, c.shape[0], H * D_HEAD, dtype=torch.float64), c, shape)
        sin, cos = pe.tables(c, dtype=torch.float64)
        after_ours = torch.rand(1)
        torch.manual_seed(11)
        grid = timm_sincos._build_grid(list(shape), grid_type="centered", normalize_coords=mode,
                                       dtype=torch.float64).flatten(0, -2)  # (N, 2), exact for these shapes
        grid = timm_sincos._apply_coord_augs(grid, aug.get("shift"), aug.get("jitter"), aug.get("rescale"))
        sin_t, cos_t = tm._get_pos_embed_from_coords(grid)
        after_timm = torch.rand(1)
        torch.testing.assert_close(sin[0], sin_t, rtol=0, atol=1e-12)
        torch.testing.assert_close(cos[0], cos_t, rtol=0, atol=1e-12)
        assert after_ours == after_timm  # the same random numbers consumed
        pe.eval().encode_tokens(torch.zeros(1, c.shape[0], H * D_HEAD, dtype=torch.float64), c, shape)
        assert not torch.allclose(sin[0], pe.tables(c, dtype=torch.float64)[0])  # it did augment


@pytest.mark.parametrize("aug", AUGS[2:], ids=["rescale", "all"])
def test_timm_module_in_training_and_evaluation(aug):
    """timm's module itself (float32, train mode: get_embed augments; eval: it does not and draws nothing)
    against rope-dinov3 on float32 coords with the same seed, to float32 accuracy."""
    periods = {"base": 100.0}
    tm = timm_module(periods, "separate", exact=False, **aug)
    pe = ours(periods, "separate", aug_draws="forward", **aug)
    shape = (6, 10)
    c = grid_coords(shape)
    x = torch.zeros(1, c.shape[0], H * D_HEAD)
    for mode in ("train", "eval"):
        tm.train(mode == "train")
        pe.train(mode == "train")
        torch.manual_seed(5)
        want = tm.get_embed(list(shape))
        state = torch.get_rng_state()
        torch.manual_seed(5)
        pe.encode_tokens(x, c, shape)
        got = torch.cat(pe.tables(c), -1)[0]
        torch.testing.assert_close(got, want, rtol=0, atol=3e-6)
        if mode == "eval":
            torch.manual_seed(5)
            assert torch.equal(torch.get_rng_state(), state)  # neither drew anything
    clean = tm.eval().get_embed(list(shape))
    tm.train()
    torch.manual_seed(5)
    assert not torch.allclose(tm.get_embed(list(shape)), clean, atol=1e-3)  # training did augment


def test_aug_draws_block_is_dinov3s_call_per_block_and_forward_shares_one():
    """``aug_draws=block``: block i's table is the i-th successive draw (DINOv3's ViT calls its RoPE module in every
    block); ``forward``: one draw for every block (timm's Eva). A new forward draws again; evaluation never."""
    periods, aug, shape = {"base": 100.0}, {"rescale": 2.0, "jitter": 1.5}, (4, 8)
    tm = timm_module(periods, "separate", **aug).train()
    c = grid_coords(shape).double()
    x = torch.zeros(1, c.shape[0], H * D_HEAD, dtype=torch.float64)
    pe = ours(periods, "separate", depth=3, **aug).double().train()
    torch.manual_seed(2)
    pe.encode_tokens(x, c, shape)
    ours_blocks = [torch.cat(pe.tables(c, block=i, dtype=torch.float64), -1)[0] for i in range(3)]
    torch.manual_seed(2)
    grid = timm_sincos._build_grid(list(shape), grid_type="centered", dtype=torch.float64).flatten(0, -2)
    for i in range(3):
        sin_t, cos_t = tm._get_pos_embed_from_coords(timm_sincos._apply_coord_augs(grid, None, 1.5, 2.0))
        torch.testing.assert_close(ours_blocks[i], torch.cat([sin_t, cos_t], -1), rtol=0, atol=1e-12)
    assert not torch.allclose(ours_blocks[0], ours_blocks[1])
    shared = ours(periods, "separate", depth=3, aug_draws="forward", **aug).double().train()
    shared.encode_tokens(x, c, shape)
    first = [torch.cat(shared.tables(c, block=i, dtype=torch.float64), -1) for i in range(3)]
    assert all(torch.equal(first[0], t) for t in first[1:])
    shared.encode_tokens(x, c, shape)  # the next forward draws again
    assert not torch.allclose(first[0], torch.cat(shared.tables(c, dtype=torch.float64), -1))
    shared.eval().encode_tokens(x, c, shape)
    ev = torch.cat(shared.tables(c, dtype=torch.float64), -1)
    shared.encode_tokens(x, c, shape)
    assert torch.equal(ev, torch.cat(shared.tables(c, dtype=torch.float64), -1))


def test_backbone_forward_uses_one_draw_per_block_and_is_deterministic_per_seed():
    """In a backbone, training draws per forward (per block by default); the same seed gives the same output;
    evaluation is the unaugmented model; the model deep-copies and pickles after a training forward."""
    import copy
    import pickle

    grid = (4, 6)
    c = grid_coords(grid)
    x = torch.randn(2, c.shape[0], 128)
    m = build_backbone("vit-nano", pe="rope-dinov3", spatial_dims=2, grid=grid, rescale=2.0)
    m.train()
    torch.manual_seed(0)
    a = m(x, c, grid)
    torch.manual_seed(0)
    b = m(x, c, grid)
    c_ = m(x, c, grid)
    assert torch.equal(a, b) and not torch.allclose(a, c_)
    copy.deepcopy(m)
    pickle.loads(pickle.dumps(m))
    m.eval()
    plain = build_backbone("vit-nano", pe="rope-dinov3", spatial_dims=2, grid=grid)
    plain.load_state_dict(m.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(m(x, c, grid), plain.eval()(x, c, grid), rtol=0, atol=0)


def test_run_level_coord_aug_is_dinov3s_rescale_with_separate_normalisation():
    """``--coord-aug dinov3`` (pebench's CoordAugment, patch units) before rope-dinov3 with ``separate``: the
    normalised coordinates are DINOv3's times the drawn factor exactly (its box is DINOv3's)."""
    shape = (4, 8)
    c = grid_coords(shape).double()
    aug = CoordAugment(rescale=2.0).train()
    torch.manual_seed(4)
    ca = aug(c, 1, shape)[0]  # (N, 2)
    r = float((ca[1, 1] - ca[0, 1]) / (c[1, 1] - c[0, 1]))  # the drawn factor: x neighbours one cell apart
    pe = ours({"base": 100.0}, "separate").double().eval()
    pe.encode_tokens(torch.zeros(1, c.shape[0], H * D_HEAD, dtype=torch.float64), ca, shape)
    sin, cos = pe.tables(ca, dtype=torch.float64)
    tm = timm_module({"base": 100.0}, "separate")
    grid = timm_sincos._build_grid(list(shape), grid_type="centered", dtype=torch.float64).flatten(0, -2)
    sin_t, cos_t = tm._get_pos_embed_from_coords(grid * r)
    torch.testing.assert_close(sin[0], sin_t, rtol=0, atol=1e-12)
    torch.testing.assert_close(cos[0], cos_t, rtol=0, atol=1e-12)


# ------------------------------------------------------------------------------ video: the time axis
def _u(pe, coords, grid):
    """The normalised coords per axis, read back from the tables: angle of frequency 0 (period 1) / (2 pi)."""
    pe.encode_tokens(torch.zeros(1, coords.shape[0], pe.dim, dtype=torch.float64), coords, grid)
    ang = pe.layers[0].angles(coords, 1, torch.float64)[0, 0]  # (N, 3F)
    return ang[:, ::pe.n_freq] / (2 * math.pi)  # (N, 3): k = 0 of each axis


@pytest.mark.parametrize("mode", MODES)
def test_video_time_is_normalised_by_its_frame_count_in_every_mode(mode):
    pe = build_pe("rope-dinov3", dim=96, num_heads=2, depth=1, spatial_dims=3, grid=(4, 3, 5),
                  normalize_coords=mode).double()
    assert pe.n_freq == 8  # d = 48: 48 // 6
    for grid in ((4, 3, 5), (2, 6, 4), (1, 4, 4)):
        c = grid_coords(grid).double()
        u = _u(pe, c, grid)
        T, Hh, W = grid
        den = {"separate": (Hh, W), "min": (min(Hh, W),) * 2, "max": (max(Hh, W),) * 2}[mode]
        want = torch.stack([2 * (c[:, 0] + 0.5) / T - 1, 2 * (c[:, 1] + 0.5) / den[0] - 1,
                            2 * (c[:, 2] + 0.5) / den[1] - 1], -1)
        torch.testing.assert_close(u, want, rtol=0, atol=1e-12)
        if T == 1:
            assert (u[:, 0] == 0).all()  # a single frame: no temporal rotation


@pytest.mark.parametrize("mode", MODES)
def test_video_is_relative_in_t_on_a_fixed_grid_and_not_across_clip_lengths(mode):
    grid = (4, 3, 3)
    c = grid_coords(grid).double()
    torch.manual_seed(0)
    m = build_backbone("vit-nano", pe="rope-dinov3", spatial_dims=3, grid=grid, normalize_coords=mode).double().eval()
    x = torch.randn(2, c.shape[0], 128, dtype=torch.float64)
    with torch.no_grad():
        y0 = m(x, c, grid)
        y1 = m(x, c + torch.tensor([1.75, 0.0, 0.0], dtype=torch.float64), grid)  # t only, same clip length
        torch.testing.assert_close(y1, y0, rtol=1e-9, atol=1e-9)
    # the same two frames, one apart, in a clip of 2 vs 4 frames: different rotations between them
    pe = m.pe
    pair = torch.tensor([[0.0, 1.0, 1.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    turns = []
    for T in (2, 4):
        pe.encode_tokens(torch.zeros(1, 2, 128, dtype=torch.float64), pair, (T, 3, 3))
        ang = pe.layers[0].angles(pair, 1, torch.float64)[0, 0]
        turns.append(ang[1] - ang[0])
    assert not torch.allclose(turns[0], turns[1])
    torch.testing.assert_close(turns[0], 2 * turns[1])  # 4 pi / (T P_k): half the turn at twice the frames


def test_rescale_is_spatial_only_and_shift_jitter_reach_time():
    pe = build_pe("rope-dinov3", dim=96, num_heads=2, depth=1, spatial_dims=3, grid=(4, 4, 4), rescale=2.0)
    pe = pe.double().train()
    grid = (4, 4, 4)
    c = grid_coords(grid).double()
    u_train = _u(pe, c, grid)
    u_eval = _u(pe.eval(), c, grid)
    torch.testing.assert_close(u_train[:, 0], u_eval[:, 0], rtol=0, atol=1e-14)
    assert not torch.allclose(u_train[:, 1:], u_eval[:, 1:])
    r = u_train[:, 1:] / u_eval[:, 1:]
    torch.testing.assert_close(r, r[:1].expand_as(r))  # one factor for both spatial axes
    pe = build_pe("rope-dinov3", dim=96, num_heads=2, depth=1, spatial_dims=3, grid=grid, shift=0.2,
                  jitter=1.5).double().train()
    assert not torch.allclose(_u(pe, c, grid)[:, 0], u_eval[:, 0])


# ------------------------------------------------------------------------------ grids, prefix tokens, card
def test_not_invariant_across_grid_sizes():
    """Relative on one grid, but the rotation between two neighbours shrinks as the grid grows."""
    pe = ours({"base": 100.0}, "separate").double()
    pair = torch.tensor([[1.0, 1.0], [1.0, 2.0]], dtype=torch.float64)
    turns = []
    for grid in ((4, 4), (8, 8)):
        pe.encode_tokens(torch.zeros(1, 2, H * D_HEAD, dtype=torch.float64), pair, grid)
        ang = pe.layers[0].angles(pair, 1, torch.float64)[0, 0]
        turns.append(ang[1] - ang[0])
    torch.testing.assert_close(turns[0], 2 * turns[1])


def test_layer_on_its_own_uses_the_extent_of_its_coords():
    """Called without encode_tokens (or with other coords), a layer normalises by the grid its coords span:
    for canonical coords that is the grid itself."""
    shape = (4, 8)
    c = grid_coords(shape).double()
    q, k = torch.randn(2, 2, H, c.shape[0] + 1, D_HEAD, dtype=torch.float64)
    fresh = ours({"base": 100.0}, "max", P=1).double()
    alone = fresh.layer(1).qk(q, k, None, c)
    fwd = ours({"base": 100.0}, "max", P=1).double()
    fwd.encode_tokens(torch.zeros(1, c.shape[0], H * D_HEAD, dtype=torch.float64), c, shape)
    for a, b in zip(alone, fwd.layer(1).qk(q, k, None, c)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    fwd.encode_tokens(torch.zeros(1, c.shape[0], H * D_HEAD, dtype=torch.float64), c, (16, 16))  # another grid
    assert not torch.allclose(fwd.layer(1).qk(q, k, None, c)[0], alone[0])
    assert torch.equal(fwd.layer(1).qk(q, k, None, c.clone())[0], alone[0])  # other coords: their own extent


def test_bench_card_lists_and_probes_it():
    from pebench.cli.commands.card import card_rows

    (label, card), = card_rows(["rope-dinov3"], grid=4, samples=1)
    assert label == "rope-dinov3"
    assert card["shift"] < 1e-5 and card["rot90"] > 1e-2  # relative on the grid, not rotation invariant
    assert "image" in get_pe_class("rope-dinov3").modalities


# ------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("kw,msg", [({"grid": None}, "training grid"), ({"min_period": 1.0}, "both"),
                                    ({"normalize_coords": "mean"}, "normalize_coords"), ({"jitter": 0.5}, "jitter"),
                                    ({"aug_draws": "sample"}, "aug_draws"), ({"base": 1.0}, "base"),
                                    ({"shift": -1.0}, "shift"), ({"max_period": 0.0, "min_period": 1.0}, "max_period")])
def test_mistakes_are_one_line_peconfigerrors(kw, msg):
    args = {"dim": 32, "num_heads": 2, "depth": 1, "spatial_dims": 2, "grid": (4, 4), **kw}
    with pytest.raises(PEConfigError, match=msg) as e:
        build_pe("rope-dinov3", **args)
    assert "\n" not in str(e.value)
    assert "points" not in get_pe_class("rope-dinov3").modalities

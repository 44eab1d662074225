"""Exactness tests for the per-layer geometry measures (docs/architecture.md §4): SSDC and EED.

References are computed independently in numpy/scipy (``scipy.stats.spearmanr`` over the i<j
pairs, ``np.linalg.eigvalsh(np.cov(X.T))``). The DDP test spawns 2 gloo processes on CPU.
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from ddp_support import free_port

from pebench.analysis import (
    EEDMetric,
    LayerwiseGeometry,
    SSDCMetric,
    average_ranks,
    eed,
    eed_from_moments,
    spearman,
    ssdc,
    ssdc_from_similarity,
)


# ----------------------------------------------------------------------------- helpers
def _grid(*shape: int) -> torch.Tensor:
    """Row-major integer grid coords ``(prod(shape), len(shape))`` as float32."""
    axes = [torch.arange(s, dtype=torch.float32) for s in shape]
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1).reshape(-1, len(shape))


def _tokens(coords: torch.Tensor, batch: int, dim: int, seed: int, signal: float = 1.0) -> torch.Tensor:
    """Random tokens ``(B, N, D)`` with a smooth spatial component so SSDC is non-trivial."""
    g = torch.Generator().manual_seed(seed)
    n, p = coords.shape
    w = torch.randn(p, dim, generator=g) * 0.4
    spatial = torch.sin(coords @ w + torch.rand(dim, generator=g) * 6.28)  # (N, D)
    return torch.randn(batch, n, dim, generator=g) + signal * spatial


def _ref_ssdc(tokens: torch.Tensor, coords: torch.Tensor, distance: str) -> float:
    """Independent numpy/scipy SSDC."""
    from scipy.stats import spearmanr  # imported lazily: keeps the spawned DDP workers light
    t = tokens.double().numpy()
    c = coords.double().numpy()
    z = t / np.linalg.norm(t, axis=-1, keepdims=True)
    s = np.mean(z @ np.transpose(z, (0, 2, 1)), axis=0)  # (N, N)
    diff = c[:, None, :] - c[None, :, :]
    d = np.abs(diff).sum(-1) if distance == "l1" else np.sqrt((diff ** 2).sum(-1))
    iu = np.triu_indices(c.shape[0], k=1)
    return float(spearmanr(s[iu], -d[iu])[0])


def _ref_eed(x: np.ndarray) -> float:
    lam = np.clip(np.linalg.eigvalsh(np.cov(x.T)), 0.0, None)
    p = lam / lam.sum()
    p = p[p > 0]
    return float(100.0 * np.exp(-(p * np.log(p)).sum()) / x.shape[1])


# ----------------------------------------------------------------------------- ranks
def test_average_ranks_matches_rankdata():
    from scipy.stats import rankdata
    g = torch.Generator().manual_seed(0)
    cases = [
        torch.tensor([3.0, -0.0, 0.0, -1.0, 2.0, 2.0, -5.0, 7.0, 7.0, 7.0, -1e-300, 1e300, -1e300]),
        torch.round(torch.randn(2000, generator=g, dtype=torch.float64), decimals=1),  # many ties
        torch.randn(3000, generator=g, dtype=torch.float64),  # no ties, sort path
        torch.randint(-7, 7, (1000,), generator=g),  # int, counting path
        torch.randint(-7, 7, (1000,), generator=g) * 10**13,  # int, wide range: sort path
        torch.randint(0, 5, (30, 40), generator=g).float(),  # integer-valued float, 2-D
        torch.tensor([True, False, True]),
    ]
    for x in cases:
        got = average_ranks(x)
        assert got.dtype == torch.float64 and got.shape == (x.numel(),)
        np.testing.assert_array_equal(got.numpy(), rankdata(x.reshape(-1).numpy(), method="average"))
    assert torch.isnan(average_ranks(torch.tensor([1.0, float("nan"), 2.0]))).all()


def test_spearman_matches_scipy_and_constant_is_nan():
    from scipy.stats import spearmanr
    g = torch.Generator().manual_seed(1)
    x = torch.round(torch.randn(500, generator=g, dtype=torch.float64), decimals=1)
    y = x + torch.round(torch.randn(500, generator=g, dtype=torch.float64), decimals=1)
    assert abs(float(spearman(x, y)) - spearmanr(x.numpy(), y.numpy())[0]) < 1e-12
    assert math.isnan(float(spearman(x, torch.ones(500))))
    with pytest.raises(ValueError):
        spearman(x, y[:10])


# ----------------------------------------------------------------------------- SSDC
@pytest.mark.parametrize(
    "coords_name, distance",
    [("grid8x8", "l1"), ("grid8x8", "euclidean"), ("grid4x4x4", "l1"), ("grid4x4x4", "euclidean"),
     ("random2d", "l1"), ("random2d", "euclidean"), ("random3d", "l1")],
)
@pytest.mark.parametrize("signal", [0.0, 1.0])
def test_ssdc_matches_scipy(coords_name, distance, signal):
    coords = {
        "grid8x8": _grid(8, 8),
        "grid4x4x4": _grid(4, 4, 4),
        "random2d": torch.rand(64, 2, generator=torch.Generator().manual_seed(2)) * 8,
        "random3d": torch.rand(50, 3, generator=torch.Generator().manual_seed(3)) * 4,
    }[coords_name]
    tokens = _tokens(coords, batch=3, dim=24, seed=4, signal=signal)
    got = ssdc(tokens, coords, distance)
    ref = _ref_ssdc(tokens, coords, distance)
    assert isinstance(got, float)
    assert abs(got - ref) < 1e-6, (got, ref)
    if signal > 0:
        assert got > 0.2  # spatially smooth tokens: similarity decays with distance


def test_ssdc_input_forms_and_float_round_off_ties():
    coords = _grid(8, 8)
    tokens = _tokens(coords, batch=3, dim=16, seed=5)
    ref = _ref_ssdc(tokens, coords, "l1")
    # (B, N, p) coords identical across the batch, float64 tokens, a sub-patch offset.
    assert abs(ssdc(tokens.double(), coords.expand(3, -1, -1)) - ref) < 1e-6
    assert abs(ssdc(tokens, coords + 0.5) - ref) < 1e-6
    # Non-integer coords: 0.1*k has round-off in the differences; ties must survive (the
    # L1 ranks of 0.1*grid equal those of grid).
    assert abs(ssdc(tokens, coords.double() * 0.1) - ref) < 1e-6
    ref_e = _ref_ssdc(tokens, coords, "euclidean")
    assert abs(ssdc(tokens, coords.double() * 0.1, "euclidean") - ref_e) < 1e-6
    # (N, D) tokens = batch of one.
    assert abs(ssdc(tokens[0], coords) - _ref_ssdc(tokens[:1], coords, "l1")) < 1e-6
    # From a precomputed similarity.
    z = torch.nn.functional.normalize(tokens.double(), dim=-1)
    s = (z @ z.transpose(1, 2)).mean(0)
    assert abs(float(ssdc_from_similarity(s, coords)) - ref) < 1e-6


def test_ssdc_nan_and_validation():
    coords = _grid(4, 4)
    same = torch.zeros(2, 16, 8)
    same[..., 3] = 2.5  # every token the same axis vector: S is exactly constant (all 1)
    assert math.isnan(ssdc(same, coords))
    assert math.isnan(float(ssdc_from_similarity(torch.full((16, 16), 0.3), coords)))
    assert math.isnan(float(ssdc_from_similarity(torch.randn(16, 16), torch.zeros(16, 2))))
    tokens = torch.randn(2, 16, 8)
    with pytest.raises(ValueError, match="distance"):
        ssdc(tokens, coords, "cosine")
    with pytest.raises(ValueError, match="N ="):
        ssdc(tokens, _grid(3, 3))
    with pytest.raises(ValueError):
        ssdc(torch.randn(16), coords)
    with pytest.raises(ValueError):
        ssdc(tokens, torch.zeros(16))
    with pytest.raises(ValueError):
        ssdc_from_similarity(torch.randn(16, 15), coords)


# ----------------------------------------------------------------------------- EED
def test_eed_matches_numpy():
    g = torch.Generator().manual_seed(6)
    scales = torch.logspace(0, -2, 16, dtype=torch.float64)
    x = torch.randn(500, 16, generator=g, dtype=torch.float64) * scales + 3.0
    assert abs(eed(x) - _ref_eed(x.numpy())) < 1e-6
    xb = torch.randn(4, 50, 32, generator=g) @ torch.randn(32, 32, generator=g)
    assert abs(eed(xb) - _ref_eed(xb.reshape(-1, 32).double().numpy())) < 1e-6
    # moments version
    xd = x
    got = eed_from_moments(xd.sum(0), xd.T @ xd, xd.shape[0])
    assert abs(float(got) - _ref_eed(x.numpy())) < 1e-6


def test_eed_sanity_cases():
    g = torch.Generator().manual_seed(7)
    iso = torch.randn(50_000, 8, generator=g, dtype=torch.float64)
    assert eed(iso) > 99.5
    v = torch.randn(1, 12, generator=g, dtype=torch.float64)
    rank1 = torch.randn(400, 1, generator=g, dtype=torch.float64) * v + 1.0  # (M, D), rank-1 cov
    n_eff = eed(rank1) * 12 / 100.0
    assert abs(n_eff - 1.0) < 1e-6
    assert math.isnan(eed(torch.ones(10, 4)))  # zero covariance
    assert math.isnan(float(eed_from_moments(torch.zeros(4), torch.zeros(4, 4), 1)))
    with pytest.raises(ValueError):
        eed(torch.randn(1, 4))
    with pytest.raises(ValueError):
        eed(torch.randn(4))
    with pytest.raises(ValueError):
        eed_from_moments(torch.zeros(4), torch.zeros(3, 3), 10)


def _ref_top1(x: np.ndarray) -> float:
    lam = np.clip(np.linalg.eigvalsh(np.cov(x.T)), 0.0, None)
    return float(lam.max() / lam.sum())


def test_eed_top1_share_matches_numpy_eigvalsh():
    from pebench.analysis.eed import eed_top1_share, top1_share_from_moments

    g = torch.Generator().manual_seed(11)
    scales = torch.tensor([10.0, 3.0, 1.0, 1.0, 0.5, 0.1], dtype=torch.float64)
    x = torch.randn(400, 6, generator=g, dtype=torch.float64) * scales + 2.0
    ref = _ref_top1(x.numpy())
    assert abs(eed_top1_share(x) - ref) < 1e-12
    assert 0.8 < ref < 0.95  # one direction dominates: EED% is small
    assert abs(float(top1_share_from_moments(x.sum(0), x.T @ x, x.shape[0])) - ref) < 1e-9
    m = EEDMetric(6)
    for chunk in x.split([150, 250]):
        m.update(chunk)
    assert abs(float(m.compute_top1_share()) - ref) < 1e-9
    iso = torch.randn(20_000, 8, generator=g, dtype=torch.float64)
    assert abs(eed_top1_share(iso) - 1 / 8) < 0.02
    assert math.isnan(eed_top1_share(torch.ones(10, 4)))


# ----------------------------------------------------------------------------- taps
def test_forward_intermediates_attn_in_and_block_out_taps():
    from pebench.models import build_backbone
    from pebench.models.vit import TAPS

    torch.manual_seed(0)
    vit = build_backbone("vit-nano", pe="ape", spatial_dims=2, grid=(3, 3), class_token=True).eval()
    x = torch.randn(2, 9, 128)
    coords = _grid(3, 3)
    with torch.no_grad():
        a = vit.forward_intermediates(x, coords, (3, 3), tap="attn_in", return_prefix=True)
        b = vit.forward_intermediates(x, coords, (3, 3), tap="block_out", return_prefix=True)
        # independent loop over the blocks' submodules (pre-norm: x + attn(norm1 x), then + mlp(norm2 x))
        h = vit.pe.encode_tokens(x, coords, (3, 3))
        h = torch.cat([vit.cls_token.expand(2, -1, -1), h], 1)
        ref_in, ref_out = [], []
        for i, blk in enumerate(vit.blocks):
            ref_in.append(blk.norm1(h))
            h = h + blk.attn(blk.norm1(h), coords, vit.pe.layer(i))
            h = h + blk.mlp(blk.norm2(h))
            ref_out.append(h)
        patches = vit.forward_intermediates(x, coords, (3, 3), tap="attn_in")
        normed = vit.forward_intermediates(x, coords, (3, 3), tap="block_out", norm=True)
    assert TAPS == ("attn_in", "block_out") and len(a) == len(b) == vit.depth == 4
    for l in range(4):
        torch.testing.assert_close(a[l], ref_in[l])
        torch.testing.assert_close(b[l], ref_out[l])
        assert a[l].shape == (2, 10, 128) and patches[l].shape == (2, 9, 128)
        torch.testing.assert_close(patches[l], ref_in[l][:, 1:])
        torch.testing.assert_close(normed[l], vit.norm(ref_out[l])[:, 1:])
    for l in range(1, 4):  # attn_in of block l is LN1 of block l-1's output
        torch.testing.assert_close(a[l], vit.blocks[l].norm1(b[l - 1]))
    assert vit.tap_layers("attn_in", 4) == [0, 1, 2, 3] and vit.tap_layers("block_out", 4) == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="unknown tap"):
        vit.forward_intermediates(x, coords, (3, 3), tap="mlp_out")
    with pytest.raises(ValueError, match="norm"):
        vit.forward_intermediates(x, coords, (3, 3), tap="attn_in", norm=True)


# ----------------------------------------------------------------------------- metrics
def test_metrics_match_functional_over_batches():
    coords = _grid(6, 6)
    tokens = _tokens(coords, batch=7, dim=20, seed=8)
    sm, em = SSDCMetric(coords), EEDMetric(20)
    for chunk in tokens.split([3, 2, 2]):
        sm.update(chunk)
        em.update(chunk)
    assert int(sm.count) == 7 and int(em.count) == 7 * 36
    assert abs(float(sm.compute()) - ssdc(tokens, coords)) < 1e-9
    assert abs(float(em.compute()) - eed(tokens)) < 1e-6
    sm_e = SSDCMetric(coords.expand(2, -1, -1), distance="euclidean")
    sm_e.update(tokens[:4])
    sm_e.update(tokens[4])  # (N, D) = one sample
    assert abs(float(sm_e.compute()) - ssdc(tokens[:5], coords, "euclidean")) < 1e-9
    sm.reset()
    assert int(sm.count) == 0 and float(sm.sim_sum.abs().sum()) == 0.0

    layers = [tokens, tokens * 2 + 1, _tokens(coords, batch=7, dim=20, seed=9, signal=0.0)]
    geo = LayerwiseGeometry(3, coords, 20)
    for sl in (slice(0, 4), slice(4, 7)):
        geo.update([t[sl] for t in layers])
    out = geo.compute()
    assert set(out) == {"ssdc", "eed_percent", "eed_top1_share"}
    for i, t in enumerate(layers):
        assert abs(out["ssdc"][i] - ssdc(t, coords)) < 1e-9
        assert abs(out["eed_percent"][i] - eed(t)) < 1e-6
        assert abs(out["eed_top1_share"][i] - _ref_top1(t.reshape(-1, 20).double().numpy())) < 1e-9

    with pytest.raises(ValueError):
        sm.update(torch.randn(2, 35, 20))
    with pytest.raises(ValueError):
        em.update(torch.randn(2, 36, 19))
    with pytest.raises(ValueError):
        geo.update(layers[:2])
    with pytest.raises(ValueError):
        SSDCMetric(coords, distance="chebyshev")
    with pytest.raises(ValueError):
        EEDMetric(0)


# ----------------------------------------------------------------------------- DDP
_DDP_DIM = 12
_DDP_SHARDS = (5, 2)  # uneven: samples [0:5] on rank 0, [5:7] on rank 1


def _ddp_data():
    coords = _grid(5, 5)
    return _tokens(coords, batch=sum(_DDP_SHARDS), dim=_DDP_DIM, seed=10), coords


def _ddp_worker(rank: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        tokens, coords = _ddp_data()
        start = 0 if rank == 0 else _DDP_SHARDS[0]
        shard = tokens[start:start + _DDP_SHARDS[rank]]
        sm, em = SSDCMetric(coords), EEDMetric(_DDP_DIM)
        geo = LayerwiseGeometry(2, coords, _DDP_DIM)
        for chunk in shard.split(3):
            sm.update(chunk)
            em.update(chunk)
            geo.update([chunk, chunk.flip(-1) * 3])
        res = {"ssdc": float(sm.compute()), "eed": float(em.compute()), "geo": geo.compute(),
               "local_ssdc": ssdc(shard, coords), "local_eed": eed(shard)}
        torch.save(res, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.ddp
@pytest.mark.timeout(180)
def test_ddp_reduction_is_exact(tmp_path):
    mp.spawn(_ddp_worker, args=(free_port(), str(tmp_path)), nprocs=2, join=True)
    tokens, coords = _ddp_data()
    want_ssdc, want_eed = ssdc(tokens, coords), eed(tokens)
    want_geo_ssdc = [want_ssdc, ssdc(tokens.flip(-1) * 3, coords)]
    want_geo_eed = [want_eed, eed(tokens.flip(-1) * 3)]
    for rank in range(2):
        res = torch.load(tmp_path / f"rank{rank}.pt")
        assert abs(res["ssdc"] - want_ssdc) < 1e-6
        assert abs(res["eed"] - want_eed) < 1e-6
        np.testing.assert_allclose(res["geo"]["ssdc"], want_geo_ssdc, rtol=0, atol=1e-6)
        np.testing.assert_allclose(res["geo"]["eed_percent"], want_geo_eed, rtol=0, atol=1e-6)
        # the shard-local values differ, so the agreement above comes from the sync
        assert abs(res["local_ssdc"] - want_ssdc) > 1e-4
        assert abs(res["local_eed"] - want_eed) > 1e-4


# ----------------------------------------------------------------------------- timing
def test_timing_large_n_ssdc_and_d768_eed():
    """Not a benchmark: N = 4096 SSDC and D = 768 EED run; times are printed (``-s``)."""
    from pebench.analysis.ssdc import cosine_similarity_sum

    coords = _grid(64, 64)  # N = 4096, 8,386,560 pairs
    tokens = _tokens(coords, batch=2, dim=16, seed=11)
    x = torch.randn(4096, 768, generator=torch.Generator().manual_seed(12))
    # One intra-op thread: on a shared 2-core box, multi-threaded LAPACK (eigvalsh) can stall
    # for seconds when the cores are busy; one thread gives reproducible numbers.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        # ssdc() == ssdc_from_similarity(cosine_similarity_sum / B); timed in its two phases.
        t0 = time.perf_counter()
        s_sum, b = cosine_similarity_sum(tokens)
        t1 = time.perf_counter()
        value = float(ssdc_from_similarity(s_sum / b, coords))
        t2 = time.perf_counter()
        e = eed(x)
        t3 = time.perf_counter()
    finally:
        torch.set_num_threads(threads)
    print(f"\n[timing, 1 thread] ssdc N=4096 (B=2, D=16): similarity {t1 - t0:.3f} s + "
          f"ranks/correlation {t2 - t1:.3f} s; eed M=4096 D=768: {t3 - t2:.3f} s")
    assert math.isfinite(value) and value > 0
    assert 0 < e <= 100

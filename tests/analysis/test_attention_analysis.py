"""The attention analysis (issue #45): the probabilities it reads are those each PE's attention computes,
checked in float64 against softmax(q k^T * scale + bias) written out independently (rotations from the
numpy references of tests/support/rotation_refs.py, ALiBi's bias from its published formula), and against
the block's own attention output (probs @ v); entropy and mean attention distance against numpy loops;
and the statistics' invariance to a global coordinate offset for an exactly relative PE."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from rotation_refs import rotated_qk

import pebench.datamodules.synthetic.shapes  # noqa: F401  (registers the synthetic sets)
from pebench.analysis.attention import AttentionStats, attention_maps, attention_stats
from pebench.analysis.coord_robustness import CoordPerturbation
from pebench.analysis.evaluators import run_analyses
from pebench.analysis.registry import select_analyses
from pebench.datamodules import get_datamodule_class
from pebench.models.attention import attend
from pebench.tasks.classification import ClassificationTask


def _task(pe: str, side: int = 16, dtype=torch.float64, class_token: bool = False, **kw) -> ClassificationTask:
    torch.manual_seed(0)
    task = ClassificationTask("image", 8, pe=pe, train_grid=(side // 4, side // 4), class_token=class_token,
                              pool="cls" if class_token else "mean", **kw)
    return task.to(dtype).eval()


def _images(n: int = 2, side: int = 16, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 3, side, side, generator=g).to(dtype)


def _block_inputs(task, x):
    """Each block's attention input norm1(x_l) (B, P + N, D), the coords, via the backbone's own tap."""
    tb = task.tokenize(x)
    with torch.no_grad():
        feats = task.backbone.forward_intermediates(tb.x, tb.coords, tb.grid, tb.mask, tap="attn_in",
                                                    return_prefix=True)
    return feats, tb.coords


def _naive_probs(task, layer: int, xin: torch.Tensor, coords: torch.Tensor) -> np.ndarray:
    """softmax(q' k'^T * scale + bias) in numpy: q', k' from the rotation references, ALiBi's bias from
    -2^(-8h/H) * ||r_i - r_j||."""
    attn = task.backbone.blocks[layer].attn
    pe = task.backbone.pe
    B, T, _ = xin.shape
    H, d = attn.num_heads, attn.head_dim
    with torch.no_grad():
        q, k, _v = attn.qkv(xin).reshape(B, T, 3, H, d).permute(2, 0, 3, 1, 4).unbind(0)
    P = task.backbone.num_prefix_tokens
    if pe.name in ("rope-axial", "comrope"):
        q, k = rotated_qk(pe, layer, q, k, coords, P)
    qn, kn = q.detach().numpy(), k.detach().numpy()
    logits = np.einsum("bhid,bhjd->bhij", qn, kn) * attn.scale
    if pe.name == "alibi":
        c = coords.detach().numpy()
        dist = np.sqrt(((c[:, None, :] - c[None, :, :]) ** 2).sum(-1))  # (N, N)
        slopes = np.array([2.0 ** (-8.0 * h / H) for h in range(1, H + 1)])
        logits[:, :, P:, P:] += -slopes[None, :, None, None] * dist[None, None]
    logits -= logits.max(-1, keepdims=True)
    e = np.exp(logits)
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("pe", ["none", "sincos", "rope-axial", "comrope", "alibi"])
def test_probabilities_match_a_naive_float64_reference(pe):
    task = _task(pe)
    x = _images()
    maps = attention_maps(task, x)
    feats, coords = _block_inputs(task, x)
    for layer, calls in enumerate(maps):
        assert len(calls) == 1
        probs, _c, mask = calls[0]
        assert probs.dtype == torch.float64 and mask is None
        np.testing.assert_allclose(probs.numpy(), _naive_probs(task, layer, feats[layer], coords), rtol=1e-10,
                                   atol=1e-12)


@pytest.mark.parametrize("pe", ["rope-axial", "alibi", "lookhere", "pape"])
def test_probabilities_times_v_are_the_attention_output(pe):
    """What the model's attention returns (attend, whatever implementation it picks) is probs @ v."""
    task = _task(pe)
    x = _images()
    maps = attention_maps(task, x)
    feats, coords = _block_inputs(task, x)
    for layer, calls in enumerate(maps):
        attn = task.backbone.blocks[layer].attn
        xin = feats[layer]
        B, T, _ = xin.shape
        with torch.no_grad():
            q, k, v = attn.qkv(xin).reshape(B, T, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
            out, _used = attend(q, k, v, xin, task.backbone.pe.layer(layer), coords, None, scale=attn.scale)
        torch.testing.assert_close(calls[0][0] @ v, out, rtol=1e-10, atol=1e-12)


def test_entropy_and_distance_match_numpy_loops_with_a_class_token():
    task = _task("rope-axial", class_token=True)
    x = _images()
    maps = attention_maps(task, x)
    coords = task.tokenize(x).coords.numpy()  # (N, 2)
    stats = AttentionStats(task.backbone.depth, task.backbone.num_heads, prefix=1)
    for layer, ((probs, c, mask),) in enumerate(maps):
        stats.update(layer, probs, c, mask)
    res = stats.compute()
    for layer, ((probs, _c, _m),) in enumerate(maps):
        p = probs.numpy()
        B, H, T, _ = p.shape
        for h in range(H):
            ent, dist = [], []
            for b in range(B):
                for i in range(T):
                    ent.append(-sum(v * math.log(v) for v in p[b, h, i] if v > 0))
                    if i >= 1:  # patch queries; the class token's key has no position
                        w = p[b, h, i, 1:]
                        d = [math.dist(coords[i - 1], coords[j]) for j in range(T - 1)]
                        dist.append(float(np.dot(w, d) / w.sum()))
            assert res["entropy"][layer][h] == pytest.approx(np.mean(ent), rel=1e-12)
            assert res["distance"][layer][h] == pytest.approx(np.mean(dist), rel=1e-12)
        assert res["max_entropy"][layer] == pytest.approx(math.log(T), rel=1e-12)
        assert 0 < res["entropy_mean"][layer] <= math.log(T) + 1e-12


def test_padding_keys_get_no_attention_and_padded_queries_are_not_counted():
    torch.manual_seed(0)
    probs = torch.softmax(torch.randn(1, 2, 4, 4, dtype=torch.float64), -1)
    mask = torch.tensor([[True, True, True, False]])
    probs = probs.masked_fill(~mask[:, None, None, :], 0.0)
    probs = probs / probs.sum(-1, keepdim=True)
    coords = torch.tensor([[0.0, 0.0], [0.0, 1.0], [3.0, 4.0], [100.0, 100.0]], dtype=torch.float64)
    s = AttentionStats(1, 2, prefix=0)
    s.update(0, probs, coords, mask)
    r = s.compute()
    p = probs[0, :, :3, :3].numpy()
    d = torch.cdist(coords[:3], coords[:3]).numpy()
    for h in range(2):
        assert r["distance"][0][h] == pytest.approx(float(np.mean((p[h] * d).sum(-1))), rel=1e-12)
        assert r["entropy"][0][h] == pytest.approx(float(np.mean(-(p[h] * np.log(p[h])).sum(-1))), rel=1e-12)
    assert r["max_entropy"][0] == pytest.approx(math.log(3), rel=1e-12)


def test_relative_pe_statistics_are_invariant_to_a_global_offset_and_absolute_ones_are_not():
    x = _images()
    for pe, invariant in (("rope-axial", True), ("alibi", True), ("sincos", False)):
        task = _task(pe)
        clean = attention_maps(task, x)
        task.backbone.coord_aug = CoordPerturbation("offset", 1.0, torch.Generator().manual_seed(0))
        moved = attention_maps(task, x)
        task.backbone.coord_aug = None
        diff = max(float((a[0][0] - b[0][0]).abs().max()) for a, b in zip(clean, moved))
        assert (diff < 1e-9) == invariant, (pe, diff)


def test_attention_analysis_runs_when_named_and_writes_its_plot(tmp_path):
    dm = get_datamodule_class("shapes")(batch_size=8, val_size=8, train_size=8, resolution=16)
    task = _task("rope-axial", dtype=torch.float32)
    out = run_analyses(task, dm, "attention", tmp_path, {"seed": 0, "analysis_options": {"attention_probe_size": 4}})
    att = out["attention"]
    assert att["probe_size"] == 4 and att["layers"] == [0, 1, 2, 3] and att["distance_unit"] == "patch"
    assert len(att["entropy"]) == 4 and all(len(r) == task.backbone.num_heads for r in att["entropy"])
    assert all(0 < v <= math.log(16) + 1e-6 for v in att["entropy_mean"])
    assert all(0 < v < math.dist((0, 0), (3, 3)) for v in att["distance_mean"])  # within the 4 x 4 grid
    assert (tmp_path / "attention.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert attention_stats(task, dm, probe_size=4) == att  # deterministic
    assert "attention" not in select_analyses("all", task.backbone.pe)[0]  # opt-in: not part of `all`

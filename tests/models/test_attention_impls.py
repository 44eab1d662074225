"""Every attention implementation of :func:`pebench.models.attention.attend` against a naive reference.

The reference writes ``softmax(q' k'^T * scale + bias + padding) v`` out with explicit tensors, where
``q', k'`` are what the PE's ``qk`` returns and ``bias`` is computed here: ALiBi's ``-m_h ||r_j - r_i||``
from its formula, the other bias PEs' from their dense ``bias`` (LookHere's is checked against the
official code in test_published_pes.py, PaPE naive's against the sdpa fold in test_pape.py). Flex
numerics use the uncompiled FlexAttention (float64 works there; its T x T scores do not matter for
numbers); one test compiles the kernel and checks that its memory is not quadratic.
"""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import flex_attention
from torch.profiler import ProfilerActivity, profile

from pebench.cli import main
from pebench.encodings import build_pe, list_pes
from pebench.encodings.alibi import alibi_slopes
from pebench.models import attention as attn_mod
from pebench.models.attention import (
    FLEX_MIN_TOKENS_CUDA,
    AttentionImplError,
    attend,
    bias_kind,
    check_forced_impl,
    check_impl_name,
    choose_impl,
)
from pebench.models.vit import ViTBackbone, attention_impls_used, set_attention_impl

H, d, N, B = 4, 8, 23, 2
CASES = [(pe, None) for pe in list_pes()] + [("pape", "naive")]


@pytest.fixture
def eager_flex(monkeypatch):
    """Numerics through uncompiled FlexAttention (fast to start, any dtype)."""
    monkeypatch.setattr(attn_mod, "_COMPILED_FLEX", flex_attention)


def _layer(pe: str, impl: str | None, prefix: int):
    torch.manual_seed(0)
    opts = {"impl": impl} if impl else {}
    m = build_pe(pe, dim=H * d, num_heads=H, depth=2, spatial_dims=2, num_prefix_tokens=prefix, grid=(4, 6),
                 **opts).double()
    return m.layer(1)


def _inputs(prefix: int, dtype=torch.float64, requires_grad: bool = False, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    T = N + prefix
    q, k, v = (torch.randn(B, H, T, d, generator=g, dtype=dtype) for _ in range(3))
    x = torch.randn(B, T, H * d, generator=g, dtype=dtype)
    coords = (torch.rand(B, N, 2, generator=g, dtype=dtype) * 6.0)  # arbitrary coords, not a raster
    key_mask = torch.ones(B, T, dtype=torch.bool)
    key_mask[1, -7:] = False  # padding in the second sequence
    if requires_grad:
        for t in (q, k, v, x):
            t.requires_grad_(True)
    return q, k, v, x, coords, key_mask


def _reference(q, k, v, x, layer, coords, key_mask, pe: str, prefix: int):
    """softmax(q' k'^T / sqrt(d) + bias + padding) v, written out."""
    qa, ka = layer.qk(q, k, x, coords)
    s = qa @ ka.transpose(-1, -2) * d ** -0.5  # (B, H, T, T)
    if pe == "alibi":
        r = coords.double()
        dist = ((r[:, None, :, :] - r[:, :, None, :]) ** 2).sum(-1).sqrt()  # (B, N, N)
        slopes = torch.tensor(alibi_slopes(H), dtype=torch.float64)
        bias = torch.zeros(B, H, N + prefix, N + prefix, dtype=torch.float64)
        bias[:, :, prefix:, prefix:] = -slopes[:, None, None] * dist[:, None]
        s = s + bias
    else:
        bias = layer.bias(coords)
        if bias is not None:
            s = s + bias.to(s.dtype)
    s = s.masked_fill(~key_mask[:, None, None, :], float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def _impls(pe: str, impl: str | None) -> list[str]:
    kind = bias_kind(_layer(pe, impl, 0))
    return {"none": ["dense", "sdpa", "flex"], "flex": ["dense", "flex"], "dense": ["dense"]}[kind]


@pytest.mark.parametrize("prefix", [0, 1])
@pytest.mark.parametrize("pe,impl", CASES)
def test_forward_matches_the_reference(pe, impl, prefix, eager_flex):
    q, k, v, x, coords, key_mask = _inputs(prefix)
    with torch.no_grad():
        ref = _reference(q, k, v, x, _layer(pe, impl, prefix), coords, key_mask, pe, prefix)
        for name in _impls(pe, impl):
            out, used = attend(q, k, v, x, _layer(pe, impl, prefix), coords, key_mask, scale=d ** -0.5, impl=name)
            assert used == name
            torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10, msg=f"{pe} {impl} {name}")


@pytest.mark.parametrize("pe,impl", CASES)
def test_gradients_match_the_reference(pe, impl):
    """dense and sdpa have a backward (flex has none on CPU): float64 gradients of q, k, v, x and the PE's
    parameters equal the reference's."""
    prefix = 1
    for name in [i for i in _impls(pe, impl) if i != "flex"]:
        grads = []
        for run in ("ref", name):
            q, k, v, x, coords, key_mask = _inputs(prefix, requires_grad=True)
            layer = _layer(pe, impl, prefix)
            w = torch.randn(B, H, N + prefix, d, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
            if run == "ref":
                out = _reference(q, k, v, x, layer, coords, key_mask, pe, prefix)
            else:
                out, _ = attend(q, k, v, x, layer, coords, key_mask, scale=d ** -0.5, impl=name)
            (out * w).sum().backward()
            grads.append([t.grad for t in (q, k, v, x)] + [p.grad for p in layer.parameters()])
        for a, b in zip(*grads):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10, msg=f"{pe} {impl} {name}")


@pytest.mark.parametrize("pe", ["alibi", "lookhere"])
def test_flex_float32_and_backbone(pe, eager_flex):
    """float32 flex vs the float64 reference, and a whole backbone forced to flex vs dense (eval)."""
    q, k, v, x, coords, key_mask = _inputs(1)
    with torch.no_grad():
        ref = _reference(q, k, v, x, _layer(pe, None, 1), coords, key_mask, pe, 1)
        layer = _layer(pe, None, 1).float()
        out, _ = attend(q.float(), k.float(), v.float(), x.float(), layer, coords.float(), key_mask,
                        scale=d ** -0.5, impl="flex")
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
    torch.manual_seed(0)
    bb = ViTBackbone(H * d, 2, H, build_pe(pe, dim=H * d, num_heads=H, depth=2, spatial_dims=2)).eval()
    xs, c = torch.randn(B, N, H * d), torch.rand(B, N, 2) * 6.0
    outs = {}
    with torch.no_grad():
        for name in ("dense", "flex"):
            set_attention_impl(bb, name)
            outs[name] = bb(xs, c, mask=key_mask[:, :N])
    torch.testing.assert_close(outs["flex"], outs["dense"], rtol=1e-5, atol=1e-5)
    assert attention_impls_used(bb) == {"eval": "dense,flex"}


@pytest.mark.parametrize("prefix", [0, 1])
def test_lookhere_flex_skips_tiles_behind_and_stays_exact(prefix, eager_flex):
    """LookHere's directional heads skip the 128 x 128 tiles whose keys all lie behind the queries;
    on a 20 x 24 raster (4 x 4 tiles) some are skipped and the outputs of real tokens equal dense."""
    from pebench.models import grid_coords
    T = 480 + prefix
    layer = _layer("lookhere", None, prefix)
    coords = grid_coords((20, 24)).double()
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(B, H, T, d, generator=g, dtype=torch.float64) for _ in range(3))
    x = torch.randn(B, T, H * d, generator=g, dtype=torch.float64)
    key_mask = torch.ones(B, T, dtype=torch.bool)
    key_mask[1, -50:] = False
    visible = layer.flex_block_visibility(coords, B, attn_mod.FLEX_BLOCK)
    if prefix:
        assert visible is None  # prefix tokens see and are seen by everyone: no skipping
    else:
        assert visible.shape == (B, H, 4, 4) and 0 < visible.float().mean() < 1
    with torch.no_grad():
        dense, _ = attend(q, k, v, x, layer, coords, key_mask, scale=d ** -0.5, impl="dense")
        flex, _ = attend(q, k, v, x, layer, coords, key_mask, scale=d ** -0.5, impl="flex")
    real = key_mask[:, :, None].expand(-1, -1, d).unsqueeze(1).expand(-1, H, -1, -1)  # padded queries: any output
    torch.testing.assert_close(flex[real], dense[real], rtol=1e-10, atol=1e-10)


def _peak_bytes(fn) -> int:
    """Peak of torch's CPU allocations during ``fn`` (profiler memory events, summed in time order)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    cur = peak = 0
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    for e in sorted(events, key=lambda e: e.start_ns()):
        cur += e.nbytes()
        peak = max(peak, cur)
    return peak


def test_compiled_flex_memory_is_linear_in_n():
    """Compiled FlexAttention for ALiBi in evaluation at T = 2048 allocates far less than one T x T
    float32 tensor (the dense path's bias alone is H T^2 floats), and matches dense."""
    T, heads = 2048, 2
    layer = build_pe("alibi", dim=heads * 16, num_heads=heads, depth=1, spatial_dims=2).layer(0)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, heads, T, 16, generator=g) for _ in range(3))
    x, coords = torch.randn(1, T, heads * 16, generator=g), torch.rand(T, 2, generator=g) * 40.0
    key_mask = torch.ones(1, T, dtype=torch.bool)
    key_mask[0, -100:] = False
    with torch.no_grad():
        out, used = attend(q, k, v, x, layer, coords, key_mask, scale=0.25)  # auto: CPU, eval, T >= 1024
        assert used == "flex"
        peak = _peak_bytes(lambda: attend(q, k, v, x, layer, coords, key_mask, scale=0.25))
        dense, _ = attend(q, k, v, x, layer, coords, key_mask, scale=0.25, impl="dense")
    assert peak < T * T * 4 / 4, f"{peak / 2 ** 20:.1f} MB"
    torch.testing.assert_close(out, dense, rtol=1e-4, atol=1e-4)


def test_choice_rule_and_impossible_choices():
    f32 = torch.float32
    assert choose_impl("auto", "none", "cpu", True, 4096, f32) == "sdpa"
    assert choose_impl("auto", "flex", "cpu", True, 4096, f32) == "dense"  # training on CPU: exact dense
    assert choose_impl("auto", "flex", "cpu", False, 4096, f32) == "flex"  # evaluation
    assert choose_impl("auto", "flex", "cpu", False, 64, f32) == "dense"  # small: no compilation
    assert choose_impl("auto", "flex", "cpu", False, 4096, torch.float64) == "dense"  # no float64 CPU kernel
    assert choose_impl("auto", "flex", "cuda", True, 64, f32) == "dense"  # small: the dense bias is faster
    assert choose_impl("auto", "flex", "cuda", True, FLEX_MIN_TOKENS_CUDA, f32) == "flex"
    assert choose_impl("auto", "flex", "cuda", False, FLEX_MIN_TOKENS_CUDA, f32) == "flex"
    assert choose_impl("auto", "flex", "cuda", True, FLEX_MIN_TOKENS_CUDA, f32, dropout_p=0.1) == "dense"
    assert choose_impl("auto", "dense", "cuda", False, 4096, f32) == "dense"  # PaPE naive
    with pytest.raises(AttentionImplError, match="cannot train on CPU"):
        choose_impl("flex", "flex", "cpu", True, 64, f32)
    with pytest.raises(AttentionImplError, match="cannot train on CPU"):
        check_forced_impl("flex", "cpu", training=True)
    check_forced_impl("flex", "cuda", training=True)
    with pytest.raises(AttentionImplError, match="sdpa has no bias"):
        choose_impl("sdpa", "flex", "cpu", False, 64, f32)
    with pytest.raises(AttentionImplError, match="dense T x T"):
        choose_impl("flex", "dense", "cpu", False, 64, f32)
    assert check_impl_name(" Flex ") == "flex"
    with pytest.raises(AttentionImplError, match="one of auto, dense, sdpa, flex"):
        check_impl_name("fast")
    q, k, v, x, coords, key_mask = _inputs(0, dtype=torch.float32, requires_grad=True)
    with pytest.raises(AttentionImplError):
        attend(q, k, v, x, _layer("alibi", None, 0).float(), coords, key_mask, scale=1.0, impl="flex")


def _run_args(out, *extra: str) -> list[str]:
    return ["run", "--dataset", "shapes", "--pe", "alibi", "--epochs", "1", "--batch-size", "8", "--resolution", "16",
            "--data-option", "train_size=8", "--data-option", "val_size=8", "--analyses", "none", "--no-progress-bar",
            "--accelerator", "cpu", "--out", str(out), *extra]


def test_run_records_the_implementation_and_refuses_flex_training_on_cpu(tmp_path, capsys):
    """``--attention-impl``: results.json's ``attention_impl`` is what ran per phase; ``flex`` cannot
    train on CPU, which is a one-line error (exit 2) before training; ``sdpa`` for a bias PE too."""
    assert main(_run_args(tmp_path / "flex", "--attention-impl", "flex")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot train on CPU" in err[0]
    assert not (tmp_path / "flex").exists() or not list((tmp_path / "flex").rglob("results.json"))
    assert main(_run_args(tmp_path / "sdpa", "--attention-impl", "sdpa")) == 2
    assert "sdpa has no bias" in capsys.readouterr().err
    assert main(_run_args(tmp_path / "auto")) == 0
    res = json.loads(next((tmp_path / "auto").rglob("results.json")).read_text())
    assert res["attention_impl"] == {"eval": "dense", "train": "dense"}  # 16 tokens: dense in both phases
    assert res["config"]["attention_impl"] == "auto"


def test_auto_falls_back_to_dense_when_flex_fails(monkeypatch):
    """A failing FlexAttention (e.g. no C++ compiler) is one warning under auto, then dense; forced flex raises."""
    def broken(*args, **kwargs):
        raise RuntimeError("no compiler")

    monkeypatch.setattr(attn_mod, "_COMPILED_FLEX", broken)
    monkeypatch.setattr(attn_mod, "FLEX_FAILURE", None)
    monkeypatch.setattr(attn_mod, "FLEX_MIN_TOKENS", 8)
    q, k, v, x, coords, key_mask = _inputs(0, dtype=torch.float32)
    layer = _layer("alibi", None, 0).float()
    with torch.no_grad():
        with pytest.raises(RuntimeError, match="no compiler"):
            attend(q, k, v, x, layer, coords, key_mask, scale=1.0, impl="flex")
        with pytest.warns(RuntimeWarning, match="FlexAttention failed"):
            out, used = attend(q, k, v, x, layer, coords, key_mask, scale=1.0)
        assert used == "dense" and attn_mod.FLEX_FAILURE.startswith("RuntimeError")
        assert attend(q, k, v, x, layer, coords, key_mask, scale=1.0)[1] == "dense"  # no second try
        dense, _ = attend(q, k, v, x, layer, coords, key_mask, scale=1.0, impl="dense")
    torch.testing.assert_close(out, dense, rtol=0, atol=0)


class _BackwardRaises(torch.autograd.Function):
    """Identity whose backward raises, as a compiled FlexAttention backward that fails to lower does."""

    @staticmethod
    def forward(ctx, t):
        return t.view_as(t)

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("LoweringException: backward not supported")


@pytest.mark.parametrize("backward_works", [True, False])
def test_auto_tries_flex_backward_before_training_on_it(monkeypatch, backward_works):
    """On CUDA auto trains bias PEs with flex; its compiled backward is built at the first backward(),
    outside attend's try. So attend runs one trial forward + backward per PE class first (no .grad
    accumulates); a failure there is one warning and the dense path for that class, not a crash at
    loss.backward(). Simulated on CPU: choose_impl forced to flex, flex = dense math (+ a failing backward)."""
    def fake_flex(q, k, v, layer_pe, coords, key_mask, scale):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mod.attention_mask(
            layer_pe.bias(coords), key_mask, q.dtype), scale=scale)
        return out if backward_works else _BackwardRaises.apply(out)

    monkeypatch.setattr(attn_mod, "_flex", fake_flex)
    monkeypatch.setattr(attn_mod, "choose_impl", lambda *a, **kw: "flex")
    monkeypatch.setattr(attn_mod, "FLEX_BACKWARD_FAILURES", {})
    monkeypatch.setattr(attn_mod, "_FLEX_BACKWARD_OK", set())
    q, k, v, x, coords, key_mask = _inputs(0, requires_grad=True)
    layer = _layer("fire", None, 0)
    if backward_works:
        out, used = attend(q, k, v, x, layer, coords, key_mask, scale=d ** -0.5)
        assert used == "flex" and attn_mod._FLEX_BACKWARD_OK == {type(layer).__name__}
    else:
        with pytest.warns(RuntimeWarning, match="backward failed for .*LoweringException"):
            out, used = attend(q, k, v, x, layer, coords, key_mask, scale=d ** -0.5)
        assert used == "dense" and list(attn_mod.FLEX_BACKWARD_FAILURES) == [type(layer).__name__]
        assert attend(q, k, v, x, layer, coords, key_mask, scale=d ** -0.5)[1] == "dense"  # no second trial
    assert all(p.grad is None for p in layer.parameters()) and q.grad is None  # the trial left no gradients
    out.sum().backward()  # training goes on
    ref = _reference(q, k, v, x, layer, coords, key_mask, "fire", 0)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    with torch.no_grad():  # evaluation needs no backward: flex, whatever the trial said
        assert attend(q, k, v, x, layer, coords, key_mask, scale=d ** -0.5)[1] == "flex"


def test_flex_refuses_more_shapes_than_its_limit_instead_of_the_unfused_kernel(monkeypatch):
    """Past FLEX_MAX_SHAPES compiled shapes torch.compile would silently run flex_attention unfused
    (a T x T scores tensor); forced flex raises instead, auto warns once and computes dense."""
    monkeypatch.setattr(attn_mod, "FLEX_MAX_SHAPES", 1)
    monkeypatch.setattr(attn_mod, "FLEX_FAILURE", None)
    monkeypatch.setattr(attn_mod, "FLEX_MIN_TOKENS", 8)
    layer = build_pe("alibi", dim=2 * 16, num_heads=2, depth=1, spatial_dims=2).layer(0)
    g = torch.Generator().manual_seed(0)

    def inputs(T: int):
        q, k, v = (torch.randn(1, 2, T, 16, generator=g) for _ in range(3))
        return q, k, v, torch.randn(1, T, 32, generator=g), torch.rand(T, 2, generator=g) * 9.0

    with torch.no_grad():
        with pytest.raises(AttentionImplError, match="compiled for 1 input shapes"):
            for T in (40, 48):  # the second new shape at the latest is one too many
                q, k, v, x, coords = inputs(T)
                attend(q, k, v, x, layer, coords, None, scale=0.25, impl="flex")
        q, k, v, x, coords = inputs(56)
        with pytest.warns(RuntimeWarning, match="FlexAttention failed.*compiled for 1 input shapes"):
            out, used = attend(q, k, v, x, layer, coords, None, scale=0.25)
        assert used == "dense" and attn_mod.FLEX_FAILURE.startswith("AttentionImplError")
        dense, _ = attend(q, k, v, x, layer, coords, None, scale=0.25, impl="dense")
    torch.testing.assert_close(out, dense, rtol=0, atol=0)


def test_which_biases_are_exactly_low_rank():
    """PaPE's bias has rank p(p+1)/2 + p + 1 = 6 per head on 2-D coordinates (its sdpa path is that exact
    decomposition); ALiBi's and LookHere's are full rank on a raster (no exact low-rank form: FlexAttention)."""
    from pebench.models import grid_coords

    torch.manual_seed(0)
    c = grid_coords((8, 8)).double()
    x = torch.randn(1, 64, 64, dtype=torch.float64)
    q = torch.zeros(1, 4, 64, 16, dtype=torch.float64)
    ranks = {}
    for pe, opts in (("alibi", {}), ("lookhere", {}), ("pape", {"impl": "naive"})):
        layer = build_pe(pe, dim=64, num_heads=4, depth=1, spatial_dims=2, grid=(8, 8), **opts).double().layer(0)
        layer.qk(q, q, x, c)
        bias = layer.bias(c)[0]  # (H, 64, 64)
        ranks[pe] = [int(torch.linalg.matrix_rank(b)) for b in bias]
    assert ranks == {"alibi": [64] * 4, "lookhere": [64] * 4, "pape": [6] * 4}


@pytest.mark.parametrize("mask_shape", ["head table", "per sequence", "table + padding", "empty rows"])
def test_learned_bias_flash_equals_the_written_out_attention_with_gradients(mask_shape):
    """``LearnedBiasAttention`` (CPU flash forward with the bias as mask, backward by hand) in float32 against
    ``softmax(q k^T s + mask) v`` written out in float64: output and the gradients of q, k, v and the mask, for
    a mask broadcast over the batch (rpb's table), one per sequence, a table plus key padding (what ``attend``
    passes), and sequences whose every key is masked (rows the math path's guard sets to 0)."""
    g = torch.Generator().manual_seed(7)
    T, s = 19, d ** -0.5
    q, k, v, w = (torch.randn(B, H, T, d, generator=g) for _ in range(4))
    bias = torch.randn(1 if mask_shape != "per sequence" else B, H, T, T, generator=g)
    pad = torch.zeros(B, 1, 1, T)
    if mask_shape == "table + padding":
        pad[1, ..., -5:] = float("-inf")
    if mask_shape == "empty rows":
        pad[1] = float("-inf")
    grads = []
    for dtype in (torch.float32, torch.float64):
        qq, kk, vv, bb = (t.detach().clone().to(dtype).requires_grad_(True) for t in (q, k, v, bias))
        mask = bb + pad.to(dtype)
        if dtype == torch.float32:
            out = attn_mod.LearnedBiasAttention.apply(qq, kk, vv, mask, s)
        else:  # a row with every key masked gives 0, as the math path's guard does
            empty = torch.isinf(mask).all(-1, keepdim=True)  # (B, H, T, 1)
            logits = (qq @ kk.transpose(-1, -2) * s + mask).masked_fill(empty, 0.0)
            out = (torch.softmax(logits, dim=-1) * ~empty) @ vv
        (out * w.to(dtype)).sum().backward()
        grads.append([out] + [t.grad for t in (qq, kk, vv, bb)])
    for name, got, ref in zip(("out", "dq", "dk", "dv", "dbias"), *grads):
        assert torch.isfinite(got).all(), name
        torch.testing.assert_close(got.double(), ref, rtol=2e-5, atol=2e-5, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("padding", ["none", "some keys", "every key of a sequence"])
def test_attend_skips_the_empty_row_scan_only_where_no_row_can_be_empty(monkeypatch, padding):
    """``attend`` tells ``LearnedBiasAttention`` whether a row can have every key masked (a learned bias is finite, so
    only a sequence whose every key is padding): without such a sequence the backward skips its scan, and the
    output and every gradient are bit for bit those of the scanning backward."""
    q, k, v, x, coords, key_mask = (t.float() if t.is_floating_point() else t for t in _inputs(0))
    key_mask = {"none": None, "some keys": key_mask,
                "every key of a sequence": key_mask.clone().index_fill_(0, torch.tensor([1]), False)}[padding]
    layer = _layer("rpb", None, 0).float()
    flags, apply = [], attn_mod.LearnedBiasAttention.apply

    def results(force_scan: bool):
        def spy(*args):
            flags.append(args[5])
            return apply(*args[:5], True) if force_scan else apply(*args)
        monkeypatch.setattr(attn_mod.LearnedBiasAttention, "apply", spy)
        qq, kk, vv = (t.clone().requires_grad_(True) for t in (q, k, v))
        layer.zero_grad()
        out, used = attend(qq, kk, vv, x, layer, coords, key_mask, scale=d ** -0.5, impl="bias-flash")
        (out.nan_to_num() * torch.arange(out.numel()).view(out.shape).sin()).sum().backward()
        assert used == "bias-flash"
        return [out, qq.grad, kk.grad, vv.grad] + [p.grad for p in layer.parameters()]

    skipped, scanned = results(False), results(True)
    assert flags[0] is (padding == "every key of a sequence")
    assert all(torch.equal(a, b) for a, b in zip(skipped, scanned))
    assert all(torch.isfinite(t).all() for t in skipped[1:])


def test_learned_bias_flash_backward_keeps_its_buffers_without_aliasing_a_returned_gradient(monkeypatch):
    """The backward's two ``(B, H, T, T)`` buffers are kept per thread and reused while the shape stays (not above
    ``BIAS_FLASH_WORKSPACE_MAX``); a per-sequence mask's gradient (dS itself) is never one of them, so a later
    backward leaves an earlier gradient as it was; the in-place backward refuses a second differentiation."""
    g = torch.Generator().manual_seed(3)
    T, s = 11, d ** -0.5
    q, k, v = (torch.randn(B, H, T, d, generator=g, requires_grad=True) for _ in range(3))

    def grads(mask):
        mask = mask.detach().requires_grad_(True)
        out = attn_mod.LearnedBiasAttention.apply(q, k, v, mask, s)
        return torch.autograd.grad(out.square().sum(), (q, mask))

    monkeypatch.setattr(attn_mod, "_WORKSPACE", attn_mod.threading.local())
    table = torch.randn(1, H, T, T, generator=g)
    first = grads(table)
    kept = attn_mod._WORKSPACE.buffers
    assert [tuple(b.shape) for b in kept] == [(B, H, T, T)] * 2
    again = grads(table)
    assert attn_mod._WORKSPACE.buffers is kept  # reused, and the same numbers
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    per_seq = grads(torch.randn(B, H, T, T, generator=g))  # dmask is dS: returned, not kept
    snapshot = [t.clone() for t in per_seq]
    grads(torch.randn(B, H, T, T, generator=g))
    assert all(torch.equal(a, b) for a, b in zip(per_seq, snapshot))
    assert all(per_seq[1].data_ptr() != b.data_ptr() for b in attn_mod._WORKSPACE.buffers)
    monkeypatch.setattr(attn_mod, "_WORKSPACE", attn_mod.threading.local())
    monkeypatch.setattr(attn_mod, "BIAS_FLASH_WORKSPACE_MAX", 2 * B * H * T * T * 4 - 1)  # one byte short
    assert all(torch.equal(a, b) for a, b in zip(grads(table), first))
    assert getattr(attn_mod._WORKSPACE, "buffers", None) is None
    mask = table.clone().requires_grad_(True)
    out = attn_mod.LearnedBiasAttention.apply(q, k, v, mask, s)
    (dq,) = torch.autograd.grad(out.square().sum(), (q,), create_graph=True)
    with pytest.raises(RuntimeError, match="twice|once_differentiable|double"):
        dq.sum().backward()


def test_auto_trains_learned_biases_with_bias_flash_and_dense_keeps_the_math_path():
    """``auto``, CPU, training, float32: a learned bias (rpb's table) runs ``bias-flash``; a fixed one (alibi) and
    ``impl=dense`` run the math path; evaluation and float64 too. Both training paths give the same gradients.
    Forced ``bias-flash`` refuses what it cannot compute, in one line."""
    q, k, v, x, coords, key_mask = (t.float() if t.is_floating_point() else t for t in _inputs(1))
    layer = _layer("rpb", None, 1).float()
    used = {}
    for impl in ("auto", "dense"):
        qq, kk, vv = (t.clone().requires_grad_(True) for t in (q, k, v))
        layer.zero_grad()
        out, used[impl] = attend(qq, kk, vv, x, layer, coords, key_mask, scale=d ** -0.5, impl=impl)
        out.square().sum().backward()
        used[impl + " grads"] = [t.grad for t in (qq, kk, vv)] + [p.grad.clone() for p in layer.parameters()]
    assert (used["auto"], used["dense"]) == ("bias-flash", "dense")
    for a, b in zip(used["auto grads"], used["dense grads"]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        assert attend(q, k, v, x, layer, coords, key_mask, scale=d ** -0.5)[1] == "dense"  # evaluation
    alibi = _layer("alibi", None, 1).float()
    qq = q.clone().requires_grad_(True)
    assert attend(qq, k, v, x, alibi, coords, key_mask, scale=d ** -0.5)[1] == "dense"  # a fixed bias
    q64, k64, v64, x64, c64, _ = _inputs(1, requires_grad=True)
    assert attend(q64, k64, v64, x64, _layer("rpb", None, 1), c64, key_mask, scale=d ** -0.5)[1] == "dense"
    assert attn_mod.learned_bias(layer) and not attn_mod.learned_bias(alibi)
    assert choose_impl("auto", "flex", "cpu", True, 64, torch.float32, learned=True) == "bias-flash"
    assert choose_impl("auto", "flex", "cpu", True, 64, torch.float64, learned=True) == "dense"
    assert choose_impl("auto", "flex", "cpu", False, 64, torch.float32, learned=True) == "dense"
    assert choose_impl("auto", "flex", "cuda", True, 64, torch.float32, learned=True) == "dense"
    assert choose_impl("bias-flash", "flex", "cpu", False, 64, torch.float32) == "bias-flash"  # eval: the forward
    for args, words in ((("bias-flash", "none", "cpu", True, 64, torch.float32), "adds none"),
                        (("bias-flash", "flex", "cuda", True, 64, torch.float32), "CPU flash kernel"),
                        (("bias-flash", "flex", "cpu", True, 64, torch.float64), "float32")):
        with pytest.raises(AttentionImplError, match=words):
            choose_impl(*args)


def test_run_option_offers_exactly_the_implementations():
    """``--attention-impl``'s choices (declared where torch is not imported) are :data:`IMPLS`."""
    from pebench.core.options import declared_options
    from pebench.runner.config import RunConfig
    opt = next(o for o in declared_options(RunConfig) if o.name == "attention_impl")
    assert tuple(opt.choices) == attn_mod.IMPLS

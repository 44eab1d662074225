"""The one attention entry point of pebench: :func:`attend` picks how a PE's attention is computed.

Every block calls ``attend(q, k, v, x, layer_pe, coords, key_mask, impl=...)``; it applies the PE's
q/k transform (``layer_pe.qk``) and then one of these implementations (``IMPLS``), which all compute
``softmax(q k^T * scale + bias + padding) v`` (``tests/test_attention_impls.py`` checks each against
that formula written out):

* ``dense``: the reference. The PE's bias is materialised as a ``(B|1, H, T, T)`` tensor
  (``layer_pe.bias``) and passed to ``F.scaled_dot_product_attention`` as ``attn_mask`` together
  with the key padding mask. Memory O(T^2) for bias PEs.
* ``sdpa``: ``F.scaled_dot_product_attention`` with no bias, only the padding mask: the path of every
  PE without a bias (none, APE, sincos, RoPE) and of PaPE's augmented q/k (v is zero-padded to q's
  head dim, the extra output columns are dropped again: exact).
* ``bias-flash``: CPU, float32, for a *learned* bias (one that needs its own gradient: rpb's table, FIRE's
  MLP; :func:`learned_bias`). The forward is the CPU flash kernel with the bias as its additive mask; the
  backward, which that kernel lacks for the mask, is written out (:class:`LearnedBiasAttention`).
  ``F.scaled_dot_product_attention`` would send such a mask to its math path, which ``dense`` keeps. Same
  memory as ``dense`` in the backward.
* ``flex``: FlexAttention (``torch.nn.attention.flex_attention``, compiled). Bias PEs give their bias
  as a ``score_mod`` that reads the coordinates (``layer_pe.flex_score_mod``: any coords, not only a
  raster), key padding is a ``mask_mod`` of a block mask of 128 x 128 tiles; LookHere's
  directional heads also skip the tiles whose keys all lie behind their queries
  (``flex_block_visibility``, about half of them on large rasters). No ``(T, T)`` tensor exists at
  any point: memory O(T). On CPU, torch (2.14) has no FlexAttention backward, and the compiled CPU
  kernel takes float32 / float16 / bfloat16 only. Each new input shape costs a compilation (seconds
  on CPU; ``dynamic=False``: torch 2.14's CPU template fails to build with dynamic sizes), and one
  process compiles at most :data:`FLEX_MAX_SHAPES` of them: past that torch.compile would silently run
  the unfused kernel, which materialises the ``T x T`` scores, so ``flex`` raises instead (``auto``:
  one warning, then ``dense``). Speed on
  CPU (2 cores, 4096 tokens, 2 sequences, 4 heads of 32): LookHere 2.1 s flex vs 5.0 s dense,
  ALiBi 3.8 s flex vs 1.8 s dense (its per-logit square root); the point on CPU is memory.

Low-rank biases (the FlashBias idea: a bias ``B = U V^T`` of rank r is attention with q and k widened by r
columns, exact, inside any fused kernel): PaPE's logit term is exactly such a bias, of rank
``p(p+1)/2 + p + 1`` per head (6 for 2-D coordinates), and ``pape``'s ``sdpa`` path is that decomposition.
ALiBi's ``-slope * ||r_i - r_j||`` and LookHere's masked distance penalty are not low-rank (full rank on
a raster: a Euclidean distance matrix of distinct points is nonsingular), so a low-rank form would only
approximate them; they use FlexAttention instead (``tests/test_attention_impls.py`` checks the ranks).

Choice (``impl="auto"``, :func:`choose_impl`), from the PE, the device and the phase (gradients on =
training, off = evaluation):

* PEs without a bias: ``sdpa``. Bias PEs without a ``flex_score_mod`` (PaPE ``impl=naive``, whose
  bias is its full logits): ``dense``.
* Bias PEs on CPU: while training ``bias-flash`` for a learned bias in float32, else ``dense``; in evaluation ``flex`` when the
  sequence has at least :data:`FLEX_MIN_TOKENS` tokens (below that the dense bias is small and a
  compilation would cost more than it saves; it also keeps the committed small-grid results of
  ALiBi / LookHere bit-identical), else ``dense``.
* Bias PEs on CUDA: ``flex`` in both phases from :data:`FLEX_MIN_TOKENS_CUDA` tokens on, else ``dense``
  (faster there, measured). FlexAttention's CUDA kernel has a backward; on an H200 (torch 2.11) flex
  matched dense within 2.2e-6 (relative, float32, output and gradients) for alibi, lookhere and rpb
  (``docs/gpu_check.md``), while FIRE's backward failed to compile (a ``score_mod`` that
  indexes a tensor requiring gradients more than once). Because that failure only appears at the first
  ``backward()``, ``auto`` first runs one trial forward + backward per PE class before training on flex
  (:func:`_flex_backward_works`) and trains a class that fails on ``dense``, with one warning. Dropout
  inside attention (``attn_drop > 0``) is not supported by FlexAttention: ``auto`` then stays ``dense``.

If FlexAttention fails under ``auto`` (e.g. no C++ compiler for the CPU kernel), a warning is issued
once and ``auto`` uses ``dense`` for the rest of the process (:data:`FLEX_FAILURE` says why). A
forced choice that cannot work raises :class:`AttentionImplError` (a ``ValueError``):
``flex`` while training on CPU, ``sdpa`` for a PE that adds a bias, ``flex`` for a PE whose bias
has no ``flex_score_mod``, ``flex`` with attention dropout. ``bench run --attention-impl`` checks
the first three before training (:func:`check_forced_impl`, :func:`check_pe_impl`).
"""
from __future__ import annotations

import threading
import warnings
from contextlib import AbstractContextManager
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from pebench.core.child_pythonpath import shield_torch_children
from pebench.core.errors import UserError
from pebench.encodings import LayerPE
from pebench.encodings.pape import AugmentedLayerPE

__all__ = ["IMPLS", "FLEX_MIN_TOKENS", "FLEX_MIN_TOKENS_CUDA", "FLEX_BLOCK", "AttentionImplError", "attend", "attention_mask",
           "bias_kind", "choose_impl", "check_impl_name", "check_forced_impl", "check_pe_impl", "flex_block_mask",
           "flex_kernel", "FLEX_FAILURE", "FLEX_BACKWARD_FAILURES", "FLEX_MAX_SHAPES", "LearnedBiasAttention",
           "learned_bias"]

#: the values of ``attention_impl`` / ``--attention-impl``
IMPLS = ("auto", "dense", "sdpa", "flex", "bias-flash")
#: ``auto`` on CPU in evaluation uses ``flex`` for bias PEs from this many tokens (query length) on
FLEX_MIN_TOKENS = 1024
#: on CUDA, ``auto`` uses FlexAttention for bias PEs from this many tokens on (both phases). Below it the dense
#: bias is cheap and faster: on an H200 (torch 2.11, batch 2, 4 heads of 32, forward + backward) dense took
#: 2.0 / 3.1 / 2.7 ms and flex 3.3 / 4.8 / 3.7 ms at 1,025 tokens for alibi / lookhere / rpb, and at 64 tokens
#: ALiBi through flex ran at 0.46x (training) / 0.13x (evaluation) the throughput of x-transformers' dense bias
#: (``bench perf peers``). From 4,096 tokens the dense bias is 64 MiB per head and sequence and grows as T^2.
FLEX_MIN_TOKENS_CUDA = 4096
#: FlexAttention block size (queries and keys): the CPU kernel's work buffers are block x block
FLEX_BLOCK = 128
#: input shapes FlexAttention is compiled for in one process (one kernel each, ``dynamic=False``);
#: torch.compile's own default (``recompile_limit`` 8) is reached by an evaluation over a few
#: resolutions, after which it falls back, with only a log line, to the unfused O(T^2) kernel
FLEX_MAX_SHAPES = 64
_FLEX_CPU_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


class AttentionImplError(UserError):
    """An attention implementation that cannot compute this PE / phase / device."""


def check_impl_name(value: object) -> str:
    """``attention_impl`` as one of :data:`IMPLS` (case-insensitive), else :class:`AttentionImplError`."""
    name = str(value).strip().lower() if isinstance(value, str) else value
    if name not in IMPLS:
        raise AttentionImplError(f"attention_impl must be one of {', '.join(IMPLS)}, got {value!r}")
    return name  # type: ignore[return-value]


def bias_kind(layer_pe: LayerPE) -> str:
    """How a layer PE shapes the logits: ``"none"`` (no bias; q/k only), ``"flex"`` (a bias that also
    has a FlexAttention ``score_mod``), ``"dense"`` (a bias only as a ``(.., T, T)`` tensor)."""
    if type(layer_pe).bias is LayerPE.bias:
        return "none"
    if isinstance(layer_pe, AugmentedLayerPE) and layer_pe.impl != "naive":
        return "none"  # PaPE's sdpa path: everything is in the augmented q/k
    return "flex" if callable(getattr(layer_pe, "flex_score_mod", None)) else "dense"


def learned_bias(layer_pe: LayerPE) -> bool:
    """Whether the layer adds a bias that needs its own gradient (a trainable parameter behind it: rpb's table,
    FIRE's MLP), which ``auto`` trains on CPU with ``bias-flash``."""
    return bias_kind(layer_pe) != "none" and any(p.requires_grad for p in layer_pe.parameters())


def check_forced_impl(impl: str, device_type: str, training: bool) -> None:
    """Reject a forced implementation that cannot run on ``device_type`` in this phase (one line)."""
    if impl == "bias-flash" and device_type != "cpu":
        raise AttentionImplError(f"attention_impl=bias-flash runs the CPU flash kernel; on {device_type} use auto, "
                                 "dense or flex")
    if impl == "flex" and training and device_type == "cpu":
        raise AttentionImplError("attention_impl=flex cannot train on CPU: torch has no FlexAttention backward "
                                 "there; use auto or dense (auto uses flex in evaluation)")


def check_pe_impl(impl: str, layer_pe: LayerPE) -> None:
    """Reject a forced implementation that cannot compute this PE's attention (one line)."""
    _check_kind(impl, bias_kind(layer_pe))


def _check_kind(impl: str, kind: str) -> None:
    if impl == "sdpa" and kind != "none":
        raise AttentionImplError("attention_impl=sdpa has no bias, but this PE adds one; use auto, dense or flex")
    if impl == "bias-flash" and kind == "none":
        raise AttentionImplError("attention_impl=bias-flash computes a bias, but this PE adds none; use auto or sdpa")
    if impl == "flex" and kind == "dense":
        raise AttentionImplError("attention_impl=flex: this PE's bias exists only as a dense T x T tensor "
                                 "(e.g. PaPE impl=naive); use auto or dense")


def choose_impl(requested: str, kind: str, device_type: str, grad: bool, n_tokens: int, dtype: torch.dtype,
                dropout_p: float = 0.0, learned: bool = False) -> str:
    """The implementation :func:`attend` uses (see the module docstring); a forced one is validated.
    ``learned``: the bias needs its own gradient (:func:`learned_bias`)."""
    if requested == "auto":
        if kind == "none":
            return "sdpa"
        if kind == "dense" or dropout_p > 0:
            return "dense"
        if device_type == "cpu" and grad:
            return "bias-flash" if learned and dtype == torch.float32 else "dense"
        if FLEX_FAILURE is not None:
            return "dense"
        if device_type == "cuda":  # measured on an H200 (docs/gpu_check.md): dense is faster at small T
            return "flex" if n_tokens >= FLEX_MIN_TOKENS_CUDA else "dense"
        if device_type == "cpu" and not grad and n_tokens >= FLEX_MIN_TOKENS and dtype in _FLEX_CPU_DTYPES:
            return "flex"
        return "dense"
    _check_kind(requested, kind)
    if requested == "flex":
        if dropout_p > 0:
            raise AttentionImplError("attention_impl=flex does not support attention dropout; use auto or dense")
        check_forced_impl(requested, device_type, grad)
    if requested == "bias-flash":
        check_forced_impl(requested, device_type, grad)
        if dropout_p > 0 or dtype != torch.float32:
            raise AttentionImplError("attention_impl=bias-flash runs in float32 without attention dropout; use auto "
                                     "or dense")
    return requested


def attention_mask(bias: Tensor | None, key_mask: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """Combine an additive PE bias ``(.., H|1, T, T)`` and a key padding mask ``(B, T)`` (True = valid)."""
    if key_mask is None:
        return bias
    pad = torch.zeros(key_mask.shape, dtype=dtype, device=key_mask.device)
    pad = pad.masked_fill(~key_mask, float("-inf"))[:, None, None, :]  # (B, 1, 1, T)
    return pad if bias is None else bias.to(dtype) + pad


def flex_block_mask(key_mask: Tensor | None, batch_size: int, n_q: int, n_kv: int, device: torch.device,
                    visible: Tensor | None = None) -> BlockMask:
    """A FlexAttention block mask of :data:`FLEX_BLOCK`-sized tiles, built from tile indices
    (O((T / 128)^2) integers, never from a ``(T, T)`` evaluation). ``visible (B|1, H|1, nq, nk)``
    bool: the tiles to visit (default all; LookHere skips tiles with no visible key). Every visited
    tile is "partial", with ``mask_mod`` = key is valid (``key_mask (B, T)``, True = valid) or
    always true: torch 2.14's compiled CPU kernel fails to build with "full" tiles only."""
    nq, nk = -(-n_q // FLEX_BLOCK), -(-n_kv // FLEX_BLOCK)
    if visible is None:
        visible = torch.ones(1, 1, nq, nk, dtype=torch.bool, device=device)
    if key_mask is not None:
        visible = visible.expand(batch_size, -1, -1, -1)
    count = visible.sum(-1, dtype=torch.int32)  # (b, h, nq)
    idx = torch.argsort((~visible).to(torch.int8), dim=-1, stable=True).to(torch.int32)  # visited tiles first

    def valid_key(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return key_mask[b, kv_idx]

    def any_key(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return kv_idx >= 0

    return BlockMask.from_kv_blocks(count, idx, BLOCK_SIZE=FLEX_BLOCK, seq_lengths=(n_q, n_kv),
                                    mask_mod=any_key if key_mask is None else valid_key)


_COMPILED_FLEX: Callable | None = None


def flex_kernel() -> Callable:
    """``flex_attention`` compiled once per process (uncompiled, it materialises the T x T scores)."""
    global _COMPILED_FLEX
    if _COMPILED_FLEX is None:
        shield_torch_children()  # inductor's CPU probes must not see the repository's encodings/ folder
        _COMPILED_FLEX = torch.compile(flex_attention, dynamic=False)
    return _COMPILED_FLEX


def _flex(q: Tensor, k: Tensor, v: Tensor, layer_pe: LayerPE, coords: Tensor, key_mask: Tensor | None,
          scale: float) -> Tensor:
    """FlexAttention with the PE's ``score_mod`` and tile visibility (no ``(T, T)`` tensor)."""
    B, T = q.shape[0], q.shape[-2]
    score_mod, visible = None, None
    if bias_kind(layer_pe) == "flex":
        score_mod = layer_pe.flex_score_mod(coords, B)
        tiles = getattr(layer_pe, "flex_block_visibility", None)
        visible = tiles(coords, B, FLEX_BLOCK) if tiles is not None else None
    block_mask = flex_block_mask(key_mask, B, T, k.shape[-2], q.device, visible)
    try:
        with _flex_shape_limit():
            return flex_kernel()(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale)
    except Exception as e:
        if type(e).__name__ != "FailOnRecompileLimitHit":
            raise
        raise AttentionImplError(
            f"FlexAttention has been compiled for {FLEX_MAX_SHAPES} input shapes in this process (FLEX_MAX_SHAPES); "
            f"a further shape {tuple(q.shape)} would run its unfused T x T kernel; use attention_impl=dense or auto"
        ) from e


def _flex_shape_limit() -> AbstractContextManager:
    """torch.compile settings for the flex call: up to :data:`FLEX_MAX_SHAPES` compiled shapes, then an
    exception instead of the silent unfused fallback (the names differ across torch releases)."""
    cfg = torch._dynamo.config
    opts: dict[str, object] = {"recompile_limit" if hasattr(cfg, "recompile_limit") else "cache_size_limit":
                               FLEX_MAX_SHAPES}
    if hasattr(cfg, "fail_on_recompile_limit_hit"):
        opts["fail_on_recompile_limit_hit"] = True
    return cfg.patch(**opts)


#: why ``auto`` stopped choosing ``flex`` in this process (its first failure), else None
FLEX_FAILURE: str | None = None


def _flex_failed(e: Exception) -> None:
    """Record the first failure of FlexAttention under ``auto`` and warn once; ``auto`` uses the dense
    path from then on (a forced ``flex`` raises instead)."""
    global FLEX_FAILURE
    if FLEX_FAILURE is None:
        FLEX_FAILURE = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        warnings.warn(f"FlexAttention failed ({FLEX_FAILURE[:200]}); attention_impl=auto uses the dense path "
                      f"from now on", RuntimeWarning, stacklevel=3)


#: PE layer class name -> why its FlexAttention backward failed (``auto`` trains that PE on the dense path)
FLEX_BACKWARD_FAILURES: dict[str, str] = {}
_FLEX_BACKWARD_OK: set[str] = set()


def _flex_backward_works(q: Tensor, k: Tensor, v: Tensor, layer_pe: LayerPE, coords: Tensor,
                         key_mask: Tensor | None, scale: float) -> bool:
    """Whether FlexAttention's backward works for this PE's ``score_mod``, tried once per PE class and process.

    Under ``auto`` a failure of the forward is caught where it happens (:func:`attend`), but the compiled
    backward is built lazily, at the first ``backward()``, far from here: there an exception would end the
    training. So before the first training use of ``flex`` for a PE class, one forward + backward runs on
    detached copies (``torch.autograd.grad``: nothing accumulates into the parameters' ``.grad``). On torch
    2.11 / CUDA (an H200, ``docs/gpu_check.md``) the lowering of FIRE's backward failed this way. Inside a
    ``torch.compile`` trace no trial runs (it would break the graph): a class not tried yet is taken as working.
    """
    name = type(layer_pe).__name__
    if name in _FLEX_BACKWARD_OK:
        return True
    if name in FLEX_BACKWARD_FAILURES:
        return False
    if torch.compiler.is_compiling():
        return True
    params = [p for p in layer_pe.parameters() if p.requires_grad] if isinstance(layer_pe, torch.nn.Module) else []
    qt, kt, vt = (t.detach().requires_grad_(True) for t in (q, k, v))
    try:
        with torch.enable_grad():
            out = _flex(qt, kt, vt, layer_pe, coords.detach(), key_mask, scale)
            torch.autograd.grad(out.sum(), [qt, kt, vt, *params], allow_unused=True)
    except Exception as e:  # noqa: BLE001 - any failure: this PE trains on the dense path
        FLEX_BACKWARD_FAILURES[name] = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}"
        warnings.warn(f"FlexAttention's backward failed for {name} ({FLEX_BACKWARD_FAILURES[name]}); "
                      f"attention_impl=auto trains it on the dense path", RuntimeWarning, stacklevel=3)
        return False
    _FLEX_BACKWARD_OK.add(name)
    return True


def attend(q: Tensor, k: Tensor, v: Tensor, x: Tensor, layer_pe: LayerPE, coords: Tensor,
           key_mask: Tensor | None, *, scale: float, impl: str = "auto", dropout_p: float = 0.0,
           basis_folded: bool = False) -> tuple[Tensor, str]:
    """Attention of ``q, k, v (B, H, T, d)`` under ``layer_pe`` -> ``(out (B, H, T, d), impl used)``.

    ``x (B, T, D)``: the block's normalised input (PaPE's q augmentation reads it); ``coords``
    ``(B, N, p)`` / ``(N, p)``; ``key_mask (B, T)`` bool, True = valid key; ``scale``: on ``q k^T``
    (1/sqrt(d) of the original head dim, whatever ``qk`` returns); ``impl``: one of :data:`IMPLS`;
    ``basis_folded``: q and k already carry ``layer_pe.qk_basis`` (folded into the projection by the
    caller), so ``layer_pe.qk_after_basis`` runs instead of ``layer_pe.qk``.
    """
    d = v.shape[-1]
    transform = layer_pe.qk_after_basis if basis_folded else layer_pe.qk
    q, k = transform(q, k, x, coords)  # (B, H, T, d') with d' >= d
    grad = torch.is_grad_enabled()
    kind = bias_kind(layer_pe)
    # learned_bias walks the layer's parameters: asked only where choose_impl reads it (training)
    used = choose_impl(impl, kind, q.device.type, grad, q.shape[-2], q.dtype, dropout_p,
                       grad and kind != "none" and learned_bias(layer_pe))
    if q.shape[-1] != d:
        # augmented q/k (PaPE): fused SDPA kernels (CPU flash, CUDA flash) need one head dim
        # for q, k and v, so pad v with zeros and drop those output columns again (exact).
        v = F.pad(v, (0, q.shape[-1] - d))
    out = None
    if used == "flex" and impl == "auto" and torch.is_grad_enabled() and not _flex_backward_works(
            q, k, v, layer_pe, coords, key_mask, scale):
        used = "dense"
    if used == "flex":
        try:
            out = _flex(q, k, v, layer_pe, coords, key_mask, scale)
        except Exception as e:  # noqa: BLE001 - e.g. no C++ compiler for the CPU kernel
            if impl != "auto":
                raise
            _flex_failed(e)
            used = "dense" if kind != "none" else "sdpa"
    if out is None:
        bias = layer_pe.bias(coords) if used in ("dense", "bias-flash") else None
        mask = attention_mask(bias, key_mask, q.dtype)
        if used == "bias-flash":
            # a learned bias is finite: only key padding that masks every key of a sequence empties a row
            empty_rows = key_mask is not None and not bool(key_mask.any(-1).all())
            out = LearnedBiasAttention.apply(q, k, v, mask, scale, empty_rows)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, dropout_p=dropout_p)
    return (out if out.shape[-1] == d else out[..., :d]), used


#: the most bytes the kept backward buffers of :class:`LearnedBiasAttention` may take (both together); larger
#: ones are allocated per call and freed
BIAS_FLASH_WORKSPACE_MAX = 256 * 2 ** 20
_WORKSPACE = threading.local()


def _backward_buffers(shape: torch.Size, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    """Two ``(B, H, T, T)`` buffers for :class:`LearnedBiasAttention`'s backward, kept per thread and reused while the
    shape stays the same.

    Why: allocated per call, each buffer (8 MiB at 256 tokens, batch 8, 4 heads) was handed back to the system by
    malloc when freed and faulted in page by page at the next layer's backward; in vit-nano's training step at 256
    tokens that took about a third of the backward (11.8 against 7.9 ms per call, with spikes to 80 ms, measured
    2026-12-06). One backward runs at a time per thread (autograd runs a node's backward to its end), so one pair
    serves every layer. Above :data:`BIAS_FLASH_WORKSPACE_MAX` nothing is kept.
    """
    if 2 * shape.numel() * torch.empty((), dtype=dtype).element_size() > BIAS_FLASH_WORKSPACE_MAX:
        return torch.empty(shape, dtype=dtype, device=device), torch.empty(shape, dtype=dtype, device=device)
    kept = getattr(_WORKSPACE, "buffers", None)
    if kept is None or kept[0].shape != shape or kept[0].dtype != dtype or kept[0].device != device:
        _WORKSPACE.buffers = kept = (torch.empty(shape, dtype=dtype, device=device),
                                     torch.empty(shape, dtype=dtype, device=device))
    return kept


class LearnedBiasAttention(torch.autograd.Function):
    """``softmax(q k^T * scale + mask) v`` with a gradient for ``mask`` (a learned bias), CPU training.

    Why: ``F.scaled_dot_product_attention`` sends an ``attn_mask`` that requires grad to its math path on CPU
    (torch 2.14), which materialises the scores, runs a separate softmax and guards fully masked rows with
    extra passes; the CPU flash kernel takes an additive mask but returns no gradient for it. Here the forward
    is the flash kernel with the mask, and the backward is written out:
    ``P = softmax(q k^T s + mask)``, ``dV = P^T dO``, ``dP = dO V^T``, ``dS = P * (dP - rowsum(P * dP))``,
    ``dQ = dS K s``, ``dK = dS^T Q s``, ``dmask = dS`` summed over the mask's broadcast dims. Two ``(B, H, T, T)``
    buffers, ``P`` and ``dP``, as in the math path's backward, kept between calls up to
    :data:`BIAS_FLASH_WORKSPACE_MAX` (:func:`_backward_buffers`); the backward cannot be differentiated again; rows whose keys are all masked get ``P = 0``,
    as the math path's guard gives them (the kernel's output there is 0 too). ``empty_rows=False`` (the caller knows
    no row has every key masked: :func:`attend` without such a sequence) skips the backward's scan for those rows,
    a strided read of one ``(B, H, T)`` column that took 0.08-0.19 ms per call at 256 tokens, batch 8, 4 heads. ``tests/models/test_attention_impls.py``
    checks the output and all four gradients against the attention written out in float64.
    ``attention_impl=dense`` keeps the math path (the one ``auto`` used before 2026-12-05).
    """

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, mask: Tensor, scale: float,  # type: ignore[override]
                empty_rows: bool = True) -> Tensor:
        out, _ = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=mask, scale=scale)
        ctx.save_for_backward(q, k, v, mask)
        ctx.scale = scale
        ctx.empty_rows = empty_rows
        return out  # (B, H, T, d)

    @staticmethod
    @once_differentiable  # the backward works in place on kept buffers: no graph of it can be built
    def backward(ctx, g: Tensor):  # type: ignore[override]
        q, k, v, mask = ctx.saved_tensors
        s = ctx.scale
        shape = torch.Size((*q.shape[:-1], k.shape[-2]))  # (B, H, T, T)
        p_buf, ds_buf = _backward_buffers(shape, q.dtype, q.device)
        if mask.shape == shape:  # dmask is dS itself (a per-sequence mask): dS must not live in a kept buffer
            ds_buf = torch.empty(shape, dtype=q.dtype, device=q.device)
        # P from scratch, not exp(S - lse) with the kernel's lse, and D = rowsum(P * dP), not rowsum(dO * O) with the
        # kernel's output O: the kernel's vectorised exponential is approximate, and mixing its lse or output into an
        # exactly computed P put errors of 1e-4 into dQ in some processes (measured); this way the backward is the
        # exact gradient of softmax attention at the kernel's inputs. Two (B, H, T, T) buffers, kept between calls
        # (_backward_buffers): P (the scores, then their softmax, in place) and dP (then dS, in place).
        p = torch.matmul(q, k.transpose(-1, -2), out=p_buf).mul_(s).add_(mask)  # (B, H, T, T) scores
        p = torch.ops.aten._softmax.out(p, -1, False, out=p)  # softmax over keys, in place (row by row)
        if ctx.empty_rows:
            empty = p[..., :1].isnan()  # (B, H, T, 1): every key masked (softmax of -inf only; the kernel's lse is 0 there)
            if bool(empty.any()):
                p = p.masked_fill_(empty, 0.0)
        ds = torch.matmul(g, v.transpose(-1, -2), out=ds_buf).mul_(p)  # P * dP, in dP's buffer
        ds = ds.addcmul_(p, ds.sum(-1, keepdim=True), value=-1.0)  # dS = P * dP - P * rowsum(P * dP), in place
        dv = torch.matmul(p.transpose(-1, -2), g)  # after dS: dV is not yet held while dP is formed
        del p
        dq = torch.matmul(ds, k).mul_(s)
        dk = torch.matmul(ds.transpose(-1, -2), q).mul_(s)
        if ds.dim() > mask.dim():  # a mask broadcast from fewer dims
            ds = ds.sum(tuple(range(ds.dim() - mask.dim())))
        dims = [i for i in range(ds.dim()) if mask.shape[i] == 1 and ds.shape[i] != 1]
        dmask = ds.sum(dims, keepdim=True) if dims else ds
        return dq, dk, dv, dmask, None, None

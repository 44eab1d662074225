"""Model benchmarks for ``bench perf``: backbone vs timm, and per-PE overhead (see :mod:`pebench.perf`).

Backbone vs timm: pebench's classifier is ``ImageTokenizer -> ViTBackbone -> ClassificationHead``
(mean pool, no CLS); the reference is timm's ``VisionTransformer`` of the same shape:
``class_token=False, global_pool="avg", fc_norm=False, qkv_bias=True, no_embed_class=True``,
same width / depth / heads / mlp ratio, LayerNorm eps 1e-6, with ``pos_embed="learn"`` for the
``ape`` comparison and ``pos_embed="none"`` (supported by timm >= 1.0) for ``none``. One training
step = zero_grad + forward + cross-entropy + backward + AdamW step; inference = forward under
``torch.inference_mode``. fp32.
"""
from __future__ import annotations

import contextlib
import math
import statistics
import time
from typing import Any, Callable

import torch
import torch.nn.functional as F
from timm.models.vision_transformer import VisionTransformer
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from pebench.encodings import list_pes
from pebench.models import ClassificationHead, ImageTokenizer, build_backbone, model_config
from pebench.tasks.classification import ClassificationTask

from .report import record
from .suites import SUITES
from .timing import interleaved, interleaved_times, round_ratios

__all__ = ["PeClassifier", "build_timm", "train_step_fn", "infer_fn", "bench_backbone", "bench_pe_overhead",
           "sdpa_backends", "step_flops", "steps_block"]

NUM_CLASSES = 10
#: (preset, image side, patch, batch) of the timm comparison (batch sized for a 2-core CPU)
BACKBONE_SETUPS = (("vit-s16", 224, 16, 4), ("vit-nano", 32, 4, 64))


class PeClassifier(nn.Module):
    """pebench image classifier: tokenizer + PE-pluggable backbone + mean-pool head."""

    def __init__(self, model: str, pe: str, img: int, patch: int, num_classes: int = NUM_CLASSES,
                 **pe_options: Any) -> None:
        super().__init__()
        dim = model_config(model).embed_dim
        self.tokenizer = ImageTokenizer(dim, patch, 3)
        self.backbone = build_backbone(model, pe=pe, spatial_dims=2, grid=(img // patch,) * 2, **pe_options)
        self.head = ClassificationHead(dim, num_classes)

    def forward(self, img: Tensor) -> Tensor:
        tb = self.tokenizer(img)
        return self.head(self.backbone(tb.x, tb.coords, tb.grid, tb.mask), tb.mask)


def build_timm(model: str, img: int, patch: int, pos_embed: bool, num_classes: int = NUM_CLASSES) -> nn.Module:
    c = model_config(model)
    return VisionTransformer(img_size=img, patch_size=patch, num_classes=num_classes, embed_dim=c.embed_dim,
                             depth=c.depth, num_heads=c.num_heads, mlp_ratio=c.mlp_ratio, qkv_bias=True,
                             class_token=False, global_pool="avg", fc_norm=False, no_embed_class=True,
                             pos_embed="learn" if pos_embed else "none")


def train_step_fn(model: nn.Module, x: Tensor, y: Tensor) -> Callable[[], None]:
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        if x.is_cuda:
            torch.cuda.synchronize(x.device)
    return step


def infer_fn(model: nn.Module, x: Tensor) -> Callable[[], None]:
    def step() -> None:
        model.eval()
        with torch.inference_mode():
            model(x)
        if x.is_cuda:
            torch.cuda.synchronize(x.device)
    return step


def _device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@SUITES.register("backbone")
def bench_backbone(quick: bool = False) -> list[dict]:
    dev = _device()
    setups = (("vit-nano", 16, 4, 2),) if quick else BACKBONE_SETUPS
    rows = []
    for model, img, patch, batch in setups:
        # training steps, interleaved medians; inference is cheaper and noisier: more repeats. Two
        # warm-up rounds: after one, vit-s16's first timed training round ran at 0.59x of its second
        # in two runs of `all` (the first optimizer steps' allocations), which a 2-round median kept. Five
        # training rounds for vit-s16: with three, one run's round ratios for ape were 1.03, 0.93, 0.94
        reps, infer_reps = (1, 1) if quick else (5, 4) if model == "vit-s16" else (6, 12)
        warmup = 1 if quick else 2
        if dev.type == "cuda":
            batch *= 8
        torch.manual_seed(0)
        x = torch.randn(batch, 3, img, img, device=dev)
        y = torch.randint(0, NUM_CLASSES, (batch,), device=dev)
        for pe in ("ape", "none"):
            ours = PeClassifier(model, pe, img, patch).to(dev)
            ref = build_timm(model, img, patch, pos_embed=pe == "ape").to(dev)
            shape = f"{model} {img}px/p{patch} b{batch}"
            ref_name = f"timm ViT pos_embed={'learn' if pe == 'ape' else 'none'}"
            for phase, fns, n in (("train", (train_step_fn(ours, x, y), train_step_fn(ref, x, y)), reps),
                                  ("infer", (infer_fn(ours, x), infer_fn(ref, x)), infer_reps)):
                times = interleaved_times({"a": fns[0], "b": fns[1]}, n, warmup=warmup)
                rows.append(record(f"backbone {phase} {shape} pe={pe}", f"pebench pe={pe}", ref_name,
                                   batch / statistics.median(times["a"]), batch / statistics.median(times["b"]),
                                   "samples/s", target=0.95, round_ratios=round_ratios(times, "b", "a")))
            print(f"  {rows[-2]['name']}: {rows[-2]['ratio']:.3f}; infer {rows[-1]['ratio']:.3f}", flush=True)
            del ours, ref
    return rows


# ----------------------------------------------------------------------------- SDPA backends
@contextlib.contextmanager
def _capture_sdpa(calls: list):
    """Record the arguments of ``F.scaled_dot_product_attention`` calls (first one per forward)."""
    orig = F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, *args, **kwargs):
        if not calls:
            calls.append((q.detach(), k.detach(), v.detach(),
                          None if attn_mask is None else attn_mask.detach(), kwargs.get("scale")))
        return orig(q, k, v, attn_mask, *args, **kwargs)

    F.scaled_dot_product_attention = spy
    try:
        yield calls
    finally:
        F.scaled_dot_product_attention = orig


_CPU_KERNELS = {"aten::_scaled_dot_product_flash_attention_for_cpu": "flash (cpu)",
                "aten::_scaled_dot_product_attention_math": "math",
                "aten::_scaled_dot_product_attention_math_for_mps": "math (mps)"}


def _cpu_sdpa_kernel(model: nn.Module, x: Tensor) -> dict[str, Any]:
    """The SDPA kernel(s) a CPU forward of ``model`` actually ran, read from the profiler's op names."""
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        model(x)
    ran = sorted({_CPU_KERNELS[e.name] for e in prof.events() if e.name in _CPU_KERNELS})
    return {"backend": "+".join(ran) or "none", "accepted": ran,
            "why": "CPU: the kernel the dispatcher ran, read from the profiler's op names"}


def sdpa_backends(model: nn.Module, x: Tensor, dtype: torch.dtype = torch.float32) -> dict[str, Any]:
    """Which SDPA backends accept the first attention call of ``model(x)`` on CUDA and why not;
    on CPU, which kernel the forward ran (:func:`_cpu_sdpa_kernel`).

    Each backend is tried alone under ``torch.nn.attention.sdpa_kernel``; the dispatcher picks the
    first that works in its priority order (flash > efficient > math on current torch)."""
    if x.device.type != "cuda":
        return _cpu_sdpa_kernel(model, x)
    calls: list = []
    with _capture_sdpa(calls), torch.no_grad():
        model(x)
    q, k, v, mask, scale = (t.to(dtype) if isinstance(t, Tensor) else t for t in calls[0])
    ok = {}
    for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                     ("cudnn", SDPBackend.CUDNN_ATTENTION), ("math", SDPBackend.MATH)):
        try:
            with sdpa_kernel([be]):
                F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
            ok[name] = True
        except RuntimeError:
            ok[name] = False
    why = []
    if mask is not None:
        why.append("attn_mask given (additive PE bias) -> no flash")
    if dtype not in (torch.float16, torch.bfloat16):
        why.append(f"{str(dtype).replace('torch.', '')} -> no flash (fp16/bf16 only)")
    if q.shape[-1] % 8:
        why.append(f"head dim {q.shape[-1]} not a multiple of 8 -> no flash/efficient")
    if q.shape[-1] != v.shape[-1]:
        why.append(f"q/k head dim {q.shape[-1]} != v head dim {v.shape[-1]}")
    chosen = next((n for n in ("flash", "efficient", "cudnn", "math") if ok[n]), "none")
    return {"backend": chosen, "accepted": [n for n, v_ in ok.items() if v_], "why": "; ".join(why) or "-"}


def _cpu_flash_flops(q, k, v, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(q, k, v)


def _cpu_flash_backward_flops(grad_out, q, k, v, *args, out_shape=None, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out, q, k, v)


#: torch's FlopCounterMode counts the CUDA SDPA kernels but not the CPU flash kernel (torch 2.14); the same
#: formulas (forward: q k^T and P v; backward: the scores recomputed, then four products) for it
CPU_SDPA_FLOPS = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_flops,
                  torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_backward_flops}


def step_flops(model: nn.Module, x: Tensor, y: Tensor) -> int:
    """Floating-point operations of one training forward + cross-entropy + backward of ``model`` on ``x``, as
    ``torch.utils.flop_counter`` counts them: matrix products, convolutions and attention kernels (the CPU
    flash kernel included, :data:`CPU_SDPA_FLOPS`); elementwise work (activations, softmax outside a kernel,
    RoPE's complex products, the optimizer) is not counted. The gradients it leaves are cleared."""
    model.train()
    counter = FlopCounterMode(display=False, custom_mapping=CPU_SDPA_FLOPS)
    with counter:
        F.cross_entropy(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


@SUITES.register("pe-overhead")
def bench_pe_overhead(quick: bool = False) -> list[dict]:
    """Training-step samples/s of every registered PE relative to ``none`` on vit-nano at 32 px
    (64 tokens) and 64 px (256 tokens); batch sizes give the same tokens per step."""
    dev = _device()
    pes = ["none", "ape", "rope-axial"] if quick else list_pes()
    pes = ["none"] + [p for p in pes if p != "none"]
    sizes = ((16, 2),) if quick else ((32, 32), (64, 8))
    reps = 1 if quick else ROUNDS
    block = 1 if quick else STEPS_PER_ROUND
    rows = []
    for img, batch in sizes:
        if dev.type == "cuda":
            batch *= 8
        torch.manual_seed(0)
        x = torch.randn(batch, 3, img, img, device=dev)
        y = torch.randint(0, NUM_CLASSES, (batch,), device=dev)
        models, single, steps, skipped, flops = {}, {}, {}, [], {}
        for pe in pes:
            try:
                models[pe] = PeClassifier("vit-nano", pe, img, 4).to(dev)
            except (ValueError, TypeError) as e:  # a PE that cannot build on images
                skipped.append(f"{pe}: {e}")
                continue
            flops[pe] = step_flops(models[pe], x, y)  # also the first forward + backward (kernels, caches)
            single[pe] = train_step_fn(models[pe], x, y)
            steps[pe] = steps_block(single[pe], block)
        shared, alone = _overhead_times(single, steps, reps, warmup=0 if quick else 1)
        n_tok = (img // 4) ** 2
        for pe in steps:
            if pe == "none":
                continue
            be = {k: sdpa_backends(models[pe], x, d) for k, d in (("fp32", torch.float32), ("bf16", torch.bfloat16))} \
                if dev.type == "cuda" else {"fp32": sdpa_backends(models[pe], x)}
            sdpa = "; ".join(f"{k}: {v['backend']} ({v['why']})" for k, v in be.items())
            times = alone.get(pe, shared)  # seconds per round of this PE and of none
            rounds = round_ratios(times, "none", pe)  # per-round samples/s ratio
            pair = f"; timed in its own interleave with none (its step > {HEAVY_STEP}x none's)" if pe in alone else ""
            n = batch * block  # samples per timed call
            floor = flops["none"] / flops[pe]  # the ratio a step whose time followed its counted FLOPs would give
            rows.append(record(f"pe-overhead train vit-nano {img}px ({n_tok} tok) b{batch} {pe}", f"pe={pe}",
                               "pe=none", n / statistics.median(times[pe]), n / statistics.median(times["none"]),
                               "samples/s", note=f"SDPA {sdpa}; {block} steps per round; per-round ratios "
                               f"{min(rounds):.2f}-{max(rounds):.2f}; FLOP floor {floor:.3f} "
                               f"({flops[pe] / 1e9:.2f} vs {flops['none'] / 1e9:.2f} GFLOP per step)"
                               f"{pair}", sdpa_backend=be, round_ratios=rounds, flops=flops[pe],
                               flops_none=flops["none"], flop_floor=floor, heavy_step=HEAVY_STEP))
        if skipped:
            print("  skipped: " + "; ".join(skipped), flush=True)
        del models, single, steps
    return rows


#: training steps per timed call of each candidate in a round: one step at 64 tokens takes tens of milliseconds,
#: and a single slow step of ``none`` (an OpenMP worker woken late, a page fault) moved every ratio of its round
#: by up to 30 %, which left the rounds' interval wide; a block of steps averages such a step out
STEPS_PER_ROUND = 2
#: interleaved rounds (the PEs timed alone: :data:`HEAVY_REPS`). For the same number of steps, 10 rounds of 2 gave
#: narrower 95 % intervals at 64 tokens than 5 rounds of 4 (median width over the 13 PEs 0.056 and 0.052 in two
#: runs, against 0.070) and about the same at 256 tokens (0.046 against 0.040, widest 0.059 against 0.097);
#: measured 2026-12-07, the suite's interleave on the idle 2-core machine
ROUNDS = 10


def steps_block(step: Callable[[], None], n: int) -> Callable[[], None]:
    """``n`` steps in one call (the unit an interleave times); ``step`` itself when ``n`` is 1."""
    if n == 1:
        return step

    def run() -> None:
        for _ in range(n):
            step()
    return run


#: a PE whose training step takes longer than this many times ``none``'s is timed in its own
#: interleave with ``none``: in the shared round, the large buffers such a step allocates and frees
#: slowed the next candidates by up to ~20 % (measured with LieRE and ComRoPE in the round). The sort
#: reads one training step per PE (right after the FLOP count's forward and backward), which at vit-nano's
#: 64 and 256 tokens took 0.86-1.44x ``none``'s for every PE but LieRE (2.67x and 7.0x; measured
#: 2026-12-06): a threshold of 2 leaves both sides a margin that a single step's noise does not cross.
HEAVY_STEP = 2.0
#: rounds of a heavy PE's own interleave with ``none``
HEAVY_REPS = 3


def _overhead_times(single: dict[str, Callable[[], None]], blocks: dict[str, Callable[[], None]],
                    reps: int, warmup: int = 1) -> tuple[dict, dict]:
    """Per-round seconds of each PE's block of training steps: ``(shared, alone)``; ``shared`` for
    ``none`` and every PE whose warm-up step (one step of ``single``, timed) took at most :data:`HEAVY_STEP`
    times ``none``'s (interleaved rounds of ``blocks`` after ``warmup`` untimed ones), ``alone[pe]`` for each
    heavier PE (its own interleave with ``none``, no untimed round: its ratio lies far from any target).

    Why an untimed round: the first round after the models are built and their FLOPs counted was unlike the
    others, in either direction: in ``bench perf all`` at 64 tokens it gave every PE's ratio 19 % above that PE's
    median over the rounds (``none``'s first block slow; 10 rounds of 2 steps, 2026-12-07), and in the run committed
    the day before (5 rounds of 4 steps) the first round was the lowest of all 13 PEs at 64 tokens. With blocks of 2 steps the
    round costs about 2.5 s at 64 and 3 s at 256 tokens."""
    warm = {}
    for pe, fn in single.items():  # the warm-up step, timed to sort the PEs
        t0 = time.perf_counter()
        fn()
        warm[pe] = time.perf_counter() - t0
    heavy = [pe for pe in blocks if pe != "none" and warm[pe] > HEAVY_STEP * warm["none"]]
    shared = interleaved_times({pe: fn for pe, fn in blocks.items() if pe not in heavy}, reps, warmup=warmup)
    # fewer rounds for the heavy PEs: their ratios lie far from any target, and their steps are long
    alone = {pe: interleaved_times({"none": blocks["none"], pe: blocks[pe]}, min(reps, HEAVY_REPS), warmup=0)
             for pe in heavy}
    return shared, alone


def model_consumption(task_kwargs: dict, x: Tensor, y: Tensor, reps: int) -> float:
    """Training-step samples/s of a ``ClassificationTask`` (vit-nano, ``pe=none``) on ``x``."""
    torch.manual_seed(0)
    task = ClassificationTask(model="vit-nano", pe="none", **task_kwargs)
    t = interleaved({"m": train_step_fn(task, x, y)}, reps, warmup=1)["m"]
    return x.shape[0] / t if not math.isnan(t) else float("nan")

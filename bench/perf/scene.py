"""``bench perf scene``: cost of scene-scale point tokenization for ``--task segmentation``.

* Tokenization of one synthetic 10^5-point scene (grid sampling in NumPy + patching + the per-patch
  mini-PointNet, :mod:`pebench.models.scene_tokenizer`) in points/s, and its share of one training
  step of :class:`~pebench.tasks.segmentation.SegmentationTask` (vit-nano, ``pape``) on the
  same scene: target <= 0.20.
* Serialization (z-order) vs FPS + kNN patching of the same grid-sampled scene: seconds, ratio
  serialize / fps (why ``serialize`` is the default).
* Peak memory of one training step (tokenization + backbone + interpolation + head, forward +
  backward) at 1k / 4k / 8k tokens (``K = 8`` points per token, so 8k .. 66k points) with windowed
  attention (``attn_window=256``, :mod:`pebench.models.vit`) against full attention, for ``pape``
  (fused SDPA kernel: no ``N x N`` tensor) and ``alibi`` (an ``(H, N, N)`` bias is materialized).
  Peak = memory allocated during the step on top of what existed before it: on CUDA
  ``torch.cuda.max_memory_allocated``; on CPU the step runs under ``torch.profiler`` with
  ``profile_memory=True`` and its allocation / free events are summed in time order
  (:func:`pebench.perf.timing.peak_bytes`; ``tracemalloc`` cannot see torch's allocator).
  On CPU full attention is measured up to :data:`FULL_CPU_MAX_TOKENS` tokens only (``alibi``'s
  bias alone is 4 GiB per layer at 16k tokens); above that the full-attention value is
  **extrapolated** and labelled so: the windowed peak measured at that size plus full attention's
  extra over windowed, fitted as ``a T + b T^2`` (``b >= 0``: attention memory grows at most
  quadratically) through the two largest measured sizes.
  A last row per PE: peak growth from the smallest to the largest size over token growth (target
  <= 1.25: linear in tokens, with a margin for allocator noise).

``--quick``: 3k points, one repeat, memory rows at 64 / 256 tokens with windows of 32 (the smoke
test's sizes).
"""
from __future__ import annotations

import time

import numpy as np
import torch

from pebench.datamodules.scenes.scene_common import grid_sample
from pebench.models.scene_tokenizer import fps_knn_patches, serialize_patches
from pebench.tasks.segmentation import SegmentationTask

from .report import record
from .suites import SUITES
from .timing import interleaved, peak_bytes

__all__ = ["bench_scene", "synthetic_scene", "memory_rows", "FULL_CPU_MAX_TOKENS"]

#: memory rows: tokens per attention window, points per token, PEs (fused kernel; materialized bias)
MEMORY_WINDOW, MEMORY_K, MEMORY_PES = 256, 8, ("pape", "alibi")
#: on CPU, full attention is measured up to this many tokens and extrapolated above
FULL_CPU_MAX_TOKENS = 4096


def synthetic_scene(n: int, seed: int = 0) -> np.ndarray:
    """About ``n`` points on the floor and two walls of a room (metres), before grid sampling."""
    rng = np.random.default_rng(seed)
    side = max(1.0, (n / 2500) ** 0.5)  # ~ n points left after 2 cm grid sampling
    m = int(n * 1.5)
    floor = np.c_[rng.uniform(0, side, (m, 2)), np.zeros(m)]
    wall = np.c_[rng.uniform(0, side, m // 2), np.zeros(m // 2), rng.uniform(0, 2.5, m // 2)]
    return np.concatenate([floor, wall]).astype(np.float32)


@SUITES.register("scene")
def bench_scene(quick: bool = False) -> list[dict]:
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    n, k, reps = (3000, 16, 1) if quick else (100_000, 64, 2)
    raw = synthetic_scene(n)
    torch.manual_seed(0)
    task = SegmentationTask(num_classes=20, feat_dim=3, pe="pape", patch_size=k, grid_size=0.02).to(dev)
    opt = torch.optim.AdamW(task.parameters(), lr=1e-4)
    state: dict = {}

    def tokenize() -> None:
        keep = grid_sample(raw, 0.02, train=True, rng=np.random.default_rng(0))[:n]
        coord = torch.from_numpy(raw[keep]).unsqueeze(0).to(dev)
        feat = torch.rand(1, coord.shape[1], 3, device=dev)
        mask = torch.ones(1, coord.shape[1], dtype=torch.bool, device=dev)
        tb, _ = task.tokenizer(coord, feat, mask)
        state.update(inputs={"coord": coord, "feat": feat, "mask": mask}, tokens=int(tb.x.shape[1]))
        if dev.type == "cuda":
            torch.cuda.synchronize()

    tokenize()
    target = torch.randint(0, 20, state["inputs"]["mask"].shape, device=dev)

    def step() -> None:
        loss = task._loss(task(state["inputs"]), target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if dev.type == "cuda":
            torch.cuda.synchronize()

    t = interleaved({"tokenize": tokenize, "step": step}, repeats=reps, warmup=0 if quick else 1)
    m = int(state["inputs"]["mask"].shape[1])
    rows = [record(f"scene tokenization ({m} points, {state['tokens']} tokens of {k})", "tokenize s", "train step s",
                   t["tokenize"], t["step"], "s", higher_is_better=False, target=0.20,
                   note=f"{m / t['tokenize']:.0f} points/s; grid sampling + serialization + patch PointNet; "
                        f"train step = tokenization + vit-nano pape + interpolation + head, fwd + bwd + AdamW")]
    coord, mask = state["inputs"]["coord"], state["inputs"]["mask"]
    c = interleaved({"serialize": lambda: serialize_patches(coord, mask, k, 0.02),
                     "fps": lambda: fps_knn_patches(coord, mask, k)}, repeats=1, warmup=0)
    rows.append(record(f"scene patching ({m} points)", "serialize s", "fps+knn s", c["serialize"], c["fps"], "s",
                       higher_is_better=False, note="z-order serialization vs farthest point sampling + kNN"))
    return rows + memory_rows(quick=quick, dev=dev)


def _scene_batch(tokens: int, k: int, dev: torch.device) -> tuple[dict, torch.Tensor]:
    """One scene of exactly ``tokens * k`` grid-sampled points (``tokens`` serialized patches)."""
    pts = synthetic_scene(tokens * k, seed=1)
    keep = grid_sample(pts, 0.02)[: tokens * k]
    coord = torch.from_numpy(pts[keep]).unsqueeze(0).to(dev)  # (1, M, 3) m
    inp = {"coord": coord, "feat": torch.rand(1, coord.shape[1], 3, device=dev),
           "mask": torch.ones(coord.shape[:2], dtype=torch.bool, device=dev)}
    return inp, torch.randint(0, 20, inp["mask"].shape, device=dev)


def memory_rows(quick: bool = False, dev: torch.device | None = None) -> list[dict]:
    """Peak memory of one segmentation training step, windowed vs full attention (module docstring)."""
    dev = dev or torch.device("cuda" if torch.cuda.is_available() else "cpu")
    # 8,192 tokens: 11 s of profiled steps, 16,384: 57 s, over the all-suites budget
    sizes = (64, 256) if quick else (1024, 4096)
    window, k = (32 if quick else MEMORY_WINDOW), MEMORY_K
    cap = FULL_CPU_MAX_TOKENS if dev.type == "cpu" else max(sizes)
    rows: list[dict] = []
    for pe in MEMORY_PES:
        torch.manual_seed(0)
        task = SegmentationTask(num_classes=20, feat_dim=3, pe=pe, patch_size=k, grid_size=0.02).to(dev)
        full: dict[int, float] = {}
        win: dict[int, float] = {}
        secs: dict[tuple[int, int | None], float] = {}
        for tokens in sizes:
            inp, tgt = _scene_batch(tokens, k, dev)
            for w in (window, None):
                if w is None and tokens > cap:
                    continue
                task.backbone.attn_window = w

                def step() -> None:
                    task._loss(task(inp), tgt).backward()
                    task.zero_grad(set_to_none=True)

                t0 = time.perf_counter()
                (win if w else full)[tokens] = peak_bytes(step, dev) / 2 ** 20
                secs[tokens, w] = time.perf_counter() - t0
        measured = sorted(full)
        extrapolated = [t for t in sizes if t not in full]
        if extrapolated:  # full = windowed (measured) + the extra of full attention, a T + b T^2 (b >= 0)
            (t1, d1), (t2, d2) = [(t, full[t] - win[t]) for t in measured[-2:]]
            b = max(0.0, (d2 / t2 - d1 / t1) / (t2 - t1))
            a = d2 / t2 - b * t2  # through the largest measured size
            for t in extrapolated:
                full[t] = win[t] + a * t + b * t * t
        for tokens in sizes:
            ext = tokens in extrapolated
            note = (f"{tokens * k} points, K = {k}; profiled step {secs[tokens, window]:.1f} s windowed"
                    + ("" if ext else f", {secs[tokens, None]:.1f} s full")
                    + (f"; full attention EXTRAPOLATED: the measured windowed peak + full's extra over windowed "
                       f"fitted as a T + b T^2 (b >= 0) at {measured[-2]} and {measured[-1]} tokens; not run above "
                       f"{cap} tokens on CPU" if ext else ""))
            rows.append(record(f"scene step peak memory, {pe}, {tokens} tokens", f"windowed W={window} MiB",
                               "full (extrapolated) MiB" if ext else "full MiB", win[tokens], full[tokens], "MiB",
                               higher_is_better=False, note=note))
        lo, hi = sizes[0], sizes[-1]
        rows.append(record(f"scene step memory growth {lo} -> {hi} tokens, {pe}, windowed W={window}",
                           "peak ratio", "token ratio", win[hi] / win[lo], hi / lo, "x", higher_is_better=False,
                           target=1.25, note=f"linear in tokens: ratio <= 1.25; full attention over "
                                             f"{measured[0]} -> {measured[-1]} measured tokens grew "
                                             f"{full[measured[-1]] / full[measured[0]]:.2f}x for "
                                             f"{measured[-1] / measured[0]:.0f}x tokens"))
    return rows

"""``bench perf scene``: cost of scene-scale point tokenization for ``--task segmentation``.

* Tokenization of one synthetic 10^5-point scene (grid sampling in NumPy + patching + the per-patch
  mini-PointNet, :mod:`pebench.models.scene_tokenizer`) in points/s, and its share of one training
  step of :class:`~pebench.models.tasks.segmentation.SegmentationTask` (vit-nano, ``pape``) on the
  same scene: target <= 0.20.
* Serialization (z-order) vs FPS + kNN patching of the same grid-sampled scene: seconds, ratio
  serialize / fps (why ``serialize`` is the default).
* On CUDA only: peak memory of one training step at about 1k / 4k / 16k tokens with full attention
  (memory is not tracked on CPU). Windowed attention is not implemented, so there is no windowed row.

``--quick``: a 3·10^4-point scene; ``--tiny``: 3k points, one repeat (the perf test's smoke run).
"""
from __future__ import annotations

import time

import numpy as np
import torch

from .perf import interleaved, record

__all__ = ["bench_scene", "synthetic_scene"]


def synthetic_scene(n: int, seed: int = 0) -> np.ndarray:
    """About ``n`` points on the floor and two walls of a room (metres), before grid sampling."""
    rng = np.random.default_rng(seed)
    side = max(1.0, (n / 2500) ** 0.5)  # ~ n points left after 2 cm grid sampling
    m = int(n * 1.5)
    floor = np.c_[rng.uniform(0, side, (m, 2)), np.zeros(m)]
    wall = np.c_[rng.uniform(0, side, m // 2), np.zeros(m // 2), rng.uniform(0, 2.5, m // 2)]
    return np.concatenate([floor, wall]).astype(np.float32)


def bench_scene(quick: bool = False, tiny: bool = False) -> list[dict]:
    from pebench.models.scene_tokenizer import fps_knn_patches, grid_sample, serialize_patches
    from pebench.models.tasks.segmentation import SegmentationTask

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    n, k, reps = (3000, 16, 1) if tiny else (30_000, 64, 2) if quick else (100_000, 64, 3)
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

    t = interleaved({"tokenize": tokenize, "step": step}, repeats=reps, warmup=0 if tiny else 1)
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
    if dev.type == "cuda" and not tiny:
        for tokens in (1024, 4096, 16384):
            pts = synthetic_scene(tokens * k, seed=1)
            keep = grid_sample(pts, 0.02)[: tokens * k]
            inp = {"coord": torch.from_numpy(pts[keep]).unsqueeze(0).to(dev)}
            inp["feat"] = torch.rand(1, inp["coord"].shape[1], 3, device=dev)
            inp["mask"] = torch.ones(inp["coord"].shape[:2], dtype=torch.bool, device=dev)
            tgt = torch.randint(0, 20, inp["mask"].shape, device=dev)
            torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
            task._loss(task(inp), tgt).backward()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() / 2 ** 20
            rows.append(record(f"scene step memory, full attention, ~{tokens} tokens", "peak MiB", "tokens",
                               peak, tokens, "MiB/token", higher_is_better=False,
                               note=f"{time.perf_counter() - t0:.2f} s; windowed attention not implemented"))
    return rows

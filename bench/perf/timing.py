"""Measurement helpers shared by the ``bench perf`` suites: interleaved timing and peak memory.

Timing discipline (the dev machines are shared): the candidates of one comparison run
interleaved in one process (A, B, A, B, ...) after a warm-up and are compared by their medians
(:func:`interleaved`). Peak memory is what a step allocates on top of what existed before it
(:func:`peak_bytes`): on CUDA from the allocator's statistics, on CPU from ``torch.profiler``'s
memory events (:func:`cpu_peak_bytes`; ``tracemalloc`` cannot see torch's allocator, RSS is too
coarse).
"""
from __future__ import annotations

import statistics
import time
from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile

__all__ = ["interleaved", "cpu_peak_bytes", "peak_bytes"]


def interleaved(fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 1,
                min_time: float = 0.0) -> dict[str, float]:
    """Median seconds per call of each function, run round-robin (A, B, A, B, ...) after ``warmup``
    untimed rounds; keeps going past ``repeats`` until ``min_time`` seconds have been spent."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    start = time.perf_counter()
    while True:
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
        n = len(next(iter(times.values())))
        if n >= repeats and time.perf_counter() - start >= min_time:
            break
    return {k: statistics.median(v) for k, v in times.items()}


def cpu_peak_bytes(fn: Callable[[], object]) -> int:
    """Peak CPU memory ``fn()`` allocates through torch, in bytes: the profiler's ``[memory]``
    allocation / free events (+/- bytes) summed in time order; the running maximum is the peak."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    cur = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        cur += e.nbytes()
        peak = max(peak, cur)
    return peak


def peak_bytes(fn: Callable[[], object], device: torch.device) -> int:
    """Memory allocated during ``fn()`` on top of what existed before it, in bytes: on CUDA
    ``torch.cuda.max_memory_allocated`` minus the allocation at the start, on CPU
    :func:`cpu_peak_bytes`."""
    if device.type != "cuda":
        return cpu_peak_bytes(fn)
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - base

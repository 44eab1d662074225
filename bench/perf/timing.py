"""Measurement helpers shared by the ``bench perf`` suites: interleaved timing and peak memory.

Timing discipline (the dev machines are shared): the candidates of one comparison run
interleaved in one process (A, B, A, B, ..., each round starting one candidate later) after a
warm-up and are compared by their medians (:func:`interleaved`; the per-round times:
:func:`interleaved_times`). Peak memory is what a step allocates on top of what existed before it
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

__all__ = ["interleaved", "interleaved_times", "round_ratios", "cpu_peak_bytes", "peak_bytes"]


def interleaved(fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 1,
                min_time: float = 0.0) -> dict[str, float]:
    """Median seconds per call of each function (:func:`interleaved_times`)."""
    return {k: statistics.median(v) for k, v in interleaved_times(fns, repeats, warmup, min_time).items()}


def interleaved_times(fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 1,
                      min_time: float = 0.0) -> dict[str, list[float]]:
    """Seconds of every call of each function, one entry per round, run round-robin after ``warmup``
    untimed rounds; keeps going past ``repeats`` until ``min_time`` seconds have been spent. Round
    ``r`` starts at the ``r``-th function (A, B, C; B, C, A; C, A, B; ...), so that no candidate always
    runs right after the same one: what one call leaves behind (freed memory the next one faults in
    again, caches) falls on each candidate in turn, and a median discards it."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    keys = list(fns)
    times: dict[str, list[float]] = {k: [] for k in fns}
    start = time.perf_counter()
    while True:
        r = len(times[keys[0]])
        for k in keys[r % len(keys):] + keys[:r % len(keys)]:
            t0 = time.perf_counter()
            fns[k]()
            times[k].append(time.perf_counter() - t0)
        if r + 1 >= repeats and time.perf_counter() - start >= min_time:
            return times


def round_ratios(times: dict[str, list[float]], num: str, den: str) -> list[float]:
    """Per-round ratio ``times[num][r] / times[den][r]`` of two candidates timed in the same rounds
    (4 decimals; their spread over rounds is what a verdict on the ratio has to survive)."""
    return [round(a / b, 4) for a, b in zip(times[num], times[den])]


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

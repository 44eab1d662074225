"""Attention-layer cost of every positional encoding: time and peak memory of forward+backward.

Usage (module API; the CLI wires it as ``bench perf attention``)::

    from pebench.perf.attention import run, main
    rows = run(n_tokens=(256, 1024), head_dim=64, heads=2, json_path="perf.json")
    python -m pebench.perf.attention --tokens 256,1024 --json perf.json

What is measured, for each token count N and each registered PE (plus ``pape`` with
``impl="naive"`` for N <= ``naive_max_tokens``; bigger N are skipped with a note because the
naive path is O(N^2 m) and holds several N x N tensors):

* one step = the PE's ``encode_tokens`` (identity except for additive PEs) + one
  :class:`pebench.models.Attention` layer driven by the PE's ``layer(0)``, then ``backward`` of
  the summed output; batch 1, ``spatial_dims=2`` on the most square grid with ``h * w = N``,
  built with that grid as training grid (so APE does a plain table lookup).
* ``time_ms``: best (minimum) wall time of ``repeats`` steps after one untimed warm-up step
  (the warm-up is the memory-profiled step); the minimum is the estimate least disturbed by
  other processes on a shared machine (``median_ms`` is kept in the JSON rows too). Default
  repeats shrink with N to fit the time budget; with ``repeats == 1`` (default for N > 4096)
  the single memory-profiled step is also the timed one (no warm-up; at that size the
  profiler's overhead is negligible against the O(N^2) attention).
* ``peak_mem_mb``: peak memory *allocated during the step* on top of what existed before it
  (inputs, parameters). On CUDA: ``torch.cuda.max_memory_allocated`` minus the allocation at
  the start. On CPU: the step runs under ``torch.profiler`` with ``profile_memory=True``; its
  ``[memory]`` allocation/free events (bytes, +/-) are summed in time order and the running
  maximum is the peak (:func:`pebench.perf.timing.peak_bytes`).

Output: a markdown table (ratios to plain SDPA, ``none``, and to ``rope-axial``) printed to
stdout, and with ``json_path`` a JSON list of rows
``{"pe", "impl", "n_tokens", "head_dim", "heads", "grid", "time_ms", "median_ms",
"peak_mem_mb", "repeats", "device"}``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from pebench.encodings import LayerPE, build_pe, list_pes
from pebench.encodings.pape import augmented_width, pape_extra_dims
from pebench.models import Attention, grid_coords

from ..core.io import atomic_write_text
from .report import record
from .suites import SUITES
from .timing import interleaved, peak_bytes

__all__ = ["run", "main", "square_grid", "format_table", "attention_step", "bench_budget"]

DEFAULT_TOKENS = (256, 1024, 4096, 16384)


def square_grid(n: int) -> tuple[int, int]:
    """The most square ``(h, w)`` with ``h * w == n`` and ``h <= w``."""
    h = int(math.isqrt(n))
    while n % h:
        h -= 1
    return h, n // h


def _default_repeats(n: int) -> int:
    return 10 if n <= 256 else 5 if n <= 1024 else 3 if n <= 4096 else 1


def _pape_2d_width(head_dim: int) -> int:
    """PaPE's extra q/k columns on a 2-D grid, padding included (5 -> 8 at head dim 64)."""
    return augmented_width(head_dim, pape_extra_dims(2))


class _ZeroPadQK(LayerPE):
    """``none`` with q/k zero-padded by ``extra`` columns: the fused-kernel cost of a wider head
    dim alone (the floor of any exact q/k-augmentation PE such as PaPE's sdpa path)."""

    def __init__(self, extra: int) -> None:
        super().__init__()
        self.extra = extra

    def qk(self, q, k, x, coords):
        return F.pad(q, (0, self.extra)), F.pad(k, (0, self.extra))


def attention_step(pe_name: str, impl: str | None, n: int, head_dim: int, heads: int, device: torch.device,
                   dtype: torch.dtype = torch.float32) -> Callable[[], None]:
    """One forward+backward of ``encode_tokens`` + one :class:`Attention` layer driven by the PE
    (batch 1, 2-D square grid of ``n`` tokens, built with that grid as training grid).
    ``impl="pad8"`` with ``pe_name="none"`` zero-pads q/k to PaPE's head dim (see ``_ZeroPadQK``)."""
    grid = square_grid(n)
    dim = head_dim * heads
    opts = {"impl": impl} if impl and impl != "pad8" else {}
    torch.manual_seed(0)
    pe = build_pe(pe_name, dim=dim, num_heads=heads, depth=1, spatial_dims=2, grid=grid, **opts)
    pe = pe.to(device=device, dtype=dtype)
    attn = Attention(dim, heads).to(device=device, dtype=dtype)
    layer = _ZeroPadQK(_pape_2d_width(head_dim)) if impl == "pad8" else pe.layer(0)
    coords = grid_coords(grid, device).to(dtype)
    x = torch.randn(1, n, dim, device=device, dtype=dtype, requires_grad=True)

    def step() -> None:
        for prm in list(attn.parameters()) + list(pe.parameters()):
            prm.grad = None
        x.grad = None
        y = attn(pe.encode_tokens(x, coords, grid), coords, layer)
        y.sum().backward()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return step


def _measure(pe_name: str, impl: str | None, n: int, head_dim: int, heads: int, repeats: int,
             device: torch.device, dtype: torch.dtype) -> dict:
    grid = square_grid(n)
    step = attention_step(pe_name, impl, n, head_dim, heads, device, dtype)

    # memory-profiled step: the warm-up, or (repeats == 1, big N) the single timed step too
    t0 = time.perf_counter()
    peak = peak_bytes(step, device)
    times = [(time.perf_counter() - t0) * 1e3] if repeats == 1 else []
    for _ in range(repeats if repeats > 1 else 0):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    return {"pe": pe_name, "impl": impl or "default", "n_tokens": n, "head_dim": head_dim, "heads": heads,
            "grid": list(grid), "time_ms": min(times), "median_ms": statistics.median(times), "peak_mem_mb": peak / 2 ** 20,
            "repeats": repeats, "device": str(device)}


def format_table(rows: list[dict], notes: Sequence[str] = ()) -> str:
    """Markdown table with time and memory ratios to ``none`` and ``rope-axial`` at the same N."""
    ref = {(r["pe"], r["n_tokens"]): r for r in rows if r["impl"] == "default"}
    lines = ["| N | PE | impl | time (ms) | × none | × rope-axial | peak mem (MB) | × none | × rope-axial |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|"]

    def ratio(a: float, b: dict | None, key: str) -> str:
        if b is None or b[key] <= 0:
            return "–"
        return f"{a / b[key]:.2f}"

    for r in rows:
        none, rope = ref.get(("none", r["n_tokens"])), ref.get(("rope-axial", r["n_tokens"]))
        lines.append(f"| {r['n_tokens']} | {r['pe']} | {r['impl']} | {r['time_ms']:.1f} | "
                     f"{ratio(r['time_ms'], none, 'time_ms')} | {ratio(r['time_ms'], rope, 'time_ms')} | "
                     f"{r['peak_mem_mb']:.1f} | {ratio(r['peak_mem_mb'], none, 'peak_mem_mb')} | "
                     f"{ratio(r['peak_mem_mb'], rope, 'peak_mem_mb')} |")
    if notes:
        lines.append("")
        lines += [f"- {n}" for n in notes]
    return "\n".join(lines)


def run(n_tokens: Sequence[int] = DEFAULT_TOKENS, head_dim: int = 64, heads: int = 1,
        json_path: str | os.PathLike | None = None, repeats: int | None = None, pes: Sequence[str] | None = None,
        naive_max_tokens: int = 4096, device: str | torch.device | None = None,
        dtype: torch.dtype = torch.float32, verbose: bool = True) -> list[dict]:
    """Benchmark every PE (or ``pes``) at every N; returns the rows (see module docstring)."""
    device = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    names = list(pes) if pes is not None else list_pes()
    unknown = [p for p in names if p not in list_pes()]
    if unknown:
        raise ValueError(f"unknown PE(s) {', '.join(unknown)}; available: {', '.join(list_pes())}")
    rows, notes = [], []
    for n in n_tokens:
        if n < 1:
            raise ValueError(f"token counts must be positive, got {n}")
        reps = repeats if repeats is not None else _default_repeats(n)
        jobs = [(p, None) for p in names if p not in ("pape", "pape-ri")]
        jobs += [(p, "sdpa") for p in names if p in ("pape", "pape-ri")]
        if "pape" in names:
            if n <= naive_max_tokens:
                jobs.append(("pape", "naive"))
            else:
                notes.append(f"pape impl=naive skipped at N={n} (> {naive_max_tokens}: O(N^2 m) logits, "
                             f"several N x N tensors)")
        for pe_name, impl in jobs:
            row = _measure(pe_name, impl, n, head_dim, heads, reps, device, dtype)
            rows.append(row)
            if verbose:
                print(f"  N={n:>6} {pe_name:>10} {row['impl']:>7}: {row['time_ms']:9.1f} ms "
                      f"{row['peak_mem_mb']:9.1f} MB", flush=True)
    table = format_table(rows, notes)
    if verbose:
        print(f"\nAttention forward+backward, batch 1, head_dim {head_dim}, heads {heads}, {device}, "
              f"{str(dtype).replace('torch.', '')}, torch {torch.__version__}, {torch.get_num_threads()} threads\n")
        print(table)
    if json_path is not None:
        atomic_write_text(json_path, json.dumps(rows, indent=1))
    return rows


@SUITES.register("attention-budget")
def bench_budget(quick: bool = False, tiny: bool = False) -> list[dict]:
    """docs/architecture.md §6 attention budgets as ``bench perf`` records: PaPE (sdpa) forward+backward time
    vs ``rope-axial`` at N = 1024, head dim 64 (target <= 1.15x), the kernel floor of that ratio
    (``none`` with q/k zero-padded to PaPE's head dim), and PaPE's peak memory at 4N vs N (linear
    in N: about 4x; an N x N tensor would make it ~16x)."""
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    n, hd = (64, 16) if tiny else (1024, 64)
    reps = 2 if tiny else 10 if quick else 60
    steps = {"none": attention_step("none", None, n, hd, 1, dev),
             "pad8": attention_step("none", "pad8", n, hd, 1, dev),
             "rope-axial": attention_step("rope-axial", None, n, hd, 1, dev),
             "pape": attention_step("pape", "sdpa", n, hd, 1, dev)}
    t = interleaved(steps, reps, warmup=2)
    width = hd + _pape_2d_width(hd)
    rows = [record(f"attention fwd+bwd N={n} d={hd} pape vs rope-axial", "pape (sdpa)", "rope-axial",
                   t["pape"] * 1e3, t["rope-axial"] * 1e3, "ms", higher_is_better=False, target=1.15,
                   note=f"docs/architecture.md §6 budget; batch 1, 1 head, {torch.get_num_threads()} threads, interleaved medians "
                        f"of {reps}"),
            record(f"attention fwd+bwd N={n} d={hd} kernel floor", f"none, q/k padded to {width}", "rope-axial",
                   t["pad8"] * 1e3, t["rope-axial"] * 1e3, "ms", higher_is_better=False,
                   note=f"the fused SDPA kernel at head dim {width} (PaPE's 5 extra dims padded to a multiple of 8) "
                        f"with no PE work: the part of the PaPE/RoPE ratio no PE code can remove"),
            record(f"attention fwd+bwd N={n} d={hd} pape vs none", "pape (sdpa)", "none",
                   t["pape"] * 1e3, t["none"] * 1e3, "ms", higher_is_better=False)]
    peak = {}
    for m in (n, 4 * n):
        peak[m] = peak_bytes(attention_step("pape", "sdpa", m, hd, 1, dev), dev) / 2 ** 20
    rows.append(record(f"attention peak memory pape N={4 * n} vs N={n}", f"N={4 * n}", f"N={n}", peak[4 * n],
                       peak[n], "MB", higher_is_better=False, target=4.5,
                       note="linear in N means ~4x; any N x N tensor would make it ~16x"))
    for r in rows:
        print(f"  {r['name']}: {r['ratio']:.3f}", flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench perf attention",
                                 description="Time and peak memory of one attention layer per PE.")
    ap.add_argument("--tokens", default=",".join(map(str, DEFAULT_TOKENS)),
                    help="comma-separated token counts N (default %(default)s)")
    ap.add_argument("--json", metavar="FILE", default=None, help="write the rows as JSON to FILE")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats per cell (default: by N)")
    ap.add_argument("--head-dim", type=int, default=64, help="per-head dimension d (default %(default)s)")
    ap.add_argument("--heads", type=int, default=1,
                    help="number of heads; the layer width is heads x head-dim (default %(default)s)")
    ap.add_argument("--pes", default=None, help="comma-separated PE names (default: all)")
    args = ap.parse_args(argv)
    try:
        tokens = [int(t) for t in args.tokens.split(",") if t.strip()]
    except ValueError:
        ap.error(f"--tokens must be comma-separated integers, got {args.tokens!r}")
    if args.repeats is not None and args.repeats < 1:
        ap.error("--repeats must be >= 1")
    pes = [p.strip() for p in args.pes.split(",")] if args.pes else None
    try:
        run(tokens, head_dim=args.head_dim, heads=args.heads, json_path=args.json, repeats=args.repeats, pes=pes)
    except ValueError as e:
        ap.error(str(e))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Attention-layer cost of every positional encoding: time and peak memory per PE, attention
implementation and phase (``bench perf attention``), and the attention budget of ``bench perf all``.

Usage (module API; the CLI wires it as ``bench perf attention``)::

    from pebench.perf.attention import run, main
    rows = run(n_tokens=(256, 1024), head_dim=64, heads=1, json_path="perf.json")
    bench perf attention --tokens 1024,4096,16384 --json attn.json --md attn.md

What is measured, for each token count N, each registered PE (plus ``pape`` with its own option
``impl=naive``, the O(N^2 m) reference, for N <= ``naive_max_tokens``; bigger N are skipped with a
note), each attention implementation of :mod:`pebench.models.attention` the PE's layer accepts
(``check_pe_impl``: ``sdpa`` for PEs without a bias, ``dense`` and ``flex`` for bias PEs, ``flex``
also for the PEs without a bias, only ``dense`` for PaPE naive; ``dense`` is left out for the PEs
without a bias, where it is the same call as ``sdpa``) and each phase that implementation can run
on the device (``check_forced_impl``: on CPU ``flex`` has no backward, so evaluation only; the
``train`` phase of a PE in :data:`TRAIN_MAX_TOKENS` is skipped, with a note, above its limit):

* ``train``: one forward+backward of the PE's ``encode_tokens`` (identity except for additive PEs)
  + one :class:`pebench.models.Attention` layer driven by the PE's ``layer(0)``, then ``backward``
  of the summed output; ``eval``: the same forward under ``torch.no_grad()`` in eval mode (what the
  analyses and the extrapolation evaluation run). Batch 1, ``spatial_dims=2`` on the most square
  grid with ``h * w = N``, built with that grid as training grid (so APE does a plain table lookup).
* ``time_ms``: best (minimum) wall time of ``repeats`` steps after untimed warm-up steps (the
  memory-profiled step, and for ``flex`` first the compilation); the minimum is the estimate least
  disturbed by other processes on a shared machine (``median_ms`` is kept in the JSON rows too).
  Default repeats shrink with N; with ``repeats == 1`` (default for N > 4096) the single
  memory-profiled step is also the timed one (at that size the profiler's overhead is negligible
  against the O(N^2) attention), except for ``flex``, whose compilation is never timed.
* ``peak_mem_mb``: peak memory *allocated during the step* on top of what existed before it
  (inputs, parameters). On CUDA: ``torch.cuda.max_memory_allocated`` minus the allocation at
  the start. On CPU: the step runs under ``torch.profiler`` with ``profile_memory=True``; its
  ``[memory]`` allocation/free events (bytes, +/-) are summed in time order and the running
  maximum is the peak (:func:`pebench.perf.timing.peak_bytes`).
* ``auto``: whether ``attention_impl=auto`` (what ``bench run`` uses) picks this implementation for
  this PE, device, phase and N (:func:`pebench.models.attention.choose_impl`).

Memory growth (the target: peak memory linear in N for every PE in evaluation, <= 4.5x
from 1,024 to 4,096 tokens): for every (PE, implementation, phase) measured at both N and 4N, the
ratio of the peaks (:func:`memory_growth`); an ``N x N`` tensor makes it ~16x.

Output: markdown tables (time and memory per row with ratios to ``none`` and ``rope-axial`` of the
same implementation family and phase, then the memory growth) printed to stdout and with
``md_path`` written as a complete page; with ``json_path`` a JSON list of rows
``{"pe", "variant", "impl", "phase", "auto", "n_tokens", "head_dim", "heads", "grid", "time_ms",
"median_ms", "peak_mem_mb", "repeats", "device"}``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import time
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from pebench.encodings import LayerPE, build_pe, list_pes
from pebench.encodings.pape import augmented_width, pape_extra_dims
from pebench.models import Attention, grid_coords
from pebench.models import attention as attention_module
from pebench.models.attention import (
    IMPLS,
    AttentionImplError,
    bias_kind,
    check_forced_impl,
    check_pe_impl,
    choose_impl,
    learned_bias,
)

from ..core.io import atomic_write_text
from ..runner.numerics import denormals_flushed, flush_denormals
from .report import code_commit, record, with_commit
from .suites import SUITES
from .timing import interleaved_times, peak_bytes, round_ratios

__all__ = ["run", "main", "square_grid", "format_table", "attention_step", "bench_budget", "layer_impls",
           "memory_growth", "PHASES", "MEMORY_GROWTH_TARGET", "STEP_VARIANTS"]

#: default ``--tokens``; docs/perf_attention.md adds 16384 (``--tokens 256,1024,4096,16384``)
DEFAULT_TOKENS = (256, 1024, 4096)
#: the ``train`` phase is skipped above this many tokens for these PEs (with a note): LieRE holds a
#: ``(d, d)`` rotation per token and head, and its exponential's backward an eigendecomposition of each,
#: O(N d^2) memory: one step at 16,384 tokens (1 head of 64) allocates 4.2 GB at its peak (docs/perf_attention.md;
#: 5.1 GB of resident memory in a separate run) with the spectral gradient; 65,536 would need about 20 GB.
#: (Matrix_exp's own backward, before 2026-12-06, needed 4.4 GB at 4,096 tokens, so the limit was 4,096.)
TRAIN_MAX_TOKENS = {"liere": 16384}
#: the phases measured: ``train`` (forward+backward) and ``eval`` (forward, no grad)
PHASES = ("train", "eval")
#: issue #30: peak memory at 4N <= this times the peak at N (linear in N: ~4)
MEMORY_GROWTH_TARGET = 4.5


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


class _FrozenAugment:
    """A PaPE layer's ``augment`` run once (no gradient) and then returned as a constant: the layer's step keeps all
    of PaPE's path (the concatenations into q and k, the wider kernel, the coordinate cache) except that augmentation's
    own forward and backward, so ``pape`` against this step is what the augmentation costs in place."""

    def __init__(self, augment: Callable[..., tuple[Tensor, Tensor | None]]) -> None:
        self.augment = augment
        self.kept: tuple[Tensor, Tensor | None] | None = None

    def __call__(self, *args: Any) -> tuple[Tensor, Tensor | None]:
        if self.kept is None:
            with torch.no_grad():
                qa, const = self.augment(*args)
            self.kept = (qa.detach(), None if const is None else const.detach())
        return self.kept


#: ``attention_step``'s benchmark-only variants: ``impl`` -> (the PE they apply to, the PE's own ``impl`` option)
STEP_VARIANTS = {"pad8": ("none", None), "frozen-augment": ("pape", "sdpa")}


def attention_step(pe_name: str, impl: str | None, n: int, head_dim: int, heads: int, device: torch.device,
                   dtype: torch.dtype = torch.float32, attn_impl: str = "auto",
                   train: bool = True) -> Callable[[], None]:
    """One step of ``encode_tokens`` + one :class:`Attention` layer driven by the PE (batch 1, 2-D
    square grid of ``n`` tokens, built with that grid as training grid): forward+backward when
    ``train``, else a forward under ``torch.no_grad()`` in eval mode. ``impl``: the PE's own ``impl``
    option (PaPE: ``sdpa`` | ``naive``), or one of :data:`STEP_VARIANTS`: ``"pad8"`` with ``pe_name="none"``
    zero-pads q/k to PaPE's head dim (see ``_ZeroPadQK``), ``"frozen-augment"`` with ``pe_name="pape"`` holds PaPE's
    q augmentation constant (see ``_FrozenAugment``); ``attn_impl``: the attention implementation
    (:data:`pebench.models.attention.IMPLS`)."""
    grid = square_grid(n)
    dim = head_dim * heads
    variant = STEP_VARIANTS.get(impl or "")
    if variant is not None and variant[0] != pe_name:
        raise ValueError(f"attention_step impl={impl!r} applies to pe={variant[0]!r}, not {pe_name!r}")
    own_impl = variant[1] if variant is not None else impl
    opts = {"impl": own_impl} if own_impl else {}
    torch.manual_seed(0)
    pe = build_pe(pe_name, dim=dim, num_heads=heads, depth=1, spatial_dims=2, grid=grid, **opts)
    pe = pe.to(device=device, dtype=dtype).train(train)
    attn = Attention(dim, heads).to(device=device, dtype=dtype).train(train)
    attn.impl = attn_impl
    layer = _ZeroPadQK(_pape_2d_width(head_dim)) if impl == "pad8" else pe.layer(0)
    if impl == "frozen-augment":
        layer.augment = _FrozenAugment(layer.augment)  # an instance attribute: this step's layer only
    coords = grid_coords(grid, device).to(dtype)
    x = torch.randn(1, n, dim, device=device, dtype=dtype, requires_grad=train)

    def step() -> None:
        if train:
            for prm in list(attn.parameters()) + list(pe.parameters()):
                prm.grad = None
            x.grad = None
            y = attn(pe.encode_tokens(x, coords, grid), coords, layer)
            y.sum().backward()
        else:
            with torch.no_grad():
                attn(pe.encode_tokens(x, coords, grid), coords, layer)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    step.attention = attn  # type: ignore[attr-defined]  # its impls_used say what ran
    step.layer = layer  # type: ignore[attr-defined]  # the LayerPE the step drives
    return step


def _measure(pe_name: str, impl: str | None, n: int, head_dim: int, heads: int, repeats: int,
             device: torch.device, dtype: torch.dtype, attn_impl: str = "auto", train: bool = True) -> dict:
    grid = square_grid(n)
    step = attention_step(pe_name, impl, n, head_dim, heads, device, dtype, attn_impl, train)
    if attn_impl == "flex":
        step()  # the compilation (seconds on CPU): never timed, never in the memory peak

    # memory-profiled step: the warm-up, or (repeats == 1, big N) the single timed step too
    t0 = time.perf_counter()
    peak = peak_bytes(step, device)
    times = [(time.perf_counter() - t0) * 1e3] if repeats == 1 else []
    for _ in range(repeats if repeats > 1 else 0):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    used = {i for _, i in step.attention.impls_used}  # type: ignore[attr-defined]
    if used != {attn_impl}:
        raise RuntimeError(f"{pe_name}: asked for attention impl {attn_impl}, ran {sorted(used)}")
    return {"pe": pe_name, "variant": f"impl={impl}" if impl == "naive" else "default", "impl": attn_impl,
            "phase": "train" if train else "eval", "n_tokens": n, "head_dim": head_dim, "heads": heads,
            "grid": list(grid), "time_ms": min(times), "median_ms": statistics.median(times),
            "peak_mem_mb": peak / 2 ** 20, "repeats": repeats, "device": str(device)}


def layer_impls(pe_name: str, impl: str | None, head_dim: int, device_type: str, train: bool,
                impls: Sequence[str] = ("sdpa", "dense", "flex", "bias-flash")) -> list[str]:
    """The attention implementations (of ``impls``) that can compute this PE's attention on
    ``device_type`` in this phase (``check_pe_impl``, ``check_forced_impl``); ``dense`` is left out
    for PEs without a bias (there it is the same call as ``sdpa``), ``bias-flash`` for a bias without
    parameters (there it is the same forward as ``dense``, which then runs the flash kernel too) and for
    PaPE ``impl=naive`` (a reference path, always ``dense``)."""
    opts = {"impl": impl} if impl else {}
    layer = build_pe(pe_name, dim=head_dim, num_heads=1, depth=1, spatial_dims=2, grid=(2, 2), **opts).layer(0)
    out = []
    for name in impls:
        if name == "dense" and bias_kind(layer) == "none":
            continue
        if name == "bias-flash" and (bias_kind(layer) != "flex" or not learned_bias(layer)):
            continue  # auto never picks it there (PaPE naive: the reference path, always dense)
        try:
            check_pe_impl(name, layer)
            check_forced_impl(name, device_type, train)
        except AttentionImplError:
            continue
        out.append(name)
    return out


def _auto_choice(pe_name: str, impl: str | None, head_dim: int, device: torch.device, train: bool, n: int,
                 dtype: torch.dtype) -> str:
    opts = {"impl": impl} if impl else {}
    layer = build_pe(pe_name, dim=head_dim, num_heads=1, depth=1, spatial_dims=2, grid=(2, 2), **opts).layer(0)
    return choose_impl("auto", bias_kind(layer), device.type, train, n, dtype, learned=learned_bias(layer))


def _key(r: dict) -> tuple:
    return r["pe"], r["variant"], r["impl"], r["phase"]


def memory_growth(rows: Sequence[dict], target: float = MEMORY_GROWTH_TARGET) -> list[dict]:
    """Peak memory at 4N over N for every (PE, variant, implementation, phase) measured at both
    (the largest such N first): ``{"pe", "variant", "impl", "phase", "auto", "n", "ratio",
    "meets_target"}``; linear in N gives ~4, an ``N x N`` tensor ~16."""
    cells = {(_key(r), r["n_tokens"]): r for r in rows}
    out = []
    for (key, n), r in cells.items():
        big = cells.get((key, 4 * n))
        if big is None or r["peak_mem_mb"] <= 0:
            continue
        ratio = big["peak_mem_mb"] / r["peak_mem_mb"]
        out.append({"pe": key[0], "variant": key[1], "impl": key[2], "phase": key[3], "auto": big["auto"],
                    "n": n, "ratio": ratio, "meets_target": ratio <= target})
    return out


def format_table(rows: list[dict], notes: Sequence[str] = ()) -> str:
    """Markdown tables: time and memory per row with ratios to ``none`` and ``rope-axial`` at the same
    N and phase (``none`` / ``rope-axial`` of the same implementation when measured, else of
    ``sdpa``); then the memory growth from N to 4N per PE, implementation and phase."""
    ref = {(r["pe"], r["impl"], r["phase"], r["n_tokens"]): r for r in rows if r["variant"] == "default"}
    lines = ["| N | phase | PE | variant | attention | auto | time (ms) | × none | × rope-axial | peak mem (MB) "
             "| × none | × rope-axial |",
             "|---:|---|---|---|---|:-:|---:|---:|---:|---:|---:|---:|"]

    def base(pe: str, r: dict) -> dict | None:
        return ref.get((pe, r["impl"], r["phase"], r["n_tokens"])) or ref.get((pe, "sdpa", r["phase"], r["n_tokens"]))

    def ratio(a: float, b: dict | None, key: str) -> str:
        if b is None or b[key] <= 0:
            return "–"
        return f"{a / b[key]:.2f}"

    for r in sorted(rows, key=lambda r: (r["n_tokens"], r["phase"] != "train")):
        none, rope = base("none", r), base("rope-axial", r)
        lines.append(f"| {r['n_tokens']} | {r['phase']} | {r['pe']} | {r['variant']} | {r['impl']} | "
                     f"{'yes' if r['auto'] else ''} | {r['time_ms']:.1f} | "
                     f"{ratio(r['time_ms'], none, 'time_ms')} | {ratio(r['time_ms'], rope, 'time_ms')} | "
                     f"{r['peak_mem_mb']:.1f} | {ratio(r['peak_mem_mb'], none, 'peak_mem_mb')} | "
                     f"{ratio(r['peak_mem_mb'], rope, 'peak_mem_mb')} |")
    growth = memory_growth(rows)
    if growth:
        lines += ["", f"Peak memory growth at 4× the tokens (linear in N: ~4×; target ≤ {MEMORY_GROWTH_TARGET:g}×, "
                      "for every PE in evaluation under `auto`):", "",
                  f"| N → 4N | phase | PE | variant | attention | auto | peak × | ≤ {MEMORY_GROWTH_TARGET:g} |",
                  "|---|---|---|---|---|:-:|---:|:-:|"]
        for g in sorted(growth, key=lambda g: (g["n"], g["phase"] != "eval", not g["auto"])):
            ok = "yes" if g["meets_target"] else "**no**"
            lines.append(f"| {g['n']} → {4 * g['n']} | {g['phase']} | {g['pe']} | {g['variant']} | {g['impl']} | "
                         f"{'yes' if g['auto'] else ''} | {g['ratio']:.2f} | {ok} |")
    if notes:
        lines.append("")
        lines += [f"- {n}" for n in notes]
    return "\n".join(lines)


def run(n_tokens: Sequence[int] = DEFAULT_TOKENS, head_dim: int = 64, heads: int = 1,
        json_path: str | os.PathLike | None = None, repeats: int | None = None, pes: Sequence[str] | None = None,
        naive_max_tokens: int = 4096, device: str | torch.device | None = None,
        dtype: torch.dtype = torch.float32, verbose: bool = True,
        impls: Sequence[str] = ("sdpa", "dense", "flex", "bias-flash"),
        phases: Sequence[str] = PHASES, md_path: str | os.PathLike | None = None) -> list[dict]:
    """Benchmark every PE (or ``pes``) at every N with every implementation of ``impls`` it accepts,
    in every phase of ``phases``; returns the rows (see the module docstring)."""
    device = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    names = list(pes) if pes is not None else list_pes()
    unknown = [p for p in names if p not in list_pes()]
    if unknown:
        raise ValueError(f"unknown PE(s) {', '.join(unknown)}; available: {', '.join(list_pes())}")
    bad = [i for i in impls if i not in IMPLS or i == "auto"] + [p for p in phases if p not in PHASES]
    if bad:
        raise ValueError(f"unknown implementation(s) / phase(s) {', '.join(bad)}; implementations: sdpa, dense, "
                         f"flex; phases: {', '.join(PHASES)}")
    if any(n < 1 for n in n_tokens):
        raise ValueError(f"token counts must be positive, got {', '.join(map(str, n_tokens))}")
    rows, notes = [], []
    variants = [(p, None) for p in names] + ([("pape", "naive")] if "pape" in names else [])
    # one FlexAttention compilation per input shape and score_mod: more than attend()'s per-process limit
    # (restored afterwards, so the rest of the process keeps attend()'s own limit)
    old_limit = attention_module.FLEX_MAX_SHAPES
    attention_module.FLEX_MAX_SHAPES = max(old_limit, 256)
    try:
        for n in n_tokens:
            reps = repeats if repeats is not None else _default_repeats(n)
            for pe_name, impl in variants:
                if impl == "naive" and n > naive_max_tokens:
                    notes.append(f"pape impl=naive skipped at N={n} (> {naive_max_tokens}: O(N^2 m) logits, "
                                 f"several N x N tensors)")
                    continue
                for phase in phases:
                    train = phase == "train"
                    if train and impl is None and n > TRAIN_MAX_TOKENS.get(pe_name, n):
                        notes.append(f"{pe_name} train skipped at N={n} (> {TRAIN_MAX_TOKENS[pe_name]}: "
                                     f"O(N d^2) memory in its per-token matrix exponentials' backward)")
                        continue
                    auto = _auto_choice(pe_name, impl, head_dim, device, train, n, dtype)
                    for attn_impl in layer_impls(pe_name, impl, head_dim, device.type, train, impls):
                        row = _measure(pe_name, impl, n, head_dim, heads, reps, device, dtype, attn_impl, train)
                        row["auto"] = attn_impl == auto
                        rows.append(row)
                        if verbose:
                            print(f"  N={n:>6} {phase:>5} {pe_name:>10} {row['variant']:>10} {attn_impl:>5}: "
                                  f"{row['time_ms']:9.1f} ms {row['peak_mem_mb']:9.1f} MB", flush=True)
    finally:
        attention_module.FLEX_MAX_SHAPES = old_limit
    title = (f"Attention per PE, implementation and phase (train: forward+backward; eval: forward, no grad), "
             f"batch 1, head_dim {head_dim}, heads {heads}, {device}, {str(dtype).replace('torch.', '')}, "
             f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    table = format_table(rows, notes)
    if verbose:
        print(f"\n{title}\n")
        print(table)
    if json_path is not None:
        atomic_write_text(json_path, json.dumps(with_commit(rows), indent=1))
    if md_path is not None:
        atomic_write_text(md_path, _page(title, table, n_tokens, denormals_flushed()))
    return rows


def _page(title: str, table: str, n_tokens: Sequence[int], flushed: bool) -> str:
    """The markdown page ``--md`` writes (docs/perf_attention.md): how it was made, then the tables."""
    try:
        load = "load average %.1f %.1f %.1f at the end" % os.getloadavg()
    except OSError:
        load = "load n/a"
    return (f"# Attention cost per positional encoding\n\n"
            f"Generated by `bench perf attention --tokens {','.join(map(str, n_tokens))} --md FILE` "
            f"(module `pebench.perf.attention`; what each column means: its docstring) at commit {code_commit()}, on "
            f"{platform.machine()} with {os.cpu_count()} CPUs, {load}. `time` is the best of the repeats; "
            f"`peak mem` is the memory allocated during the step on top of inputs and parameters; `auto` marks "
            f"the implementation `bench run` picks (`--attention-impl auto`). "
            + ("Denormals are flushed to zero, as in `bench run`. " if flushed else
               "Denormals are NOT flushed to zero (`bench run` flushes them where the CPU can). ")
            + f"Ratios are to `none` / `rope-axial` with the same implementation and phase "
            f"(`sdpa` where those have no such implementation).\n\n{title}\n\n{table}\n")


@SUITES.register("attention-budget")
def bench_budget(quick: bool = False) -> list[dict]:
    """docs/architecture.md §6 attention budgets as ``bench perf`` records: PaPE (sdpa) forward+backward time
    vs ``rope-axial`` at N = 1024, head dim 64 (target <= 1.15x), the kernel floor of that ratio
    (``none`` with q/k zero-padded to PaPE's head dim), PaPE with its q augmentation held constant
    (``_FrozenAugment``: its time subtracted from PaPE's is what the augmentation costs in place), and PaPE's
    peak memory at 4N vs N (linear in N: about 4x; an N x N tensor would make it ~16x)."""
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    n, hd = (64, 16) if quick else (1024, 64)
    reps = 2 if quick else 60
    steps = {"none": attention_step("none", None, n, hd, 1, dev),
             "pad8": attention_step("none", "pad8", n, hd, 1, dev),
             "rope-axial": attention_step("rope-axial", None, n, hd, 1, dev),
             "pape": attention_step("pape", "sdpa", n, hd, 1, dev),
             "frozen": attention_step("pape", "frozen-augment", n, hd, 1, dev)}
    times = interleaved_times(steps, reps, warmup=2)
    t = {k: statistics.median(v) for k, v in times.items()}
    width = hd + _pape_2d_width(hd)
    rows = [record(f"attention fwd+bwd N={n} d={hd} pape vs rope-axial", "pape (sdpa)", "rope-axial",
                   t["pape"] * 1e3, t["rope-axial"] * 1e3, "ms", higher_is_better=False, target=1.15,
                   note=f"docs/architecture.md §6 budget; batch 1, 1 head, {torch.get_num_threads()} threads, interleaved medians "
                        f"of {reps}", round_ratios=round_ratios(times, "pape", "rope-axial")),
            record(f"attention fwd+bwd N={n} d={hd} kernel floor", f"none, q/k padded to {width}", "rope-axial",
                   t["pad8"] * 1e3, t["rope-axial"] * 1e3, "ms", higher_is_better=False,
                   note=f"the fused SDPA kernel at head dim {width} (PaPE's 5 extra dims padded to a multiple of 8) "
                        f"with no PE work: the part of the PaPE/RoPE ratio no PE code can remove"),
            record(f"attention fwd+bwd N={n} d={hd} pape, augmentation held constant", "pape (sdpa), q augmentation "
                   "held constant", "rope-axial", t["frozen"] * 1e3, t["rope-axial"] * 1e3, "ms", higher_is_better=False,
                   note="PaPE's q augmentation computed once without gradient and reused: the layer's step with all of "
                        "PaPE's path but that augmentation's forward and backward, so pape's time minus this one is what "
                        "the augmentation costs in place", round_ratios=round_ratios(times, "frozen", "rope-axial")),
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
                                 description="Time and peak memory of one attention layer per PE, attention "
                                             "implementation and phase (train: forward+backward; eval: forward "
                                             "without gradients).")
    ap.add_argument("--tokens", default=None,
                    help=f"comma-separated token counts N (default {','.join(map(str, DEFAULT_TOKENS))}; "
                         f"docs/perf_attention.md: 256,1024,4096,16384)")
    ap.add_argument("--json", metavar="FILE", default=None, help="write the rows as JSON to FILE")
    ap.add_argument("--md", metavar="FILE", default=None, help="write the tables as a markdown page to FILE")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats per cell (default: by N)")
    ap.add_argument("--head-dim", type=int, default=None, help="per-head dimension d (default 64)")
    ap.add_argument("--heads", type=int, default=1,
                    help="number of heads; the layer width is heads x head-dim (default %(default)s)")
    ap.add_argument("--pes", default=None, help="comma-separated PE names (default: all)")
    ap.add_argument("--impls", default="sdpa,dense,flex,bias-flash",
                    help="attention implementations to measure, each where the PE accepts it (default %(default)s)")
    ap.add_argument("--phases", default=",".join(PHASES), help="train and / or eval (default %(default)s)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke-test sizes (N = 16, 64; head dim 16; one repeat): the code paths, not numbers")
    args = ap.parse_args(argv)
    # before torch's first parallel operation, or its worker threads keep denormals (pebench.runner.numerics):
    # PaPE's logits underflow, and with denormals its layer trained 3.4x slower at N = 1,024 (2026-12-06)
    flush_denormals()
    try:
        tokens = [int(t) for t in (args.tokens or ("16,64" if args.quick else ",".join(map(str, DEFAULT_TOKENS))))
                  .split(",") if t.strip()]
    except ValueError:
        ap.error(f"--tokens must be comma-separated integers, got {args.tokens!r}")
    if args.repeats is not None and args.repeats < 1:
        ap.error("--repeats must be >= 1")
    pes = [p.strip() for p in args.pes.split(",")] if args.pes else None
    impls = [i.strip() for i in args.impls.split(",") if i.strip()]
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    try:
        run(tokens, head_dim=args.head_dim or (16 if args.quick else 64), heads=args.heads, json_path=args.json,
            repeats=args.repeats or (1 if args.quick else None), pes=pes, impls=impls, phases=phases,
            md_path=args.md, naive_max_tokens=64 if args.quick else 4096)
    except ValueError as e:
        ap.error(str(e))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``bench perf``: performance benchmarks of pebench (issue #7; docs/architecture.md §6 budgets).

``PERF_COMMANDS`` maps ``bench perf WHAT`` to ``fn(argv) -> exit code``:

* ``backbone``    pebench ViT (tokenizer + backbone + head) vs timm ``VisionTransformer`` of the
  same shape: training-step and inference samples/s (:mod:`pebench.perf.model`).
* ``attention-budget`` docs/architecture.md §6: PaPE attention forward+backward vs RoPE at N = 1024, head
  dim 64, the kernel floor of that ratio, PaPE with its q augmentation held constant (what that augmentation
  costs in place), PaPE peak memory at 4N vs N (:mod:`pebench.perf.attention`).
* ``pe-overhead`` training-step samples/s of every registered PE relative to ``none``; on CUDA
  also the SDPA backend each PE gets and why (:mod:`pebench.perf.model`).
* ``analysis``    geometry evaluator vs one validation epoch; SSDC (N=4096), EED (D=768) vs a
  matmul of the same size (:mod:`pebench.perf.data`).
* ``data``        loader samples/s (decode + transforms) vs vit-nano training-step samples/s per
  modality at the default ``num_workers`` (:mod:`pebench.perf.data`).
* ``e2e``         ``bench run`` (defaults) wall time vs the 3-minute budget (subprocess).
* ``dino``        DINO training step (2 + N crops, teacher, EMA) vs classification steps on the same
  crops; per-checkpoint EED evaluation vs one training epoch (:mod:`pebench.perf.dino`).
* ``scene``       scene tokenization (grid sampling + patching) of a 10^5-point scene in points/s and
  its share of a segmentation training step; serialization vs FPS + kNN patching; the peak memory
  of a training step with windowed vs full attention at 1k / 4k / 16k tokens (:mod:`pebench.perf.scene`).
* ``detection`` detection training step (ViTDet simple pyramid + FCOS) vs classification on the same
  backbone, PE, grid and images (the head's overhead); ``shapes-det`` loader samples/s (COCO JSON +
  JPEG through the coco reader) vs the detection model's consumption (:mod:`pebench.perf.detection`).
* ``analyze``     ``bench analyze --analyses geometry`` (probe 256, K = 8, null band) on timm's 12-block
  ViT-S/14 over 256 real photographs at 224 px vs one forward pass over them, and its wall time vs
  a 3-minute budget (:mod:`pebench.perf.analyze`; minutes: not part of ``all``).
* ``peers``       pebench's PEs vs PyPI peers (timm's RoPE ViTs, rotary-embedding-torch, x-transformers'
  ALiBi; the ``perf`` extra): throughput and peak memory ratios with 95 % intervals over interleaved
  rounds (:mod:`pebench.perf.peers`; not part of ``all``).
* ``contention``  a short training beside one and two competing 2-thread processes of the suite's making, per
  thread setting (default, ``OMP_WAIT_POLICY=PASSIVE``, ``GOMP_SPINCOUNT=30000``, 1 thread, ``auto``: what
  ``bench`` chooses): loaded / idle
  wall time, and each setting's idle and loaded time against the default's
  (:mod:`pebench.perf.contention`; not part of ``all``).
* ``startup``     wall time of ``bench --help`` and ``bench run --help`` (fresh processes) vs the
  1-second budget: argument parsing must not import torch (:mod:`pebench.perf.startup`).
* ``attention``   one attention layer per PE, attention implementation (sdpa / dense / flex) and phase
  (training, evaluation): time, peak memory, memory growth N -> 4N (:mod:`pebench.perf.attention`, own
  options and output format).
* ``all``         everything above except ``attention``, ``analyze``, ``peers`` and ``contention``.

Each command takes ``[--json FILE] [--md FILE] [--quick]``; ``--quick`` runs the same code paths at
smoke-test sizes with one repeat (seconds per suite; the tests use it; the numbers mean nothing;
``all --quick`` leaves out ``e2e``, ``e2e --quick`` runs ``bench run --fast-dev-run``). Every
command first flushes denormals to zero (:func:`pebench.runner.numerics.flush_denormals`), as ``bench run``
does, so the suites time what runs do. After the suites' records come one record per suite with
its wall time (``b``: the total) and, for ``all``, the total against :data:`ALL_BUDGET_S` (300 s on
an idle 2-core CPU, issue #30). The JSON is a list of records
``{"name", "a", "b", "a_value", "b_value", "unit", "ratio", "higher_is_better", "target",
"meets_target", "note"}`` with ``ratio = a_value / b_value``; ``target`` (optional) is a bound on
the ratio: a lower bound when ``higher_is_better`` else an upper bound (:mod:`pebench.perf.report`).

Timing discipline (the dev machines are shared): the candidates of one comparison are run
interleaved in one process (A, B, A, B, ...) after a warm-up and compared by their medians
(:mod:`pebench.perf.timing`).

Layout: this module (torch-free: ``bench --help`` imports it) holds the commands; the suite
names and the module defining each are in :mod:`pebench.perf.suites`, and a suite's module is
imported only when one of its suites runs.
"""
from __future__ import annotations

import argparse
import functools
import importlib
import sys
import time
from typing import Callable, Sequence

from pebench.runner.numerics import flush_denormals

from .report import machine_header, record, write_outputs
from .suites import ALL_SUITES, SUITE_MODULES, load_suite

__all__ = ["PERF_COMMANDS", "ALL_BUDGET_S", "main"]


#: wall-time budget of ``bench perf all`` on an idle 2-core CPU, seconds
ALL_BUDGET_S = 300.0


def _parser(what: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=f"bench perf {what}")
    ap.add_argument("--json", metavar="FILE", default=None, help="write the records as JSON to FILE")
    ap.add_argument("--md", metavar="FILE", default=None, help="write the markdown table to FILE")
    ap.add_argument("--quick", action="store_true",
                    help="the same code paths at tiny sizes and one repeat, in seconds (a smoke test: the "
                         "numbers mean nothing; `all` leaves out the end-to-end run)")
    return ap


def _run(what: str, names: Sequence[str], argv: Sequence[str] | None = None) -> int:
    """``bench perf WHAT``: run the suites ``names`` in order; print and write their records, then one
    record per suite with its wall time (share of the total) and, for ``all``, the total against
    :data:`ALL_BUDGET_S`."""
    args = _parser(what).parse_args(argv)
    flushed = flush_denormals()  # as in bench run: the suites measure what runs do (see pebench.runner.numerics)
    header = machine_header() + (" Denormals flushed to zero, as in `bench run`." if flushed else
                                 " Denormals NOT flushed (this CPU cannot), as in `bench run` here.")
    names = [n for n in names if not (n == "e2e" and what == "all" and args.quick)]
    suites = {name: load_suite(name) for name in names}  # their modules imported before the clock starts
    rows: list[dict] = []
    secs: dict[str, float] = {}
    t0 = time.perf_counter()
    for name in names:
        t = time.perf_counter()
        print(f"[perf] {name} ...", flush=True)
        rows += [{**r, "suite": name} for r in suites[name](quick=args.quick)]
        secs[name] = time.perf_counter() - t
        print(f"[perf] {name} done in {secs[name]:.0f} s", flush=True)
        if args.json:  # partial results survive an interrupted run
            write_outputs(rows, args.json, None, header, echo=False)
    total = time.perf_counter() - t0
    rows += [record(f"perf wall time {name}", "suite s", "all suites s", s, total, "s", higher_is_better=False,
                    suite=name) for name, s in secs.items()]
    if what == "all":
        rows.append(record("perf wall time all suites", "wall time", "budget", total, ALL_BUDGET_S, "s",
                           higher_is_better=False, target=None if args.quick else 1.0,
                           note="--quick: smoke-test sizes, no e2e; the budget applies to the full run only"
                           if args.quick else "idle 2-core CPU; the header's load average says how idle", suite="all"))
    header += f" Total benchmark time {total:.0f} s" + (" (--quick: smoke-test sizes, numbers meaningless)."
                                                        if args.quick else ".")
    write_outputs(rows, args.json, args.md, header)
    return 0


def _attention(argv: Sequence[str] | None = None) -> int:
    """``bench perf attention``: one attention layer per PE, with its own options and output format."""
    attention = importlib.import_module(f"{__name__}.attention")  # deferred: start-up time (imports torch)
    return attention.main(argv)


#: ``bench perf WHAT`` -> ``fn(argv) -> exit code``: ``all``, one command per suite, ``attention``
PERF_COMMANDS: dict[str, Callable[..., int]] = {
    "all": functools.partial(_run, "all", ALL_SUITES),
    **{name: functools.partial(_run, name, (name,)) for name in SUITE_MODULES},
    "attention": _attention,
}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pebench.perf WHAT [options]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in PERF_COMMANDS:
        print(f"usage: bench perf {{{','.join(PERF_COMMANDS)}}} [--json FILE] [--md FILE] [--quick]")
        return 2
    return PERF_COMMANDS[argv[0]](argv[1:])

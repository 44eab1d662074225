"""``bench perf``: performance benchmarks of pebench (issue #7; docs/ARCHITECTURE.md §6 budgets).

``PERF_COMMANDS`` maps ``bench perf WHAT`` to ``fn(argv) -> exit code``:

* ``backbone``    pebench ViT (tokenizer + backbone + head) vs timm ``VisionTransformer`` of the
  same shape: training-step and inference samples/s (:mod:`pebench.perf_model`).
* ``attention-budget`` docs/ARCHITECTURE.md §6: PaPE attention forward+backward vs RoPE at N = 1024, head
  dim 64, the kernel floor of that ratio, PaPE peak memory at 4N vs N (:mod:`pebench.perf_attention`).
* ``pe-overhead`` training-step samples/s of every registered PE relative to ``none``; on CUDA
  also the SDPA backend each PE gets and why (:mod:`pebench.perf_model`).
* ``analysis``    geometry evaluator vs one validation epoch; SSDC (N=4096), EED (D=768) vs a
  matmul of the same size (:mod:`pebench.perf_data`).
* ``data``        loader samples/s (decode + transforms) vs vit-nano training-step samples/s per
  modality at the default ``num_workers`` (:mod:`pebench.perf_data`).
* ``e2e``         ``bench run`` (defaults) wall time vs the 3-minute budget (subprocess).
* ``dino``        DINO training step (2 + N crops, teacher, EMA) vs classification steps on the same
  crops; per-checkpoint EED evaluation vs one training epoch (:mod:`pebench.perf_dino`).
* ``scene``       scene tokenization (grid sampling + patching) of a 10^5-point scene in points/s and
  its share of a segmentation training step; serialization vs FPS + kNN patching; the peak memory
  of a training step with windowed vs full attention at 1k / 4k / 16k tokens (:mod:`pebench.perf_scene`).
* ``detection`` detection training step (ViTDet simple pyramid + FCOS) vs classification on the same
  backbone, PE, grid and images (the head's overhead); ``shapes-det`` loader samples/s (COCO JSON +
  JPEG through the coco reader) vs the detection model's consumption (:mod:`pebench.perf_detection`).
* ``startup``     wall time of ``bench --help`` and ``bench run --help`` (fresh processes) vs the
  1-second budget: argument parsing must not import torch (:func:`bench_startup`).
* ``attention``   one attention layer per PE (:mod:`pebench.perf_attention`, own output format).
* ``all``         everything above except ``attention`` (``--quick``: smaller repeats, no e2e).

Each command takes ``[--json FILE] [--md FILE] [--quick]``. The JSON is a list of records
``{"name", "a", "b", "a_value", "b_value", "unit", "ratio", "higher_is_better", "target",
"meets_target", "note"}`` with ``ratio = a_value / b_value``; ``target`` (optional) is a bound on
the ratio: a lower bound when ``higher_is_better`` else an upper bound.

Timing discipline (the dev machines are shared): the candidates of one comparison are run
interleaved in one process (A, B, A, B, ...) after a warm-up and compared by their medians.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Callable, Iterable, Sequence


__all__ = ["PERF_COMMANDS", "record", "interleaved", "format_markdown", "write_outputs", "main"]


def record(name: str, a: str, b: str, a_value: float, b_value: float, unit: str, *,
           higher_is_better: bool = True, target: float | None = None, note: str | None = None, **extra) -> dict:
    """One measurement row (see the module docstring for the schema)."""
    ratio = a_value / b_value if b_value else float("nan")
    row = {"name": name, "a": a, "b": b, "a_value": float(a_value), "b_value": float(b_value), "unit": unit,
           "ratio": ratio, "higher_is_better": higher_is_better}
    if target is not None:
        row["target"] = target
        row["meets_target"] = bool(ratio >= target if higher_is_better else ratio <= target)
    if note:
        row["note"] = note
    row.update(extra)
    return row


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


def _fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def format_markdown(rows: Sequence[dict], header: str = "") -> str:
    lines = [header, ""] if header else []
    lines += ["| measurement | a | b | a value | b value | unit | a/b | target | ok |",
              "|---|---|---|---:|---:|---|---:|---:|:-:|"]
    for r in rows:
        tgt = "" if r.get("target") is None else ("≥ " if r["higher_is_better"] else "≤ ") + f"{r['target']:g}"
        ok = "" if "meets_target" not in r else ("yes" if r["meets_target"] else "**no**")
        lines.append(f"| {r['name']} | {r['a']} | {r['b']} | {_fmt(r['a_value'])} | {_fmt(r['b_value'])} | "
                     f"{r['unit']} | {r['ratio']:.3f} | {tgt} | {ok} |")
    notes = [f"- **{r['name']}**: {r['note']}" for r in rows if r.get("note")]
    if notes:
        lines += ["", "Notes:", ""] + notes
    return "\n".join(lines) + "\n"


def machine_header() -> str:
    import torch  # here, not at import: `bench --help` reads PERF_COMMANDS without loading torch
    dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU"
    try:
        load = "load average %.1f %.1f %.1f" % os.getloadavg()
    except OSError:
        load = "load n/a"
    return (f"pebench perf — torch {torch.__version__}, {dev}, {os.cpu_count()} CPUs, "
            f"{torch.get_num_threads()} torch threads, {load} at start. Ratios compare candidates "
            f"measured interleaved in one process (medians); absolute numbers depend on machine load.")


def write_outputs(rows: list[dict], json_path: str | None, md_path: str | None, header: str,
                  echo: bool = True) -> None:
    md = format_markdown(rows, header)
    if echo:
        print(md, flush=True)
    for path, text in ((json_path, json.dumps(rows, indent=1)), (md_path, md)):
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            with open(f"{path}.tmp", "w") as f:
                f.write(text)
            os.replace(f"{path}.tmp", path)


def _parser(what: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=f"bench perf {what}")
    ap.add_argument("--json", metavar="FILE", default=None, help="write the records as JSON to FILE")
    ap.add_argument("--md", metavar="FILE", default=None, help="write the markdown table to FILE")
    ap.add_argument("--quick", action="store_true", help="fewer repeats (and no end-to-end run in `all`)")
    ap.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # smoke test sizes
    return ap


#: ``bench --help`` budget (docs/ARCHITECTURE.md §6), seconds of wall time
STARTUP_BUDGET_S = 1.0


def _bench_command() -> list[str]:
    """The ``bench`` console script installed beside this interpreter (what a user runs), else
    ``python -m pebench.cli``."""
    import shutil
    import sys
    from pathlib import Path

    script = Path(sys.executable).parent / "bench"
    if script.is_file():
        return [str(script)]
    found = shutil.which("bench")
    return [found] if found else [sys.executable, "-m", "pebench.cli"]


def bench_startup(quick: bool = False, tiny: bool = False) -> list[dict]:
    """Wall time of ``bench --help`` and ``bench run --help`` in fresh processes (medians,
    interleaved, after one warm-up round that fills the OS file cache) against the 1-second
    budget, beside the bare interpreter start (``python -c pass``) for reference."""
    import subprocess
    import sys

    cmd = _bench_command()

    def call(argv: list[str]) -> Callable[[], None]:
        return lambda: subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)

    repeats = 1 if tiny else 5 if quick else 11
    t = interleaved({"help": call([*cmd, "--help"]), "run-help": call([*cmd, "run", "--help"]),
                     "python": call([sys.executable, "-c", "pass"])}, repeats=repeats, warmup=1)
    note = (f"`{' '.join(cmd)}`, medians of {repeats} fresh processes; bare interpreter start "
            f"(python -c pass) {t['python']:.3f} s")
    return [record("startup bench --help", "wall time", "budget", t["help"], STARTUP_BUDGET_S, "s",
                   higher_is_better=False, target=1.0, note=note),
            record("startup bench run --help", "wall time", "budget", t["run-help"], STARTUP_BUDGET_S, "s",
                   higher_is_better=False, target=1.0)]


def _suites() -> dict[str, Callable[..., list[dict]]]:
    from . import perf_attention, perf_data, perf_detection, perf_dino, perf_model, perf_scene
    return {"backbone": perf_model.bench_backbone, "pe-overhead": perf_model.bench_pe_overhead,
            "attention-budget": perf_attention.bench_budget,
            "analysis": perf_data.bench_analysis, "data": perf_data.bench_data, "e2e": perf_data.bench_e2e,
            "startup": bench_startup, "dino": perf_dino.bench_dino, "scene": perf_scene.bench_scene,
            "detection": perf_detection.bench_detection}


def _run(what: str, names: Iterable[str], argv: Sequence[str] | None) -> int:
    args = _parser(what).parse_args(argv)
    header = machine_header()
    suites = _suites()
    rows: list[dict] = []
    t0 = time.perf_counter()
    for name in names:
        if name == "e2e" and what == "all" and (args.quick or args.tiny):
            continue
        t = time.perf_counter()
        print(f"[perf] {name} ...", flush=True)
        rows += suites[name](quick=args.quick, tiny=args.tiny)
        print(f"[perf] {name} done in {time.perf_counter() - t:.0f} s", flush=True)
        if args.json:  # partial results survive an interrupted run
            write_outputs(rows, args.json, None, header, echo=False)
    header += f" Total benchmark time {time.perf_counter() - t0:.0f} s."
    write_outputs(rows, args.json, args.md, header)
    return 0


def _attention(argv: Sequence[str] | None) -> int:
    from .perf_attention import main as attention_main
    return attention_main(argv)


PERF_COMMANDS: dict[str, Callable[[list[str] | None], int]] = {
    "all": lambda argv=None: _run("all", ["startup", "backbone", "attention-budget", "pe-overhead", "analysis", "data",
                                          "dino", "scene", "detection", "e2e"], argv),
    "backbone": lambda argv=None: _run("backbone", ["backbone"], argv),
    "attention-budget": lambda argv=None: _run("attention-budget", ["attention-budget"], argv),
    "pe-overhead": lambda argv=None: _run("pe-overhead", ["pe-overhead"], argv),
    "analysis": lambda argv=None: _run("analysis", ["analysis"], argv),
    "data": lambda argv=None: _run("data", ["data"], argv),
    "e2e": lambda argv=None: _run("e2e", ["e2e"], argv),
    "startup": lambda argv=None: _run("startup", ["startup"], argv),
    "dino": lambda argv=None: _run("dino", ["dino"], argv),
    "scene": lambda argv=None: _run("scene", ["scene"], argv),
    "detection": lambda argv=None: _run("detection", ["detection"], argv),
    "attention": _attention,
}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pebench.perf WHAT [options]``."""
    import sys
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in PERF_COMMANDS:
        print(f"usage: bench perf {{{','.join(PERF_COMMANDS)}}} [--json FILE] [--md FILE] [--quick]")
        return 2
    return PERF_COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())

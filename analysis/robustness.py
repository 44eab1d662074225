"""Robustness to content shifts: fragility ``FS = 1 − A_shift / A_clean`` (docs/architecture.md §4).

Shifts per modality (defaults; every one is a *content* perturbation that leaves token
positions alone):

==========  ================  =============================================================
modality    name              what
==========  ================  =============================================================
image       ``jpeg``          JPEG at quality 5 (``torchvision.io.encode_jpeg/decode_jpeg``)
image       ``blur``          Gaussian blur σ = 2.5, kernel ``2·ceil(3σ)+1`` clipped to the
                              largest odd size ≤ the image side (reflect padding)
video       ``jpeg``/``blur`` the same, frame by frame
events      ``dropout``       each event dropped with p = 0.5: binomial thinning of the binned
                              counts (the same distribution as dropping raw events and re-binning,
                              up to tonic's first..last-event bin edges moving slightly)
events      ``noise``         spurious events: Poisson counts with mean ``rate ×`` (the sample's mean
                              count per voxel), rate 0.5, added to every voxel of both polarities
events      ``dropout``,      ``tokens=spiking`` (events as events): on the raw stream before
(spiking)   ``noise``,        tokenization, each event dropped with p = 0.5; uniform background
            ``time_jitter``   events, 0.5 × the stream's count; Gaussian time jitter σ = 10 ms
                              (``pebench.datamodules.events.event_transforms``)
points      ``jitter``        Gaussian jitter σ = 0.02 on every coordinate
points      ``point_dropout`` 50% of the points of each cloud dropped and replaced by duplicates of
                              randomly chosen kept points (the point count is unchanged)
==========  ================  =============================================================

The event and point shifts are the documented content-perturbation analogues of JPEG/blur.

JPEG needs uint8 images but inputs arrive normalised: the datamodule's declared ``mean`` / ``std``
(:meth:`pebench.datamodules.BenchDataModule.normalisation`) are inverted and values clamped to
[0, 1] before quantising; a dataset that declares no normalisation is an error naming it. When no
datamodule is given, each image is min-max scaled to [0, 255] and mapped back with the same affine
map. Blur is linear and commutes with the per-channel affine normalisation (reflect padding), so it
runs on the normalised input. Event inputs compressed as ``log1p(count)`` (datamodule
``log_counts = True``) are expanded to counts, perturbed and compressed again.

Randomness: one ``torch.Generator`` per shift, seeded from the config seed and the shift's
index, consumed batch by batch in loader order, so results are deterministic. The evaluation
runs in eval mode under ``torch.no_grad()`` in one process after training (see
:mod:`.geometry`). ``max_samples`` caps the number of validation samples (default: all).

FS is undefined — JSON ``null`` with a ``fs_reason`` — when the clean accuracy is 0 or within
2 standard errors of chance, ``|A_clean − 1/C| ≤ 2·sqrt(A_clean (1 − A_clean) / n)`` over the
``n`` evaluated samples and ``C`` classes (:func:`fs_undefined_reason`); the α sweep applies the
same rule at every α.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
from torch import Tensor
from torchvision.io import decode_jpeg, encode_jpeg
from torchvision.transforms.v2.functional import gaussian_blur as tv_blur

from pebench.core.options import option
from pebench.datamodules.events.event_transforms import STREAM_SHIFT_PARAMS, stream_shift_loaders

from .geometry import evaluating, finite_or_none, task_device
from .plots import plot_robustness
from .registry import Analysis, AnalysisContext, register_analysis

__all__ = ["robustness", "fragility", "dense_fragility", "fs_undefined_reason", "num_classes_of", "SHIFTS",
           "PERTURBATIONS", "DEFAULT_PARAMS", "perturb", "logits_in_chunks", "image_codec", "shift_context",
           "CODEC_SHIFTS", "jpeg", "gaussian_blur", "blur_kernel_size", "event_dropout", "event_noise",
           "point_jitter", "point_dropout", "first_shift", "shift_seed", "RobustnessOptions", "RobustnessAnalysis"]

#: shifts per modality, in the order they are reported (the first is the alpha sweep's FS)
SHIFTS: dict[str, tuple[str, ...]] = {"image": ("jpeg", "blur"), "video": ("jpeg", "blur"),
                                      "events": ("dropout", "noise"), "points": ("jitter", "point_dropout")}
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "jpeg": {"quality": 5}, "blur": {"sigma": 2.5},
    "dropout": {"p": 0.5}, "noise": {"rate": 0.5},
    "jitter": {"sigma": 0.02}, "point_dropout": {"p": 0.5},
}


def first_shift(modality: str) -> str:
    return SHIFTS[modality][0]


def fs_undefined_reason(acc_clean: float, n: int | None = None, num_classes: int | None = None) -> str | None:
    """Why FS is undefined for a clean accuracy ``acc_clean`` over ``n`` samples with
    ``num_classes`` classes, or ``None`` when it is defined.

    Undefined when ``A_clean = 0``, or when ``|A_clean − 1/num_classes| ≤ 2·SE`` with
    ``SE = sqrt(A_clean (1 − A_clean) / n)`` (the model is not distinguishable from chance, so a
    ratio to it measures noise). The chance rule needs ``n`` and ``num_classes``.
    """
    if acc_clean <= 0:
        return "clean accuracy is 0"
    if n is None or num_classes is None or int(num_classes) < 1 or int(n) < 1:
        return None
    chance = 1.0 / int(num_classes)
    se = math.sqrt(acc_clean * (1.0 - acc_clean) / int(n))
    if abs(acc_clean - chance) <= 2.0 * se:
        return (f"clean accuracy {acc_clean:.4f} is within 2 standard errors (SE {se:.4f}, n {int(n)}) "
                f"of chance {chance:.4f}")
    return None


def fragility(acc_clean: float, acc_shift: float, n: int | None = None,
              num_classes: int | None = None) -> float | None:
    """``FS = 1 − A_shift / A_clean``; ``None`` (undefined) when ``A_clean == 0`` or, given the
    number of samples ``n`` and ``num_classes``, when ``A_clean`` is within 2 standard errors of
    chance (:func:`fs_undefined_reason`)."""
    if fs_undefined_reason(acc_clean, n, num_classes) is not None:
        return None
    return 1.0 - acc_shift / acc_clean


def dense_fragility(clean: float | None, shifted: float | None, reason: str | None) -> float | None:
    """``FS = 1 − shifted / clean`` on a dense task's metric (mAP, mIoU); ``None`` when ``reason`` (the task's
    own rule, e.g. a clean mAP below its floor) says it is undefined."""
    if reason is not None or clean is None or shifted is None:
        return None
    return finite_or_none(1.0 - float(shifted) / float(clean))


def num_classes_of(task: Any, datamodule: Any = None) -> int | None:
    """The number of classes (chance = 1 / it): the datamodule's ``num_classes``, else the task's
    saved ``num_classes`` hyper-parameter; ``None`` when neither says."""
    for obj in (datamodule, getattr(task, "hparams", None)):
        v = getattr(obj, "num_classes", None) if obj is not None else None
        if v is None and isinstance(obj, dict):
            v = obj.get("num_classes")
        if isinstance(v, int) and v > 0:
            return v
    return None


# ------------------------------------------------------------------------------- images
def image_codec(datamodule: Any) -> tuple[Callable[[Tensor], Tensor], Callable[[Tensor], Tensor]] | None:
    """``(to_unit, from_unit)`` maps between the datamodule's normalised inputs and [0, 1] from its
    declared ``mean`` / ``std``, or ``None`` (per-image min-max) when no datamodule is given;
    ``ValueError`` naming a dataset that declares no normalisation (see the module docstring)."""
    if datamodule is None:
        return None
    mean, std = datamodule.normalisation()  # per channel

    def shape(v: tuple[float, ...], x: Tensor) -> Tensor:
        t = torch.as_tensor(v, dtype=x.dtype, device=x.device)
        return t.view(-1, *([1] * (x.dim() - 2)))  # channel axis at dim 1 of (B, C, ...)

    return (lambda x: x * shape(std, x) + shape(mean, x)), (lambda u: (u - shape(mean, u)) / shape(std, u))


#: shifts that map inputs to pixels in [0, 1] and back (they need :func:`image_codec`)
CODEC_SHIFTS = ("jpeg",)


def shift_context(datamodule: Any, names: Any) -> dict[str, Any]:
    """What the perturbations of shifts ``names`` need from the datamodule: the image codec (only
    when one of them is in ``CODEC_SHIFTS``) and whether event inputs are ``log1p`` counts."""
    need_codec = any(n in CODEC_SHIFTS for n in names)
    return {"codec": image_codec(datamodule) if need_codec else None,
            "log_counts": bool(getattr(datamodule, "log_counts", False))}


def _frames(x: Tensor) -> tuple[Tensor, Callable[[Tensor], Tensor]]:
    """Images ``(B, C, H, W)`` or clips ``(..., C, T, H, W)`` -> frames ``(F, C, H, W)`` and the inverse."""
    if x.dim() == 4:
        return x, lambda f: f
    shp = x.shape  # (..., C, T, H, W)
    f = x.movedim(-4, -3).reshape(-1, shp[-4], shp[-2], shp[-1])  # (F, C, H, W)

    def back(g: Tensor) -> Tensor:
        return g.reshape(*shp[:-4], shp[-3], shp[-4], shp[-2], shp[-1]).movedim(-3, -4)
    return f, back


def jpeg(x: Tensor, quality: int = 5, codec: tuple | None = None) -> Tensor:
    """JPEG round trip of normalised images / clips (per frame) at ``quality``."""
    frames, back = _frames(x)
    f = frames.detach().float().cpu()
    if codec is not None:
        to_unit, from_unit = codec
        u = to_unit(f).clamp(0, 1)
    else:  # per-image min-max
        lo = f.amin(dim=(1, 2, 3), keepdim=True)
        hi = f.amax(dim=(1, 2, 3), keepdim=True)
        scale = (hi - lo).clamp_min(1e-12)
        u = (f - lo) / scale
    q = (u * 255).round().clamp(0, 255).to(torch.uint8)
    with warnings.catch_warnings():  # torchvision 0.2x deprecates the codec in favour of TorchCodec
        warnings.simplefilter("ignore")
        dec = decode_jpeg(encode_jpeg(list(q), quality=int(quality)))
    u2 = torch.stack(list(dec)).float() / 255.0
    out = from_unit(u2) if codec is not None else u2 * scale + lo
    return back(out.to(dtype=x.dtype, device=x.device))


def blur_kernel_size(sigma: float, side: int) -> int:
    """``2·ceil(3σ)+1`` clipped to the largest odd size ≤ ``side`` (at least 1)."""
    k = 2 * math.ceil(3 * sigma) + 1
    if k > side:
        k = side if side % 2 else side - 1
    return max(1, k)


def gaussian_blur(x: Tensor, sigma: float = 2.5) -> Tensor:
    """Gaussian blur of normalised images / clips (per frame)."""
    frames, back = _frames(x)
    k = blur_kernel_size(sigma, min(frames.shape[-2:]))
    if k < 3:
        return x
    return back(tv_blur(frames, kernel_size=[k, k], sigma=[float(sigma), float(sigma)]))


# ------------------------------------------------------------------------------- events
def _counts(x: Tensor, log_counts: bool) -> Tensor:
    return torch.expm1(x.clamp_min(0)).round() if log_counts else x.clamp_min(0).round()


def _uncounts(c: Tensor, log_counts: bool) -> Tensor:
    return torch.log1p(c) if log_counts else c


def event_dropout(x: Tensor, p: float = 0.5, generator: torch.Generator | None = None,
                  log_counts: bool = False) -> Tensor:
    """Drop each event with probability ``p``: binomial thinning of the voxel counts."""
    c = _counts(x.detach().float().cpu(), log_counts)
    kept = torch.binomial(c, torch.full_like(c, 1.0 - p), generator=generator)
    return _uncounts(kept, log_counts).to(dtype=x.dtype, device=x.device)


def event_noise(x: Tensor, rate: float = 0.5, generator: torch.Generator | None = None,
                log_counts: bool = False) -> Tensor:
    """Add Poisson noise events, mean ``rate ×`` the sample's mean count per voxel, to every voxel."""
    c = _counts(x.detach().float().cpu(), log_counts)
    lam = rate * c.flatten(1).mean(1).view(-1, *([1] * (c.dim() - 1)))  # (B, 1, ...)
    noise = torch.poisson(lam.expand_as(c).contiguous(), generator=generator)
    return _uncounts(c + noise, log_counts).to(dtype=x.dtype, device=x.device)


# ------------------------------------------------------------------------------- points
def point_jitter(x: Tensor, sigma: float = 0.02, generator: torch.Generator | None = None) -> Tensor:
    n = torch.randn(x.shape, generator=generator, dtype=torch.float32)
    return x + sigma * n.to(dtype=x.dtype, device=x.device)


def point_dropout(x: Tensor, p: float = 0.5, generator: torch.Generator | None = None) -> Tensor:
    """Drop ``p`` of each cloud's points ``(B, M, 3)``; refill with duplicates of kept points."""
    B, M = x.shape[:2]
    keep = max(1, M - int(round(p * M)))
    order = torch.argsort(torch.rand(B, M, generator=generator), dim=1)
    kept = order[:, :keep]  # (B, keep)
    fill = kept.gather(1, torch.randint(0, keep, (B, M - keep), generator=generator))  # duplicates
    idx = torch.cat([kept, fill], 1).to(x.device)  # (B, M)
    return x.gather(1, idx.unsqueeze(-1).expand(-1, -1, x.shape[-1]))


# ------------------------------------------------------------------------------- dispatch
def _jpeg(x: Tensor, g: torch.Generator, params: dict, ctx: dict) -> Tensor:
    return jpeg(x, params["quality"], ctx.get("codec"))


def _blur(x: Tensor, g: torch.Generator, params: dict, ctx: dict) -> Tensor:
    return gaussian_blur(x, params["sigma"])


#: name -> fn(inputs, generator, params, ctx) (tests may monkeypatch entries)
PERTURBATIONS: dict[str, Callable[[Tensor, torch.Generator, dict, dict], Tensor]] = {
    "jpeg": _jpeg,
    "blur": _blur,
    "dropout": lambda x, g, p, ctx: event_dropout(x, p["p"], g, ctx.get("log_counts", False)),
    "noise": lambda x, g, p, ctx: event_noise(x, p["rate"], g, ctx.get("log_counts", False)),
    "jitter": lambda x, g, p, ctx: point_jitter(x, p["sigma"], g),
    "point_dropout": lambda x, g, p, ctx: point_dropout(x, p["p"], g),
}


def perturb(name: str, x: Tensor, generator: torch.Generator | None = None, params: dict | None = None,
            datamodule: Any = None) -> Tensor:
    """Apply shift ``name`` with its default parameters (updated by ``params``)."""
    if name not in PERTURBATIONS:
        raise ValueError(f"unknown shift {name!r}; available: {', '.join(PERTURBATIONS)}")
    p = {**DEFAULT_PARAMS.get(name, {}), **(params or {})}
    ctx = shift_context(datamodule, [name])
    return PERTURBATIONS[name](x, generator or torch.Generator().manual_seed(0), p, ctx)


# ------------------------------------------------------------------------------- evaluation
def logits_in_chunks(task: Any, x: Tensor, max_attn_elems: int = 1 << 26) -> Tensor:
    """``task(x)`` in chunks so that ``B·heads·N²`` stays below ``max_attn_elems`` (large inputs)."""
    try:
        n = task.tokenize_count(x if x.dim() != 6 else x[:, 0])
    except Exception:  # noqa: BLE001 - the forward raises the real error
        n = 0
    heads = int(getattr(getattr(task.backbone, "pe", None), "num_heads", 8) or 8)
    per = max(1, heads * n * n * (x.shape[1] if x.dim() == 6 else 1))
    chunk = max(1, min(x.shape[0], max_attn_elems // per))
    if chunk >= x.shape[0]:
        return task(x)
    return torch.cat([task(x[i:i + chunk]) for i in range(0, x.shape[0], chunk)])


def capped_batches(loader: Any, max_samples: int | None, device: torch.device | None
                   ) -> Iterator[tuple[Any, Tensor]]:
    """``(inputs, labels)`` of ``loader`` on ``device`` (left where they are when ``None``), truncated to
    the first ``max_samples`` samples (all if None); batches left empty by corrupt-sample skipping are
    passed over. ``inputs`` is a tensor, or a dict of tensors with the batch first (scene batches);
    ``labels`` has the batch first (class labels ``(B,)``, per-point labels ``(B, M)``)."""
    n = 0
    for batch in loader:
        x, y = batch[0], batch[1]
        if max_samples is not None:
            if n >= max_samples:
                return
            k = max_samples - n
            x, y = ({key: v[:k] for key, v in x.items()} if isinstance(x, dict) else x[:k]), y[:k]
        if y.shape[0] == 0:
            continue
        n += int(y.shape[0])
        if device is not None:
            x = {key: v.to(device) for key, v in x.items()} if isinstance(x, dict) else x.to(device)
            y = y.to(device)
        yield x, y


def shift_seed(seed: int, k: int) -> int:
    """The seed of the ``k``-th shift's random draws for a run seeded ``seed`` (distinct per shift, < 2**63)."""
    return (int(seed) * 1_000_003 + 7919 * (k + 1)) % (2 ** 63)


def robustness(task: Any, datamodule: Any, seed: int = 0, max_samples: int | None = None,
               shifts: list[str] | tuple[str, ...] | None = None, params: dict[str, dict] | None = None,
               loader: Any = None) -> dict[str, Any]:
    """Clean accuracy and accuracy / FS under each shift, on the validation set at the training
    resolution (first ``max_samples`` samples, in order).

    Returns ``{"clean_acc": a, "clean_acc_se": se, "chance": 1/C, "n_samples": n,
    "<shift>": {"acc": a_s, "fs": fs, "fs_reason": why | None, "params": {...}}, ...}``; ``fs`` is
    ``None`` with a ``fs_reason`` when FS is undefined (:func:`fs_undefined_reason`).

    A task with its own metric (detection, segmentation) brings its own robustness function through its
    setup (:class:`~.evaluators.TaskAnalyses`).
    """
    modality = getattr(task, "modality", getattr(datamodule, "modality", "image"))
    spiking = getattr(datamodule, "tokens", "frames") == "spiking"
    if spiking:  # events as events: the raw streams are perturbed, then tokenized (event_transforms)
        names = list(shifts) if shifts is not None else list(STREAM_SHIFT_PARAMS)
        prm = {s: {**STREAM_SHIFT_PARAMS.get(s, {}), **((params or {}).get(s, {}))} for s in names}
    else:
        names = list(shifts) if shifts is not None else list(SHIFTS[modality])
        prm = {s: {**DEFAULT_PARAMS.get(s, {}), **((params or {}).get(s, {}))} for s in names}
    ctx = shift_context(datamodule, names)
    gens = {s: torch.Generator().manual_seed(shift_seed(seed, k)) for k, s in enumerate(names)}
    device = task_device(task)
    correct = {s: 0 for s in ["clean", *names]}
    n = 0
    if loader is None:
        loader = datamodule.eval_dataloader(None)
    with evaluating(task):
        if spiking:  # one pass per shift over its own loader (same samples, same order)
            for s, ld in {"clean": loader, **stream_shift_loaders(datamodule, {s: prm[s] for s in names}, seed)}.items():
                m = 0
                for x, y in capped_batches(ld, max_samples, device):
                    correct[s] += int((task(x).argmax(-1) == y).sum())
                    m += int(y.numel())
                n = m
        for x, y in ([] if spiking else capped_batches(loader, max_samples, device)):
            correct["clean"] += int((logits_in_chunks(task, x).argmax(-1) == y).sum())
            for s in names:
                xs = PERTURBATIONS[s](x, gens[s], prm[s], ctx)
                correct[s] += int((logits_in_chunks(task, xs).argmax(-1) == y).sum())
            n += int(y.numel())
    if n == 0:
        raise ValueError("robustness: no validation samples")
    clean = correct["clean"] / n
    classes = num_classes_of(task, datamodule)
    out: dict[str, Any] = {"clean_acc": clean, "clean_acc_se": math.sqrt(clean * (1.0 - clean) / n),
                           "chance": None if classes is None else 1.0 / classes, "n_samples": n}
    reason = fs_undefined_reason(clean, n, classes)
    for s in names:
        a = correct[s] / n
        fs = fragility(clean, a, n, classes)
        out[s] = {"acc": a, "fs": None if fs is None else finite_or_none(fs), "fs_reason": reason,
                  "params": prm[s]}
    return out


# ------------------------------------------------------------------------------- registration
@dataclass(frozen=True)
class RobustnessOptions:
    robustness_samples: int | None = option(None, "validation samples of the robustness analysis (none: all)",
                                            minimum=1, what="samples")


@register_analysis("robustness", order=20, options=RobustnessOptions)
class RobustnessAnalysis(Analysis):
    """Clean accuracy, and accuracy and fragility FS = 1 - A_shift / A_clean under each content shift."""

    plot = ("robustness.png", plot_robustness)

    def run(self, ctx: AnalysisContext) -> dict[str, Any]:
        return ctx.hooks.robustness(ctx.task, ctx.datamodule, seed=ctx.seed, max_samples=ctx.options["robustness_samples"])

"""Attention entropy per layer and head, and mean attention distance, from the attention each PE produces.

What is measured (issue #45), per block ``l`` and head ``h``, on the fixed probe set (the first
``attention_probe_size`` validation samples, in order):

* **entropy** ``H = -sum_j p_ij log p_ij`` (nats; ``0 log 0 = 0``) of each real query's attention row,
  averaged over the real queries (prefix tokens included) of every probe sample. ``max_entropy`` is the
  same average of ``log(number of real keys)``: the entropy of uniform attention, for reference.
* **mean attention distance** (Dosovitskiy et al., ICLR 2021, "An Image is Worth 16x16 Words", Fig. 7:
  the distance in image space over which attention integrates information, weighted by the attention):
  ``D = sum_j p_ij ||r_i - r_j||_2 / sum_j p_ij`` over the patch keys ``j`` of each real patch query
  ``i`` (prefix tokens have no position: their attention mass is left out, the rest renormalised),
  averaged over queries. ``r`` are the coords the PE reads, in patch units for images, video and
  event frames (a video's time axis in tubelets), in coordinate units for point clouds and scenes
  (``distance_unit``).

The probabilities are those the model's attention computes: each block's :class:`~pebench.models.vit.
Attention` is observed with a forward pre-hook while the task runs its own forward, and its inputs go
through :func:`attention_probs` -- the PE's q/k transform (rotations, PaPE's augmented q/k), its bias
(ALiBi, LookHere's masks, PaPE ``impl=naive``) and the key padding mask, ``softmax(q k^T * scale + bias
+ padding)``, the formula every implementation of :func:`~pebench.models.attention.attend` computes
(dense, SDPA and FlexAttention agree with it; the tests check ``probs @ v`` against the block's own
attention output). With windowed attention (``attn_window``) the statistics are those of the windows,
which is where the model attends.

Runs in eval mode under ``torch.no_grad()`` after training; deterministic (fixed probe, no randomness).
Applies to every task whose model has a pebench ViT backbone (``task.backbone``); the forward used is
the task's ``features()`` when it has one, else the task itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor

from pebench.core.options import option
from pebench.encodings import LayerPE
from pebench.models.attention import bias_kind
from pebench.models.vit import Attention

from .geometry import batch_inputs, evaluating, finite_or_none, num_samples, probe_loader, task_device
from .plots import plot_attention
from .registry import Analysis, AnalysisContext, register_analysis

__all__ = ["attention_probs", "attention_maps", "attention_stats", "AttentionStats", "AttentionOptions",
           "AttentionAnalysis", "distance_unit"]


def attention_probs(q: Tensor, k: Tensor, x: Tensor, layer_pe: LayerPE, coords: Tensor, key_mask: Tensor | None,
                    scale: float) -> Tensor:
    """Attention probabilities ``(B, H, T, T)`` of ``q, k (B, H, T, d)`` under ``layer_pe``:
    ``softmax(q' k'^T * scale + bias + padding)`` with ``q', k' = layer_pe.qk(q, k, x, coords)``, the
    PE's bias when it has one and ``-inf`` on padded keys (``key_mask (B, T)``, True = valid)."""
    q, k = layer_pe.qk(q, k, x, coords)  # (B, H, T, d') with d' >= d
    logits = (q @ k.transpose(-2, -1)) * scale  # (B, H, T, T)
    if bias_kind(layer_pe) != "none":
        logits = logits + layer_pe.bias(coords).to(logits.dtype)  # (B|1, H|1, T, T)
    if key_mask is not None:
        logits = logits.masked_fill(~key_mask[:, None, None, :], float("-inf"))
    return logits.softmax(-1)


def _block_probs(attn: Attention, x: Tensor, coords: Tensor, layer_pe: LayerPE, key_mask: Tensor | None) -> Tensor:
    """The probabilities of one :class:`Attention` call on its inputs (what its forward computes)."""
    B, T, _ = x.shape
    qkv = attn.qkv(x).reshape(B, T, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4)
    q, k, _v = qkv.unbind(0)  # each (B, H, T, d)
    return attention_probs(q, k, x, layer_pe, coords, key_mask, attn.scale)


def _observe(task: Any, fn: Callable[[int, Tensor, Tensor, Tensor | None], None]) -> list[Any]:
    """Forward pre-hooks on every block's attention of ``task.backbone``: ``fn(layer, probs, coords,
    key_mask)`` on each call. -> the hook handles (remove them)."""
    handles = []
    for i, blk in enumerate(task.backbone.blocks):
        def hook(module: Attention, args: tuple, kwargs: dict, i: int = i) -> None:
            names = ("x", "coords", "layer_pe", "key_mask")
            a = dict(zip(names, args), **kwargs)
            probs = _block_probs(module, a["x"], a["coords"], a["layer_pe"], a.get("key_mask"))
            fn(i, probs, a["coords"], a.get("key_mask"))
        handles.append(blk.attn.register_forward_pre_hook(hook, with_kwargs=True))
    return handles


def _forward(task: Any, x: Any) -> None:
    if callable(getattr(task, "features", None)):
        task.features(x)
    else:
        task(x)


def attention_maps(task: Any, x: Any) -> list[list[tuple[Tensor, Tensor, Tensor | None]]]:
    """``(probs (B, H, T, T), coords, key_mask)`` of every attention call of each block while the task
    runs on inputs ``x`` (one call per block, or per block and window group); for tests and notebooks."""
    out: list[list[tuple[Tensor, Tensor, Tensor | None]]] = [[] for _ in task.backbone.blocks]
    handles = _observe(task, lambda i, p, c, m: out[i].append((p, c, m)))
    try:
        with evaluating(task):
            _forward(task, x)
    finally:
        for h in handles:
            h.remove()
    return out


class AttentionStats:
    """Sums over queries, per layer and head, of the entropy and the mean attention distance."""

    def __init__(self, depth: int, heads: int, prefix: int) -> None:
        self.prefix = prefix
        z = lambda: torch.zeros(depth, heads, dtype=torch.float64)  # noqa: E731
        self.ent, self.dist = z(), z()
        self.n_ent = torch.zeros(depth, dtype=torch.float64)
        self.n_dist = torch.zeros(depth, dtype=torch.float64)
        self.max_ent = torch.zeros(depth, dtype=torch.float64)

    def update(self, layer: int, probs: Tensor, coords: Tensor, key_mask: Tensor | None) -> None:
        """``probs (B, H, T, T)``, ``coords (N, p)`` / ``(B, N, p)`` of the ``N = T - prefix`` patch tokens,
        ``key_mask (B, T)`` or None."""
        p = probs.double()
        B, H, T, _ = p.shape
        P = self.prefix
        real = key_mask if key_mask is not None else torch.ones(B, T, dtype=torch.bool, device=p.device)  # (B, T)
        w = real.double()  # queries counted
        ent = -(p * torch.log(p.clamp_min(1e-300))).sum(-1)  # (B, H, T); 0 log 0 = 0 (p = 0 -> 0 * log tiny)
        self.ent[layer] += (ent * w[:, None, :]).sum((0, 2)).cpu()
        self.n_ent[layer] += float(w.sum())
        self.max_ent[layer] += float((torch.log(w.sum(1, keepdim=True)) * w).sum())
        c = coords.double()
        c = c.expand(B, -1, -1) if c.dim() == 2 else c  # (B, N, p)
        dist = torch.cdist(c, c)  # (B, N, N)
        pp = p[:, :, P:, P:]  # (B, H, N, N): patch queries -> patch keys
        mass = pp.sum(-1)  # (B, H, N)
        d = (pp * dist[:, None]).sum(-1) / mass.clamp_min(1e-300)  # (B, H, N)
        wq = w[:, P:]  # real patch queries
        self.dist[layer] += (d * wq[:, None, :]).sum((0, 2)).cpu()
        self.n_dist[layer] += float(wq.sum())

    def compute(self) -> dict[str, Any]:
        ent = self.ent / self.n_ent.clamp_min(1)[:, None]
        dist = self.dist / self.n_dist.clamp_min(1)[:, None]

        def rows(t: Tensor) -> list[list[float | None]]:
            return [[finite_or_none(v) for v in r] for r in t.tolist()]

        return {"entropy": rows(ent), "entropy_mean": [finite_or_none(v) for v in ent.mean(1).tolist()],
                "max_entropy": [finite_or_none(v) for v in (self.max_ent / self.n_ent.clamp_min(1)).tolist()],
                "distance": rows(dist), "distance_mean": [finite_or_none(v) for v in dist.mean(1).tolist()]}


def distance_unit(task: Any) -> str:
    """``patch`` where coords are grid cells (images, video, event frames), else ``coordinate``."""
    return "patch" if getattr(task, "modality", None) in ("image", "video", "events") else "coordinate"


def attention_stats(task: Any, datamodule: Any, probe_size: int | None = 64, batch_size: int | None = None
                    ) -> dict[str, Any]:
    """Entropy per layer and head, mean attention distance per layer (and head) on the probe set (see the
    module docstring). -> ``{"layers", "heads", "entropy", "entropy_mean", "max_entropy", "distance",
    "distance_mean", "distance_unit", "probe_size"}`` (``entropy`` / ``distance``: ``[layer][head]``)."""
    bb = task.backbone
    device = task_device(task)
    stats = AttentionStats(int(bb.depth), int(bb.num_heads), int(bb.num_prefix_tokens))
    handles = _observe(task, stats.update)
    n = 0
    try:
        with evaluating(task):
            for batch in probe_loader(datamodule, probe_size, batch_size):
                x = batch_inputs(task, batch, device)
                _forward(task, x)
                n += num_samples(x)
    finally:
        for h in handles:
            h.remove()
    if n == 0:
        raise ValueError("attention: the probe set is empty (no validation samples)")
    return {"layers": list(range(int(bb.depth))), "heads": int(bb.num_heads), **stats.compute(),
            "distance_unit": distance_unit(task), "probe_size": n}


# ------------------------------------------------------------------------------- registration
@dataclass(frozen=True)
class AttentionOptions:
    attention_probe_size: int | None = option(64, "probe samples of the attention analysis (none: all)",
                                              minimum=1, what="samples")


@register_analysis("attention", order=50, options=AttentionOptions, in_all=False)
class AttentionAnalysis(Analysis):
    """Attention entropy per layer and head, mean attention distance per layer (ViT paper, Fig. 7)."""

    plot = ("attention.png", plot_attention)

    def run(self, ctx: AnalysisContext) -> dict[str, Any]:
        return attention_stats(ctx.task, ctx.datamodule, probe_size=ctx.options["attention_probe_size"])

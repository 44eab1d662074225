"""LightningModules (tasks): tokenizer -> PE-pluggable ViT backbone -> head -> loss and metrics.

:class:`ClassificationTask` trains any modality with cross-entropy (optional label smoothing),
AdamW with linear warm-up + cosine decay (optional layer-wise lr decay), and torchmetrics
top-1 / top-5 / mean-class accuracy, which reduce exactly across DDP ranks.

Interventions (docs/architecture.md §2): ``rpt=True`` permutes token *content* against coords with a fresh
permutation on every training forward (RPT); ``forward(..., content_perm=perm)`` does the same
with a given permutation at inference (RPI). Analyses read per-block tokens through
:meth:`ClassificationTask.features` (``forward_intermediates``; no hooks).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchmetrics import MetricCollection
from torchmetrics.aggregation import MeanMetric, SumMetric
from torchmetrics.classification import MulticlassAccuracy

from pebench.core.errors import ConfigError, RunFailedError
from pebench.datamodules.events.spiking import EventTokens
from pebench.datamodules.probes.probe_sets import SET_TOKENS, GlyphTokens
from pebench.models.heads import ClassificationHead
from pebench.models.set_tokenizer import SetPatchTokenizer
from pebench.models.spiking import SpikingPatchTokenizer
from pebench.models.tokenizers import ImageTokenizer, PointTokenizer, TokenBatch, TubeletTokenizer
from pebench.models.vit import build_backbone, model_config

__all__ = ["ClassificationTask", "NonFiniteLossError", "build_tokenizer", "split_batch"]


class NonFiniteLossError(RunFailedError):
    """Raised when the training loss is NaN/inf (the run stops; the last good checkpoint stays)."""


def build_tokenizer(modality: str, embed_dim: int, in_chans: int, patch_size: int, tubelet: int,
                    num_groups: int, tokens: str = "frames", tokenizer_options: dict | None = None) -> nn.Module:
    """``tokens="spiking"`` (events only): :class:`~pebench.models.spiking.SpikingPatchTokenizer`;
    ``tokens="occupied"`` (the set probes' glyph tokens): :class:`~pebench.models.set_tokenizer.SetPatchTokenizer`."""
    if tokens == SET_TOKENS:
        if modality != "image":
            raise ConfigError(f"tokens={SET_TOKENS!r} applies to images, not {modality}")
        return SetPatchTokenizer(embed_dim, patch_size, in_chans)
    if tokens == "spiking":
        if modality != "events":
            raise ConfigError(f"tokens='spiking' applies to events, not {modality}")
        return SpikingPatchTokenizer(embed_dim, patch_size, **(tokenizer_options or {}))
    if modality == "image":
        return ImageTokenizer(embed_dim, patch_size, in_chans)
    if modality in ("video", "events"):
        return TubeletTokenizer(embed_dim, patch_size, tubelet, in_chans)
    if modality == "points":
        return PointTokenizer(embed_dim, num_groups=num_groups, **(tokenizer_options or {}))  # e.g. probe-parts: centre
    raise ConfigError(f"unknown modality {modality!r}; available: image, video, events, points")


def split_batch(batch: Sequence[Any]) -> tuple[Tensor, Tensor, int]:
    """``(inputs, labels[, info])`` -> inputs, labels, number of skipped (corrupt) samples."""
    inputs, labels = batch[0], batch[1]
    info = batch[2] if len(batch) > 2 else {}
    return inputs, labels, int(info.get("skipped", 0)) if isinstance(info, dict) else 0


#: learning-rate schedules after the linear warm-up (``bench run --lr-schedule``)
LR_SCHEDULES: tuple[str, ...] = ("cosine", "constant")


def warmup_cosine(opt: torch.optim.Optimizer, total_steps: float, warmup_epochs: float, epochs: int,
                  schedule: str = "cosine") -> dict:
    """Lightning optimizer config: linear warm-up over ``warmup_epochs`` of ``epochs``, then cosine decay
    to 0 at ``total_steps`` (``schedule="cosine"``) or the peak learning rate held (``"constant"``, for
    runs that stop at a validation target: ``bench run --stop-at``), stepped per batch (shared by the
    supervised tasks)."""
    if schedule not in LR_SCHEDULES:
        raise ConfigError(f"unknown lr schedule {schedule!r}; expected one of {', '.join(LR_SCHEDULES)}")
    total = max(1, int(total_steps))
    warmup = int(round(total * min(1.0, warmup_epochs / max(1, int(epochs)))))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if schedule == "constant":
            return 1.0
        t = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, t)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class SkippedSampleCount:
    """Task-module mixin: corrupt samples skipped inside batches (``self.skipped``, a ``SumMetric``, and
    ``self._skipped_restored``, both set in the task's ``__init__``), kept across resumes in the checkpoint."""

    def skipped_total(self) -> int:
        """Corrupt samples skipped inside batches over the whole run, earlier attempts included
        (a resumed run restores their count from the checkpoint). Under DDP this reduces over
        the ranks, so every rank must call it."""
        with warnings.catch_warnings():  # compute() before any update: 0, not worth a warning
            warnings.filterwarnings("ignore", message=".*compute.*before.*update.*")
            current = float(self.skipped.compute())
        return int(round(current + self._skipped_restored))

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # the reduced total (all ranks run this hook); restored on every rank but counted once
        checkpoint["skipped_in_batches"] = self.skipped_total()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self._skipped_restored = float(checkpoint.get("skipped_in_batches", 0))


class ClassificationTask(SkippedSampleCount, L.LightningModule):
    def __init__(self, modality: str, num_classes: int, in_chans: int = 3, model: str = "vit-nano",
                 pe: str = "none", pe_options: dict | None = None, patch_size: int = 4, tubelet: int = 2,
                 num_groups: int = 64, train_grid: Sequence[int] | None = None, class_token: bool = False,
                 pool: str = "mean", lr: float = 1e-3, weight_decay: float = 0.05, warmup_epochs: float = 1.0,
                 epochs: int = 10, label_smoothing: float = 0.0, rpt: bool = False,
                 layer_decay: float | None = None, drop_path: float = 0.0, tokens: str = "frames",
                 tokenizer_options: dict | None = None, lr_schedule: str = "cosine") -> None:
        super().__init__()
        self.save_hyperparameters()
        dim = model_config(model).embed_dim
        spatial_dims = 2 if modality == "image" else 3
        self.modality = modality
        self.tokens = tokens
        self.tokenizer = build_tokenizer(modality, dim, in_chans, patch_size, tubelet, num_groups, tokens,
                                         tokenizer_options)
        # spiking-patch and set-probe tokens are not on a grid: grid-free PEs (ape: its coords MLP)
        self.backbone = build_backbone(model, pe=pe, spatial_dims=spatial_dims,
                                       grid=tuple(train_grid) if train_grid and tokens not in ("spiking", SET_TOKENS)
                                       else None,
                                       class_token=class_token, drop_path_rate=drop_path, **(pe_options or {}))
        self.head = ClassificationHead(dim, num_classes, pool, self.backbone.num_prefix_tokens)
        self.rpt = rpt
        top5 = min(5, num_classes)
        self.val_metrics = MetricCollection({
            "acc1": MulticlassAccuracy(num_classes, top_k=1, average="micro"),
            f"acc{top5}": MulticlassAccuracy(num_classes, top_k=top5, average="micro"),
            "mean_class_acc": MulticlassAccuracy(num_classes, top_k=1, average="macro"),
        }, prefix="val/", compute_groups=False)
        # compute_groups=False: torchmetrics otherwise merges metrics whose states agree after the first
        # update; when the first batch is 100 % correct, top-k and macro top-1 agree there and share one
        # state from then on, so mean_class_acc read acc{top5} (1.0 for k = C) in committed runs (issue #44)
        self.test_metrics = self.val_metrics.clone(prefix="test/")
        self.train_acc = MulticlassAccuracy(num_classes, top_k=1, average="micro")
        self.skipped = SumMetric()
        # skip events counted by earlier attempts of this run (restored from the checkpoint on resume)
        self._skipped_restored = 0.0
        # eval loss: a sample-weighted mean whose (sum, weight) states reduce exactly across DDP ranks
        # (self.log(..., sync_dist=True) would average per-rank means, which differ in size)
        self.val_loss = MeanMetric()
        self.test_loss = MeanMetric()

    # ------------------------------------------------------------------ model
    def tokenize(self, inputs: Tensor) -> TokenBatch:
        return self.tokenizer(inputs)

    @staticmethod
    def permute_content(tb: TokenBatch, perm: Tensor | None) -> TokenBatch:
        """Permute token content against coords (RPI/RPT): coords, grid keep their order. ``perm``:
        ``(N,)``, one permutation for every sample, or ``(B, N)``, one per sample (RPI's per-sample draw)."""
        if perm is None:
            return tb
        if perm.dim() == 2:
            x = tb.x.gather(1, perm.unsqueeze(-1).expand(-1, -1, tb.x.shape[-1]))
            return TokenBatch(x, tb.coords, tb.grid, tb.mask.gather(1, perm) if tb.mask is not None else None)
        mask = tb.mask[:, perm] if tb.mask is not None else None
        return TokenBatch(tb.x[:, perm], tb.coords, tb.grid, mask)

    def forward(self, inputs: Tensor, content_perm: Tensor | None = None) -> Tensor:
        """Logits ``(B, C)``. Video inputs ``(B, K, C, T, H, W)`` average the logits of K clips."""
        if self.modality == "video" and inputs.dim() == 6:
            B, K = inputs.shape[:2]
            return self.forward(inputs.flatten(0, 1), content_perm).view(B, K, -1).mean(1)
        tb = self.permute_content(self.tokenize(inputs), content_perm)
        tokens = self.backbone(tb.x, tb.coords, tb.grid, tb.mask)  # (B, P + N, D)
        return self.head(tokens, tb.mask)

    def features(self, inputs: Tensor, content_perm: Tensor | None = None,
                 tap: str = "block_out") -> tuple[list[Tensor], Tensor]:
        """Per-block patch tokens ``[(B, N, D)] * depth`` and the coords ``(N, p)`` they sit at.

        ``tap``: ``"block_out"`` (residual stream after blocks 1..L) or ``"attn_in"`` (each
        block's LN1 output = its attention input, blocks 0..L-1); see
        :meth:`~pebench.models.vit.ViTBackbone.forward_intermediates`."""
        if isinstance(inputs, (EventTokens, GlyphTokens)):
            raise ValueError("features: spiking-patch and set-probe tokens have per-sample coords and padding, not one grid "
                             "shared by the batch; the geometry analyses (SSDC/EED) need tokens=frames")
        tb = self.permute_content(self.tokenize(inputs), content_perm)
        feats = self.backbone.forward_intermediates(tb.x, tb.coords, tb.grid, tb.mask, tap=tap)
        coords = tb.coords if tb.coords.dim() == 2 else tb.coords[0]
        return feats, coords

    # ------------------------------------------------------------------ steps
    def _random_perm(self, inputs: Tensor) -> Tensor:
        n = self.tokenize_count(inputs)
        return torch.randperm(n, device=inputs.device)

    def tokenize_count(self, inputs: Tensor) -> int:
        if isinstance(inputs, (EventTokens, GlyphTokens)):
            return int(inputs.shape[1])  # padded token count
        if self.modality == "points":
            return int(self.tokenizer.num_groups)
        return int(math.prod(self.tokenizer.grid_for(inputs.shape[-(2 if self.modality == "image" else 3):])))

    def training_step(self, batch: Sequence[Any], batch_idx: int) -> Tensor:
        inputs, labels, skipped = split_batch(batch)
        self.skipped.update(torch.tensor(float(skipped), device=self.device))
        if labels.numel() == 0:
            return None  # a batch of only corrupt samples
        perm = self._random_perm(inputs) if self.rpt else None
        logits = self(inputs, content_perm=perm)
        loss = F.cross_entropy(logits, labels, label_smoothing=self.hparams.label_smoothing)
        if not torch.isfinite(loss):
            raise NonFiniteLossError(f"non-finite training loss {loss.item()} at global step {self.global_step}, "
                                     f"epoch {self.current_epoch}, batch {batch_idx}")
        self.train_acc(logits.detach(), labels)
        # sync_dist: under DDP the logged loss is the global batch's (the mean of the ranks' equal-size
        # halves), so metrics.csv reads the same for any number of processes (one scalar all-reduce a step)
        self.log("train/loss", loss, prog_bar=True, on_step=True, on_epoch=True, batch_size=labels.numel(),
                 sync_dist=True)
        self.log("train/acc1", self.train_acc, prog_bar=False, on_step=False, on_epoch=True)
        return loss

    def _eval_step(self, batch: Sequence[Any], metrics: MetricCollection, loss_metric: MeanMetric,
                   prefix: str) -> None:
        inputs, labels, skipped = split_batch(batch)
        self.skipped.update(torch.tensor(float(skipped), device=self.device))
        if labels.numel() == 0:
            return
        logits = self(inputs)
        loss = F.cross_entropy(logits, labels)
        metrics.update(logits, labels)
        loss_metric.update(loss.detach(), weight=labels.numel())
        self.log(f"{prefix}/loss", loss_metric, prog_bar=False, on_step=False, on_epoch=True)
        self.log_dict(metrics, prog_bar=True, on_epoch=True)

    def validation_step(self, batch: Sequence[Any], batch_idx: int) -> None:
        self._eval_step(batch, self.val_metrics, self.val_loss, "val")

    def test_step(self, batch: Sequence[Any], batch_idx: int) -> None:
        self._eval_step(batch, self.test_metrics, self.test_loss, "test")

    # ------------------------------------------------------------------ optimisation
    def _layer_id(self, name: str) -> int:
        depth = self.backbone.depth
        if name.startswith("backbone.blocks."):
            return int(name.split(".")[2]) + 1
        if name.startswith(("tokenizer.", "backbone.pe.", "backbone.cls_token")):
            return 0
        return depth + 1

    def param_groups(self) -> list[dict]:
        """AdamW groups: no decay for biases, norms, tables/frequencies the PE names; optional
        layer-wise lr decay ``lr * layer_decay ** (depth + 1 - layer_id)``."""
        no_decay = {f"backbone.{n}" for n in self.backbone.no_weight_decay()}
        ld = self.hparams.layer_decay
        groups: dict[tuple[int, bool], dict] = {}
        for name, p in self.named_parameters():
            if not p.requires_grad:
                continue
            decay = not (p.ndim <= 1 or name.endswith(".bias") or name in no_decay
                         or any(name.startswith(n + ".") for n in no_decay))
            lid = self._layer_id(name) if ld else 0
            g = groups.setdefault((lid, decay), {"params": [], "weight_decay": self.hparams.weight_decay if decay else 0.0,
                                                 "lr_scale": (ld ** (self.backbone.depth + 1 - lid)) if ld else 1.0})
            g["params"].append(p)
        return [groups[k] for k in sorted(groups)]

    def configure_optimizers(self) -> dict:
        groups = self.param_groups()
        for g in groups:
            g["lr"] = self.hparams.lr * g["lr_scale"]
        opt = torch.optim.AdamW(groups, lr=self.hparams.lr, betas=(0.9, 0.999))
        return warmup_cosine(opt, self.trainer.estimated_stepping_batches, self.hparams.warmup_epochs,
                             self.hparams.epochs, self.hparams.get("lr_schedule", "cosine"))

"""``segmentation``: 3-D scene semantic segmentation on the PE-pluggable ViT (ScanNet, nuScenes
lidarseg, primitives-scene).

Model (no public code shows how the PaPE paper inserted its PE into a scene-segmentation network, so
pebench defines it; the layout follows Point-BERT-style patch tokens and PointNet++ feature
propagation):

1. :class:`~pebench.models.scene_tokenizer.SceneTokenizer`: grid-sampled points -> patches of ``K``
   points (serialization along a z-order curve by default, FPS + kNN as an option) -> one token per
   patch; coords = patch centres in metres (x ``coord_scale``, 1 by default) in the dataset's frame;
   variable token counts with a mask.
2. the ViT backbone with the chosen PE on those coords; **full attention over all tokens** of a
   scene, key-masked for padding, by default; with ``attn_window=W`` (serialize patching only)
   windowed attention over runs of ``W`` z-order-consecutive tokens, borders shifted by ``W // 2``
   on odd blocks (:mod:`pebench.models.vit`; PTv3-style; default scenes fit full attention,
   ~1.5k tokens for a 10^5-point ScanNet scene at
   K = 64).
3. per point: the final tokens interpolated to the point from the ``k = 3`` nearest token centres
   (inverse squared distance, :func:`~pebench.models.scene_tokenizer.knn_interpolate`; tokens first
   projected to 64 channels), concatenated
   with a small MLP of the point's own features (colour [, normal] / intensity) and its offset to the
   nearest token centre (never its absolute position: position reaches the model only through the
   PE), then an MLP to class logits.

Loss: cross-entropy over real, labelled points (``ignore_index``). Metrics
(:class:`~pebench.tasks.segmentation.miou.SegmentationMetrics`, a confusion-matrix sum state, exact across DDP
ranks): ``val/miou`` (primary), ``val/oacc``, ``val/macc``, ``val/loss``; per-class IoU in
``results.json`` (``segmentation.val_iou_per_class``). Optimisation as the classification task
(AdamW, warm-up + cosine, no decay on norms / biases / PE tables).

Analyses: ``features()`` / ``tokenize()`` / ``permute_content()`` as the other tasks, so
``geometry`` (SSDC with the Euclidean distance between token centres, per scene, EED) applies. RPI /
RPT permute token content within each scene's real tokens (padding stays padding). ``robustness``
(point jitter / dropout, FS on mIoU) and ``extrapolation`` (denser sampling, tiled larger scenes)
call ``forward`` on shifted or re-sampled scenes (:mod:`pebench.tasks.segmentation.shift`).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchmetrics import MeanMetric, SumMetric

from pebench.core.errors import ConfigError
from pebench.models.scene_tokenizer import PATCHINGS, SceneTokenizer, knn_interpolate, masked_knn
from pebench.models.tokenizers import TokenBatch
from pebench.models.vit import build_backbone, check_attn_window, model_config
from pebench.tasks.classification.module import NonFiniteLossError, SkippedSampleCount, split_batch, warmup_cosine

from .miou import SegmentationMetrics

__all__ = ["SegmentationTask"]


class SegmentationTask(SkippedSampleCount, L.LightningModule):
    modality = "points"

    def __init__(self, num_classes: int, feat_dim: int, class_names: Sequence[str] | None = None,
                 ignore_index: int = -1, model: str = "vit-nano", pe: str = "none", pe_options: dict | None = None,
                 patching: str = "serialize", patch_size: int = 32, grid_size: float = 0.02,
                 coord_scale: float = 1.0, interp_k: int = 3, lr: float = 1e-3, weight_decay: float = 0.05,
                 warmup_epochs: float = 1.0, epochs: int = 10, drop_path: float = 0.0, rpt: bool = False,
                 coord_unit: str = "m", attn_window: int | None = None, lr_schedule: str = "cosine") -> None:
        super().__init__()
        self.save_hyperparameters()
        if patching not in PATCHINGS:
            raise ConfigError(f"unknown patching {patching!r}; available: {', '.join(PATCHINGS)}")
        if int(interp_k) < 1 or int(patch_size) < 1 or not (float(coord_scale) > 0):
            raise ConfigError("interp_k and patch_size must be >= 1 and coord_scale > 0")
        dim = model_config(model).embed_dim
        self.tokenizer = SceneTokenizer(dim, feat_dim, int(patch_size), patching, grid_size, coord_scale)
        if check_attn_window(attn_window) is not None and patching != "serialize":
            raise ConfigError(f"attn_window needs patching=serialize (windows are runs of the z-order), got {patching}")
        self.backbone = build_backbone(model, pe=pe, spatial_dims=3, grid=None, class_token=False,
                                       drop_path_rate=drop_path, attn_window=attn_window, **(pe_options or {}))
        # per-point layers are narrow (they run on every point of every scene): tokens are projected to
        # 64 channels before interpolation, the point's own features to 32
        self.token_proj = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 64))
        self.point_mlp = nn.Sequential(nn.Linear(feat_dim + 3, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 32))
        self.head = nn.Sequential(nn.LayerNorm(96), nn.Linear(96, 64), nn.GELU(), nn.Linear(64, num_classes))
        self.ignore_index = int(ignore_index)
        self.rpt = rpt
        names = list(class_names) if class_names is not None else None
        self.val_metrics = SegmentationMetrics(num_classes, ignore_index, names)
        self.test_metrics = SegmentationMetrics(num_classes, ignore_index, names)
        self.val_loss, self.test_loss = MeanMetric(), MeanMetric()
        self.skipped = SumMetric()
        self._skipped_restored = 0.0
        #: per-class IoU etc. of the last validation / test epoch (results.json)
        self.last_summary: dict[str, dict[str, Any]] = {}

    # ------------------------------------------------------------------ model
    def tokenize(self, inputs: dict[str, Tensor]) -> TokenBatch:
        return self.tokenizer(inputs["coord"], inputs["feat"], inputs["mask"])[0]

    def tokenize_count(self, inputs: dict[str, Tensor]) -> int:
        """Padded token count of the batch (the length of an RPI permutation)."""
        _, _, tmask = self.tokenizer.patches(inputs["coord"], inputs["mask"])
        return int(tmask.shape[1])

    @staticmethod
    def permute_content(tb: TokenBatch, perm: Tensor | None) -> TokenBatch:
        """Permute token content against coords within each scene's real tokens (RPI / RPT).

        ``perm`` is a permutation of the padded count ``T``; scene ``b`` with ``n_b`` real tokens (the
        first ``n_b``: tokenizers put padding last) uses the entries of ``perm`` below ``n_b``, in
        their order, as its permutation. Coords and mask keep their order."""
        if perm is None:
            return tb
        if tb.mask is None:
            return TokenBatch(tb.x[:, perm], tb.coords, tb.grid, None)
        B, T, _ = tb.x.shape
        n = tb.mask.sum(1)  # (B,)
        keep = perm.unsqueeze(0) < n.unsqueeze(1)  # (B, T): entries of perm that are real tokens of b
        # stable sort puts each scene's kept entries first, in perm order
        order = torch.sort((~keep).to(torch.int8), dim=1, stable=True).indices  # (B, T)
        src = torch.gather(perm.unsqueeze(0).expand(B, -1), 1, order)  # (B, T): first n_b = perm of 0..n_b-1
        ar = torch.arange(T, device=perm.device).unsqueeze(0)
        src = torch.where(ar < n.unsqueeze(1), src, ar)  # padding stays in place
        x = torch.gather(tb.x, 1, src.unsqueeze(-1).expand(-1, -1, tb.x.shape[-1]))
        return TokenBatch(x, tb.coords, tb.grid, tb.mask)

    def forward(self, inputs: dict[str, Tensor], content_perm: Tensor | None = None) -> Tensor:
        """Per-point logits ``(B, M, C)`` for ``inputs`` ``{"coord" (B, M, 3), "feat" (B, M, F), "mask" (B, M)}``."""
        coord, feat, mask = inputs["coord"], inputs["feat"], inputs["mask"]
        tb, centres = self.tokenizer(coord, feat, mask)  # tokens (B, T, D), centres (B, T, 3) m
        tb = self.permute_content(tb, content_perm)
        tokens = self.backbone(tb.x, tb.coords, None, tb.mask)  # (B, T, D)
        k = int(self.hparams.interp_k)
        up = knn_interpolate(self.token_proj(tokens), centres, tb.mask, coord, mask, k=k)  # (B, M, 64)
        with torch.no_grad():
            _, nearest = masked_knn(coord, centres, tb.mask, 1)  # (B, M, 1)
        near = torch.gather(centres, 1, nearest.expand(-1, -1, 3))  # (B, M, 3)
        own = self.point_mlp(torch.cat([feat, (coord - near) * 10.0], -1))  # (B, M, 32); offset in dm
        return self.head(torch.cat([up, own], -1))  # (B, M, C)

    def features(self, inputs: dict[str, Tensor], content_perm: Tensor | None = None,
                 tap: str = "block_out") -> tuple[list[Tensor], Tensor]:
        """Per-block patch tokens ``[(B, T, D)] * depth`` and their coords ``(B, T, 3)`` (padded tokens
        included; their mask is ``self.tokenize(inputs).mask``)."""
        tb = self.permute_content(self.tokenize(inputs), content_perm)
        return self.backbone.forward_intermediates(tb.x, tb.coords, None, tb.mask, tap=tap), tb.coords

    # ------------------------------------------------------------------ steps
    def _loss(self, logits: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=self.ignore_index)

    def training_step(self, batch: Sequence[Any], batch_idx: int) -> Tensor | None:
        inputs, target, skipped = split_batch(batch)
        self.skipped.update(torch.tensor(float(skipped), device=self.device))
        if target.numel() == 0 or not bool((target != self.ignore_index).any()):
            return None  # only corrupt scenes, or nothing labelled
        perm = None
        if self.rpt:
            perm = torch.randperm(self.tokenize_count(inputs), device=self.device)
        logits = self(inputs, content_perm=perm)
        loss = self._loss(logits, target)
        if not torch.isfinite(loss):
            raise NonFiniteLossError(f"non-finite training loss {loss.item()} at global step {self.global_step}, "
                                     f"epoch {self.current_epoch}, batch {batch_idx}")
        self.log("train/loss", loss, prog_bar=True, on_step=True, on_epoch=True, batch_size=target.shape[0])
        return loss

    def _eval_step(self, batch: Sequence[Any], metrics: SegmentationMetrics, loss_metric: MeanMetric) -> None:
        inputs, target, skipped = split_batch(batch)
        self.skipped.update(torch.tensor(float(skipped), device=self.device))
        if target.numel() == 0:
            return
        logits = self(inputs)
        metrics.update(logits.detach(), target)
        n = int((target != self.ignore_index).sum())
        if n:
            loss_metric.update(self._loss(logits, target).detach(), weight=n)

    def validation_step(self, batch: Sequence[Any], batch_idx: int) -> None:
        self._eval_step(batch, self.val_metrics, self.val_loss)

    def test_step(self, batch: Sequence[Any], batch_idx: int) -> None:
        self._eval_step(batch, self.test_metrics, self.test_loss)

    def _epoch_end(self, prefix: str, metrics: SegmentationMetrics, loss_metric: MeanMetric) -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*compute.*before.*update.*")
            summary = metrics.summary()  # reduced over DDP ranks (sum state): identical on every rank
            loss = float(loss_metric.compute())  # nan when no labelled point was seen
        self.last_summary[prefix] = summary
        vals = {f"{prefix}/{k}": summary[k] for k in ("miou", "oacc", "macc")}
        vals[f"{prefix}/loss"] = loss
        self.log_dict({k: torch.tensor(v if math.isfinite(v) else float("nan")) for k, v in vals.items()},
                      prog_bar=True, sync_dist=False)
        metrics.reset()
        loss_metric.reset()

    def on_validation_epoch_end(self) -> None:
        self._epoch_end("val", self.val_metrics, self.val_loss)

    def on_test_epoch_end(self) -> None:
        self._epoch_end("test", self.test_metrics, self.test_loss)

    # ------------------------------------------------------------------ optimisation
    def configure_optimizers(self) -> dict:
        no_decay = {f"backbone.{n}" for n in self.backbone.no_weight_decay()}
        decay, other = [], []
        for name, p in self.named_parameters():
            if not p.requires_grad:
                continue
            skip = p.ndim <= 1 or name.endswith(".bias") or name in no_decay or any(
                name.startswith(n + ".") for n in no_decay)
            (other if skip else decay).append(p)
        groups = [{"params": decay, "weight_decay": self.hparams.weight_decay},
                  {"params": other, "weight_decay": 0.0}]
        opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=self.hparams.lr, betas=(0.9, 0.999))
        return warmup_cosine(opt, self.trainer.estimated_stepping_batches, self.hparams.warmup_epochs,
                             self.hparams.epochs, self.hparams.get("lr_schedule", "cosine"))

"""``detection``: 2-D object detection on the PE-pluggable ViT (docs/architecture.md §8).

tokenizer (:func:`~pebench.tasks.classification.build_tokenizer`: patches for images, tubelets for binned events,
spiking-patch tokens for event streams with ``tokens=spiking``) -> backbone (any ``--pe``; coords in
patch units as everywhere) -> the last block's tokens as a ``(B, D, H/p, W/p)`` map (event tubelets
``(T', H', W')`` are averaged over ``T'``; tokens off a grid are scattered into their cells by
:func:`scatter_token_map`, the mean of each cell's real tokens) -> ViTDet's simple feature pyramid
-> torchvision's FCOS head, losses and post-processing (:mod:`pebench.tasks.detection.pyramid`).

Batches follow ``datamodules/detection_common.py``: ``(inputs, targets[, info])`` with xyxy boxes
in the input frame. Training logs ``train/loss`` (sum of FCOS's focal classification, GIoU
regression and centre-ness losses; each also logged). Validation / test log the same losses
(``val/loss``) and COCO mAP from :class:`~pebench.tasks.detection.coco_eval.CocoEvaluator` against the
datamodule's ``coco_gt(split)`` in the original frame: ``val/map`` (primary), ``val/map_50``,
``val/map_75``, ``val/map_small``, ``val/map_medium``, ``val/map_large`` (``test/*`` likewise); the
number of distinct images each COCOeval saw is logged as ``val/map_images`` (a count, not a
fraction) and kept in :attr:`DetectionTask.images_evaluated` (``results.json`` ``detection_images``).

Optimisation as the classification task: AdamW (no decay on norms, biases, PE tables), linear
warm-up then cosine decay per step, optional layer-wise lr decay (the pyramid and head count as
the top layer). The analysis interface (``tokenizer``, ``backbone``, ``tokenize``,
``permute_content``, ``features``, ``tokenize_count``, ``modality``) is the classification task's,
so geometry (SSDC / EED on the backbone tokens) applies unchanged.
"""
from __future__ import annotations

import warnings
from typing import Any, Sequence

import lightning as L
import torch
from torch import Tensor
from torchmetrics.aggregation import MeanMetric, SumMetric

from pebench.core.errors import ConfigError
from pebench.datamodules.detection_common import content_size
from pebench.datamodules.events.spiking import EventTokens
from pebench.models.vit import build_backbone, model_config
from pebench.tasks.classification.module import (
    ClassificationTask,
    NonFiniteLossError,
    SkippedSampleCount,
    build_tokenizer,
)

from .coco_eval import CocoEvaluator
from .pyramid import Detector

__all__ = ["DetectionTask", "scatter_token_map"]


def scatter_token_map(tokens: Tensor, coords: Tensor, mask: Tensor | None, grid_hw: Sequence[int]) -> Tensor:
    """Tokens off a grid -> a ``(B, D, h, w)`` token map: each cell holds the **mean** of the real
    tokens whose ``(y, x)`` fall in it; cells without a real token are 0.

    ``tokens (B, N, D)``; ``coords (B, N, p)`` whose last two axes are ``(y, x)`` in cells (patch
    units; spiking-patch tokens: ``(t, y, x)`` with integer ``y, x``); ``mask (B, N)`` True = real
    token (None: all real). Padding tokens never contribute, whatever their coords or values. A
    real token outside the ``h x w`` cells is a ``ValueError``.

    Why the mean and not the most recent token: a cell's tokens summarise disjoint sets of its
    events (each firing absorbs its own ``threshold`` events), so the mean weighs every firing
    equally and loses none; it is independent of token order by construction (no tie rule is needed
    for tokens of one cell firing in the same microsecond); every real token gets a gradient; with
    one token per cell it is that token, and it is the same reduction over time as the frames
    path's mean over ``T'``. The PaPE harness writes tokens into the map with an indexed assignment,
    where the last of several writes to one cell wins in an unspecified order.

    Computed as one batched matrix product of a ``(B, h*w, N)`` cell-membership matrix with the
    tokens, divided by the per-cell counts: vectorised, differentiable, and deterministic on every
    device (``index_add_`` / ``scatter_reduce`` on CUDA add with atomics, whose float summation
    order varies between calls). Memory ``B * h * w * N``: 285 cells x 512 tokens per GEN1 sample."""
    B, N, D = tokens.shape
    h, w = int(grid_hw[0]), int(grid_hw[1])
    real = torch.ones(B, N, dtype=torch.bool, device=tokens.device) if mask is None else mask.to(torch.bool)
    yx = coords[..., -2:].round().long()  # (B, N, 2)
    if coords.dim() == 2:  # (N, p) shared by the batch
        yx = yx.unsqueeze(0).expand(B, N, 2)
    inside = (yx[..., 0] >= 0) & (yx[..., 0] < h) & (yx[..., 1] >= 0) & (yx[..., 1] < w)  # (B, N)
    if bool((real & ~inside).any()):
        raise ValueError(f"a token's (y, x) lies outside the {h} x {w} token map")
    cell = torch.where(real & inside, yx[..., 0] * w + yx[..., 1], -1)  # (B, N); -1: contributes nowhere
    member = (cell.unsqueeze(1) == torch.arange(h * w, device=tokens.device).view(1, h * w, 1)).to(tokens.dtype)
    count = member.sum(dim=2, keepdim=True, dtype=torch.float32)  # (B, h*w, 1), exact whatever the token dtype
    x = tokens.masked_fill(~real.unsqueeze(-1), 0.0)  # padding values (even NaN) never reach the map
    fmap = (torch.bmm(member, x) / count.clamp(min=1.0)).to(tokens.dtype)  # (B, h*w, D)
    return fmap.transpose(1, 2).reshape(B, D, h, w)


def _split(batch: Sequence[Any]) -> tuple[Tensor, list[dict], int]:
    inputs, targets = batch[0], batch[1]
    info = batch[2] if len(batch) > 2 else {}
    return inputs, list(targets), int(info.get("skipped", 0)) if isinstance(info, dict) else 0


class DetectionTask(SkippedSampleCount, L.LightningModule):
    def __init__(self, modality: str = "image", num_classes: int = 80, in_chans: int = 3, model: str = "vit-nano",
                 pe: str = "none", pe_options: dict | None = None, patch_size: int = 16, tubelet: int = 2,
                 train_grid: Sequence[int] | None = None, class_token: bool = False, lr: float = 1e-3,
                 weight_decay: float = 0.05, warmup_epochs: float = 1.0, epochs: int = 10,
                 layer_decay: float | None = None, drop_path: float = 0.0, fpn_dim: int | None = None,
                 pyramid_levels: int = 3, head_convs: int = 4, score_thresh: float = 0.05, nms_thresh: float = 0.6,
                 detections_per_img: int = 100, topk_candidates: int = 1000,
                 center_sampling_radius: float = 1.5, tokens: str = "frames",
                 tokenizer_options: dict | None = None, lr_schedule: str = "cosine") -> None:
        super().__init__()
        self.save_hyperparameters()
        if modality not in ("image", "events"):
            raise ConfigError(f"the detection task takes images or events, not {modality}")
        dim = model_config(model).embed_dim
        self.modality = modality
        self.tokens = tokens
        self.tokenizer = build_tokenizer(modality, dim, in_chans, patch_size, tubelet, 64, tokens, tokenizer_options)
        # spiking-patch tokens are not on a grid: every PE takes its coords path (ape: its coords MLP)
        self.backbone = build_backbone(model, pe=pe, spatial_dims=2 if modality == "image" else 3,
                                       grid=tuple(train_grid) if train_grid and tokens != "spiking" else None,
                                       class_token=class_token, drop_path_rate=drop_path, **(pe_options or {}))
        self.detector = Detector(dim, num_classes, patch_size, out_channels=int(fpn_dim or dim),
                                 levels=pyramid_levels, head_convs=head_convs, score_thresh=score_thresh,
                                 nms_thresh=nms_thresh, detections_per_img=detections_per_img,
                                 topk_candidates=topk_candidates, center_sampling_radius=center_sampling_radius)
        self.rpt = False
        self.skipped = SumMetric()
        self._skipped_restored = 0.0
        self.val_loss = MeanMetric()
        self.test_loss = MeanMetric()
        self.evaluators = {"val": CocoEvaluator(), "test": CocoEvaluator()}
        #: distinct images in the last COCOeval of each split (written to results.json)
        self.images_evaluated: dict[str, int] = {}

    # ------------------------------------------------------------------ analysis interface (shared)
    tokenize = ClassificationTask.tokenize
    permute_content = staticmethod(ClassificationTask.permute_content)
    features = ClassificationTask.features
    tokenize_count = ClassificationTask.tokenize_count
    _layer_id = ClassificationTask._layer_id
    param_groups = ClassificationTask.param_groups
    configure_optimizers = ClassificationTask.configure_optimizers

    # ------------------------------------------------------------------ model
    def token_map(self, inputs: Any, content_perm: Tensor | None = None,
                  input_hw: Sequence[int] | None = None) -> Tensor:
        """Inputs -> the last block's patch tokens as a map ``(B, D, H', W')`` (tubelets: mean over T';
        tokens off a grid, e.g. spiking patches: :func:`scatter_token_map` onto the ``input_hw / p``
        cells of the padded input ``input_hw``, which they need)."""
        tb = self.permute_content(self.tokenize(inputs), content_perm)
        tokens = self.backbone(tb.x, tb.coords, tb.grid, tb.mask)[:, self.backbone.num_prefix_tokens:]  # (B, N, D)
        if tb.grid is None:
            if input_hw is None:
                raise ValueError("tokens off a grid need the padded input size (the targets' input_hw) for their map")
            p = int(self.hparams.patch_size)
            return scatter_token_map(tokens, tb.coords, tb.mask, (int(input_hw[0]) // p, int(input_hw[1]) // p))
        B, N, D = tokens.shape
        fmap = tokens.transpose(1, 2).reshape(B, D, *tb.grid)  # row-major grid order
        if fmap.dim() == 5:  # (B, D, T', H', W') -> (B, D, H', W')
            fmap = fmap.mean(dim=2)
        return fmap

    def _sizes(self, inputs: Any, targets: list[dict] | None) -> tuple[tuple[int, int], list[tuple[int, int]]]:
        if isinstance(inputs, EventTokens):  # a padded token batch: the targets give the input frame
            sizes = {tuple(int(v) for v in t["input_hw"]) for t in targets or [] if "input_hw" in t}
            if len(sizes) != 1 or len(targets) != len(inputs):
                raise ValueError("spiking-token detection needs targets with one input_hw for the whole batch")
            hw = sizes.pop()
            return hw, [content_size(t, hw) for t in targets]
        hw = (int(inputs.shape[-2]), int(inputs.shape[-1]))
        if targets is None:
            return hw, [hw] * inputs.shape[0]
        return hw, [content_size(t, hw) for t in targets]

    @staticmethod
    def _to_device(targets: list[dict], device: torch.device) -> list[dict]:
        return [{**t, "boxes": t["boxes"].to(device).float(), "labels": t["labels"].to(device).long()}
                for t in targets]

    def forward(self, inputs: Tensor, targets: list[dict] | None = None,
                content_perm: Tensor | None = None) -> list[dict[str, Tensor]]:
        """Detections ``[{"boxes" (n, 4) xyxy input px, "scores" (n,), "labels" (n,)}] * B`` (boxes
        clipped to each image's un-padded content when ``targets`` give its size)."""
        hw, sizes = self._sizes(inputs, targets)
        return self.detector(self.token_map(inputs, content_perm, hw), hw, sizes)[1]

    def losses(self, inputs: Any, targets: list[dict], detect: bool = False
               ) -> tuple[dict[str, Tensor], list[dict] | None]:
        hw, sizes = self._sizes(inputs, targets)
        losses, dets = self.detector(self.token_map(inputs, input_hw=hw), hw, sizes,
                                     self._to_device(targets, inputs.device), detect=detect)
        return losses, dets

    # ------------------------------------------------------------------ steps
    def training_step(self, batch: Sequence[Any], batch_idx: int) -> Tensor | None:
        inputs, targets, skipped = _split(batch)
        self.skipped.update(torch.tensor(float(skipped), device=self.device))
        if not targets:
            return None  # a batch of only corrupt samples
        losses, _ = self.losses(inputs, targets)
        loss = sum(losses.values())
        if not torch.isfinite(loss):
            raise NonFiniteLossError(f"non-finite training loss {loss.item()} at global step {self.global_step}, "
                                     f"epoch {self.current_epoch}, batch {batch_idx}")
        n = len(targets)
        self.log("train/loss", loss, prog_bar=True, on_step=True, on_epoch=True, batch_size=n)
        for k, v in losses.items():
            self.log(f"train/loss_{k}", v.detach(), on_step=False, on_epoch=True, batch_size=n)
        return loss

    def _eval_step(self, batch: Sequence[Any], split: str) -> None:
        inputs, targets, skipped = _split(batch)
        self.skipped.update(torch.tensor(float(skipped), device=self.device))
        if not targets:
            return
        dm = self._datamodule()
        losses, dets = self.losses(inputs, targets, detect=True)
        metric = self.val_loss if split == "val" else self.test_loss
        metric.update(sum(losses.values()).detach(), weight=len(targets))
        self.log(f"{split}/loss", metric, on_step=False, on_epoch=True)
        self.evaluators[split].update(dets, targets, dm.label_to_category_id, getattr(dm, "filter_predictions", None))

    def _datamodule(self) -> Any:
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if dm is None or not hasattr(dm, "coco_gt"):
            raise ValueError("the detection task evaluates against datamodule.coco_gt(split); "
                             "run it with a detection datamodule (trainer.fit/validate(..., datamodule=dm))")
        return dm

    def _eval_epoch_end(self, split: str) -> None:
        ev = self.evaluators[split]
        metrics, n = ev.compute(self._datamodule().coco_gt(split))
        ev.reset()
        for k, v in metrics.items():
            self.log(f"{split}/{k}", float(v), prog_bar=k == "map", on_epoch=True, sync_dist=False)
        self.images_evaluated[split] = int(n)
        self.log(f"{split}/map_images", float(n), on_epoch=True, sync_dist=False)

    def on_validation_epoch_start(self) -> None:
        self.evaluators["val"].reset()

    def on_test_epoch_start(self) -> None:
        self.evaluators["test"].reset()

    def validation_step(self, batch: Sequence[Any], batch_idx: int) -> None:
        self._eval_step(batch, "val")

    def test_step(self, batch: Sequence[Any], batch_idx: int) -> None:
        self._eval_step(batch, "test")

    def on_validation_epoch_end(self) -> None:
        self._eval_epoch_end("val")

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")

    # ------------------------------------------------------------------ evaluation outside Lightning
    @torch.no_grad()
    def evaluate_map(self, loader: Any, coco_gt: Any, label_to_category_id: Sequence[int],
                     filter_predictions: Any = None, max_samples: int | None = None) -> tuple[dict[str, float], int]:
        """COCO mAP of this model over ``loader`` (single process; analyses) -> (metrics, images)."""
        ev = CocoEvaluator()
        was = self.training
        self.eval()
        seen = 0
        try:
            for batch in loader:
                inputs, targets, _ = _split(batch)
                if not targets:
                    continue
                if max_samples is not None and seen >= max_samples:
                    break
                if max_samples is not None and seen + len(targets) > max_samples:
                    inputs, targets = inputs[: max_samples - seen], targets[: max_samples - seen]
                dets = self(inputs.to(self.device), targets)
                ev.update(dets, targets, label_to_category_id, filter_predictions)
                seen += len(targets)
        finally:
            self.train(was)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ev.compute(coco_gt)

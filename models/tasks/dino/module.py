"""``dino``: self-supervised DINO training (Caron et al., ICCV 2021, "Emerging Properties in
Self-Supervised Vision Transformers") on the PE-pluggable ViT, for the EED study of "The inductive
bottleneck in vision transformers".

Student = tokenizer -> backbone -> pooled token -> :class:`~pebench.tasks.dino.head.DINOHead`;
the teacher has the same architecture (no stochastic depth), receives no gradient and follows
the student by EMA. Per training step (``2`` global + ``N`` local views from
:mod:`pebench.tasks.dino.multicrop`):

* teacher on the 2 global views, student on all views; views of one size go through the
  network as one batch (globals, then locals). Every view is tokenized on its own grid, so local
  crops get their own coords ``0 .. g-1`` and each PE applies its own rule for that grid (APE
  interpolates its table: a confound; a PE that cannot take the grid raises);
* loss :func:`~pebench.tasks.dino.head.dino_loss` (teacher temperature warm-up 0.04 -> 0.07,
  student 0.1), then the centre update (momentum 0.9, batch mean all-reduced over DDP ranks);
* AdamW; lr ``lr x batch / 256`` (``batch`` = the global batch) with linear warm-up and cosine
  decay to ``min_lr``; weight decay cosine 0.04 -> 0.4 on weights only (none on norms, biases,
  the tables/frequencies a PE names, the CLS token); per-parameter gradient-norm clipping at 3.0
  (the official ``clip_gradients``); the head's last layer frozen for the first
  ``freeze_last_layer`` epochs; teacher momentum cosine 0.996 -> 1 per step.

Teacher mode (as DINOv3, Siméoni et al. 2025, whose meta-architecture's ``train()`` keeps its teacher in
evaluation mode): the teacher *backbone* stays in evaluation mode throughout training
(:meth:`DinoTask.train`), so training-only transforms of the backbone never reach it; the one that
changes its output here is the coordinate augmentation (``--coord-aug``,
:mod:`pebench.encodings.coord_augment`), which only the student sees. The teacher's backbone has no
stochastic depth and no dropout, so without ``--coord-aug`` its output is the same in either mode. The
teacher's head keeps the student's mode (DINO's: a head with batch norm normalises by batch
statistics in the teacher too). Lightning's warning at the start of fitting that some modules are in
evaluation mode names these, the teacher backbone's, on purpose.

Evaluation (validation loop, every epoch, and at initialisation for the "did it learn" check):
teacher backbone features (the pooled token after the final LayerNorm) of the training split
(bank) and of the test split (query; validation where a dataset has none), gathered exactly
across DDP ranks; weighted k-NN (k = 20, T = 0.07, cosine) top-1/top-5 and a linear probe
(:mod:`.knn`). Logged as ``test/knn_top1`` (the primary metric), ``test/knn_top5``,
``test/linear_top1`` and the same at initialisation with the suffix ``_init``.

EED per checkpoint: after every ``eed_every`` epochs (and before the first), EED% and SSDC per
layer of the teacher backbone on the probe set, with :func:`pebench.analysis.geometry.geometry`
(its default taps); the list is :attr:`DinoTask.eed_history` (saved in checkpoints, written to
``results.json`` as ``eed_checkpoints``).

Departures from the official recipe (stated): the pooled feature is the mean of the patch tokens
unless ``pool="cls"`` with a class token (pebench's default backbone has no CLS; DINO's uses it);
teacher temperature warm-up lasts ``round(0.3 x epochs)`` epochs unless given (official ViT-S/16
100-epoch setting: 30 of 100); head sizes are options (official 2048-2048-256 -> 65536; the
embedded-set presets use smaller heads for CPU); the linear probe is a closed-set L-BFGS
readout (see :mod:`.knn`); no mixed-precision loss scaling beyond Lightning's.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Sequence

import lightning as L
import torch
from torch import Tensor, nn
from torchmetrics.aggregation import SumMetric

from pebench.analysis.geometry import geometry
from pebench.core.errors import ConfigError
from pebench.models.vit import build_backbone, model_config
from pebench.tasks.classification.module import (
    ClassificationTask,
    NonFiniteLossError,
    SkippedSampleCount,
    build_tokenizer,
)

from .head import (
    DINOHead,
    cosine_schedule,
    dino_loss,
    ema_update,
    teacher_entropies,
    teacher_temperature,
    update_center,
)
from .knn import gather_eval_set, knn_accuracy, knn_predict, linear_probe

__all__ = ["DinoTask"]


class DinoTask(SkippedSampleCount, L.LightningModule):
    def __init__(self, modality: str = "image", num_classes: int = 10, in_chans: int = 3, model: str = "vit-nano",
                 pe: str = "none", pe_options: dict | None = None, patch_size: int = 4,
                 train_grid: Sequence[int] | None = None, class_token: bool = False, pool: str = "mean",
                 lr: float = 5e-4, batch_size: int = 256, min_lr: float = 1e-6, weight_decay: float = 0.04,
                 weight_decay_end: float = 0.4, warmup_epochs: float = 10.0, epochs: int = 100,
                 drop_path: float = 0.1, out_dim: int = 65536, head_hidden: int = 2048, head_bottleneck: int = 256,
                 head_bn: bool = False,
                 momentum_teacher: float = 0.996, teacher_temp: float = 0.07, warmup_teacher_temp: float = 0.04,
                 warmup_teacher_temp_epochs: int | None = None, student_temp: float = 0.1,
                 center_momentum: float = 0.9, clip_grad: float = 3.0, freeze_last_layer: int = 1,
                 knn_k: int = 20, knn_temperature: float = 0.07, linear_probe: bool = True, eed_every: int = 1,
                 eed_probe_size: int = 256, init_eval: bool = True) -> None:
        super().__init__()
        self.save_hyperparameters()
        if modality != "image":
            raise ConfigError(f"the dino task trains on images; got {modality} data")
        if pool not in ("mean", "cls") or (pool == "cls" and not class_token):
            raise ConfigError("pool must be 'mean', or 'cls' with class_token=True")
        dim = model_config(model).embed_dim
        self.modality = modality
        self.student = self._network(dim, drop_path)
        self.teacher = self._network(dim, 0.0)
        self.teacher.load_state_dict(self.student.state_dict())  # same start, as the official code
        self.teacher.requires_grad_(False)
        self.teacher["backbone"].eval()  # for good (see train)
        self.register_buffer("center", torch.zeros(1, out_dim))
        self.skipped = SumMetric()
        self._skipped_restored = 0.0
        self._eval: dict[int, list[list[Tensor]]] = {}
        self._it = 0
        #: EED% / SSDC per layer per checkpoint (see the module docstring)
        self.eed_history: list[dict[str, Any]] = []
        #: k-NN / linear-probe metrics of the model at initialisation
        self.init_metrics: dict[str, float] = {}

    def _network(self, dim: int, drop_path: float) -> nn.ModuleDict:
        hp = self.hparams
        return nn.ModuleDict({
            "tokenizer": build_tokenizer(hp.modality, dim, hp.in_chans, hp.patch_size, 1, 64),
            "backbone": build_backbone(hp.model, pe=hp.pe, spatial_dims=2,
                                       grid=tuple(hp.train_grid) if hp.train_grid else None,
                                       class_token=hp.class_token, drop_path_rate=drop_path, **(hp.pe_options or {})),
            "head": DINOHead(dim, hp.out_dim, hp.head_hidden, hp.head_bottleneck, use_bn=bool(hp.head_bn)),
        })

    def train(self, mode: bool = True) -> "DinoTask":
        """Set the training mode of every submodule except the teacher's backbone, which stays in
        evaluation mode (as DINOv3's teacher; see the module docstring): the training-time coordinate
        augmentation never reaches the teacher."""
        super().train(mode)
        self.teacher["backbone"].eval()
        return self

    # ------------------------------------------------------------------ analysis interface
    @property
    def backbone(self) -> nn.Module:
        """The teacher's backbone (what is evaluated and analysed)."""
        return self.teacher["backbone"]

    @property
    def tokenizer(self) -> nn.Module:
        return self.teacher["tokenizer"]

    permute_content = staticmethod(ClassificationTask.permute_content)

    def tokenize_count(self, inputs: Tensor) -> int:
        return int(math.prod(self.tokenizer.grid_for(inputs.shape[-2:])))

    def features(self, inputs: Tensor, content_perm: Tensor | None = None,
                 tap: str = "block_out") -> tuple[list[Tensor], Tensor]:
        """Teacher per-block patch tokens ``[(B, N, D)] * depth`` and their coords ``(N, 2)``."""
        tb = self.permute_content(self.tokenizer(inputs), content_perm)
        feats = self.backbone.forward_intermediates(tb.x, tb.coords, tb.grid, tb.mask, tap=tap)
        coords = tb.coords if tb.coords.dim() == 2 else tb.coords[0]
        return feats, coords

    def _pooled(self, net: nn.ModuleDict, x: Tensor) -> Tensor:
        tb = net["tokenizer"](x)
        tokens = net["backbone"](tb.x, tb.coords, tb.grid, tb.mask)  # (B, P + N, D)
        if self.hparams.pool == "cls":
            return tokens[:, 0]
        return tokens[:, net["backbone"].num_prefix_tokens:].mean(1)  # (B, D)

    def embed(self, x: Tensor) -> Tensor:
        """Teacher backbone feature ``(B, D)`` used by k-NN and the linear probe."""
        return self._pooled(self.teacher, x)

    def forward(self, x: Tensor) -> Tensor:
        return self.embed(x)

    def forward_views(self, net: nn.ModuleDict, views: Sequence[Tensor]) -> list[Tensor]:
        """Head outputs ``[(B, K)] * V``; consecutive views of one size run as one batch."""
        out: list[Tensor] = []
        start = 0
        while start < len(views):
            end = start
            while end < len(views) and views[end].shape[-2:] == views[start].shape[-2:]:
                end += 1
            x = torch.cat(list(views[start:end]))  # ((end - start) * B, 3, s, s)
            out.extend(net["head"](self._pooled(net, x)).chunk(end - start))
            start = end
        return out

    # ------------------------------------------------------------------ schedules
    def _steps(self) -> tuple[int, float]:
        total = max(1, int(self.trainer.estimated_stepping_batches))
        epochs = max(1, int(self.trainer.max_epochs or 1)) if not self.trainer.fast_dev_run else 1
        return total, total / epochs

    def _schedule_values(self, it: int) -> dict[str, float]:
        hp = self.hparams
        total, per_epoch = self._steps()
        warm = int(round(hp.warmup_epochs * per_epoch))
        peak = hp.lr * hp.batch_size / 256.0
        return {"lr": cosine_schedule(it, total, peak, hp.min_lr, min(warm, total)),
                "wd": cosine_schedule(it, total, hp.weight_decay, hp.weight_decay_end),
                "momentum": cosine_schedule(it, total, hp.momentum_teacher, 1.0)}

    def teacher_temp_now(self) -> float:
        hp = self.hparams
        warm = hp.warmup_teacher_temp_epochs
        if warm is None:
            warm = int(round(0.3 * hp.epochs))
        return teacher_temperature(int(self.current_epoch), int(warm), hp.warmup_teacher_temp, hp.teacher_temp)

    # ------------------------------------------------------------------ training
    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        self._it = int(self.global_step)
        v = self._schedule_values(self._it)
        for opt in self.trainer.optimizers:
            for g in opt.param_groups:
                g["lr"] = v["lr"]
                g["weight_decay"] = v["wd"] if g.get("decay", False) else 0.0

    def training_step(self, batch: Sequence[Any], batch_idx: int) -> Tensor | None:
        views, _labels, info = batch[0], batch[1], (batch[2] if len(batch) > 2 else {})
        skipped = int(info.get("skipped", 0)) if isinstance(info, dict) else 0
        self.skipped.update(torch.tensor(float(skipped), device=self.device))
        if not views or views[0].shape[0] == 0:
            return None
        with torch.no_grad():
            t_out = self.forward_views(self.teacher, views[:2])  # 2 x (B, K)
        s_out = self.forward_views(self.student, views)  # V x (B, K)
        temp = self.teacher_temp_now()
        loss = dino_loss(s_out, t_out, self.center, temp, self.hparams.student_temp)
        if not torch.isfinite(loss):
            raise NonFiniteLossError(f"non-finite training loss {loss.item()} at global step {self.global_step}, "
                                     f"epoch {self.current_epoch}, batch {batch_idx}")
        h_sample, h_mean = teacher_entropies(t_out, self.center, temp)  # collapse monitors, before the centre moves
        self.center.copy_(update_center(self.center, t_out, self.hparams.center_momentum))
        n = views[0].shape[0]
        self.log("train/loss", loss, prog_bar=True, on_step=True, on_epoch=True, batch_size=n)
        self.log_dict({"train/teacher_entropy": h_sample, "train/teacher_mean_entropy": h_mean},
                      on_step=False, on_epoch=True, batch_size=n)
        v = self._schedule_values(self._it)
        self.log_dict({"train/lr": v["lr"], "train/wd": v["wd"], "train/teacher_momentum": v["momentum"],
                       "train/teacher_temp": temp}, on_step=True, on_epoch=False, batch_size=n)
        return loss

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        clip = self.hparams.clip_grad
        if clip and clip > 0:  # per parameter, as the official clip_gradients (batched: foreach norm and scale)
            grads = [p.grad.detach() for p in self.student.parameters() if p.grad is not None]
            if grads:
                norms = torch.stack(torch._foreach_norm(grads, 2))  # (P,)
                torch._foreach_mul_(grads, torch.clamp(clip / (norms + 1e-6), max=1.0).unbind())
        if self.current_epoch < self.hparams.freeze_last_layer:
            self.student["head"].last_layer.grad = None

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        m = self._schedule_values(self._it)["momentum"]
        ema_update(self.teacher.parameters(), self.student.parameters(), m)

    def param_groups(self) -> list[dict]:
        no_decay = {f"student.backbone.{n}" for n in self.student["backbone"].no_weight_decay()}
        decay, plain = [], []
        for name, p in self.named_parameters():
            if not p.requires_grad:
                continue
            skip = (p.ndim <= 1 or name.endswith(".bias") or name in no_decay
                    or any(name.startswith(n + ".") for n in no_decay))
            (plain if skip else decay).append(p)
        return [{"params": decay, "decay": True, "weight_decay": self.hparams.weight_decay},
                {"params": plain, "decay": False, "weight_decay": 0.0}]

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.param_groups(), lr=self.hparams.lr)

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def _feats(self, x: Tensor) -> Tensor:
        was = self.teacher["head"].training
        self.teacher.eval()
        try:
            return self.embed(x).float()
        finally:
            for part in ("tokenizer", "head"):  # the backbone stays in evaluation mode (see train)
                self.teacher[part].train(was)

    def evaluate_sets(self, bank: tuple[Tensor, Tensor], query: tuple[Tensor, Tensor], suffix: str = "") -> dict[str, float]:
        hp = self.hparams
        scores = knn_predict(bank[0], bank[1], query[0], hp.num_classes, hp.knn_k, hp.knn_temperature)
        acc = knn_accuracy(scores, query[1], (1, 5))
        out = {f"test/knn_top1{suffix}": acc[1], f"test/knn_top5{suffix}": acc[5]}
        if hp.linear_probe:
            out[f"test/linear_top1{suffix}"] = linear_probe(bank[0], bank[1], query[0], query[1], hp.num_classes)
        return out

    def _collect(self, loader: Any) -> tuple[Tensor, Tensor]:
        feats, labels, index = [], [], []
        for x, y, i in loader:
            if y.numel():
                feats.append(self._feats(x.to(self.device)))
                labels.append(y.to(self.device))
                index.append(i.to(self.device))
        d = self.backbone.embed_dim
        return gather_eval_set(torch.cat(feats) if feats else torch.zeros(0, d, device=self.device),
                               torch.cat(labels) if labels else torch.zeros(0, dtype=torch.long, device=self.device),
                               torch.cat(index) if index else torch.zeros(0, dtype=torch.long, device=self.device))

    def on_validation_epoch_start(self) -> None:
        self._eval = {0: [[], [], []], 1: [[], [], []]}

    def validation_step(self, batch: Sequence[Any], batch_idx: int, dataloader_idx: int = 0) -> None:
        x, y, idx = batch
        if y.numel() == 0:
            return
        store = self._eval.setdefault(dataloader_idx, [[], [], []])
        store[0].append(self._feats(x))
        store[1].append(y)
        store[2].append(idx)

    def on_validation_epoch_end(self) -> None:
        d = self.backbone.embed_dim
        sets = []
        for k in (0, 1):
            f, y, i = self._eval.get(k, [[], [], []])
            sets.append(gather_eval_set(torch.cat(f) if f else torch.zeros(0, d, device=self.device),
                                        torch.cat(y) if y else torch.zeros(0, dtype=torch.long, device=self.device),
                                        torch.cat(i) if i else torch.zeros(0, dtype=torch.long, device=self.device)))
        self._eval = {}
        if sets[0][0].shape[0] == 0 or sets[1][0].shape[0] == 0:
            return
        metrics = self.evaluate_sets(sets[0], sets[1])
        metrics.update(self.init_metrics)
        # identical on every rank (computed from the gathered sets): no sync needed
        self.log_dict(metrics, on_epoch=True, prog_bar=False, sync_dist=False)

    def _record_eed(self, epoch: int) -> None:
        """EED% / SSDC per layer of the teacher at ``epoch`` (epochs completed), rank 0 only."""
        if any(h["epoch"] == epoch for h in self.eed_history) or not self.trainer.is_global_zero:
            return
        dm = self.trainer.datamodule
        res = geometry(self, dm, probe_size=self.hparams.eed_probe_size, rpi=False)
        keep = ("tap", "layers", "ssdc", "eed_tap", "eed_layers", "eed_percent", "eed_top1_share", "probe_size")
        self.eed_history.append({"epoch": int(epoch), "global_step": int(self.global_step),
                                 **{k: res[k] for k in keep if k in res}})

    def on_train_start(self) -> None:
        # not in a --fast-dev-run smoke test: the k-NN bank is the whole training split
        if self.global_step == 0 and not self.init_metrics and self.hparams.init_eval and not self.trainer.fast_dev_run:
            dm = self.trainer.datamodule
            if hasattr(dm, "bank_dataloader"):
                bank, query = self._collect(dm.bank_dataloader()), self._collect(dm.query_dataloader())
                if bank[0].shape[0] and query[0].shape[0]:
                    self.init_metrics = self.evaluate_sets(bank, query, suffix="_init")
        if self.global_step == 0 and self.hparams.eed_every > 0:
            self._record_eed(0)

    def on_train_epoch_end(self) -> None:
        done = int(self.current_epoch) + 1
        every = int(self.hparams.eed_every)
        last = self.trainer.max_epochs is not None and done >= self.trainer.max_epochs
        if every > 0 and (done % every == 0 or last or self.trainer.fast_dev_run):
            self._record_eed(done)

    # ------------------------------------------------------------------ bookkeeping
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_save_checkpoint(checkpoint)  # skipped-sample count (SkippedSampleCount)
        checkpoint["dino"] = {"eed_history": copy.deepcopy(self.eed_history), "init_metrics": dict(self.init_metrics)}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_load_checkpoint(checkpoint)
        state = checkpoint.get("dino", {})
        self.eed_history = list(state.get("eed_history", []))
        self.init_metrics = dict(state.get("init_metrics", {}))

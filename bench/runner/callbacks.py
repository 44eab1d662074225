"""The Lightning callbacks of one run: per-rank sample counts reduced over ranks (:class:`ValSampleCounter`,
read into ``results.json``'s ``val_samples``, ``skipped_samples`` and ``token_cap`` by :func:`skip_report`) and the
per-step reseeding that makes a resumed run continue like an uninterrupted one (:class:`StepSeed`)."""
from __future__ import annotations

import random
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback

__all__ = ["ValSampleCounter", "StepSeed", "skip_report"]


def _kept_skipped(batch: Any) -> tuple[int, int]:
    """-> (samples in the batch, corrupt samples the collate function dropped from it)."""
    info = batch[2] if isinstance(batch, (tuple, list)) and len(batch) > 2 and isinstance(batch[2], dict) else {}
    return len(batch[1]), int(info.get("skipped", 0))  # labels (B,) or a list of B target dicts (detection)


#: token-cap counts a spiking-token batch's info carries (pebench.datamodules.events.spiking.CAP_COUNTS)
_CAP_COUNTS = ("capped", "tokens_fired", "tokens_kept")


def _cap_counts(batch: Any) -> list[int]:
    """-> the batch's :data:`_CAP_COUNTS` (0 where the collate function gives none)."""
    info = batch[2] if isinstance(batch, (tuple, list)) and len(batch) > 2 and isinstance(batch[2], dict) else {}
    return [int(info.get(k, 0)) for k in _CAP_COUNTS]


def _truncated(batch: Any) -> int:
    """-> samples of the batch read from partly decodable files (``info["truncated"]``, datamodules/corrupt.py)."""
    info = batch[2] if isinstance(batch, (tuple, list)) and len(batch) > 2 and isinstance(batch[2], dict) else {}
    return int(info.get("truncated", 0))


class ValSampleCounter(Callback):
    """Counts samples over all ranks: ``total`` / ``val_skipped`` of the last validation pass (checks
    that DDP counts every sample once) and ``train_kept`` / ``train_skipped`` over this attempt's
    training epochs (corrupt samples dropped by the loader; see ``datamodules/corrupt.py``); and,
    for spiking tokens, ``cap[split]`` = (samples, capped, tokens fired, tokens kept) on the same
    footing (results.json ``token_cap``); ``truncated[split]``: samples read from partly decodable files
    (truncated videos, used), on the same footing as the skipped counts."""

    def __init__(self) -> None:
        # this rank's (kept, skipped, capped, tokens fired, tokens kept, truncated) in the current epoch
        self.local = {"train": [0] * 6, "val": [0] * 6}
        self.total = self.val_skipped = self.train_kept = self.train_skipped = 0
        self.cap = {"train": [0, 0, 0, 0], "val": [0, 0, 0, 0]}
        self.truncated = {"train": 0, "val": 0}

    def _reduce(self, split: str, trainer: L.Trainer, pl_module: L.LightningModule) -> tuple[int, int, list[int]]:
        t = torch.tensor([float(v) for v in self.local[split]], device=pl_module.device)
        kept, skipped, *cap, truncated = (int(v) for v in trainer.strategy.reduce(t, reduce_op="sum").tolist())
        self.local[split] = [0] * 6
        # val: the last pass; train: summed over this attempt's epochs
        self.truncated[split] = truncated + (self.truncated[split] if split == "train" else 0)
        return kept, skipped, [kept, *cap]

    def _add(self, split: str, batch: Any) -> None:
        for i, v in enumerate((*_kept_skipped(batch), *_cap_counts(batch), _truncated(batch))):
            self.local[split][i] += v

    def on_validation_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.local["val"] = [0] * 6

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        self._add("val", batch)

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.total, self.val_skipped, self.cap["val"] = self._reduce("val", trainer, pl_module)

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.local["train"] = [0] * 6

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._add("train", batch)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        kept, skipped, cap = self._reduce("train", trainer, pl_module)
        self.train_kept += kept
        self.train_skipped += skipped
        self.cap["train"] = [a + b for a, b in zip(self.cap["train"], cap)]


def skip_report(task: Any, dm: Any, counter: ValSampleCounter, max_fraction: float) -> tuple[dict, str | None]:
    """-> (``skipped_samples`` of results.json, why the data make the run incomplete or None).

    ``by_reason``: ``missing`` = listed files that do not exist (dropped before training, counted
    once), ``corrupt`` = undecodable samples dropped in batches (counted each time they are read).
    ``fraction``: corrupt share of the training samples read in this attempt and of the final
    validation pass. A split with no samples left, or a fraction above ``max_fraction``, is a reason.
    ``truncated`` (present only when any): samples read from partly decodable files (a truncated video's
    clip sampled from its decodable frames), used and not skipped, per split on the footing of ``fraction``.
    """
    by_reason = {"missing": 0, **dict(getattr(dm, "skipped_samples", {}) or {})}
    in_batches = task.skipped_total()
    by_reason["corrupt"] = by_reason.get("corrupt", 0) + in_batches
    fractions: dict[str, float | None] = {}
    reason = None
    for split, kept, skipped in (("train", counter.train_kept, counter.train_skipped),
                                 ("val", counter.total, counter.val_skipped)):
        fractions[split] = round(skipped / (kept + skipped), 6) if kept + skipped else None
        if skipped and not kept:
            reason = reason or (f"no {split} samples: all {skipped} read were corrupt and skipped; "
                                f"expected layout: {dm.expected_layout or 'see bench list datasets'}")
        elif fractions[split] is not None and fractions[split] > max_fraction:
            reason = reason or (f"{skipped} of {kept + skipped} {split} samples ({100 * fractions[split]:.1f} %) "
                                f"were corrupt and skipped, more than max_skipped_fraction={max_fraction:g}")
    if counter.total == 0 and reason is None:
        reason = "no validation samples were evaluated"
    report = {"in_batches": in_batches, "by_reason": by_reason, "fraction": fractions}
    if any(counter.truncated.values()):
        report["truncated"] = dict(counter.truncated)
    return report, reason


class StepSeed(Callback):
    """Reseed torch / numpy / random before every training batch from ``(seed, epoch, batch)``.

    The random numbers a training step draws (RPT permutations, drop-path, ...) then depend only
    on the seed and the position in training, not on what ran before in this process, so a run
    resumed from ``last.ckpt`` continues exactly like the uninterrupted run. (Lightning does not
    checkpoint RNG states, and on resume it creates the first epoch's DataLoader iterator, which
    draws from the global RNG, at a different moment than in an uninterrupted run.) The training
    order is fixed separately by ``DistributedSampler(seed=seed)`` and Lightning's ``set_epoch``.
    """

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        a, b = np.random.SeedSequence([self.seed, int(trainer.current_epoch), int(batch_idx)]).generate_state(2)
        torch.manual_seed(int(a) << 32 | int(b))  # also seeds every CUDA device
        np.random.seed(int(a))
        random.seed(int(b))

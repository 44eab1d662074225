"""Distributed-aware data loading for ``bench run`` (the Trainer runs with
``use_distributed_sampler=False`` and these samplers are installed instead).

* Training: always a ``DistributedSampler(shuffle=True, seed=seed)``, also in a single process
  (``num_replicas=1``). Its permutation depends only on ``seed`` and the epoch, and rank ``r``
  of ``W`` takes ``perm[r::W]``; with a per-rank batch of ``B // W`` the union of the ranks'
  ``s``-th batches is exactly the single-process ``s``-th batch ``perm[s*B:(s+1)*B]``. DDP averages
  the per-rank mean gradients, which equals the global-batch mean gradient, so a W-process run
  computes the single-process training steps up to floating-point reduction order (when the
  training set size is a multiple of ``B``; otherwise only the last, padded batch differs).
  Training amplifies that rounding like any perturbation, so endpoints agree over seeds, not run
  by run (docs/distributed.md).
* Validation: Lightning's ``UnrepeatedDistributedSampler`` (no padding, no duplicates), so every
  validation sample is counted exactly once; the task's torchmetrics sum states then reduce
  exactly across ranks. Ranks may get one sample fewer than others; validation logs only at
  epoch end, so uneven batch counts cannot deadlock.
"""
from __future__ import annotations

import os
from functools import partial
from typing import Any, Callable

from lightning.fabric.utilities.distributed import DistributedSamplerWrapper
from lightning.fabric.utilities.seed import pl_worker_init_function
from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler, UnrepeatedDistributedSamplerWrapper
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler, SequentialSampler

__all__ = ["install_samplers", "restore_loaders"]


def _rebuild(loader: DataLoader, sampler: Any, rank: int) -> DataLoader:
    init_fn = loader.worker_init_fn
    if init_fn is None and loader.num_workers > 0 and os.environ.get("PL_SEED_WORKERS") == "1":
        init_fn = partial(pl_worker_init_function, rank=rank)
    return DataLoader(loader.dataset, batch_size=loader.batch_size, sampler=sampler,
                      num_workers=loader.num_workers, collate_fn=loader.collate_fn, pin_memory=loader.pin_memory,
                      drop_last=loader.drop_last, timeout=loader.timeout, worker_init_fn=init_fn,
                      multiprocessing_context=loader.multiprocessing_context,
                      persistent_workers=loader.persistent_workers and loader.num_workers > 0)


def _plain(loader: Any) -> bool:
    """A DataLoader with the default batch sampler (one we can re-create with a new sampler)."""
    return isinstance(loader, DataLoader) and loader.batch_size is not None


def _train_wrapper(orig: Callable[[], Any], dm: Any, seed: int) -> Callable[[], Any]:
    def train_dataloader() -> Any:
        loader = orig()
        if not _plain(loader):
            return loader
        world, rank = dm.trainer.world_size, dm.trainer.global_rank
        if isinstance(loader.sampler, (RandomSampler, SequentialSampler)):
            sampler = DistributedSampler(loader.dataset, num_replicas=world, rank=rank,
                                         shuffle=isinstance(loader.sampler, RandomSampler), seed=seed)
        elif world > 1:
            sampler = DistributedSamplerWrapper(loader.sampler, num_replicas=world, rank=rank, shuffle=False)
        else:
            return loader
        return _rebuild(loader, sampler, rank)

    return train_dataloader


def _val_wrapper(orig: Callable[[], Any], dm: Any) -> Callable[[], Any]:
    def val_dataloader() -> Any:
        loader = orig()
        world, rank = dm.trainer.world_size, dm.trainer.global_rank
        if world == 1 or not _plain(loader):
            return loader
        if isinstance(loader.sampler, SequentialSampler):
            sampler = UnrepeatedDistributedSampler(loader.dataset, num_replicas=world, rank=rank, shuffle=False)
        else:
            sampler = UnrepeatedDistributedSamplerWrapper(loader.sampler, num_replicas=world, rank=rank, shuffle=False)
        return _rebuild(loader, sampler, rank)

    return val_dataloader


def install_samplers(dm: Any, seed: int) -> dict[str, Callable[[], Any]]:
    """Wrap ``dm.train_dataloader`` / ``dm.val_dataloader`` (instance attributes); returns the
    originals for :func:`restore_loaders`."""
    orig = {"train_dataloader": dm.train_dataloader, "val_dataloader": dm.val_dataloader}
    dm.train_dataloader = _train_wrapper(orig["train_dataloader"], dm, seed)
    dm.val_dataloader = _val_wrapper(orig["val_dataloader"], dm)
    return orig


def restore_loaders(dm: Any, orig: dict[str, Callable[[], Any]]) -> None:
    for name in orig:
        dm.__dict__.pop(name, None)

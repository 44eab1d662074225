"""Multi-crop views for DINO (Caron et al., ICCV 2021, "Emerging Properties in Self-Supervised
Vision Transformers"; multi-crop from Caron et al., NeurIPS 2020, SwAV) and the datamodule wrapper
the ``dino`` task trains through.

Each training image gives ``2`` global crops (``global_size`` px, area scale ``(0.4, 1)``) and
``n_local`` local crops (``local_size`` px, area scale ``(0.05, 0.4)``), as the official recipe:
random-resized crop (bicubic), horizontal flip, colour jitter (0.4, 0.4, 0.2, 0.1) with
p = 0.8, grayscale p = 0.2, Gaussian blur (p = 1.0 on global view 1, 0.1 on global view 2, 0.5 on
locals) and solarisation (p = 0.2, global view 2 only).

Departures from the official pipeline (stated, deliberate):

* Crops are cut from the dataset's own *evaluation* view of the image (a tensor at the
  training resolution, de-normalised to ``[0, 1]``), not from the decoded file, so every pebench
  image set (real or embedded) feeds the same code. For CIFAR-100 (32 px) and the embedded sets
  that is the whole image; for UC Merced / Tiny ImageNet it is the resized centre view.
* The blur's sigma range ``(0.1, 2.0)`` is given for 224 px crops; it is scaled by
  ``crop size / 224`` so small crops are not wiped out (kernel ``2 ceil(3 sigma_max) + 1``).
* The colour jitter strengths ``(brightness, contrast, saturation, hue)`` and the grayscale
  probability are parameters (default: the official ``(0.4, 0.4, 0.2, 0.1)`` and 0.2), so a set
  whose label is deliberately not a colour can use a stronger colour distortion (SimCLR's
  finding: without it, two crops of one image are matched by their colour histogram alone).

Local crops are separate images on their own smaller token grid: the tokenizer gives them their
own coords ``0 .. g-1`` per axis, and each PE applies its own rule for that grid (APE interpolates
its table -- a confound when comparing PEs; a PE that cannot take a grid raises).

:class:`DinoDataModule` wraps any image :class:`~pebench.datamodules.BenchDataModule`: training
batches are ``(views, labels, {"skipped": n})`` with ``views`` a list of ``2 + n_local`` tensors
``(B, 3, s, s)`` (globals first); validation yields two loaders, the *bank* (training split, no
augmentation) and the *query* (the test split, or validation where there is none), each batch
``(x, labels, index)`` so the k-NN evaluation can gather them exactly across DDP ranks. Other
attributes are read from the wrapped datamodule.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import lightning as L
import torch
import torchvision.transforms.v2 as v2
from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, default_collate

from pebench.datamodules.image_common import IMAGENET_MEAN, IMAGENET_STD

__all__ = ["MultiCropTransform", "MultiCropDataset", "IndexedDataset", "multicrop_collate", "indexed_collate",
           "DinoDataModule", "plain_train_dataset", "eval_split_dataset", "GLOBAL_SCALE", "LOCAL_SCALE",
           "COLOUR_JITTER", "GRAYSCALE_P"]

GLOBAL_SCALE = (0.4, 1.0)
LOCAL_SCALE = (0.05, 0.4)
#: official DINO colour jitter (brightness, contrast, saturation, hue), applied with p = 0.8
COLOUR_JITTER = (0.4, 0.4, 0.2, 0.1)
GRAYSCALE_P = 0.2


def _blur(size: int, p: float) -> v2.Transform:
    s = size / 224.0
    lo, hi = 0.1 * s, 2.0 * s
    k = 2 * math.ceil(3 * hi) + 1
    return v2.RandomApply([v2.GaussianBlur(k, sigma=(lo, hi))], p=p)


def _unit_range(x: Tensor) -> Tensor:
    return x.clamp(0.0, 1.0)


def _colour(jitter: Sequence[float], grayscale_p: float) -> list[v2.Transform]:
    b, c, s, h = (float(v) for v in jitter)
    return [v2.RandomHorizontalFlip(p=0.5),
            v2.RandomApply([v2.ColorJitter(brightness=b, contrast=c, saturation=s, hue=h)], p=0.8),
            v2.RandomGrayscale(p=grayscale_p)]


class MultiCropTransform:
    """Normalised image ``(3, H, W)`` -> ``[global1, global2, local1 .. localN]`` normalised crops."""

    def __init__(self, global_size: int, local_size: int, n_local: int, global_scale: Sequence[float] = GLOBAL_SCALE,
                 local_scale: Sequence[float] = LOCAL_SCALE, mean: Sequence[float] = IMAGENET_MEAN,
                 std: Sequence[float] = IMAGENET_STD, colour_jitter: Sequence[float] = COLOUR_JITTER,
                 grayscale_p: float = GRAYSCALE_P) -> None:
        if n_local < 0:
            raise ValueError(f"n_local must be >= 0, got {n_local}")
        if len(colour_jitter) != 4 or min(colour_jitter) < 0 or colour_jitter[3] > 0.5:
            raise ValueError(f"colour_jitter must be 4 values (brightness, contrast, saturation, hue) >= 0 with "
                             f"hue <= 0.5, got {list(colour_jitter)}")
        if not 0.0 <= grayscale_p <= 1.0:
            raise ValueError(f"grayscale_p must be in [0, 1], got {grayscale_p}")
        self.global_size, self.local_size, self.n_local = int(global_size), int(local_size), int(n_local)
        self.mean = torch.tensor(mean, dtype=torch.float32)[:, None, None]  # (3, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32)[:, None, None]
        bicubic = v2.InterpolationMode.BICUBIC

        def rrc(size: int, scale: Sequence[float]) -> v2.Transform:
            # Bicubic resampling overshoots [0, 1] near edges, and the colour jitter's RGB -> HSV ->
            # RGB round trip returns NaN for a pixel whose largest channel is exactly 0 with the others
            # negative; one such pixel, spread by the blur, made a whole crop NaN. The official recipe
            # works on uint8 PIL images, which cannot leave [0, 1]: clamp back to it after the resize.
            return v2.Compose([v2.RandomResizedCrop(size, scale=tuple(scale), interpolation=bicubic, antialias=True),
                               v2.Lambda(_unit_range)])

        g = self.global_size
        cj, gp = tuple(colour_jitter), float(grayscale_p)
        self.global1 = v2.Compose([rrc(g, global_scale), *_colour(cj, gp), _blur(g, 1.0)])
        self.global2 = v2.Compose([rrc(g, global_scale), *_colour(cj, gp), _blur(g, 0.1),
                                   v2.RandomSolarize(threshold=0.5, p=0.2)])
        self.local = v2.Compose([rrc(self.local_size, local_scale), *_colour(cj, gp), _blur(self.local_size, 0.5)])

    def __call__(self, img: Tensor) -> list[Tensor]:
        x = (img * self.std + self.mean).clamp(0.0, 1.0)  # (3, H, W) in [0, 1]
        views = [self.global1(x), self.global2(x)] + [self.local(x) for _ in range(self.n_local)]
        return [((v.clamp(0.0, 1.0) - self.mean) / self.std).contiguous() for v in views]


class MultiCropDataset(Dataset):
    """``base[i] = (image, label)`` -> ``(views, label)``; ``None`` (a corrupt sample) stays ``None``."""

    def __init__(self, base: Dataset, transform: MultiCropTransform) -> None:
        self.base, self.transform = base, transform

    def __len__(self) -> int:
        return len(self.base)  # type: ignore[arg-type]

    def __getitem__(self, i: int) -> tuple[list[Tensor], int] | None:
        item = self.base[i]
        if item is None:
            return None
        return self.transform(item[0]), int(item[1])


def multicrop_collate(batch: Sequence[Any]) -> tuple[list[Tensor], Tensor, dict[str, int]]:
    """-> ``([(B, 3, s_v, s_v)] * V, labels (B,), {"skipped": n})`` (corrupt samples dropped)."""
    kept = [b for b in batch if b is not None]
    skipped = len(batch) - len(kept)
    if not kept:
        return [], torch.empty(0, dtype=torch.long), {"skipped": skipped}
    n_views = len(kept[0][0])
    views = [torch.stack([b[0][v] for b in kept]) for v in range(n_views)]
    labels = torch.tensor([b[1] for b in kept], dtype=torch.long)
    return views, labels, {"skipped": skipped}


class IndexedDataset(Dataset):
    """``base[i] = (x, label)`` -> ``(x, label, i)`` (``None`` stays ``None``)."""

    def __init__(self, base: Dataset) -> None:
        self.base = base

    def __len__(self) -> int:
        return len(self.base)  # type: ignore[arg-type]

    def __getitem__(self, i: int) -> tuple[Tensor, int, int] | None:
        item = self.base[i]
        return None if item is None else (item[0], int(item[1]), int(i))


def indexed_collate(batch: Sequence[Any]) -> tuple[Tensor, Tensor, Tensor]:
    kept = [b for b in batch if b is not None]
    if not kept:
        return torch.empty(0), torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long)
    x, y, idx = default_collate(kept)
    return x, y.long(), idx.long()


def plain_train_dataset(dm: Any) -> Dataset:
    """The training split without augmentation at the training resolution."""
    if hasattr(dm, "make_dataset"):  # real image sets: eval transform on the train split
        return dm.make_dataset("train", train=False)
    return dm.train_dataset()  # the embedded sets do not augment


def eval_split_dataset(dm: Any) -> Dataset:
    """The split the k-NN / linear-probe accuracy is reported on: test (= validation where a
    dataset has no separate test split)."""
    return dm.test_dataset()


class DinoDataModule(L.LightningDataModule):
    """Wraps an image datamodule for DINO training and k-NN evaluation (see the module docstring)."""

    def __init__(self, base: Any, global_size: int, local_size: int, n_local: int,
                 global_scale: Sequence[float] = GLOBAL_SCALE, local_scale: Sequence[float] = LOCAL_SCALE,
                 colour_jitter: Sequence[float] = COLOUR_JITTER, grayscale_p: float = GRAYSCALE_P) -> None:
        super().__init__()
        if getattr(base, "modality", None) != "image":
            raise ValueError(f"the dino task needs an image dataset; {getattr(base, 'name', base)!r} is "
                             f"{getattr(base, 'modality', '?')} data")
        self.base = base
        mean, std = base.normalisation()  # what the base standardised its images with (the crops undo it)
        self.transform = MultiCropTransform(global_size, local_size, n_local, global_scale, local_scale, mean, std,
                                            colour_jitter, grayscale_p)
        self.has_test_split = False  # the query split is evaluated inside the validation loop

    def __getattr__(self, name: str) -> Any:
        if name == "base" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.base, name)

    @property
    def batch_size(self) -> int:
        return self.base.batch_size

    @batch_size.setter
    def batch_size(self, value: int) -> None:
        self.base.batch_size = value

    def _loader(self, ds: Dataset, shuffle: bool, collate: Any, drop_last: bool = False,
                distributed_eval: bool = False) -> DataLoader:
        sampler = None
        trainer = getattr(self, "trainer", None)
        if distributed_eval and trainer is not None and trainer.world_size > 1:
            sampler = UnrepeatedDistributedSampler(ds, num_replicas=trainer.world_size, rank=trainer.global_rank,
                                                   shuffle=False)
        nw = int(self.base.num_workers)
        return DataLoader(ds, batch_size=self.base.batch_size, shuffle=shuffle if sampler is None else False,
                          sampler=sampler, num_workers=nw, persistent_workers=nw > 0, drop_last=drop_last,
                          pin_memory=torch.cuda.is_available(), collate_fn=collate)

    def train_dataloader(self) -> DataLoader:
        ds = MultiCropDataset(plain_train_dataset(self.base), self.transform)
        # drop_last: the centre and the loss average over full batches, as the official loader
        return self._loader(ds, shuffle=True, collate=multicrop_collate, drop_last=len(ds) > self.base.batch_size)

    def bank_dataloader(self) -> DataLoader:
        return self._loader(IndexedDataset(plain_train_dataset(self.base)), False, indexed_collate,
                            distributed_eval=True)

    def query_dataloader(self) -> DataLoader:
        return self._loader(IndexedDataset(eval_split_dataset(self.base)), False, indexed_collate,
                            distributed_eval=True)

    def val_dataloader(self) -> list[DataLoader]:
        return [self.bank_dataloader(), self.query_dataloader()]

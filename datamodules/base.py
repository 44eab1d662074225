"""The datamodule contract every dataset in pebench follows.

A :class:`BenchDataModule` is a ``LightningDataModule`` whose batches are ``(inputs, labels)``:

========  =======================  ===================================================
modality  inputs                   resolution (``--resolution`` / extrapolation sizes)
========  =======================  ===================================================
image     ``(B, C, H, W)`` float   side length ``S`` (H = W = S), or ``"HxW"``
video     ``(B, C, T, H, W)``      side ``S`` or ``"TxS"`` (frames x side)
events    ``(B, 2, T, H, W)``      side ``S`` (sensor window) or ``"TxS"`` (time bins x side)
points    ``(B, M, 3)``            number of points ``M`` (``"MxG"``: points x groups)
========  =======================  ===================================================

Labels are ``(B,)`` long class indices.

What a dataset declares about its inputs (class attributes, read by models and analyses):

* ``in_chans``: channels ``C`` above (colour channels, event polarities; for points the coordinates
  a point tokenizer receives). Every dataset declares it; :meth:`~BenchDataModule.input_shape`
  derives the channel axis from it.
* ``mean`` / ``std``: the standardisation ``(x - mean) / std`` the inputs went through, one value
  shared by every channel or one per channel; ``None`` when the inputs are not standardised
  (events, points). Analyses that need the raw pixels back (the JPEG shift) read them through
  :meth:`~BenchDataModule.normalisation`, which names the dataset when it declares none.

Skipped samples, by reason (``results.json`` ``skipped_samples.by_reason``):

* ``missing``: a file named by the dataset's own list files (UCF101 train/test lists, Tiny
  ImageNet's ``val_annotations.txt``) that does not exist. Found before training by
  :meth:`BenchDataModule.preflight` (via :meth:`BenchDataModule.drop_missing`), dropped from the
  sample list and counted here in ``skipped_samples["missing"]``; a split whose files are *all*
  missing (e.g. videos laid out flat instead of in class folders) is a :class:`DataRootError`.
* ``corrupt``: a file that exists but cannot be decoded; skipped inside the loader
  (``corrupt.py``) and counted per batch by the Task.

``bench run`` calls :meth:`BenchDataModule.preflight` before it creates the run directory, so a
broken data root (unreadable pickles, no images, only missing files) fails with exit code 2 and
leaves nothing behind.
"""
from __future__ import annotations

import abc
import logging
import math
import os
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from pebench.core.errors import ConfigError, UserError
from pebench.core.options import parse_bool

__all__ = ["BenchDataModule", "DataRootError", "DataSource", "parse_resolution", "MODALITIES", "LABEL_KINDS",
           "int_option", "float_option"]

log = logging.getLogger(__name__)

MODALITIES = ("image", "video", "events", "points")
#: what a dataset's targets are (``label_kind``): ``class``, one class index per sample (classification-shaped);
#: ``boxes``, a list of annotated boxes per sample (COCO-style detection targets); ``point-labels``, a class
#: index per point of a scene
LABEL_KINDS = ("class", "boxes", "point-labels")


class DataRootError(UserError):
    """The data root is missing or not laid out as the dataset expects (exit code 2 in the CLI)."""

    phase = "data"


def parse_resolution(value: int | str | None) -> tuple[int, ...] | None:
    """``64`` -> ``(64,)``; ``"16x64"`` -> ``(16, 64)``; ``None`` -> ``None``."""
    if value is None:
        return None
    if isinstance(value, int):
        parts = [value]
    else:
        try:
            parts = [int(v) for v in str(value).lower().split("x")]
        except ValueError:
            raise ConfigError(f"resolution {value!r} is not an integer or 'AxB' pair of integers") from None
    if not parts or len(parts) > 2 or any(p <= 0 for p in parts):
        raise ConfigError(f"resolution {value!r} must be one or two positive integers ('64' or '16x64')")
    return tuple(parts)


def bool_option(dataset: str, key: str, value: Any) -> bool:
    """A true/false datamodule option (``--data-option KEY=VALUE``), else one-line ``ValueError``."""
    flag = parse_bool(value)
    if flag is None:
        raise ConfigError(f"{dataset}: data option {key} must be true or false, got {value!r}")
    return flag


def int_option(dataset: str, key: str, value: Any, minimum: int = 1) -> int:
    """A whole-number datamodule option (``--data-option KEY=VALUE``) >= ``minimum``, else one-line
    ``ValueError`` (exit code 2 in the CLI)."""
    ok = isinstance(value, int) and not isinstance(value, bool)
    if not ok and isinstance(value, float) and value.is_integer():
        value, ok = int(value), True
    if not ok and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value, ok = int(value), True
    if not ok or value < minimum:
        raise ConfigError(f"{dataset}: data option {key} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def float_option(dataset: str, key: str, value: Any, minimum: float = 0.0) -> float:
    """A finite float datamodule option >= ``minimum``, else one-line ``ValueError``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if isinstance(value, bool) or not math.isfinite(v) or v < minimum:
        raise ConfigError(f"{dataset}: data option {key} must be a finite number >= {minimum:g}, got {value!r}")
    return v


@dataclass(frozen=True)
class DataSource:
    """Where a real dataset comes from: pebench downloads nothing, and ``bench list datasets`` and
    docs/datasets.md (``python -m pebench.cli.docs --datasets-page docs/datasets.md``) print this."""

    #: who publishes it, and the paper or release that introduced it
    publisher: str
    #: the canonical page, as text
    url: str
    #: the licence or terms as the publisher states them; "not stated" where the publisher states none
    licence: str
    #: download size and/or files, samples, classes
    size: str
    #: the library call that writes the layout the reader expects, or what to unpack where no library does
    writer: str


class BenchDataModule(L.LightningDataModule, abc.ABC):
    """Base class: subclasses set the class attributes and implement the ``*_dataset`` methods."""

    #: registry / CLI name (a plain annotation: LightningDataModule declares ``name`` an instance attribute)
    name: str = "?"
    #: one of MODALITIES
    modality: ClassVar[str] = "image"
    #: True for datasets read from ``--data-root``
    needs_data_root: ClassVar[bool] = False
    #: one line describing the expected on-disk layout (used in DataRootError messages)
    expected_layout: ClassVar[str] = ""
    #: where the data come from (every dataset with ``needs_data_root`` declares one; see :class:`DataSource`)
    source: ClassVar[DataSource | None] = None
    #: default resolution (see table above)
    default_resolution: ClassVar[int | str] = 32
    #: tokenizer geometry: patch size (pixels), tubelet length (frames/time bins) for 3-D inputs
    patch_size: ClassVar[int] = 4
    tubelet: ClassVar[int] = 2
    #: points: number of groups (tokens) at the default resolution
    num_groups: ClassVar[int] = 64
    #: the task ``bench run`` trains when ``--task`` is not given (pebench.tasks)
    default_task: ClassVar[str] = "classification"
    #: what the targets are (one of :data:`LABEL_KINDS`); which tasks can train on the dataset is each task's
    #: own declaration (``TaskSetup.accepts``), checked when a run is resolved (pebench.tasks.resolve_task)
    label_kind: ClassVar[str] = "class"
    #: channels of one input (see the module docstring); every dataset declares it
    in_chans: ClassVar[int]
    #: the inputs' standardisation ``(x - mean) / std``: one value for every channel or one per
    #: channel; ``None``: not standardised (see the module docstring)
    mean: ClassVar[float | tuple[float, ...] | None] = None
    std: ClassVar[float | tuple[float, ...] | None] = None

    def __init__(self, batch_size: int = 64, num_workers: int = 0, seed: int = 0,
                 resolution: int | str | None = None, data_root: str | None = None, **kwargs: Any) -> None:
        super().__init__()
        if kwargs:
            raise TypeError(f"{type(self).__name__} got unknown options: {', '.join(sorted(kwargs))}")
        if not hasattr(type(self), "in_chans"):
            raise TypeError(f"dataset {self.name!r} ({type(self).__name__}) declares no channel count (in_chans)")
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.seed = seed
        self.resolution = parse_resolution(resolution if resolution is not None else self.default_resolution)
        self.data_root = data_root
        self.skipped_samples: dict[str, int] = {}
        #: split -> (files listed, files missing, first missing path); see :meth:`drop_missing`
        self.missing_by_split: dict[str, tuple[int, int, str | None]] = {}
        if self.needs_data_root and not data_root:
            raise DataRootError(f"dataset {self.name!r} needs --data-root; expected layout: {self.expected_layout}")

    # ---- what the model needs to know -------------------------------------------------
    @property
    @abc.abstractmethod
    def num_classes(self) -> int:
        """Number of classes of the classification task."""

    def normalisation(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """The declared ``(mean, std)``, one value per input channel (a shared value repeated);
        ``ValueError`` naming the dataset when it declares none or not one per channel."""
        if self.mean is None or self.std is None:
            raise ValueError(f"dataset {self.name!r} ({type(self).__name__}) declares no input normalisation "
                             "(class attributes mean and std)")
        out = []
        for what, v in (("mean", self.mean), ("std", self.std)):
            vals = (float(v),) * self.in_chans if isinstance(v, (int, float)) else tuple(float(x) for x in v)
            if len(vals) != self.in_chans:
                raise ValueError(f"dataset {self.name!r}: {what} has {len(vals)} values for {self.in_chans} channels")
            out.append(vals)
        if any(s <= 0 for s in out[1]):
            raise ValueError(f"dataset {self.name!r}: std must be positive, got {self.std!r}")
        return out[0], out[1]

    @property
    def spatial_dims(self) -> int:
        return 2 if self.modality == "image" else 3

    @abc.abstractmethod
    def input_shape(self, resolution: tuple[int, ...] | None = None) -> tuple[int, ...]:
        """Shape of one sample's input at ``resolution`` (default: the training one), no batch dim."""

    # ---- datasets ---------------------------------------------------------------------
    @abc.abstractmethod
    def train_dataset(self) -> Dataset[Any]:
        """The training set (eval-only datasets raise a one-line error here)."""

    @abc.abstractmethod
    def val_dataset(self, resolution: tuple[int, ...] | None = None) -> Dataset[Any]:
        """Validation set rendered / resampled at ``resolution`` (None: the training one)."""

    def test_dataset(self, resolution: tuple[int, ...] | None = None) -> Dataset[Any]:
        return self.val_dataset(resolution)

    # ---- loaders ----------------------------------------------------------------------
    def _loader(self, ds: Dataset[Any], shuffle: bool) -> DataLoader[Any]:
        return DataLoader(ds, batch_size=self.batch_size, shuffle=shuffle, num_workers=self.num_workers,
                          persistent_workers=self.num_workers > 0, drop_last=False,
                          pin_memory=torch.cuda.is_available(), collate_fn=getattr(ds, "collate_fn", None))

    def train_dataloader(self) -> DataLoader[Any]:
        return self._loader(self.train_dataset(), shuffle=True)

    def val_dataloader(self) -> DataLoader[Any]:
        return self._loader(self.val_dataset(), shuffle=False)

    def test_dataloader(self) -> DataLoader[Any]:
        return self._loader(self.test_dataset(), shuffle=False)

    def eval_dataloader(self, resolution: int | str | tuple[int, ...] | None = None) -> DataLoader[Any]:
        """Validation loader at another resolution (extrapolation), in a fixed order."""
        res = resolution if isinstance(resolution, tuple) or resolution is None else parse_resolution(resolution)
        return self._loader(self.val_dataset(res), shuffle=False)

    def count_skipped(self, reason: str, n: int = 1) -> None:
        self.skipped_samples[reason] = self.skipped_samples.get(reason, 0) + n

    # ---- data-root checks before anything is written ---------------------------------
    def drop_missing(self, samples: Sequence[tuple[str, Any]], split: str, listed_in: str,
                     hint: str = "") -> list[tuple[str, Any]]:
        """``(path, label)`` list -> the entries whose file exists; the others are counted as
        ``missing`` (once per split). All missing: :class:`DataRootError` naming the first missing
        path, ``listed_in`` (the list file) and the expected layout (``hint`` is prepended)."""
        kept = [s for s in samples if os.path.isfile(s[0])]
        missing = [s[0] for s in samples if not os.path.isfile(s[0])]
        if split not in self.missing_by_split:
            self.missing_by_split[split] = (len(samples), len(missing), missing[0] if missing else None)
            if missing:
                self.count_skipped("missing", len(missing))
                log.warning("%s: %d of %d files listed in %s do not exist (first: %s)", self.name, len(missing),
                            len(samples), listed_in, missing[0])
        if samples and not kept:
            raise DataRootError(f"{self.name}: none of the {len(samples)} files listed in {listed_in!r} exist "
                                f"(first: {missing[0]!r}); {hint}expected layout: {self.expected_layout}")
        return kept

    def preflight(self) -> dict[str, int]:
        """Build the training and validation sets once (list files read, listed files checked,
        arrays unpickled) so a broken data root raises :class:`DataRootError` now, before a run
        directory exists; -> ``{"train": n, "val": n}``. Synthetic sets have nothing to check."""
        if not self.needs_data_root:
            return {}
        # map-style datasets define __len__; torch's Dataset does not declare it
        sizes = {"train": len(self.train_dataset()), "val": len(self.val_dataset())}  # type: ignore[arg-type]
        for split, n in sizes.items():
            if n == 0:
                raise DataRootError(f"{self.name}: no {split} samples under {self.data_root!r}; "
                                    f"expected layout: {self.expected_layout}")
        return sizes

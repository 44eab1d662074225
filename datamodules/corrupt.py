"""Skip-and-count handling of corrupt samples for the real datasets (docs/architecture.md §7).

Contract (all real-dataset readers in pebench follow it):

* a dataset's ``__getitem__`` returns ``None`` when the sample's file cannot be decoded
  (truncated JPEG / AVI / NPY / OFF, unreadable TIFF, ...) and logs the path once;
* the loader's ``collate_fn`` (:func:`skip_corrupt_collate`, attached to the dataset as
  ``dataset.collate_fn`` so :meth:`BenchDataModule._loader` picks it up) drops the ``None`` s and
  returns ``(inputs, labels, {"skipped": n})`` -- always the 3-tuple, ``n`` may be 0. The counts are
  made inside the loader's worker processes, so they travel with the batch; the Task sums them
  into ``results.json``.
* a sample read from a file that is only partly decodable (a truncated video whose clip was sampled
  from the frames before the cut) is used, and marked by returning it as a :class:`TruncatedSample`;
  the collate function counts those apart: ``info["truncated"] = m`` (the key is present only when
  ``m > 0``). The run reports them per split in ``results.json`` ``skipped_samples.truncated``;
* a batch in which every sample is corrupt becomes empty tensors ``(0, *sample_shape)`` and
  ``(0,)`` labels, so the Task can skip it without special-casing shapes.

Only decode-type errors count as corruption (:data:`CORRUPT_ERRORS`); a bug in a transform
(``TypeError``, ``AttributeError``, ...) still raises, so it cannot silently empty an epoch.
"""
from __future__ import annotations

import abc
import logging
import pickle
import struct
import zlib
from functools import partial
from typing import Any, Callable, Sequence

import torch
from torch.utils.data import Dataset, default_collate

__all__ = ["CORRUPT_ERRORS", "SkippingDataset", "TruncatedSample", "skip_corrupt_collate", "make_collate"]

log = logging.getLogger(__name__)

#: exceptions that mean "this file is damaged", not "the code is wrong"
CORRUPT_ERRORS: tuple[type[BaseException], ...] = (
    OSError, ValueError, RuntimeError, EOFError, IndexError, SyntaxError,
    pickle.UnpicklingError, struct.error, zlib.error,
)


class TruncatedSample(tuple):
    """An ``(input, label)`` pair read from a partly decodable file (see the module docstring)."""


def skip_corrupt_collate(batch: Sequence[Any], sample_shape: Sequence[int] | None = None
                         ) -> tuple[torch.Tensor, torch.Tensor, dict[str, int]]:
    """Collate ``(input, label)`` pairs, dropping ``None`` (corrupt) entries and counting them, and
    counting the :class:`TruncatedSample` s among the kept ones (``"truncated"``, only when any)."""
    kept = [b for b in batch if b is not None]
    skipped = len(batch) - len(kept)
    truncated = sum(isinstance(b, TruncatedSample) for b in kept)
    info = {"skipped": skipped, **({"truncated": truncated} if truncated else {})}
    if not kept:
        shape = tuple(sample_shape) if sample_shape is not None else (0,)
        return torch.empty((0, *shape)), torch.empty((0,), dtype=torch.long), info
    inputs, labels = default_collate([tuple(b) for b in kept])
    return inputs, labels.long(), info


def make_collate(sample_shape: Sequence[int] | None) -> Callable:
    """A picklable collate function (works with worker processes) for samples of ``sample_shape``."""
    return partial(skip_corrupt_collate, sample_shape=tuple(sample_shape) if sample_shape else None)


class SkippingDataset(Dataset, abc.ABC):
    """Base class: subclasses implement :meth:`load` (-> ``(input, label)``) and :meth:`describe`.

    ``__getitem__`` turns decode errors into ``None`` and logs each bad path once per process.
    """

    def __init__(self, sample_shape: Sequence[int] | None = None) -> None:
        self.sample_shape = tuple(sample_shape) if sample_shape is not None else None
        self.collate_fn = make_collate(self.sample_shape)
        self._reported: set[int] = set()

    @abc.abstractmethod
    def load(self, index: int) -> tuple[Any, int]:
        """Decode sample ``index`` -> ``(input, label)``; raise on a corrupt file."""

    def describe(self, index: int) -> str:
        """The file behind ``index`` (for the log line)."""
        return f"sample {index}"

    def __getitem__(self, index: int):
        try:
            return self.load(index)
        except CORRUPT_ERRORS as e:
            if index not in self._reported:
                self._reported.add(index)
                log.warning("skipping corrupt sample %s: %s: %s", self.describe(index), type(e).__name__, e)
            return None

"""IBM DVS Gesture (11 classes, 128x128 event sensor), read offline through tonic.

Layout (tonic's, after its archives are extracted): ``<root>/DVSGesture/ibmGestureTrain/
userNN_<lighting>/<label>.npy`` and ``.../ibmGestureTest/...`` (``<root>`` may also be the
``DVSGesture`` folder). Each ``.npy`` is an ``(N, 4)`` array of ``x, y, p, t`` with ``t`` in ms;
``tonic.datasets.DVSGesture.__getitem__`` converts it to its structured dtype in microseconds.

Offline: stock ``tonic.datasets.DVSGesture`` calls ``download()`` unless the *archive*
``ibmGestureTrain.tar.gz`` is present and the folder holds >= 100 ``.npy`` files. The
:class:`OfflineDVSGesture` subclass checks only for the extracted folder and makes ``download()``
raise :class:`DataRootError`, so a missing folder is an error and never a download.

Events -> ``(2, T, S, S)`` float: ``tonic.transforms.Compose([Downsample(sensor_size,
target_size=(S, S)) (when S != 128), ToFrame((S, S, 2), n_time_bins=T)])`` gives per-bin,
per-polarity event counts ``(T, 2, S, S)``; they are transposed to polarity-first and, with
``log_counts`` (default), compressed as ``log1p(count)`` (counts are heavy-tailed). No training
augmentation (left/right gestures are distinct classes, so no flips). ``resolution`` is ``S``
(sensor window side) or ``"TxS"`` (time bins x side, overrides ``time_bins``). Unreadable
``.npy`` files are skipped and counted.
"""
from __future__ import annotations

import os
from typing import Any, ClassVar

import numpy as np
import torch

from ._image_common import require_dir
from .base import BenchDataModule, DataRootError
from .corrupt import SkippingDataset
from .registry import register_datamodule

__all__ = ["DVSGestureDataModule", "OfflineDVSGesture", "EventFrameDataset", "event_transform"]

SENSOR = 128
LAYOUT = "<root>/DVSGesture/{ibmGestureTrain,ibmGestureTest}/userNN_<lighting>/<label>.npy"


_OFFLINE_CLS: type | None = None


def _offline_class() -> type:
    """``OfflineDVSGesture``, built on first use so importing pebench does not import tonic."""
    global _OFFLINE_CLS
    if _OFFLINE_CLS is None:
        from tonic.datasets import DVSGesture

        class OfflineDVSGesture(DVSGesture):
            """tonic's DVSGesture that reads the extracted folders in place and never downloads."""

            # tonic derives the folder from the class name; keep "<save_to>/DVSGesture"
            @property
            def location_on_system(self) -> str:
                return os.path.join(self._save_to, "DVSGesture")

            @location_on_system.setter
            def location_on_system(self, value: str) -> None:
                self._save_to = os.path.dirname(value)

            def _check_exists(self) -> bool:
                return os.path.isdir(os.path.join(self.location_on_system, self.folder_name))

            def download(self) -> None:
                folder = os.path.join(self.location_on_system, self.folder_name)
                raise DataRootError(f"dvsgesture: expected directory {folder!r} not found (offline: no download); "
                                    f"expected layout: {LAYOUT}")

        # importable as pebench.datamodules.dvsgesture.OfflineDVSGesture (module __getattr__): picklable
        OfflineDVSGesture.__module__ = __name__
        OfflineDVSGesture.__qualname__ = "OfflineDVSGesture"
        _OFFLINE_CLS = OfflineDVSGesture
    return _OFFLINE_CLS


def __getattr__(name: str) -> Any:
    if name == "OfflineDVSGesture":
        return _offline_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def event_transform(time_bins: int, size: int):
    """tonic transform: structured events -> ``(T, 2, S, S)`` counts."""
    import tonic.transforms as T

    sensor = (SENSOR, SENSOR, 2)
    steps = [] if size == SENSOR else [T.Downsample(sensor_size=sensor, target_size=(size, size))]
    return T.Compose([*steps, T.ToFrame(sensor_size=(size, size, 2), n_time_bins=time_bins)])


class EventFrameDataset(SkippingDataset):
    """tonic dataset -> ``(float (2, T, S, S), label)``; unreadable recordings -> ``None``."""

    def __init__(self, tonic_ds, time_bins: int, size: int, log_counts: bool = True) -> None:
        super().__init__((2, time_bins, size, size))
        self.ds, self.time_bins, self.size, self.log_counts = tonic_ds, time_bins, size, log_counts
        self.ds.transform = event_transform(time_bins, size)
        self.targets = list(self.ds.targets)

    def __len__(self) -> int:
        return len(self.ds)

    def describe(self, index: int) -> str:
        return self.ds.data[index]

    def load(self, index: int):
        frames, label = self.ds[index]  # (T', 2, S, S); T' can fall short of T for a near-empty recording
        x = torch.zeros(self.time_bins, 2, self.size, self.size)
        f = torch.from_numpy(np.asarray(frames, dtype=np.float32))[: self.time_bins]
        x[: f.shape[0]] = f
        x = x.permute(1, 0, 2, 3).contiguous()  # (2, T, S, S)
        return (torch.log1p(x) if self.log_counts else x), int(label)


@register_datamodule("dvsgesture")
class DVSGestureDataModule(BenchDataModule):
    modality: ClassVar[str] = "events"
    needs_data_root: ClassVar[bool] = True
    expected_layout: ClassVar[str] = LAYOUT
    default_resolution: ClassVar[int | str] = 128
    patch_size: ClassVar[int] = 16
    tubelet: ClassVar[int] = 2
    classes: ClassVar[list[str]] = ["Hand clapping", "Right hand wave", "Left hand wave", "Right arm cw",
                                    "Right arm ccw", "Left arm cw", "Left arm ccw", "Arm roll", "Air drums",
                                    "Air guitar", "Other gestures"]

    def __init__(self, time_bins: int = 16, log_counts: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.time_bins, self.log_counts = time_bins, log_counts
        self.data_root = os.path.expanduser(str(self.data_root))
        self._tonic: dict[bool, Any] = {}
        self.validate()

    def validate(self) -> None:
        require_dir(self.data_root, self.name, LAYOUT)
        root = self.data_root.rstrip(os.sep)
        # tonic appends "DVSGesture": accept the parent or the DVSGesture folder itself
        self.save_to = os.path.dirname(root) if os.path.basename(root) == "DVSGesture" else root
        for folder in ("ibmGestureTrain", "ibmGestureTest"):
            require_dir(os.path.join(self.save_to, "DVSGesture", folder), self.name, LAYOUT)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def bins_and_size(self, resolution: tuple[int, ...] | None = None) -> tuple[int, int]:
        res = resolution or self.resolution
        return (self.time_bins, res[0]) if len(res) == 1 else (res[0], res[1])

    def input_shape(self, resolution: tuple[int, ...] | None = None) -> tuple[int, ...]:
        t, s = self.bins_and_size(resolution)
        return (2, t, s, s)

    def tonic_dataset(self, train: bool):
        if train not in self._tonic:
            ds = _offline_class()(save_to=self.save_to, train=train)
            if len(ds) == 0:
                raise DataRootError(f"dvsgesture: no .npy recordings under "
                                    f"{os.path.join(ds.location_on_system, ds.folder_name)!r}; expected layout: {LAYOUT}")
            self._tonic[train] = ds
        return self._tonic[train]

    def _dataset(self, train: bool, resolution: tuple[int, ...] | None = None):
        import copy

        t, s = self.bins_and_size(resolution)
        return EventFrameDataset(copy.copy(self.tonic_dataset(train)), t, s, self.log_counts)

    def train_dataset(self):
        return self._dataset(True)

    def val_dataset(self, resolution: tuple[int, ...] | None = None):
        return self._dataset(False, resolution)

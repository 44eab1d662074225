"""IBM DVS Gesture (11 classes, 128x128 event sensor), read offline through tonic.

Layout (tonic's, after its archives are extracted): ``<root>/DVSGesture/ibmGestureTrain/
userNN_<lighting>/<label>.npy`` and ``.../ibmGestureTest/...`` (``<root>`` may also be the
``DVSGesture`` folder). Each ``.npy`` is an ``(N, 4)`` array of ``x, y, p, t`` with ``t`` in ms;
``tonic.datasets.DVSGesture.__getitem__`` converts it to its structured dtype in microseconds.

Offline: stock ``tonic.datasets.DVSGesture`` calls ``download()`` unless the *archive*
``ibmGestureTrain.tar.gz`` is present and the folder holds >= 100 ``.npy`` files. The
:class:`OfflineDVSGesture` subclass checks only for the extracted folder and makes ``download()``
raise :class:`DataRootError`, so a missing folder is an error and never a download.

``tokens=frames``: events -> ``(2, T, S, S)`` float: ``tonic.transforms.Compose([Downsample(sensor_size,
target_size=(S, S)) (when S != 128), ToFrame((S, S, 2), n_time_bins=T)])`` gives per-bin,
per-polarity event counts ``(T, 2, S, S)``; they are transposed to polarity-first and, with
``log_counts`` (default), compressed as ``log1p(count)`` (counts are heavy-tailed). No training
augmentation by default (``augment=true``: see below). ``resolution`` is ``S``
(sensor window side) or ``"TxS"`` (time bins x side, overrides ``time_bins``). Unreadable
``.npy`` files are skipped and counted.

``tokens=spiking`` (:mod:`.event_transforms`, :mod:`pebench.models.spiking`): the raw stream
(downsampled to ``S`` by tonic's ``Downsample`` when ``S != 128``) becomes spiking-patch tokens
on ``patch_size`` (16) cells: 256 events per token, 100 ms refractory period, ``t`` in units of
50 ms (the PaPE harness's DvsGesture settings), 8 age buckets, at most 512 tokens per recording
(the most recent). This is the default: it follows the PaPE paper, whose DvsGesture results use
such asynchronous tokens. ``--data-option tokens=frames`` gives the voxel-grid tubelets above
(``time_bins``, ``log_counts`` and the ``T`` of ``resolution`` apply to them only); such runs write
to ``<pe>+frames``.

``augment=true`` (training split only): tonic horizontal flip with the label remapped (right
hand wave <-> left hand wave, right arm cw <-> left arm ccw, right arm ccw <-> left arm cw),
a rotation of up to ±15°, drop-by-time, drop-by-area, drop-event (see :class:`~.event_transforms.Augment`); with
``tokens=frames`` the augmented stream is binned as usual.
"""
from __future__ import annotations

import copy
import os
from typing import Any, ClassVar

import numpy as np
import torch

from ..base import BenchDataModule, DataRootError, DataSource
from ..corrupt import SkippingDataset
from ..image_common import require_dir
from ..registry import register_datamodule
from .event_transforms import SPIKING_HELP, Augment, SpikingOptions, parse_tokens
from .spiking import pad_collate

__all__ = ["DVSGestureDataModule", "OfflineDVSGesture", "EventFrameDataset", "SpikingGestureDataset",
           "event_transform", "FLIP_LABEL"]

SENSOR = 128
LAYOUT = "<root>/DVSGesture/{ibmGestureTrain,ibmGestureTest}/userNN_<lighting>/<label>.npy"
#: label after a left-right flip (see the class names below): 1 <-> 2, 3 <-> 6, 4 <-> 5
FLIP_LABEL = [0, 2, 1, 6, 5, 4, 3, 7, 8, 9, 10]


_OFFLINE_CLS: type | None = None


def _offline_class() -> type:
    """``OfflineDVSGesture``, built on first use so importing pebench does not import tonic."""
    global _OFFLINE_CLS
    if _OFFLINE_CLS is None:
        from tonic.datasets import DVSGesture  # deferred: start-up time (tonic, ~0.2 s)

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

        # importable as pebench.datamodules.events.dvsgesture.OfflineDVSGesture (module __getattr__): picklable
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
    import tonic.transforms as T  # deferred: start-up time (tonic, ~0.2 s)

    sensor = (SENSOR, SENSOR, 2)
    steps = [] if size == SENSOR else [T.Downsample(sensor_size=sensor, target_size=(size, size))]
    return T.Compose([*steps, T.ToFrame(sensor_size=(size, size, 2), n_time_bins=time_bins)])


class EventFrameDataset(SkippingDataset):
    """tonic dataset -> ``(float (2, T, S, S), label)``; unreadable recordings -> ``None``."""

    def __init__(self, tonic_ds, time_bins: int, size: int, log_counts: bool = True,
                 augment: Augment | None = None) -> None:
        super().__init__((2, time_bins, size, size))
        self.ds, self.time_bins, self.size, self.log_counts = tonic_ds, time_bins, size, log_counts
        self.augment = augment
        self.ds.transform = event_transform(time_bins, size)
        if augment is not None:  # binning after the augmentation (it may remap the label)
            self.ds.transform, self._bin = None, self.ds.transform
        self.targets = list(self.ds.targets)

    def __len__(self) -> int:
        return len(self.ds)

    def describe(self, index: int) -> str:
        return self.ds.data[index]

    def load(self, index: int):
        frames, label = self.ds[index]  # (T', 2, S, S); T' can fall short of T for a near-empty recording
        if self.augment is not None:
            events, label = self.augment(frames, int(label))
            frames = self._bin(events)
        x = torch.zeros(self.time_bins, 2, self.size, self.size)
        f = torch.from_numpy(np.asarray(frames, dtype=np.float32))[: self.time_bins]
        x[: f.shape[0]] = f
        x = x.permute(1, 0, 2, 3).contiguous()  # (2, T, S, S)
        return (torch.log1p(x) if self.log_counts else x), int(label)


def _downsample(size: int):
    """tonic transform: structured events at 128 x 128 -> events on ``size x size`` (None at 128)."""
    if size == SENSOR:
        return None
    import tonic.transforms as T  # deferred: start-up time (tonic, ~0.2 s)

    return T.Downsample(sensor_size=(SENSOR, SENSOR, 2), target_size=(size, size))


class SpikingGestureDataset(SkippingDataset):
    """tonic dataset -> ``(SpikeTokens, label)`` (``tokens=spiking``); unreadable -> ``None``;
    batches padded with a key mask by :func:`~pebench.datamodules.events.spiking.pad_collate`."""

    def __init__(self, tonic_ds, size: int, spiking: SpikingOptions, augment: Augment | None = None) -> None:

        super().__init__(None)
        self.ds, self.size, self.spiking, self.augment = tonic_ds, size, spiking, augment
        self.ds.transform = _downsample(size)
        self.targets = list(self.ds.targets)
        self.stream_transform: Any = None
        self.collate_fn = pad_collate

    def __len__(self) -> int:
        return len(self.ds)

    def describe(self, index: int) -> str:
        return self.ds.data[index]

    def events(self, index: int):
        """The (downsampled) raw stream of recording ``index``."""
        return self.ds[index][0]

    def load(self, index: int):
        events, label = self.ds[index]
        label = int(label)
        if self.augment is not None:
            events, label = self.augment(events, label)
        if self.stream_transform is not None:
            events = self.stream_transform(events, int(index))
        return self.spiking.tokenize(events, (self.size, self.size)), label


@register_datamodule("dvsgesture")
class DVSGestureDataModule(BenchDataModule):
    source = DataSource(
        publisher="IBM Research (Amir et al. 2017, A Low Power, Fully Event-Based Gesture Recognition System)",
        url="https://research.ibm.com/interactive/dvsgesture/",
        licence="CC BY 4.0",
        size=("11 gestures of 29 subjects under 3 lighting conditions; the original .aedat release is a 3 GB tar; "
              "tonic's .npy conversion is ibmGestureTrain.tar.gz and ibmGestureTest.tar.gz"),
        writer=("``tonic.datasets.DVSGesture(save_to=root, train=True)`` and ``train=False`` (download tonic's "
                "``.npy`` conversion into ``<root>/DVSGesture/``)"),
    )
    modality: ClassVar[str] = "events"
    in_chans: ClassVar[int] = 2  # polarities
    needs_data_root: ClassVar[bool] = True
    expected_layout: ClassVar[str] = LAYOUT
    default_resolution: ClassVar[int | str] = 128
    patch_size: ClassVar[int] = 16
    tubelet: ClassVar[int] = 2
    classes: ClassVar[list[str]] = ["Hand clapping", "Right hand wave", "Left hand wave", "Right arm cw",
                                    "Right arm ccw", "Left arm cw", "Left arm ccw", "Arm roll", "Air drums",
                                    "Air guitar", "Other gestures"]
    option_help: ClassVar[dict[str, str]] = SPIKING_HELP

    def __init__(self, time_bins: int = 16, log_counts: bool = True, tokens: str = "spiking",
                 spike_threshold: int = 256, refractory_ms: float = 100.0, time_scale_ms: float = 50.0,
                 age_buckets: int = 8, max_tokens: int = 512, augment: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.time_bins, self.log_counts = time_bins, log_counts
        self.tokens = parse_tokens(self.name, tokens)
        self.spiking = SpikingOptions.parse(self.name, self.patch_size, spike_threshold, refractory_ms, time_scale_ms,
                                            age_buckets, max_tokens)
        self.augment = augment if isinstance(augment, bool) else str(augment).lower() in ("1", "true", "yes")
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

    def tokenizer_options(self) -> dict[str, Any]:
        """``tokens=spiking``: :meth:`SpikingOptions.record`; frames need nothing."""
        return self.spiking.record() if self.tokens == "spiking" else {}

    def bins_and_size(self, resolution: tuple[int, ...] | None = None) -> tuple[int, int]:
        res = resolution or self.resolution
        return (self.time_bins, res[0]) if len(res) == 1 else (res[0], res[1])

    def input_shape(self, resolution: tuple[int, ...] | None = None) -> tuple[int, ...]:
        t, s = self.bins_and_size(resolution)
        return (self.in_chans, t, s, s)

    def tonic_dataset(self, train: bool):
        if train not in self._tonic:
            ds = _offline_class()(save_to=self.save_to, train=train)
            if len(ds) == 0:
                raise DataRootError(f"dvsgesture: no .npy recordings under "
                                    f"{os.path.join(ds.location_on_system, ds.folder_name)!r}; expected layout: {LAYOUT}")
            self._tonic[train] = ds
        return self._tonic[train]

    def _dataset(self, train: bool, resolution: tuple[int, ...] | None = None):
        t, s = self.bins_and_size(resolution)
        aug = Augment((s, s, 2), FLIP_LABEL) if self.augment and train else None
        if self.tokens == "spiking":
            return SpikingGestureDataset(copy.copy(self.tonic_dataset(train)), s, self.spiking, aug)
        return EventFrameDataset(copy.copy(self.tonic_dataset(train)), t, s, self.log_counts, aug)

    def train_dataset(self):
        return self._dataset(True)

    def val_dataset(self, resolution: tuple[int, ...] | None = None):
        return self._dataset(False, resolution)

"""Prophesee GEN1 Automotive Detection (de Tournemire et al. 2020, arXiv:2001.08499): 2-D detection
of cars and pedestrians from an ATIS event camera (304 x 240 pixels), read from the released files.

Layout (the release after extraction; ``<root>`` holds the three split folders)::

    <root>/{train,val,test}/<rec>_td.dat     events (Prophesee DAT, "Event2D" records)
    <root>/{train,val,test}/<rec>_bbox.npy   boxes (numpy structured array)

**Events** (``.dat``, Prophesee's DAT format as written by its StreamLogger and read by the
dataset's toolbox, ``src/io/dat_events_tools.py``): text header lines that start with ``"% "``
(e.g. ``% Data file containing Event2D events.``, ``% Version 2``, ``% Date ...``,
``% Height 240``, ``% Width 304``), then one byte event type (0 = Event2D) and one byte event
size (8), then 8-byte little-endian records: ``uint32`` timestamp in microseconds, ``uint32``
with ``x`` in bits 0-13, ``y`` in bits 14-27 and the polarity in bits 28-31 (0 = OFF, 1 = ON). A
file without ``%`` lines has no type/size bytes (the toolbox's rule for old files).

Why a reader here and not a package: ``expelliarmus`` (PyPI) decodes DAT files, but only whole
files or sequential chunks from the start, and it reads every backwards timestamp step as a
32-bit wrap (adding 2^32 µs). One GEN1 sample needs the 50 ms before one label inside a 60 s
recording, so :class:`DatRecording` memory-maps the records (numpy structured dtype) and finds
the window by binary search on the timestamp column: a sample costs the events it uses. The
tests check this reader and :func:`write_dat` against expelliarmus on the same files.

**Boxes** (``_bbox.npy``): fields ``x, y, w, h`` (top-left corner and size, pixels of the sensor
frame), ``class_id`` (0 = car, 1 = pedestrian), ``track_id`` and a time stamp in µs. Both
dtypes in circulation are read: the original ``ts`` / ``confidence`` one and the toolbox's
``t`` / ``class_confidence`` one (:data:`BBOX_DTYPE`; :func:`load_boxes` maps the first to it).

**Protocol** (Prophesee's evaluation, ``src/io/box_filtering.py`` and ``psee_evaluator.py``;
RVT, Gehrig & Scaramuzza 2023, ``scripts/genx/preprocess_dataset.py``), applied in this order:

1. boxes are clipped to the sensor frame and those left with no area dropped (RVT's
   ``crop_to_fov_filter``; RVT clips the right/bottom edge to ``W - 1`` / ``H - 1``, here to
   ``W`` / ``H``, the frame in continuous pixel coordinates);
2. labels at ``t <= 0.5 s`` are skipped (too little event history before them);
3. boxes with a diagonal below 30 px or a side below 10 px are dropped -- ground truth here, and
   the model's predictions through :meth:`Gen1DataModule.filter_predictions`;
4. training split only: boxes wider than ``(9 * W) // 10`` px (273 on GEN1) are dropped (RVT's
   ``remove_faulty_huge_bbox_filter``: labels that span the frame without covering an object).

Every distinct label time left with at least one box is one **sample**: the events with
``t_label - window <= t < t_label`` (strictly before the label; ``window_ms``, 50 by default with ``tokens=frames``)
binned into ``time_bins`` equal bins (10: 5 ms each) by ``tonic.transforms.ToFrame`` -> per-bin,
per-polarity counts ``(2, T, H, W)`` (polarity first), ``log1p``-compressed with ``log_counts``
(default). ``resolution`` is ``S`` (input height) or ``"TxS"`` (time bins x height): the frame is
scaled by ``S / 240`` with its aspect kept (an event at pixel ``(x, y)`` lands in the pixel that
holds its centre, ``floor((x + 0.5) * s)``), then padded at the bottom / right to a multiple of
the patch size (16: 240 x 304 needs none). Batches follow ``detection_common.py``: boxes xyxy in
the input frame, ``orig_size = (240, 304)``, ``scale`` / ``scale_xy``. Evaluation is COCO mAP in
the sensor frame against :meth:`Gen1DataModule.coco_gt` (category ids 1 = car, 2 = pedestrian,
one COCO image per sample, id = the sample's index in its split).

Token coordinates (``TubeletTokenizer``, ``tokens=frames``): ``(t, y, x)`` in tubelet units, so one
unit of ``t`` is ``tubelet * window_ms / time_bins`` milliseconds (2 x 5 = 10 ms by default) and one
unit of ``y``/``x`` is one patch (16 input pixels).

**Tokens** (data option ``tokens``, :mod:`.event_transforms`): ``spiking`` (the ``gen1`` default: the
PaPE paper's GEN1 results use asynchronous tokens) turns the window's raw events, after the same
pixel-centre scaling, into spiking-patch tokens (:func:`pebench.datamodules.events.spiking.spiking_patches`)
on the padded input frame cut into ``patch_size`` cells, so a token's ``(y, x)`` is a cell of the
same ``(Hp / p, Wp / p)`` map the frames path gives: 256 events per token, 100 ms refractory
period, ``t`` in units of 100 ms (the PaPE harness's GEN1 settings as issue #14 gives them), 8 age
buckets, at most 512 tokens per sample (the most recent). The window of a spiking sample is
``window_ms`` when given, else :attr:`Gen1DataModule.spiking_window_ms` (200 ms on GEN1: with a
100 ms refractory period a cell fires at most twice in it; the 50 ms frame window would allow one
token per cell). Each target then also carries ``input_hw`` (the padded input ``(Hp, Wp)``, which a
padded token batch does not show) and batches are ``(EventTokens, targets, info)`` with the
token-cap counts in ``info`` (:func:`~.spiking.detection_spiking_collate`). ``tokens=frames``
gives the voxel grid above; such runs write to ``<pe>+frames``. ``time_bins``, ``log_counts`` and the
``T`` of ``resolution`` apply to frames only.

Damaged files: a ``.dat`` whose header cannot be parsed, or that is not an Event2D file, makes
each of its samples corrupt (skipped and counted when read, ``corrupt.py``). A ``.dat`` cut off
inside its records (size after the header not a multiple of 8) keeps its readable part: samples
whose label time lies after its last complete event are corrupt, the others load normally. A
recording without its ``_bbox.npy`` is counted as ``missing``; an unreadable ``_bbox.npy`` is
counted as ``corrupt`` (one per recording, when the sample list is built). Timestamps are assumed
non-decreasing (the window is found by binary search, then cut exactly).
"""
from __future__ import annotations

import contextlib
import glob
import io
import logging
import math
import os
from functools import partial
from typing import Any, ClassVar, NamedTuple, Sequence

import numpy as np
import torch
from pycocotools.coco import COCO

from ..base import BenchDataModule, DataRootError, DataSource, float_option, int_option, parse_resolution
from ..corrupt import SkippingDataset
from ..detection_common import detection_collate
from ..image_common import require_dir
from ..registry import register_datamodule
from .event_transforms import SPIKING_HELP, SpikingOptions, parse_tokens
from .prophesee_dat import EVENT_DTYPE, RAW_DTYPE, DatHeader, DatRecording, read_dat, read_dat_header, write_dat
from .spiking import detection_spiking_collate

__all__ = ["Gen1DataModule", "Gen1Dataset", "DatHeader", "DatRecording", "read_dat_header", "read_dat", "write_dat",
           "load_boxes", "BBOX_DTYPE", "BBOX_DTYPE_TS", "RAW_DTYPE", "EVENT_DTYPE", "crop_to_frame",
           "prophesee_filter", "rvt_train_filter", "GEN1_CLASSES", "LAYOUT"]

log = logging.getLogger(__name__)

LAYOUT = "<root>/{train,val,test}/<rec>_td.dat (Prophesee DAT events) + <root>/{train,val,test}/<rec>_bbox.npy"
GEN1_CLASSES = ("car", "pedestrian")
#: the toolbox's box dtype (``t`` / ``class_confidence``)
BBOX_DTYPE = np.dtype({"names": ["t", "x", "y", "w", "h", "class_id", "track_id", "class_confidence"],
                       "formats": ["<i8", "<f4", "<f4", "<f4", "<f4", "<u4", "<u4", "<f4"],
                       "offsets": [0, 8, 12, 16, 20, 24, 28, 32], "itemsize": 40})
#: the original release's box dtype (``ts`` / ``confidence``)
BBOX_DTYPE_TS = np.dtype([("ts", "<u8"), ("x", "<f4"), ("y", "<f4"), ("w", "<f4"), ("h", "<f4"), ("class_id", "u1"),
                          ("confidence", "<f4"), ("track_id", "<u4")])


def load_boxes(path: str) -> np.ndarray:
    """A ``_bbox.npy`` in either dtype -> :data:`BBOX_DTYPE` (``ts`` -> ``t``, ``confidence`` ->
    ``class_confidence``); ``ValueError`` when it is not a box array."""
    arr = np.load(path, allow_pickle=False)
    names = arr.dtype.names or ()
    tname = "t" if "t" in names else "ts" if "ts" in names else None
    need = {"x", "y", "w", "h", "class_id"}
    if arr.ndim != 1 or tname is None or not need <= set(names):
        raise ValueError(f"not a GEN1 box array (fields {', '.join(names) or 'none'}; need t or ts, x, y, w, h, "
                         f"class_id)")
    out = np.zeros(len(arr), dtype=BBOX_DTYPE)
    out["t"] = arr[tname]
    for k in ("x", "y", "w", "h", "class_id"):
        out[k] = arr[k]
    if "track_id" in names:
        out["track_id"] = arr["track_id"]
    conf = "class_confidence" if "class_confidence" in names else "confidence" if "confidence" in names else None
    out["class_confidence"] = arr[conf] if conf else 1.0
    return out


def crop_to_frame(boxes: np.ndarray, height: int, width: int) -> np.ndarray:
    """Clip ``x, y, w, h`` boxes to ``[0, width] x [0, height]``; drop those left without area."""
    x0, y0 = np.clip(boxes["x"], 0, width), np.clip(boxes["y"], 0, height)
    x1, y1 = np.clip(boxes["x"] + boxes["w"], 0, width), np.clip(boxes["y"] + boxes["h"], 0, height)
    out = boxes.copy()
    out["x"], out["y"], out["w"], out["h"] = x0, y0, x1 - x0, y1 - y0
    return out[(out["w"] > 0) & (out["h"] > 0)]


def prophesee_filter(boxes: np.ndarray, skip_us: int = 500_000, min_box_diag: float = 30.0,
                     min_box_side: float = 10.0) -> np.ndarray:
    """Prophesee's evaluation filter: keep boxes with ``t > skip_us``, ``w² + h² >= diag²`` and both
    sides ``>= min_box_side`` (boxes with a ``t`` field; see the module docstring)."""
    w, h = boxes["w"].astype(np.float64), boxes["h"].astype(np.float64)
    keep = (boxes["t"] > skip_us) & (w ** 2 + h ** 2 >= min_box_diag ** 2) & (w >= min_box_side) & (h >= min_box_side)
    return boxes[keep]


def rvt_train_filter(boxes: np.ndarray, width: int) -> np.ndarray:
    """RVT's training-split filter: drop boxes wider than ``(9 * width) // 10`` px."""
    return boxes[boxes["w"] <= (9 * width) // 10]


# ------------------------------------------------------------------------------------ dataset
class Sample(NamedTuple):
    rec: int                   # index into the split's recordings
    t: int                     # label time (µs)
    boxes: np.ndarray          # (n, 4) float32 xyxy, sensor frame
    labels: np.ndarray         # (n,) int64


def _bin_events(ev: np.ndarray, t0: int, t1: int, bins: int, hw_in: tuple[int, int]) -> np.ndarray:
    """Events already in input pixels -> ``(T, 2, h, w)`` counts over ``[t0, t1)`` in ``T`` equal bins
    (``tonic.transforms.ToFrame`` with a fixed start / end; an empty window is all zeros)."""
    h, w = hw_in
    if len(ev) == 0:
        return np.zeros((bins, 2, h, w), dtype=np.float32)
    from tonic.transforms import ToFrame  # deferred: start-up time (tonic, ~0.2 s)

    frames = ToFrame(sensor_size=(w, h, 2), time_window=(t1 - t0) // bins, start_time=t0, end_time=t1)(ev)
    if frames.shape[0] != bins:  # guarded by the window / bins divisibility check
        raise AssertionError(f"ToFrame gave {frames.shape[0]} bins, expected {bins}")
    return frames.astype(np.float32)


class Gen1Dataset(SkippingDataset):
    """Samples of one split -> ``(float (2, T, Hp, Wp), target)`` (``tokens=frames``) or
    ``(SpikeTokens, target)`` (``spiking`` given); see the module docstring.

    ``stream_transform``: optional ``fn(events, index) -> events`` applied to the window's raw events
    (sensor frame) before binning or tokenization (e.g. :class:`~.event_transforms.StreamShift`)."""

    def __init__(self, recordings: Sequence[DatRecording | str], samples: Sequence[Sample], sensor_hw: tuple[int, int],
                 time_bins: int, window_us: int, scale: float, padded_hw: tuple[int, int], log_counts: bool,
                 spiking: SpikingOptions | None = None) -> None:
        super().__init__(None if spiking is not None else (2, time_bins, *padded_hw))
        self.spiking = spiking
        self.collate_fn = (detection_spiking_collate if spiking is not None
                           else partial(detection_collate, sample_shape=self.sample_shape))
        self.stream_transform: Any = None
        self.recordings, self.samples = list(recordings), list(samples)
        self.sensor_hw, self.time_bins, self.window_us = tuple(sensor_hw), int(time_bins), int(window_us)
        self.scale, self.padded_hw, self.log_counts = float(scale), tuple(padded_hw), bool(log_counts)
        H, W = self.sensor_hw
        self.content_hw = (max(1, int(round(H * self.scale))), max(1, int(round(W * self.scale))))
        self.scale_xy = (self.content_hw[1] / W, self.content_hw[0] / H)

    def __len__(self) -> int:
        return len(self.samples)

    def describe(self, index: int) -> str:
        s = self.samples[index]
        rec = self.recordings[s.rec]
        return f"{rec if isinstance(rec, str) else rec.path} @ t={s.t} us"

    def events(self, index: int) -> np.ndarray:
        """Raw events of sample ``index`` (sensor frame, the window before its label)."""
        s = self.samples[index]
        rec = self.recordings[s.rec]
        if isinstance(rec, str):  # its header could not be read when the list was built
            DatRecording(rec)  # raises the decode error again
            raise ValueError(f"unreadable DAT file {rec}")
        if rec.truncated and (rec.last_t is None or s.t > rec.last_t):
            raise EOFError(f"{rec.path} is truncated before t={s.t} us (last readable event at {rec.last_t} us)")
        return rec.window(s.t - self.window_us, s.t)

    def to_input_frame(self, ev: np.ndarray) -> np.ndarray:
        """Window events (sensor frame) -> the same events in input pixels (those on the sensor only)."""
        H, W = self.sensor_hw
        ok = (ev["x"] >= 0) & (ev["x"] < W) & (ev["y"] >= 0) & (ev["y"] < H)
        ev = ev[ok]
        if self.scale != 1.0:
            ev = ev.copy()
            sx, sy = self.scale_xy
            # pixel-centre rule (tonic's Downsample floors x * s, which shifts by half a pixel)
            ev["x"] = np.minimum(np.floor((ev["x"] + 0.5) * sx), self.content_hw[1] - 1)
            ev["y"] = np.minimum(np.floor((ev["y"] + 0.5) * sy), self.content_hw[0] - 1)
        return ev

    def to_tokens(self, ev: np.ndarray) -> Any:
        """Window events (sensor frame) -> :class:`~pebench.datamodules.events.spiking.SpikeTokens` on the padded
        input frame (cells of ``patch`` input pixels; the padding strip receives no events)."""
        return self.spiking.tokenize(self.to_input_frame(ev), self.padded_hw)

    def to_input(self, ev: np.ndarray, t_label: int) -> torch.Tensor:
        """Window events (sensor frame) -> ``(2, T, Hp, Wp)`` float input."""
        ev = self.to_input_frame(ev)
        frames = _bin_events(ev, t_label - self.window_us, t_label, self.time_bins, self.content_hw)  # (T, 2, h, w)
        x = torch.zeros(2, self.time_bins, *self.padded_hw)
        f = torch.from_numpy(frames).permute(1, 0, 2, 3)  # (2, T, h, w)
        x[:, :, : f.shape[-2], : f.shape[-1]] = torch.log1p(f) if self.log_counts else f
        return x

    def target(self, index: int) -> dict[str, Any]:
        s = self.samples[index]
        sx, sy = self.scale_xy
        boxes = torch.from_numpy(s.boxes.astype(np.float32)) * torch.tensor([sx, sy, sx, sy])
        out = {"boxes": boxes, "labels": torch.from_numpy(s.labels.astype(np.int64)), "image_id": int(index),
               "orig_size": self.sensor_hw, "scale": self.scale, "scale_xy": self.scale_xy}
        if self.spiking is not None:  # a padded token batch does not show the input frame's size
            out["input_hw"] = self.padded_hw
        return out

    def load(self, index: int) -> tuple[Any, dict[str, Any]]:
        s = self.samples[index]
        ev = self.events(index)
        if self.stream_transform is not None:
            ev = self.stream_transform(ev, int(index))
        if self.spiking is not None:
            return self.to_tokens(ev), self.target(index)
        return self.to_input(ev, s.t), self.target(index)


# --------------------------------------------------------------------------------- datamodule
@register_datamodule("gen1")
class Gen1DataModule(BenchDataModule):
    """GEN1 automotive detection from the released ``.dat`` / ``_bbox.npy`` files (module docstring)."""

    source = DataSource(
        publisher="Prophesee (de Tournemire et al. 2020, A Large Scale Event-based Detection Dataset for Automotive)",
        url="https://www.prophesee.ai/2020/01/24/prophesee-gen1-automotive-detection-dataset/",
        licence="the publisher's own licence terms, accepted at download (not restated here)",
        size="over 39 hours of 304 x 240 ATIS recordings; 228k car and 28k pedestrian boxes (the paper's figures)",
        writer="none: unpack the train, val and test archives into the root",
    )
    name: ClassVar[str] = "gen1"
    modality: ClassVar[str] = "events"
    in_chans: ClassVar[int] = 2  # polarities
    needs_data_root: ClassVar[bool] = True
    expected_layout: ClassVar[str] = LAYOUT
    default_task: ClassVar[str] = "detection"
    label_kind: ClassVar[str] = "boxes"
    default_resolution: ClassVar[int | str] = "10x240"
    #: input height when ``--resolution`` is not given (scale = height / sensor height)
    default_height: ClassVar[int] = 240
    patch_size: ClassVar[int] = 16
    tubelet: ClassVar[int] = 2
    has_test_split: ClassVar[bool] = True
    #: (height, width) of the sensor
    sensor_hw: ClassVar[tuple[int, int]] = (240, 304)
    classes: ClassVar[tuple[str, ...]] = GEN1_CLASSES
    splits: ClassVar[tuple[str, ...]] = ("train", "val", "test")
    #: Prophesee protocol constants (module docstring)
    skip_us: ClassVar[int] = 500_000
    min_box_diag: ClassVar[float] = 30.0
    min_box_side: ClassVar[float] = 10.0
    #: window of a sample with ``tokens=frames`` / ``tokens=spiking`` when ``window_ms`` is not given
    frames_window_ms: ClassVar[float] = 50.0
    spiking_window_ms: ClassVar[float] = 200.0
    option_help: ClassVar[dict[str, str]] = {
        "window_ms": "events of this many ms before each label time form its sample (default: 50 for "
                     "tokens=frames, the dataset's spiking window for tokens=spiking)",
        "time_bins": "tokens=frames: equal time bins of the window (the voxel grid's T; must divide the window in µs)",
        "log_counts": "tokens=frames: log1p-compress the per-bin event counts",
        **{k: v for k, v in SPIKING_HELP.items() if k != "augment"},
    }

    def __init__(self, window_ms: float | None = None, time_bins: int = 10, log_counts: bool = True,
                 tokens: str = "spiking", spike_threshold: int = 256, refractory_ms: float = 100.0,
                 time_scale_ms: float = 100.0, age_buckets: int = 8, max_tokens: int = 512, **kwargs: Any) -> None:
        if kwargs.get("resolution") is None:
            kwargs["resolution"] = f"{int_option(self.name, 'time_bins', time_bins)}x{self.default_height}"
        super().__init__(**kwargs)
        self.tokens = parse_tokens(self.name, tokens)
        self.spiking = SpikingOptions.parse(self.name, self.patch_size, spike_threshold, refractory_ms, time_scale_ms,
                                            age_buckets, max_tokens)
        self.time_bins = int_option(self.name, "time_bins", time_bins)
        if window_ms is None:
            window_ms = self.spiking_window_ms if self.tokens == "spiking" else self.frames_window_ms
        window = float_option(self.name, "window_ms", window_ms)
        self.window_us = int(round(window * 1000))
        if self.window_us <= 0 or abs(window * 1000 - self.window_us) > 1e-6:
            raise ValueError(f"{self.name}: data option window_ms must be a positive whole number of µs, "
                             f"got {window_ms!r}")
        self.log_counts = (log_counts if isinstance(log_counts, bool)
                           else str(log_counts).strip().lower() in ("1", "true", "yes"))
        self._check_resolution(self.resolution)
        self._recordings: dict[str, list[DatRecording | str]] = {}
        self._samples: dict[str, list[Sample]] = {}
        self._coco: dict[str, Any] = {}
        if self.needs_data_root:
            self.data_root = os.path.expanduser(str(self.data_root))
            self.validate()

    # ---- layout -----------------------------------------------------------------------------
    def validate(self) -> None:
        require_dir(self.data_root, self.name, self.expected_layout)
        for split in self.splits:
            folder = require_dir(os.path.join(self.data_root, split), self.name, self.expected_layout)
            if not glob.glob(os.path.join(glob.escape(folder), "*_td.dat")):
                raise DataRootError(f"{self.name}: no *_td.dat recordings in {folder!r}; "
                                    f"expected layout: {self.expected_layout}")

    # ---- geometry ---------------------------------------------------------------------------
    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def label_to_category_id(self) -> list[int]:
        """Contiguous label -> COCO category id of :meth:`coco_gt` (1 = car, 2 = pedestrian)."""
        return list(range(1, len(self.classes) + 1))

    def bins_and_height(self, resolution: tuple[int, ...] | None = None) -> tuple[int, int]:
        res = resolution or self.resolution
        return (self.time_bins, int(res[0])) if len(res) == 1 else (int(res[0]), int(res[1]))

    def tokenizer_options(self) -> dict[str, Any]:
        """``tokens=spiking``: :meth:`SpikingOptions.record`; frames need nothing."""
        return self.spiking.record() if self.tokens == "spiking" else {}

    def _check_resolution(self, res: tuple[int, ...]) -> tuple[int, int]:
        t, h = self.bins_and_height(res)
        if h <= 0:
            raise ValueError(f"{self.name}: input height must be positive, got {h}")
        if self.tokens == "spiking":  # time bins are a frames setting
            return t, h
        if t % self.tubelet:
            raise ValueError(f"{self.name}: {t} time bins are not a multiple of the tubelet ({self.tubelet})")
        if self.window_us % t:
            raise ValueError(f"{self.name}: {t} time bins do not divide the {self.window_us} µs window")
        return t, h

    def geometry(self, resolution: tuple[int, ...] | None = None) -> tuple[int, float, tuple[int, int]]:
        """-> (time bins, scale, padded (H, W)) at ``resolution``."""
        t, h = self._check_resolution(resolution or self.resolution)
        H, W = self.sensor_hw
        scale = h / H
        p = self.patch_size
        ch, cw = max(1, int(round(H * scale))), max(1, int(round(W * scale)))
        return t, scale, (math.ceil(ch / p) * p, math.ceil(cw / p) * p)

    def input_shape(self, resolution: tuple[int, ...] | None = None) -> tuple[int, ...]:
        t, _, (hp, wp) = self.geometry(resolution)
        return (self.in_chans, t, hp, wp)

    # ---- samples ----------------------------------------------------------------------------
    def split_dir(self, split: str) -> str:
        return os.path.join(self.data_root, split)

    def _build(self, split: str) -> None:
        if split not in self.splits:
            raise ValueError(f"{self.name}: no split {split!r}; available: {', '.join(self.splits)}")
        folder = self.split_dir(split)
        dats = sorted(glob.glob(os.path.join(glob.escape(folder), "*_td.dat")))
        pairs = [(d[: -len("_td.dat")] + "_bbox.npy", d) for d in dats]
        pairs = self.drop_missing(pairs, split, os.path.join(folder, "*_td.dat"),
                                  hint="each <rec>_td.dat needs its <rec>_bbox.npy; ")
        H, W = self.sensor_hw
        recordings: list[DatRecording | str] = []
        samples: list[Sample] = []
        for bbox_path, dat_path in pairs:
            try:
                boxes = load_boxes(bbox_path)
            except (OSError, ValueError, EOFError) as e:
                self.count_skipped("corrupt")
                log.warning("%s: skipping recording with unreadable boxes %s: %s", self.name, bbox_path, e)
                continue
            try:
                rec: DatRecording | str = DatRecording(dat_path)
            except (OSError, ValueError) as e:  # each of its samples is skipped and counted when read
                log.warning("%s: unreadable DAT file %s: %s", self.name, dat_path, e)
                rec = dat_path
            boxes = crop_to_frame(boxes, H, W)
            boxes = prophesee_filter(boxes, self.skip_us, self.min_box_diag, self.min_box_side)
            if split == "train":
                boxes = rvt_train_filter(boxes, W)
            boxes = boxes[boxes["class_id"] < len(self.classes)]
            if not len(boxes):
                continue
            boxes = boxes[np.argsort(boxes["t"], kind="stable")]
            ri = len(recordings)
            recordings.append(rec)
            times, starts = np.unique(boxes["t"], return_index=True)
            ends = np.append(starts[1:], len(boxes))
            for t, a, b in zip(times, starts, ends):
                bx = boxes[a:b]
                xyxy = np.stack([bx["x"], bx["y"], bx["x"] + bx["w"], bx["y"] + bx["h"]], axis=1).astype(np.float32)
                samples.append(Sample(ri, int(t), xyxy, bx["class_id"].astype(np.int64)))
        self._recordings[split], self._samples[split] = recordings, samples

    def samples(self, split: str) -> list[Sample]:
        if split not in self._samples:
            self._build(split)
        return self._samples[split]

    def coco_gt(self, split: str) -> Any:
        """Filtered ground truth of ``split`` as a pycocotools ``COCO`` in the sensor frame (``[x, y,
        w, h]``, category ids :attr:`label_to_category_id`, one image per sample, id = its index)."""
        if split not in self._coco:
            H, W = self.sensor_hw
            images, anns = [], []
            for i, s in enumerate(self.samples(split)):
                images.append({"id": i, "width": W, "height": H, "file_name": f"t{s.t}", "rec": s.rec})
                for b, lab in zip(s.boxes.tolist(), s.labels.tolist()):
                    w, h = b[2] - b[0], b[3] - b[1]
                    anns.append({"id": len(anns) + 1, "image_id": i, "category_id": self.label_to_category_id[lab],
                                 "bbox": [b[0], b[1], w, h], "area": w * h, "iscrowd": 0})
            coco = COCO()
            coco.dataset = {"images": images, "annotations": anns,
                            "categories": [{"id": c, "name": n} for c, n in zip(self.label_to_category_id,
                                                                                self.classes)]}
            with contextlib.redirect_stdout(io.StringIO()):
                coco.createIndex()
            self._coco[split] = coco
        return self._coco[split]

    def filter_predictions(self, boxes: torch.Tensor, scores: torch.Tensor, labels: torch.Tensor
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Prophesee's size filter on predictions: xyxy ``(n, 4)`` in the sensor frame -> those with a
        diagonal >= 30 px and both sides >= 10 px (with their scores and labels)."""
        w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
        keep = (w * w + h * h >= self.min_box_diag ** 2) & (w >= self.min_box_side) & (h >= self.min_box_side)
        return boxes[keep], scores[keep], labels[keep]

    # ---- datasets ---------------------------------------------------------------------------
    def make_dataset(self, split: str, resolution: Any = None) -> Gen1Dataset:
        res = self.resolution if resolution is None else (
            resolution if isinstance(resolution, tuple) else parse_resolution(resolution))
        t, scale, padded = self.geometry(res)
        samples = self.samples(split)
        return Gen1Dataset(self._recordings[split], samples, self.sensor_hw, t, self.window_us, scale, padded,
                           self.log_counts, self.spiking if self.tokens == "spiking" else None)

    def train_dataset(self) -> Gen1Dataset:
        return self.make_dataset("train")

    def val_dataset(self, resolution: Any = None) -> Gen1Dataset:
        return self.make_dataset("val", resolution)

    def test_dataset(self, resolution: Any = None) -> Gen1Dataset:
        return self.make_dataset("test", resolution)

    def eval_split_dataloader(self, split: str, resolution: Any = None):
        """Loader of ``split`` (``val`` / ``test``) at ``resolution``, in a fixed order."""
        return self._loader(self.make_dataset(split, resolution), shuffle=False)

    def preflight(self) -> dict[str, int]:
        sizes = {s: len(self.samples(s)) for s in self.splits}
        for split in ("train", "val"):
            if sizes[split] == 0:
                raise DataRootError(f"{self.name}: no {split} samples under {self.split_dir(split)!r} after the "
                                    f"Prophesee filters; expected layout: {self.expected_layout}")
        return sizes

"""UCF101 action recognition (101 classes), read offline and decoded with decord.

Layout: ``<root>/UCF-101/<Class>/v_*.avi`` and ``<root>/ucfTrainTestlist/{classInd.txt,
trainlist0k.txt, testlist0k.txt}`` for the three official folds (``fold`` option, 1-3).
``classInd.txt`` lines are ``"<1-based index> <Class>"``; labels are that index - 1. Train lists
carry the label, test lists do not (taken from the class folder).

Clips ``(3, T, S, S)``, ``T = frames`` sampled every ``frame_stride`` frames (indices past the end
of a short video repeat its last frame):

* train: one clip at a random start, RandomResizedCrop (same crop for all frames) + flip;
* val: the centre clip, short-side resize + centre crop (the contract's ``(B, 3, T, S, S)``);
* test with ``eval_clips = K > 1``: ``K`` clips at evenly spaced starts, stacked
  ``(K, 3, T, S, S)`` per video, so batches are ``(B, K, 3, T, S, S)``. Note for the Task: for
  video-level accuracy fold K into the batch, average the K clip logits per video, then argmax.
  With ``eval_clips = 1`` (default) the test split is evaluated on the centre clip (clip-level
  accuracy of the centre clip), which keeps the contract's 5-D batches.

``resolution`` is ``S`` or ``"TxS"`` (frames x side; overrides ``frames``). Listed videos that do not
exist are dropped before training and counted as ``missing`` (all of a list missing, e.g. videos laid
out flat without class folders, is a ``DataRootError`` naming the expected layout; see ``base.py``).
Undecodable videos (no frame decodes, or the container cannot be opened) are skipped and counted as
``corrupt`` (``corrupt.py``). A truncated AVI, one whose ``avih`` header declares more frames than
decord can decode (decord and OpenCV both stop at the cut and agree on the count), is used: the clip
is sampled from the decodable frames (``n`` below is their count), logged once per file, and counted
apart as ``truncated`` (``results.json`` ``skipped_samples.truncated``, per split).
"""
from __future__ import annotations

import logging
import os
import random
import struct
from typing import Any, Callable, ClassVar

import decord
import numpy as np
import torch
import torchvision.transforms.v2 as v2

from ..base import BenchDataModule, DataRootError, DataSource
from ..corrupt import SkippingDataset, TruncatedSample
from ..image_common import IMAGENET_MEAN, IMAGENET_STD, require_dir, require_file
from ..registry import register_datamodule

__all__ = ["UCF101DataModule", "VideoClipDataset", "clip_indices", "avi_declared_frames"]

log = logging.getLogger(__name__)


def avi_declared_frames(path: str) -> int | None:
    """``dwTotalFrames`` of an AVI's main header (``avih``), or None for other containers."""
    with open(path, "rb") as f:
        head = f.read(1024)
    i = head.find(b"avih")
    if not head.startswith(b"RIFF") or i < 0 or len(head) < i + 28:
        return None
    return struct.unpack("<I", head[i + 24:i + 28])[0]


def clip_indices(n_frames: int, frames: int, stride: int, start: int) -> list[int]:
    """``frames`` indices from ``start`` every ``stride``, clamped to the last frame."""
    return [min(start + i * stride, n_frames - 1) for i in range(frames)]


def clip_starts(n_frames: int, frames: int, stride: int, k: int) -> list[int]:
    """``k`` evenly spaced starts (``k = 1``: the centre clip)."""
    span = (frames - 1) * stride + 1
    last = max(n_frames - span, 0)
    if k == 1:
        return [last // 2]
    return [round(j * last / (k - 1)) for j in range(k)]


class VideoClipDataset(SkippingDataset):
    """``(path, label)`` list -> clip ``(3, T, S, S)`` (or ``(K, 3, T, S, S)`` with ``clips=K > 1``)."""

    def __init__(self, samples: list[tuple[str, int]], frames: int, stride: int, size: int, train: bool,
                 clips: int = 1, crop_ratio: float = 0.875) -> None:
        shape = (3, frames, size, size)
        self.stacked = not train and clips > 1
        super().__init__((clips, *shape) if self.stacked else shape)
        self.samples, self.frames, self.stride, self.train, self.clips = samples, frames, stride, train, clips
        self.targets = [t for _, t in samples]
        self._truncated_reported: set[int] = set()
        norm = [v2.ToDtype(torch.float32, scale=True), v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)]
        self.transform: Callable = v2.Compose(
            [v2.RandomResizedCrop(size, scale=(0.35, 1.0), antialias=True), v2.RandomHorizontalFlip(), *norm]
            if train else [v2.Resize(int(round(size / crop_ratio)), antialias=True), v2.CenterCrop(size), *norm])

    def __len__(self) -> int:
        return len(self.samples)

    def describe(self, index: int) -> str:
        return self.samples[index][0]

    def load(self, index: int):
        path, label = self.samples[index]
        vr = decord.VideoReader(path, num_threads=1)
        n = len(vr)  # the decodable frames (a truncated AVI opens with those before the cut)
        if n == 0:
            raise ValueError("no decodable frame")
        declared = avi_declared_frames(path) if path.lower().endswith(".avi") else None
        truncated = declared is not None and n < declared
        if truncated and index not in self._truncated_reported:
            self._truncated_reported.add(index)
            log.warning("truncated video %s: %d of the %d frames its AVI header declares decode; the clip is "
                        "sampled from those", path, n, declared)
        if self.train:
            starts = [random.randint(0, max(n - ((self.frames - 1) * self.stride + 1), 0))]
        else:
            starts = clip_starts(n, self.frames, self.stride, self.clips)
        out = []
        for s in starts:
            raw = vr.get_batch(clip_indices(n, self.frames, self.stride, s)).asnumpy()  # (T, H, W, 3) uint8
            clip = self.transform(torch.from_numpy(np.ascontiguousarray(raw)).permute(0, 3, 1, 2))  # (T, 3, S, S)
            out.append(clip.permute(1, 0, 2, 3).contiguous())  # (3, T, S, S)
        sample = (torch.stack(out) if self.stacked else out[0]), label
        return TruncatedSample(sample) if truncated else sample


@register_datamodule("ucf101")
class UCF101DataModule(BenchDataModule):
    source = DataSource(
        publisher="UCF Center for Research in Computer Vision (Soomro, Zamir and Shah 2012)",
        url="https://www.crcv.ucf.edu/data/UCF101.php",
        licence="not stated on any publisher page we could read",
        size="UCF101.rar (6.5 GB) and UCF101TrainTestSplits-RecognitionTask.zip; 13,320 clips, 101 classes, 3 folds",
        writer=("none: unpack both archives into the root (``torchvision.datasets.UCF101(<root>/UCF-101, "
                "<root>/ucfTrainTestlist, ...)`` reads the same files; it does not download)"),
    )
    modality: ClassVar[str] = "video"
    in_chans: ClassVar[int] = 3
    mean: ClassVar[tuple[float, ...]] = IMAGENET_MEAN
    std: ClassVar[tuple[float, ...]] = IMAGENET_STD
    needs_data_root: ClassVar[bool] = True
    expected_layout: ClassVar[str] = ("<root>/UCF-101/<Class>/v_*.avi and "
                                      "<root>/ucfTrainTestlist/{classInd.txt,trainlist0k.txt,testlist0k.txt}")
    default_resolution: ClassVar[int | str] = 224
    patch_size: ClassVar[int] = 16
    tubelet: ClassVar[int] = 2

    def __init__(self, fold: int = 1, frames: int = 16, frame_stride: int = 4, eval_clips: int = 1,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if fold not in (1, 2, 3):
            raise ValueError(f"ucf101: fold must be 1, 2 or 3, got {fold!r}")
        self.fold, self.frames, self.frame_stride, self.eval_clips = fold, frames, frame_stride, eval_clips
        self.data_root = os.path.expanduser(str(self.data_root))
        self._samples: dict[str, list[tuple[str, int]]] = {}
        self.validate()

    def validate(self) -> None:
        lay = self.expected_layout
        require_dir(self.data_root, self.name, lay)
        self.video_dir = require_dir(os.path.join(self.data_root, "UCF-101"), self.name, lay)
        lists = require_dir(os.path.join(self.data_root, "ucfTrainTestlist"), self.name, lay)
        self.list_files = {"train": os.path.join(lists, f"trainlist0{self.fold}.txt"),
                           "test": os.path.join(lists, f"testlist0{self.fold}.txt")}
        for p in [os.path.join(lists, "classInd.txt"), *self.list_files.values()]:
            require_file(p, self.name, lay)
        self.classes: list[str] = []
        with open(os.path.join(lists, "classInd.txt")) as fh:
            rows = [ln.split() for ln in fh if ln.strip()]
        for idx, name in sorted((int(i), n) for i, n in rows):
            if idx != len(self.classes) + 1:
                raise DataRootError(f"ucf101: {os.path.join(lists, 'classInd.txt')!r} is not numbered 1..N")
            self.classes.append(name)
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    # ---- geometry ---------------------------------------------------------------------
    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def frames_and_size(self, resolution: tuple[int, ...] | None = None) -> tuple[int, int]:
        res = resolution or self.resolution
        return (self.frames, res[0]) if len(res) == 1 else (res[0], res[1])

    def input_shape(self, resolution: tuple[int, ...] | None = None) -> tuple[int, ...]:
        t, s = self.frames_and_size(resolution)
        return (self.in_chans, t, s, s)

    # ---- data -------------------------------------------------------------------------
    def samples(self, split: str) -> list[tuple[str, int]]:
        key = "train" if split == "train" else "test"
        if key not in self._samples:
            out = []
            with open(self.list_files[key]) as fh:
                for ln in fh:
                    parts = ln.split()
                    if not parts:
                        continue
                    rel = parts[0].replace("\\", "/")
                    cls = rel.split("/")[0]
                    if cls not in self.class_to_idx:
                        raise DataRootError(f"ucf101: {self.list_files[key]!r} names class {cls!r} not in classInd.txt")
                    out.append((os.path.join(self.video_dir, *rel.split("/")), self.class_to_idx[cls]))
            if not out:
                raise DataRootError(f"ucf101: {self.list_files[key]!r} is empty; expected layout: {self.expected_layout}")
            flat = os.path.join(self.video_dir, os.path.basename(out[0][0]))
            hint = (f"the videos lie directly in {self.video_dir!r} (e.g. {os.path.basename(flat)!r}) but must be "
                    f"in one folder per class; " if not os.path.isfile(out[0][0]) and os.path.isfile(flat) else "")
            self._samples[key] = self.drop_missing(out, key, self.list_files[key], hint)
        return self._samples[key]

    def train_dataset(self):
        t, s = self.frames_and_size()
        return VideoClipDataset(self.samples("train"), t, self.frame_stride, s, train=True)

    def val_dataset(self, resolution: tuple[int, ...] | None = None):
        t, s = self.frames_and_size(resolution)
        return VideoClipDataset(self.samples("test"), t, self.frame_stride, s, train=False, clips=1)

    def test_dataset(self, resolution: tuple[int, ...] | None = None):
        t, s = self.frames_and_size(resolution)
        return VideoClipDataset(self.samples("test"), t, self.frame_stride, s, train=False, clips=self.eval_clips)

"""Fashion-MNIST and MNIST (10 classes, 28x28 grayscale), read offline from the IDX files.

Layout: ``<root>/{train,t10k}-{images-idx3,labels-idx1}-ubyte`` (each file gzipped, ``.gz``, or not).
``fashion-mnist`` reads ``/usr/share/datasets/fashion-mnist`` when no ``--data-root`` is given: where the
Debian package ``dataset-fashion-mnist`` installs the four files (``apt-get install dataset-fashion-mnist``;
Xiao, Rasul and Vollgraf, "Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine Learning
Algorithms", arXiv:1708.07747, MIT licence). ``mnist`` (LeCun et al., "Gradient-based learning applied to
document recognition", Proc. IEEE 1998) reads ``--data-root``. Parsing: :mod:`.idx` (our own numpy
reader; why not torchvision's is said there).

Splits:

* ``train``: the training file (60,000 images) less the validation hold-out; with ``train_per_class`` N > 0,
  a fixed subset of N images per class of it (drawn with ``split_seed``, the same for every run);
* ``val``: a fixed hold-out of the training file, ``val_per_class`` images of each class (default 500,
  so 5,000 images), drawn with ``split_seed`` (default 0) and independent of the run's ``--seed``, so
  every run validates on the same images; model selection and the analyses read it;
* ``test``: ``t10k`` (10,000 images), touched only by the final evaluation (``trainer.test``).

Geometry: native 28 px with patch 4, a 7x7 token grid (the small-image ViT setting; CIFAR's is
32 px / 4 = 8x8). ``--resolution S`` resamples every image to ``S x S`` (bilinear, antialiased), so
the extrapolation analysis sees the same images at ``S = 28, 40, 56, 84, 112``. One input channel
(``in_chans = 1``), standardised with the training file's pixel mean and std (Fashion-MNIST 0.2860 /
0.3530, MNIST 0.1307 / 0.3081, of the 60,000 training images scaled to [0, 1]). ``--data-option
channels=3`` repeats the grey image over three channels (``in_chans = 3``, the same mean / std in each),
the input of a pretrained RGB model: with ``--resolution 224``, ``bench analyze --model
timm:vit_small_patch14_dinov2 --dataset fashion-mnist`` sees the images upsampled to the model's 224 px.

Augmentation (train only): ``RandomResizedCrop(scale 0.7-1, ratio 0.9-1.1)``, plus a horizontal flip
for Fashion-MNIST (garments are left-right symmetric classes; digits are not, so MNIST is not flipped).
Eval: resize to the resolution, no crop.

Integrity: the files' content SHA-256 (after decompression, so the same for ``.gz`` and plain copies)
is compared with :data:`FASHION_MNIST_SHA256` (those of the Debian package's files, which hold the
upstream content); a match is recorded in ``verified[file] = True``, a mismatch logs a warning and the
file is still read (checked, not required; as ``cifar100``). MNIST: no reference content hash is
recorded (``verified`` stays empty). A file that cannot be parsed (wrong magic number, truncated, image
and label counts that disagree, labels outside 0-9, a missing file) is a :class:`DataRootError`: one
line, exit code 2, raised before a run directory exists.
"""
from __future__ import annotations

import hashlib
import logging
import os
from typing import Any, Callable, ClassVar

import numpy as np
import torch
import torchvision.transforms.v2 as v2
import torchvision.transforms.v2.functional as F
from torch.utils.data import Dataset

from pebench.core.errors import ConfigError

from ..base import DataRootError, DataSource, int_option
from ..corrupt import SkippingDataset
from ..image_common import ImageDataModule, image_hw, require_dir
from ..registry import register_datamodule
from .idx import idx_path, raw_bytes, read_idx_bytes

__all__ = ["MNISTDataModule", "FashionMNISTDataModule", "IDX_FILES", "FASHION_MNIST_SHA256", "FASHION_MNIST_DEBIAN_GZ_SHA256",
           "FASHION_MNIST_CLASSES", "idx_arrays", "GrayArrayDataset", "GrayPipeline"]

log = logging.getLogger(__name__)

#: split -> (images file, labels file), without the optional ``.gz``
IDX_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
             "t10k": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
#: SHA-256 of each file's decompressed content, as installed by Debian's dataset-fashion-mnist
#: (0.0~git20200523.55506a9-1); verified against that package's four files
FASHION_MNIST_SHA256 = {
    "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
}
#: SHA-256 of the four files as the Debian package installs them (gzipped; re-compressed by the packager, so
#: their md5 differs from the upstream archives' that torchvision checks, while the content is the same)
FASHION_MNIST_DEBIAN_GZ_SHA256 = {
    "train-images-idx3-ubyte.gz": "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",
    "train-labels-idx1-ubyte.gz": "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",
    "t10k-images-idx3-ubyte.gz": "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
    "t10k-labels-idx1-ubyte.gz": "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05",
}
#: Fashion-MNIST's class names, label order (Xiao et al. 2017, Table 1)
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
                         "Bag", "Ankle boot")

_LAYOUT = "<root>/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] (the four IDX files)"


def idx_arrays(folder: str, split: str, what: str) -> tuple[np.ndarray, np.ndarray, dict[str, str]]:
    """``split`` in {"train", "t10k"} -> ``(images (N, 28, 28) uint8, labels (N,) int64, {file stem: content
    SHA-256})``; :class:`DataRootError` (one line) for a missing or unreadable file or disagreeing counts.
    The last few results are kept (keyed by the files' paths, sizes and modification times), so several
    datamodules over one root decompress it once."""
    stems = IDX_FILES[split]
    paths = [idx_path(folder, s) for s in stems]
    for stem, path in zip(stems, paths):
        if path is None:
            raise DataRootError(f"{what}: expected file {os.path.join(folder, stem)!r} (or .gz) not found; "
                                f"expected layout: {_LAYOUT}")
    key = tuple((os.path.abspath(p), os.stat(p).st_size, os.stat(p).st_mtime_ns) for p in paths)
    if key not in _CACHE:
        _CACHE[key] = _parse(stems, paths, what)
        while len(_CACHE) > 4:
            _CACHE.pop(next(iter(_CACHE)))
    images, labels, digests = _CACHE[key]
    return images, labels, dict(digests)


#: (path, size, mtime) of the two files -> their parsed arrays and digests (oldest first)
_CACHE: dict[tuple, tuple[np.ndarray, np.ndarray, dict[str, str]]] = {}


def _parse(stems: tuple[str, str], paths: list[str], what: str) -> tuple[np.ndarray, np.ndarray, dict[str, str]]:
    data = [raw_bytes(p) for p in paths]
    digests = {stem: hashlib.sha256(d).hexdigest() for stem, d in zip(stems, data)}
    images = read_idx_bytes(data[0], repr(paths[0]), ndim=3)
    labels = read_idx_bytes(data[1], repr(paths[1]), ndim=1)
    if images.dtype != np.uint8 or labels.dtype != np.uint8:
        raise DataRootError(f"{what}: {paths[0]!r} / {paths[1]!r} hold {images.dtype} / {labels.dtype} items, "
                            f"expected unsigned bytes (IDX type 0x08)")
    if len(images) != len(labels):
        raise DataRootError(f"{what}: {paths[0]!r} holds {len(images)} images but {paths[1]!r} "
                            f"{len(labels)} labels")
    if labels.size and int(labels.max()) > 9:
        raise DataRootError(f"{what}: {paths[1]!r} holds label {int(labels.max())}, expected 0-9")
    images.flags.writeable = False  # shared by every datamodule reading these files
    labels = labels.astype(np.int64)
    labels.flags.writeable = False
    return images, labels, digests


class GrayArrayDataset(SkippingDataset):
    """``(N, H, W)`` uint8 images + labels -> ``(float (C, S, S), label)`` through ``transform`` (which makes
    the ``channels`` = C, 1 or 3). With ``pipeline`` (a :class:`GrayPipeline`, as the IDX datamodules pass),
    :meth:`load` takes the fast path that gives the same samples (see there); ``transform`` stays the reference."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, transform: Callable, hw: tuple[int, int],
                 channels: int = 1, pipeline: "GrayPipeline | None" = None) -> None:
        super().__init__((channels, *hw))
        self.images, self.transform, self.pipeline = images, transform, pipeline
        self.targets = [int(t) for t in labels]

    def __len__(self) -> int:
        return len(self.targets)

    def load(self, index: int) -> tuple[torch.Tensor, int]:
        if self.pipeline is not None:
            return self.pipeline.sample(self.images, index), self.targets[index]
        return self.load_reference(index)

    def load_reference(self, index: int) -> tuple[torch.Tensor, int]:
        """The per-sample path: the image through the v2 ``transform`` (what the fast path must equal)."""
        img = torch.from_numpy(np.array(self.images[index])).unsqueeze(0)  # (1, 28, 28) uint8, a copy
        return self.transform(img), self.targets[index]


class GrayPipeline:
    """The same samples as :meth:`_IDXDataModule.transform`'s v2 pipeline, at a fraction of its cost (the v2
    ``Compose`` of ``ToImage`` + resize + ``Grayscale`` + ``ToDtype`` + ``Normalize`` cost ~0.6 ms per 28 px image,
    mostly per-call overhead).

    * Eval (``train=False``, deterministic): on first use the whole split is resized with the same kernel
      (``F.resize``, bilinear, ``antialias=True``, on uint8, batched over images: each image's output is
      bit-identical to its own resize), then scaled and standardised as one tensor op (elementwise, so
      bit-identical too); a sample is an index into that tensor (repeated over 3 channels for ``channels=3``;
      repeating commutes with the elementwise ops). Over :data:`FLOAT_BYTES` of float storage, the resized uint8
      images are kept instead and scaled per sample; over :data:`UINT8_BYTES` of those, nothing is precomputed.
      Per sample, scaling and standardising is a lookup in a 256-entry table of the same ops' results.
    * Train (``RandomResizedCrop`` and, where set, a horizontal flip: random per sample): per sample as before,
      the same random draws in the same order (``make_params`` then ``torch.rand(1) < 0.5``) and the same kernels,
      called directly on the uint8 tensor instead of through ``Compose``.

    ``tests/datamodules/test_mnist_fast_pipeline.py`` checks both against the v2 ``transform`` with ``torch.equal``."""

    FLOAT_BYTES: ClassVar[int] = 512 << 20
    UINT8_BYTES: ClassVar[int] = 2 << 30

    def __init__(self, hw: tuple[int, int], mean: tuple[float, ...], std: tuple[float, ...], channels: int,
                 train: bool, rrc: v2.RandomResizedCrop | None = None, flip: bool = False) -> None:
        if len(set(mean)) != 1 or len(set(std)) != 1:
            raise ValueError(f"GrayPipeline: one mean / std repeated over the channels expected, got {mean} / {std}")
        # standardised on the one grey channel, then repeated (the v2 path repeats first: the same values)
        self.hw, self.mean, self.std, self.channels = hw, [mean[0]], [std[0]], channels
        self.train, self.rrc, self.flip = train, rrc, flip
        self._src: np.ndarray | None = None
        self._u8: torch.Tensor | None = None  # (N, 1, 28, 28) uint8 (train) or (N, 1, S, S) resized (eval)
        self._float: torch.Tensor | None = None  # (N, 1, S, S) float32, standardised (eval)
        # per-sample standardisation as a lookup: each pixel's value depends on its byte alone (elementwise ops)
        self._lut = self._normalise(torch.arange(256, dtype=torch.uint8).view(1, 1, 256))[0, 0]

    def _normalise(self, img: torch.Tensor) -> torch.Tensor:
        """uint8 (..., 1, S, S) -> float32, scaled to [0, 1] and standardised (elementwise)."""
        return F.normalize(F.to_dtype(img, torch.float32, scale=True), self.mean, self.std)

    def _expand(self, x: torch.Tensor) -> torch.Tensor:
        return x.repeat(3, 1, 1) if self.channels == 3 else x

    def _prepare(self, images: np.ndarray) -> None:
        self._src = images
        src = torch.from_numpy(np.array(images)).unsqueeze(1)  # (N, 1, 28, 28) uint8, writable copy
        self._u8, self._float = src, None
        if self.train:
            return
        n, (h, w) = len(images), self.hw
        if n * h * w > self.UINT8_BYTES:
            self._u8 = None  # too big to hold: per-sample resize
            return
        chunk = max(1, (64 << 20) // max(1, h * w))
        out = torch.empty((n, 1, h, w), dtype=torch.uint8)
        for i in range(0, n, chunk):
            out[i:i + chunk] = F.resize(src[i:i + chunk], list(self.hw), interpolation=v2.InterpolationMode.BILINEAR,
                                        antialias=True)
        self._u8 = out
        if n * h * w * 4 <= self.FLOAT_BYTES:
            self._float = self._normalise(out)

    def sample(self, images: np.ndarray, index: int) -> torch.Tensor:
        if self._src is not images:
            self._prepare(images)
        if self._float is not None:
            return self._expand(self._float[index])
        if self.train:
            assert self.rrc is not None and self._u8 is not None
            img = self._u8[index]
            params = self.rrc.make_params([img])
            img = F.resized_crop(img, **params, size=list(self.hw), interpolation=self.rrc.interpolation,
                                 antialias=True)
            if self.flip and not bool(torch.rand(1) >= 0.5):
                img = F.horizontal_flip(img)
        elif self._u8 is not None:
            img = self._u8[index]
        else:
            img = F.resize(torch.from_numpy(np.array(images[index])).unsqueeze(0), list(self.hw),
                           interpolation=v2.InterpolationMode.BILINEAR, antialias=True)
        return self._expand(self._lut[img.long()])


class _IDXDataModule(ImageDataModule):
    """Base of ``mnist`` / ``fashion-mnist``: the IDX files, a seeded hold-out, 28 px / patch 4."""

    expected_layout: ClassVar[str] = _LAYOUT
    in_chans: ClassVar[int] = 1
    n_classes: ClassVar[int] = 10
    default_resolution: ClassVar[int | str] = 28
    patch_size: ClassVar[int] = 4
    #: t10k is a held-out test split: ``bench run`` evaluates it after training (test/* metrics, primary test/acc1)
    has_test_split: ClassVar[bool] = True
    rrc_scale: ClassVar[tuple[float, float]] = (0.7, 1.0)
    crop_ratio: ClassVar[float] = 1.0
    flip: ClassVar[bool] = False
    #: content SHA-256 per file stem (empty: nothing to verify against)
    sha256: ClassVar[dict[str, str]] = {}
    option_help: ClassVar[dict[str, str]] = {
        "split_seed": "seed of the validation hold-out (independent of --seed)",
        "val_per_class": "training images per class held out for validation (t10k is the test split)",
        "train_per_class": "training images per class (a fixed subset drawn with split_seed; 0: all not held out)",
        "channels": "1 (grey), or 3: the grey image repeated over three channels, for pretrained RGB models"}

    def __init__(self, split_seed: int = 0, val_per_class: int = 500, train_per_class: int = 0, channels: int = 1,
                 **kwargs: Any) -> None:
        self.split_seed = int_option(self.name, "split_seed", split_seed, minimum=0)
        self.val_per_class = int_option(self.name, "val_per_class", val_per_class)
        self.train_per_class = int_option(self.name, "train_per_class", train_per_class, minimum=0)
        self.in_chans = int_option(self.name, "channels", channels)  # type: ignore[misc]  # per instance
        if self.in_chans not in (1, 3):
            raise ConfigError(f"{self.name}: data option channels must be 1 or 3, got {channels!r}")
        super().__init__(**kwargs)

    def validate(self) -> None:
        require_dir(self.data_root, self.name, self.expected_layout)
        for stems in IDX_FILES.values():
            for stem in stems:
                if idx_path(self.data_root, stem) is None:
                    raise DataRootError(f"{self.name}: expected file {os.path.join(self.data_root, stem)!r} "
                                        f"(or .gz) not found; expected layout: {self.expected_layout}")
        self.verified: dict[str, bool] = {}
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._split: tuple[np.ndarray, np.ndarray] | None = None

    def arrays(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        """``split`` in {"train", "t10k"} -> ``(images (N, 28, 28) uint8, labels (N,) int64)`` (cached); the
        files' content hashes are checked against :attr:`sha256` on the way (see the module docstring)."""
        if split not in self._arrays:
            images, labels, digests = idx_arrays(self.data_root, split, self.name)
            for stem, digest in digests.items():
                if stem in self.sha256:
                    self.verified[stem] = digest == self.sha256[stem]
                    if not self.verified[stem]:
                        log.warning("%s: %s does not match the recorded SHA-256 of the original content; reading "
                                    "it anyway", self.name, idx_path(self.data_root, stem))
            self._arrays[split] = (images, labels)
        return self._arrays[split]

    def split_indices(self) -> tuple[np.ndarray, np.ndarray]:
        """-> (train indices, val indices) into the training file: per class, ``val_per_class`` indices
        drawn with ``split_seed`` go to val, the rest to train (both sorted). ``train_per_class`` > 0 keeps
        only the next that many of the same per-class permutation for train (a fixed, class-balanced subset; the
        hold-out is the same whatever the subset size)."""
        if self._split is None:
            _, labels = self.arrays("train")
            rng = np.random.default_rng(self.split_seed)
            val, train = [], []
            v, t = self.val_per_class, self.train_per_class
            for c in range(self.n_classes):
                idx = np.flatnonzero(labels == c)
                if len(idx) <= v:
                    raise DataRootError(f"{self.name}: class {c} has {len(idx)} training images, not more than "
                                        f"val_per_class={v}; lower val_per_class")
                if len(idx) - v < t:
                    raise DataRootError(f"{self.name}: class {c} has {len(idx) - v} training images besides the "
                                        f"hold-out, fewer than train_per_class={t}; lower train_per_class")
                perm = rng.permutation(idx)
                val.append(perm[:v])
                train.append(perm[v:v + t])
            val_idx = np.sort(np.concatenate(val))
            if t:
                self._split = (np.sort(np.concatenate(train)), val_idx)
            else:
                train_mask = np.ones(len(labels), dtype=bool)
                train_mask[val_idx] = False
                self._split = (np.flatnonzero(train_mask), val_idx)
        return self._split

    def transform(self, hw: tuple[int, int], train: bool) -> Callable:
        mean, std = self.normalisation()
        norm = [v2.ToDtype(torch.float32, scale=True), v2.Normalize(list(mean), list(std))]
        if self.in_chans == 3:  # the grey channel repeated (after any resize: one channel to resample)
            norm.insert(0, v2.Grayscale(num_output_channels=3))
        if train:
            aug = [v2.RandomResizedCrop(hw, scale=self.rrc_scale, ratio=(0.9, 1.1), antialias=True)]
            aug += [v2.RandomHorizontalFlip()] if self.flip else []
            return v2.Compose([v2.ToImage(), *aug, *norm])
        return v2.Compose([v2.ToImage(), v2.Resize(hw, antialias=True), *norm])

    def pipeline(self, hw: tuple[int, int], train: bool) -> GrayPipeline:
        """The fast equivalent of :meth:`transform` (:class:`GrayPipeline`; the same samples)."""
        mean, std = self.normalisation()
        rrc = v2.RandomResizedCrop(hw, scale=self.rrc_scale, ratio=(0.9, 1.1), antialias=True) if train else None
        return GrayPipeline(hw, tuple(mean), tuple(std), self.in_chans, train, rrc, self.flip)

    def make_dataset(self, split: str, train: bool, resolution: tuple[int, ...] | None = None) -> Dataset:
        hw = image_hw(resolution or self.resolution)
        if split == "test":
            images, labels = self.arrays("t10k")
        else:
            images, labels = self.arrays("train")
            pick = self.split_indices()[0 if split == "train" else 1]
            images, labels = images[pick], labels[pick]
        return GrayArrayDataset(images, labels, self.transform(hw, train), hw, self.in_chans,
                                self.pipeline(hw, train))

    def test_dataset(self, resolution: tuple[int, ...] | None = None) -> Dataset:
        return self.make_dataset("test", train=False, resolution=resolution)

    def preflight(self) -> dict[str, int]:
        """The base check (train and hold-out) and the ``t10k`` files too, so a damaged test file also
        fails before the run directory exists."""
        sizes = super().preflight()
        sizes["test"] = len(self.test_dataset())
        return sizes


@register_datamodule("mnist")
class MNISTDataModule(_IDXDataModule):
    source = DataSource(
        publisher="Yann LeCun, Corinna Cortes and Christopher J. C. Burges (LeCun et al. 1998)",
        url="http://yann.lecun.com/exdb/mnist/",
        licence=("CC BY-SA 3.0, copyright Yann LeCun and Corinna Cortes, as the PyMVPA data page states "
                 "(pymvpa.org/datadb/mnist.html); we could read no licence on the publisher's page"),
        size="four ``.gz`` IDX files (11 MB); 60,000 training and 10,000 test images of 28 x 28 px, 10 classes",
        writer="``torchvision.datasets.MNIST(root, download=True)``, then ``--data-root <root>/MNIST/raw``",
    )
    mean: ClassVar[float] = 0.1307
    std: ClassVar[float] = 0.3081


@register_datamodule("fashion-mnist")
class FashionMNISTDataModule(_IDXDataModule):
    source = DataSource(
        publisher="Zalando Research (Xiao, Rasul and Vollgraf 2017)",
        url="https://github.com/zalandoresearch/fashion-mnist",
        licence="MIT (the repository's LICENSE; Debian's dataset-fashion-mnist calls it Expat, the same licence)",
        size="four ``.gz`` IDX files (30 MB); 60,000 training and 10,000 test images of 28 x 28 px, 10 classes",
        writer=("``apt-get install dataset-fashion-mnist`` (the default root), or "
                "``torchvision.datasets.FashionMNIST(root, download=True)``, then ``--data-root "
                "<root>/FashionMNIST/raw``"),
    )
    #: where Debian's dataset-fashion-mnist installs the files; read when no --data-root is given
    DEFAULT_ROOT: ClassVar[str] = "/usr/share/datasets/fashion-mnist"
    expected_layout: ClassVar[str] = (f"{_LAYOUT}; default root {DEFAULT_ROOT} "
                                      "(Debian package dataset-fashion-mnist)")
    mean: ClassVar[float] = 0.2860
    std: ClassVar[float] = 0.3530
    flip: ClassVar[bool] = True
    sha256: ClassVar[dict[str, str]] = FASHION_MNIST_SHA256
    classes: ClassVar[tuple[str, ...]] = FASHION_MNIST_CLASSES

    def __init__(self, data_root: str | None = None, **kwargs: Any) -> None:
        super().__init__(data_root=data_root or self.DEFAULT_ROOT, **kwargs)

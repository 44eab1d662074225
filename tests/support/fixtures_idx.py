"""IDX files (the MNIST / Fashion-MNIST format) written from the format's definition, independent of the reader
under test: a big-endian header of two zero bytes, the element type code (0x08 = ubyte), the number of
dimensions, then each dimension as a 4-byte big-endian integer; then the data, big-endian."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from pebench.datamodules.images.mnist import IDX_FILES

__all__ = ["idx_bytes", "write_idx_root"]


def idx_bytes(arr: np.ndarray, type_code: int = 0x08, magic: int | None = None) -> bytes:
    """``arr`` as one IDX file's bytes (``magic`` overrides the header's first word: a damaged file)."""
    head = (magic if magic is not None else (type_code << 8) | arr.ndim).to_bytes(4, "big")
    head += b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    return head + arr.astype(arr.dtype.newbyteorder(">")).tobytes()


def write_idx_root(root: Path, n_train: int = 30, n_test: int = 20, gz: bool = True, seed: int = 0) -> Path:
    """The four files of a dataset root: random 28 x 28 ubyte images and labels 0-9 in turn, gzipped or not."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        for stem, arr in zip(IDX_FILES[split], (images, labels)):
            data = idx_bytes(arr)
            (root / (stem + ".gz" if gz else stem)).write_bytes(gzip.compress(data) if gz else data)
    return root

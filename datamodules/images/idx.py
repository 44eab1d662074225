"""A reader of the IDX format (the MNIST family's files), numpy only.

IDX (LeCun, Cortes and Burges, "The MNIST database of handwritten digits"): a big-endian header

* magic number, 4 bytes: ``0x00 0x00 <type> <ndim>`` (type ``0x08`` = unsigned byte, the only type the
  MNIST-family image and label files use; the other types are read too: ``0x09`` int8, ``0x0B`` int16,
  ``0x0C`` int32, ``0x0D`` float32, ``0x0E`` float64, all big-endian);
* ``ndim`` sizes, each a big-endian unsigned 32-bit integer (images: ``N, rows, cols``; labels: ``N``);
* the data, C order, exactly ``prod(sizes)`` items.

Files may be gzipped (``name.gz``, as released and as the Debian package ``dataset-fashion-mnist``
installs them) or not. Every defect is one :class:`IDXError` line naming the file: a wrong magic
number, a header or data shorter than the header declares (a truncated file, or a truncated gzip
stream), bytes left over after the data, a file that is not gzip although named ``.gz``.

Own reader instead of ``torchvision.datasets.MNIST`` / ``FashionMNIST``: those insist on their own
folder layout (``<root>/<ClassName>/raw/`` with the ``.gz`` archives, decompressed next to them on
first use) and check the archives' md5 against the upstream downloads, so they can neither read the
Debian package's read-only folder (flat, and its ``.gz`` files are re-compressed: same content,
different bytes) nor test fixtures. The parsing rules are the same as torchvision's
``read_image_file`` / ``read_label_file`` (``tests/datamodules/test_fashion_mnist.py`` compares
both on the real files).
"""
from __future__ import annotations

import gzip
import hashlib
import os
import zlib

import numpy as np

from ..base import DataRootError

__all__ = ["IDXError", "IDX_DTYPES", "read_idx", "read_idx_bytes", "idx_path", "content_sha256", "raw_bytes"]

#: IDX type byte -> numpy dtype (big-endian where it matters)
IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8), 0x09: np.dtype(np.int8), 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8"),
}


class IDXError(DataRootError):
    """An IDX file that cannot be read as one (one line naming the file; exit code 2 in the CLI)."""


def idx_path(folder: str, stem: str) -> str | None:
    """``<folder>/<stem>`` if it exists, else ``<folder>/<stem>.gz`` if that exists, else None."""
    for name in (stem, stem + ".gz"):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    return None


def raw_bytes(path: str) -> bytes:
    """The file's bytes, decompressed when it is named ``.gz``; a damaged gzip stream is an :class:`IDXError`."""
    with open(path, "rb") as f:
        data = f.read()
    if not path.endswith(".gz"):
        return data
    try:
        return gzip.decompress(data)
    except EOFError:
        raise IDXError(f"{path!r}: the gzip stream ends early (truncated file)") from None
    except (OSError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
        raise IDXError(f"{path!r}: not a readable gzip file ({type(e).__name__}: {e})") from None


def content_sha256(path: str) -> str:
    """SHA-256 of the IDX content (after decompression for ``.gz``): the same for the gzipped and the
    plain copy, and for archives re-compressed by a packager."""
    return hashlib.sha256(raw_bytes(path)).hexdigest()


def read_idx_bytes(data: bytes, where: str = "<bytes>", ndim: int | None = None) -> np.ndarray:
    """Parse IDX ``data`` -> array of the header's shape and type; ``ndim``: the number of dimensions
    expected (3 for images, 1 for labels), else any. ``where`` names the source in errors."""
    if len(data) < 4:
        raise IDXError(f"{where}: {len(data)} bytes, shorter than the 4-byte IDX magic number (truncated file)")
    zero0, zero1, type_code, dims = data[0], data[1], data[2], data[3]
    magic = int.from_bytes(data[:4], "big")
    if zero0 or zero1 or type_code not in IDX_DTYPES or dims == 0:
        raise IDXError(f"{where}: magic number 0x{magic:08X} is not an IDX header "
                       f"(expected 0x0000TTDD, TT a type code in {sorted(f'{t:02X}' for t in IDX_DTYPES)})")
    if ndim is not None and dims != ndim:
        raise IDXError(f"{where}: magic number 0x{magic:08X} declares {dims} dimensions, expected {ndim}")
    head = 4 + 4 * dims
    if len(data) < head:
        raise IDXError(f"{where}: header declares {dims} sizes but the file ends after {len(data)} bytes "
                       f"(truncated file)")
    shape = tuple(int(v) for v in np.frombuffer(data, dtype=">u4", count=dims, offset=4))
    dtype = IDX_DTYPES[type_code]
    need = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    have = len(data) - head
    if have < need:
        raise IDXError(f"{where}: header declares {'x'.join(map(str, shape))} items ({need} bytes) but only "
                       f"{have} bytes follow (truncated file)")
    if have > need:
        raise IDXError(f"{where}: {have - need} bytes after the {'x'.join(map(str, shape))} items the header "
                       f"declares")
    arr = np.frombuffer(data, dtype=dtype, offset=head, count=need // dtype.itemsize).reshape(shape)
    return arr.astype(dtype.newbyteorder("="), copy=True)  # native byte order, writable


def read_idx(path: str, ndim: int | None = None) -> np.ndarray:
    """Read the IDX file ``path`` (gzipped when named ``.gz``); see :func:`read_idx_bytes`."""
    return read_idx_bytes(raw_bytes(path), repr(path), ndim)

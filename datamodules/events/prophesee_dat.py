"""Prophesee DAT event files ("Event2D" records), as GEN1 releases them (used by :mod:`.gen1`).

Text header lines that start with ``"% "`` (e.g. ``% Data file containing Event2D events.``,
``% Version 2``, ``% Date ...``, ``% Height 240``, ``% Width 304``), then one byte event type (0 =
Event2D) and one byte event size (8), then 8-byte little-endian records: ``uint32`` timestamp in
microseconds, ``uint32`` with ``x`` in bits 0-13, ``y`` in bits 14-27 and the polarity in bits
28-31 (0 = OFF, 1 = ON). A file without ``%`` lines has no type/size bytes (the toolbox's rule for
old files). Why a reader here rather than ``expelliarmus``: see :mod:`.gen1`.
"""
from __future__ import annotations

import bisect
import os
from typing import Any, NamedTuple

import numpy as np

__all__ = ["DatHeader", "DatRecording", "read_dat_header", "read_dat", "write_dat", "RAW_DTYPE", "EVENT_DTYPE",
           "EV_TYPE_2D", "EV_SIZE_2D"]

#: Event2D: type id and record size in bytes, as in the header's two binary bytes
EV_TYPE_2D, EV_SIZE_2D = 0, 8
#: one DAT record: timestamp (µs) and the packed x | y << 14 | p << 28 word
RAW_DTYPE = np.dtype([("t", "<u4"), ("xyp", "<u4")])
#: decoded events: tonic's DVS dtype (``x, y`` int16, ``p`` bool, ``t`` int64 µs)
EVENT_DTYPE = np.dtype([("x", "<i2"), ("y", "<i2"), ("p", "?"), ("t", "<i8")])
_XY_MAX = (1 << 14) - 1


# ------------------------------------------------------------------------------------ DAT files
class DatHeader(NamedTuple):
    data_start: int            # byte offset of the first record
    ev_type: int
    ev_size: int
    height: int | None         # from "% Height" / "% Width" when present
    width: int | None
    lines: tuple[str, ...]     # the header lines without "% "


def read_dat_header(f: Any) -> DatHeader:
    """Parse the header of an open binary DAT file (toolbox rule: lines starting with ``"% "``,
    then the type and size bytes when there was at least one such line). Raises ``ValueError``
    when the header is cut off."""
    f.seek(0)
    lines: list[str] = []
    hw: dict[str, int] = {}
    while True:
        pos = f.tell()
        line = f.readline()
        if not line.startswith(b"% "):
            break
        if not line.endswith(b"\n"):
            raise ValueError("DAT header ends inside a header line")
        text = line[2:].decode("latin-1").rstrip("\r\n")
        words = text.split()
        if len(words) >= 2 and words[0] in ("Height", "Width") and words[1].isdigit():
            hw[words[0]] = int(words[1])
        lines.append(text)
    f.seek(pos)
    if lines:
        tb = f.read(2)
        if len(tb) < 2:
            raise ValueError("DAT file ends before its event type and size bytes")
        ev_type, ev_size = tb[0], tb[1]
    else:
        ev_type, ev_size = EV_TYPE_2D, EV_SIZE_2D
    return DatHeader(f.tell(), int(ev_type), int(ev_size), hw.get("Height"), hw.get("Width"), tuple(lines))


def write_dat(path: str, events: np.ndarray, height: int, width: int, date: str = "1970-01-01 00:00:00") -> None:
    """Write ``events`` (structured, fields ``x, y, p, t``; ``t`` in µs, sorted) as an Event2D DAT file
    with the StreamLogger's header. Raises ``ValueError`` for coordinates beyond 14 bits, a
    timestamp outside ``uint32`` or events outside ``height x width``."""
    if max(height, width) > _XY_MAX + 1:
        raise ValueError(f"DAT coordinates have 14 bits: sensor {width}x{height} is too large")
    x, y = np.asarray(events["x"], np.int64), np.asarray(events["y"], np.int64)
    t, p = np.asarray(events["t"], np.int64), np.asarray(events["p"]).astype(np.int64)
    if len(t) and (x.min() < 0 or y.min() < 0 or x.max() >= width or y.max() >= height):
        raise ValueError(f"events outside the {width}x{height} sensor")
    if len(t) and (t.min() < 0 or t.max() > np.iinfo(np.uint32).max):
        raise ValueError("DAT timestamps are uint32 microseconds")
    if len(t) and (p.min() < 0 or p.max() > 1):
        raise ValueError("polarity must be 0 or 1")
    rec = np.empty(len(t), dtype=RAW_DTYPE)
    rec["t"] = t
    rec["xyp"] = (x | (y << 14) | (p << 28)).astype(np.uint32)
    head = (f"% Data file containing Event2D events.\n% Version 2\n% Date {date}\n"
            f"% Height {int(height)}\n% Width {int(width)}\n").encode("latin-1")
    with open(path, "wb") as f:
        f.write(head)
        f.write(bytes([EV_TYPE_2D, EV_SIZE_2D]))
        f.write(rec.tobytes())


def _decode(rec: np.ndarray) -> np.ndarray:
    """Raw records -> :data:`EVENT_DTYPE` (polarity = bit 28, as the toolbox reads it)."""
    w = np.asarray(rec["xyp"], dtype=np.uint32)
    out = np.empty(len(rec), dtype=EVENT_DTYPE)
    out["t"] = rec["t"]
    out["x"] = w & _XY_MAX
    out["y"] = (w >> 14) & _XY_MAX
    out["p"] = (w >> 28) & 1
    return out


class DatRecording:
    """One DAT file, memory-mapped on first use: ``window(t0, t1)`` -> the events with
    ``t0 <= t < t1``. ``truncated``: the file ends inside a record (its whole records are read);
    ``last_t``: the last readable timestamp (None without events). Picklable (the map is reopened
    in each process)."""

    def __init__(self, path: str) -> None:
        self.path = path
        with open(path, "rb") as f:
            self.header = read_dat_header(f)
            size = f.seek(0, os.SEEK_END)
        if self.header.ev_type != EV_TYPE_2D or self.header.ev_size != EV_SIZE_2D:
            raise ValueError(f"not an Event2D DAT file (event type {self.header.ev_type}, "
                             f"size {self.header.ev_size}; expected {EV_TYPE_2D}, {EV_SIZE_2D})")
        body = size - self.header.data_start
        self.num_events, rest = divmod(body, EV_SIZE_2D)
        self.truncated = rest != 0
        self._map: np.ndarray | None = None
        self.last_t = int(self.records()["t"][-1]) if self.num_events else None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_map": None}

    def records(self) -> np.ndarray:
        """The whole records, memory-mapped ``(num_events,)`` :data:`RAW_DTYPE`."""
        if self._map is None:
            self._map = (np.memmap(self.path, dtype=RAW_DTYPE, mode="r", offset=self.header.data_start,
                                   shape=(self.num_events,)) if self.num_events else np.empty(0, RAW_DTYPE))
        return self._map

    def window(self, t0: int, t1: int) -> np.ndarray:
        """Events with ``t0 <= t < t1`` (µs) as :data:`EVENT_DTYPE`, in file order."""
        rec = self.records()
        ts = rec["t"]  # a strided view of the map, nothing read yet
        # bisect touches ~log2(n) records; np.searchsorted would first copy the whole strided column
        a = bisect.bisect_left(ts, max(t0, 0))
        b = bisect.bisect_left(ts, max(t1, 0), lo=a)
        ev = _decode(np.asarray(rec[a:b]))
        return ev[(ev["t"] >= t0) & (ev["t"] < t1)]

    def read(self) -> np.ndarray:
        """Every readable event (:data:`EVENT_DTYPE`)."""
        return _decode(np.asarray(self.records()))


def read_dat(path: str) -> np.ndarray:
    """All events of a DAT file (:data:`EVENT_DTYPE`; the whole records of a truncated file)."""
    return DatRecording(path).read()


# ------------------------------------------------------------------------------------- boxes

"""Atomic file writes: a temp file in the same directory, fsync, then ``os.replace``.

A kill at any moment leaves either the old file or the new one, never a truncated one.

File modes: ``tempfile.mkstemp`` creates its file with mode 0600 whatever the umask, and
``os.replace`` keeps that mode, so every result would be private to its owner. The temp file is
therefore given the mode a plain ``open(path, "w")`` would have created, ``0666 & ~umask``
(0644 under the usual umask 022), before it is moved into place: colleagues on a shared cluster
can read results, configs, checkpoints, plots and the leaderboard exactly when the umask says so.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import yaml

__all__ = ["default_file_mode", "atomic_write_bytes", "atomic_write_text", "atomic_write_json", "atomic_write_yaml", "read_json"]


def _current_umask() -> int:
    """The process umask, read without changing it where ``/proc`` allows (no race with threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # no other portable way to read it: set and restore at once
    os.umask(mask)
    return mask


def default_file_mode() -> int:
    """Mode of a newly created regular file under the current umask: ``0o666 & ~umask``."""
    return 0o666 & ~_current_umask()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, with the mode the umask gives new files."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, default_file_mode())  # mkstemp made it 0600
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, allow_nan=True) + "\n")


def atomic_write_yaml(path: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(path, yaml.safe_dump(obj, sort_keys=False))


def read_json(path: str | os.PathLike[str]) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@contextlib.contextmanager
def publish_dir(root: str | os.PathLike[str], prefix: str) -> Iterator[str]:
    """Build a directory atomically: yields a fresh temporary sibling of ``root`` to fill; when the block
    ends normally it is renamed to ``root`` (if another process published ``root`` first, that copy is
    kept and ours removed); on any exception it is removed. Nothing half-written is ever at ``root``."""
    parent = os.path.dirname(os.path.abspath(root))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=prefix, dir=parent)
    try:
        yield tmp
        try:
            os.rename(tmp, root)
        except OSError:
            if not os.path.isdir(root):
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another process wrote the same data first
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

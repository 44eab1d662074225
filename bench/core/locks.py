"""The sweep's lock files (used by :mod:`pebench.sweep.local`): one exclusive lock per run directory and one
for the sweep summary, so that several ``bench sweep`` processes (on one host or on a shared
filesystem) never run the same configuration twice, and a lock whose holder died is broken safely.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from pebench.core.io import parse_json

__all__ = ["RunLock"]

log = logging.getLogger("pebench.sweep.local")

#: A lock file still empty after this many seconds belongs to a writer that died mid-create.
_EMPTY_LOCK_GRACE_S = 10.0
#: A ``.break`` guard older than this belongs to a breaker that died; it may be removed.
_BREAK_GUARD_GRACE_S = 30.0


def _proc_start_time(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot (Linux ``/proc``), to detect pid reuse."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            stat = f.read()
    except OSError:
        return None
    # Field 2 (comm) may contain spaces and parentheses: split after the last ')'.
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


class RunLock:
    """An exclusive lock file created with ``O_CREAT | O_EXCL`` holding pid, hostname, start time.

    ``acquire()`` never blocks: it returns True when taken, False when held by someone else
    (after breaking the lock if its holder is provably dead on this host). ``holder()`` says who
    holds it. Use :meth:`acquire_blocking` for short critical sections.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._content: bytes | None = None

    @staticmethod
    def _identity() -> dict[str, Any]:
        pid = os.getpid()
        return {"pid": pid, "hostname": socket.gethostname(), "start_time": _proc_start_time(pid),
                "created": time.time()}

    def _try_create(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        content = json.dumps(self._identity(), sort_keys=True).encode()
        try:
            os.write(fd, content)
        finally:
            os.close(fd)
        self._content = content
        return True

    def _read(self) -> tuple[bytes | None, float | None]:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
            mtime = self.path.stat().st_mtime
        except FileNotFoundError:
            return None, None
        except OSError:
            return b"", None
        return data, mtime

    def holder(self) -> dict[str, Any] | None:
        """The lock's content (pid, hostname, ...) or None when free or unreadable."""
        data, _ = self._read()
        if not data:
            return None
        try:
            info = parse_json(data.decode("utf-8"))  # bounded: a hostile lock file is unreadable
        except ValueError:
            return None
        return info if isinstance(info, dict) else None

    def held_elsewhere(self) -> bool:
        """Whether the lock is held by a process on another host (liveness cannot be checked)."""
        info = self.holder()
        return info is not None and bool(info) and info.get("hostname") != socket.gethostname()

    def _is_stale(self, data: bytes, mtime: float | None) -> bool:
        if not data:
            return mtime is not None and time.time() - mtime > _EMPTY_LOCK_GRACE_S
        try:
            info = parse_json(data.decode("utf-8"))  # bounded: a hostile lock file is unreadable
        except ValueError:
            return mtime is not None and time.time() - mtime > _EMPTY_LOCK_GRACE_S
        if not isinstance(info, dict) or info.get("hostname") != socket.gethostname():
            return False
        pid = info.get("pid")
        if not isinstance(pid, int):
            return False
        if not _pid_alive(pid):
            return True
        started = info.get("start_time")
        return started is not None and _proc_start_time(pid) not in (None, started)

    def _break(self, observed: bytes) -> bool:
        guard = self.path.with_name(self.path.name + ".break")
        try:
            fd = os.open(guard, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                if time.time() - guard.stat().st_mtime > _BREAK_GUARD_GRACE_S:
                    guard.unlink()
            except OSError:
                pass
            return False
        try:
            current, _ = self._read()
            if current != observed:  # changed since we judged it stale: not ours to break
                return False
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            log.warning("broke stale lock %s (%s)", self.path, observed.decode(errors="replace"))
            return True
        finally:
            os.close(fd)
            try:
                guard.unlink()
            except FileNotFoundError:
                pass

    def acquire(self) -> bool:
        """Take the lock without waiting; break it first if stale. True when this process holds it."""
        for _ in range(3):
            if self._try_create():
                return True
            data, mtime = self._read()
            if data is None:  # released between our create and read: try again
                continue
            if not self._is_stale(data, mtime) or not self._break(data):
                return False
        return False

    def acquire_blocking(self, timeout: float = 120.0, poll: float = 0.01) -> None:
        """Wait for the lock (``TimeoutError`` after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while not self.acquire():
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not take lock {self.path} within {timeout:.0f} s (held by {self.holder()})")
            time.sleep(poll)

    def release(self) -> None:
        """Remove the lock if it is still ours."""
        if self._content is None:
            return
        data, _ = self._read()
        if data == self._content:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
        self._content = None

    def __enter__(self) -> "RunLock":
        self.acquire_blocking()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# ------------------------------------------------------------------------------------- summary

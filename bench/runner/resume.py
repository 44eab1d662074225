"""Checkpoints, resume and interrupts of a run directory (used by :mod:`pebench.runner.run`).

``last.ckpt`` is rewritten atomically at the end of every epoch; a run that did not complete resumes
from the newest checkpoint; SIGINT / SIGTERM end a run as ``interrupted`` with the command that resumes
it (README "Reliability").
"""
from __future__ import annotations

import io
import os
import shlex
import signal
import threading
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO

from pebench.core.errors import UserError
from pebench.core.io import atomic_write_bytes, local_file, read_json

__all__ = ["last_checkpoint_callback", "AtomicCheckpointIO", "resume_checkpoint_path", "load_checkpoint", "epochs_done",
           "RunInterrupted", "InterruptSignals", "resume_command"]


def last_checkpoint_callback(run_dir: Path) -> ModelCheckpoint:
    """``last.ckpt`` rewritten at the end of *every* epoch.

    (``ModelCheckpoint(save_last=True, save_top_k=0)`` writes ``last.ckpt`` only when training
    ends in Lightning 2.x, so a killed run had nothing to resume from.) Lightning writes it
    through :class:`AtomicCheckpointIO`, so a kill never leaves it truncated.
    """
    return ModelCheckpoint(dirpath=run_dir, filename="last", monitor=None, save_top_k=1, save_last=False,
                           every_n_epochs=1, enable_version_counter=False)


class AtomicCheckpointIO(TorchCheckpointIO):
    """``torch.save`` into memory, then :func:`atomic_write_bytes` (temp file in the run directory,
    fsync, ``os.replace``). Lightning's own save moves a temp file from ``$TMPDIR``, which is a
    non-atomic copy when ``$TMPDIR`` is on another filesystem than the run directory."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None) -> None:
        if storage_options is not None or "://" in str(path):
            return super().save_checkpoint(checkpoint, path, storage_options)
        buf = io.BytesIO()
        torch.save(checkpoint, buf)
        atomic_write_bytes(path, buf.getvalue())


def resume_checkpoint_path(run_dir: Path) -> str | None:
    """Newest of ``last.ckpt`` / ``hpc_ckpt_*.ckpt`` when the previous attempt did not complete."""
    res = run_dir / "results.json"
    try:
        if res.is_file() and read_json(res).get("status") == "complete":
            return None
    except (OSError, ValueError):
        pass
    cands = [p for p in [run_dir / "last.ckpt", *run_dir.glob("hpc_ckpt_*.ckpt")] if p.is_file()]
    return str(max(cands, key=lambda p: p.stat().st_mtime)) if cands else None


def load_checkpoint(path: str | Path, map_location: Any = "cpu") -> dict[str, Any]:
    """A Lightning checkpoint's dict, read with ``torch.load(weights_only=True)``: tensors, containers and
    primitive types only, so a planted pickle (a ``last.ckpt`` from someone else) cannot run code. Lightning's
    own ``fit(ckpt_path=...)`` reads the same file the same way. Anything unreadable, a URL or a file that is
    not a dict is a one-line :class:`UserError` (phase ``checkpoint``) naming the file."""
    p = local_file(path, "checkpoint")
    try:
        obj = torch.load(str(p), map_location=map_location, weights_only=True)
    except Exception as e:  # noqa: BLE001 - UnpicklingError (a refused global, a corrupt file), EOFError, ...
        raise UserError(f"cannot read checkpoint {str(p)!r}: corrupt, incompatible or not a weights-only "
                        f"checkpoint ({type(e).__name__}: {' '.join(str(e).split())[:160]}); delete it to start "
                        f"over", phase="checkpoint") from None
    if not isinstance(obj, dict):
        raise UserError(f"checkpoint {str(p)!r} holds a {type(obj).__name__}, not a Lightning checkpoint dict",
                        phase="checkpoint")
    return obj


def epochs_done(meta: dict) -> int:
    """Training epochs finished when ``meta`` was saved (= the epoch a resumed run starts at).

    ``last.ckpt`` is written at the end of each training epoch, when Lightning's ``epoch`` key
    still holds that epoch's index; the fit loop's progress counts it as processed.
    """
    try:
        return int(meta["loops"]["fit_loop"]["epoch_progress"]["current"]["processed"])
    except (KeyError, TypeError, ValueError):
        return int(meta.get("epoch", 0))


class RunInterrupted(KeyboardInterrupt):
    """The run was stopped by SIGINT or SIGTERM; ``results.json`` says ``interrupted`` and holds
    ``resume_command``. The CLI prints one line and exits with ``128 + signum``."""

    def __init__(self, signum: int, resume_command: str) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = int(signum)
        self.resume_command = resume_command


class InterruptSignals:
    """While a run trains and analyses, SIGINT and SIGTERM raise ``KeyboardInterrupt`` in the main
    thread (SIGTERM's default action would end the process without a word in ``results.json``), and
    remember which signal came. Lightning's own SIGTERM handler, installed during ``fit``, calls this
    one after it has told its DDP launcher to stop the other ranks. No-op outside the main thread."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._old: dict[int, Any] = {}
        if threading.current_thread() is not threading.main_thread():
            return
        for s in (signal.SIGINT, signal.SIGTERM):
            self._old[s] = signal.signal(s, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is None:
            self.received = signum
            raise KeyboardInterrupt(signal.Signals(signum).name)

    def restore(self) -> None:
        for s, h in self._old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
        self._old = {}


def resume_command(run_dir: Path, out: str | None = None) -> str:
    """``bench run --config <run_dir>/config.yaml`` (prefixed with ``cd <cwd> &&`` when the path is
    relative: config.yaml's ``out`` is then relative to the directory the run was started in). A run
    written to ``--out .`` repeats it: ``--config`` refuses ``out: .`` without an explicit ``--out``
    (committed results hold ``out: .``)."""
    cmd = f"bench run --config {shlex.quote(str(run_dir / 'config.yaml'))}"
    if out is not None and str(out).strip() in (".", "./"):
        cmd += " --out ."
    return cmd if run_dir.is_absolute() else f"cd {shlex.quote(os.getcwd())} && {cmd}"

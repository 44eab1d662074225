"""What a result records about the code that made it: library versions and the git commit."""
from __future__ import annotations

import importlib
import platform
import subprocess
from pathlib import Path

__all__ = ["versions", "git_sha"]


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for mod in ("torch", "lightning", "timm", "torchmetrics", "pebench"):
        try:
            out[mod] = importlib.import_module(mod).__version__
        except Exception:  # noqa: BLE001 - a missing optional module is reported as null
            out[mod] = None
    return out


def git_sha() -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent, capture_output=True,
                           text=True, timeout=10)
        return r.stdout.strip() or None if r.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None

"""``bench analyze``: pebench's analyses on a pretrained timm ViT. The handler only; the pipeline (model
loading, the dataset at the model's input size, progress, the analyses) is :mod:`pebench.cli.analyze`, imported
when the command runs (torch, timm)."""
from __future__ import annotations

import argparse

__all__ = ["cmd_analyze"]


def cmd_analyze(args: argparse.Namespace) -> int:
    """``bench analyze``: pebench's analyses on a pretrained timm ViT (see :mod:`pebench.cli.analyze`)."""
    from pebench.cli.analyze import run_analyze  # deferred: start-up time (torch, timm: loaded only for this command)

    return run_analyze(args)

"""Tokenizers, the PE-pluggable ViT backbone, heads; the Lightning tasks live in :mod:`.tasks`, one
folder per task.

The names below are imported on first access (PEP 562 ``__getattr__``), not when the package is: the
task registry :mod:`pebench.models.tasks` sits inside this package and must list the tasks without
importing torch (``bench --help``).
"""
from __future__ import annotations

import importlib
from typing import Any

#: exported name -> the module (relative to this package) that defines it
_EXPORTS = {
    **dict.fromkeys(["TokenBatch", "grid_coords", "ImageTokenizer", "TubeletTokenizer", "PointTokenizer",
                     "farthest_point_sample", "knn_group", "ResolutionError"], ".tokenizers"),
    **dict.fromkeys(["ViTConfig", "VIT_PRESETS", "ViTBackbone", "Attention", "Block", "build_backbone",
                     "list_models"], ".vit"),
    "ClassificationHead": ".heads",
    **dict.fromkeys(["ClassificationTask", "NonFiniteLossError", "build_tokenizer", "split_batch"],
                    ".tasks.classification.module"),
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])

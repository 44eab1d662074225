"""String-to-class lookup for datamodules (the CLI's ``--dataset`` values)."""
from __future__ import annotations

from pebench.core.registry import Registry

from .base import BenchDataModule

__all__ = ["register_datamodule", "build_datamodule", "list_datamodules", "get_datamodule_class"]

#: datasets register themselves with ``@register_datamodule(name)`` in their own module; a module of this
#: package is imported the first time one of its names is asked for (or all, for the full list).
_DATASETS: Registry[type[BenchDataModule]] = Registry("dataset", package="pebench.datamodules")

register_datamodule = _DATASETS.register
list_datamodules = _DATASETS.names
get_datamodule_class = _DATASETS.get


def build_datamodule(name: str, **kwargs) -> BenchDataModule:
    return _DATASETS.build(name, **kwargs)

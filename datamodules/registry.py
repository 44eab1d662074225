"""String-to-class lookup for datamodules (the CLI's ``--dataset`` values)."""
from __future__ import annotations

from typing import Callable, TypeVar

from .base import BenchDataModule

__all__ = ["register_datamodule", "build_datamodule", "list_datamodules", "get_datamodule_class"]

_REGISTRY: dict[str, type[BenchDataModule]] = {}
T = TypeVar("T", bound=type[BenchDataModule])


def register_datamodule(name: str) -> Callable[[T], T]:
    def deco(cls: T) -> T:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"dataset name {name!r} registered twice")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return deco


def list_datamodules() -> list[str]:
    return list(_REGISTRY)


def get_datamodule_class(name: str) -> type[BenchDataModule]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; available: {', '.join(list_datamodules())}") from None


def build_datamodule(name: str, **kwargs) -> BenchDataModule:
    return get_datamodule_class(name)(**kwargs)

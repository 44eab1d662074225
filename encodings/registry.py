"""String-to-class lookup for positional encodings (timm-style registry)."""
from __future__ import annotations

from typing import Callable, TypeVar

from .base import PositionalEncoding

__all__ = ["register_pe", "build_pe", "list_pes", "get_pe_class"]

_REGISTRY: dict[str, type[PositionalEncoding]] = {}
T = TypeVar("T", bound=type[PositionalEncoding])


def register_pe(name: str) -> Callable[[T], T]:
    """Class decorator: make a PE available as ``build_pe(name)`` and ``bench run --pe name``."""

    def deco(cls: T) -> T:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"PE name {name!r} registered twice")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return deco


def list_pes() -> list[str]:
    """Names of all registered PEs, in registration order."""
    return list(_REGISTRY)


def get_pe_class(name: str) -> type[PositionalEncoding]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown PE {name!r}; available: {', '.join(list_pes())}") from None


def build_pe(name: str, **kwargs) -> PositionalEncoding:
    """Instantiate the PE called ``name`` (see :class:`PositionalEncoding` for shared kwargs)."""
    return get_pe_class(name)(**kwargs)

"""A string-to-class lookup table (timm-style), shared by the PE and dataset registries."""
from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps CLI names to classes; unknown names raise ``ValueError`` listing the valid ones."""

    def __init__(self, kind: str) -> None:
        self.kind = kind  # e.g. "PE", "dataset": used in error messages
        self._classes: dict[str, type[T]] = {}

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        """Class decorator: store the class under ``name`` and set its ``name`` attribute."""

        def deco(cls: type[T]) -> type[T]:
            if name in self._classes and self._classes[name] is not cls:
                raise ValueError(f"{self.kind} name {name!r} registered twice")
            cls.name = name  # type: ignore[attr-defined]
            self._classes[name] = cls
            return cls

        return deco

    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self._classes)

    def get(self, name: str) -> type[T]:
        try:
            return self._classes[name]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r}; available: {', '.join(self.names())}") from None

    def build(self, name: str, **kwargs: Any) -> T:
        return self.get(name)(**kwargs)

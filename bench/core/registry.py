"""The one name -> entry registry of pebench (timm's ``register_model`` / ``list_models`` pattern).

Everything that has a name on the command line (PE, model, dataset, task, analysis, perf suite) is
found through a :class:`Registry`. An entry registers itself where it is defined, with a decorator::

    _PES = Registry("PE", package="pebench.encodings")

    @_PES.register("rope-axial", order=30)
    class RoPEAxial(PositionalEncoding): ...

Nothing lists the entries by hand. A registry built with ``package=`` imports that package's modules
only when a name is asked for (lazy by name: ``rope-axial`` first tries the module ``rope_axial``),
or when all names are (``names()`` imports every module under the package, recursively). So
``bench --help`` imports no entry at all, and adding an entry is adding one module.

Entries outside this repository (your own PE, dataset or task in your own package) are plugins: list
their modules in the environment variable ``PEBENCH_PLUGINS`` (comma-separated module names) or
declare them under the entry-point group ``pebench.plugins`` of your package; they are imported the
first time a name is not found or all names are asked for (docs/extending.md).

Unknown names raise ``ValueError("unknown PE 'x'; available: ...")``, with a "did you mean" when a
registered name is close.
"""
from __future__ import annotations

import difflib
import functools
import importlib
import importlib.metadata
import os
import pkgutil
from typing import Any, Callable, Generic, Iterable, TypeVar

from .errors import ConfigError, UnknownNameError

__all__ = ["Registry", "unknown_name_message", "load_plugins", "PLUGINS_ENV", "PLUGINS_GROUP"]

#: environment variable listing plugin modules (comma-separated), imported before an unknown name fails
PLUGINS_ENV = "PEBENCH_PLUGINS"
#: entry-point group of installed plugin packages (``[project.entry-points."pebench.plugins"]``)
PLUGINS_GROUP = "pebench.plugins"
_plugins_loaded: set[str] = set()


@functools.lru_cache(maxsize=1)
def _entry_point_plugins() -> tuple[str, ...]:
    """The ``pebench.plugins`` entry points' modules (the installed distributions are scanned once)."""
    return tuple(ep.value.split(":")[0] for ep in importlib.metadata.entry_points(group=PLUGINS_GROUP))


def load_plugins() -> None:
    """Import every plugin module named in ``$PEBENCH_PLUGINS`` or the ``pebench.plugins`` entry points
    (each once); a plugin that cannot be imported is an error naming it."""
    names = [m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip()]
    for module in [*names, *_entry_point_plugins()]:
        if module in _plugins_loaded:
            continue
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ConfigError(f"pebench plugin {module!r} (from ${PLUGINS_ENV} or the {PLUGINS_GROUP!r} entry "
                             f"points) cannot be imported: {e}") from None
        _plugins_loaded.add(module)


T = TypeVar("T")


def unknown_name_message(kind: str, name: str, valid: Iterable[str]) -> str:
    """``unknown <kind> 'name'; did you mean 'x'? available: a, b, c`` (the suggestion only when a
    valid name is close to ``name``)."""
    valid = list(valid)
    close = [v for v in valid if v.startswith(str(name))] or difflib.get_close_matches(str(name), valid, n=2,
                                                                                        cutoff=0.6)
    hint = f" did you mean {' or '.join(repr(c) for c in close[:2])}?" if close else ""
    return f"unknown {kind} {name!r};{hint} available: {', '.join(valid) or '(none)'}"


class Registry(Generic[T]):
    """Maps CLI names to entries (classes, or objects with :meth:`add`).

    ``kind`` names the thing in error messages ("PE", "dataset"). ``package``: the dotted package whose
    modules register the entries when imported (``None``: entries are registered by whoever imports
    the registry). ``names()`` is ordered by each entry's ``order`` (given at registration; entries
    without one come after those with one), then by name.
    """

    def __init__(self, kind: str, package: str | None = None) -> None:
        self.kind = kind
        self.package = package
        self._entries: dict[str, T] = {}
        self._order: dict[str, float] = {}
        self._all_imported = package is None

    # -------------------------------------------------------------------------------- registering
    def register(self, name: str, *, order: float | None = None) -> Callable[[T], T]:
        """Class decorator: store the class under ``name`` and set its ``name`` attribute (a registry of
        classes is a ``Registry[type[Base]]``: its entries are the classes)."""

        def deco(cls: T) -> T:
            cls.name = name  # type: ignore[attr-defined]
            self.add(name, cls, order=order)
            return cls

        return deco

    def add(self, name: str, entry: T, *, order: float | None = None) -> T:
        """Store ``entry`` (any object) under ``name``; a second, different entry is an error."""
        if name in self._entries and self._entries[name] is not entry:
            raise ValueError(f"{self.kind} name {name!r} registered twice")
        self._entries[name] = entry
        if order is not None:
            self._order[name] = float(order)
        return entry

    # ------------------------------------------------------------------------------------ lookup
    def names(self) -> list[str]:
        """All registered names (imports the whole package first), in ``order`` then name order."""
        self._import_all()
        return sorted(self._entries, key=lambda n: (n not in self._order, self._order.get(n, 0.0), n))

    def registered(self) -> list[str]:
        """The names registered so far, without importing anything."""
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._lookup(name) is not None

    def get(self, name: str) -> T:
        entry = self._lookup(name)
        if entry is None:
            raise UnknownNameError(unknown_name_message(self.kind, name, self.names()))
        return entry

    def build(self, name: str, **kwargs: Any) -> Any:
        return self.get(name)(**kwargs)  # type: ignore[operator]

    # ---------------------------------------------------------------------------- lazy importing
    def _lookup(self, name: str) -> T | None:
        if name not in self._entries and self.package:
            self._import_module_named(name)  # also after a full import: a module added since (tests)
        if name not in self._entries:
            self._import_all()
        return self._entries.get(name)

    def _import_module_named(self, name: str) -> None:
        """Import ``<package>.<name>`` with ``-``/``+``/``.`` as ``_``, if such a module exists."""
        module = f"{self.package}.{name.replace('-', '_').replace('+', '_').replace('.', '_')}"
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:  # the module exists but one of its own imports is missing
                raise

    def _import_all(self) -> None:
        load_plugins()
        if self._all_imported:
            return
        root = importlib.import_module(str(self.package))
        for info in pkgutil.walk_packages(getattr(root, "__path__", []), prefix=f"{self.package}."):
            if not info.name.rsplit(".", 1)[-1].startswith("_"):
                importlib.import_module(info.name)
        self._all_imported = True

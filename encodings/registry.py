"""String-to-class lookup for positional encodings (the CLI's ``--pe`` values)."""
from __future__ import annotations

from typing import Any, Mapping

from pebench.core.registry import Registry

from .base import PositionalEncoding
from .options import SHARED_KWARGS, check_pe_options, describe_options, variant_label_of

__all__ = ["register_pe", "build_pe", "list_pes", "get_pe_class", "pe_options", "variant_label"]

#: PEs register themselves with ``@register_pe(name, order=...)`` in their own module (one file per PE);
#: a module of this package is imported the first time its PE is asked for. ``order``: the CLI's listing order.
_PES: Registry[type[PositionalEncoding]] = Registry("PE", package="pebench.encodings")

#: Class decorator: make a PE available as ``build_pe(name)`` and ``bench run --pe name``.
register_pe = _PES.register
#: Names of all registered PEs, in their ``order``.
list_pes = _PES.names
get_pe_class = _PES.get


def build_pe(name: str, **kwargs) -> PositionalEncoding:
    """Instantiate the PE called ``name`` (see :class:`PositionalEncoding` for shared kwargs).

    PE-specific options are checked against the class's ``options`` declaration first
    (:func:`~pebench.encodings.options.check_pe_options`): an unknown key raises ``TypeError``, a
    wrong type or value :class:`~pebench.encodings.base.PEConfigError`."""
    cls = _PES.get(name)
    opts = check_pe_options(cls, {k: v for k, v in kwargs.items() if k not in SHARED_KWARGS})
    return cls(**{**kwargs, **opts})


def pe_options(pe: str) -> list[dict[str, Any]]:
    """The options of the PE called ``pe``: one dict per option with ``key``, ``type``, ``default``,
    ``choices`` and ``help`` (one line), in declaration order."""
    return describe_options(_PES.get(pe))


def variant_label(pe: str, options: Mapping[str, Any] | None) -> str:
    """``pe`` when every option equals its default, else ``pe[k=v,...]`` with the non-default options
    sorted by key (:func:`~pebench.encodings.options.variant_label_of`; an unregistered ``pe``: every
    option counts as non-default)."""
    return variant_label_of(_PES.get(pe) if pe in _PES else None, pe, options)

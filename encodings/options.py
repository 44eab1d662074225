"""PE options: one declaration per PE class, used to validate, list and label them.

Every :class:`~pebench.encodings.base.PositionalEncoding` subclass declares its keyword options
(the ``--pe-option KEY=VALUE`` values) as a tuple of :class:`~pebench.core.options.Option` (the one option type
of pebench: name, kind, default, help, choices, bounds) in its ``options`` class attribute. That one
declaration is what

* :func:`check_pe_options` validates (``build_pe`` calls it: unknown keys, wrong types, values
  outside ``choices`` or the bounds),
* :func:`describe_options` lists (key, type, default, choices, one-line meaning; ``bench list pes``
  prints it), and
* :func:`variant_label_of` compares against to name a variant: ``pape`` when every option is at
  its default, ``pape[init=pebench]`` otherwise.

These take the PE class; the by-name versions (``pe_options``, ``variant_label``) are in
:mod:`.registry`, which looks the class up.

The tests check that each declaration agrees with its class's constructor signature (same keys,
same defaults), so the two cannot drift apart.
"""
from __future__ import annotations

from typing import Any, Mapping

from pebench.core.options import Option

from .base import PEConfigError

__all__ = ["SHARED_KWARGS", "check_pe_options", "describe_options", "variant_label_of", "format_option_value"]

#: Constructor arguments every PE takes from the backbone (not user options).
SHARED_KWARGS = ("dim", "num_heads", "depth", "spatial_dims", "num_prefix_tokens", "grid")


def _declared(cls: type) -> dict[str, Option]:
    return {o.name: o for o in getattr(cls, "options", ())}


def check_pe_options(cls: type, options: Mapping[str, Any]) -> dict[str, Any]:
    """Validate user options of the PE class ``cls`` against its declaration and return
    them coerced to their canonical types. Unknown keys raise ``TypeError`` (as an unexpected
    keyword argument would); a value of the wrong type or outside ``choices`` raises
    :class:`~pebench.encodings.base.PEConfigError`."""
    spec = _declared(cls)
    out = {}
    for key, value in options.items():
        if key not in spec:
            avail = ", ".join(spec) or "none"
            raise TypeError(f"PE {cls.name!r} got an unexpected keyword argument {key!r}; its options: {avail}")
        try:
            out[key] = spec[key].check(value, f"option {key}")
        except ValueError as e:
            raise PEConfigError(f"PE {cls.name!r}: {e}") from None
    return out


def describe_options(cls: type) -> list[dict[str, Any]]:
    """The options of the PE class ``cls``: one dict per option with ``key``, ``type``, ``default``,
    ``choices`` and ``help`` (one line), in declaration order."""
    return [o.describe() for o in getattr(cls, "options", ())]


def format_option_value(value: Any) -> str:
    """Compact text of an option value for labels: ``true``/``false``, ``none``, floats as
    ``repr`` (``0.02``), sequences as ``[a;b]`` (``;`` so that ``,`` only separates options)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return "[" + ";".join(format_option_value(v) for v in value) + "]"
    return str(value)


def _same(opt: Option, value: Any) -> bool:
    try:
        return opt.check(value) == opt.check(opt.default) if opt.default is not None else value is None
    except ValueError:
        return False


def variant_label_of(cls: type | None, pe: str, pe_options: Mapping[str, Any] | None) -> str:
    """Label of a PE variant: ``pe`` when every option equals its default, else
    ``pe[k=v,...]`` with the non-default options sorted by key.

    ``1`` equals ``1.0`` and a list equals the tuple with the same items (a YAML config gives
    lists). Keys the PE does not declare (or every key, if ``pe`` is not a registered PE) count
    as non-default, so a label never hides a setting. ``cls``: the PE's class (``None``: not registered).
    """
    if not pe_options:
        return pe
    spec = _declared(cls) if cls is not None else {}
    diff = {k: v for k, v in pe_options.items() if k not in spec or not _same(spec[k], v)}
    for k in diff:
        if k in spec:
            try:
                diff[k] = spec[k].check(diff[k])  # canonical text: 1 -> 1.0 for a float option
            except ValueError:
                pass
    if not diff:
        return pe
    return pe + "[" + ",".join(f"{k}={format_option_value(diff[k])}" for k in sorted(diff)) + "]"

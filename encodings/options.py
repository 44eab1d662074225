"""PE options: one declaration per PE class, used to validate, list and label them.

Every :class:`~pebench.encodings.base.PositionalEncoding` subclass declares its keyword options
(the ``--pe-option KEY=VALUE`` values) as a tuple of :class:`PEOption` in its ``options`` class
attribute. That one declaration is what

* :func:`check_pe_options` validates (``build_pe`` calls it: unknown keys, wrong types, values
  outside ``choices``),
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

import math
from dataclasses import dataclass
from typing import Any, Mapping

from pebench.core.errors import ConfigError

from .base import PEConfigError

__all__ = ["PEOption", "SHARED_KWARGS", "check_pe_options", "describe_options", "variant_label_of", "format_option_value"]

#: Constructor arguments every PE takes from the backbone (not user options).
SHARED_KWARGS = ("dim", "num_heads", "depth", "spatial_dims", "num_prefix_tokens", "grid")

_KINDS = ("int", "float", "str", "bool", "floats")


@dataclass(frozen=True)
class PEOption:
    """One keyword option of a PE.

    ``kind``: "int", "float", "str", "bool" or "floats" (a sequence of floats). ``default``
    ``None`` means "derived from the model" (``help`` says how); such an option also accepts
    ``None``. ``choices``: the allowed values of a "str" option (``None``: any string).
    """

    key: str
    kind: str
    default: Any
    help: str
    choices: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"PEOption {self.key!r}: kind must be one of {_KINDS}, got {self.kind!r}")

    def coerce(self, value: Any) -> Any:
        """``value`` in this option's canonical type (ints accepted for floats, sequences as
        tuples); raises ``ValueError`` with a one-line reason when it does not fit."""
        if value is None:
            if self.default is None:
                return None
            raise ConfigError(f"option {self.key} needs a {self.kind} value, got None")
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
        elif self.kind == "int":
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if isinstance(value, float) and value.is_integer():
                return int(value)
        elif self.kind == "float":
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                return float(value)
        elif self.kind == "str":
            if isinstance(value, str):
                if self.choices is not None and value not in self.choices:
                    raise ConfigError(f"option {self.key}={value!r} is not one of: {', '.join(self.choices)}")
                return value
        elif self.kind == "floats":
            if isinstance(value, (list, tuple)) and all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
                return tuple(float(v) for v in value)
        raise ConfigError(f"option {self.key}={value!r}: expected {self.kind}")

    def describe(self) -> dict[str, Any]:
        """The option as a plain dict: key, type, default, choices, help."""
        return {"key": self.key, "type": self.kind, "default": self.default, "choices": self.choices,
                "help": self.help}


def _declared(cls: type) -> dict[str, PEOption]:
    return {o.key: o for o in getattr(cls, "options", ())}


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
            out[key] = spec[key].coerce(value)
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


def _same(opt: PEOption, value: Any) -> bool:
    try:
        return opt.coerce(value) == opt.coerce(opt.default) if opt.default is not None else value is None
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
                diff[k] = spec[k].coerce(diff[k])  # canonical text: 1 -> 1.0 for a float option
            except ValueError:
                pass
    if not diff:
        return pe
    return pe + "[" + ",".join(f"{k}={format_option_value(diff[k])}" for k in sorted(diff)) + "]"

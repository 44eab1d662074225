"""One :class:`Option` type for every option pebench takes: run, PE, dataset, task and analysis options.

An :class:`Option` is a name, a ``kind`` (:data:`KINDS`), a default, a one-line help, and optionally
``choices``, bounds as keywords (``minimum=0, minimum_inclusive=False, maximum=1``, with ``what`` naming the
quantity in the message) and ``none_means`` (what a ``None`` default stands for). It is declared in one of
two places, and everything else is made from it:

* a tuple ``options = (Option("impl", "str", "sdpa", "..."), ...)`` on a PE class or a task setup;
* a dataclass field ``x: int = option(default, help, minimum=1)`` (:func:`option`) where the options are the
  fields of a configuration class (``RunConfig``, an analysis' options); :func:`declared_options` fills in
  the name from the field and the kind from its annotation. Datasets declare theirs as constructor keywords;
  ``pebench.datamodules.data_options`` turns those into the same :class:`Option` values.

From the declaration come: the value check (:meth:`Option.coerce` for types, :meth:`Option.check` for choices
and bounds: one line, :class:`~pebench.core.errors.ConfigError`), the command-line flags of a dataclass
(:func:`add_flags`, :func:`flag_values`), ``--print-config`` (the dataclass itself), ``bench list --options``
(:meth:`Option.describe`) and ``docs/cli_flags.md`` (the flags' help).

Why a home-made parser and not jsonargparse: the flags are plain argparse generated from these declarations
in a few lines, and argparse is in the standard library; jsonargparse would add a dependency, its own import
time to every ``bench`` command (``bench --help`` must stay under a second) and its own error wording, and its
main gain -- a parser derived from type hints -- is what :func:`add_flags` already does. This module imports
nothing heavy, so option values are checked before torch is imported.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import typing
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from pebench.core.errors import ConfigError
from pebench.core.io import UnreadableYAML, load_yaml_untrusted

__all__ = ["Option", "KINDS", "option", "parse_bool", "declared_options", "kind_of", "add_flags", "flag_values",
           "check_values", "check_mapping", "parse_key_value", "format_value"]

#: the kinds of value an option takes: ``floats`` / ``ints`` are sequences (canonical: tuples), ``list`` a list
#: of strings (a comma string is split), ``dict`` a mapping (the ``KEY=VALUE`` flags), ``int|str`` either
KINDS = ("bool", "int", "float", "str", "floats", "ints", "int|str", "list", "dict")
_WORDS = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a string",
          "floats": "a list of numbers", "ints": "a list of integers", "int|str": "an integer or a string",
          "list": "a list", "dict": "a mapping"}


def parse_bool(value: Any) -> bool | None:
    """``True``/``False`` from a bool or a word (1/true/yes/on, 0/false/no/off, any case); ``None`` otherwise."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    return True if word in ("1", "true", "yes", "on") else False if word in ("0", "false", "no", "off") else None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def format_value(value: Any) -> str:
    """An option value as ``bench list`` shows it: ``none``, ``true``/``false``, else ``str``."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class Option:
    """One option: see the module docstring. ``nullable`` (``None``: when the default is ``None``) says whether
    ``None`` is a value; ``required``: no default (a dataset constructor argument without one); ``flag`` and
    ``metavar``: the command-line flag of a dataclass option (default ``--<name with dashes>``)."""

    name: str = ""
    kind: str = ""
    default: Any = None
    help: str = ""
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    minimum_inclusive: bool = True
    maximum: float | None = None
    maximum_inclusive: bool = True
    what: str = ""
    none_means: str | None = None
    nullable: bool | None = None
    required: bool = False
    flag: str | None = None
    metavar: str | None = None

    def __post_init__(self) -> None:
        if self.kind and self.kind not in KINDS:  # "" only inside option(): declared_options fills it in
            raise ValueError(f"option {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")

    @property
    def accepts_none(self) -> bool:
        return self.default is None if self.nullable is None else self.nullable

    @property
    def type_name(self) -> str:
        """The kind as ``bench list --options`` shows it (``int or none`` when ``None`` is a value)."""
        return f"{self.kind} or none" if self.accepts_none else self.kind

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def coerce(self, value: Any, label: str | None = None) -> Any:
        """``value`` in this option's canonical type (YAML and flags give loosely typed values: ``"3"`` for an
        int, ``2`` for a float, ``yes`` for a bool); a value that does not fit is a one-line ConfigError."""
        label = label or self.name
        if self.accepts_none and self.kind in ("bool", "int", "float", "floats", "ints") and isinstance(value, str) \
                and value.strip().lower() in ("none", "null"):
            value = None  # `bench list --options` shows such a kind as "int or none": the word means None
            # (not for names: `--pe none` and `--analyses none` name something)
        if value is None:
            if self.accepts_none:
                return None
            raise ConfigError(f"{label} needs {_WORDS[self.kind]}, got None")
        out = _COERCE[self.kind](value)
        if out is _BAD:
            raise ConfigError(f"{label} must be {_WORDS[self.kind]}, got {value!r}")
        return out

    def check(self, value: Any, label: str | None = None) -> Any:
        """:meth:`coerce`, then ``choices`` and the bounds (numbers also finite) -> the canonical value."""
        label = label or self.name
        value = self.coerce(value, label)
        if value is None:
            return None
        if self.choices is not None and value not in self.choices:
            raise ConfigError(f"{label} must be one of {', '.join(map(str, self.choices))}, got {value!r}")
        items = value if self.kind in ("floats", "ints") else (value,) if self.kind in ("int", "float") else ()
        if not all(self._in_range(v) for v in items):
            raise ConfigError(f"{label} must be {self.range_text()}, got {value!r}")
        return value

    def _in_range(self, v: float) -> bool:
        lo, hi = self.minimum, self.maximum
        return (math.isfinite(v) and (lo is None or (v >= lo if self.minimum_inclusive else v > lo))
                and (hi is None or (v <= hi if self.maximum_inclusive else v < hi)))

    def range_text(self) -> str:
        """``> 0 and <= 1 and finite (what)``: the bounds in words."""
        parts = []
        if self.minimum is not None:
            parts.append(f"{'>=' if self.minimum_inclusive else '>'} {_bound(self.minimum)}")
        if self.maximum is not None:
            parts.append(f"{'<=' if self.maximum_inclusive else '<'} {_bound(self.maximum)}")
        if self.kind in ("float", "floats"):
            parts.append("finite")
        return " and ".join(parts) + (f" ({self.what})" if self.what else "")

    def default_text(self) -> str:
        """The default as ``--help`` says it (``none_means`` for a meaningful ``None``)."""
        d = self.default
        if d is None:
            return self.none_means or "none"
        if isinstance(d, bool):
            return "on" if d else "off"
        if isinstance(d, (dict, list)) and not d:
            return "none"
        return str(d)

    def describe(self) -> dict[str, Any]:
        """The option as a plain dict (``bench list --options``): key, type, default, choices, help, required."""
        return {"key": self.name, "type": self.type_name, "default": self.default, "choices": self.choices,
                "help": self.help, "required": self.required}


_BAD = object()


def _to_int(v: Any) -> Any:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return _BAD


def _to_float(v: Any) -> Any:
    if _number(v):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return _BAD
    return _BAD


def _to_seq(v: Any, item: Any) -> Any:
    if not isinstance(v, (list, tuple)):
        return _BAD
    out = tuple(item(x) if _number(x) else _BAD for x in v)
    return _BAD if _BAD in out or (item is int and any(not float(x).is_integer() for x in v)) else out


def _to_list(v: Any) -> Any:
    if isinstance(v, str):
        return [s.strip() for s in v.split(",") if s.strip()]
    return [str(x) for x in v] if isinstance(v, (list, tuple)) else _BAD


_COERCE: dict[str, Any] = {
    "bool": lambda v: _BAD if parse_bool(v) is None else parse_bool(v),
    "int": _to_int,
    "float": _to_float,
    "str": lambda v: v if isinstance(v, str) else str(v) if _number(v) else _BAD,
    "floats": lambda v: _to_seq(v, float),
    "ints": lambda v: _to_seq(v, int),
    "int|str": lambda v: str(v) if isinstance(v, float) else v if isinstance(v, str) and _to_int(v) is _BAD
    else _to_int(v),
    "list": _to_list,
    "dict": lambda v: dict(v) if isinstance(v, Mapping) else _BAD,
}


def kind_of(hint: Any) -> tuple[str, bool]:
    """(kind, whether ``None`` is allowed) of a type annotation (a type or its text, e.g. ``"int | None"``)."""
    if isinstance(hint, str):
        parts = [p.strip() for p in hint.split("|")]
        nullable = "None" in parts
        parts = [p for p in parts if p != "None"]
        text = " | ".join(parts)
        simple = {"bool": "bool", "int": "int", "float": "float", "str": "str", "dict": "dict", "list": "list",
                  "int | str": "int|str", "str | int": "int|str"}
        if text in simple:
            return simple[text], nullable
        inner = text.split("[", 1)[-1]
        return ("ints" if inner.startswith("int") else "floats" if "[" in text and inner.startswith("float")
                else "str"), nullable
    args = typing.get_args(hint)
    nullable = type(None) in args
    kinds = {a for a in args if a is not type(None)} or {hint}
    if kinds == {int, str}:
        return "int|str", nullable
    (base,) = kinds
    base = typing.get_origin(base) or base
    name = {bool: "bool", int: "int", float: "float", str: "str", dict: "dict", list: "list", tuple: "floats"}
    return name[base], nullable


def _bound(v: float) -> str:
    """A bound as text: integers whole (``4294967295``), other numbers as ``%g``."""
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def option(default: Any, help: str, **kw: Any) -> Any:
    """A dataclass field declaring an :class:`Option` (name and kind come from the field; ``{}`` / ``[]``
    defaults become factories)."""
    meta = {"option": Option(help=help, **kw)}
    if isinstance(default, (dict, list)):
        value = default
        return field(default_factory=lambda: type(value)(value), metadata=meta)
    return field(default=default, metadata=meta)


@functools.lru_cache(maxsize=None)
def _declared(cls: type) -> tuple[Option, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if "option" not in f.metadata:
            continue
        kind, nullable = kind_of(hints[f.name])
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[operator]
        out.append(dataclasses.replace(f.metadata["option"], name=f.name, kind=kind, default=default,
                                       nullable=nullable))
    return tuple(out)


def declared_options(cls: type) -> list[Option]:
    """The :class:`Option` of each field of dataclass ``cls`` declared with :func:`option`, in order."""
    return list(_declared(cls))


def check_values(obj: Any) -> None:
    """Every declared option of the dataclass instance ``obj`` against its choices and bounds (ConfigError)."""
    for opt in declared_options(type(obj)):
        opt.check(getattr(obj, opt.name))


def check_mapping(options: Iterable[Option], given: Mapping[str, Any] | None, what: str) -> dict[str, Any]:
    """``given`` (e.g. ``--task-option`` values) against ``options`` -> every option's value, defaults filled
    in. An unknown key or a bad value is a one-line ConfigError (``unknown <what> 'k'; available: ...``)."""
    decl = {o.name: o for o in options}
    unknown = sorted(set(given or {}) - set(decl))
    if unknown:
        raise ConfigError(f"unknown {what} {unknown[0]!r}; available: {', '.join(decl) or 'none'}")
    out = {k: o.default for k, o in decl.items()}
    out.update({k: decl[k].check(v, f"{what} {k}") for k, v in (given or {}).items()})
    return out


def parse_key_value(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` -> ``(KEY, VALUE parsed as a YAML scalar)`` (argparse ``type=``)."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    k, v = text.split("=", 1)
    if not k:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:  # bounded like a config file: an alias bomb or deep nesting stays the plain string it was given
        return k, load_yaml_untrusted(v)
    except UnreadableYAML:
        return k, v


def add_flags(parser: argparse.ArgumentParser, cls: type) -> None:
    """One flag per declared option of ``cls``: ``bool`` -> ``--x / --no-x``, ``dict`` -> a repeatable
    ``KEY=VALUE``, ``int`` / ``float`` typed, others a string. Every default is "not given" (``None``); the
    help says the declared default."""
    for opt in declared_options(cls):
        kw: dict[str, Any] = {"dest": opt.name, "default": None,
                              "help": opt.help if "default" in opt.help else f"{opt.help} (default: {opt.default_text()})"}
        if opt.kind == "bool":
            kw["action"] = argparse.BooleanOptionalAction
        elif opt.kind == "dict":
            kw.update(type=parse_key_value, action="append")
        elif opt.kind in ("int", "float"):
            kw["type"] = int if opt.kind == "int" else float
        if opt.metavar and opt.kind != "bool":
            kw["metavar"] = opt.metavar
        if opt.choices:
            kw["choices"] = list(opt.choices)
        parser.add_argument(opt.cli_flag, **kw)


def flag_values(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The options given on the command line (``KEY=VALUE`` lists as dicts); absent ones left out."""
    out: dict[str, Any] = {}
    for opt in declared_options(cls):
        v = getattr(args, opt.name, None)
        if v is not None:
            out[opt.name] = dict(v) if isinstance(v, list) and v and isinstance(v[0], tuple) else v
    return out

"""Options declared once: a dataclass field carries its help, its flag and its bounds.

A configuration class (``RunConfig``) declares each option as ``name: type = option(default, help,
...)``. From that one declaration come the command-line flags (:func:`add_flags`), the checks of YAML
files and flags (types by the annotation, ranges by ``bounds``), ``--print-config`` (the dataclass
itself) and the CLI reference in the docs (the flags' help). Nothing else lists the options.

The mapping from annotation to flag:

* ``bool`` -> ``--x / --no-x``;
* ``dict`` -> a repeatable ``KEY=VALUE`` flag (values parsed as YAML scalars);
* anything else -> a flag taking one value, converted by the configuration's own coercion.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import typing
from dataclasses import dataclass, field
from typing import Any

import yaml

__all__ = ["Option", "option", "parse_bool", "declared_options", "add_flags", "flag_values", "check_bounds", "parse_key_value"]


def parse_bool(value: Any) -> bool | None:
    """``True``/``False`` from a bool or a word (1/true/yes/on, 0/false/no/off, any case); ``None`` otherwise."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    return True if word in ("1", "true", "yes", "on") else False if word in ("0", "false", "no", "off") else None


@dataclass(frozen=True)
class Option:
    """What the command line and the docs need to know about one configuration field."""

    help: str
    flag: str | None = None            # default: --<name with dashes>
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    #: (lowest, lowest allowed, highest, highest allowed, what it is): finite and inside the range
    bounds: tuple[float, bool, float, bool, str] | None = None
    #: how ``--help`` shows a ``None`` default when it means something ("the dataset's")
    none_means: str | None = None


def option(default: Any, help: str, **kw: Any) -> Any:
    """A dataclass field with its :class:`Option` (``{}`` / ``[]`` defaults become factories)."""
    meta = {"option": Option(help=help, **kw)}
    if isinstance(default, (dict, list)):
        value = default
        return field(default_factory=lambda: type(value)(value), metadata=meta)
    return field(default=default, metadata=meta)


def declared_options(cls: type) -> list[tuple[dataclasses.Field[Any], Option]]:
    """The fields of dataclass ``cls`` that carry an :class:`Option`, in declaration order."""
    return [(f, f.metadata["option"]) for f in dataclasses.fields(cls) if "option" in f.metadata]


def flag_of(f: dataclasses.Field[Any], opt: Option) -> str:
    return opt.flag or "--" + f.name.replace("_", "-")


def parse_key_value(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` -> ``(KEY, VALUE parsed as a YAML scalar)`` (argparse ``type=``)."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    k, v = text.split("=", 1)
    if not k:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return k, yaml.safe_load(v)
    except yaml.YAMLError:
        return k, v


def _default_text(f: dataclasses.Field[Any], opt: Option) -> str:
    d = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[operator]
    if d is None:
        return opt.none_means or "none"
    if isinstance(d, bool):
        return "on" if d else "off"
    if isinstance(d, (dict, list)) and not d:
        return "none"
    return str(d)


def add_flags(parser: argparse.ArgumentParser, cls: type) -> None:
    """One flag per declared option of ``cls``; every default is "not given" (``None``), and the help
    says the declared default."""
    hints = typing.get_type_hints(cls)
    for f, opt in declared_options(cls):
        hint = hints[f.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
        kw: dict[str, Any] = {"dest": f.name, "default": None,
                              "help": opt.help if "default" in opt.help else
                              f"{opt.help} (default: {_default_text(f, opt)})"}
        if bool in args:
            kw["action"] = argparse.BooleanOptionalAction
        elif dict in args or hint is dict:
            kw.update(type=parse_key_value, action="append")
        elif args == [int]:
            kw["type"] = int
        elif args == [float]:
            kw["type"] = float
        if opt.metavar and "action" not in kw or kw.get("action") == "append":
            kw["metavar"] = opt.metavar
        if opt.choices:
            kw["choices"] = list(opt.choices)
        parser.add_argument(flag_of(f, opt), **kw)


def flag_values(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The options given on the command line (``KEY=VALUE`` lists as dicts); absent ones left out."""
    out: dict[str, Any] = {}
    for f, _ in declared_options(cls):
        v = getattr(args, f.name, None)
        if v is not None:
            out[f.name] = dict(v) if isinstance(v, list) and v and isinstance(v[0], tuple) else v
    return out


def check_bounds(cfg: Any, error: type[Exception]) -> None:
    """Every option with ``bounds`` finite and inside its range (one-line ``error`` otherwise)."""
    for f, opt in declared_options(type(cfg)):
        if opt.bounds is None:
            continue
        v = getattr(cfg, f.name)
        if v is None:
            continue
        lo, lo_in, hi, hi_in, what = opt.bounds
        lo_s = f"{'>=' if lo_in else '>'} {lo:g}"
        hi_s = ("" if math.isinf(hi) else f" and {'<=' if hi_in else '<'} {hi:g}") + " and finite"
        ok = (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
              and (v >= lo if lo_in else v > lo) and (v <= hi if hi_in else v < hi))
        if not ok:
            raise error(f"{f.name} must be {lo_s}{hi_s} ({what}), got {v!r}")

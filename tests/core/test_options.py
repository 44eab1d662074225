"""The one option type (pebench.core.options.Option): kinds, bounds as keywords, choices, and the flags and
checks made from a dataclass declaration."""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import pytest

from pebench.core.errors import ConfigError
from pebench.core.options import (
    Option,
    add_flags,
    check_mapping,
    check_values,
    declared_options,
    flag_values,
    kind_of,
    option,
)


def test_coerce_gives_the_canonical_kind_and_rejects_what_does_not_fit():
    assert Option("n", "int", 1).coerce("3") == 3 and Option("n", "int", 1).coerce(4.0) == 4
    assert Option("x", "float", 1.0).coerce(2) == 2.0 and isinstance(Option("x", "float", 1.0).coerce(2), float)
    assert Option("b", "bool", False).coerce("yes") is True
    assert Option("s", "floats", (0.0,)).coerce([1, 2.5]) == (1.0, 2.5)
    assert Option("l", "list", None).coerce("24, 32,") == ["24", "32"]
    assert Option("d", "int|str", 1).coerce("2") == 2 and Option("d", "int|str", 1).coerce("auto") == "auto"
    for opt, bad, words in ((Option("n", "int", 1), 2.5, "n must be an integer, got 2.5"),
                            (Option("b", "bool", False), "maybe", "b must be true or false"),
                            (Option("s", "floats", ()), [1, "x"], "s must be a list of numbers"),
                            (Option("n", "int", 1), None, "n needs an integer, got None")):
        with pytest.raises(ConfigError, match=words):
            opt.coerce(bad)
    assert Option("n", "int", None).coerce(None) is None  # a None default means None is a value


def test_the_word_none_is_none_where_bench_list_says_or_none():
    """`bench list --options` shows a nullable int as "int or none": `KEY=none` (and YAML's null) give None;
    a string option keeps the word (`--pe none` is the no-PE model); a non-nullable option still refuses it."""
    nullable = Option("n", "int", None)
    assert nullable.type_name == "int or none"
    assert nullable.coerce("none") is None and nullable.coerce("None") is None and nullable.coerce("null") is None
    assert Option("m", "str", None, choices=("none", "all")).coerce("none") == "none"
    assert Option("pe", "str", None).coerce("none") == "none" and Option("d", "int|str", None).coerce("none") == "none"
    with pytest.raises(ConfigError, match="n must be an integer, got 'none'"):
        Option("n", "int", 1).coerce("none")


def test_bounds_are_keywords_and_say_themselves_in_the_message():
    lr = Option("lr", "float", 1e-3, minimum=0.0, minimum_inclusive=False, what="the peak learning rate")
    assert lr.check(0.5) == 0.5
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ConfigError, match=r"^lr must be > 0 and finite \(the peak learning rate\), got"):
            lr.check(bad)
    frac = Option("p", "float", 0.0, minimum=0.0, maximum=1.0, maximum_inclusive=False)
    assert frac.check(0.0) == 0.0
    with pytest.raises(ConfigError, match="p must be >= 0 and < 1 and finite, got 1.0"):
        frac.check(1)
    with pytest.raises(ConfigError, match="sizes must be >= 0 and finite"):
        Option("sizes", "floats", (), minimum=0.0).check([1, -1])
    with pytest.raises(ConfigError, match="k must be one of 3, 4, got 5"):
        Option("k", "int", 3, choices=(3, 4)).check(5)


def test_kind_of_reads_types_and_annotation_text():
    assert kind_of(int | None) == ("int", True) and kind_of(int | str) == ("int|str", False)
    assert kind_of(tuple) == ("floats", False) and kind_of(dict) == ("dict", False)
    assert kind_of("float | None") == ("float", True) and kind_of("Sequence[int]") == ("ints", False)
    assert kind_of("tuple[float, float]") == ("floats", False)


@dataclass
class _Cfg:
    epochs: int = option(4, "training epochs", metavar="N", minimum=1)
    pool: str = option("mean", "pooling", choices=("mean", "cls"))
    extra: dict = option({}, "extra settings", flag="--extra-option", metavar="KEY=VALUE")
    fast: bool = option(False, "fast mode")
    stop_at: float | None = option(None, "stop value", none_means="never")


def test_a_dataclass_declaration_gives_options_flags_and_checks():
    opts = {o.name: o for o in declared_options(_Cfg)}
    assert (opts["epochs"].kind, opts["epochs"].default, opts["epochs"].minimum) == ("int", 4, 1)
    assert opts["stop_at"].type_name == "float or none" and opts["extra"].cli_flag == "--extra-option"
    parser = argparse.ArgumentParser()
    add_flags(parser, _Cfg)
    args = parser.parse_args(["--epochs", "2", "--extra-option", "a=1", "--extra-option", "b=x", "--no-fast"])
    assert flag_values(args, _Cfg) == {"epochs": 2, "extra": {"a": 1, "b": "x"}, "fast": False}
    helps = {a.dest: a.help for a in parser._actions}
    assert helps["epochs"] == "training epochs (default: 4)" and helps["stop_at"] == "stop value (default: never)"
    check_values(_Cfg())
    with pytest.raises(ConfigError, match="epochs must be >= 1, got 0"):
        check_values(_Cfg(epochs=0))
    with pytest.raises(ConfigError, match="pool must be one of mean, cls"):
        check_values(_Cfg(pool="max"))


def test_check_mapping_fills_defaults_and_names_unknown_keys():
    decl = (Option("n_local", "int", 6, minimum=0), Option("head_bn", "bool", False))
    assert check_mapping(decl, {"head_bn": "true"}, "task option") == {"n_local": 6, "head_bn": True}
    with pytest.raises(ConfigError, match="unknown task option 'nope'; available: n_local, head_bn"):
        check_mapping(decl, {"nope": 1}, "task option")
    with pytest.raises(ConfigError, match="task option n_local must be >= 0, got -1"):
        check_mapping(decl, {"n_local": -1}, "task option")


def test_an_unknown_kind_is_refused_at_declaration():
    with pytest.raises(ValueError, match="kind must be one of"):
        Option("x", "number", 1)

"""README.md's PE and dataset tables and docs/datasets.md's sources table, written from the registries.

    python -m pebench.cli.docs --readme README.md           # rewrite both generated blocks in place
    python -m pebench.cli.docs --readme README.md --check   # change nothing; exit 1 when a block is stale
    python -m pebench.cli.docs --datasets-page docs/datasets.md [--check]   # the sources table there
    python -m pebench.cli.docs pes                          # print one table (pes, datasets or sources)

Like ``docs/cli_flags.md`` (``bench --markdown-reference``, made from the parser), the tables are made from
what the code declares, so a new PE or dataset needs a regeneration and nothing typed by hand:

* the PE table, one row per registered PE in the registry's order: what it is (the first paragraph of its
  module's docstring, which starts with ````name``: ``), the modalities it accepts and the properties its
  class declares (``additive``, ``relative``, ``rotation_invariant``, ``distance_decay``, ``learned``; the
  tests check each declaration against the model);
* the dataset table, one row per modality: the embedded datasets (``needs_data_root`` false; the run
  default first, then the rest, then the probes, which declare an exact ``no_pe_bound``) and the real ones;
* docs/datasets.md's sources table, one row per real dataset: where it comes from, as its class declares in
  ``source`` (:class:`pebench.datamodules.base.DataSource`: publisher, page, licence, size, and the library
  call that writes the layout the reader expects).

Each table sits in README.md between a begin marker and an end marker (:data:`BLOCKS`); the text outside
them is left byte for byte. ``tests/cli/test_readme_tables.py`` regenerates the blocks from the registries
as they are at test time and compares. A module rather than a ``bench`` flag: only maintainers regenerate
the README, and its blocks are replaced in place rather than printed whole.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Callable, Sequence

from pebench.core.errors import ConfigError
from pebench.datamodules import MODALITIES, get_datamodule_class, list_datamodules
from pebench.encodings import get_pe_class, list_pes
from pebench.runner.config import RunConfig
from pebench.runner.run import load_registries

__all__ = ["BLOCKS", "README_BLOCKS", "DATASETS_PAGE_BLOCKS", "pe_table", "dataset_table", "source_table",
           "sources_listing", "pe_summary", "update_blocks", "main"]

#: the PE classes' declared properties, as the table's columns
PE_PROPERTIES = (("additive", "additive"), ("relative", "relative"), ("rotation-invariant", "rotation_invariant"),
                 ("distance decay", "distance_decay"), ("learned", "learned"))


def _cell(text: str) -> str:
    """``text`` as one markdown table cell: reST literals as code spans, one line, ``|`` escaped."""
    return " ".join(re.sub(r"``([^`]+)``", r"`\1`", text).split()).replace("|", "\\|")


def pe_summary(name: str) -> str:
    """What PE ``name`` is, in one line: the first paragraph of its module's docstring after the
    ````name``: `` it starts with (the convention of every file under ``encodings/``), without its final
    full stop. A module docstring that does not start so is a :class:`ConfigError` naming the file."""
    cls = get_pe_class(name)
    module = sys.modules[cls.__module__]
    first = (module.__doc__ or "").strip().split("\n\n", 1)[0]
    prefix = f"``{name}``:"
    if not first.startswith(prefix) or not first[len(prefix):].strip():
        raise ConfigError(f"the docstring of {cls.__module__} ({getattr(module, '__file__', '?')}) must start with "
                          f"'{prefix} <what the PE is>' (README.md's PE table reads it)")
    return _cell(first[len(prefix):]).rstrip(".")


def pe_table() -> str:
    """The markdown table of every registered PE (see the module docstring)."""
    load_registries()
    lines = ["| `--pe` | what | modalities | " + " | ".join(h for h, _ in PE_PROPERTIES) + " |",
             "|---|---|---|" + "---|" * len(PE_PROPERTIES)]
    for name in list_pes():
        cls = get_pe_class(name)
        yes_no = ["yes" if getattr(cls, attr) else "no" for _, attr in PE_PROPERTIES]
        lines.append(f"| `{name}` | {pe_summary(name)} | {', '.join(cls.modalities)} | " + " | ".join(yes_no) + " |")
    return "\n".join(lines) + "\n"


def dataset_table() -> str:
    """The markdown table of every registered dataset by modality: embedded (no download) and real
    (``--data-root``); the run default is marked, the probes (datasets with a ``no_pe_bound``) come last."""
    load_registries()
    default = RunConfig().dataset
    groups: dict[tuple[str, bool], list[str]] = {}
    for name in list_datamodules():
        cls = get_datamodule_class(name)
        if cls.modality not in MODALITIES:
            raise ConfigError(f"dataset {name!r} declares modality {cls.modality!r}; expected one of {MODALITIES}")
        groups.setdefault((cls.modality, bool(cls.needs_data_root)), []).append(name)

    def embedded(names: list[str]) -> str:
        probes = [n for n in names if callable(getattr(get_datamodule_class(n), "no_pe_bound", None))]
        rest = sorted((n for n in names if n not in probes), key=lambda n: (n != default, n))
        parts = [f"`{n}`" + (" (the default)" if n == default else "") for n in rest]
        if probes:
            parts.append("the probes " + ", ".join(f"`{n}`" for n in sorted(probes)))
        return ", ".join(parts) or "—"

    lines = ["| modality | embedded (no download) | real (`--data-root`) |", "|---|---|---|"]
    for modality in MODALITIES:
        real = ", ".join(f"`{n}`" for n in sorted(groups.get((modality, True), []))) or "—"
        lines.append(f"| {modality} | {embedded(groups.get((modality, False), []))} | {real} |")
    return "\n".join(lines) + "\n"


def source_table() -> str:
    """The markdown table of where each real dataset (``needs_data_root``) comes from, by name: its class's
    ``source`` declaration. A real dataset that declares none is a :class:`ConfigError` naming it."""
    load_registries()
    lines = ["| dataset | publisher | licence | size | what writes the layout |", "|---|---|---|---|---|"]
    for name in sorted(list_datamodules()):
        cls = get_datamodule_class(name)
        if not cls.needs_data_root:
            continue
        src = cls.source
        if src is None:
            raise ConfigError(f"dataset {name!r} ({cls.__module__}.{cls.__qualname__}) reads --data-root but declares "
                              f"no source (a DataSource: publisher, url, licence, size, writer)")
        lines.append(f"| `{name}` | {_cell(src.publisher)}, <{src.url}> | {_cell(src.licence)} | {_cell(src.size)} | "
                     f"{_cell(src.writer)} |")
    return "\n".join(lines) + "\n"


def sources_listing() -> str:
    """``bench list datasets``' plain-text twin of :func:`source_table`: one block per real dataset."""
    load_registries()
    out = ["where the real datasets come from (pebench downloads nothing; each class's `source`, as in "
           "docs/datasets.md)"]
    for name in sorted(list_datamodules()):
        src = get_datamodule_class(name).source
        if get_datamodule_class(name).needs_data_root and src is not None:
            out.append(name)
            out += [f"  {label:<10} {' '.join(text.replace('``', '').split())}" for label, text in
                    (("publisher", src.publisher), ("page", src.url), ("licence", src.licence), ("size", src.size),
                     ("writer", src.writer))]
    return "\n".join(out)


def _command(option: str, target: str) -> str:
    return f"`python -m pebench.cli.docs {option} {target}`"


#: generated block name -> (the function that writes it, its begin marker, its end marker)
BLOCKS: dict[str, tuple[Callable[[], str], str, str]] = {
    name: (make, f"<!-- {name} table: generated by {_command(option, target)} from the registries; edit the code, "
                 f"not this table -->", f"<!-- end of the generated {name} table -->")
    for name, make, option, target in (("pes", pe_table, "--readme", "README.md"),
                                       ("datasets", dataset_table, "--readme", "README.md"),
                                       ("sources", source_table, "--datasets-page", "docs/datasets.md"))
}
#: the blocks README.md holds (``--readme``) and the ones docs/datasets.md holds (``--datasets-page``)
README_BLOCKS = ("pes", "datasets")
DATASETS_PAGE_BLOCKS = ("sources",)


def update_blocks(text: str, names: Sequence[str] = README_BLOCKS) -> str:
    """``text`` with the block between each named block's markers replaced by the generated table. Each
    marker must occur exactly once, the begin marker on a line of its own before the end marker."""
    for name in names:
        make, begin, end = BLOCKS[name]
        lines = text.split("\n")
        if lines.count(begin) != 1 or lines.count(end) != 1 or lines.index(begin) > lines.index(end):
            raise ConfigError(f"expected the {name} markers once each, in order, on lines of their own: "
                              f"{begin!r} ... {end!r}")
        i, j = lines.index(begin), lines.index(end)
        lines[i + 1:j] = make().rstrip("\n").split("\n")
        text = "\n".join(lines)
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pebench.cli.docs", description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("table", nargs="?", choices=sorted(BLOCKS), help="print this table (markdown) and exit")
    parser.add_argument("--readme", metavar="FILE", help="rewrite the generated blocks of FILE (e.g. README.md)")
    parser.add_argument("--datasets-page", metavar="FILE",
                        help="rewrite the generated sources table of FILE (e.g. docs/datasets.md)")
    parser.add_argument("--check", action="store_true", help="with --readme / --datasets-page: change nothing; exit 1 "
                                                             "when a block differs from what the registries give")
    args = parser.parse_args(argv)
    if args.table:
        sys.stdout.write(BLOCKS[args.table][0]())
        return 0
    targets = [(f, names, option) for f, names, option in ((args.readme, README_BLOCKS, "--readme"),
                                                            (args.datasets_page, DATASETS_PAGE_BLOCKS,
                                                             "--datasets-page")) if f]
    if not targets:
        parser.error(f"give a table to print ({', '.join(BLOCKS)}), --readme FILE or --datasets-page FILE")
    status = 0
    for file, names, option in targets:
        path = Path(file)
        try:
            old = path.read_text(encoding="utf-8")
            new = update_blocks(old, names)
        except OSError as e:
            print(f"docs: error: cannot read {file!r}: {e.strerror or e}", file=sys.stderr)
            return 2
        except ConfigError as e:
            print(f"docs: error: {file}: {e}", file=sys.stderr)
            return 2
        if args.check:
            if new != old:
                print(f"{file}: the generated tables are stale; regenerate with "
                      f"python -m pebench.cli.docs {option} {file}", file=sys.stderr)
                status = 1
            continue
        if new != old:
            path.write_text(new, encoding="utf-8")
        print(f"{file}: {'rewrote' if new != old else 'unchanged'} ({', '.join(names)} tables)")
    return status

if __name__ == "__main__":
    sys.exit(main())

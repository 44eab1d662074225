"""README.md's PE and dataset tables are what ``python -m pebench.cli.docs`` makes of the registries as they are
now (a new PE or dataset needs only a regeneration), and the generator reads what each class declares."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pebench.cli import docs
from pebench.core.errors import ConfigError
from pebench.datamodules import get_datamodule_class, list_datamodules
from pebench.encodings import get_pe_class, list_pes
from pebench.runner.config import RunConfig

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def _rows(table: str) -> list[list[str]]:
    """The body cells of a markdown table (``\\|`` inside a cell kept)."""
    return [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
            for line in table.splitlines()[2:]]


def test_readme_tables_are_generated_from_the_registries():
    text = README.read_text(encoding="utf-8")
    assert docs.update_blocks(text) == text, "regenerate with: python -m pebench.cli.docs --readme README.md"


def test_the_pe_table_has_one_row_per_pe_with_its_declarations():
    rows = _rows(docs.pe_table())
    assert [r[0] for r in rows] == [f"`{n}`" for n in list_pes()]
    for row in rows:
        cls = get_pe_class(row[0].strip("`"))
        assert row[2] == ", ".join(cls.modalities), row
        assert row[3:] == ["yes" if getattr(cls, a) else "no" for a in
                           ("additive", "relative", "rotation_invariant", "distance_decay", "learned")], row
        assert row[1] and "``" not in row[1] and not row[1].endswith("."), row
    assert rows[0][1] == "the ablated model without any positional encoding"  # encodings/none.py's docstring


def test_the_dataset_table_puts_every_dataset_in_its_modality_and_place():
    rows = _rows(docs.dataset_table())
    seen: dict[str, tuple[str, bool]] = {}
    for modality, embedded, real in rows:
        for column, needs_root in ((embedded, False), (real, True)):
            for name in re.findall(r"`([a-z0-9-]+)`", column):
                assert name not in seen, name
                seen[name] = (modality, needs_root)
        probes = embedded.split("the probes ", 1)[1] if "the probes " in embedded else ""
        assert all(callable(getattr(get_datamodule_class(n), "no_pe_bound", None))
                   for n in re.findall(r"`([a-z0-9-]+)`", probes)), embedded
    assert set(seen) == set(list_datamodules())
    for name, (modality, needs_root) in seen.items():
        cls = get_datamodule_class(name)
        assert (cls.modality, bool(cls.needs_data_root)) == (modality, needs_root), name
    default = RunConfig().dataset
    assert f"`{default}` (the default)" in docs.dataset_table()


def test_a_stale_block_is_replaced_and_the_text_around_it_kept():
    _, begin, end = docs.BLOCKS["pes"]
    text = f"intro\n{begin}\n| stale |\n{end}\nafter\n"
    assert docs.update_blocks(text, ["pes"]) == f"intro\n{begin}\n{docs.pe_table().rstrip()}\n{end}\nafter\n"
    with pytest.raises(ConfigError, match="markers"):
        docs.update_blocks(f"{end}\n{begin}\n", ["pes"])
    with pytest.raises(ConfigError, match="markers"):
        docs.update_blocks(f"{begin}\n{end}\n{begin}\n", ["pes"])


def test_a_pe_module_without_the_docstring_convention_is_named(monkeypatch):
    module = sys.modules[get_pe_class("none").__module__]
    monkeypatch.setattr(module, "__doc__", "No positional encoding.")
    with pytest.raises(ConfigError, match=r"pebench\.encodings\.none .*must start with '``none``:"):
        docs.pe_summary("none")


def test_check_mode_exits_1_on_a_stale_file_and_writes_nothing(tmp_path):
    stale = tmp_path / "README.md"
    _, begin, end = docs.BLOCKS["pes"]
    _, dbegin, dend = docs.BLOCKS["datasets"]
    stale.write_text(f"{begin}\nold\n{end}\n{dbegin}\nold\n{dend}\n", encoding="utf-8")
    before = stale.read_text(encoding="utf-8")
    assert docs.main(["--readme", str(stale), "--check"]) == 1
    assert stale.read_text(encoding="utf-8") == before
    assert docs.main(["--readme", str(stale)]) == 0
    assert docs.main(["--readme", str(stale), "--check"]) == 0
    assert docs.main(["--readme", str(tmp_path / "missing.md")]) == 2


def test_the_module_runs_from_the_command_line():
    r = subprocess.run([sys.executable, "-m", "pebench.cli.docs", "datasets"], capture_output=True, text=True,
                       timeout=120, cwd="/")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == docs.dataset_table()

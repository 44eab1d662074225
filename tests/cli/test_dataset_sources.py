"""Every real dataset says where it comes from (its class's ``source``), and docs/datasets.md and
``bench list datasets`` print exactly those declarations."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pebench.cli import docs
from pebench.cli.commands.list import cmd_list
from pebench.core.errors import ConfigError
from pebench.datamodules import get_datamodule_class, list_datamodules
from pebench.datamodules.base import DataSource
from pebench.runner.run import load_registries

PAGE = Path(__file__).resolve().parents[2] / "docs" / "datasets.md"


def _real() -> list[str]:
    load_registries()
    return [n for n in sorted(list_datamodules()) if get_datamodule_class(n).needs_data_root]


def test_every_real_dataset_declares_its_source():
    assert len(_real()) >= 18
    for name in _real():
        src = get_datamodule_class(name).source
        assert isinstance(src, DataSource), name
        assert src.url.startswith(("http://", "https://")) and " " not in src.url, (name, src.url)
        assert all(getattr(src, f).strip() for f in ("publisher", "licence", "size", "writer")), (name, src)


def test_the_datasets_page_holds_the_generated_table():
    text = PAGE.read_text(encoding="utf-8")
    assert docs.update_blocks(text, docs.DATASETS_PAGE_BLOCKS) == text, \
        "regenerate with: python -m pebench.cli.docs --datasets-page docs/datasets.md"
    table = docs.source_table()
    for name in _real():
        src = get_datamodule_class(name).source
        assert f"| `{name}` | " in table and f"<{src.url}>" in table, name


def test_a_real_dataset_without_a_source_is_named(monkeypatch):
    monkeypatch.setattr(get_datamodule_class("cifar100"), "source", None)
    with pytest.raises(ConfigError, match="'cifar100'.*declares no source"):
        docs.source_table()


def test_bench_list_datasets_prints_each_source(capsys):
    _real()
    assert cmd_list(argparse.Namespace(what="datasets", options=False)) == 0
    out = capsys.readouterr().out.split("where the real datasets come from", 1)[1]
    for name in _real():
        src = get_datamodule_class(name).source
        assert f"\n{name}\n" in out and src.url in out, name
    assert "``" not in out
    assert "torchvision.datasets.CIFAR100(root, download=True)" in out


def test_check_mode_on_a_stale_datasets_page(tmp_path):
    _, begin, end = docs.BLOCKS["sources"]
    page = tmp_path / "datasets.md"
    page.write_text(f"intro\n{begin}\n| stale |\n{end}\n", encoding="utf-8")
    assert docs.main(["--datasets-page", str(page), "--check"]) == 1
    assert docs.main(["--datasets-page", str(page)]) == 0
    assert docs.main(["--datasets-page", str(page), "--check"]) == 0
    assert page.read_text(encoding="utf-8") == f"intro\n{begin}\n{docs.source_table().rstrip()}\n{end}\n"

"""The documentation cites only what exists: every repository path in README.md and docs/*.md (backticked
paths and markdown links to files) is on disk, the README stays a short front door, and its command list
matches the CLI. The study reports' citations: tests/studies/test_report_citations.py; the README's
generated PE and dataset tables: tests/cli/test_readme_tables.py."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
from doc_citations import REPO, broken_heading_links, cited_paths, missing_paths

from pebench.cli import cli_reference
from pebench.cli.docs import BLOCKS
from pebench.datamodules import list_datamodules

README_MAX_LINES = 250
DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])


@pytest.mark.parametrize("doc", DOCS, ids=[d.relative_to(REPO).as_posix() for d in DOCS])
def test_every_cited_path_exists(doc):
    missing = missing_paths(doc)
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("doc", DOCS, ids=[d.relative_to(REPO).as_posix() for d in DOCS])
def test_every_linked_heading_exists(doc):
    bad = broken_heading_links(doc)
    assert not bad, "\n".join(bad)


def test_the_check_sees_paths_and_skips_everything_else(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("`bench/cli.py` and [a](../y.md#part) and `val/acc1` and `<run>/config.yaml`\n"
                   "```\n`not/checked.py`\n```\n`bench run --out runs/x.yaml` [b](https://example.org/a.md)\n",
                   encoding="utf-8")
    assert [c for _, c, _ in cited_paths(doc)] == ["../y.md#part", "bench/cli.py"]


def test_readme_is_a_short_front_door():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move reference text into docs/"
    text = "\n".join(lines)
    for _, begin, end in BLOCKS.values():  # the tables generated from the registries (test_readme_tables.py)
        text = text.replace(begin, "").replace(end, "")
    assert "<!--" not in text, "generated blocks belong in the study reports (results/*/REPORT.md)"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert f"```bash\n{ci}\n```" in text, "the README's test command must be exactly the one .ci/run runs"
    assert "```bash\npip install -e . && bench run\n```" in text


def test_every_dataset_is_described_in_the_datasets_page():
    docs = (REPO / "docs" / "datasets.md").read_text(encoding="utf-8")
    missing = [n for n in list_datamodules() if f"`{n}`" not in docs]
    assert not missing, f"docs/datasets.md does not describe: {missing}"


def test_readme_shows_every_command():
    out = subprocess.run([sys.executable, "-m", "pebench.cli", "--help"], capture_output=True, text=True,
                         check=True).stdout
    commands = re.search(r"\{([a-z,]+)\}", out)
    names = commands.group(1).split(",") if commands else re.findall(r"^    ([a-z]+)\s", out, flags=re.M)
    assert names, out
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    missing = [n for n in names if f"\nbench {n} " not in readme]
    assert not missing, f"README.md has no example of: {missing}"


def test_cli_flags_reference_is_generated_from_the_parser():
    """docs/cli_flags.md is exactly what `bench --markdown-reference` prints (options declared once)."""
    assert (REPO / "docs" / "cli_flags.md").read_text() == cli_reference(), \
        "regenerate with: bench --markdown-reference > docs/cli_flags.md"

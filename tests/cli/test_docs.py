"""The documentation cites only what exists: every repository path in README.md, docs/*.md and the study
reports (backticked paths and markdown links to files) is on disk, the README stays a short front door,
and its PE and dataset tables and command list match the registries and the CLI."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pebench.datamodules import get_datamodule_class, list_datamodules
from pebench.cli import cli_reference
from pebench.encodings import get_pe_class, list_pes

REPO = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250
DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "results").rglob("REPORT.md")])

#: file endings a backticked token must have (or a trailing "/") to be read as a path
PATH_SUFFIXES = (".py", ".md", ".sh", ".yaml", ".yml", ".json", ".png", ".txt", ".toml", ".csv", ".sbatch", ".ckpt")
#: characters that mark a token as a pattern or placeholder, not one path (`<run>/x`, `lr*/`, `{a,b}`, `~/`)
PLACEHOLDER = re.compile(r"[<>*{}~$…|]")
FENCE = re.compile(r"^\s*```")
BACKTICKED = re.compile(r"`([^`\s]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _prose_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of every line outside fenced code blocks."""
    out, fenced = [], False
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            out.append((i, line))
    return out


#: folders that exist only after an example in the docs ran (run directories, the extending guide's plugin)
EXAMPLE_ROOTS = ("runs/", "my_pebench/")


def _is_path(token: str) -> bool:
    """A backticked token names a repository path when it has a folder part and looks like a file or folder
    (metric names such as `val/acc1` and commands with spaces do not)."""
    if PLACEHOLDER.search(token) or "/" not in token.rstrip("/") or "://" in token or token.startswith("-"):
        return False
    if token.startswith(EXAMPLE_ROOTS):  # what an example command creates, not a repository path
        return False
    return token.endswith("/") or token.endswith(PATH_SUFFIXES)


def cited_paths(path: Path) -> list[tuple[int, str, list[Path]]]:
    """(line, citation, candidate locations) of every path ``path`` cites. Markdown links resolve against the
    citing file's folder; backticked paths against the repository root or that folder."""
    found = []
    for i, line in _prose_lines(path):
        for target in LINK.findall(line):
            if target.startswith(("http://", "https://", "mailto:", "#")):
                continue
            found.append((i, target, [path.parent / target.split("#", 1)[0]]))
        for token in BACKTICKED.findall(line):
            if _is_path(token):
                found.append((i, token, [REPO / token, path.parent / token]))
    return found


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a markdown file (lower case, punctuation dropped, spaces -> -)."""
    return {re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for _, line in _prose_lines(path) if line.startswith("#")}


@pytest.mark.parametrize("doc", DOCS, ids=[d.relative_to(REPO).as_posix() for d in DOCS])
def test_every_cited_path_exists(doc):
    missing = [f"{doc.relative_to(REPO)}:{i}: {cited}" for i, cited, where in cited_paths(doc)
               if not any(p.exists() for p in where)]
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("doc", DOCS, ids=[d.relative_to(REPO).as_posix() for d in DOCS])
def test_every_linked_heading_exists(doc):
    bad = []
    for i, line in _prose_lines(doc):
        for target in LINK.findall(line):
            if "#" not in target or target.startswith(("http://", "https://")):
                continue
            file, anchor = target.split("#", 1)
            linked = (doc.parent / file) if file else doc
            if linked.suffix == ".md" and anchor not in anchors(linked):
                bad.append(f"{doc.relative_to(REPO)}:{i}: {target}")
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
    assert "<!--" not in text, "generated blocks belong in the study reports (results/*/REPORT.md)"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert f"```bash\n{ci}\n```" in text, "the README's test command must be exactly the one .ci/run runs"
    assert "```bash\npip install -e . && bench run\n```" in text


def _table_names(section: str) -> set[str]:
    """Backticked names in the markdown table of a README section."""
    text = (REPO / "README.md").read_text(encoding="utf-8").split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("|---")]
    return {name for row in rows for name in re.findall(r"`([a-z0-9][a-z0-9-]*)`", row)}


def test_readme_pe_table_lists_every_registered_pe():
    assert _table_names("Positional encodings") == set(list_pes())
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    header = next(line for line in readme.splitlines() if line.startswith("| `--pe` |"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "`--pe`", "what", "modalities", "additive", "relative", "rotation-invariant", "distance decay", "learned",
        "probes"], header
    sys.path.insert(0, str(REPO / "benchmarks"))
    import probe_findings  # the report's own count of the probes each PE learned

    learned = probe_findings.probes_learned(probe_findings.load(str(REPO / "results" / "embedded")))
    for name in list_pes():  # every column but "what" is the class's own declaration or the committed sweep
        cls = get_pe_class(name)
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{name}` |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        yn = ["yes" if getattr(cls, a) else "no" for a in
              ("additive", "relative", "rotation_invariant", "distance_decay", "learned")]
        assert cells[2] == ", ".join(cls.modalities) and cells[3:8] == yn, row
        probes = (f"[{learned[name][0]} of {learned[name][1]}](results/embedded/REPORT.md#what-each-pe-learned)"
                  if name in learned else "not in the committed probe sweep")
        assert cells[8] == probes, row


def test_readme_dataset_table_lists_every_registered_dataset():
    assert _table_names("Datasets") == set(list_datamodules())
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for row in readme.split("## Datasets\n", 1)[1].split("\n## ", 1)[0].splitlines()[2:]:
        if not row.startswith("| "):
            break
        modality, embedded, real = [c.strip() for c in row.strip("|").split("|")]
        for name in re.findall(r"`([a-z0-9-]+)`", embedded + real):
            cls = get_datamodule_class(name)
            assert cls.modality == modality and cls.needs_data_root == (name in real), name
    docs = (REPO / "docs" / "datasets.md").read_text(encoding="utf-8")
    assert all(f"`{n}`" in docs for n in list_datamodules())


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

"""Every cross-reference a newcomer can follow resolves (issue #50 item 7).

* help text of every ``bench`` command and flag (``build_parser``: the run options come from ``RunConfig``):
  each ``docs/X.md`` / ``README.md`` it names exists, with the ``#anchor`` and the ``§N`` section it names;
  each ``the README's X section`` is a README heading; each ``pebench.x.y`` is a module or a module's
  attribute; each `` `bench CMD` `` is a command;
* README.md and docs/*.md: each relative markdown link's file exists, and its ``#anchor`` is a heading of
  that file (GitHub's heading ids).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from pebench.cli.parser import build_parser

REPO = Path(__file__).resolve().parents[2]

_DOC = re.compile(r"\b((?:docs/[\w./-]+\.md|README\.md))(?:#([\w-]+))?(?:\s+§(\d+))?")
_README_SECTION = re.compile(r"the README's ([\w -]+?) section")
_MODULE = re.compile(r"\bpebench(?:\.\w+)+")
_COMMAND = re.compile(r"`bench (\w[\w-]*)")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def heading_ids(md: Path) -> set[str]:
    """GitHub's ids of the headings of ``md`` (lower case, punctuation but ``-`` and ``_`` dropped, spaces
    to ``-``, ``-1``, ``-2`` ... for repeats), plus explicit ``<a name=...>`` / ``id=...`` anchors."""
    text = re.sub(r"```.*?```", "", md.read_text(encoding="utf-8"), flags=re.S)
    ids: set[str] = set()
    seen: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        ids.add(slug if n == 0 else f"{slug}-{n}")
    ids.update(re.findall(r'<a\s+(?:name|id)="([^"]+)"', text))
    return ids


def help_texts() -> list[tuple[str, str]]:
    """``(where, text)`` for every description, epilog and help string of ``bench`` and its commands."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = [(f"bench {c.dest}", str(c.help or "")) for c in sub._choices_actions]
    for name, p in sub.choices.items():
        out += [(f"bench {name}", str(p.description or "")), (f"bench {name}", str(p.epilog or ""))]
        out += [(f"bench {name} {'/'.join(a.option_strings) or a.dest}", str(a.help or "")) for a in p._actions]
    return [(w, " ".join(t.split())) for w, t in out if t.strip()]


def _module_or_attribute(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 1, -1):
        name = ".".join(parts[:i])
        try:
            if importlib.util.find_spec(name) is None:
                continue
        except ModuleNotFoundError:
            continue
        obj = importlib.import_module(name)
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def help_reference_problems() -> tuple[list[str], int]:
    """(one line per reference in the help text that does not resolve, how many references were followed)"""
    readme = REPO / "README.md"
    readme_titles = [ln.lstrip("#").strip().lower() for ln in readme.read_text(encoding="utf-8").splitlines()
                     if ln.startswith("#")]
    commands = set(next(a for a in build_parser()._actions
                        if isinstance(a, argparse._SubParsersAction)).choices)
    problems, followed = [], 0
    for where, text in help_texts():
        for path, anchor, section in _DOC.findall(text):
            followed += 1
            f = REPO / path
            if not f.is_file():
                problems.append(f"{where}: {path} does not exist")
            elif anchor and anchor not in heading_ids(f):
                problems.append(f"{where}: {path}#{anchor}: no such heading")
            elif section and not re.search(rf"^#+\s+§{section}\b", f.read_text(encoding="utf-8"), re.M):
                problems.append(f"{where}: {path} §{section}: no such section")
        for title in _README_SECTION.findall(text):
            followed += 1
            if not any(title.lower() in t for t in readme_titles):
                problems.append(f"{where}: the README has no {title!r} section")
        for dotted in _MODULE.findall(text):
            followed += 1
            if not _module_or_attribute(dotted):
                problems.append(f"{where}: {dotted} is neither a module nor a module's attribute")
        for cmd in _COMMAND.findall(text):
            followed += 1
            if cmd not in commands:
                problems.append(f"{where}: `bench {cmd}` is not a command")
    return problems, followed


def test_every_reference_in_help_text_resolves():
    problems, followed = help_reference_problems()
    assert followed >= 10  # the help text does point somewhere: the check is not vacuous
    assert problems == []


def test_the_reference_check_catches_dangling_ones(monkeypatch):
    """The stale help text of issue #50 (a README section that does not exist) and its kin are reported."""
    import sys

    here = sys.modules[__name__]
    monkeypatch.setattr(here, "help_texts", lambda: [(
        "bench run --task-option", "keys: the README's DINO section; see docs/nope.md, docs/tasks.md#nope, "
        "docs/architecture.md §99, pebench.no_such_module and `bench nosuch`")])
    problems, followed = help_reference_problems()
    assert followed == 6 and len(problems) == 6, problems


MARKDOWN = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def link_problems(md: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", md.read_text(encoding="utf-8"), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans are not links
    problems = []
    for target in _LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        f = (md.parent / path) if path else md
        if not f.exists():
            problems.append(f"{md.relative_to(REPO)}: {target}: no such file")
        elif anchor and f.suffix == ".md" and anchor not in heading_ids(f):
            problems.append(f"{md.relative_to(REPO)}: {target}: no such heading in {f.name}")
    return problems


@pytest.mark.parametrize("md", MARKDOWN, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_markdown_link_resolves(md):
    assert link_problems(md) == []


def test_heading_ids_follow_github():
    """The slug rule on the headings the docs link to (a wrong rule would make the link test vacuous)."""
    ids = heading_ids(REPO / "docs" / "tasks.md")
    assert "self-supervised-dino---task-dino" in ids and "classification---task-classification-the-default" in ids
    assert "no-such-heading" not in ids

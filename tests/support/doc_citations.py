"""Which repository paths and headings a markdown document cites, for the tests that check they exist
(tests/cli/test_docs.py for README.md and docs/, tests/studies/test_report_citations.py for the study reports)."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: file endings a backticked token must have (or a trailing "/") to be read as a path
PATH_SUFFIXES = (".py", ".md", ".sh", ".yaml", ".yml", ".json", ".png", ".txt", ".toml", ".csv", ".sbatch", ".ckpt")
#: characters that mark a token as a pattern or placeholder, not one path (`<run>/x`, `lr*/`, `{a,b}`, `~/`)
PLACEHOLDER = re.compile(r"[<>*{}~$…|]")
FENCE = re.compile(r"^\s*```")
BACKTICKED = re.compile(r"`([^`\s]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose_lines(path: Path) -> list[tuple[int, str]]:
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


def is_path(token: str) -> bool:
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
    for i, line in prose_lines(path):
        for target in LINK.findall(line):
            if target.startswith(("http://", "https://", "mailto:", "#")):
                continue
            found.append((i, target, [path.parent / target.split("#", 1)[0]]))
        for token in BACKTICKED.findall(line):
            if is_path(token):
                found.append((i, token, [REPO / token, path.parent / token]))
    return found


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a markdown file (lower case, punctuation dropped, spaces -> -)."""
    return {re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for _, line in prose_lines(path) if line.startswith("#")}


def missing_paths(doc: Path) -> list[str]:
    """``doc:line: citation`` for every path ``doc`` cites that is not on disk."""
    return [f"{doc.relative_to(REPO)}:{i}: {cited}" for i, cited, where in cited_paths(doc)
            if not any(p.exists() for p in where)]


def broken_heading_links(doc: Path) -> list[str]:
    """``doc:line: link`` for every link from ``doc`` to a heading of a markdown file that has no such heading."""
    bad = []
    for i, line in prose_lines(doc):
        for target in LINK.findall(line):
            if "#" not in target or target.startswith(("http://", "https://")):
                continue
            file, anchor = target.split("#", 1)
            linked = (doc.parent / file) if file else doc
            if linked.suffix == ".md" and anchor not in anchors(linked):
                bad.append(f"{doc.relative_to(REPO)}:{i}: {target}")
    return bad

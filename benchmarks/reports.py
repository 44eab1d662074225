"""Study reports: ``results/<study>/REPORT.md``, written whole by the study's script.

A report is the script's fixed prose (its template, kept in the script beside the code that computes
the numbers) with the tables and verdicts the script computes from the committed result files put in
place of ``@@NAME@@`` placeholders. Nothing in a report is typed in by hand, so it regenerates byte for
byte from the committed runs (the study's test checks that).
"""
from __future__ import annotations

import os

from pebench.core.io import atomic_write_bytes


def fill(template: str, **blocks: str) -> str:
    """``template`` with every ``@@NAME@@`` replaced by ``blocks["name"]`` (stripped of surrounding newlines),
    ending in exactly one newline. A placeholder without a block, or a block without a placeholder, is an
    error (a report must not silently lose a table)."""
    text = template
    for name, block in blocks.items():
        mark = f"@@{name.upper()}@@"
        if mark not in text:
            raise ValueError(f"the report template has no {mark} placeholder")
        text = text.replace(mark, block.strip("\n"))
    if "@@" in text:
        raise ValueError(f"the report template has an unfilled placeholder near {text[text.index('@@'):][:40]!r}")
    return text.strip("\n") + "\n"


def write_report(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    atomic_write_bytes(os.fspath(path), text.encode("utf-8"))

"""The documented commands of the study scripts name modules that exist, in the one form that works: every
``python -m benchmarks.<name>`` in the docs, the reports and the scripts names a script of the package with a
``main``, and no document or script runs one as a file (``python benchmarks/<name>.py``)."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODULE_COMMAND = re.compile(r"python -m benchmarks\.([A-Za-z_][A-Za-z0-9_]*)")
FILE_COMMAND = re.compile(r"python3? benchmarks/\w+\.py")
#: benchmarks/README.md's protocol-choices block is a script's output kept unedited (the README says so)
UNEDITED = re.compile(r"<!-- protocol-choices:begin -->.*?<!-- protocol-choices:end -->", re.S)


def _texts() -> dict[str, str]:
    files = [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "results").rglob("REPORT.md"),
             *(REPO / "benchmarks").glob("*.md"), *(REPO / "benchmarks").glob("*.sh"),
             *(REPO / "benchmarks").glob("*.py")]
    return {f.relative_to(REPO).as_posix(): f.read_text(encoding="utf-8") for f in sorted(files)}


def test_every_module_command_names_a_script_with_a_main():
    commands = {(path, m) for path, text in _texts().items() for m in MODULE_COMMAND.findall(text)}
    assert len({m for _, m in commands}) >= 10, commands  # the reports and docs do name them
    bad = [f"{path}: python -m benchmarks.{m}" for path, m in sorted(commands)
           if not (REPO / "benchmarks" / f"{m}.py").is_file()
           or "def main(" not in (REPO / "benchmarks" / f"{m}.py").read_text(encoding="utf-8")]
    assert not bad, "\n".join(bad)


def test_no_study_script_is_run_as_a_file():
    old = [f"{path}: {m}" for path, text in _texts().items() for m in FILE_COMMAND.findall(UNEDITED.sub("", text))]
    assert not old, "\n".join(old)

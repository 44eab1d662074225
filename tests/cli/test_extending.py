"""docs/extending.md, followed literally: every file it shows is written into a temporary folder (the
first line of each block names it) and its shell commands are run there, as a contributor would.

The PE, the dataset and the task it adds are plugins (``PEBENCH_PLUGINS``); in the repository the same
code is one file (PE, dataset) or one folder (task), and the registry-driven tests pick it up.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "extending.md"
FILE_MARK = "# file: "


def guide_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", GUIDE.read_text(), flags=re.S)


def guide_files() -> dict[str, str]:
    return {b.split("\n", 1)[0][len(FILE_MARK):].strip(): b.split("\n", 1)[1] if "\n" in b else ""
            for b in guide_blocks("python") if b.startswith(FILE_MARK)}


def test_guide_names_a_pe_a_dataset_and_a_task():
    files = guide_files()
    text = "\n".join(files.values())
    assert "@register_pe(" in text and "@register_datamodule(" in text and "@register_task(" in text, files.keys()
    assert len(guide_blocks("bash")) == 1


@pytest.mark.slow
def test_following_the_guide_adds_a_pe_a_dataset_and_a_task_that_run(tmp_path):
    for name, text in guide_files().items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    script = guide_blocks("bash")[0]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("PEBENCH_PLUGINS", None)
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "sincos-scaled" in r.stdout and "init" in r.stdout  # bench list pes --options shows it
    run_dir = tmp_path / "runs" / "shapes-gray" / "sincos-scaled" / "vit-nano" / "seed0"
    results = json.loads((run_dir / "results.json").read_text())
    assert results["status"] == "complete", results.get("error")
    assert (results["dataset"], results["pe"], results["task"]) == ("shapes-gray", "sincos-scaled",
                                                                    "classification-smoothed")

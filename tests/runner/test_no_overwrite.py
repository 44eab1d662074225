"""Nothing writes into the repository's committed results by default: `bench leaderboard` refuses to
overwrite a git-tracked leaderboard with its default --out, and `bench run --config` refuses a committed
run's config (`out: .`) without an explicit --out."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from pebench.cli import main

REPO = Path(__file__).resolve().parents[2]


def _results(root: Path) -> Path:
    d = root / "res" / "probe-x" / "none" / "vit-nano" / "seed0"
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps({
        "dataset": "probe-x", "pe": "none", "model": "vit-nano", "seed": 0, "task": "classification",
        "status": "complete", "primary_metric": "test/acc1", "metrics": {"test/acc1": 0.5}}))
    return root / "res"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_leaderboard_default_out_does_not_overwrite_a_tracked_file(tmp_path, monkeypatch, capsys):
    res = _results(tmp_path)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "LEADERBOARD.md").write_text("committed\n")
    subprocess.run(["git", "add", "LEADERBOARD.md"], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    assert main(["leaderboard", "--results", str(res)]) == 2
    err = capsys.readouterr().err.strip()
    assert "refusing to overwrite LEADERBOARD.md" in err and len(err.splitlines()) == 1
    assert (tmp_path / "LEADERBOARD.md").read_text() == "committed\n"
    assert main(["leaderboard", "--results", str(res), "--out", "LEADERBOARD.md"]) == 0  # named: allowed
    assert (tmp_path / "LEADERBOARD.md").read_text() != "committed\n"
    (tmp_path / "LEADERBOARD.md").write_text("committed\n")
    assert main(["leaderboard", "--results", str(res), "--force"]) == 0
    assert (tmp_path / "LEADERBOARD.md").read_text() != "committed\n"


def test_leaderboard_default_out_writes_an_untracked_file(tmp_path, monkeypatch):
    res = _results(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["leaderboard", "--results", str(res)]) == 0
    assert (tmp_path / "LEADERBOARD.md").is_file()


def test_run_refuses_a_committed_config_without_out(tmp_path, capsys):
    committed = sorted((REPO / "results").glob("**/config.yaml"))
    if not committed:
        pytest.skip("no committed run config")
    cfg = committed[0]
    assert "\nout: .\n" in "\n" + cfg.read_text(encoding="utf-8")
    assert main(["run", "--config", str(cfg), "--print-config"]) == 2
    err = capsys.readouterr().err.strip()
    assert "give --out DIR" in err and len(err.splitlines()) == 1
    assert main(["run", "--config", str(cfg), "--out", str(tmp_path / "runs"), "--print-config"]) == 0
    assert f"out: {tmp_path / 'runs'}" in capsys.readouterr().out

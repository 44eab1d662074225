"""A run's intra-op thread count travels with its config.yaml (issue #44, item 7): ``bench run`` records the
count it ran with, ``bench run --config <run>/config.yaml`` reruns with it whatever the machine's default,
``--threads`` overrides it, and a config.yaml written before the key existed keeps torch's default.
In-process runs (one fast_dev_run batch each); the fixture restores the process's thread count."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from pebench.cli import main

BASE = ["run", "--dataset", "shapes", "--pe", "ape", "--fast-dev-run", "--batch-size", "4", "--no-progress-bar",
        "--analyses", "none"]


@pytest.fixture
def two_threads():
    """The process starts each test at 2 intra-op threads (the "machine default" the runs must not take
    when their configuration names another count), and gets its own count back afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _ran_with(out: Path) -> tuple[int, int]:
    """(threads recorded in config.yaml, threads torch had when results.json was written)."""
    run_dir = out / "shapes" / "ape" / "vit-nano" / "seed0"
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    res = json.loads((run_dir / "results.json").read_text())
    assert res["status"] == "complete"
    return cfg["threads"], res["numerics"]["torch_threads"]


def test_config_records_the_thread_count_and_a_rerun_uses_it(tmp_path, two_threads):
    assert main(BASE + ["--threads", "1", "--out", str(tmp_path / "a")]) == 0
    assert _ran_with(tmp_path / "a") == (1, 1)
    torch.set_num_threads(2)  # another machine's default
    config = tmp_path / "a" / "shapes" / "ape" / "vit-nano" / "seed0" / "config.yaml"
    assert main(["run", "--config", str(config), "--out", str(tmp_path / "b")]) == 0
    assert _ran_with(tmp_path / "b") == (1, 1)  # the recorded count, not the machine's 2
    torch.set_num_threads(1)
    assert main(["run", "--config", str(config), "--threads", "2", "--out", str(tmp_path / "c")]) == 0
    assert _ran_with(tmp_path / "c") == (2, 2)  # an explicit flag overrides the recorded count


def test_default_run_records_the_count_it_inherited(tmp_path, two_threads):
    assert main(BASE + ["--out", str(tmp_path / "a")]) == 0
    assert _ran_with(tmp_path / "a") == (2, 2)


def test_old_config_without_the_key_keeps_torchs_default(tmp_path, two_threads):
    assert main(BASE + ["--threads", "1", "--out", str(tmp_path / "a")]) == 0
    config = tmp_path / "a" / "shapes" / "ape" / "vit-nano" / "seed0" / "config.yaml"
    old = yaml.safe_load(config.read_text())
    del old["threads"]  # as written before the key existed
    old_file = tmp_path / "old.yaml"
    old_file.write_text(yaml.safe_dump(old, sort_keys=False))
    torch.set_num_threads(2)
    assert main(["run", "--config", str(old_file), "--out", str(tmp_path / "b")]) == 0
    assert _ran_with(tmp_path / "b") == (2, 2)


@pytest.mark.parametrize("bad", ["0", "-1", "1.5"])
def test_bad_thread_count_is_one_line_and_exit_2(tmp_path, capsys, bad):
    rc = main(BASE + ["--threads", bad, "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert not any(tmp_path.iterdir())

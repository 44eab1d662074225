"""The results schema (pebench.core.schema): versions, explicit migrations, the typed RunResult, and how the
leaderboard and ``bench run --config`` read older, newer and broken files."""
from __future__ import annotations

import json

import pytest

from pebench.cli import main
from pebench.core.errors import ResultsError, UserError
from pebench.core.schema import MIGRATIONS, SCHEMA_VERSION, RunResult, migrate, schema_version

V1 = {"status": "complete", "dataset": "shapes", "pe": "none", "model": "vit-nano", "seed": 0,
      "task": "classification", "primary_metric": "val/acc1", "metrics": {"val/acc1": 0.5, "val/loss": None}}


def test_every_older_version_has_one_migration_step():
    assert sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION))


def test_a_file_without_a_version_is_version_1_and_migrates_without_being_modified():
    data = dict(V1)
    assert schema_version(data) == 1
    out = migrate(data)
    assert out["schema_version"] == SCHEMA_VERSION and data == V1  # a new dict; the input is untouched
    assert {k: v for k, v in out.items() if k != "schema_version"} == V1


@pytest.mark.parametrize("bad, words", [(SCHEMA_VERSION + 1, "newer than this pebench reads"),
                                        (0, "positive integer"), ("2", "positive integer"), (True, "positive integer")])
def test_unreadable_versions_are_user_errors_naming_the_version(bad, words):
    with pytest.raises(ResultsError, match=words) as e:
        migrate({**V1, "schema_version": bad})
    assert isinstance(e.value, UserError) and e.value.phase == "results"


def test_run_result_types_the_required_keys_and_lists_every_problem():
    r = RunResult.from_dict(V1)
    assert (r.dataset, r.seed, r.schema_version, r.complete) == ("shapes", 0, SCHEMA_VERSION, True)
    assert r.metrics["val/acc1"] == 0.5 and r.metrics["val/loss"] != r.metrics["val/loss"]  # null -> NaN
    broken = {k: v for k, v in V1.items() if k != "task"} | {"seed": "0", "metrics": {"a": "x"}}
    with pytest.raises(ResultsError) as e:
        RunResult.from_dict(broken)
    msg = str(e.value)
    assert "'task'" in msg and "'seed' should be an integer, got string" in msg and "'a'" in msg


def _write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_leaderboard_check_names_a_corrupt_file_and_a_newer_schema_exit_2(tmp_path, capsys):
    _write(tmp_path / "a", "x/results.json", '{"status": "complete", "dataset"')
    assert main(["leaderboard", "--check", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "x/results.json: not valid JSON" in err and "Traceback" not in err
    _write(tmp_path / "b", "x/results.json", json.dumps({**V1, "schema_version": SCHEMA_VERSION + 7}))
    assert main(["leaderboard", "--check", str(tmp_path / "b")]) == 2
    assert f"x/results.json: schema_version {SCHEMA_VERSION + 7} is newer" in capsys.readouterr().err


def test_leaderboard_check_summary_names_the_schema_version(tmp_path, capsys):
    for seed in (0, 1):
        _write(tmp_path, f"s{seed}/results.json", json.dumps({**V1, "seed": seed, "git_sha": "abc"}))
        _write(tmp_path, f"s{seed}/config.yaml", "seed: 0\n")
    assert main(["leaderboard", "--check", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"schema version {SCHEMA_VERSION} (2 file(s) of version 1 read through" in out


def test_run_config_with_a_schema_version_loads_and_a_newer_one_is_refused(tmp_path, capsys):
    ok = tmp_path / "ok.yaml"
    ok.write_text(f"schema_version: {SCHEMA_VERSION}\ndataset: shapes\nepochs: 1\n")
    assert main(["run", "--config", str(ok), "--print-config"]) == 0
    assert "schema_version" not in capsys.readouterr().out  # a run option of no run: dropped after migration
    new = tmp_path / "new.yaml"
    new.write_text(f"schema_version: {SCHEMA_VERSION + 1}\ndataset: shapes\n")
    assert main(["run", "--config", str(new), "--print-config"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "newer than this pebench reads" in err and "new.yaml" in err

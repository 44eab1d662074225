"""Hostile and broken input to the run path: one line and exit code 2, nothing created (docs/security.md).

Config files (not UTF-8, an alias bomb, deep nesting, a recursive alias), seeds outside Lightning's range,
SLURM values with control characters, hostile lock / state / results files read by the run and sweep paths,
``bench eval`` on a run that is not complete or is being written, a rerun on another data root, the metrics
log written whole, and a killed write's temp files removed when the run directory is next opened. The
property-based tests throw arbitrary bytes and text at the config reader and the option parser.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

import pytest
import yaml
from fixtures_real import cifar100
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pebench.cli import main
from pebench.core.errors import UserError
from pebench.core.io import UnreadableYAML, load_yaml_untrusted, parse_json, read_json
from pebench.core.options import parse_key_value
from pebench.runner.config import load_yaml_config

#: 342 bytes that stand for 9**9 strings once expanded ("billion laughs")
ALIAS_BOMB = "a: &a [" + ",".join(['"lol"'] * 9) + "]\n" + "".join(
    f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench: error: "), (captured.out, err)
    return err[0]


# ------------------------------------------------------------------------------ config files
@pytest.mark.parametrize("content, expect", [
    (b"epochs: \xff\xfe 3\n", "not UTF-8"),
    (ALIAS_BOMB.encode(), "aliases expand"),
    (b"a: &a [*a]\n", "recursive"),
    (b"epochs: " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested deeper"),
    (b"!!python/object/apply:os.system [touch pwned]\n", "not valid YAML"),
])
def test_hostile_config_files_are_one_line(tmp_path, capsys, content, expect):
    cfg = tmp_path / "c.yaml"
    cfg.write_bytes(content)
    t0 = time.monotonic()
    assert main(["run", "--config", str(cfg), "--out", str(tmp_path / "runs")]) == 2
    assert time.monotonic() - t0 < 10
    assert expect in _one_error_line(capsys)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "pwned").exists()


def test_alias_bomb_is_small_and_would_expand():
    assert len(ALIAS_BOMB) < 400
    with pytest.raises(UnreadableYAML, match="aliases expand"):
        load_yaml_untrusted(ALIAS_BOMB)
    # the same shape, small enough, is read as plain YAML reads it
    small = "a: &a [1, 2]\nb: [*a, *a]\n"
    assert load_yaml_untrusted(small) == yaml.safe_load(small)


@pytest.mark.parametrize("seed", ["-1", str(2**32)])
def test_seed_outside_lightnings_range_is_one_line(tmp_path, capsys, seed):
    assert main(["run", "--seed", seed, "--out", str(tmp_path / "runs")]) == 2
    line = _one_error_line(capsys)
    assert "seed must be >= 0 and <= 4294967295" in line, line
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------------------ SLURM values
@pytest.mark.parametrize("value", ["32G\nrm -rf ~", "32G\r", "a\x1b[2J", "x\u2028y", "x\x85y"])
def test_slurm_option_values_with_control_characters_are_refused(tmp_path, value):
    from pebench.sweep.slurm import slurm_options

    args = argparse.Namespace(partition=None, gpus_per_task=None, array_parallelism=None, time=None,
                              slurm_folder=None, slurm_option=[f"mem={value}"])
    with pytest.raises(UserError, match="control character"):
        slurm_options(args, tmp_path)
    args = argparse.Namespace(**{**vars(args), "slurm_option": None, "slurm_folder": f"logs/{value}"})
    with pytest.raises(UserError, match="control character"):
        slurm_options(args, tmp_path)
    ok = slurm_options(argparse.Namespace(**{**vars(args), "slurm_folder": None, "slurm_option": ["mem=32G"]}),
                       tmp_path)
    assert ok.additional == {"mem": "32G"}


# ------------------------------------------------------------------------------ hostile files the run path reads
def test_hostile_lock_state_and_results_files_read_as_unreadable(tmp_path):
    from pebench.core.locks import RunLock
    from pebench.runner.guards import complete_run
    from pebench.runner.integrity import previous_config
    from pebench.sweep.local import is_run_complete

    deep = "[" * 100_000 + "]" * 100_000
    d = tmp_path / "run"
    d.mkdir()
    (d / "results.json").write_text(deep)
    (d / "config.yaml").write_text(ALIAS_BOMB)
    (d / ".run.lock").write_text(deep)
    assert previous_config(d) is None
    assert is_run_complete(d) is False
    assert RunLock(d / ".run.lock").holder() is None
    from pebench.runner.config import RunConfig
    assert complete_run(RunConfig(out=str(tmp_path / "out"))) is None


# ------------------------------------------------------------------------------ bench eval is a writer
def _complete_tiny_run(tmp_path: Path) -> Path:
    out = tmp_path / "runs"
    assert main(["run", "--dataset", "shapes", "--pe", "ape", "--epochs", "1", "--batch-size", "16",
                 "--resolution", "16", "--data-option", "train_size=32", "--data-option", "val_size=16",
                 "--analyses", "none", "--no-progress-bar", "--out", str(out)]) == 0
    return out / "shapes" / "ape" / "vit-nano" / "seed0"


@pytest.mark.slow
def test_eval_refuses_incomplete_and_locked_runs(tmp_path, capsys):
    from pebench.runner.integrity import run_dir_lock

    run_dir = _complete_tiny_run(tmp_path)
    capsys.readouterr()
    results = json.loads((run_dir / "results.json").read_text())
    # another process holds the run (a training run, a second eval): one line naming the holder
    lock = run_dir_lock(run_dir)
    try:
        assert main(["eval", "--run", str(run_dir), "--resolutions", "16"]) == 2
        assert "in use by pid" in _one_error_line(capsys)
    finally:
        lock.release()
    for status in ("running", "interrupted", "\x1b[2Jfailed"):
        (run_dir / "results.json").write_text(json.dumps({**results, "status": status}))
        before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
        assert main(["eval", "--run", str(run_dir), "--resolutions", "16"]) == 2
        line = _one_error_line(capsys)
        assert "is not complete" in line and "\x1b" not in line, line
        assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before
    (run_dir / "results.json").write_text("[" * 100_000)  # corrupt: refused before anything is evaluated
    assert main(["eval", "--run", str(run_dir), "--resolutions", "16"]) == 2
    assert "cannot read" in _one_error_line(capsys)
    # complete again, plus a temp file a killed write left: evaluated, and the temp file removed
    (run_dir / "results.json").write_text(json.dumps(results))
    (run_dir / ".results.json.abc123.tmp").write_bytes(b"half")
    assert main(["eval", "--run", str(run_dir), "--resolutions", "16"]) == 0
    assert "16" in json.dumps(read_json(run_dir / "results.json")["extrapolation"])
    assert not list(run_dir.glob("*.tmp"))


# ------------------------------------------------------------------------------ reruns and data roots
@pytest.mark.slow
def test_rerun_checks_its_data_root_and_results_record_the_data(tmp_path, capsys):
    root = cifar100(tmp_path / "data")
    out = tmp_path / "runs"
    flags = ["run", "--dataset", "cifar100", "--epochs", "1", "--batch-size", "4", "--analyses", "none",
             "--no-progress-bar", "--out", str(out)]
    assert main([*flags, "--data-root", str(root)]) == 0
    run_dir = out / "cifar100" / "pape" / "vit-nano" / "seed0"
    res = json.loads((run_dir / "results.json").read_text())
    assert res["data"]["splits"] == {"train": 6, "val": 4}
    fp = res["data"]["fingerprint"]
    assert fp["files"] == 3 and fp["bytes"] == sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert str(tmp_path) not in json.dumps(res["data"])  # no machine path
    capsys.readouterr()
    # the same data: already complete
    assert main([*flags, "--data-root", str(root)]) == 0
    assert "already complete" in capsys.readouterr().out
    before = (run_dir / "results.json").read_bytes()
    # a root without the data: its one-line data-root error, not "already complete"
    (tmp_path / "empty").mkdir()
    assert main([*flags, "--data-root", str(tmp_path / "empty")]) == 2
    assert "expected layout" in _one_error_line(capsys)
    # other data that reads fine: refused, the complete run is not overwritten
    other = tmp_path / "other"
    shutil.copytree(root, other)
    (other / "cifar-100-python" / "README").write_text("another copy")
    assert main([*flags, "--data-root", str(other)]) == 2
    assert "on other data" in _one_error_line(capsys)
    assert (run_dir / "results.json").read_bytes() == before


def test_data_fingerprint_sees_names_and_sizes_only(tmp_path):
    from pebench.core.fingerprint import data_fingerprint

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.bin").write_bytes(b"1234")
    (tmp_path / "y.txt").write_bytes(b"ab")
    fp = data_fingerprint(str(tmp_path))
    assert fp["files"] == 2 and fp["bytes"] == 6
    copy = tmp_path.parent / (tmp_path.name + "-copy")
    shutil.copytree(tmp_path, copy)
    assert data_fingerprint(str(copy))["sha256"] == fp["sha256"]  # another path, the same data
    (copy / "y.txt").write_bytes(b"abc")
    assert data_fingerprint(str(copy))["sha256"] != fp["sha256"]  # a size changed
    names_only = data_fingerprint(str(tmp_path), max_stat=1)
    assert names_only["bytes"] is None and names_only["files"] == 2


# ------------------------------------------------------------------------------ durable writes
def test_metrics_csv_is_written_whole_and_as_lightning_writes_it(tmp_path, monkeypatch):
    """The atomic CSV writer gives Lightning's bytes, and a failing write leaves the previous file whole."""
    from lightning.pytorch.loggers.csv_logs import ExperimentWriter

    from pebench.runner import loggers

    rows = [({"train/loss": 1.5}, 0), ({"train/loss": 1.25, "val/acc1": 0.5}, 1), ({"val/acc1": 0.75}, 2)]
    ours, theirs = loggers.AtomicExperimentWriter(str(tmp_path / "ours")), ExperimentWriter(str(tmp_path / "theirs"))
    for writer in (ours, theirs):
        for metrics, step in rows:
            writer.log_metrics(metrics, step)
            writer.save()
    assert (tmp_path / "ours" / "metrics.csv").read_bytes() == (tmp_path / "theirs" / "metrics.csv").read_bytes()
    good = (tmp_path / "ours" / "metrics.csv").read_bytes()

    def full_disk(path, data):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(loggers, "atomic_write_text", lambda path, text: full_disk(path, text))
    ours.log_metrics({"val/acc1": 0.8, "new/key": 1.0}, 3)
    with pytest.raises(OSError):
        ours.save()
    assert (tmp_path / "ours" / "metrics.csv").read_bytes() == good


def test_stale_temp_files_are_removed_when_a_run_reopens(tmp_path, capsys):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump({"dataset": "shapes", "pe": "ape", "epochs": 1, "batch_size": 16,
                                   "resolution": 16, "data": {"train_size": 32, "val_size": 16},
                                   "analyses": "none", "progress_bar": False}))
    run_dir = tmp_path / "runs" / "shapes" / "ape" / "vit-nano" / "seed0"
    run_dir.mkdir(parents=True)
    (run_dir / ".last.ckpt.k1ll3d.tmp").write_bytes(os.urandom(1024))  # what kill -9 mid-write leaves
    (run_dir / "keep.tmp").write_bytes(b"not ours: no leading dot")
    assert main(["run", "--config", str(cfg), "--out", str(tmp_path / "runs")]) == 0
    assert "removed 1 temp file" in capsys.readouterr().err
    assert not (run_dir / ".last.ckpt.k1ll3d.tmp").exists() and (run_dir / "keep.tmp").exists()


# ------------------------------------------------------------------------------ property-based
@settings(max_examples=150, deadline=5000, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000))
def test_config_reader_accepts_or_says_one_line(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("cfg") / "c.yaml"
    path.write_bytes(data)
    t0 = time.monotonic()
    try:
        load_yaml_config(path)
    except UserError as e:
        assert "\n" not in str(e).strip()
    assert time.monotonic() - t0 < 5


#: YAML documents of arbitrary values (floats without subnormals: pebench flushes denormals to zero in-process)
yaml_text = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_subnormal=False),
              st.text(max_size=30)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=30).map(lambda v: yaml.safe_dump({"epochs": v, "pe": v} if not isinstance(v, dict) else v))


@settings(max_examples=150, deadline=5000)
@given(st.one_of(yaml_text, st.text(max_size=500)))
def test_config_reader_on_arbitrary_yaml(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("cfg") / "c.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    try:
        load_yaml_config(path)
    except UserError as e:
        assert "\n" not in str(e).strip()


@settings(max_examples=200, deadline=5000)
@given(st.text(max_size=300))
def test_option_parser_never_raises_anything_else(value):
    """``--pe-option`` / ``--data-option`` values: a pair, or argparse's one-line error."""
    try:
        key, parsed = parse_key_value(value)
    except argparse.ArgumentTypeError as e:
        assert "\n" not in str(e)
        return
    assert isinstance(key, str) and key


@settings(max_examples=60, deadline=10000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["--seed", "--epochs", "--lr", "--pe", "--dataset", "--pe-option",
                                 "--data-option", "--resolution", "--batch-size", "--config", "x", "-1", "1e400",
                                 "nan", "a=[[[", "\x1b[2J", "k=&a [*a]", "0", "--print-config"]), max_size=6))
def test_run_command_line_accepts_or_says_one_line(tmp_path, capsys, argv):
    """``bench run --print-config ...`` with arbitrary flags: the resolved config, or one line and exit 2."""
    rc = main(["run", "--print-config", "--out", str(tmp_path / "runs"), *argv])
    captured = capsys.readouterr()
    if rc == 2:
        err = captured.err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("bench: error: "), err
    else:
        assert rc == 0, (rc, captured.err)
    assert not (tmp_path / "runs").exists()


def test_json_reader_bounds():
    assert parse_json('{"a": [1, {"b": "[[[["}]}') == {"a": [1, {"b": "[[[["}]}
    for text in ["[" * 100_000, '{"a":' * 65 + "1" + "}" * 65]:
        with pytest.raises(ValueError, match="nested deeper"):
            parse_json(text)


def test_archive_members_are_read_up_to_a_cap(tmp_path, monkeypatch):
    import zipfile

    from pebench.analysis import checkpoint_import

    archive = tmp_path / "w.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("model.pth", b"\0" * 4096)  # compresses to a few bytes: a small zip, a large member
    monkeypatch.setattr(checkpoint_import, "MAX_MEMBER_BYTES", 1024)
    with pytest.raises(UserError, match="at most"):
        checkpoint_import.read_checkpoint(archive, member="model.pth")


def test_security_page_states_the_limits_in_force():
    from pebench.analysis.checkpoint_import import MAX_MEMBER_BYTES
    from pebench.core import io as core_io
    from pebench.core.fingerprint import DATA_FINGERPRINT_MAX_STAT

    page = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text(encoding="utf-8")
    assert f"at most {core_io.MAX_JSON_BYTES // 2**20} MiB, UTF-8, nested at most {core_io.MAX_JSON_DEPTH} levels" in page
    assert f"at most {core_io.MAX_YAML_BYTES // 2**20} MiB, nested at most {core_io.MAX_JSON_DEPTH} levels" in page
    assert f"more than {core_io.MAX_YAML_NODES:,} nodes" in page
    assert f"a {len(ALIAS_BOMB)}-byte" in page
    assert f"read up to {MAX_MEMBER_BYTES // 2**30} GiB" in page
    assert f"more than {DATA_FINGERPRINT_MAX_STAT:,} files" in page
    from pebench.datamodules.images.cifar import CIFARUnpickler
    for module, name in sorted(CIFARUnpickler.ALLOWED):
        if module != "numpy._core.multiarray":  # numpy 2's name for the first one
            assert f"`{module}.{name}`" in page

"""Scale and reliability (issue #6): kill and resume, non-finite loss, bad inputs, determinism.

Bad-input cases already covered elsewhere are not repeated here (tests/test_cli.py: unknown
dataset/PE/model, --rpt with none, --pool cls without --class-token, resolution not divisible by
the patch size, LookHere on points, unknown config key, unwritable --out, missing --data-root;
tests/test_run.py: garbage last.ckpt for `bench eval`; tests/test_real_datasets.py: bad data
roots per dataset, truncated videos / event files / meshes skipped and counted).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from ddp_support import child_env

from pebench.cli import main
from pebench.runner.run import load_registries

load_registries()

#: tiny but exercising every RNG consumer in a training step: RPT permutations and drop-path
TINY = {"dataset": "shapes", "pe": "ape", "rpt": True, "drop_path": 0.1, "epochs": 3, "batch_size": 16,
        "lr": 1e-3, "resolution": 16, "data": {"train_size": 64, "val_size": 32}, "analyses": "none",
        "progress_bar": False, "accelerator": "cpu"}
RUN = Path("shapes/ape+rpt/vit-nano/seed0")


def _write_cfg(path: Path, **over) -> Path:
    path.write_text(yaml.safe_dump({**TINY, **over}))
    return path


def _results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


def _no_tmp(root: Path) -> None:
    assert not list(root.rglob("*.tmp")), list(root.rglob("*.tmp"))


# ------------------------------------------------------------------------------ kill and resume
@pytest.mark.slow
def test_sigkill_and_resume_matches_uninterrupted(tmp_path, capsys):
    cfg = _write_cfg(tmp_path / "tiny.yaml")
    cmd = ["run", "--config", str(cfg), "--deterministic"]
    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "pebench.cli", *cmd, "--out", str(killed)], cwd=tmp_path,
                            env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt = killed / RUN / "last.ckpt"
    deadline = time.monotonic() + 300
    try:
        while not ckpt.exists():  # written (atomically) at the end of every training epoch
            assert proc.poll() is None, "the run ended before writing last.ckpt"
            assert time.monotonic() < deadline, "no last.ckpt after 300 s"
            time.sleep(0.01)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert _results(killed / RUN)["status"] == "running"  # killed mid-training
    saved = torch.load(ckpt, map_location="cpu", weights_only=False)
    done = saved["loops"]["fit_loop"]["epoch_progress"]["current"]["processed"]
    assert 1 <= done < TINY["epochs"]

    # the resume in this process (only the killed run needs its own: a process start is most of this test's time)
    capsys.readouterr()
    rc = main([*cmd, "--out", str(killed)])
    err = capsys.readouterr().err
    assert rc == 0, err[-3000:]
    assert "resuming from last.ckpt" in err
    resumed = _results(killed / RUN)
    assert resumed["status"] == "complete"
    assert resumed["resumed_from"] == {"checkpoint": "last.ckpt", "epoch": done,
                                       "global_step": done * TINY["data"]["train_size"] // TINY["batch_size"]}

    assert main([*cmd, "--out", str(tmp_path / "straight")]) == 0  # same command, never interrupted
    straight = _results(tmp_path / "straight" / RUN)
    assert straight["resumed_from"] is None
    assert set(resumed["metrics"]) == set(straight["metrics"]) >= {"val/acc1", "val/loss"}
    for k, v in straight["metrics"].items():
        assert resumed["metrics"][k] == pytest.approx(v, abs=1e-6), k
    _no_tmp(tmp_path)


# ------------------------------------------------------------------------------ determinism
@pytest.mark.slow
def test_same_seed_same_metrics_deterministic(tmp_path):
    cfg = _write_cfg(tmp_path / "tiny.yaml", epochs=2)
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["run", "--config", str(cfg), "--deterministic", "--out", str(a)]) == 0
    assert main(["run", "--config", str(cfg), "--deterministic", "--out", str(b)]) == 0
    ma, mb = _results(a / RUN)["metrics"], _results(b / RUN)["metrics"]
    assert set(ma) >= {"val/acc1", "val/loss"}
    assert ma == mb  # identical, not just close


# ------------------------------------------------------------------------------ non-finite loss
@pytest.mark.slow
def test_nan_loss_exits_1_keeps_loadable_checkpoint(tmp_path, capsys, monkeypatch):
    """The real check in ``training_step`` (not a stubbed step): cross-entropy turns NaN at global
    step 3 = epoch 1, batch 1 (2 batches per epoch), after last.ckpt of epoch 0 was written."""
    import pebench.tasks.classification.module as tasks
    from pebench.tasks.classification import ClassificationTask

    real = tasks.F.cross_entropy
    calls = {"train": 0}

    def cross_entropy(logits, labels, *args, **kwargs):
        loss = real(logits, labels, *args, **kwargs)
        if logits.requires_grad:  # training forward (validation runs under no_grad)
            calls["train"] += 1
            if calls["train"] == 4:
                return loss * float("nan")
        return loss

    monkeypatch.setattr(tasks.F, "cross_entropy", cross_entropy)
    out = tmp_path / "runs"
    cfg = _write_cfg(tmp_path / "tiny.yaml", batch_size=32)
    assert main(["run", "--config", str(cfg), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [ln for ln in err.splitlines() if ln.startswith("bench: error:")]
    assert len(errors) == 1, err
    assert "non-finite training loss nan" in errors[0] and "global step 3" in errors[0] and "batch 1" in errors[0]
    res = _results(out / RUN)
    assert res["status"] == "failed" and "non-finite" in res["error"]
    task = ClassificationTask.load_from_checkpoint(str(out / RUN / "last.ckpt"), map_location="cpu")
    assert task.hparams.pe == "ape" and all(torch.isfinite(p).all() for p in task.parameters())
    assert torch.load(out / RUN / "last.ckpt", weights_only=False)["global_step"] == 2  # from before the NaN
    _no_tmp(out)


# ------------------------------------------------------------------------------ bad inputs
def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("bench: error: ") and "Traceback" not in err, err
    return lines[0]


def _nothing_written(out: Path) -> None:
    assert not out.exists() or not any(p.is_dir() for p in out.iterdir()), list(out.rglob("*"))
    if out.exists():
        _no_tmp(out)


def _files(tmp: Path) -> dict[str, Path]:
    (tmp / "bad.yaml").write_text("dataset: [shapes\n")
    (tmp / "list.yaml").write_text("- dataset\n- shapes\n")
    (tmp / "empty").mkdir()
    (tmp / "wrong").mkdir()
    (tmp / "wrong" / "train.csv").write_text("not the CIFAR pickles\n")
    return {"BAD_YAML": tmp / "bad.yaml", "LIST_YAML": tmp / "list.yaml", "NO_FILE": tmp / "missing.yaml",
            "EMPTY": tmp / "empty", "WRONG": tmp / "wrong", "NO_DIR": tmp / "nonexistent"}


RUN_CASES = {
    "config_not_yaml": (["--config", "BAD_YAML"], ["not valid YAML"]),
    "config_not_mapping": (["--config", "LIST_YAML"], ["must be a mapping"]),
    "config_missing": (["--config", "NO_FILE"], ["cannot read config file"]),
    "zero_epochs": (["--epochs", "0"], ["epochs must be >= 1"]),
    "negative_batch_size": (["--batch-size", "-4"], ["batch_size must be >= 1"]),
    "zero_lr": (["--lr", "0"], ["lr must be > 0"]),
    "data_root_missing": (["--dataset", "cifar100", "--data-root", "NO_DIR"], ["nonexistent", "expected layout"]),
    "data_root_empty": (["--dataset", "cifar100", "--data-root", "EMPTY"], ["empty", "expected layout"]),
    "data_root_wrong_layout": (["--dataset", "cifar100", "--data-root", "WRONG"], ["wrong", "expected layout"]),
    "zero_devices": (["--accelerator", "cpu", "--devices", "0"], ["invalid trainer options"]),
    "batch_not_divisible_by_devices": (["--accelerator", "cpu", "--devices", "3", "--strategy", "ddp",
                                        "--batch-size", "32"], ["not divisible by the number of processes 3"]),
    "unavailable_accelerator": (["--accelerator", "tpu"], ["invalid trainer options"]),
    "bad_precision": (["--precision", "bogus"], ["invalid trainer options", "bogus"]),
    "bad_max_time": (["--max-time", "xx"], ["invalid trainer options", "DD:HH:MM:SS"]),
    "bad_resolution": (["--resolution", "abc"], ["resolution 'abc'"]),
    "unknown_data_option": (["--data-option", "bogus=1"], ["invalid data options", "bogus"]),
}


@pytest.mark.parametrize("case", sorted(RUN_CASES))
def test_bad_run_input_exit_2(case, tmp_path, capsys):
    args, expect = RUN_CASES[case]
    if case == "unavailable_accelerator":
        pytest.importorskip("lightning")
        try:
            import torch_xla  # noqa: F401
            pytest.skip("torch_xla is installed here")
        except ImportError:
            pass
    if "cifar100" in args:
        from pebench.datamodules import list_datamodules
        if "cifar100" not in list_datamodules():
            pytest.skip("cifar100 not registered")
    files = _files(tmp_path)
    argv = [str(files.get(a, a)) for a in args]
    out = tmp_path / "runs"
    assert main(["run", *argv, "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    for e in expect:
        assert e in line, line
    _nothing_written(out)


@pytest.mark.parametrize("args, expect", [
    (["--seeds", "0,a"], "--seeds must be a comma list of integers"),
    (["--pes", "nope"], "unknown PE 'nope'"),
    (["--pes", "none+rpt"], "conflicting variant 'none+rpt'"),
    (["--pes", "ape", "--rpt"], "--pes ape,ape+rpt"),
    (["--pes", "ape", "--epochz", "1"], "unrecognized arguments: --epochz 1"),
])
def test_bad_sweep_input_exit_2(args, expect, tmp_path, capsys):
    out = tmp_path / "runs"
    assert main(["sweep", *args, "--out", str(out)]) == 2
    assert expect in _one_error_line(capsys)
    _nothing_written(out)


def _run_dir_with_config(tmp_path: Path, pe: str) -> Path:
    """A run directory holding the resolved config.yaml of a tiny `bench run --pe PE` (untrained) and a results.json
    that says complete (bench eval evaluates complete runs only)."""
    from pebench.cli import build_parser
    from pebench.runner.config import config_to_yaml, run_config_from_args, run_dir_for

    cfg_file = _write_cfg(tmp_path / f"{pe}.yaml", pe=pe, rpt=False, out=str(tmp_path / "runs"))
    cfg = run_config_from_args(build_parser().parse_args(["run", "--config", str(cfg_file)]))
    run_dir = run_dir_for(cfg)
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(config_to_yaml(cfg))
    (run_dir / "results.json").write_text(json.dumps({"status": "complete", "dataset": "shapes", "pe": pe}))
    return run_dir


def _checkpoint_of(tmp_path: Path, pe: str) -> Path:
    """A genuine Lightning checkpoint of the tiny config with PE ``pe`` (built, not trained)."""
    from pebench.cli import build_parser
    from pebench.runner.config import run_config_from_args
    from pebench.runner.run import prepare

    cfg_file = _write_cfg(tmp_path / f"ck-{pe}.yaml", pe=pe, rpt=False, out=str(tmp_path / "unused"))
    parts = prepare(run_config_from_args(build_parser().parse_args(["run", "--config", str(cfg_file)])))
    import lightning as L
    path = tmp_path / f"{pe}.ckpt"
    task = parts.task
    torch.save({"state_dict": task.state_dict(), "hyper_parameters": dict(task.hparams), "epoch": 0,
                "global_step": 0, "pytorch-lightning_version": L.__version__}, path)
    return path


def test_eval_bad_inputs_exit_2(tmp_path, capsys):
    # not a run directory
    assert main(["eval", "--run", str(tmp_path / "nope"), "--resolutions", "16"]) == 2
    assert "not a run directory" in _one_error_line(capsys)
    # a run directory without a checkpoint
    run_dir = _run_dir_with_config(tmp_path, "ape")
    assert main(["eval", "--run", str(run_dir), "--resolutions", "16"]) == 2
    assert "no checkpoint" in _one_error_line(capsys)
    # a checkpoint from another PE's run copied into the run directory
    (run_dir / "last.ckpt").write_bytes(_checkpoint_of(tmp_path, "none").read_bytes())
    before = sorted(p.name for p in run_dir.iterdir())
    assert main(["eval", "--run", str(run_dir), "--resolutions", "16"]) == 2
    line = _one_error_line(capsys)
    assert "does not match config.yaml" in line or "corrupt or incompatible" in line, line
    assert sorted(p.name for p in run_dir.iterdir()) == before  # no results.json, plot or temp file


def test_run_resume_from_corrupt_checkpoint_exit_2(tmp_path, capsys):
    """A killed run whose last.ckpt is garbage: `bench run` refuses to resume, touches nothing."""
    out = tmp_path / "runs"
    cfg = _write_cfg(tmp_path / "tiny.yaml")
    run_dir = out / RUN
    run_dir.mkdir(parents=True)
    (run_dir / "last.ckpt").write_bytes(b"\x00garbage, not a checkpoint")
    (run_dir / "results.json").write_text(json.dumps({"status": "running"}))
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    assert main(["run", "--config", str(cfg), "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    assert "cannot resume" in line and "last.ckpt" in line and "delete it" in line
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before


def test_leaderboard_missing_results_dir_exit_2(tmp_path, capsys):
    assert main(["leaderboard", "--results", str(tmp_path / "nope"), "--out", str(tmp_path / "LB.md")]) == 2
    assert "does not exist" in _one_error_line(capsys)
    assert not (tmp_path / "LB.md").exists()


def test_leaderboard_malformed_results_reported_and_skipped(tmp_path, capsys):
    root = tmp_path / "runs"
    good = {"dataset": "shapes", "pe": "ape", "variant": "ape", "model": "vit-nano", "seed": 0,
            "task": "classification", "status": "complete", "primary_metric": "val/acc1",
            "metrics": {"val/acc1": 0.5, "val/loss": 1.0}}
    for rel, text in {"shapes/ape/vit-nano/seed0/results.json": json.dumps(good),
                      "shapes/ape/vit-nano/seed1/results.json": '{"status": "complete", "dataset": ',
                      "shapes/ape/vit-nano/seed2/results.json": json.dumps({**good, "seed": "two"}),
                      "shapes/ape/vit-nano/seed3/results.json": "[1, 2, 3]"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    md = tmp_path / "LB.md"
    assert main(["leaderboard", "--results", str(root), "--out", str(md)]) == 0
    text = md.read_text()
    for seed in (1, 2, 3):
        assert f"shapes/ape/vit-nano/seed{seed}/results.json" in text, seed
    assert "| ape " in text or "ape |" in text
    _no_tmp(tmp_path)


def test_skipped_sample_count_survives_resume():
    """The corrupt-sample count of a resumed run includes the attempts before the kill: the
    reduced total goes into the checkpoint and is restored (counted once) on load."""
    from pebench.tasks.classification import ClassificationTask
    kw = dict(modality="image", num_classes=4, in_chans=3, model="vit-nano", pe="none", patch_size=4,
              train_grid=(4, 4))
    first = ClassificationTask(**kw)
    assert first.skipped_total() == 0  # nothing counted yet: 0, no error
    for n in (2, 0, 1):
        first.skipped.update(torch.tensor(float(n)))
    ckpt: dict = {}
    first.on_save_checkpoint(ckpt)
    assert ckpt["skipped_in_batches"] == 3
    resumed = ClassificationTask(**kw)
    resumed.on_load_checkpoint(ckpt)
    resumed.skipped.update(torch.tensor(2.0))
    assert resumed.skipped_total() == 5
    again: dict = {}
    resumed.on_save_checkpoint(again)  # a second kill: still the whole-run total
    assert again["skipped_in_batches"] == 5


def test_publish_dir_is_all_or_nothing(tmp_path):
    """The embedded sets' cache folders appear whole or not at all (pebench.core.io.publish_dir)."""
    from pebench.core.io import publish_dir

    root = tmp_path / "cache" / "set"
    with pytest.raises(RuntimeError):
        with publish_dir(root, ".tmp-set-") as tmp:
            (Path(tmp) / "half.bin").write_bytes(b"x")
            raise RuntimeError("killed while writing")
    assert not root.exists() and not list((tmp_path / "cache").iterdir())
    with publish_dir(root, ".tmp-set-") as tmp:
        (Path(tmp) / "a.bin").write_bytes(b"first")
    with publish_dir(root, ".tmp-set-") as tmp:  # another writer finished first: its copy is kept
        (Path(tmp) / "a.bin").write_bytes(b"second")
    assert (root / "a.bin").read_bytes() == b"first" and [p.name for p in (tmp_path / "cache").iterdir()] == ["set"]

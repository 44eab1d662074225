"""Run integrity: one configuration per run directory (fingerprint, lock), interrupts, multi-node
flags, file modes that follow the umask."""
from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ddp_support import child_env, free_port

from pebench.cli import main
from pebench.core.fingerprint import LATER_KEYS
from pebench.core.io import atomic_write_bytes, atomic_write_json
from pebench.runner.integrity import (
    NON_RESULT_KEYS,
    RUN_LOCK_NAME,
    RunDirBusy,
    config_differences,
    fingerprint,
    run_dir_lock,
)

TINY = ["--dataset", "shapes", "--pe", "ape", "--epochs", "1", "--batch-size", "16", "--data-option", "train_size=32",
        "--data-option", "val_size=16", "--no-progress-bar"]
RUN = Path("shapes/ape/vit-nano/seed0")


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.fixture
def umask022():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One finished tiny run (analyses: geometry, so a plot is written) under umask 022."""
    out = tmp_path_factory.mktemp("integrity") / "runs"
    old = os.umask(0o022)
    try:
        assert main(["run", *TINY, "--analyses", "geometry", "--out", str(out)]) == 0
    finally:
        os.umask(old)
    return out


# ------------------------------------------------------------------------------------ file modes
@pytest.mark.parametrize("umask,expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_write_follows_umask(tmp_path, umask, expected):
    old = os.umask(umask)
    try:
        atomic_write_bytes(tmp_path / "a.bin", b"x")
        atomic_write_json(tmp_path / "b.json", {"a": 1})
    finally:
        os.umask(old)
    assert _mode(tmp_path / "a.bin") == expected
    assert _mode(tmp_path / "b.json") == expected
    assert os.umask(old) == old  # reading the umask did not change it
    os.umask(old)


def test_plot_and_leaderboard_modes(tmp_path, umask022, tiny_run):
    from pebench.analysis.plots import save_plot
    from pebench.leaderboard import write_leaderboard

    save_plot(lambda data, p: Path(p).write_bytes(b"png"), None, tmp_path / "p.png")
    assert _mode(tmp_path / "p.png") == 0o644
    write_leaderboard(tiny_run, tmp_path / "LEADERBOARD.md")
    assert _mode(tmp_path / "LEADERBOARD.md") == 0o644


def test_run_directory_files_are_0644_under_umask_022(tiny_run):
    d = tiny_run / RUN
    names = {p.name for p in d.iterdir()}
    assert {"results.json", "config.yaml", "last.ckpt", "geometry.png"} <= names, names
    for p in d.iterdir():
        if p.is_file():
            assert _mode(p) == 0o644, (p.name, oct(_mode(p)))
    assert not (d / RUN_LOCK_NAME).exists()  # released


# ------------------------------------------------------------------------------------ fingerprint
def test_fingerprint_recorded_and_ignores_non_result_keys(tiny_run):
    res = json.loads((tiny_run / RUN / "results.json").read_text())
    cfg = res["config"]
    assert res["fingerprint"] == fingerprint(cfg)
    assert res["fingerprint_keys"] == sorted(k for k in cfg if k not in NON_RESULT_KEYS and k != "seed"
                                             and not (k in LATER_KEYS and cfg[k] == LATER_KEYS[k]))
    assert "coord_aug" not in res["fingerprint_keys"]  # at its default: the fingerprint of older configurations
    assert fingerprint({**cfg, "coord_aug": "dinov3"}) != res["fingerprint"]  # it changes results
    assert "out" not in res["fingerprint_keys"] and "num_workers" not in res["fingerprint_keys"]
    assert {"epochs", "lr", "pe", "devices", "strategy", "pe_options"} <= set(res["fingerprint_keys"])
    assert fingerprint({**cfg, "out": "elsewhere", "num_workers": 4, "progress_bar": True}) == res["fingerprint"]
    assert fingerprint({**cfg, "seed": 7}) == res["fingerprint"]  # seeds of one experiment share it
    assert fingerprint({**cfg, "epochs": 2}) != res["fingerprint"]
    assert config_differences(cfg, {**cfg, "epochs": 5, "lr": 0.02, "out": "x"}) == ["epochs", "lr"]
    assert config_differences(cfg, {**cfg, "seed": 3}) == ["seed"]  # but a directory holds one seed
    # a key an older version did not write counts as its default
    older = {k: v for k, v in cfg.items() if k != "pool"}
    assert config_differences(older, cfg) == []


def _snapshot(d: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(d.iterdir()) if p.is_file()}


@pytest.mark.parametrize("change", [["--epochs", "5", "--lr", "0.02"], ["--class-token"],
                                    ["--drop-path", "0.1"]])
def test_other_configuration_is_refused_touching_nothing(tiny_run, capsys, change):
    d = tiny_run / RUN
    before = _snapshot(d)
    res = json.loads((d / "results.json").read_text())
    res["status"] = "running"  # as after a kill: previously resumed silently with the new options
    atomic_write_json(d / "results.json", res)
    before = _snapshot(d)
    rc = main(["run", *TINY, *change, "--analyses", "none", "--out", str(tiny_run)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err[-1:]) == 1 and err[-1].startswith("bench: error: run directory")
    expected_keys = {"--epochs": "epochs", "--class-token": "class_token", "--drop-path": "drop_path"}[change[0]]
    assert expected_keys + ":" in err[-1] and "use a new --out or delete" in err[-1]
    assert _snapshot(d) == before  # config.yaml, metrics.csv, last.ckpt, results.json untouched
    res["status"] = "complete"
    atomic_write_json(d / "results.json", res)


def test_sweep_skips_a_complete_run_only_with_the_same_fingerprint(tiny_run):
    from pebench.sweep.local import is_run_complete

    d = tiny_run / RUN
    fp = json.loads((d / "results.json").read_text())["fingerprint"]
    assert is_run_complete(d, fp)
    assert not is_run_complete(d, "0" * 64)
    assert is_run_complete(d)  # no fingerprint asked: any complete run


def test_sweep_computes_fingerprints_and_threads(tmp_path, monkeypatch):
    from pebench.cli.commands.sweep import sweep_threads
    from pebench.runner.config import RunConfig, config_to_dict, resolve
    from pebench.sweep import local as sweep

    seen = []
    monkeypatch.setattr(sweep, "run_sweep", lambda specs, **kw: seen.extend(specs) or [])
    assert main(["sweep", "--pes", "ape", "--seeds", "0,1", "--workers", "2", "--epochs", "2",
                 "--out", str(tmp_path / "s")]) == 0
    assert len(seen) == 2 and len({s.fingerprint for s in seen}) == 1  # two seeds of one configuration
    from pebench.tasks import resolve_task

    expected = resolve_task(resolve(RunConfig(dataset="shapes", pe="ape", epochs=2, out=str(tmp_path / "s"))))
    assert expected.task == "classification"  # the dataset's default task, as the run records it
    assert seen[0].fingerprint == fingerprint(config_to_dict(expected))
    assert all(s.threads == sweep_threads(2) for s in seen)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert sweep_threads(2) == max(1, cores // 2) and sweep_threads(10 ** 6) == 1
    env = sweep.runner_env(seen[0], base={"PATH": "/bin"})
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == str(sweep_threads(2))
    assert sweep.runner_env(seen[0], base={"OMP_NUM_THREADS": "7"})["OMP_NUM_THREADS"] == "7"  # user's choice kept


# ------------------------------------------------------------------------------------ lock
def test_second_run_on_a_locked_directory_exits_2_naming_the_holder(tiny_run, capsys):
    d = tiny_run / RUN
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (d / RUN_LOCK_NAME).write_text(json.dumps({"pid": holder.pid, "hostname": socket.gethostname(),
                                                   "start_time": None, "created": time.time()}))
        before = _snapshot(d)
        rc = main(["run", *TINY, "--analyses", "geometry", "--out", str(tiny_run)])
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert rc == 2 and f"pid {holder.pid}" in err and "in use" in err, err
        assert _snapshot(d) == before
    finally:
        holder.kill()
        holder.wait()
    # the holder is dead now: its lock is stale and is taken over
    lock = run_dir_lock(d)
    assert json.loads((d / RUN_LOCK_NAME).read_text())["pid"] == os.getpid()
    with pytest.raises(RunDirBusy):  # held by a live process (this one, through `lock`)
        run_dir_lock(d)
    lock.release()
    assert not (d / RUN_LOCK_NAME).exists()


# ------------------------------------------------------------------------------------ interrupts
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_writes_interrupted_with_resume_command(tmp_path, sig):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["OMP_NUM_THREADS"] = "1"
    out = tmp_path / "runs"
    args = [a if a != "1" else "200" for a in TINY]  # --epochs 200: still training when the signal comes
    p = subprocess.Popen([sys.executable, "-m", "pebench.cli", "run", *args, "--analyses", "none",
                          "--out", str(out)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    res_path = out / RUN / "results.json"
    deadline = time.monotonic() + 240
    while not (out / RUN / "last.ckpt").exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert p.poll() is None, p.communicate()[1][-2000:]
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 128 + int(sig), err[-2000:]
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("bench: interrupted")
    res = json.loads(res_path.read_text())
    assert res["status"] == "interrupted"
    assert res["interrupted_by"] == signal.Signals(sig).name
    assert res["resume_command"] == f"bench run --config {out / RUN / 'config.yaml'}"
    assert not (out / RUN / RUN_LOCK_NAME).exists()


# ------------------------------------------------------------------------------------ multi-node
def test_num_nodes_without_cluster_env_exits_2(tmp_path, monkeypatch, capsys):
    for v in ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "SLURM_NTASKS", "SLURM_JOB_NAME", "TORCHELASTIC_RUN_ID",
              "LOCAL_RANK", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(v, raising=False)
    rc = main(["run", *TINY, "--accelerator", "cpu", "--devices", "1", "--num-nodes", "2", "--out",
               str(tmp_path / "nn")])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 2 and "MASTER_ADDR" in err and "NODE_RANK" in err, err
    assert not (tmp_path / "nn").exists()


def test_ddp_strategy_does_not_search_unused_parameters():
    from pebench.runner.config import RunConfig
    from pebench.runner.run import DDP_TIMEOUT, prepare

    parts = prepare(RunConfig(dataset="shapes", pe="ape", epochs=1, batch_size=16, accelerator="cpu", devices=2,
                              strategy="ddp", data={"train_size": 16, "val_size": 16}, out="unused-out"))
    strat = parts.trainer.strategy
    assert strat._ddp_kwargs.get("find_unused_parameters") is False
    assert strat._timeout == DDP_TIMEOUT


@pytest.mark.slow
def test_rendezvous_timeout_is_one_line_exit_2(tmp_path):
    """Node 0 of a 2-node job whose other node never comes: a clear error after the DDP timeout,
    not a hang."""
    env = child_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), NODE_RANK="0", PEBENCH_DDP_TIMEOUT_S="2",
                    OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "pebench.cli", "run", *TINY, "--analyses", "none", "--accelerator",
                        "cpu", "--devices", "1", "--num-nodes", "2", "--strategy", "ddp", "--out", str(tmp_path)],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("bench: error: DDP rendezvous failed") and "NODE_RANK" in last, last
    assert "Traceback" not in r.stderr

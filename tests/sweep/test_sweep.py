"""Sweep: planning, skipping complete runs, retries, the summary, and locking across processes.

The fake runners are module-level (picklable for ``spawn`` workers) and get their side-channel
paths from ``spec.extra_args`` (``--log FILE``), so they work the same in child processes.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pebench.core.io import atomic_write_json
from pebench.sweep.local import RunLock, RunSpec, plan_sweep, run_sweep


def _log_path(spec: RunSpec) -> Path:
    return Path(spec.extra_args[spec.extra_args.index("--log") + 1])


def _complete(spec: RunSpec) -> None:
    atomic_write_json(spec.run_dir / "results.json", {"dataset": spec.dataset, "pe": spec.pe, "status": "complete"})


def _note(spec: RunSpec) -> None:
    with open(_log_path(spec), "a", encoding="utf-8") as f:
        f.write(f"{spec.key} {os.getpid()}\n")


def ok_runner(spec: RunSpec) -> int:
    _note(spec)
    _complete(spec)
    return 0


def slow_runner(spec: RunSpec) -> int:
    _note(spec)
    time.sleep(0.15)
    _complete(spec)
    return 0


def flaky_runner(spec: RunSpec) -> int:
    """Fails the first attempt of every run, then succeeds."""
    _note(spec)
    marker = spec.run_dir / "failed-once"
    if not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
        return 3
    _complete(spec)
    return 0


def bad_runner(spec: RunSpec) -> int:
    _note(spec)
    if spec.pe == "boom":
        raise RuntimeError("runner crashed")
    return 0 if spec.pe == "lies" else 1  # "lies": exit 0 without a complete results.json


def _invocations(log: Path) -> list[str]:
    return [l.split()[0] for l in log.read_text().splitlines()] if log.exists() else []


def _summary(out: Path) -> dict:
    return json.loads((out / "sweep_summary.json").read_text())["runs"]


def test_plan_layout_and_validation(tmp_path: Path) -> None:
    specs = plan_sweep(["d1", "d2"], ["ape", "none", "ape"], [0, 1], "vit-nano", tmp_path, ["--epochs", "1"])
    assert len(specs) == 8  # duplicate PE dropped
    assert specs[0].run_dir == tmp_path / "d1" / "ape" / "vit-nano" / "seed0"
    assert specs[0].command()[-2:] == ["--epochs", "1"]
    assert specs[0].command()[1:4] == ["-m", "pebench.cli", "run"]
    with pytest.raises(ValueError):
        plan_sweep(["a/b"], ["ape"], [0], "vit-nano", tmp_path)
    with pytest.raises(ValueError):
        plan_sweep(["d"], ["+rpt"], [0], "vit-nano", tmp_path)


def test_plan_rpt_variant_matches_bench_run(tmp_path: Path) -> None:
    """``ape+rpt`` runs ``bench run --pe ape --rpt`` in the directory that command writes."""
    from pebench.cli import build_parser
    from pebench.runner.config import run_config_from_args, run_dir_for

    specs = plan_sweep(["shapes"], ["ape", "ape+rpt"], [3], "vit-nano", tmp_path, ["--epochs", "1"])
    assert [s.key for s in specs] == ["shapes/ape/vit-nano/seed3", "shapes/ape+rpt/vit-nano/seed3"]
    plain, rpt = specs
    assert (plain.rpt, plain.pe_name, rpt.rpt, rpt.pe_name) == (False, "ape", True, "ape")
    assert "--rpt" not in plain.command()
    cmd = rpt.command()
    assert cmd[cmd.index("--pe") + 1] == "ape" and "--rpt" in cmd
    assert rpt.run_dir == tmp_path / "shapes" / "ape+rpt" / "vit-nano" / "seed3"
    for spec in specs:
        cfg = run_config_from_args(build_parser().parse_args(spec.command()[3:]))
        assert run_dir_for(cfg) == spec.run_dir and cfg.rpt == spec.rpt and cfg.epochs == 1
    with pytest.raises(ValueError):
        plan_sweep(["d"], ["ape"], ["0"], "vit-nano", tmp_path)  # type: ignore[list-item]
    with pytest.raises(ValueError):
        run_sweep(specs, ok_runner, retries=-1)


def test_skip_complete_and_summary(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    out = tmp_path / "out"
    specs = plan_sweep(["d"], ["ape", "none"], [0, 1], "m", out, ["--log", str(log)])
    _complete(specs[0])  # already done before the sweep
    res = run_sweep(specs, ok_runner, poll_interval=0.01)
    assert [r["status"] for r in res] == ["skipped", "complete", "complete", "complete"]
    assert sorted(_invocations(log)) == sorted(s.key for s in specs[1:])
    summary = _summary(out)
    assert set(summary) == {s.key for s in specs}
    assert summary[specs[1].key]["attempts"] == 1 and summary[specs[1].key]["exit_codes"] == [0]
    assert summary[specs[0].key]["status"] == "skipped" and summary[specs[0].key]["attempts"] == 0
    assert not list(out.rglob(".lock")) and not (out / ".summary.lock").exists()
    # second sweep: nothing runs; completed entries keep their record
    res2 = run_sweep(specs, ok_runner, poll_interval=0.01)
    assert [r["status"] for r in res2] == ["skipped"] * 4
    assert len(_invocations(log)) == 3
    assert _summary(out)[specs[1].key]["status"] == "complete"


def test_retries(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    out = tmp_path / "out"
    specs = plan_sweep(["d"], ["ape"], [0], "m", out, ["--log", str(log)])
    res = run_sweep(specs, flaky_runner, retries=1, poll_interval=0.01)
    assert res[0]["status"] == "complete" and res[0]["attempts"] == 2 and res[0]["exit_codes"] == [3, 0]
    # retries=0: the first failure is final
    specs0 = plan_sweep(["d"], ["none"], [0], "m", out, ["--log", str(log)])
    res0 = run_sweep(specs0, flaky_runner, retries=0, poll_interval=0.01)
    assert res0[0]["status"] == "failed" and res0[0]["exit_codes"] == [3]
    # failures of every kind are recorded, not raised
    bad = plan_sweep(["d"], ["boom", "lies", "fails"], [0], "m", out, ["--log", str(log)])
    resb = run_sweep(bad, bad_runner, retries=2, poll_interval=0.01)
    assert [r["status"] for r in resb] == ["failed"] * 3
    assert [r["exit_codes"] for r in resb] == [[None] * 3, [0] * 3, [1] * 3]
    assert "runner raised RuntimeError" in resb[0]["errors"][0]
    assert "not status 'complete'" in resb[1]["errors"][0]
    summary = _summary(out)
    assert {k: v["status"] for k, v in summary.items()} == {
        "d/ape/m/seed0": "complete", "d/none/m/seed0": "failed", "d/boom/m/seed0": "failed",
        "d/lies/m/seed0": "failed", "d/fails/m/seed0": "failed"}


def _independent_sweep(specs: list[RunSpec]) -> None:
    run_sweep(specs, slow_runner, retries=1, workers=1, poll_interval=0.02)


def test_two_independent_processes_split_the_work(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    out = tmp_path / "out"
    specs = plan_sweep(["d1", "d2"], ["ape", "none"], [0, 1], "m", out, ["--log", str(log)])
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_independent_sweep, args=(specs,)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0]
    runs = _invocations(log)
    assert sorted(runs) == sorted(s.key for s in specs)  # each run exactly once
    summary = _summary(out)
    assert set(summary) == {s.key for s in specs}
    assert all(v["status"] == "complete" and v["attempts"] == 1 for v in summary.values())


def test_workers_in_one_call(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    out = tmp_path / "out"
    specs = plan_sweep(["d"], ["ape", "none", "sincos"], [0, 1], "m", out, ["--log", str(log)])
    res = run_sweep(specs, slow_runner, workers=2, poll_interval=0.02)
    assert [r["key"] for r in res] == [s.key for s in specs]
    assert all(r["status"] == "complete" for r in res)
    assert sorted(_invocations(log)) == sorted(s.key for s in specs)
    assert os.getpid() not in {int(l.split()[1]) for l in log.read_text().splitlines()}


def test_stale_and_foreign_locks(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    out = tmp_path / "out"
    specs = plan_sweep(["d"], ["ape", "none"], [0], "m", out, ["--log", str(log)])
    ctx = multiprocessing.get_context("spawn")
    dead = ctx.Process(target=time.sleep, args=(0,))
    dead.start()
    dead.join()
    stale = {"pid": dead.pid, "hostname": socket.gethostname(), "start_time": None, "created": 0}
    foreign = {"pid": 1, "hostname": socket.gethostname() + "-elsewhere", "start_time": None, "created": 0}
    for spec, content in zip(specs, (stale, foreign)):
        spec.run_dir.mkdir(parents=True)
        (spec.run_dir / ".lock").write_text(json.dumps(content))
    res = run_sweep(specs, ok_runner, poll_interval=0.01)
    assert res[0]["status"] == "complete"  # stale lock of a dead local pid broken
    assert res[1]["status"] == "busy"  # another host's lock is left alone
    assert _invocations(log) == [specs[0].key]
    assert (specs[1].run_dir / ".lock").exists() and not (specs[0].run_dir / ".lock").exists()


def test_run_lock_exclusive(tmp_path: Path) -> None:
    a, b = RunLock(tmp_path / "x" / ".lock"), RunLock(tmp_path / "x" / ".lock")
    assert a.acquire()
    assert not b.acquire()  # held by a live process (this one)
    assert a.holder()["pid"] == os.getpid()
    a.release()
    assert b.acquire()
    b.release()
    assert not (tmp_path / "x" / ".lock").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_sigkilled_worker_takes_its_run_subprocess_with_it(tmp_path):
    """A sweep worker killed with SIGKILL does not leave its ``bench run`` child running (which
    would keep training while the worker's lock looks stale and another worker starts the run)."""
    import signal
    import textwrap
    pid_file = tmp_path / "child.pid"
    worker = textwrap.dedent(f"""
        import sys
        from pebench.sweep.local import default_runner
        class Spec:
            def command(self):
                return [sys.executable, "-c",
                        "import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"]
        default_runner(Spec())
    """)
    proc = subprocess.Popen([sys.executable, "-c", worker])
    try:
        deadline = time.time() + 60
        while not (pid_file.exists() and pid_file.read_text()) and time.time() < deadline:
            time.sleep(0.05)
        child = int(pid_file.read_text())
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            if Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z":
                break  # terminated, waiting to be reaped by init
            time.sleep(0.05)
        else:
            os.kill(child, signal.SIGKILL)
            raise AssertionError("the run subprocess outlived its SIGKILLed worker")
    finally:
        if proc.poll() is None:
            proc.kill()


def user_error_runner(spec: RunSpec) -> int:
    _note(spec)
    return 2


def test_exit_code_2_is_not_retried(tmp_path: Path) -> None:
    log = tmp_path / "log"
    specs = plan_sweep(["d"], ["ape"], [0], "m", tmp_path / "out", ["--log", str(log)])
    (outcome,) = run_sweep(specs, runner=user_error_runner, retries=3)
    assert outcome["status"] == "failed" and outcome["attempts"] == 1 and outcome["exit_codes"] == [2]
    assert _invocations(log) == [specs[0].key]


def interrupted_runner(spec: RunSpec) -> int:
    _note(spec)
    return 130  # `bench run` after Ctrl-C reached it


@pytest.mark.parametrize("workers", [1, 2])
def test_an_interrupted_run_stops_the_sweep_and_is_not_retried(tmp_path: Path, workers: int) -> None:
    """The run got the Ctrl-C but the sweep did not (started with SIGINT ignored): no retry, no
    further runs, and the summary says `interrupted` (as does the run's own results.json)."""
    log = tmp_path / "log"
    specs = plan_sweep(["d"], ["ape", "none", "sincos"], [0], "m", tmp_path / "out", ["--log", str(log)])
    with pytest.raises(KeyboardInterrupt):
        run_sweep(specs, runner=interrupted_runner, retries=3, workers=workers, poll_interval=0.01)
    runs = _invocations(log)
    assert 1 <= len(runs) <= workers and len(set(runs)) == len(runs)  # at most one run per worker, none twice
    assert {k: v["status"] for k, v in _summary(tmp_path / "out").items()} == {k: "interrupted" for k in runs}


def test_complete_run_of_another_configuration_is_not_skipped(tmp_path: Path) -> None:
    import dataclasses

    log = tmp_path / "log"
    (spec,) = plan_sweep(["d"], ["ape"], [0], "m", tmp_path / "out", ["--log", str(log)])
    atomic_write_json(spec.run_dir / "results.json", {"status": "complete", "fingerprint": "a" * 64})
    same = dataclasses.replace(spec, fingerprint="a" * 64)
    assert run_sweep([same], runner=ok_runner)[0]["status"] == "skipped"
    assert _invocations(log) == []
    other = dataclasses.replace(spec, fingerprint="b" * 64)
    assert run_sweep([other], runner=user_error_runner)[0]["status"] == "failed"  # handed to bench run
    assert _invocations(log) == [spec.key]


def test_sweep_validates_pass_through_flags_before_creating_anything(tmp_path: Path, capsys) -> None:
    from pebench.cli import main

    out = tmp_path / "out"
    assert main(["sweep", "--pes", "ape,none", "--epochs", "0", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench: error:") and "epochs" in err[0]
    assert not out.exists()


def _ctrl_c_live() -> None:
    """In the child before exec: SIGINT handled by default, as in a terminal's foreground job. A test
    run started in the background by a non-interactive shell inherits SIGINT *ignored*, and Python
    then installs no KeyboardInterrupt handler: the sweep would not see the Ctrl-C this test sends."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ctrl_c_ignored() -> None:
    """In the child before exec: SIGINT ignored, as in a background job of a non-interactive shell."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.slow
@pytest.mark.parametrize("sweep_sigint", ["live", "ignored"])
def test_ctrl_c_stops_a_sweep_without_traceback(tmp_path: Path, sweep_sigint: str) -> None:
    """Ctrl-C stops the sweep and its run. With SIGINT ignored in the sweep, only the run sees it:
    the sweep must stop on the run's exit 130 instead of retrying the run."""
    import signal

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["OMP_NUM_THREADS"] = "1"
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "pebench.cli", "sweep", "--pes", "ape", "--out", str(out),
                          "--epochs", "200", "--batch-size", "16", "--data-option", "train_size=32",
                          "--data-option", "val_size=16", "--analyses", "none", "--no-progress-bar"],
                         cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True,
                         preexec_fn=_ctrl_c_live if sweep_sigint == "live" else _ctrl_c_ignored)
    run_dir = out / "shapes" / "ape" / "vit-nano" / "seed0"
    deadline = time.monotonic() + 240
    while not (run_dir / "last.ckpt").exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert p.poll() is None, p.communicate()[1][-2000:]
    os.killpg(p.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole process group
    _, err = p.communicate(timeout=150)
    assert p.returncode == 130, err[-2000:]
    assert "Traceback" not in err, err[-3000:]
    assert json.loads((run_dir / "results.json").read_text())["status"] == "interrupted"
    entry = _summary(out)["shapes/ape/vit-nano/seed0"]
    assert entry["status"] == "interrupted" and entry["attempts"] == 1, entry  # not retried


_SLEEPY = '''
import os, time
def sleepy_runner(spec):
    open(os.path.join({piddir!r}, str(os.getpid())), "w").close()
    time.sleep(120)
    return 0
'''
_DRIVER = '''
import sys
sys.path.insert(0, {tmp!r})
from sleepy import sleepy_runner
from pebench.sweep.local import plan_sweep, run_sweep
if __name__ == "__main__":
    specs = plan_sweep(["d"], ["ape", "none"], [0], "m", {out!r}, [])
    run_sweep(specs, sleepy_runner, workers=2, poll_interval=0.05)
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_sigkilled_sweep_takes_its_workers_with_it(tmp_path):
    """Killing the ``bench sweep`` process itself (SIGKILL, no chance to clean up) must not leave its
    worker processes running the rest of the grid as orphans."""
    import signal
    piddir = tmp_path / "pids"
    piddir.mkdir()
    (tmp_path / "sleepy.py").write_text(_SLEEPY.format(piddir=str(piddir)))
    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER.format(tmp=str(tmp_path), out=str(tmp_path / "out")))
    proc = subprocess.Popen([sys.executable, str(driver)], cwd=tmp_path)
    try:
        deadline = time.time() + 120
        while len(list(piddir.iterdir())) < 2 and time.time() < deadline:
            time.sleep(0.1)
        workers = [int(p.name) for p in piddir.iterdir()]
        assert len(workers) == 2, "the sweep did not start two workers"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.time() + 30
        alive = set(workers)
        while alive and time.time() < deadline:
            for w in list(alive):
                try:
                    os.kill(w, 0)
                    if Path(f"/proc/{w}/stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z":
                        alive.discard(w)
                except (ProcessLookupError, FileNotFoundError):
                    alive.discard(w)
            time.sleep(0.1)
        for w in alive:
            os.kill(w, signal.SIGKILL)
        assert not alive, "sweep workers outlived their SIGKILLed sweep"
    finally:
        if proc.poll() is None:
            proc.kill()

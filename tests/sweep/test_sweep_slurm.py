"""``bench sweep --launcher slurm`` without a cluster.

* submitit's in-process ``debug`` executor runs a tiny shapes run through :class:`SlurmRun`;
* a fake SLURM on ``PATH`` (``sbatch``, ``srun``, ``squeue``, ``sacct``, ``scancel``, ``scontrol``: small
  Python scripts written into ``tmp_path``) records the submitted job script; the test checks its
  ``#SBATCH`` directives and then runs array tasks the way SLURM would (``SLURM_ARRAY_TASK_ID`` etc.),
  one of them preempted: the warning signal after ``last.ckpt`` was written, the requeue recorded by the
  fake ``scontrol``, the re-run resuming and finishing ``complete``;
* bad SLURM options are one line, exit code 2, and nothing is created.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pebench.cli import main
from pebench.sweep.slurm import SlurmRun, job_resources, parse_time, slurm_options, submit_sweep

submitit = pytest.importorskip("submitit")

#: a tiny CPU run: 64 training samples in 4 batches per epoch
TINY = ["--batch-size", "16", "--resolution", "16", "--data-option", "train_size=64", "--data-option",
        "val_size=16", "--analyses", "none", "--no-progress-bar", "--accelerator", "cpu"]

# ------------------------------------------------------------------------------------ fake SLURM

_SBATCH = '''#!{python}
import os, sys
state = {state!r}
os.makedirs(os.path.join(state, "jobs"), exist_ok=True)
counter = os.path.join(state, "next_id")
job_id = int(open(counter).read()) if os.path.exists(counter) else 1000
open(counter, "w").write(str(job_id + 1))
script = open(sys.argv[-1]).read()
if "--partition=nope" in script:
    sys.exit("sbatch: error: invalid partition specified: nope")
open(os.path.join(state, "jobs", f"{{job_id}}.sh"), "w").write(script)
with open(os.path.join(state, "calls.log"), "a") as f:
    f.write("sbatch " + " ".join(sys.argv[1:]) + "\\n")
print(f"Submitted batch job {{job_id}}")
'''

_SRUN = '''#!{python}
"""srun --unbuffered --output FILE --error FILE CMD...: run CMD with the log patterns filled in."""
import os, sys
state = {state!r}
args = sys.argv[1:]
files = {{}}
while args and args[0].startswith("--"):
    flag = args.pop(0)
    if flag in ("--output", "--error"):
        files[flag] = args.pop(0)
env = os.environ
subs = {{"%A": env.get("SLURM_ARRAY_JOB_ID", ""), "%a": env.get("SLURM_ARRAY_TASK_ID", ""),
        "%j": env.get("SLURM_JOB_ID", ""), "%t": env.get("SLURM_PROCID", "0")}}
for flag, path in files.items():
    for k, v in subs.items():
        path = path.replace(k, v)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1 if flag == "--output" else 2)
with open(os.path.join(state, "task.pid"), "w") as f:
    f.write(str(os.getpid()))
os.execvp(args[0], args)
'''

_RECORD = '''#!{python}
import os, sys
with open(os.path.join({state!r}, "calls.log"), "a") as f:
    f.write(os.path.basename(sys.argv[0]) + " " + " ".join(sys.argv[1:]) + "\\n")
if os.path.basename(sys.argv[0]) == "sacct":
    print("JobID|State|NodeList")
'''


class FakeSlurm:
    """A fake SLURM in ``tmp_path``: the commands on ``PATH`` and a way to run an array task."""

    def __init__(self, root: Path) -> None:
        self.state = root / "slurm_state"
        self.bin = root / "slurm_bin"
        self.state.mkdir()
        self.bin.mkdir()
        for name, text in [("sbatch", _SBATCH), ("srun", _SRUN), *[(n, _RECORD) for n in
                                                                    ("squeue", "sacct", "scancel", "scontrol")]]:
            path = self.bin / name
            path.write_text(text.format(python=sys.executable, state=str(self.state)))
            path.chmod(0o755)

    def scripts(self) -> dict[int, str]:
        return {int(p.stem): p.read_text() for p in sorted((self.state / "jobs").glob("*.sh"))}

    def calls(self) -> list[str]:
        log = self.state / "calls.log"
        return log.read_text().splitlines() if log.exists() else []

    def start_task(self, job_id: int, task: int, env: dict[str, str]) -> subprocess.Popen:
        """Run array task ``task`` of job ``job_id`` as SLURM would: the batch script with the job's variables."""
        script = self.state / "jobs" / f"{job_id}.sh"
        env = {**env, "SLURM_JOB_ID": str(job_id + 1 + task), "SLURM_ARRAY_JOB_ID": str(job_id),
               "SLURM_ARRAY_TASK_ID": str(task), "SLURM_NTASKS": "1", "SLURM_NTASKS_PER_NODE": "1",
               "SLURM_JOB_NUM_NODES": "1", "SLURM_NODEID": "0", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
               "SLURM_JOB_NODELIST": "localhost", "SLURM_NODELIST": "localhost", "SLURM_JOB_NAME": "pebench-sweep"}
        return subprocess.Popen(["bash", str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)


@pytest.fixture
def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    fake = FakeSlurm(tmp_path)
    monkeypatch.setenv("PATH", f"{fake.bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    return fake


def _directives(script: str) -> dict[str, str]:
    return dict(m.groups() for m in re.finditer(r"^#SBATCH --([\w-]+)=(\S+)$", script, re.M))


def _job_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SUBMITIT_")) and k != "PYTHONPATH"}
    env["OMP_NUM_THREADS"] = "1"
    return env


def _results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


# ------------------------------------------------------------------------------------ option checks


def test_parse_time_forms() -> None:
    assert parse_time("90") == 90
    assert parse_time("1:30") == 2  # seconds round up
    assert parse_time("4:00:00") == 240
    assert parse_time("1-12") == 36 * 60
    assert parse_time("1-00:30") == 24 * 60 + 30
    assert parse_time("0-00:00:01") == 1


@pytest.mark.parametrize("args, words", [
    (["--launcher", "slurm", "--gpus-per-task", "-1"], "--gpus-per-task"),
    (["--launcher", "slurm", "--time", "1:2:3:4"], "--time"),
    (["--launcher", "slurm", "--time", "soon"], "--time"),
    (["--launcher", "slurm", "--time", "0"], "--time"),
    (["--launcher", "slurm", "--partition", "gpu;rm -rf"], "--partition"),
    (["--launcher", "slurm", "--array-parallelism", "0"], "--array-parallelism"),
    (["--launcher", "slurm", "--slurm-option", "mem"], "--slurm-option"),
    (["--launcher", "slurm", "--slurm-option", "array=0-3"], "--slurm-option array"),
    (["--launcher", "slurm", "--workers", "2"], "--workers"),
    (["--partition", "gpu"], "--partition"),
    (["--time", "10"], "--time"),
    (["--gpus-per-task", "1"], "--gpus-per-task"),
    (["--array-parallelism", "4"], "--array-parallelism"),
    (["--slurm-option", "mem=4G"], "--slurm-option"),
])
def test_bad_slurm_options_are_one_line_before_anything(tmp_path, capsys, fake_slurm, args, words) -> None:
    out = tmp_path / "out"
    assert main(["sweep", "--pes", "ape", "--out", str(out), *args, *TINY]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench: error:") and words in err[0], err
    assert not out.exists() and not fake_slurm.calls()


def test_slurm_needs_sbatch_and_a_numeric_devices(tmp_path, capsys, fake_slurm, monkeypatch) -> None:
    out = tmp_path / "out"
    assert main(["sweep", "--pes", "ape", "--out", str(out), "--launcher", "slurm", *TINY, "--devices", "auto"]) == 2
    assert "--devices" in capsys.readouterr().err
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["sweep", "--pes", "ape", "--out", str(out), "--launcher", "slurm"]) == 2
    assert "sbatch" in capsys.readouterr().err
    assert not out.exists() and not fake_slurm.calls()


def test_job_resources_ddp_layout() -> None:
    cfg = argparse.Namespace(devices=4, num_nodes=2, accelerator="gpu")
    assert job_resources(cfg, None) == {"nodes": 2, "tasks_per_node": 4, "gpus_per_node": 4}
    assert job_resources(argparse.Namespace(devices=1, num_nodes=1, accelerator="cpu"), None)["gpus_per_node"] == 0
    assert job_resources(argparse.Namespace(devices="2", num_nodes=1, accelerator="auto"), 2)["gpus_per_node"] == 4


# ------------------------------------------------------------------------------------ submitit debug executor


@pytest.mark.slow
def test_debug_executor_runs_a_tiny_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """submitit's in-process executor: the submitted callable runs `bench run` and records the outcome."""
    from pebench.cli import build_parser
    from pebench.runner.config import run_config_from_args
    from pebench.sweep.local import plan_sweep

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "runs"
    specs = plan_sweep(["shapes"], ["ape"], [0], "vit-nano", out, [*TINY, "--epochs", "1"])
    cfgs = [run_config_from_args(build_parser().parse_args(s.command()[3:])) for s in specs]
    args = argparse.Namespace(partition=None, time="10", gpus_per_task=None, array_parallelism=None,
                              slurm_option=None, slurm_folder=None)
    rows = submit_sweep(specs, cfgs, slurm_options(args, out), retries=0, cluster="debug")
    assert [r["status"] for r in rows] == ["queued"]
    run_dir = specs[0].run_dir
    assert json.loads((run_dir / "slurm.json").read_text())["state"] == "queued"
    entry = rows[0]["job"].result()
    assert entry["status"] == "complete", entry
    assert _results(run_dir)["status"] == "complete"
    assert json.loads((out / "sweep_summary.json").read_text())["runs"][specs[0].key]["status"] == "complete"
    assert json.loads((run_dir / "slurm.json").read_text())["state"] == "complete"
    # a second submission finds the run complete: nothing is queued
    assert [r["status"] for r in submit_sweep(specs, cfgs, slurm_options(args, out), cluster="debug")] == ["skipped"]


def test_slurm_run_pickles_without_its_child(tmp_path: Path) -> None:
    import pickle

    from pebench.sweep.local import RunSpec

    task = SlurmRun(RunSpec("shapes", "ape", 0, "vit-nano", str(tmp_path)), 1, str(tmp_path / "s.json"))
    task._proc = object()  # not picklable in general; must not travel with the requeued submission
    again = pickle.loads(pickle.dumps(task))
    assert again.spec == task.spec and again._proc is None and not again._stopping


# ------------------------------------------------------------------------------------ fake sbatch


@pytest.mark.slow
def test_fake_sbatch_array_directives_preemption_and_resume(tmp_path: Path, fake_slurm: FakeSlurm,
                                                           capsys) -> None:
    """A 2-run sweep (2 PEs) as one SLURM array; one task is preempted after its checkpoint, requeued, and
    resumes to the end; the other runs to the end untouched. (Two runs, not a 2 x 2 grid: every array task is a
    `bench run` process, most of this test's time, and one preempted plus one plain task cover both paths.)"""
    out = tmp_path / "runs"
    rc = main(["sweep", "--pes", "none,ape", "--seeds", "0", "--out", str(out), "--launcher", "slurm",
               "--partition", "gpu-a100", "--time", "1:30:00", "--gpus-per-task", "1", "--array-parallelism", "1",
               "--slurm-option", "mem=8G", "--slurm-option", "account=pe_bench", *TINY, "--epochs", "6"])
    printed = capsys.readouterr()
    assert rc == 0, printed.err
    scripts = fake_slurm.scripts()
    assert len(scripts) == 1  # one array for the whole grid
    job_id, script = next(iter(scripts.items()))
    d = _directives(script)
    assert d["array"] == "0-1%1" and d["partition"] == "gpu-a100" and d["time"] == "90"
    assert d["gpus-per-node"] == "1" and d["nodes"] == "1" and d["ntasks-per-node"] == "1"
    assert d["mem"] == "8G" and d["account"] == "pe_bench" and d["signal"] == "USR2@90"
    runs = {(pe, s): out / "shapes" / pe / "vit-nano" / f"seed{s}" for pe in ("none", "ape") for s in (0,)}
    task_of: dict[tuple[str, int], int] = {}
    for key, run_dir in runs.items():
        state = json.loads((run_dir / "slurm.json").read_text())
        assert state["state"] == "queued" and state["job_id"].startswith(f"{job_id}_")
        task_of[key] = int(state["job_id"].rsplit("_", 1)[1])
        assert not (run_dir / "results.json").exists()
    assert sorted(task_of.values()) == [0, 1]
    capsys.readouterr()
    assert main(["runs", "--results", str(out)]) == 0
    listing = capsys.readouterr().out
    assert "2 run(s): 2 queued" in listing and f"{job_id}_0" in listing, listing

    # one task is preempted: the warning signal once last.ckpt exists, to every process of the step
    victim = ("ape", 0)
    proc = fake_slurm.start_task(job_id, task_of[victim], _job_env())
    deadline = time.monotonic() + 300
    while not (runs[victim] / "last.ckpt").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()[0][-3000:]
    task_pid = int((fake_slurm.state / "task.pid").read_text())
    child_pid = json.loads((runs[victim] / "slurm.json").read_text())["child_pid"]
    for pid in (task_pid, child_pid):  # the bench run child ignores it; the task checkpoints and requeues
        os.kill(pid, signal.SIGUSR2)
    log = proc.communicate(timeout=240)[0]
    assert f"scontrol requeue {job_id}_{task_of[victim]}" in fake_slurm.calls(), log[-3000:]
    assert _results(runs[victim])["status"] == "interrupted", log[-3000:]
    state = json.loads((runs[victim] / "slurm.json").read_text())
    assert state["state"] == "requeued" and state["requeues"] == 1
    assert not (out / "sweep_summary.json").exists() or \
        "shapes/ape/vit-nano/seed0" not in json.loads((out / "sweep_summary.json").read_text())["runs"]

    # the requeued task and the other one run to the end
    for task in range(2):
        proc = fake_slurm.start_task(job_id, task, _job_env())
        log = proc.communicate(timeout=400)[0]
        assert proc.returncode == 0, log[-3000:]
    res = _results(runs[victim])
    assert res["status"] == "complete" and res["resumed_from"] and res["resumed_from"]["epoch"] >= 1, res
    for key in runs:
        if key != victim:
            assert _results(runs[key])["status"] == "complete" and not _results(runs[key])["resumed_from"]
    summary = json.loads((out / "sweep_summary.json").read_text())["runs"]
    assert {k: v["status"] for k, v in summary.items()} == {f"shapes/{pe}/vit-nano/seed{s}": "complete"
                                                            for pe, s in runs}
    assert summary["shapes/ape/vit-nano/seed0"]["slurm_job_id"] == f"{job_id}_{task_of[victim]}"
    assert main(["runs", "--results", str(out)]) == 0
    assert "2 run(s): 2 complete" in capsys.readouterr().out


def test_ddp_run_is_one_array_task_with_a_task_per_rank(tmp_path: Path, fake_slurm: FakeSlurm, capsys) -> None:
    out = tmp_path / "runs"
    assert main(["sweep", "--pes", "ape", "--out", str(out), "--launcher", "slurm", *TINY, "--epochs", "1",
                 "--devices", "2", "--num-nodes", "2", "--strategy", "ddp", "--gpus-per-task", "1"]) == 0, \
        capsys.readouterr().err
    (script,) = fake_slurm.scripts().values()
    d = _directives(script)
    assert d["nodes"] == "2" and d["ntasks-per-node"] == "2" and d["gpus-per-node"] == "2"
    assert "array" not in d  # a single run is a plain job, not an array
    assert "partition" not in d and d["time"] == "240"  # defaults: the cluster's partition, 4 hours


def test_bench_runs_reads_slurm_state(tmp_path: Path) -> None:
    """slurm.json stands for a run until results.json says running/complete; a requeued run is queued again."""
    from pebench.leaderboard.runs import collect_runs

    def put(rel: str, slurm: dict | None = None, results: dict | None = None) -> None:
        d = tmp_path / rel
        d.mkdir(parents=True)
        if slurm is not None:
            (d / "slurm.json").write_text(json.dumps(slurm))
        if results is not None:
            (d / "results.json").write_text(json.dumps(results))

    res = {"dataset": "shapes", "pe": "ape", "model": "vit-nano", "seed": 0}
    put("shapes/ape/vit-nano/seed0", {"job_id": "7_0", "state": "queued"})
    put("shapes/ape/vit-nano/seed1", {"job_id": "7_1", "state": "requeued"},
        {**res, "seed": 1, "status": "interrupted"})
    put("shapes/ape/vit-nano/seed2", {"job_id": "7_2", "state": "running"}, {**res, "seed": 2, "status": "running"})
    put("shapes/ape/vit-nano/seed3", {"job_id": "7_3", "state": "failed", "folder": "logs/%j"})
    rows = {r["seed"]: r for r in collect_runs(tmp_path)}
    assert rows[0]["status"] == "queued" and "7_0" in rows[0]["reason"] and rows[0]["pe"] == "ape"
    assert rows[1]["status"] == "queued" and "requeued" in rows[1]["reason"]
    assert rows[2]["status"] == "running" and "7_2" not in rows[2]["reason"]
    assert rows[3]["status"] == "failed" and "logs/%j" in rows[3]["reason"]


def test_sbatch_refusal_is_one_line(tmp_path: Path, fake_slurm: FakeSlurm, capsys) -> None:
    out = tmp_path / "runs"
    assert main(["sweep", "--pes", "ape", "--out", str(out), "--launcher", "slurm", "--partition", "nope",
                 *TINY, "--epochs", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "bench: error: sbatch refused the array of 1 run(s): sbatch: error: invalid partition " \
                      "specified: nope", err
    assert not fake_slurm.scripts()


def test_requeued_task_removes_only_its_own_previous_lock(tmp_path: Path) -> None:
    """A task killed on node A before its requeue left .run.lock naming A; the requeued task on node B
    removes it only when it names the child that this task recorded, never another process's lock."""
    from pebench.sweep.slurm import _clear_own_stale_lock

    lock = tmp_path / ".run.lock"
    state = {"job_id": "7_0", "host": "node-a", "child_pid": 4242}
    lock.write_text(json.dumps({"hostname": "node-a", "pid": 4343}))
    _clear_own_stale_lock(tmp_path, state)
    assert lock.exists()  # someone else's run
    lock.write_text(json.dumps({"hostname": "node-a", "pid": 4242}))
    _clear_own_stale_lock(tmp_path, state)
    assert not lock.exists()

"""``bench sweep --launcher slurm``: the sweep's runs as a SLURM job array, submitted through submitit.

The local scheduler (:mod:`pebench.sweep.local`) runs the grid on this machine. With ``--launcher slurm``
:func:`submit_sweep` hands every run that is not already complete (same configuration fingerprint)
to SLURM instead, as **one array task per run**, and returns once the array is queued:

* the array is ``sbatch --array=0-<n-1>%<array_parallelism>``, with ``--partition``, ``--time``
  (minutes), the GPUs and any extra ``--slurm-option KEY=VALUE`` directives;
* each array task runs :class:`SlurmRun`: it starts ``bench run`` for its spec
  (:meth:`RunSpec.command`, the command the local scheduler runs), retries a failed run like the local
  scheduler (``--retries``), and records the outcome in ``<out>/sweep_summary.json`` when it ends;
* a DDP run (``--devices D --num-nodes K``) is one array task of ``K`` nodes with ``D`` SLURM tasks
  (processes) per node, one per rank as Lightning's ``SLURMEnvironment`` expects, and
  ``D x gpus_per_task`` GPUs per node (every rank sees all GPUs of its node and takes the one of its
  local rank). Rank 0 records the outcome; the other ranks only run ``bench run``;
* **time limits and preemption**: submitit asks SLURM for its warning signal (``USR2``, 90 s before
  the end) and, when it comes, calls :meth:`SlurmRun.checkpoint`: the ``bench run`` child is stopped
  with SIGINT (it records ``interrupted``; its ``last.ckpt`` is at most one epoch old) and the task is
  requeued (``scontrol requeue``, up to 3 time-outs). The requeued task runs the same ``bench run``
  command, which resumes from ``last.ckpt`` after its configuration fingerprint check. The child
  ignores the warning signal itself, so only this checkpoint path stops it.

State of a queued run, for ``bench runs``: at submission the launcher writes ``<run_dir>/slurm.json``
(``job_id``, ``state: queued``); the task updates it (``running``, ``requeued``, then the outcome).
``results.json`` (``running`` / ``complete`` ...) supersedes it as soon as ``bench run`` has started.

submitit is imported only here and only when this launcher is used (an optional dependency that
costs start-up time). The SLURM options are validated before anything is submitted or created
(:func:`slurm_options`: one-line :class:`ConfigError`, exit code 2).
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from pebench.core.errors import ConfigError
from pebench.core.io import atomic_write_json, parse_json, read_json
from pebench.runner.integrity import RUN_LOCK_NAME
from pebench.sweep.local import (
    INTERRUPT_GRACE_S,
    SUMMARY_NAME,
    RunSpec,
    SweepRunInterrupted,
    die_with_parent,
    execute_with_retries,
    is_run_complete,
    record_in_summary,
    start_run,
    summary_entry,
)

__all__ = ["SlurmOptions", "SlurmRun", "slurm_options", "check_local_launcher", "parse_time", "job_resources",
           "submit_sweep", "check_slurm_commands", "SLURM_STATE_NAME", "SLURM_ONLY_FLAGS"]

log = logging.getLogger("pebench.sweep.local")

#: the launcher's state file in each run directory (``bench runs`` reads it)
SLURM_STATE_NAME = "slurm.json"
#: ``bench sweep`` flags that only mean something with ``--launcher slurm`` (argparse dest -> flag)
SLURM_ONLY_FLAGS = {"partition": "--partition", "time": "--time", "gpus_per_task": "--gpus-per-task",
                    "array_parallelism": "--array-parallelism", "slurm_option": "--slurm-option",
                    "slurm_folder": "--slurm-folder"}
#: sbatch directives the launcher sets itself: ``--slurm-option`` may not override them
_MANAGED_DIRECTIVES = {"array": "one array task per run", "partition": "--partition", "time": "--time",
                       "nodes": "the run's --num-nodes", "ntasks-per-node": "the run's --devices",
                       "gpus-per-node": "--gpus-per-task", "gpus-per-task": "--gpus-per-task",
                       "gpus": "--gpus-per-task", "output": "--slurm-folder", "error": "--slurm-folder",
                       "signal": "submitit's requeue signal", "open-mode": "submitit"}
#: requeues after a time limit before a task gives up (submitit's ``max_num_timeout``)
MAX_TIMEOUT_REQUEUES = 3
_DEFAULT_TIME = "4:00:00"
#: SLURM partition names (comma list allowed)
_PARTITION_RE = re.compile(r"^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$")
_OPTION_KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
#: SLURM --time forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S
_TIME_RE = re.compile(r"^(?:(?P<days>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?"
                      r"|(?P<a>\d+)(?::(?P<b>\d+)(?::(?P<c>\d+))?)?)$")


@dataclass(frozen=True)
class SlurmOptions:
    """The validated SLURM settings of a sweep (see :func:`slurm_options`)."""

    folder: str  # submitit's folder of job scripts, pickles and logs (``%j``: the job id)
    time_min: int  # --time in whole minutes (seconds rounded up)
    partition: str | None = None
    gpus_per_task: int | None = None  # None: 1, or 0 for --accelerator cpu runs
    array_parallelism: int = 256
    additional: dict[str, str] = field(default_factory=dict)  # extra #SBATCH --KEY=VALUE


def parse_time(text: str) -> int:
    """A SLURM ``--time`` value (``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``) -> whole
    minutes, seconds rounded up; :class:`ConfigError` for anything else or for zero."""
    m = _TIME_RE.match(str(text).strip())
    if not m:
        raise ConfigError(f"--time {text!r} is not a SLURM time limit; use minutes, MM:SS, HH:MM:SS, D-HH, "
                          f"D-HH:MM or D-HH:MM:SS (e.g. 4:00:00)")
    g = {k: int(v) if v is not None else None for k, v in m.groupdict().items()}
    if g["days"] is not None:
        seconds = g["days"] * 86400 + g["dh"] * 3600 + (g["dm"] or 0) * 60 + (g["ds"] or 0)
    elif g["c"] is not None:  # H:M:S
        seconds = g["a"] * 3600 + g["b"] * 60 + g["c"]
    else:  # M or M:S
        seconds = g["a"] * 60 + (g["b"] or 0)
    if seconds <= 0:
        raise ConfigError(f"--time {text!r} must be longer than zero")
    return -(-seconds // 60)


def _first_control(text: str) -> str | None:
    """The first character of ``text`` that is not printable on one line (C0/C1 controls, DEL, line and
    paragraph separators), as its escape (``'\\n'``); ``None`` when there is none."""
    for ch in text:
        if not ch.isprintable() and ch != " ":
            return repr(ch)[1:-1]
    return None


def _has_control_characters(text: str) -> bool:
    return _first_control(text) is not None


def _option_pairs(items: Sequence[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = str(item).partition("=")
        key = key.strip().lstrip("-")
        if not sep or not _OPTION_KEY_RE.match(key) or not value.strip():
            raise ConfigError(f"--slurm-option {item!r} must be KEY=VALUE with an sbatch option name, e.g. "
                              f"--slurm-option mem=32G or --slurm-option account=myproject")
        key = key.replace("_", "-")
        if _has_control_characters(value):  # a newline would end the #SBATCH line: the rest would run as shell
            raise ConfigError(f"--slurm-option {key} holds a control character ({_first_control(value)}); an "
                              f"sbatch value is one line of printable text")
        if key in _MANAGED_DIRECTIVES:
            raise ConfigError(f"--slurm-option {key} is set by the launcher ({_MANAGED_DIRECTIVES[key]})")
        out[key] = value.strip()
    return out


def slurm_options(args: argparse.Namespace, out: str | os.PathLike) -> SlurmOptions:
    """Validate the SLURM flags of ``bench sweep --launcher slurm`` (:class:`ConfigError` naming the flag)."""
    partition = args.partition
    if partition is not None and not _PARTITION_RE.match(partition):
        raise ConfigError(f"--partition {partition!r} is not a SLURM partition name (letters, digits, '_', '-', "
                          f"'.'; several separated by commas)")
    if args.gpus_per_task is not None and args.gpus_per_task < 0:
        raise ConfigError(f"--gpus-per-task must be >= 0, got {args.gpus_per_task}")
    parallelism = 256 if args.array_parallelism is None else args.array_parallelism
    if parallelism < 1:
        raise ConfigError(f"--array-parallelism must be >= 1 (array tasks running at once), got {parallelism}")
    time_min = parse_time(args.time if args.time is not None else _DEFAULT_TIME)
    folder = args.slurm_folder if args.slurm_folder is not None else os.path.join(os.fspath(out), "slurm_logs", "%j")
    if not str(folder).strip():
        raise ConfigError("--slurm-folder must name a directory, got an empty string")
    if _has_control_characters(str(folder)):  # it is written into the job script's #SBATCH --output line
        raise ConfigError(f"--slurm-folder holds a control character ({_first_control(str(folder))}); expected a "
                          f"directory path on one line")
    return SlurmOptions(folder=os.path.abspath(folder), time_min=time_min, partition=partition,
                        gpus_per_task=args.gpus_per_task, array_parallelism=parallelism,
                        additional=_option_pairs(args.slurm_option))


def check_slurm_commands() -> None:
    """:class:`ConfigError` unless SLURM's ``sbatch`` and ``srun`` are on ``PATH`` (a login node)."""
    missing = [c for c in ("sbatch", "srun") if shutil.which(c) is None]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise ConfigError(f"--launcher slurm submits with sbatch, but {' and '.join(missing)} {verb} not on PATH; "
                          f"run bench sweep on a SLURM login node, or use --launcher local")


def check_local_launcher(args: argparse.Namespace) -> None:
    """``--launcher local`` with a SLURM-only flag: :class:`ConfigError` (the flag would do nothing)."""
    given = [flag for dest, flag in SLURM_ONLY_FLAGS.items() if getattr(args, dest, None) is not None]
    if given:
        raise ConfigError(f"{given[0]} is a SLURM option; add --launcher slurm (the default launcher, local, runs "
                          f"the sweep on this machine)")


def job_resources(cfg: Any, gpus_per_task: int | None) -> dict[str, int]:
    """submitit's ``nodes`` / ``tasks_per_node`` / ``gpus_per_node`` for a run configuration: one SLURM
    task per DDP rank (``--devices`` per node, ``--num-nodes`` nodes), ``gpus_per_task`` GPUs each
    (default 1, or 0 when the run says ``--accelerator cpu``)."""
    devices = cfg.devices
    if isinstance(devices, str) and devices.strip().isdigit():
        devices = int(devices)
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ConfigError(f"--launcher slurm needs --devices as a number of devices per node (one SLURM task "
                          f"each), got {cfg.devices!r}")
    gpus = gpus_per_task if gpus_per_task is not None else (0 if str(cfg.accelerator) == "cpu" else 1)
    return {"nodes": int(cfg.num_nodes), "tasks_per_node": devices, "gpus_per_node": devices * gpus}


# ------------------------------------------------------------------------------------ state file


def _read_state(run_dir: Path) -> dict[str, Any]:
    try:
        data = read_json(run_dir / SLURM_STATE_NAME)  # bounded: a hostile state file reads as no state
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _update_state(run_dir: Path, **values: Any) -> None:
    """Merge ``values`` into ``<run_dir>/slurm.json`` (atomic rewrite; one writer per run at a time)."""
    state = {**_read_state(run_dir), **values, "updated_at": time.time()}
    atomic_write_json(run_dir / SLURM_STATE_NAME, state)


def _clear_own_stale_lock(run_dir: Path, state: dict[str, Any]) -> None:
    """Remove ``.run.lock`` when its holder is this task's previous incarnation on another node (killed
    before requeueing): a lock of another host is otherwise never broken, and the requeued run would
    be refused as busy. The holder is recognised by the host and pid the task recorded for its child."""
    lock = run_dir / RUN_LOCK_NAME
    try:
        holder = parse_json(lock.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(holder, dict) or holder.get("hostname") == socket.gethostname():
        return  # this host's stale locks are broken by bench run itself
    if [holder.get("hostname"), holder.get("pid")] == [state.get("host"), state.get("child_pid")]:
        log.warning("removing %s of this task's previous incarnation (%s:%s)", lock, holder.get("hostname"),
                    holder.get("pid"))
        lock.unlink(missing_ok=True)


# ------------------------------------------------------------------------------------ the job


def _preemption_signal() -> int:
    """submitit's warning signal (``SUBMITIT_PREEMPT_SIGNAL``, default ``USR2``)."""
    return int(getattr(signal, "SIG" + os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2"), signal.SIGUSR2))


def _child_setup() -> None:
    """In the ``bench run`` child before exec: die with the task, and ignore the warning signal that
    SLURM sends to every process of the step (the task's checkpoint stops the child instead)."""
    die_with_parent()
    signal.signal(_preemption_signal(), signal.SIG_IGN)


def _stop_child(proc: subprocess.Popen, grace_s: float = INTERRUPT_GRACE_S) -> None:
    """SIGINT to ``proc``, reaped within ``grace_s`` or killed. Called from the signal handler while the
    interrupted frame sits in ``proc.wait()``, which holds the Popen's internal lock: so ``os.waitpid``
    here, never ``proc.wait`` / ``proc.poll`` (they would wait for that lock forever or see nothing)."""
    if proc.returncode is not None:
        return
    try:
        os.kill(proc.pid, signal.SIGINT)
        deadline = time.monotonic() + grace_s
        while True:
            pid, status = os.waitpid(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.kill(proc.pid, signal.SIGKILL)
                pid, status = os.waitpid(proc.pid, 0)
                break
            time.sleep(0.1)
    except (ProcessLookupError, ChildProcessError):  # already reaped
        return
    proc.returncode = os.waitstatus_to_exitcode(status)


class SlurmRun:
    """The callable of one array task: ``bench run`` for ``spec``, its outcome recorded; checkpointable."""

    def __init__(self, spec: RunSpec, retries: int, summary_path: str) -> None:
        self.spec = spec
        self.retries = retries
        self.summary_path = summary_path
        self._proc: subprocess.Popen | None = None
        self._stopping = False

    def __getstate__(self) -> dict[str, Any]:  # the child process is not part of the submission
        return {"spec": self.spec, "retries": self.retries, "summary_path": self.summary_path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["spec"], state["retries"], state["summary_path"])

    def _run(self, spec: RunSpec) -> int:
        """The runner of :func:`pebench.sweep.local.execute_with_retries` inside the task."""
        if self._stopping:  # the task was told to stop (time limit hit too often): no new attempt
            raise KeyboardInterrupt
        self._proc = start_run(spec, preexec_fn=_child_setup)
        _update_state(spec.run_dir, child_pid=self._proc.pid)
        try:
            return self._proc.wait()
        except Exception:  # submitit gave up requeueing (raised in its signal handler): interrupted
            if self._stopping:
                raise KeyboardInterrupt from None
            raise

    def __call__(self) -> dict[str, Any]:
        import submitit  # deferred: start-up time (submitit: `bench --help` imports this module)

        env = submitit.JobEnvironment()
        spec = self.spec
        if env.global_rank != 0:  # another DDP rank: Lightning's SLURMEnvironment pairs it with rank 0
            code = start_run(spec, preexec_fn=_child_setup).wait()
            return {"key": spec.key, "rank": env.global_rank, "exit_code": code}
        state = _read_state(spec.run_dir)
        if state.get("job_id") == env.job_id:
            _clear_own_stale_lock(spec.run_dir, state)
        _update_state(spec.run_dir, job_id=env.job_id, state="running", host=socket.gethostname(),
                      started_at=time.time())
        if is_run_complete(spec.run_dir, spec.fingerprint):  # finished meanwhile (e.g. by a local sweep)
            entry = summary_entry(spec, "skipped", 0, [], [], 0.0)
        else:
            try:
                entry = execute_with_retries(spec, self._run, self.retries)
            except SweepRunInterrupted as e:  # scancel, or a stop without requeue: recorded, not retried
                entry = e.entry
        entry["slurm_job_id"] = env.job_id
        _update_state(spec.run_dir, state=entry["status"], finished_at=time.time())
        try:
            record_in_summary(Path(self.summary_path), entry)
        except (OSError, TimeoutError) as e:  # results.json still tells the outcome
            log.warning("could not record %s in %s: %s", spec.key, self.summary_path, e)
        return entry

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """submitit's hook on the time-limit / preemption signal: stop ``bench run`` (SIGINT: it records
        ``interrupted`` and exits; its ``last.ckpt`` is kept) and requeue this task unchanged."""
        from submitit.helpers import DelayedSubmission  # deferred: start-up time (submitit)

        self._stopping = True
        if self._proc is not None:
            _stop_child(self._proc)
        state = _read_state(self.spec.run_dir)
        _update_state(self.spec.run_dir, state="requeued", requeues=int(state.get("requeues", 0)) + 1)
        return DelayedSubmission(SlurmRun(self.spec, self.retries, self.summary_path))


# ------------------------------------------------------------------------------------ submission


def submit_sweep(specs: Sequence[RunSpec], cfgs: Sequence[Any], options: SlurmOptions, retries: int = 1,
                 *, cluster: str = "slurm", summary_path: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """Submit every spec not already complete as one array task (one array per distinct resource
    shape, normally one); ``cfgs`` are the specs' resolved run configurations (their ``--devices``,
    ``--num-nodes``, ``--accelerator``). Complete runs are recorded ``skipped`` in the summary.

    -> one row per spec in plan order: ``key``, ``status`` (``queued`` or ``skipped``), ``job_id``
    and, for the debug / local executors of the tests (``cluster``), the ``job`` object.
    """
    import submitit  # deferred: start-up time (submitit: `bench --help` imports this module)

    specs = list(specs)
    if not specs:
        return []
    if summary_path is None:
        summary_path = Path(specs[0].out) / SUMMARY_NAME
    summary = os.path.abspath(summary_path)
    groups: dict[tuple[int, int, int], list[RunSpec]] = {}
    rows: dict[str, dict[str, Any]] = {}
    for spec, cfg in zip(specs, cfgs, strict=True):
        res = job_resources(cfg, options.gpus_per_task)  # before anything is created: a bad --devices stops all
        if is_run_complete(spec.run_dir, spec.fingerprint):
            rows[spec.key] = {"key": spec.key, "status": "skipped", "job_id": None}
        else:
            groups.setdefault((res["nodes"], res["tasks_per_node"], res["gpus_per_node"]), []).append(spec)
    Path(summary).parent.mkdir(parents=True, exist_ok=True)
    for spec in specs:
        if rows.get(spec.key, {}).get("status") == "skipped":
            record_in_summary(Path(summary), summary_entry(spec, "skipped", 0, [], [], 0.0))
    for (nodes, tasks_per_node, gpus_per_node), group in groups.items():
        executor = submitit.AutoExecutor(folder=options.folder, cluster=cluster,
                                         slurm_max_num_timeout=MAX_TIMEOUT_REQUEUES)
        executor.update_parameters(
            name="pebench-sweep", timeout_min=options.time_min, nodes=nodes, tasks_per_node=tasks_per_node,
            gpus_per_node=gpus_per_node or None, slurm_partition=options.partition,
            slurm_array_parallelism=options.array_parallelism,
            slurm_additional_parameters=dict(options.additional) or None)
        try:
            jobs = executor.submit_array([SlurmRun(spec, retries, summary) for spec in group])
        except (submitit.core.utils.FailedJobError, submitit.core.utils.FailedSubmissionError) as e:
            lines = [ln for ln in str(e).splitlines() if ln.strip()]  # sbatch's own error message
            raise ConfigError(f"sbatch refused the array of {len(group)} run(s): "
                              f"{lines[-1] if lines else type(e).__name__}") from None
        for spec, job in zip(group, jobs):
            _update_state(spec.run_dir, job_id=str(job.job_id), state="queued", submitted_at=time.time(),
                          folder=options.folder, key=spec.key, requeues=0)
            rows[spec.key] = {"key": spec.key, "status": "queued", "job_id": str(job.job_id), "job": job}
    return [rows[s.key] for s in specs]

"""Sweeps: run the grid datasets × PEs × seeds, resumable, retrying, safe for parallel workers.

Each (dataset, pe, seed) maps to the run directory ``<out>/<dataset>/<pe>/<model>/seed<S>``
(docs/architecture.md §5). A PE may name a variant: ``ape+rpt`` runs ``bench run --pe ape --rpt``, whose
directory is ``<out>/<dataset>/ape+rpt/<model>/seed<S>``, exactly where ``bench run`` writes it.
:func:`run_sweep` walks the plan and, per run,

1. takes the run's lock ``<run_dir>/.lock`` (``os.open(O_CREAT | O_EXCL)``, content: pid,
   hostname, process start time). A lock held by a live process is *busy*: the worker goes on and
   comes back to it later. A lock whose pid is dead on this host (or was reused by another
   process) is stale and is broken (under a ``.lock.break`` guard, so two workers never break
   the same lock twice). Locks held by *another* host cannot be checked: the worker leaves them
   and reports the run as ``busy`` (remove such a lock by hand if its host died);
2. with the lock held: if a concurrent worker of this sweep already recorded the run (summary
   entry finished after this sweep started), adopts that outcome without running it again; else if
   ``results.json`` says ``status: complete`` the run is ``skipped``; else runs it with
   ``runner(spec) -> exit code``, retrying failures up to ``retries`` times. An attempt succeeds
   when the exit code is 0 *and* ``results.json`` then says ``complete``;
3. records the outcome in ``<out>/sweep_summary.json`` by read-modify-write under
   ``<out>/.summary.lock``, so concurrent workers never lose each other's rows. A ``skipped`` entry
   never overwrites a ``complete`` one (the richer record of how the run was made is kept).

A complete run is skipped only when it was made with the configuration asked for now: when the
spec carries a ``fingerprint`` (``bench sweep`` computes it from the resolved run configuration,
see :mod:`pebench.runner.integrity`), the run directory's ``results.json`` must record the same one;
otherwise the run is started, and ``bench run`` refuses the directory with exit code 2 and a line
naming the differing keys. A run that exits with code 2 (a user error: bad flags, a directory
holding another configuration, a busy directory) is not retried: it would fail the same way.

Threads: ``RunSpec.threads`` (``bench sweep --workers W`` sets it to ``cores // W``) becomes
``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` of the ``bench run`` subprocess (torch sizes its intra-op
thread pool from them), so W parallel runs do not oversubscribe the cores; a value the user
exported is kept.

Ctrl-C: the workers and their ``bench run`` subprocesses get the SIGINT too (same process group;
it is also forwarded); each ``bench run`` writes ``status: interrupted`` and exits, the workers
exit quietly, and ``run_sweep`` raises ``KeyboardInterrupt`` for the CLI to report in one line.
A run that ends interrupted (exit 130 / 143) is never retried: it stops the sweep the same way,
even when the sweep itself did not see the signal (started with SIGINT ignored).

Several independent ``bench sweep`` processes on one output directory therefore split the work
and each run is executed once; ``workers=N`` starts N such worker processes (``spawn`` context,
so the runner must be picklable, e.g. a module-level function). After the workers exit, the
calling process makes a final pass itself, so a worker that crashed loses no run.

A worker killed even with SIGKILL takes its ``bench run`` subprocess with it on Linux (the child
asks for SIGTERM on its parent's death), so a stale lock never hides a run that is still going;
on other platforms that child keeps running, so stop sweeps there with SIGINT/SIGTERM.

This is the local scheduler (``bench sweep --launcher local``, the default); ``--launcher slurm`` submits
the same runs as a SLURM job array instead (:mod:`pebench.sweep.slurm`, which reuses :func:`start_run`,
the retry loop and the summary recording of this module).
"""
from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from pebench.core.io import atomic_write_json, read_json
from pebench.core.locks import RunLock
from pebench.runner.integrity import grouping_fingerprint

__all__ = [
    "RunSpec",
    "RunLock",
    "plan_sweep",
    "run_sweep",
    "default_runner",
    "start_run",
    "is_run_complete",
    "run_fingerprint",
    "runner_env",
    "die_with_parent",
    "summary_entry",
    "execute_with_retries",
    "record_in_summary",
    "SweepRunInterrupted",
    "INTERRUPT_GRACE_S",
    "SUMMARY_NAME",
]

log = logging.getLogger("pebench.sweep.local")

SUMMARY_NAME = "sweep_summary.json"
#: suffix of a PE variant trained with random permutations (``bench run --rpt``)
RPT_SUFFIX = "+rpt"
SUMMARY_LOCK_NAME = ".summary.lock"
RUN_LOCK_NAME = ".lock"
SUMMARY_VERSION = 1
#: ``bench run``'s exit code for user errors: such a run fails the same way every time, never retried
USER_ERROR_EXIT = 2
#: exit codes of a run stopped by SIGINT / SIGTERM (``bench run`` exits 128 + signal; a process killed
#: by the signal itself reports minus the signal): the run was interrupted, not failed. The sweep
#: stops (as on its own Ctrl-C) instead of retrying it -- this also covers a sweep that was started
#: with SIGINT ignored (a background job of a non-interactive shell), which never sees the Ctrl-C
#: its runs get.
INTERRUPTED_EXITS = frozenset({130, 143, -2, -15})


@dataclass(frozen=True)
class RunSpec:
    """One planned run. ``extra_args`` are passed verbatim to ``bench run`` after the fixed ones.

    ``pe`` is the PE *variant* (the run directory's name): ``ape`` or ``ape+rpt``.
    """

    dataset: str
    pe: str
    seed: int
    model: str
    out: str
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    #: configuration fingerprint of the run (``pebench.runner.integrity.fingerprint``); a complete run is
    #: skipped only when its results.json records this one (None: any complete run is skipped)
    fingerprint: str | None = None
    #: torch threads of the ``bench run`` subprocess (OMP_NUM_THREADS); None: inherit
    threads: int | None = None
    #: the run directory's variant name when it is not ``pe`` (``pebench.runner.config.variant_name``:
    #: ``pape+spiking`` when ``extra_args`` hold ``--data-option tokens=spiking``); None: ``pe``
    variant: str | None = None
    #: the run uses ``--deterministic`` (CPU kernel pins, set before torch is imported)
    deterministic: bool = False
    #: the run is one process (``devices`` and ``num_nodes`` 1): ``bench sweep --preload`` may fork it
    single_process: bool = False

    @property
    def rpt(self) -> bool:
        """Whether the variant is trained with random permutations (``<pe>+rpt``)."""
        return self.pe.endswith(RPT_SUFFIX)

    @property
    def pe_name(self) -> str:
        """The registered PE of the variant (``ape`` for ``ape+rpt``)."""
        return self.pe[: -len(RPT_SUFFIX)] if self.rpt else self.pe

    @property
    def run_dir(self) -> Path:
        return Path(self.out) / self.dataset / (self.variant or self.pe) / self.model / f"seed{self.seed}"

    @property
    def key(self) -> str:
        """Stable identifier, also the key in ``sweep_summary.json``."""
        return f"{self.dataset}/{self.variant or self.pe}/{self.model}/seed{self.seed}"

    def command(self) -> list[str]:
        """The ``bench run`` command line the default runner executes."""
        return [
            sys.executable, "-m", "pebench.cli", "run",
            "--dataset", self.dataset, "--pe", self.pe_name, *(["--rpt"] if self.rpt else []),
            "--seed", str(self.seed),
            "--model", self.model, "--out", self.out, *self.extra_args,
        ]


Runner = Callable[[RunSpec], int]


def die_with_parent() -> None:
    """On Linux, ask the kernel to send this process SIGTERM when its parent dies, even by SIGKILL
    (``prctl(PR_SET_PDEATHSIG)``); elsewhere a no-op. Called by each sweep worker at start and, as
    ``preexec_fn``, by the ``bench run`` subprocess a worker starts."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def runner_env(spec: RunSpec, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment of the ``bench run`` subprocess: ``base`` (default ``os.environ``) with
    ``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` set to ``spec.threads`` unless already set."""
    env = dict(os.environ if base is None else base)
    threads = getattr(spec, "threads", None)  # duck-typed specs (anything with .command()) have none
    if threads is not None:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(var, str(max(1, int(threads))))
    return env


#: seconds an interrupted ``bench run`` gets to write ``status: interrupted`` before it is killed
INTERRUPT_GRACE_S = 60.0


def start_run(spec: RunSpec, preexec_fn: Callable[[], None] = die_with_parent) -> subprocess.Popen:
    """Start ``bench run`` for ``spec`` (:meth:`RunSpec.command`, environment :func:`runner_env`) as a
    subprocess; ``preexec_fn`` runs in the child before the exec (default: :func:`die_with_parent`)."""
    return subprocess.Popen(spec.command(), env=runner_env(spec), preexec_fn=preexec_fn)


def default_runner(spec: RunSpec) -> int:
    """Run ``bench run ...`` for ``spec`` as a subprocess (``python -m pebench.cli run``); return its
    exit code. The subprocess is terminated if this worker dies (Linux; see ``die_with_parent``).
    On Ctrl-C it gets SIGINT and time to record ``interrupted``; then ``KeyboardInterrupt`` goes on."""
    proc = start_run(spec)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        try:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=INTERRUPT_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        except KeyboardInterrupt:  # a second Ctrl-C: stop now
            proc.kill()
            proc.wait()
        raise


def _check_name(kind: str, name: Any) -> str:
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or os.sep in name:
        raise ValueError(f"invalid {kind} name {name!r}: must be a non-empty string without path separators")
    return name


def plan_sweep(
    datasets: Sequence[str],
    pes: Sequence[str],
    seeds: Sequence[int],
    model: str,
    out: str | os.PathLike,
    extra_args: Sequence[str] = (),
) -> list[RunSpec]:
    """The runs of a sweep, dataset-major then PE then seed, duplicates dropped (order kept).

    Names are validated only as path components (``ValueError`` otherwise); whether a dataset or
    PE exists is ``bench run``'s business.
    """
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, int):
            raise ValueError(f"invalid seed {s!r}: must be an integer")
    _check_name("model", model)
    out_s = os.fspath(out)
    extra = tuple(str(a) for a in extra_args)
    specs: list[RunSpec] = []
    seen: set[str] = set()
    for d in datasets:
        _check_name("dataset", d)
        for p in pes:
            _check_name("PE", p)
            _check_name("PE", p[: -len(RPT_SUFFIX)] if p.endswith(RPT_SUFFIX) else p)  # "+rpt" alone
            for s in seeds:
                spec = RunSpec(dataset=d, pe=p, seed=int(s), model=model, out=out_s, extra_args=extra)
                if spec.key not in seen:
                    seen.add(spec.key)
                    specs.append(spec)
    return specs


def is_run_complete(run_dir: str | os.PathLike, fingerprint: str | None = None) -> bool:
    """Whether ``<run_dir>/results.json`` exists, parses, says ``status: complete`` and, when
    ``fingerprint`` is given, records that configuration fingerprint (:func:`run_fingerprint`)."""
    try:
        data = read_json(Path(run_dir) / "results.json")  # bounded (UnreadableJSON is a ValueError)
    except (OSError, ValueError):
        return False
    if not (isinstance(data, dict) and data.get("status") == "complete"):
        return False
    return fingerprint is None or run_fingerprint(data) == fingerprint


def run_fingerprint(results: dict[str, Any]) -> str | None:
    """The configuration fingerprint of a ``results.json`` dict (``pebench.runner.integrity.grouping_fingerprint``)."""
    return grouping_fingerprint(results)


def _read_summary(path: Path) -> dict[str, Any]:
    try:
        data = read_json(path)
    except FileNotFoundError:
        return {"version": SUMMARY_VERSION, "runs": {}}
    except (OSError, ValueError) as e:
        log.warning("ignoring unreadable sweep summary %s (%s)", path, e)
        return {"version": SUMMARY_VERSION, "runs": {}}
    if not isinstance(data, dict) or not isinstance(data.get("runs"), dict):
        log.warning("ignoring malformed sweep summary %s", path)
        return {"version": SUMMARY_VERSION, "runs": {}}
    return data


def record_in_summary(summary_path: Path, entry: dict[str, Any]) -> None:
    """Merge one run's entry into the summary (read-modify-write under the summary lock)."""
    with RunLock(summary_path.with_name(SUMMARY_LOCK_NAME)):
        summary = _read_summary(summary_path)
        runs = summary["runs"]
        old = runs.get(entry["key"])
        if not (entry["status"] == "skipped" and isinstance(old, dict) and old.get("status") == "complete"):
            runs[entry["key"]] = entry
        counts: dict[str, int] = {}
        for e in runs.values():
            if isinstance(e, dict):
                st = str(e.get("status"))
                counts[st] = counts.get(st, 0) + 1
        summary["version"] = SUMMARY_VERSION
        summary["counts"] = dict(sorted(counts.items()))
        atomic_write_json(summary_path, summary)


def _recorded_since(summary_path: Path, key: str, since: float) -> dict[str, Any] | None:
    entry = _read_summary(summary_path)["runs"].get(key)
    if isinstance(entry, dict) and isinstance(entry.get("finished_at"), (int, float)) and entry["finished_at"] >= since:
        return entry
    return None


# -------------------------------------------------------------------------------------- worker


def summary_entry(spec: RunSpec, status: str, attempts: int, exit_codes: list[int | None],
                  errors: list[str], wall: float) -> dict[str, Any]:
    """One run's entry of the sweep summary (``sweep_summary.json``'s ``runs``), finished now by this worker."""
    return {
        "key": spec.key, "dataset": spec.dataset, "pe": spec.pe, "model": spec.model, "seed": spec.seed,
        "run_dir": spec.key, "status": status, "attempts": attempts, "exit_codes": exit_codes,
        "errors": errors, "wall_time_s": round(wall, 3), "finished_at": time.time(),
        "worker": f"{socket.gethostname()}:{os.getpid()}",
    }


class SweepRunInterrupted(KeyboardInterrupt):
    """A run ended by SIGINT / SIGTERM: the sweep records it as ``interrupted`` and stops."""

    def __init__(self, entry: dict[str, Any]) -> None:
        super().__init__(entry["key"])
        self.entry = entry


def execute_with_retries(spec: RunSpec, runner: Runner, retries: int) -> dict[str, Any]:
    """Run ``spec`` with ``runner`` up to ``retries + 1`` times (a user error, exit 2, is not retried); its
    summary entry. An interrupted run raises :class:`SweepRunInterrupted` carrying its entry."""
    t0 = time.monotonic()
    exit_codes: list[int | None] = []
    errors: list[str] = []
    for attempt in range(1, retries + 2):
        log.info("run %s (attempt %d/%d)", spec.key, attempt, retries + 1)
        try:
            code: int | None = int(runner(spec))
        except KeyboardInterrupt:  # the sweep's own Ctrl-C, while this run was going
            exit_codes.append(None)
            raise SweepRunInterrupted(summary_entry(spec, "interrupted", attempt, exit_codes, errors,
                                                    time.monotonic() - t0)) from None
        except Exception as e:  # a crashing runner is a failed attempt, not a crashed sweep
            code = None
            errors.append(f"attempt {attempt}: runner raised {type(e).__name__}: {e}")
        exit_codes.append(code)
        if code in INTERRUPTED_EXITS:
            log.warning("run %s was interrupted (exit code %s): stopping the sweep; rerun it to resume", spec.key, code)
            raise SweepRunInterrupted(summary_entry(spec, "interrupted", attempt, exit_codes, errors, time.monotonic() - t0))
        if code == 0:
            if is_run_complete(spec.run_dir):
                return summary_entry(spec, "complete", attempt, exit_codes, errors, time.monotonic() - t0)
            errors.append(f"attempt {attempt}: exit code 0 but {spec.run_dir / 'results.json'} is not status 'complete'")
        elif code == USER_ERROR_EXIT:
            errors.append(f"attempt {attempt}: exit code 2 (a user error, see the run's message; not retried)")
            break
        elif code is not None:
            errors.append(f"attempt {attempt}: exit code {code}")
    log.warning("run %s failed after %d attempt(s)", spec.key, len(exit_codes))
    return summary_entry(spec, "failed", len(exit_codes), exit_codes, errors, time.monotonic() - t0)


def _busy_entry(spec: RunSpec, lock: RunLock) -> dict[str, Any]:
    info = lock.holder() or {}
    return {"key": spec.key, "dataset": spec.dataset, "pe": spec.pe, "model": spec.model, "seed": spec.seed,
            "run_dir": spec.key, "status": "busy", "attempts": 0, "exit_codes": [],
            "errors": [f"locked by {info.get('hostname')}:{info.get('pid')}"]}


def _worker(specs: Sequence[RunSpec], runner: Runner, retries: int, summary_path: Path,
            since: float, poll_interval: float) -> dict[str, dict[str, Any]]:
    """Process the plan with per-run locks; wait for runs held by live local processes."""
    outcomes: dict[str, dict[str, Any]] = {}
    pending = list(specs)
    while pending:
        waiting: list[RunSpec] = []
        for spec in pending:
            lock = RunLock(spec.run_dir / RUN_LOCK_NAME)
            if not lock.acquire():
                if lock.held_elsewhere():
                    outcomes[spec.key] = _busy_entry(spec, lock)
                else:
                    waiting.append(spec)
                continue
            try:
                done = _recorded_since(summary_path, spec.key, since)
                if done is not None and done["status"] == "interrupted":  # another worker's run was: stop too
                    raise KeyboardInterrupt
                if done is not None:  # a concurrent worker of this sweep handled it
                    outcomes[spec.key] = done
                    continue
                if is_run_complete(spec.run_dir, spec.fingerprint):
                    entry = summary_entry(spec, "skipped", 0, [], [], 0.0)
                else:
                    try:
                        entry = execute_with_retries(spec, runner, retries)
                    except SweepRunInterrupted as e:
                        record_in_summary(summary_path, e.entry)
                        raise
                record_in_summary(summary_path, entry)
                outcomes[spec.key] = entry
            finally:
                lock.release()
        pending = waiting
        if pending:
            time.sleep(poll_interval)
    return outcomes


def _worker_main(specs: list[RunSpec], runner: Runner, retries: int, summary_path: str,
                 since: float, poll_interval: float) -> None:
    die_with_parent()  # a SIGKILLed sweep takes its workers along (and they their run subprocesses)
    try:
        _worker(specs, runner, retries, Path(summary_path), since, poll_interval)
    except KeyboardInterrupt:  # Ctrl-C reaches every process of the group: exit without a traceback
        sys.exit(130)


def run_sweep(
    specs: Sequence[RunSpec],
    runner: Runner | None = None,
    retries: int = 1,
    workers: int = 1,
    summary_path: str | os.PathLike | None = None,
    *,
    poll_interval: float = 0.5,
) -> list[dict[str, Any]]:
    """Run every spec not already complete; return one outcome dict per spec, in plan order.

    ``runner(spec) -> exit code`` defaults to :func:`default_runner` (``bench run`` subprocess).
    Each failed run is retried up to ``retries`` times. ``workers > 1`` starts that many worker
    processes (the runner must then be picklable). ``summary_path`` defaults to
    ``<out>/sweep_summary.json`` (all specs must then share ``out``).

    Outcome dicts (also the summary's entries): ``key, dataset, pe, model, seed, run_dir`` (relative to the
    summary's folder, so a summary holds no machine path), ``status, attempts, exit_codes, errors, ...``
    with status ``complete`` (ran and finished), ``skipped``
    (already complete), ``failed`` (all attempts failed), or ``busy`` (locked by a process on
    another host; not run here); a run stopped by SIGINT / SIGTERM is recorded ``interrupted`` in
    the summary and raises ``KeyboardInterrupt``. A caller should exit non-zero when any status is ``failed``.
    Raises ``ValueError`` for bad arguments.
    """
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be an integer >= 0, got {retries!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    specs = list(specs)
    runner = default_runner if runner is None else runner
    if summary_path is None:
        outs = {s.out for s in specs}
        if len(outs) > 1:
            raise ValueError("specs have different output directories; pass summary_path")
        if not outs:
            return []
        summary_path = Path(outs.pop()) / SUMMARY_NAME
    summary = Path(summary_path)
    summary.parent.mkdir(parents=True, exist_ok=True)
    since = time.time()

    if workers > 1 and len(specs) > 1:
        try:
            pickle.dumps(runner)
        except Exception as e:
            raise ValueError(f"workers > 1 needs a picklable runner (a module-level function): {e}") from e
        ctx = multiprocessing.get_context("spawn")
        procs = [
            ctx.Process(target=_worker_main, args=(specs, runner, retries, os.fspath(summary), since, poll_interval),
                        name=f"pebench-sweep-{i}")
            for i in range(min(workers, len(specs)))
        ]
        for p in procs:
            p.start()
        try:
            for p in procs:
                p.join()
        except KeyboardInterrupt:
            # the workers got the SIGINT too and stop their runs (which record `interrupted`)
            deadline = time.monotonic() + INTERRUPT_GRACE_S + 5.0
            for p in procs:
                p.join(timeout=max(0.1, deadline - time.monotonic()))
            raise
        finally:
            for p in procs:
                if p.is_alive():
                    p.terminate()
                    p.join()
        if any(p.exitcode == 130 for p in procs):  # a worker's run was interrupted (see INTERRUPTED_EXITS)
            raise KeyboardInterrupt
        for p in procs:
            if p.exitcode != 0:
                log.warning("sweep worker %s exited with code %s; finishing its runs here", p.name, p.exitcode)
    # Single worker: this is the work. Several: a final pass that adopts what the workers recorded
    # since `since` and runs whatever a crashed worker left.
    outcomes = _worker(specs, runner, retries, summary, since, poll_interval)
    return [outcomes[s.key] for s in specs]

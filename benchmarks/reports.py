"""Study reports: ``results/<study>/REPORT.md``, written whole by the study's script.

A report is the script's fixed prose (its template, kept in the script beside the code that computes
the numbers) with the tables and verdicts the script computes from the committed result files put in
place of ``@@NAME@@`` placeholders. Nothing in a report is typed in by hand, so it regenerates byte for
byte from the committed runs (the study's test checks that). ``read_metrics`` reads a run's learning curve
from its ``metrics.csv`` for the scripts that report steps to learn; ``reproduced`` states what
``benchmarks/rerun_check.py --json`` recorded for a study's runs.
"""
from __future__ import annotations

import csv
import datetime
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

from pebench.core.io import atomic_write_bytes
from pebench.leaderboard.stats import t_mean_ci


def fill(template: str, **blocks: str) -> str:
    """``template`` with every ``@@NAME@@`` replaced by ``blocks["name"]`` (stripped of surrounding newlines),
    ending in exactly one newline. A placeholder without a block, or a block without a placeholder, is an
    error (a report must not silently lose a table)."""
    text = template
    for name, block in blocks.items():
        mark = f"@@{name.upper()}@@"
        if mark not in text:
            raise ValueError(f"the report template has no {mark} placeholder")
        text = text.replace(mark, block.strip("\n"))
    if "@@" in text:
        raise ValueError(f"the report template has an unfilled placeholder near {text[text.index('@@'):][:40]!r}")
    return text.strip("\n") + "\n"


def write_report(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    atomic_write_bytes(os.fspath(path), text.encode("utf-8"))


def emit(text: str, path: str | os.PathLike | None) -> None:
    """The report ``text``: written to ``path`` (:func:`write_report`), or printed when ``path`` is None."""
    if path:
        write_report(path, text)
    else:
        sys.stdout.write(text)


def study_json_main(args: Any, compute: Callable[[], dict], render: Callable[[dict], str],
                    dump: Callable[[dict], str]) -> int:
    """The two modes of a study that keeps its numbers in ``study.json``: ``args.results`` (a study.json) writes its
    report to ``args.report`` (or prints it); else ``compute()`` runs the study, and ``args.out`` receives
    ``study.json`` (``dump``) and ``REPORT.md``, rendered from the JSON as written."""
    if args.results:
        emit(render(json.loads(Path(args.results).read_text(encoding="utf-8"))), args.report)
        return 0
    res = compute()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.json").write_text(dump(res) + "\n", encoding="utf-8")
    emit(render(json.loads((out / "study.json").read_text(encoding="utf-8"))), out / "REPORT.md")
    return 0


def pct(x: float) -> str:
    """A fraction as a percentage with one decimal (``0.1234`` -> ``"12.3"``)."""
    return f"{100 * x:.1f}"


def pct_mean_ci(values: list[float]) -> str:
    """The mean of fractions in [0, 1] (mAP, accuracy) as a percentage with its Student-t 95 % interval
    (``pebench.leaderboard.stats.t_mean_ci``, clipped to [0, 1]), or ``(one seed)`` when there is none."""
    mean = sum(values) / len(values)
    ci = t_mean_ci(values, bounds=(0.0, 1.0))
    return pct(mean) + (f" [{pct(ci[0])}, {pct(ci[1])}]" if ci else " (one seed)")


def read_metrics(run_dir: Path) -> tuple[list[tuple[int, float]], int]:
    """The validations logged during training as (optimizer step, val/acc1), steps 1-based, and the last
    training step logged (``log_every_n_steps`` = 10, so a multiple of 10 or the run's last step)."""
    path = run_dir / "metrics.csv"
    if not path.is_file():
        return [], 0
    seen: dict[int, float] = {}
    last_train = 0
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("val/acc1"):  # the validation after training repeats the last step's: keep the first
                seen.setdefault(int(row["step"]) + 1, float(row["val/acc1"]))
            if row.get("train/loss_step"):
                last_train = max(last_train, int(row["step"]) + 1)
    return sorted(seen.items()), last_train


REPO = Path(__file__).resolve().parents[1]


def shown(path: Path) -> str:
    """``path`` relative to the repository (reports name no machine path)."""
    return Path(os.path.relpath(Path(path).resolve(), REPO)).as_posix()


def sweep_minutes(time_file: Path) -> float | None:
    """Wall minutes between the ``start`` and ``end`` lines of a sweep's time file (``start <UTC> ...``), or
    None when the file is missing or does not hold exactly one of each."""
    path = Path(time_file)
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    stamps = [ln.split()[1] for ln in lines if ln.split()[:1] in (["start"], ["end"])]
    if len(stamps) != 2:
        return None
    t0, t1 = (datetime.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in stamps)
    return (t1 - t0).total_seconds() / 60


def provenance(runs, time_file: Path) -> str:
    """How a sweep's runs were made: their count, commit(s), the recipe flags of the first run's config and,
    from the sweep's start/end time file, its wall time on 2 workers."""
    commits = sorted({(r.raw.get("git_sha") or "?")[:7] for r in runs})
    cfg = runs[0].raw.get("config", {})
    text = (f"{len(runs)} complete runs, commit{'s' if len(commits) > 1 else ''} "
            + ", ".join(f"`{c}`" for c in commits) + f", `--model {cfg.get('model')} --epochs {cfg.get('epochs')} "
            f"--batch-size {cfg.get('batch_size')}`" + (" `--deterministic`" if cfg.get("deterministic") else ""))
    minutes = sweep_minutes(time_file)
    if minutes is not None:
        text += f", {minutes:.1f} min of wall time with 2 workers (`{shown(time_file)}`)"
    return text


def reproduced(rerun_json: Path, folder: str | list[str], datasets) -> str:
    """One sentence: how many of the runs of ``datasets`` in ``folder`` (one, or a list) ``rerun_check.py``
    reran (from ``rerun_json``), at which commits, and how many gave identical metrics; or that none was rerun."""
    path = Path(rerun_json)
    folders = {folder} if isinstance(folder, str) else set(folder)
    recs = [r for r in json.loads(path.read_text(encoding="utf-8"))
            if Path(r.get("results", "")).as_posix() in folders and r["run"].split("/")[0] in set(datasets)
            and _still_committed(r)] if path.is_file() else []
    if not recs:
        return "These runs have not been rerun by `benchmarks/rerun_check.py` since they were made."
    same = sum(r["status"] == "identical" for r in recs)
    at = sorted({r.get("rerun_commit", "?") for r in recs})
    made = sorted({r["commit"] for r in recs})
    worst = max((r for r in recs if r["status"] == "differs"), key=lambda r: r["max_abs_diff"], default=None)
    failed = sum(r["status"] == "failed" for r in recs)
    cells = len({r["run"].rsplit("/", 1)[0] for r in recs})
    other = [r for r in recs if r.get("cpu_model") and r.get("rerun_cpu_model") and r["cpu_model"] != r["rerun_cpu_model"]]
    home = [r for r in recs if r.get("cpu_model") and r.get("cpu_model") == r.get("rerun_cpu_model")]
    cpus = sorted({(r["cpu_model"], r["rerun_cpu_model"]) for r in other})
    moved = [r for r in recs if r.get("primary_committed") is not None and r.get("primary_rerun") is not None
             and r["primary_committed"] != r["primary_rerun"]]
    return (f"**Reproduced:** `benchmarks/rerun_check.py` reran {len(recs)} of these runs (one seed of each of "
            f"{cells} cells, made at commit{'s' if len(made) > 1 else ''} " + ", ".join(f"`{c}`" for c in made) + ") from their `config.yaml` in "
            f"fresh processes with their thread count, at commit{'s' if len(at) > 1 else ''} " + ", ".join(f"`{c}`" for c in at)
            + f" (`{shown(path)}`): **{same} of {len(recs)} gave identical metrics**"
            + (f"; {failed} failed" if failed else "")
            + (f"; the largest difference was {worst['max_abs_diff']:.3g} in `{worst['metric']}` (`{worst['run']}`)"
               if worst else "")
            + (f"; {len(moved)} changed their primary metric (largest by "
               f"{max(abs(r['primary_rerun'] - r['primary_committed']) for r in moved):.3g})" if moved else "")
            + (f". {len(other)} of the reruns ran on another CPU model than their runs (" + "; ".join(
                f"made on {a}, rerun on {b}" for a, b in cpus) + "), with the same deterministic pins"
               + (" and at the commit the runs record" if all(r.get("rerun_commit") == r["commit"] for r in other) else "")
               + f": {sum(r['status'] == 'identical' for r in other)} of those {len(other)} gave identical metrics"
               + (f", against {sum(r['status'] == 'identical' for r in home)} of {len(home)} on the CPU model their runs "
                  "were made on" if home else "") if cpus else "") + ".")


def _still_committed(rec: dict) -> bool:
    """A rerun record speaks for the committed run only while that run is the one it reran: the run's
    ``results.json`` (read relative to the working directory, the repository root) still records the commit the
    record names. A sweep rerun at a later commit replaces the runs, and the older records then say nothing
    about them."""
    res = Path(rec.get("results", "")) / rec["run"] / "results.json"
    try:
        sha = json.loads(res.read_text(encoding="utf-8")).get("git_sha") or ""
    except (OSError, ValueError):
        return False
    return bool(rec.get("commit")) and sha.startswith(rec["commit"])


def seed_mean(d: dict[int, float]) -> float:
    """The mean of a ``seed -> value`` mapping (nan when empty)."""
    return float(np.mean(list(d.values()))) if d else float("nan")


def seed_ci(d: dict[int, float], scale: float = 1.0, digits: int = 2, bounds: tuple[float, float] | None = None,
            empty: str = "n/a") -> str:
    """``mean [lo, hi]`` of a ``seed -> value`` mapping times ``scale``: the Student-t 95 % interval over seeds
    (the mean alone below 2 seeds; ``empty`` without seeds)."""
    v = [x * scale for x in d.values()]
    if not v:
        return empty
    iv = t_mean_ci(v, bounds=bounds)
    m = float(np.mean(v))
    return f"{m:.{digits}f}" if iv is None else f"{m:.{digits}f} [{iv[0]:.{digits}f}, {iv[1]:.{digits}f}]"


class SeedRuns:
    """The complete runs of one PE variant, by seed (``runs``: :class:`pebench.leaderboard.collect` records), and
    the per-seed values the study reports read from them."""

    def __init__(self, label: str, runs) -> None:
        self.label, self.runs = label, {r.seed: r for r in runs}

    @property
    def seeds(self) -> list[int]:
        return sorted(self.runs)

    def metric(self, key: str) -> dict[int, float]:
        """Per seed: the metric ``key`` (seeds without it left out)."""
        return {s: float(r.metrics[key]) for s, r in self.runs.items() if r.metrics.get(key) is not None}

    def layer(self, key: str, idx: int = -1) -> dict[int, float]:
        """Per seed: the geometry statistic ``key`` at layer ``idx`` (default the last)."""
        out = {}
        for s, r in self.runs.items():
            v = ((r.raw.get("geometry") or {}).get(key) or [None])[idx]
            if v is not None:
                out[s] = float(v)
        return out

    def layers_mean(self, key: str) -> list[float]:
        """The geometry statistic ``key`` per layer, averaged over seeds (missing values ignored)."""
        rows = [(r.raw.get("geometry") or {}).get(key) for r in self.runs.values()]
        rows = [[np.nan if v is None else v for v in row] for row in rows if row]
        return [float(v) for v in np.nanmean(np.asarray(rows, dtype=float), axis=0)] if rows else []

    def fs(self, shift: str) -> dict[int, float]:
        """Per seed: the fragility score of the robustness shift ``shift``."""
        out = {}
        for s, r in self.runs.items():
            v = ((r.raw.get("robustness") or {}).get(shift) or {}).get("fs")
            if v is not None:
                out[s] = float(v)
        return out

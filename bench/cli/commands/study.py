"""``bench study list | run | report | check NAME``: the study engine's command (:mod:`pebench.studies`).

* ``list``: every shipped study, what it asks (grid, claims) and its cost measured on the runs found under its
  results folder (the sum of their wall times), or "not run here";
* ``run NAME``: ``bench sweep`` once per arm with the study's grid and recipe (resumable: complete runs are
  skipped); ``--pe`` / ``--seeds`` run other cells, e.g. a user's own PE against the committed baselines;
* ``report NAME``: the report from the result files, written to ``<results>/<report>`` (the default refuses a
  git-tracked file; an explicit ``--out`` overwrites);
* ``check NAME``: the committed report regenerates byte for byte (exit 1 and the first differing line if not), and
  every run was made with the configuration the study file gives it (its recorded fingerprint; exit 1 naming the
  runs that were not).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from pebench.cli.commands import csv_list
from pebench.core.errors import ConfigError
from pebench.core.io import atomic_write_text
from pebench.leaderboard.text import terminal_safe

__all__ = ["cmd_study", "build_report", "run_sweep"]


def _results(args: argparse.Namespace, study) -> Path:
    return Path(args.results if args.results is not None else study.results)


def build_report(study, results: Path, pes: list[str] | None = None, baseline: Path | None = None,
                 curves: bool = False) -> tuple[str, bytes | None]:
    """The report text of ``study`` on the runs under ``results`` and the PNG of its validation curves
    (:mod:`pebench.studies.plots`; drawn only with ``curves``, None without a plateau metric), from one reading of the
    runs (torch-free).
    ``pes`` inside the grid: only their cells, no verdicts; ``baseline``: ``study`` holds a user's own PEs (``pes``,
    read from ``results``) beside the grid's, read from ``baseline`` (:func:`with_own_pes`), and the report gives the
    new PEs' verdicts."""
    from pebench.studies.cells import collect  # deferred: start-up time (scipy, via the statistics module)
    from pebench.studies.claims import evaluate  # deferred: start-up time (scipy)
    from pebench.studies.plots import curves_png  # deferred: matplotlib, only when a report is written
    from pebench.studies.report import render_report  # deferred: start-up time (scipy)

    cells, problems = collect(study, results, pes, baseline=baseline)
    verdicts = evaluate(study, cells) if pes is None or baseline is not None else []
    label = results.as_posix() if not results.is_absolute() else results.name
    text = render_report(study, cells, verdicts, problems, label)
    if not curves:
        return text, None
    return text, curves_png(study, {k: c for k, c in cells.items() if not k[0].startswith("ref:")})


def configuration_check(study, results: Path, parser: argparse.ArgumentParser) -> tuple[int, list[str]]:
    """``(matching, others)``: how many complete runs of ``study`` under ``results`` recorded the configuration
    fingerprint its study file gives them (the one ``bench sweep`` resolves from the study's sweep command line for
    that dataset, PE and seed), and one line per run that did not (its path: the study file does not describe it,
    and ``bench study run`` would make it again)."""
    from pebench.core.io import read_json  # deferred: start-up time (bench --help)
    from pebench.runner.config import config_to_dict, run_config_from_args  # deferred: torch
    from pebench.runner.integrity import fingerprint  # deferred: torch
    from pebench.runner.run import load_registries  # deferred: torch, Lightning
    from pebench.studies.cells import collect  # deferred: start-up time (scipy)
    from pebench.studies.plan import sweep_argvs  # deferred: start-up time (bench --help)
    from pebench.sweep import local as sweep  # deferred: start-up time (bench --help)
    from pebench.tasks import resolve_task  # deferred: torch

    load_registries()
    planned: dict[tuple[str, str, str], tuple[str, list[str], str]] = {}  # (arm, dataset, PE) -> model, flags, out
    for arm in study.arms:
        for argv in sweep_argvs(study, arm, str(results)):
            sweep_args, extra = parser.parse_known_args(argv)
            for dataset in sweep_args.datasets.split(","):
                for pe in sweep_args.pes.split(","):
                    planned[(arm.name, dataset, pe)] = (sweep_args.model, extra, sweep_args.out)
    cells, _ = collect(study, results)
    matching, others = 0, []
    for key, cell in cells.items():
        if key not in planned:
            continue  # a reference's cell: another study's runs
        model, extra, out = planned[key]
        for run in cell.runs:
            spec = sweep.plan_sweep([key[1]], [key[2]], [run.seed], model, out, extra_args=extra)[0]
            cfg = resolve_task(run_config_from_args(parser.parse_args(spec.command()[3:])))
            if sweep.run_fingerprint(read_json(results / run.path)) == fingerprint(config_to_dict(cfg)):
                matching += 1
            else:
                others.append(run.path)
    return matching, others


def with_own_pes(study, pes: list[str]):
    """``study`` with the PEs of ``pes`` that its grid does not hold added (a user's own PE): each joins the groups
    whose declaration it makes (``relative``, ``rotation_invariant``, ``distance_decay`` of its class), so it gets
    those groups' claims; with ``capacity.checker: probe-capacity`` its cells are checked for capacity
    (:func:`pebench.analysis.probe_capacity.cannot_represent`, float64 on the untrained model)."""
    from pebench.encodings.registry import get_pe_class  # deferred: torch
    from pebench.studies.plan import with_pes  # deferred: start-up time (bench --help)

    new = [pe for pe in pes if pe not in study.pes]
    if not new:
        return study
    joins, datasets = {}, {}
    for pe in new:
        cls = get_pe_class(pe.split("+", 1)[0])  # an unknown PE: the registry's one-line error listing the names
        if cls.needs_grid:  # a PE on a raster: not the token-set datasets (tokens at coordinates, no grid)
            datasets[pe] = [d for d in study.datasets if not _token_sets(d)]
        joins[pe] = [g.name for g in study.groups if g.declaration == "any"
                     or g.declaration and getattr(cls, g.declaration, None) is True]
    cannot: dict[tuple[str, str], str] = {}
    if study.capacity_checker == "probe-capacity":
        from pebench.analysis.probe_capacity import CAPACITY_PROBES, cannot_represent  # deferred: torch

        for pe in new:
            for dataset in datasets.get(pe, study.datasets):
                if dataset in CAPACITY_PROBES and (sym := cannot_represent(dataset, pe)) is not None:
                    cannot[(dataset, pe)] = sym
    elif study.capacity_checker is not None:
        raise ConfigError(f"study {study.name!r} names capacity checker {study.capacity_checker!r}; this pebench "
                          f"knows probe-capacity")
    return with_pes(study, joins, cannot, only_new=True, datasets=datasets)


def _token_sets(dataset: str) -> bool:
    """Whether ``dataset`` gives its samples as token sets without a grid (the set probes)."""
    from pebench.datamodules import get_datamodule_class  # deferred: torch

    try:
        cls = get_datamodule_class(dataset)
    except Exception:  # noqa: BLE001 - an unknown dataset is the sweep's error to report, with the valid names
        return False
    return getattr(cls, "tokens", "frames") == "occupied"


def run_sweep(argv: list[str]) -> int:
    """``bench <argv>`` (a ``bench sweep``) in a fresh interpreter: the same process a user would start, and no
    import of the parser from here (the parser imports the commands)."""
    return subprocess.run([sys.executable, "-m", "pebench.cli", *argv], check=False).returncode


def _tracked(path: Path) -> bool:
    try:
        out = subprocess.run(["git", "ls-files", "--error-unmatch", path.name], cwd=path.parent, capture_output=True,
                             timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0


def cmd_study(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from pebench.studies.plan import sweep_argvs  # deferred: start-up time (bench --help)
    from pebench.studies.spec import list_studies, load_study  # deferred: start-up time (bench --help)

    if args.action == "list":
        if args.name is not None:
            raise ConfigError("bench study list takes no NAME")
        from pebench.studies.cells import collect  # deferred: start-up time (scipy)

        for name in list_studies():
            study = load_study(name)
            cells, _ = collect(study, Path(study.results))
            runs = [r for c in cells.values() for r in c.runs if not c.arm.startswith("ref:")]  # not references
            cost = (f"{sum(r.wall_time_s or 0 for r in runs) / 60:.0f} min of runs measured ({len(runs)} of "
                    f"{study.runs_planned} found under {study.results})" if runs else f"not run here "
                    f"({study.runs_planned} runs)")
            print(f"{name}: {study.title}")
            asks = study.question.split("? ")[0].rstrip("?") + "?"  # the question's first sentence
            print(f"    asks: {terminal_safe(asks)}")
            print(f"    grid: {len(study.datasets)} dataset(s) x {len(study.pes)} PE(s) x {len(study.seeds)} seed(s)"
                  + (f" x {len(study.arms)} arms" if len(study.arms) > 1 else "")
                  + f"; {len(study.claims)} claim(s) in {len(study.families)} family(ies); cost: {cost}")
        return 0
    if args.name is None:
        raise ConfigError(f"bench study {args.action} needs a study NAME (bench study list)")
    study = load_study(args.name)
    results = _results(args, study)
    pes = csv_list(args.pe) or None
    if args.action == "run":
        own = [pe for pe in pes or [] if pe not in study.pes]
        if own and args.results is None:
            raise ConfigError(f"--pe {','.join(own)}: a PE outside the study's grid runs into its own folder: pass "
                              f"--results DIR (bench study report {args.name} --pe {','.join(own)} --results DIR "
                              f"then compares it with the study's runs under {study.results})")
        if own:
            study = with_own_pes(study, pes or [])
        seeds = [int(s) for s in csv_list(args.seeds)] if args.seeds else None
        if args.workers is not None and args.workers < 1:
            raise ConfigError(f"--workers must be >= 1, got {args.workers}")
        for arm in study.arms:
            for argv in sweep_argvs(study, arm, str(results), pes=pes, seeds=seeds, workers=args.workers):
                print(f"bench study: {study.name}, arm {arm.name}: bench {' '.join(argv)}", file=sys.stderr,
                      flush=True)
                rc = run_sweep(argv)
                if rc != 0:
                    return rc
        print(f"bench study: report it with: bench study report {args.name}"
              + (f" --results {results}" if args.results else ""), file=sys.stderr)
        return 0
    if not results.is_dir():
        raise ConfigError(f"results folder {str(results)!r} of study {study.name!r} does not exist; run it first "
                          f"(bench study run {args.name}) or pass --results")
    own = [pe for pe in pes or [] if pe not in study.pes]
    baseline = None
    if own:
        if results.resolve() == Path(study.results).resolve():
            raise ConfigError(f"--pe {','.join(own)}: a PE outside the study's grid is read from its own --results "
                              f"folder (the study's runs under {study.results} are its baselines)")
        baseline = Path(study.results)
        study = with_own_pes(study, pes or [])
    text, png = build_report(study, results, pes, baseline=baseline, curves=args.action == "report")
    target = results / study.report
    if args.action == "check":
        if not target.is_file():
            print(f"bench study check: {terminal_safe(target)} does not exist", file=sys.stderr)
            return 1
        old = target.read_text(encoding="utf-8")
        if old == text:
            print(f"bench study check: {study.name}: {target} regenerates byte for byte")
            if pes is not None or baseline is not None:
                return 0
            matching, others = configuration_check(study, results, parser)
            print(f"bench study check: {study.name}: {matching} of {matching + len(others)} runs were made with the "
                  f"configuration this study file gives them (their recorded fingerprints)")
            if others:
                print("bench study check: made with another configuration (bench study run would make them again): "
                      + ", ".join(terminal_safe(p) for p in others[:5]) + (" ..." if len(others) > 5 else ""),
                      file=sys.stderr)
                return 1
            return 0
        a, b = old.splitlines(), text.splitlines()
        i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
        print(f"bench study check: {study.name}: {terminal_safe(target)} differs from its regeneration at line "
              f"{i + 1}:\n  committed: {terminal_safe(a[i] if i < len(a) else '(end of file)')}\n"
              f"  now:       {terminal_safe(b[i] if i < len(b) else '(end of file)')}", file=sys.stderr)
        return 1
    out = Path(args.out) if args.out is not None else target
    if args.out is None and out.is_file() and _tracked(out):
        raise ConfigError(f"{str(out)!r} is tracked by git; pass --out {out} to overwrite it (or --out elsewhere)")
    atomic_write_text(out, text)
    print(f"bench study: wrote {out}")
    if png is not None:
        from pebench.core.io import atomic_write_bytes  # deferred: only a report with curves writes one
        from pebench.studies.plots import curves_name  # deferred: start-up time

        atomic_write_bytes(out.with_name(curves_name(out.name)), png)
        print(f"bench study: wrote {out.with_name(curves_name(out.name))}")
    return 0

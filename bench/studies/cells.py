"""The runs of a study, read from its result folders: one :class:`Run` per (arm, dataset, PE, seed) found, grouped
into :class:`Cell` s, with each cell's provenance (commits, CPU models, wall time) and convergence.

A run is ``<results>/<arm out>/<dataset>/<variant>/<model>/seed<S>/results.json`` (the layout ``bench run``
writes), where ``variant`` is the grid's PE name plus the arm's token suffix (``none+spiking`` for
``--data-option tokens=spiking``). Only complete runs enter a cell; the others are counted per cell with their
status. Files are read with the bounded JSON reader (:func:`pebench.core.io.read_json`): a hostile file is a
listed problem, never a traceback.

**Convergence** (:func:`plateau_gain`): the validation curve is the study's ``plateau.metric`` in the run's
``metrics.csv`` (one value per logged step; the validation after training repeats the last step's and is kept
once). The gain over the last fifth of training is the last value minus the value at the last validation at or
before 80 % of the last validated step. A run *plateaued* when that gain is at most the study's ``band``; a run
with fewer than two validations, or none before 80 %, has no verdict (``None``).
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from pebench.core.io import UnreadableJSON, read_json
from pebench.studies.spec import Arm, LearnedRule, Study

__all__ = ["Run", "Cell", "collect", "plateau_gain", "read_curve", "MAX_METRICS_BYTES", "METRIC_FORMS"]

#: the metric names a study file may use (claims, tables, the learned rule)
METRIC_FORMS = {
    "NAME": "a key of results.json's metrics, e.g. test/acc1",
    "extrapolation:RES:KEY": "KEY of the extrapolation row at RES, e.g. extrapolation:48:acc1",
    "drop:RES:BASE:KEY": "extrapolation KEY at RES minus at BASE, per seed, e.g. drop:48:24:acc1 (the change a scale "
                         "change costs that run)",
    "rule:RULE:RES:KEY": "KEY of the extrapolation-rules analysis' row at RES under RULE, e.g. rule:ntk:48:acc1",
    "robustness:SHIFT:KEY": "KEY of the robustness analysis under SHIFT, e.g. robustness:jpeg:fs (the fragility score)",
    "geometry:NAME:LAYER": "a per-layer geometry list at LAYER (an index, last, or a range A-B: the mean of layers A to "
                           "B), e.g. geometry:ssdc_rpi:last, geometry:ssdc:0-3",
    "alpha-rho:KEY[:LAYER]": "Spearman's rho, over the run's alpha sweep (the alpha analysis' rows), between alpha and KEY "
                             "(a per-layer list at LAYER), e.g. alpha-rho:ssdc_rpi:last, alpha-rho:fs; none where KEY "
                             "or alpha is constant over the grid",
    "delta:NAME:BASE": "metrics NAME minus metrics BASE of the same run, e.g. delta:test/knn_top1:test/knn_top1_init "
                       "(what training added to the model at initialisation)",
    "checkpoint:WHICH:NAME[:LAYER]": "NAME of the run's geometry record at checkpoint WHICH (first, last or an index into "
                                     "results.json's eed_checkpoints, e.g. the DINO task's, whose first is at "
                                     "initialisation), a per-layer list read at LAYER, e.g. checkpoint:last:eed_percent:0",
    "dip:LIST[@E/M/L]": "the mid-depth dip of a per-layer list, min(first layer, last layer) - min(the layers between), "
                        "e.g. dip:checkpoint:last:eed_percent or dip:geometry:eed_percent (positive: U-shaped over depth; "
                        "needs 3 layers); with layer groups, min(mean of E, mean of L) - mean of M, e.g. "
                        "dip:geometry:eed_percent@0-1/2-4/9-11 (the EED paper's early / middle / late groups)",
}

#: the largest metrics.csv read (a 10,000-step run logging every 10 steps is well under 1 MB)
MAX_METRICS_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class Run:
    arm: str
    dataset: str
    pe: str
    seed: int
    path: str                      # relative to the study's results folder
    status: str
    metrics: dict[str, float]
    extrapolation: dict[str, dict[str, float]]   # resolution -> row
    commit: str | None
    cpu: str | None
    wall_time_s: float | None
    curve: tuple[tuple[int, float], ...] = ()    # (step, plateau metric)
    last_step: int | None = None
    evaluated: str = "last-step weights"

    geometry: dict[str, tuple[float, ...]] = field(default_factory=dict)  # per-layer lists (ssdc, ssdc_rpi, ...)
    rules: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # rule -> resolution -> row
    no_pe_bound: float | None = None  # results.json's dataset_info.no_pe_bound (a probe's exact no-PE ceiling)
    robustness: dict[str, dict[str, float]] = field(default_factory=dict)  # shift -> {acc, fs, ...}
    learn_curve: tuple[tuple[int, float], ...] = ()  # (step, the learned rule's metric), for the steps to learn
    stop: str | None = None        # how a run with a stop rule ended: "reached" its target, "gave up", "budget"
    steps: int | None = None       # the optimizer steps it trained (a stop rule's record)
    alpha_rows: tuple[dict[str, Any], ...] = ()  # the alpha analysis' rows (alpha, acc, fs, ssdc_rpi per layer, ...)
    checkpoints: tuple[dict[str, Any], ...] = ()  # geometry per checkpoint (results.json's eed_checkpoints)

    def steps_to(self, threshold: float) -> int | None:
        """The first validation step at or above ``threshold`` on the learned metric's curve (None: never)."""
        return next((step for step, v in self.learn_curve if v >= threshold), None)

    def value(self, metric: str) -> float | None:
        """The run's value of ``metric`` (:data:`METRIC_FORMS`); ``None`` where the run does not have it."""
        parts = metric.split(":")
        v: float | None
        if parts[0] == "extrapolation" and len(parts) == 3:
            v = self.extrapolation.get(parts[1], {}).get(parts[2])
        elif parts[0] == "drop" and len(parts) == 4:
            hi, lo = self.extrapolation.get(parts[1], {}), self.extrapolation.get(parts[2], {})
            v = hi[parts[3]] - lo[parts[3]] if parts[3] in hi and parts[3] in lo else None
        elif parts[0] == "delta" and len(parts) == 3:
            a, b = self.metrics.get(parts[1]), self.metrics.get(parts[2])
            v = a - b if a is not None and b is not None else None
        elif parts[0] == "robustness" and len(parts) == 3:
            v = self.robustness.get(parts[1], {}).get(parts[2])
        elif parts[0] == "rule" and len(parts) == 4:
            v = self.rules.get(parts[1], {}).get(parts[2], {}).get(parts[3])
        elif parts[0] == "geometry" and len(parts) == 3:
            v = _at(self.layers(f"geometry:{parts[1]}"), parts[2])
        elif parts[0] == "checkpoint" and len(parts) in (3, 4):
            if len(parts) == 4:
                v = _at(self.layers(":".join(parts[:3])), parts[3])
            else:
                record = self._checkpoint(parts[1])
                v = record.get(parts[2]) if record is not None else None
        elif parts[0] == "dip" and len(parts) >= 2:
            source, _, groups = ":".join(parts[1:]).partition("@")
            v = _dip(self.layers(source), groups)
        elif parts[0] == "alpha-rho" and len(parts) in (2, 3):
            v = self._alpha_rho(parts[1], parts[2] if len(parts) == 3 else None)
        else:
            v = self.metrics.get(metric)
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None

    def layers(self, source: str) -> tuple[float, ...]:
        """A per-layer list: ``geometry:NAME`` (or a bare ``NAME``: the geometry analysis after training) or
        ``checkpoint:WHICH:NAME`` (the record of checkpoint WHICH); ``()`` where the run does not have it."""
        parts = source.split(":")
        if len(parts) == 1 or parts[0] == "geometry" and len(parts) == 2:
            return self.geometry.get(parts[-1], ())
        if parts[0] == "checkpoint" and len(parts) == 3:
            record = self._checkpoint(parts[1])
            values = record.get(parts[2]) if record is not None else None
            if isinstance(values, list) and values and all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in values):
                return tuple(float(x) for x in values)
        return ()

    def _checkpoint(self, which: str) -> dict[str, Any] | None:
        """The geometry record of checkpoint ``which``: ``first``, ``last`` or an index (None: no such record)."""
        if not self.checkpoints:
            return None
        if which in ("first", "last"):
            return self.checkpoints[0 if which == "first" else -1]
        try:
            return self.checkpoints[int(which)]
        except (ValueError, IndexError):
            return None

    def _alpha_rho(self, key: str, layer: str | None) -> float | None:
        """Spearman's rho between alpha and ``key`` over the alpha sweep's rows (each a value, or a per-layer list
        read at ``layer``): the Pearson correlation of the average ranks (``scipy.stats.spearmanr``'s definition,
        computed here so that reading a study needs no scipy); None with fewer than 3 rows or a constant side."""
        xs, ys = [], []
        for row in self.alpha_rows:
            a, v = row.get("alpha"), row.get(key)
            if isinstance(v, list) and layer is not None and v:
                try:
                    v = v[-1] if layer == "last" else v[int(layer)]
                except (ValueError, IndexError):
                    v = None
            if isinstance(a, (int, float)) and isinstance(v, (int, float)) and not isinstance(v, bool) \
                    and math.isfinite(a) and math.isfinite(v):
                xs.append(float(a))
                ys.append(float(v))
        if len(xs) < 3:
            return None
        rx, ry = _average_ranks(xs), _average_ranks(ys)
        mx, my = math.fsum(rx) / len(rx), math.fsum(ry) / len(ry)
        sxy = math.fsum((a - mx) * (b - my) for a, b in zip(rx, ry))
        sxx, syy = math.fsum((a - mx) ** 2 for a in rx), math.fsum((b - my) ** 2 for b in ry)
        if sxx == 0.0 or syy == 0.0:
            return None
        return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def _at(layers: tuple[float, ...], layer: str) -> float | None:
    """``layers`` at ``layer``: an index, ``last``, or a range ``A-B`` (the mean of layers A to B, both included);
    None where it has no such layer."""
    if layer == "last":
        return layers[-1] if layers else None
    span = _span(layers, layer)
    if span is None:
        return None
    return math.fsum(span) / len(span)


def _span(layers: tuple[float, ...], spec: str) -> tuple[float, ...] | None:
    """The layers ``A-B`` (both included) or the one layer ``A`` of ``layers``; None where it has no such layers."""
    first, _, last = spec.partition("-")
    try:
        a, b = int(first), int(last) if last else int(first)
    except ValueError:
        return None
    if not 0 <= a <= b < len(layers):
        return None
    return layers[a:b + 1]


def _dip(layers: tuple[float, ...], groups: str) -> float | None:
    """The mid-depth dip: ``min(first, last) - min(between)`` of the layers, or with ``groups`` ``E/M/L`` (each a
    layer or a range ``A-B``, e.g. the EED paper's ``0-1/2-4/9-11``) ``min(mean E, mean L) - mean M``; None where the
    list is too short for it."""
    if not groups:
        return min(layers[0], layers[-1]) - min(layers[1:-1]) if len(layers) >= 3 else None
    spans = [_span(layers, g) for g in groups.split("/")]
    if len(spans) != 3 or any(s is None for s in spans):
        return None
    early, middle, late = (math.fsum(s) / len(s) for s in spans if s is not None)
    return min(early, late) - middle


def _average_ranks(v: list[float]) -> list[float]:
    """1-based ranks, ties given their average rank."""
    order = sorted(range(len(v)), key=lambda i: v[i])
    ranks = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


@dataclass
class Cell:
    arm: str
    dataset: str
    pe: str
    runs: list[Run] = field(default_factory=list)       # complete runs, by seed
    other: dict[int, str] = field(default_factory=dict)  # seed -> status of runs that are not complete
    missing: list[int] = field(default_factory=list)     # seeds with no results.json

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.runs]

    def values(self, metric: str) -> dict[int, float]:
        return {r.seed: v for r in self.runs if (v := r.value(metric)) is not None}

    def learned(self, metric: str, above: float, share: float) -> bool:
        """Whether at least ``share`` of the cell's complete runs reached ``above`` on ``metric``."""
        vals = [r.value(metric) for r in self.runs]
        return bool(vals) and sum(v is not None and v >= above for v in vals) >= share * len(vals)

    def learned_seeds(self, rule: LearnedRule) -> list[int]:
        """The seeds whose run reached the rule's threshold (its own, from the run's no-PE bound) on its metric."""
        out = []
        for r in self.runs:
            v, threshold = r.value(rule.metric), rule.threshold(r.no_pe_bound)
            if v is not None and threshold is not None and v >= threshold:
                out.append(r.seed)
        return out

    def learned_by(self, rule: LearnedRule) -> bool:
        """:meth:`learned` under a :class:`~pebench.studies.spec.LearnedRule` (its threshold per run's bound): at
        least ``share`` of the runs (rounded up, so 8 of 10 at 0.8) learned."""
        n = len(self.runs)
        return bool(self.runs) and len(self.learned_seeds(rule)) >= math.ceil(rule.share * n - 1e-9)

    @property
    def commits(self) -> list[str]:
        return sorted({r.commit[:7] for r in self.runs if r.commit})

    @property
    def cpus(self) -> list[str]:
        return sorted({r.cpu for r in self.runs if r.cpu})

    @property
    def wall_time_s(self) -> float:
        return math.fsum(r.wall_time_s for r in self.runs if r.wall_time_s is not None)


def read_curve(run_dir: Path, metric: str) -> tuple[tuple[tuple[int, float], ...], int | None]:
    """((optimizer step, value), ...) of ``metric`` in ``run_dir/metrics.csv`` (steps 1-based; a repeated step
    keeps its first value) and the last training step logged; ``((), None)`` when there is no readable log."""
    path = run_dir / "metrics.csv"
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_METRICS_BYTES + 1)
        if len(raw) > MAX_METRICS_BYTES:
            return (), None
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return (), None
    seen: dict[int, float] = {}
    last = None
    try:
        for row in csv.DictReader(io.StringIO(text, newline="")):
            try:
                step = int(row.get("step") or "") + 1
            except ValueError:
                continue
            cell = row.get(metric)
            if cell:
                try:
                    v = float(cell)
                except ValueError:
                    continue
                if math.isfinite(v):
                    seen.setdefault(step, v)
            if any(k and k.startswith("train/") and row.get(k) for k in row):
                last = step if last is None else max(last, step)
    except csv.Error:
        return (), None
    return tuple(sorted(seen.items())), last


def plateau_gain(curve: Iterable[tuple[int, float]]) -> float | None:
    """Last value minus the value at the last validation at or before 80 % of the last validated step (module
    docstring); ``None`` with fewer than two validations or none that early."""
    pts = list(curve)
    if len(pts) < 2:
        return None
    cut = 0.8 * pts[-1][0]
    before = [v for s, v in pts if s <= cut]
    if not before:
        return None
    return pts[-1][1] - before[-1]


def _variant_folder(pe: str, arm: Arm) -> str:
    """The run folder's variant name: the PE plus the arm's token suffix (``bench run``'s ``variant_name``)."""
    for i, flag in enumerate(arm.flags):
        value = arm.flags[i + 1] if flag == "--data-option" and i + 1 < len(arm.flags) else None
        if value and value.startswith("tokens=") and value != "tokens=frames":
            return f"{pe}+{value.split('=', 1)[1]}"
    return pe


def _model(study: Study) -> str | None:
    r = list(study.recipe)
    return r[r.index("--model") + 1] if "--model" in r and r.index("--model") + 1 < len(r) else None


def _rows(rows: Any) -> dict[str, dict[str, float]]:
    """Extrapolation rows (a list of dicts with ``resolution``) as resolution -> {key: number}."""
    out: dict[str, dict[str, float]] = {}
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict) and isinstance(row.get("resolution"), (str, int)) and not isinstance(
                row.get("resolution"), bool):
            out[str(row["resolution"])] = {k: float(v) for k, v in row.items()
                                           if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return out


def _run(path: Path, rel: str, arm: Arm, dataset: str, pe: str, seed: int, plateau_metric: str | None,
         problems: list[str], learned_metric: str | None = None) -> Run | None:
    try:
        res = read_json(path)
    except (OSError, UnreadableJSON) as e:
        problems.append(f"{rel}: {e}")
        return None
    if not isinstance(res, dict):
        problems.append(f"{rel}: not a JSON object")
        return None
    metrics = res.get("metrics") if isinstance(res.get("metrics"), dict) else {}
    metrics = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    extra = _rows(res.get("extrapolation"))
    rules_raw = res.get("extrapolation_rules") if isinstance(res.get("extrapolation_rules"), dict) else {}
    rules = {str(rule): _rows(rows) for rule, rows in rules_raw.items()}
    numerics = res.get("numerics") if isinstance(res.get("numerics"), dict) else {}
    sha = res.get("git_sha")
    wall = res.get("wall_time_s")
    ev = res.get("evaluated_checkpoint")
    rob = res.get("robustness") if isinstance(res.get("robustness"), dict) else {}
    robustness = {str(k): {kk: float(vv) for kk, vv in v.items()
                           if isinstance(vv, (int, float)) and not isinstance(vv, bool)}
                  for k, v in rob.items() if isinstance(v, dict)}
    info = res.get("dataset_info") if isinstance(res.get("dataset_info"), dict) else {}
    bound = info.get("no_pe_bound")
    curve, last = read_curve(path.parent, plateau_metric) if plateau_metric else ((), None)
    learn_curve = curve if learned_metric == plateau_metric else (
        read_curve(path.parent, learned_metric)[0] if learned_metric else ())
    stopped = res.get("stopped_at_target") if isinstance(res.get("stopped_at_target"), dict) else {}
    stop = ("reached" if stopped.get("reached") is True else "gave up" if stopped.get("gave_up") is True
            else "budget") if stopped else None
    steps = stopped.get("global_step")
    alpha_raw = res.get("alpha_sweep") if isinstance(res.get("alpha_sweep"), list) else []
    alpha_rows = tuple(r for r in alpha_raw if isinstance(r, dict))
    checkpoints = tuple(c for c in res.get("eed_checkpoints") or [] if isinstance(c, dict)) \
        if isinstance(res.get("eed_checkpoints"), list) else ()
    geo = res.get("geometry") if isinstance(res.get("geometry"), dict) else {}
    geometry = {k: tuple(float(x) for x in v) for k, v in geo.items()
                if isinstance(v, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)}
    return Run(arm=arm.name, dataset=dataset, pe=pe, seed=seed, path=rel, status=str(res.get("status")),
               metrics=metrics, extrapolation=extra, commit=sha if isinstance(sha, str) and sha else None,
               cpu=numerics.get("cpu_model") if isinstance(numerics.get("cpu_model"), str) else None,
               wall_time_s=float(wall) if isinstance(wall, (int, float)) and not isinstance(wall, bool) else None,
               curve=curve, last_step=last, geometry=geometry, rules=rules, robustness=robustness,
               no_pe_bound=float(bound) if isinstance(bound, (int, float)) and not isinstance(bound, bool) else None,
               evaluated="best-validation checkpoint" if isinstance(ev, dict) and ev.get("which") == "best"
               else "last-step weights", learn_curve=learn_curve, stop=stop,
               steps=steps if isinstance(steps, int) and not isinstance(steps, bool) else None, alpha_rows=alpha_rows,
               checkpoints=checkpoints)


def collect(study: Study, results: str | Path, pes: Iterable[str] | None = None, baseline: str | Path | None = None
            ) -> tuple[dict[tuple[str, str, str], Cell], list[str]]:
    """Every planned cell of ``study`` (keyed ``(arm, dataset, pe)``) read from ``results``, and the problems found;
    ``pes``: only these PEs; with ``baseline``, the PEs in ``pes`` are read from ``results`` and every other PE of the
    grid from ``baseline`` (a user's own PE against the committed runs). The cells of its ``references`` (read from
    their own folders, relative to the current directory) are keyed ``("ref:<name>", dataset, pe)``."""
    problems: list[str] = []
    cells: dict[tuple[str, str, str], Cell] = {}
    pe_list = list(pes) if pes is not None else list(study.pes)
    learned = study.learned.metric if study.learned is not None else None
    _collect_into(cells, problems, Path(results), study.arms, study.datasets, pe_list, study.seeds, _model(study),
                  study.plateau_metric, learned, study)
    if baseline is not None:
        rest = [pe for pe in study.pes if pe not in pe_list]
        _collect_into(cells, problems, Path(baseline), study.arms, study.datasets, rest, study.seeds, _model(study),
                      study.plateau_metric, learned, study)
        pe_list = list(study.pes)
    for ref in study.references:
        _collect_into(cells, problems, Path(ref.results), (Arm(name=f"ref:{ref.name}", out="."),), ref.datasets,
                      pe_list, ref.seeds, ref.model, None, ref.learned.metric if ref.learned else None, None)
    return cells, problems


def _collect_into(cells: dict[tuple[str, str, str], Cell], problems: list[str], root: Path, arms: Iterable[Arm],
                  datasets: Iterable[str], pes: list[str], seeds: Iterable[int], model: str | None,
                  plateau_metric: str | None, learned_metric: str | None, study: Study | None) -> None:
    for arm in arms:
        base = root if arm.out in ("", ".") else root / arm.out
        for dataset in datasets:
            for pe in pes:
                if study is not None and pe in study.pes and not study.planned(dataset, pe):
                    continue
                cell = cells.setdefault((arm.name, dataset, pe), Cell(arm.name, dataset, pe))
                folder = base / dataset / _variant_folder(pe, arm)
                for seed in seeds:
                    found = sorted(folder.glob(f"*/seed{seed}/results.json"))
                    if model is not None:
                        found = [p for p in found if p.parent.parent.name == model]
                    if not found:
                        cell.missing.append(seed)
                        continue
                    if len(found) > 1:
                        problems.append(f"{folder.relative_to(root)}: seed {seed} found under several models; "
                                        f"the study's recipe names none (--model)")
                    path = found[0]
                    run = _run(path, path.relative_to(root).as_posix(), arm, dataset, pe, seed, plateau_metric,
                               problems, learned_metric)
                    if run is None:
                        cell.other[seed] = "unreadable"
                    elif run.status == "complete":
                        cell.runs.append(run)
                    else:
                        cell.other[seed] = run.status

"""The leaderboard as data: one :class:`Cell` per row of the markdown tables.

A cell is one (dataset, model, PE variant, configuration, code version): the runs that
:mod:`.render` averages into one table row (runs of one PE variant made with other settings or by
another commit are other cells, ``tag`` names what separates them). Each cell holds the raw
numbers the markdown prints rounded (fractions stay fractions; ``percent`` says the page shows
them ×100), so the CSV, JSON and HTML outputs (:mod:`.export`, :mod:`.page`) state exactly what the
markdown states, with every seed's value beside the aggregate:

* primary metric: per-seed values, mean, sample std (ddof=1, n ≥ 2), the Student-t 95 %
  interval of the mean (:mod:`.stats`), and the paired difference to the reference cell of the same
  model and token kind (mean, 95 % interval, sign-flip p, paired t p, ``significant`` as the
  markdown's ``*``). Without a reference cell ``delta_note`` says why (``no rope-axial row``);
* extrapolation (mean acc1 per resolution), geometry (EED % of the lowest layer, peak SSDC_RPI,
  SSDC of the last layer, and the per-layer means the page plots) and fragility FS per shift: means
  over the seeds that report them, as in the markdown; ``columns`` adds each one's per-seed
  values, seed count and Student-t 95 % interval (which the markdown does not print).

Nothing here imports torch; equal inputs give equal cells.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .collect import RunRecord
from .render import (
    DEFAULT_SHIFTS,
    is_fraction_metric,
    last_layer_value,
    mean_std,
    natural_sort_key,
    pe_sort_key,
    provenance_tags,
    reduce_geometry,
    reference_note,
    tokens_suffix,
)
from .stats import paired_differences, paired_summary, sign_flip_p, t_mean_ci

__all__ = ["Cell", "leaderboard_cells", "reference_note"]


@dataclass
class Cell:
    """One table row of the leaderboard, with its raw numbers (see the module docstring)."""

    dataset: str
    task: str
    model: str
    pe: str
    label: str  # PE variant (``ape+rpt``)
    tag: str  # "" or what separates this cell from others of the same variant: ``(epochs=1)``, ``@sha``
    primary_metric: str
    percent: bool  # the primary metric is a fraction shown ×100
    runs: list[RunRecord]  # sorted by (seed, path)
    git_sha: str | None  # the code version, when the runs share one
    fingerprint: str | None  # the configuration fingerprint, when the runs share one
    values: dict[int, float | None]  # seed -> primary metric
    mean: float | None
    std: float | None
    ci: tuple[float, float] | None
    reference: str | None  # the reference variant of this table (None: the table has none)
    is_reference: bool
    delta: dict[str, Any] | None  # mean, lo, hi, p, t_p, significant, n_pairs
    delta_note: str | None  # why there is no delta ("reference", "no none row", "fewer than 2 paired seeds")
    metrics: dict[str, dict[str, Any]]  # every metric: mean, std, n
    extrapolation: dict[str, float | None]  # resolution -> mean acc1
    eed_min: float | None
    ssdc_rpi_peak: float | None
    ssdc_last: float | None
    fs: dict[str, float | None]  # shift -> mean FS (None: not reported or undefined)
    fs_undefined: list[str]  # shifts the runs report with FS undefined (clean accuracy near chance)
    layers: dict[str, dict[str, Any]] = field(default_factory=dict)  # "ssdc"/"eed_percent" -> {layers, mean}
    # every other column per seed: "acc1@<res>", "eed_min_percent", "ssdc_rpi_peak", "ssdc_last_layer",
    # "fs_<shift>" -> {"values": [per seed, in seed order], "n", "mean", "ci95"}
    columns: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def row_label(self) -> str:
        return f"{self.label} {self.tag}" if self.tag else self.label

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.runs]  # type: ignore[misc]


def _stats(values: Sequence[float | None]) -> dict[str, Any]:
    vals = [v for v in values if v is not None]
    if not vals:
        return {"mean": None, "std": None, "n": 0}
    mean, std = mean_std(vals)
    return {"mean": mean, "std": std, "n": len(vals)}


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return mean_std(vals)[0] if vals else None


def _one(values: Sequence[str | None]) -> str | None:
    distinct = set(values)
    return next(iter(distinct)) if len(distinct) == 1 else None


def _layer_means(members: Sequence[RunRecord], key: str, layers_key: str) -> dict[str, Any] | None:
    """Per-layer mean of ``geometry[key]`` over the runs that report it with the same layers."""
    series = []
    for r in members:
        geo = r.raw.get("geometry") if isinstance(r.raw.get("geometry"), dict) else {}
        values = (r.geometry or {}).get(key)
        layers = geo.get(layers_key) or geo.get("layers")
        if values and isinstance(layers, list) and len(layers) == len(values):
            series.append((tuple(layers), values))
    if not series or len({s[0] for s in series}) != 1:
        return None
    layers = list(series[0][0])
    mean = [_mean([s[1][i] for s in series if s[1][i] is not None and math.isfinite(s[1][i])])
            for i in range(len(layers))]
    return {"layers": layers, "mean": mean, "n": len(series)}


def _column(values: list[float | None], bounds: tuple[float, float] | None = None) -> dict[str, Any]:
    """A column's per-seed values, how many seeds report it, their mean and Student-t 95 % interval
    (clipped to ``bounds``, the range the column cannot leave)."""
    present = [v for v in values if v is not None]
    return {"values": values, "n": len(present), "mean": _mean(values), "ci95": t_mean_ci(present, bounds=bounds)}


def _columns(members: Sequence[RunRecord], resolutions: Sequence[str], shifts: Sequence[str]) -> dict[str, dict]:
    cols = {f"acc1@{res}": [(r.extrapolation or {}).get(res) for r in members] for res in resolutions}
    cols["eed_min_percent"] = [reduce_geometry(r, "eed_percent", min) for r in members]
    cols["ssdc_rpi_peak"] = [reduce_geometry(r, "ssdc_rpi", max) for r in members]
    cols["ssdc_last_layer"] = [last_layer_value(r, "ssdc") for r in members]
    cols.update({f"fs_{s}": [(r.robustness or {}).get(s, {}).get("fs") for r in members] for s in shifts})
    return {k: _column(v, (0.0, 1.0) if k.startswith("acc1@") else None) for k, v in cols.items()}


def _fs_values(members: Sequence[RunRecord], shift: str) -> tuple[float | None, bool]:
    vals = [(r.robustness or {}).get(shift, {}).get("fs") for r in members]
    mean = _mean(vals)
    undefined = mean is None and any(r.robustness and shift in r.robustness and "fs" in r.robustness[shift]
                                     for r in members)
    return mean, undefined


def _dataset_cells(runs: list[RunRecord], reference: str | None,
                   config_defaults: Mapping[str, Any] | None) -> list[Cell]:
    tags = provenance_tags(runs, config_defaults)
    groups: dict[tuple[str, str, str, str], list[RunRecord]] = defaultdict(list)
    for r in runs:
        groups[(r.model, r.pe, r.label, tags[r.path])].append(r)  # type: ignore[index]
    order = sorted(groups, key=lambda k: (k[0], pe_sort_key(k[1], k[2]), k[3]))
    refs: dict[tuple[str, str], tuple[str, str, str, str]] = {}
    used: str | None = None
    for candidate in (reference.split(",") if reference else []):
        refs = {(k[0], tokens_suffix(k[2])): k for k in order if k[2] == candidate + tokens_suffix(k[2]) and not k[3]}
        if refs:
            used = candidate
            break
    shifts = list(DEFAULT_SHIFTS) + sorted({s for r in runs for s in (r.robustness or {})} - set(DEFAULT_SHIFTS))
    resolutions = sorted({res for r in runs for res in (r.extrapolation or {})}, key=natural_sort_key)
    cells = []
    for key in order:
        members = sorted(groups[key], key=lambda r: (r.seed, r.path))
        primary = sorted({r.primary_metric for r in members})[0]  # type: ignore[type-var]
        values = {r.seed: r.metrics.get(primary) for r in members}  # type: ignore[misc]
        stats = _stats(list(values.values()))
        ci = t_mean_ci([v for v in values.values() if v is not None],
                       bounds=(0.0, 1.0) if is_fraction_metric(primary) else None)
        ref_key = refs.get((key[0], tokens_suffix(key[2])))
        delta, note = None, None
        if not reference:
            note = None
        elif not refs:
            note = reference_note(reference)
        elif ref_key == key:
            note = "reference"
        elif ref_key is None:
            note = f"no {used}{tokens_suffix(key[2])} row of {key[0]}"
        else:
            ref = {r.seed: r.metrics.get(primary) for r in groups[ref_key]}  # type: ignore[misc]
            diffs = paired_differences(values, ref)
            res = paired_summary(diffs)
            if res is None:
                note = "fewer than 2 paired seeds"
            else:  # t_p None: zero variance, no test (pebench.leaderboard.stats.paired_summary)
                delta = {"mean": res.mean, "lo": res.lo, "hi": res.hi, "p": sign_flip_p(diffs), "t_p": res.p,
                         "significant": res.significant, "n_pairs": len(diffs)}
        metric_names = sorted({m for r in members for m in r.metrics})
        fs = {s: _fs_values(members, s) for s in shifts}
        columns = _columns(members, resolutions, shifts)
        layers = {k: v for k, v in (("ssdc", _layer_means(members, "ssdc", "layers")),
                                    ("eed_percent", _layer_means(members, "eed_percent", "eed_layers"))) if v}
        cells.append(Cell(
            dataset=members[0].dataset, task=", ".join(sorted({r.task for r in members})),  # type: ignore[arg-type,misc]
            model=key[0], pe=key[1], label=key[2], tag=key[3], primary_metric=primary,
            percent=is_fraction_metric(primary), runs=members,
            git_sha=_one([r.git_sha for r in members]), fingerprint=_one([r.fingerprint for r in members]),
            values=values, mean=stats["mean"], std=stats["std"], ci=ci, reference=used,
            is_reference=note == "reference", delta=delta, delta_note=note,
            metrics={m: _stats([r.metrics.get(m) for r in members]) for m in metric_names},
            extrapolation={res: columns[f"acc1@{res}"]["mean"] for res in resolutions},
            eed_min=columns["eed_min_percent"]["mean"], ssdc_rpi_peak=columns["ssdc_rpi_peak"]["mean"],
            ssdc_last=columns["ssdc_last_layer"]["mean"],
            fs={s: v[0] for s, v in fs.items()}, fs_undefined=[s for s, v in fs.items() if v[1]], layers=layers,
            columns=columns,
        ))
    return cells


def leaderboard_cells(runs: Sequence[RunRecord], reference: str | None = "none",
                      config_defaults: Mapping[str, Any] | None = None) -> list[Cell]:
    """The cells of every complete run, by dataset (sorted), then in the markdown's row order."""
    by_dataset: dict[str, list[RunRecord]] = defaultdict(list)
    for r in runs:
        if r.complete:
            by_dataset[r.dataset].append(r)  # type: ignore[index]
    return [c for ds in sorted(by_dataset) for c in _dataset_cells(by_dataset[ds], reference, config_defaults)]


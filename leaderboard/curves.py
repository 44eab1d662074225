"""Training curves from the CSV logger: ``curves.png`` per run and a per-sweep comparison.

``bench run`` always writes ``metrics.csv`` with Lightning's ``CSVLogger`` (docs/architecture.md
§5). Rows are sparse: a training row holds the epoch means (``train/loss_epoch``,
``train/acc1``), a validation row the validation metrics (``val/loss``, ``val/acc1``, ...), and
step rows hold ``train/loss_step``. This module turns that into one value per (metric, epoch):

* the files ``metrics.attempt0.csv``, ``metrics.attempt1.csv``, ... (earlier attempts of a
  resumed run) and then ``metrics.csv`` are read in that order; a later value for the same
  (metric, epoch) replaces an earlier one;
* the re-validation ``bench run`` performs after ``fit`` is logged at epoch ``max_epochs``, one past
  the last training epoch, and repeats that epoch's numbers; validation values at epochs after
  the last epoch with training values are therefore dropped.

:func:`plot_run_curves` draws loss (train and validation) and the primary metric (train and
validation, with the chance level the run recorded) against the epoch, titled with dataset, PE,
model and seed. :func:`plot_sweep_curves` draws, per dataset, the validation loss and primary metric
of every PE variant, averaged over seeds (the band spans the seeds' minimum and maximum), with one
legend per dataset beside both panels. Both use matplotlib's Agg canvas directly
(no pyplot state) and write PNGs atomically. Nothing here imports torch.

The comparison plot reads folders that may come from anyone: ``results.json`` through
:func:`pebench.core.io.read_json` (a file too large, not UTF-8 or nested 100k deep is skipped), ``metrics.csv``
rows that are not numbers, too long or not UTF-8 are skipped, values matplotlib cannot scale (beyond
``±1e100``) are left out, and names reach matplotlib as plain text (:func:`plain`: ``$`` would start
mathtext, whose parse errors would end the command).
"""
from __future__ import annotations

import csv
import io
import math
import os
import re
from pathlib import Path
from typing import Any, Iterable

from pebench.core.io import UnreadableJSON, atomic_write_bytes, read_json

from .text import terminal_safe

__all__ = ["read_history", "epoch_series", "chance_level", "plot_run_curves", "write_run_curves", "sweep_series",
           "plot_sweep_curves", "write_sweep_curves", "run_title", "plain"]

#: metric -> {epoch: value}
History = dict[str, dict[int, float]]
#: values beyond this are left out of the curves: matplotlib's autoscaling overflows near 1e308, and no loss or
#: metric pebench logs comes close (NaN is kept: a gap in the line)
_PLOT_LIMIT = 1e100
#: epochs beyond this are not epochs of a run (a hostile metrics.csv)
_MAX_EPOCH = 10**9


def plain(text: Any) -> str:
    """``text`` as matplotlib shows it literally: control characters escaped (:func:`.text.terminal_safe`; lone
    surrogates cannot be drawn) and ``$`` escaped (it would start mathtext)."""
    return terminal_safe(text).replace("$", r"\$")


def _attempt_index(p: Path) -> int:
    m = re.fullmatch(r"metrics\.attempt(\d+)\.csv", p.name)
    return int(m.group(1)) if m else -1


def _log_files(run_dir: Path) -> list[Path]:
    files = sorted(run_dir.glob("metrics.attempt*.csv"), key=_attempt_index)
    files = [p for p in files if _attempt_index(p) >= 0]
    if (run_dir / "metrics.csv").is_file():
        files.append(run_dir / "metrics.csv")
    return files


def read_history(run_dir: str | os.PathLike) -> History:
    """Per-epoch values of every logged metric of a run (see the module docstring for the rules)."""
    hist: History = {}
    for path in _log_files(Path(run_dir)):
        try:
            with open(path, newline="", encoding="utf-8") as f:
                for row in csv.DictReader(f):
                    try:
                        epoch = int(float(row.get("epoch") or ""))
                    except (ValueError, OverflowError):
                        continue
                    if not 0 <= epoch <= _MAX_EPOCH:
                        continue
                    for key, text in row.items():
                        if key in ("epoch", "step") or key is None or not isinstance(text, str) or text == "":
                            continue
                        try:
                            value = float(text)
                        except ValueError:
                            continue
                        if math.isnan(value) or abs(value) <= _PLOT_LIMIT:
                            hist.setdefault(key, {})[epoch] = value
        except (OSError, UnicodeDecodeError, csv.Error):
            continue  # not a CSV log pebench wrote (not UTF-8, a NUL byte, a field over csv's limit): keep what was read
    train_epochs = [e for k, v in hist.items() if k.startswith("train/") and not k.endswith("_step") for e in v]
    if train_epochs:
        last = max(train_epochs)
        for key in [k for k in hist if not k.startswith("train/")]:
            hist[key] = {e: v for e, v in hist[key].items() if e <= last}
    return hist


def _first(hist: History, names: Iterable[str]) -> str | None:
    return next((n for n in names if hist.get(n)), None)


def epoch_series(hist: History, primary: str = "val/acc1") -> dict[str, str | None]:
    """Which logged columns are the four curves: train/val loss, train/val primary metric. A primary
    metric measured once after training (``test/acc1``) has no per-epoch values: its validation
    counterpart (``val/acc1``) is the curve then."""
    stem = primary.split("/", 1)[-1]
    return {"train_loss": _first(hist, ("train/loss_epoch", "train/loss")),
            "val_loss": _first(hist, ("val/loss",)),
            "train_metric": _first(hist, (f"train/{stem}",)),
            "val_metric": _first(hist, (primary, f"val/{stem}"))}


def chance_level(res: dict[str, Any]) -> float | None:
    """The chance accuracy a run recorded (``robustness.chance``, ``dataset_info.chance``), else None."""
    for section in ("robustness", "dataset_info"):
        value = res.get(section, {}).get("chance") if isinstance(res.get(section), dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1:
            return float(value)
    return None


def _is_accuracy(name: str) -> bool:
    return bool(re.match(r"(acc|top[-_]?\d|mean_class_acc)", name.rsplit("/", 1)[-1]))


def run_title(res: dict[str, Any]) -> str:
    """``dataset · PE · model · seed S`` from a results.json dict (or a config dict)."""
    pe = res.get("variant") or (f"{res.get('pe')}+rpt" if res.get("rpt") else res.get("pe"))
    return f"{res.get('dataset')} · {pe} · {res.get('model')} · seed {res.get('seed')}"


def _figure(nrows: int, ncols: int, width: float = 5.0, height: float = 3.4):
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # deferred: ~0.5 s to import, paid only
    from matplotlib.figure import Figure  # deferred: when a figure is drawn

    fig = Figure(figsize=(width * ncols, height * nrows), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = [[fig.add_subplot(nrows, ncols, r * ncols + c + 1) for c in range(ncols)] for r in range(nrows)]
    return fig, axes


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _xy(series: dict[int, float]) -> tuple[list[int], list[float]]:
    xs = sorted(series)
    return [x + 1 for x in xs], [series[x] for x in xs]  # epochs shown 1-based (epoch 1 = first epoch)


def plot_run_curves(hist: History, title: str, primary: str = "val/acc1", chance: float | None = None) -> bytes:
    """PNG bytes: loss (left) and the primary metric (right) per epoch, train and validation; ``chance``:
    the chance accuracy, drawn on an accuracy panel."""
    cols = epoch_series(hist, primary)
    fig, ((a, b),) = _figure(1, 2)
    for key, ax, style, label in ((cols["train_loss"], a, "o-", "train"), (cols["val_loss"], a, "s--", "validation"),
                                  (cols["train_metric"], b, "o-", "train"), (cols["val_metric"], b, "s--",
                                                                             "validation")):
        if key:
            ax.plot(*_xy(hist[key]), style, label=label)
    stem = primary.split("/", 1)[-1]
    if chance is not None and _is_accuracy(stem):
        b.axhline(chance, color="0.5", ls=":", lw=1.0, label=f"chance ({chance:.3g})")
    a.set(xlabel="epoch", ylabel="loss (epoch mean)", title="loss")
    b.set(xlabel="epoch", ylabel=plain(stem), title=plain(stem))
    for ax in (a, b):
        if ax.get_lines():
            ax.legend()
        ax.xaxis.get_major_locator().set_params(integer=True)
    fig.suptitle(plain(title))
    return _png(fig)


def write_run_curves(run_dir: str | os.PathLike, res: dict[str, Any]) -> Path | None:
    """Write ``<run_dir>/curves.png`` from the run's CSV logs; ``None`` when nothing was logged."""
    run_dir = Path(run_dir)
    hist = read_history(run_dir)
    if not any(epoch_series(hist, res.get("primary_metric") or "val/acc1").values()):
        return None
    path = run_dir / "curves.png"
    atomic_write_bytes(path, plot_run_curves(hist, run_title(res), res.get("primary_metric") or "val/acc1",
                                             chance_level(res)))
    return path


def sweep_series(results_root: str | os.PathLike) -> dict[str, dict[str, dict[str, Any]]]:
    """dataset -> PE variant (+ model when a dataset has several) -> {"primary", "val_loss",
    "val_metric", "metric_column", "chance"}: for each curve, epoch -> list of the seeds' values
    (``metric_column``: the logged column of the metric curve, see :func:`epoch_series`; ``chance``:
    :func:`chance_level` of the first run). Complete runs only."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    root = Path(results_root)
    runs = []
    for path in sorted(root.rglob("results.json")):
        try:
            res = read_json(path) if path.is_file() else None
        except (OSError, UnreadableJSON):
            continue  # the leaderboard's table lists it as a problem
        if isinstance(res, dict) and res.get("status") == "complete":
            runs.append((path.parent, res))
    models: dict[str, set] = {}
    for _, res in runs:
        models.setdefault(str(res.get("dataset")), set()).add(str(res.get("model")))
    for run_dir, res in runs:
        ds = str(res.get("dataset"))
        label = str(res.get("variant") or res.get("pe"))
        if len(models[ds]) > 1:
            label += f" ({res.get('model')})"
        primary = res.get("primary_metric") if isinstance(res.get("primary_metric"), str) else None
        primary = primary or "val/acc1"
        hist = read_history(run_dir)
        cols = epoch_series(hist, primary)
        entry = out.setdefault(ds, {}).setdefault(label, {"primary": primary, "val_loss": {}, "val_metric": {},
                                                          "metric_column": cols["val_metric"] or primary,
                                                          "chance": chance_level(res)})
        for curve in ("val_loss", "val_metric"):
            for epoch, v in hist.get(cols[curve] or "", {}).items():
                entry[curve].setdefault(epoch, []).append(v)
    return out


def plot_sweep_curves(series: dict[str, dict[str, dict[str, Any]]], title: str) -> bytes:
    """PNG bytes: one row per dataset, validation loss (left) and the primary metric's validation
    curve (right) vs epoch, one line per PE variant (mean over seeds; shaded: min to max over seeds),
    the chance level on an accuracy panel; each row's legend, shared by both panels (one colour per
    variant), right of the row."""
    datasets = sorted(series)
    fig, rows = _figure(max(1, len(datasets)), 2)
    for (a, b), ds in zip(rows, datasets):
        column, chance = "val/acc1", None
        for i, label in enumerate(sorted(series[ds])):
            entry = series[ds][label]
            column = entry.get("metric_column") or entry["primary"]
            chance = chance if chance is not None else entry.get("chance")
            for ax, curve in ((a, "val_loss"), (b, "val_metric")):
                pts = entry[curve]
                if not pts:
                    continue
                xs = sorted(pts)
                mean = [math.fsum(pts[x]) / len(pts[x]) for x in xs]
                n = min(len(pts[x]) for x in xs)
                ax.plot([x + 1 for x in xs], mean, marker="o", ms=3, color=f"C{i % 10}",
                        ls="-" if i < 10 else "--", label=plain(f"{label} (n={n})"))
                if n > 1:
                    ax.fill_between([x + 1 for x in xs], [min(pts[x]) for x in xs], [max(pts[x]) for x in xs],
                                    color=f"C{i % 10}", alpha=0.15, lw=0)
        if chance is not None and _is_accuracy(column) and b.get_lines():
            b.axhline(chance, color="0.5", ls=":", lw=1.0, label=f"chance ({chance:.3g})")
        a.set(xlabel="epoch", ylabel="validation loss", title=plain(f"{ds}: validation loss"))
        b.set(xlabel="epoch", ylabel=plain(column), title=plain(f"{ds}: {column} (mean over seeds)"))
        for ax in (a, b):
            ax.xaxis.get_major_locator().set_params(integer=True)
        handles, labels = (b if b.get_lines() else a).get_legend_handles_labels()
        if handles:
            b.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=9, frameon=False,
                     title="PE (seeds), both panels", title_fontsize=9)
    if not datasets:
        rows[0][0].text(0.5, 0.5, "no complete runs", ha="center", transform=rows[0][0].transAxes)
    fig.suptitle(plain(title))
    return _png(fig)


def write_sweep_curves(results_root: str | os.PathLike, out_png: str | os.PathLike) -> Path | None:
    """Write the comparison plot of every complete run under ``results_root``; ``None`` when no
    complete run logged any curve."""
    series = sweep_series(results_root)
    if not any(e["val_loss"] or e["val_metric"] for d in series.values() for e in d.values()):
        return None
    atomic_write_bytes(out_png, plot_sweep_curves(series, f"validation curves per PE ({os.fspath(results_root)})"))
    return Path(out_png)

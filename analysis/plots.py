"""Plots of the analyses (PNG). Uses matplotlib's object API with the Agg canvas (no pyplot, no
global backend state, safe in headless runs and threads).

Each ``plot_*(data, path, run=None)`` writes a PNG to ``path`` directly (format forced to PNG
whatever the suffix); :func:`save_plot` wraps one atomically (temp file in the same folder +
``os.replace``). ``run`` (optional) names the run in the figure title: ``dataset``, ``pe`` (the
variant, e.g. ``ape+rpt``), ``model``, ``seed``, and ``num_classes`` for the chance level
(``1 / num_classes``) drawn on accuracy axes; :func:`run_info` builds it from a run config.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable

from pebench.core.io import default_file_mode

__all__ = ["plot_geometry", "plot_alpha_sweep", "plot_extrapolation", "plot_robustness", "plot_eed_checkpoints",
           "plot_attention", "plot_coord_robustness", "save_plot", "run_info", "run_label", "shift_label"]

#: how a perturbation parameter is written in labels (robustness.DEFAULT_PARAMS keys)
_PARAM_NAMES = {"quality": "quality", "sigma": "σ", "p": "p", "rate": "rate"}
#: the ``metric`` field of dense-task analysis results -> axis label
_METRIC_LABELS = {"map": "mAP@[.5:.95]", "miou": "mIoU"}


def run_info(config: dict | None, num_classes: int | None = None) -> dict[str, Any]:
    """The ``run`` dict of the plot functions from a run config (``config.yaml`` / results)."""
    cfg = dict(config or {})
    pe = cfg.get("variant") or (f"{cfg.get('pe')}+rpt" if cfg.get("rpt") else cfg.get("pe"))
    return {"dataset": cfg.get("dataset"), "pe": pe, "model": cfg.get("model"), "seed": cfg.get("seed"),
            "num_classes": num_classes}


def run_label(run: dict[str, Any] | None) -> str:
    """``dataset · PE · model · seed S`` (empty without a run)."""
    if not run:
        return ""
    return f"{run.get('dataset')} · {run.get('pe')} · {run.get('model')} · seed {run.get('seed')}"


def shift_label(name: str, params: dict[str, Any] | None) -> str:
    """``jpeg (quality 5)``, ``blur (σ 2.5)``: a shift with the parameters it was applied with."""
    if not params:
        return name
    return f"{name} (" + ", ".join(f"{_PARAM_NAMES.get(k, k)} {v}" for k, v in sorted(params.items())) + ")"


def _title(fig: Any, what: str, run: dict[str, Any] | None) -> None:
    label = run_label(run)
    fig.suptitle(f"{what} — {label}" if label else what, fontsize=10)


def _chance(ax: Any, run: dict[str, Any] | None) -> None:
    """Horizontal line at 1 / num_classes when the run states its class count."""
    n = (run or {}).get("num_classes")
    if isinstance(n, int) and n > 0:
        ax.axhline(1.0 / n, color="0.5", ls=":", lw=1.0, label=f"chance (1/{n})")


def _legend_below(ax: Any, extra: list | None = None, ncol: int = 2) -> None:
    """The axes' legend (plus ``extra`` line handles, e.g. of a twin axis) under its x label, outside the
    plotting area, so it never covers a curve; nothing when there is nothing to label."""
    handles, labels = ax.get_legend_handles_labels()
    for h in extra or []:
        handles.append(h)
        labels.append(h.get_label())
    if handles:
        ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=ncol, fontsize=8,
                  frameon=False)


def _figure(ncols: int = 1, width: float = 5.0, height: float = 3.6):
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # deferred: matplotlib takes ~0.5 s to import,
    from matplotlib.figure import Figure  # deferred: paid only when a plot is drawn

    fig = Figure(figsize=(width * ncols, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    return fig, axes


def _nan(v: list | None) -> list[float]:
    return [float("nan") if x is None else float(x) for x in (v or [])]


def _save(fig: Any, path: str | os.PathLike) -> None:
    fig.savefig(os.fspath(path), format="png")


def save_plot(fn: Callable[..., None], data: Any, path: str | os.PathLike, **kwargs: Any) -> Path:
    """Run ``fn(data, tmp, **kwargs)`` and move the result to ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".png.tmp", dir=path.parent)
    os.close(fd)
    try:
        fn(data, tmp, **kwargs)
        os.chmod(tmp, default_file_mode())  # mkstemp made it 0600; give it the umask's mode
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


_TAP_LABELS = {"attn_in": "attention input after LN1 (attn_in)", "block_out": "block output, residual (block_out)"}
_DISTANCE_LABELS = {"l1": "L1 grid distance", "euclidean": "Euclidean distance"}


def plot_geometry(geo: dict[str, Any], path: str | os.PathLike, run: dict[str, Any] | None = None) -> None:
    """Two panels vs depth: SSDC, SSDC-RPI (mean ± sd over the permutations) and the null band at
    initialisation (left); EED% and the top-1 eigenvalue share (right). Axis labels name the tap,
    the distance and the metric."""
    fig, (a, b) = _figure(2)
    _title(fig, "Layer-wise geometry", run)
    layers = geo["layers"]
    tap = geo.get("tap", "block_out")
    if geo.get("ssdc") is not None:
        a.plot(layers, _nan(geo["ssdc"]), "o-", label="SSDC")
    k = geo.get("rpi_permutations")
    if geo.get("ssdc_rpi") is not None:
        mean = _nan(geo["ssdc_rpi"])
        a.plot(layers, mean, "s--", label=f"SSDC (RPI, mean of {k})" if k else "SSDC (RPI)")
        if geo.get("ssdc_rpi_sd") is not None:
            sd = [0.0 if v is None else v for v in geo["ssdc_rpi_sd"]]
            a.fill_between(layers, [m - s for m, s in zip(mean, sd)], [m + s for m, s in zip(mean, sd)],
                           color="C1", alpha=0.2, lw=0)
    if geo.get("ssdc_rpi_init") is not None:
        m0 = _nan(geo["ssdc_rpi_init"])
        s0 = [0.0 if v is None else v for v in (geo.get("ssdc_rpi_init_sd") or [None] * len(m0))]
        a.plot(layers, m0, ":", color="0.4", label="SSDC (RPI) at init (null)")
        a.fill_between(layers, [m - 2 * s for m, s in zip(m0, s0)], [m + 2 * s for m, s in zip(m0, s0)],
                       color="0.5", alpha=0.15, lw=0)
    a.axhline(0.0, color="0.6", lw=0.8)
    a.set(xlabel=f"layer: {_TAP_LABELS.get(tap, tap)}",
          ylabel=f"SSDC (Spearman, cosine vs {_DISTANCE_LABELS.get(geo.get('distance', 'l1'), 'distance')})",
          title=f"SSDC (probe n={geo.get('probe_size')})")
    a.set_xticks(layers)
    _legend_below(a)
    eed_layers = geo.get("eed_layers") or layers
    eed_tap = geo.get("eed_tap", tap)
    if geo.get("eed_percent") is not None:
        b.plot(eed_layers, _nan(geo["eed_percent"]), "o-", color="C2", label="EED %")
    extra = []
    if geo.get("eed_top1_share") is not None:
        b2 = b.twinx()
        extra = b2.plot(eed_layers, _nan(geo["eed_top1_share"]), "^:", color="C3",
                        label="top-1 eigenvalue share (right axis)")
        b2.set_ylabel("top-1 eigenvalue share λ_max / Σλ", color="C3")
        b2.set_ylim(0, 1)
    b.set(xlabel=f"layer: {_TAP_LABELS.get(eed_tap, eed_tap)}", ylabel="EED % (100·N_eff / D)",
          title="Effective encoding dimension")
    b.set_xticks(eed_layers)
    _legend_below(b, extra)
    _save(fig, path)


def plot_alpha_sweep(rows: list[dict[str, Any]], path: str | os.PathLike, run: dict[str, Any] | None = None) -> None:
    """Three panels vs α: clean accuracy (with the chance level), FS under the shift on its own axis
    (gaps, marked ``n/a``, where FS is undefined near chance) and peak SSDC-RPI."""
    fig, (a, f, b) = _figure(3, width=4.2, height=3.8)
    _title(fig, "α sweep (additive PE scaled by α at inference)", run)
    al = [r["alpha"] for r in rows]
    shift = rows[0].get("shift", "shift") if rows else "shift"
    a.plot(al, _nan([r["acc"] for r in rows]), "o-", label="clean accuracy")
    _chance(a, run)
    a.set(xlabel="α (PE scale)", ylabel="clean top-1 accuracy", title="Accuracy vs α")
    _legend_below(a, ncol=1)
    f.plot(al, _nan([r["fs"] for r in rows]), "s--", color="C1",
           label=f"FS = 1 − A_shift/A_clean, {shift_label(shift, rows[0].get('params') if rows else None)}")
    f.axhline(0.0, color="0.6", lw=0.8)
    for r in rows:
        if r.get("fs") is None:
            f.annotate("n/a", (r["alpha"], 0.0), textcoords="offset points", xytext=(0, 6), fontsize=7,
                       ha="center", color="C1")
    f.set(xlabel="α (PE scale)", ylabel="fragility FS", title="Fragility vs α", xlim=a.get_xlim())
    _legend_below(f, ncol=1)
    b.plot(al, _nan([r["ssdc_rpi_peak"] for r in rows]), "o-", color="C2")
    b.axhline(0.0, color="0.6", lw=0.8)
    tap = _TAP_LABELS.get(rows[0].get("tap", "attn_in"), "") if rows else ""
    b.set(xlabel="α (PE scale)", ylabel="peak over layers of SSDC (RPI mean)",
          title="Index-anchored structure vs α" + (f"\n({tap})" if tap else ""))
    _save(fig, path)


def plot_extrapolation(rows: list[dict[str, Any]], path: str | os.PathLike, run: dict[str, Any] | None = None) -> None:
    """Top-1 accuracy vs tokens per sample (log x), one point per evaluated resolution, with the
    chance level when the run states its class count."""
    fig, (a,) = _figure(1, width=5.5)
    _title(fig, "Resolution extrapolation", run)
    metric = next((r["metric"] for r in rows if r.get("metric")), None)  # dense tasks: "map" / "miou"
    key = metric or "acc1"
    ok = [r for r in rows if "error" not in r and r.get(key) is not None]
    ok.sort(key=lambda r: r["n_tokens"])
    xs, ys = [r["n_tokens"] for r in ok], [r[key] for r in ok]
    if any("scenes_tiled" in r for r in ok):  # segmentation: denser sampling and tiled scenes, one line each
        for name, keep in (("denser sampling", lambda r: r.get("scenes_tiled") == 1),
                           ("tiled scenes", lambda r: r.get("density_factor") == 1),
                           ("denser + tiled", lambda r: r.get("scenes_tiled") != 1 and r.get("density_factor") != 1)):
            part = [r for r in ok if keep(r)]
            if part:
                a.plot([r["n_tokens"] for r in part], [r[key] for r in part], "o-", label=f"mIoU, {name}")
    else:
        a.plot(xs, ys, "o-", label=f"{_METRIC_LABELS.get(metric, 'top-1')} (one checkpoint, no re-training)")
    if metric is None:
        _chance(a, run)
    for r in ok:  # centred above the point: the last label stays inside the axes
        a.annotate(r["resolution"], (r["n_tokens"], r[key]), textcoords="offset points", xytext=(0, 5),
                   ha="center", fontsize=8)
    if xs and max(xs) > 2 * min(xs):
        a.set_xscale("log", base=2)
    a.margins(x=0.08, y=0.12)
    n = sorted({r.get("n_samples") for r in ok if r.get("n_samples")})
    samples = f", n = {n[0]} per size" if len(n) == 1 else ""
    a.set(xlabel="patch tokens per sample (input size annotated)",
          ylabel=f"{_METRIC_LABELS.get(metric, 'top-1 accuracy')} (validation{samples})")
    _legend_below(a, ncol=1)
    bad = [r["resolution"] for r in rows if "error" in r]
    if bad:
        a.text(0.01, 0.01, "skipped: " + ", ".join(bad), transform=a.transAxes, fontsize=7, color="C3")
    _save(fig, path)


def plot_robustness(rob: dict[str, Any], path: str | os.PathLike, run: dict[str, Any] | None = None) -> None:
    """Bar chart: clean accuracy and accuracy under each shift, each labelled with its parameters
    (JPEG quality, blur σ, ...) and its fragility FS = 1 − A_shift / A_clean."""
    fig, (a,) = _figure(1, width=5.5)
    _title(fig, "Robustness to content shifts", run)
    names = [k for k, v in rob.items() if isinstance(v, dict)]
    metric = rob.get("metric")  # dense tasks: "map" / "miou", values under "clean" / "value"
    accs = ([rob["clean_acc"]] + [rob[k]["acc"] for k in names] if metric is None else
            [_nan([rob.get("clean")])[0]] + [_nan([rob[k].get("value")])[0] for k in names])
    labels = ["clean"] + [shift_label(k, rob[k].get("params")).replace(" (", "\n(") +
                          (f"\nFS={rob[k]['fs']:.2f}" if rob[k].get("fs") is not None else "\nFS undefined")
                          for k in names]
    a.bar(range(len(accs)), accs, color=["C0"] + ["C1"] * len(names))
    a.set_xticks(range(len(accs)), labels)
    n = rob.get("n_samples")
    a.set(ylabel=f"{_METRIC_LABELS.get(metric, 'top-1 accuracy')} (validation{f', n = {n}' if n else ''})")
    if metric is None:
        _chance(a, run)
    if a.get_lines():
        a.legend(fontsize=8)
    _save(fig, path)


def plot_eed_checkpoints(history: list[dict[str, Any]], path: str | os.PathLike,
                         run: dict[str, Any] | None = None) -> None:
    """DINO's EED study per run: EED% (left) and SSDC (right) over depth, one line per checkpoint
    (``eed_checkpoints`` of ``results.json``), coloured from the first checkpoint (light) to the last
    (dark), so a bottleneck forming during training shows as the lines moving apart."""
    from matplotlib import colormaps  # deferred: matplotlib is imported only when a plot is drawn

    fig, (a, b) = _figure(2)
    _title(fig, "EED and SSDC over depth during training", run)
    cmap = colormaps["viridis_r"]
    n = len(history)
    for i, h in enumerate(history):
        colour = cmap(0.15 + 0.85 * i / max(1, n - 1))
        label = f"epoch {h['epoch']}"
        if h.get("eed_percent") is not None:
            a.plot(h.get("eed_layers") or h["layers"], _nan(h["eed_percent"]), "o-", color=colour, label=label)
        if h.get("ssdc") is not None:
            b.plot(h["layers"], _nan(h["ssdc"]), "o-", color=colour, label=label)
    tap = history[0].get("eed_tap", history[0].get("tap", "attn_in")) if history else "attn_in"
    a.set(xlabel=f"layer: {_TAP_LABELS.get(tap, tap)}", ylabel="EED % (100·N_eff / D)", title="Effective encoding dimension")
    b.set(xlabel=f"layer: {_TAP_LABELS.get(tap, tap)}", ylabel="SSDC", title="Spatial structure (SSDC)")
    b.axhline(0.0, color="0.6", lw=0.8)
    for ax in (a, b):
        if ax.get_lines():
            ax.legend(fontsize=7, ncol=2)
    _save(fig, path)


def plot_attention(att: dict[str, Any], path: str | os.PathLike, run: dict[str, Any] | None = None) -> None:
    """Attention entropy (left: one line per head and the mean, with uniform attention's entropy) and mean
    attention distance (right: one dot per head and the mean) over depth."""
    fig, (a, b) = _figure(2)
    _title(fig, "Attention entropy and mean attention distance", run)
    layers = att["layers"]
    for h in range(int(att["heads"])):
        a.plot(layers, _nan([r[h] for r in att["entropy"]]), "-", color="0.75", lw=0.8)
        b.plot(layers, _nan([r[h] for r in att["distance"]]), ".", color="0.6")
    a.plot(layers, _nan(att["entropy_mean"]), "o-", color="C0", label="mean over heads")
    a.plot(layers, _nan(att["max_entropy"]), ":", color="C3", label="uniform attention")
    b.plot(layers, _nan(att["distance_mean"]), "o-", color="C0", label="mean over heads")
    a.set(xlabel="layer", ylabel="entropy (nats)")
    b.set(xlabel="layer", ylabel=f"mean attention distance ({att.get('distance_unit', 'patch')} units)")
    _legend_below(a)
    _legend_below(b)
    _save(fig, path)


def plot_coord_robustness(cr: dict[str, Any], path: str | os.PathLike, run: dict[str, Any] | None = None) -> None:
    """Accuracy (when the task has class accuracy) and feature cosine similarity against the perturbation
    size, for per-token coordinate jitter (left) and a global coordinate offset (right)."""
    fig, axes = _figure(2)
    _title(fig, "Robustness to coordinate perturbations", run)
    for ax, kind in zip(axes, ("jitter", "offset")):
        rows = cr.get(kind) or []
        sizes = [r["size"] for r in rows]
        if any(r.get("acc") is not None for r in rows):
            ax.plot(sizes, _nan([r.get("acc") for r in rows]), "o-", color="C0", label="top-1 accuracy")
        ax.plot(sizes, _nan([r.get("feature_cos") for r in rows]), "s--", color="C1", label="feature cosine")
        ax.set(xlabel=f"{kind} size ({cr.get('units', {}).get(kind, '')})", ylim=(-0.05, 1.05))
        _legend_below(ax)
    _chance(axes[0], run)
    _save(fig, path)

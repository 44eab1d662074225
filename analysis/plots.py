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

from pebench.io import default_file_mode

__all__ = ["plot_geometry", "plot_alpha_sweep", "plot_extrapolation", "plot_robustness", "save_plot", "run_info",
           "run_label", "shift_label"]

#: how a perturbation parameter is written in labels (robustness.DEFAULT_PARAMS keys)
_PARAM_NAMES = {"quality": "quality", "sigma": "σ", "p": "p", "rate": "rate"}


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


def _figure(ncols: int = 1, width: float = 5.0, height: float = 3.6):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

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


def plot_geometry(geo: dict[str, Any], path: str | os.PathLike, run: dict[str, Any] | None = None) -> None:
    """Two panels vs depth: SSDC and SSDC-RPI (left), EED% (right)."""
    fig, (a, b) = _figure(2)
    _title(fig, "Layer-wise geometry", run)
    layers = geo["layers"]
    if geo.get("ssdc") is not None:
        a.plot(layers, _nan(geo["ssdc"]), "o-", label="SSDC")
    if geo.get("ssdc_rpi") is not None:
        a.plot(layers, _nan(geo["ssdc_rpi"]), "s--", label="SSDC (RPI)")
    a.axhline(0.0, color="0.6", lw=0.8)
    a.set(xlabel="block", ylabel=f"SSDC ({geo.get('distance', 'l1')})", title=f"SSDC (probe n={geo.get('probe_size')})")
    a.set_xticks(layers)
    a.legend()
    if geo.get("eed_percent") is not None:
        b.plot(layers, _nan(geo["eed_percent"]), "o-", color="C2")
    b.set(xlabel="block", ylabel="EED %", title="Effective encoding dimension")
    b.set_xticks(layers)
    _save(fig, path)


def plot_alpha_sweep(rows: list[dict[str, Any]], path: str | os.PathLike, run: dict[str, Any] | None = None) -> None:
    """Accuracy, FS and peak SSDC-RPI vs α (two panels)."""
    fig, (a, b) = _figure(2)
    _title(fig, "α sweep (additive PE scaled by α at inference)", run)
    al = [r["alpha"] for r in rows]
    shift = rows[0].get("shift", "shift") if rows else "shift"
    a.plot(al, _nan([r["acc"] for r in rows]), "o-", label="accuracy")
    a.plot(al, _nan([r["fs"] for r in rows]), "s--", label=f"FS ({shift_label(shift, rows[0].get('params'))})")
    _chance(a, run)
    a.set(xlabel="α (PE scale)", ylabel="accuracy / FS", title="Accuracy and fragility vs α")
    a.legend()
    b.plot(al, _nan([r["ssdc_rpi_peak"] for r in rows]), "o-", color="C2")
    b.axhline(0.0, color="0.6", lw=0.8)
    b.set(xlabel="α (PE scale)", ylabel="peak SSDC (RPI)", title="Index-anchored structure vs α")
    _save(fig, path)


def plot_extrapolation(rows: list[dict[str, Any]], path: str | os.PathLike, run: dict[str, Any] | None = None) -> None:
    """Top-1 accuracy vs tokens per sample (log x), one point per evaluated resolution, with the
    chance level when the run states its class count."""
    fig, (a,) = _figure(1, width=5.5)
    _title(fig, "Resolution extrapolation", run)
    ok = [r for r in rows if "error" not in r and r.get("acc1") is not None]
    ok.sort(key=lambda r: r["n_tokens"])
    xs, ys = [r["n_tokens"] for r in ok], [r["acc1"] for r in ok]
    a.plot(xs, ys, "o-", label="top-1 (one checkpoint, no re-training)")
    _chance(a, run)
    for r in ok:
        a.annotate(r["resolution"], (r["n_tokens"], r["acc1"]), textcoords="offset points", xytext=(3, 4),
                   fontsize=8)
    if xs and max(xs) > 2 * min(xs):
        a.set_xscale("log", base=2)
    n = sorted({r.get("n_samples") for r in ok if r.get("n_samples")})
    samples = f", n = {n[0]} per size" if len(n) == 1 else ""
    a.set(xlabel="patch tokens per sample (input size annotated)", ylabel=f"top-1 accuracy (validation{samples})")
    if a.get_lines():
        a.legend(fontsize=8)
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
    accs = [rob["clean_acc"]] + [rob[k]["acc"] for k in names]
    labels = ["clean"] + [shift_label(k, rob[k].get("params")).replace(" (", "\n(") +
                          (f"\nFS={rob[k]['fs']:.2f}" if rob[k].get("fs") is not None else "\nFS undefined")
                          for k in names]
    a.bar(range(len(accs)), accs, color=["C0"] + ["C1"] * len(names))
    a.set_xticks(range(len(accs)), labels)
    n = rob.get("n_samples")
    a.set(ylabel=f"top-1 accuracy (validation{f', n = {n}' if n else ''})")
    _chance(a, run)
    if a.get_lines():
        a.legend(fontsize=8)
    _save(fig, path)

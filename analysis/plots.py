"""Plots of the analyses (PNG). Uses matplotlib's object API with the Agg canvas (no pyplot, no
global backend state, safe in headless runs and threads).

Each ``plot_*(data, path)`` writes a PNG to ``path`` directly (format forced to PNG whatever the
suffix); :func:`save_plot` wraps one atomically (temp file in the same folder + ``os.replace``).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable

__all__ = ["plot_geometry", "plot_alpha_sweep", "plot_extrapolation", "plot_robustness", "save_plot"]


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


def save_plot(fn: Callable[[Any, str], None], data: Any, path: str | os.PathLike) -> Path:
    """Run ``fn(data, tmp)`` and move the result to ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".png.tmp", dir=path.parent)
    os.close(fd)
    try:
        fn(data, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def plot_geometry(geo: dict[str, Any], path: str | os.PathLike) -> None:
    """Two panels vs depth: SSDC and SSDC-RPI (left), EED% (right)."""
    fig, (a, b) = _figure(2)
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


def plot_alpha_sweep(rows: list[dict[str, Any]], path: str | os.PathLike) -> None:
    """Accuracy, FS and peak SSDC-RPI vs α (two panels)."""
    fig, (a, b) = _figure(2)
    al = [r["alpha"] for r in rows]
    shift = rows[0].get("shift", "shift") if rows else "shift"
    a.plot(al, _nan([r["acc"] for r in rows]), "o-", label="accuracy")
    a.plot(al, _nan([r["fs"] for r in rows]), "s--", label=f"FS ({shift})")
    a.set(xlabel="α (PE scale)", ylabel="accuracy / FS", title="Accuracy and fragility vs α")
    a.legend()
    b.plot(al, _nan([r["ssdc_rpi_peak"] for r in rows]), "o-", color="C2")
    b.axhline(0.0, color="0.6", lw=0.8)
    b.set(xlabel="α (PE scale)", ylabel="peak SSDC (RPI)", title="Index-anchored structure vs α")
    _save(fig, path)


def plot_extrapolation(rows: list[dict[str, Any]], path: str | os.PathLike) -> None:
    """Top-1 accuracy vs tokens per sample (log x), one point per evaluated resolution."""
    fig, (a,) = _figure(1, width=5.5)
    ok = [r for r in rows if "error" not in r and r.get("acc1") is not None]
    ok.sort(key=lambda r: r["n_tokens"])
    xs, ys = [r["n_tokens"] for r in ok], [r["acc1"] for r in ok]
    a.plot(xs, ys, "o-")
    for r in ok:
        a.annotate(r["resolution"], (r["n_tokens"], r["acc1"]), textcoords="offset points", xytext=(3, 4),
                   fontsize=8)
    if xs and max(xs) > 2 * min(xs):
        a.set_xscale("log", base=2)
    a.set(xlabel="tokens per sample", ylabel="top-1 accuracy", title="Resolution extrapolation")
    bad = [r["resolution"] for r in rows if "error" in r]
    if bad:
        a.text(0.01, 0.01, "skipped: " + ", ".join(bad), transform=a.transAxes, fontsize=7, color="C3")
    _save(fig, path)


def plot_robustness(rob: dict[str, Any], path: str | os.PathLike) -> None:
    """Bar chart: clean accuracy and accuracy under each shift (FS in the labels)."""
    fig, (a,) = _figure(1)
    names = [k for k, v in rob.items() if isinstance(v, dict)]
    accs = [rob["clean_acc"]] + [rob[k]["acc"] for k in names]
    labels = ["clean"] + [f"{k}\nFS={rob[k]['fs']:.2f}" if rob[k]["fs"] is not None else k for k in names]
    a.bar(range(len(accs)), accs, color=["C0"] + ["C1"] * len(names))
    a.set_xticks(range(len(accs)), labels)
    a.set(ylabel="accuracy", title="Robustness")
    _save(fig, path)

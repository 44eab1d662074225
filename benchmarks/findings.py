"""Summarise the SSDC / EED / fragility study from a sweep's result files (README "Findings").

    python benchmarks/findings.py --results results/embedded --dataset shapes --png docs/findings.png

Prints one markdown table (mean ± std over seeds per PE variant: accuracy, per-layer SSDC_RPI,
SSDC, EED%, FS under JPEG and blur) and writes a PNG of SSDC_RPI and EED% against depth.
"""
from __future__ import annotations

import argparse
import io
import os
from collections import defaultdict

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from pebench.io import atomic_write_bytes
from pebench.leaderboard import collect_results
from pebench.leaderboard.render import pe_sort_key


def _fmt(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float) * scale
    if v.size == 0:
        return "—"
    return f"{v.mean():.{digits}f} ± {v.std(ddof=1):.{digits}f}" if v.size > 1 else f"{v.mean():.{digits}f}"


def _mean_layers(rows: list[list[float | None]]) -> np.ndarray:
    """Per-layer mean over seeds (None -> NaN, ignored)."""
    arr = np.asarray([[np.nan if v is None else v for v in row] for row in rows], dtype=float)  # (seeds, L)
    return np.nanmean(arr, axis=0)


def _layers(rows: list[list[float | None]]) -> str:
    return " / ".join(f"{m:.2f}" for m in _mean_layers(rows))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results/embedded", help="root of the sweep's run directories")
    ap.add_argument("--dataset", default="shapes", help="dataset whose runs to summarise")
    ap.add_argument("--png", default=None, help="write SSDC_RPI / EED%% vs depth plot here")
    args = ap.parse_args(argv)

    runs, _ = collect_results(args.results)
    by_label: dict[str, list] = defaultdict(list)
    for r in runs:
        if r.complete and r.dataset == args.dataset and r.geometry:
            by_label[r.label].append(r)
    labels = sorted(by_label, key=lambda lab: pe_sort_key(by_label[lab][0].pe, lab))
    print("| PE | n | acc1 (%) | SSDC_RPI per layer | SSDC per layer | EED% per layer | FS jpeg | FS blur |")
    print("|---|---:|---:|---|---|---|---:|---:|")
    for lab in labels:
        rs = by_label[lab]
        acc = [r.metrics.get("val/acc1") for r in rs]
        fs = {k: [(r.robustness or {}).get(k, {}).get("fs") for r in rs] for k in ("jpeg", "blur")}
        print(f"| {lab} | {len(rs)} | {_fmt(acc, 100, 1)} | {_layers([r.geometry['ssdc_rpi'] for r in rs])} | "
              f"{_layers([r.geometry['ssdc'] for r in rs])} | {_layers([r.geometry['eed_percent'] for r in rs])} | "
              f"{_fmt(fs['jpeg'], 1, 3)} | {_fmt(fs['blur'], 1, 3)} |")
    if args.png:
        fig = Figure(figsize=(10, 4))
        FigureCanvasAgg(fig)
        ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
        for lab in labels:
            rs = by_label[lab]
            depth = np.arange(1, len(rs[0].geometry["ssdc_rpi"]) + 1)
            ax1.plot(depth, _mean_layers([r.geometry["ssdc_rpi"] for r in rs]), marker="o", label=lab)
            ax2.plot(depth, _mean_layers([r.geometry["eed_percent"] for r in rs]), marker="o", label=lab)
        for ax in (ax1, ax2):
            ax.set_xticks(depth)
        ax1.axhline(0, color="grey", lw=0.5)
        ax1.set(xlabel="layer", ylabel="SSDC under RPI", title=f"{args.dataset}: SSDC_RPI (mean over seeds)")
        ax2.set(xlabel="layer", ylabel="EED %", title="effective encoding dimension")
        ax1.legend(fontsize=8)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        atomic_write_bytes(os.fspath(args.png), buf.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

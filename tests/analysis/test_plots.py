"""Plot annotations (issue #18): titles name the run, shifts state their parameters, accuracy
axes carry the chance level, extrapolation axes name the protocol."""
from __future__ import annotations

import pytest

from pebench.analysis import plots

RUN = plots.run_info({"dataset": "shapes", "pe": "ape", "rpt": True, "model": "vit-nano", "seed": 2}, num_classes=8)


@pytest.fixture
def figures(monkeypatch):
    captured = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: captured.append(fig))
    return captured


def _chance_lines(ax):
    return [ln for ln in ax.get_lines() if str(ln.get_label()).startswith("chance")]


def test_run_info_and_labels():
    assert RUN == {"dataset": "shapes", "pe": "ape+rpt", "model": "vit-nano", "seed": 2, "num_classes": 8}
    assert plots.run_label(RUN) == "shapes · ape+rpt · vit-nano · seed 2"
    assert plots.run_label(None) == ""
    assert plots.shift_label("jpeg", {"quality": 5}) == "jpeg (quality 5)"
    assert plots.shift_label("blur", {"sigma": 2.5}) == "blur (σ 2.5)"
    assert plots.shift_label("noise", None) == "noise"


def test_robustness_plot_states_parameters_title_and_chance(figures):
    rob = {"clean_acc": 0.9, "n_samples": 512, "jpeg": {"acc": 0.6, "fs": 1 - 0.6 / 0.9, "params": {"quality": 5}},
           "blur": {"acc": 0.3, "fs": None, "params": {"sigma": 2.5}}}
    plots.plot_robustness(rob, "unused.png", run=RUN)
    (fig,) = figures
    assert fig._suptitle.get_text() == "Robustness to content shifts — shapes · ape+rpt · vit-nano · seed 2"
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["clean", "jpeg\n(quality 5)\nFS=0.33", "blur\n(σ 2.5)\nFS undefined"]
    (chance,) = _chance_lines(ax)
    assert list(chance.get_ydata()) == [0.125, 0.125]
    assert "n = 512" in ax.get_ylabel()


def test_extrapolation_plot_chance_line_and_axis_labels(figures):
    rows = [{"resolution": "64", "acc1": 0.5, "n_tokens": 256, "n_samples": 128},
            {"resolution": "32", "acc1": 0.9, "n_tokens": 64, "n_samples": 128},
            {"resolution": "30", "error": "not divisible by the patch size"}]
    plots.plot_extrapolation(rows, "unused.png", run=RUN)
    (fig,) = figures
    ax = fig.axes[0]
    assert "Resolution extrapolation — shapes · ape+rpt" in fig._suptitle.get_text()
    (chance,) = _chance_lines(ax)
    assert list(chance.get_ydata()) == [0.125, 0.125]
    curve = [ln for ln in ax.get_lines() if ln not in _chance_lines(ax)][0]
    assert list(curve.get_xdata()) == [64, 256] and list(curve.get_ydata()) == [0.9, 0.5]
    assert ax.get_xlabel().startswith("patch tokens per sample") and "n = 128 per size" in ax.get_ylabel()
    # without a class count there is no chance line, and no run: the plain title
    figures.clear()
    plots.plot_extrapolation(rows, "unused.png")
    assert not _chance_lines(figures[0].axes[0]) and figures[0]._suptitle.get_text() == "Resolution extrapolation"


def test_save_plot_passes_run_through(tmp_path):
    geo = {"layers": [1, 2], "ssdc": [0.1, 0.2], "ssdc_rpi": [0.0, 0.1], "eed_percent": [5.0, 6.0], "probe_size": 4}
    out = plots.save_plot(plots.plot_geometry, geo, tmp_path / "geometry.png", run=RUN)
    assert out.read_bytes()[:4] == b"\x89PNG"


def _inside(inner, outer, tol: float = 1.0) -> bool:
    return (inner.x0 >= outer.x0 - tol and inner.x1 <= outer.x1 + tol and inner.y0 >= outer.y0 - tol
            and inner.y1 <= outer.y1 + tol)


def _draw(fig):
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def test_geometry_legends_cover_no_curve_and_name_eed(figures):
    geo = {"layers": [0, 1, 2, 3], "ssdc": [0.12, 0.1, 0.0, -0.02], "ssdc_rpi": [0.03, 0.12, 0.06, 0.03],
           "ssdc_rpi_sd": [0.01] * 4, "ssdc_rpi_init": [0.03] * 4, "ssdc_rpi_init_sd": [0.01] * 4,
           "rpi_permutations": 8, "eed_percent": [44.0, 22.0, 8.0, 7.0], "eed_top1_share": [0.06, 0.2, 0.3, 0.27],
           "probe_size": 256}
    plots.plot_geometry(geo, "unused.png", run=RUN)
    (fig,) = figures
    renderer = _draw(fig)
    a, b = fig.axes[:2]
    for ax in (a, b):  # below the x label, outside the plotting area
        legend = ax.get_legend()
        assert legend is not None and legend.get_window_extent(renderer).y1 <= ax.get_window_extent(renderer).y0
        assert _inside(legend.get_window_extent(renderer), fig.bbox)
    assert [t.get_text() for t in b.get_legend().get_texts()] == ["EED %", "top-1 eigenvalue share (right axis)"]


def test_alpha_sweep_gives_fs_its_own_panel(figures):
    rows = [{"alpha": a, "acc": acc, "fs": fs, "ssdc_rpi_peak": 0.1 * a, "shift": "jpeg", "tap": "attn_in"}
            for a, acc, fs in ((0.0, 0.1, None), (0.5, 0.8, 0.1), (1.0, 0.9, 0.12))]
    plots.plot_alpha_sweep(rows, "unused.png", run=RUN)
    (fig,) = figures
    acc_ax, fs_ax, ssdc_ax = fig.axes
    assert [ln.get_label() for ln in acc_ax.get_lines()] == ["clean accuracy", "chance (1/8)"]
    assert acc_ax.get_ylabel() == "clean top-1 accuracy" and fs_ax.get_ylabel() == "fragility FS"
    fs_lines = [ln for ln in fs_ax.get_lines() if str(ln.get_label()).startswith("FS")]
    assert len(fs_lines) == 1 and list(fs_lines[0].get_xdata()) == [0.0, 0.5, 1.0]
    assert [t.get_text() for t in fs_ax.texts] == ["n/a"] and fs_ax.get_xlim() == acc_ax.get_xlim()
    assert "SSDC" in ssdc_ax.get_ylabel()


def test_extrapolation_labels_stay_inside_the_axes(figures):
    rows = [{"resolution": str(r), "acc1": acc, "n_tokens": (r // 4) ** 2, "n_samples": 128}
            for r, acc in ((32, 0.9), (48, 0.8), (64, 0.65), (96, 0.6), (128, 0.52))]
    plots.plot_extrapolation(rows, "unused.png", run=RUN)
    (fig,) = figures
    renderer = _draw(fig)
    ax = fig.axes[0]
    labels = [t for t in ax.texts if t.get_text() in {r["resolution"] for r in rows}]
    assert len(labels) == 5
    for t in labels:
        assert _inside(t.get_window_extent(renderer), ax.get_window_extent(renderer)), t.get_text()


def test_run_curves_draw_the_chance_level_and_sweep_legends_sit_beside_both_panels(monkeypatch):
    from pebench.leaderboard import curves

    captured = []
    monkeypatch.setattr(curves, "_png", lambda fig: captured.append(fig) or b"")
    hist = {"train/loss_epoch": {0: 2.0, 1: 1.0}, "val/loss": {0: 1.5, 1: 0.9}, "train/acc1": {0: 0.3, 1: 0.6},
            "val/acc1": {0: 0.4, 1: 0.7}}
    res = {"robustness": {"chance": 0.125}, "primary_metric": "test/acc1"}
    curves.plot_run_curves(hist, "t", "test/acc1", curves.chance_level(res))
    loss_ax, acc_ax = captured[0].axes
    labels = [ln.get_label() for ln in acc_ax.get_lines()]
    assert labels == ["train", "validation", "chance (0.125)"]  # test/acc1 has no epochs: val/acc1 is drawn
    series = {"d": {pe: {"primary": "test/acc1", "metric_column": "val/acc1", "chance": 0.5,
                         "val_loss": {0: [1.0, 1.1], 1: [0.5, 0.6]}, "val_metric": {0: [0.5, 0.6], 1: [0.8, 0.9]}}
                    for pe in ("ape", "none")}}
    curves.plot_sweep_curves(series, "t")
    fig = captured[1]
    renderer = _draw(fig)
    loss_ax, metric_ax = fig.axes
    legend = metric_ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["ape (n=2)", "none (n=2)", "chance (0.5)"]
    assert legend.get_window_extent(renderer).x0 >= metric_ax.get_window_extent(renderer).x1
    assert min(t.get_size() for t in legend.get_texts()) >= 9 and metric_ax.get_title() == "d: val/acc1 (mean over seeds)"

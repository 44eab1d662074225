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

"""benchmarks/dino_shortcut.py: the explained-variance share against independent formulas, and the
whole diagnosis on a tiny DINO run (whose rebuilt initial model must match the run's recorded k-NN)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import dino_shortcut
from pebench.cli import main

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def shortcut():
    return dino_shortcut


def test_class_share_is_the_between_class_sum_of_squares(shortcut):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, size=200)
    f = rng.normal(size=(200, 6)) + 0.7 * y[:, None] * rng.normal(size=(1, 6))  # (n, D)
    mu = f.mean(0)
    between = sum((y == c).sum() * ((f[y == c].mean(0) - mu) ** 2).sum() for c in range(4))
    total = ((f - mu) ** 2).sum()
    assert shortcut.explained_share(f, np.eye(4)[y]) == pytest.approx(between / total, rel=1e-9)


def test_scalar_share_of_one_feature_is_the_squared_correlation(shortcut):
    rng = np.random.default_rng(1)
    z = rng.normal(size=300)
    f = (2.0 * z + rng.normal(size=300))[:, None]
    r = np.corrcoef(f[:, 0], z)[0, 1]
    assert shortcut.explained_share(f, z) == pytest.approx(r ** 2, rel=1e-9)
    assert shortcut.explained_share(f, rng.normal(size=(300, 0))) == pytest.approx(0.0, abs=1e-12)  # no factor


@pytest.mark.slow
def test_diagnosis_of_a_tiny_objects_run(shortcut, tmp_path, capsys):
    out = tmp_path / "dino"
    rc = main(["run", "--task", "dino", "--dataset", "objects", "--pe", "rope-axial", "--model", "vit-nano",
               "--epochs", "1", "--warmup-epochs", "0", "--batch-size", "8", "--data-option", "train_size=32",
               "--data-option", "val_size=16", "--task-option", "n_local=1", "--task-option", "eed_probe_size=8",
               "--task-option", "out_dim=32", "--task-option", "head_hidden=32", "--task-option", "head_bottleneck=16",
               "--out", str(out), "--no-progress-bar", "--analyses", "none", "--deterministic"])
    assert rc in (0, None)
    capsys.readouterr()
    report = tmp_path / "REPORT.md"
    assert shortcut.main(["--results", str(out), "--report", str(report)]) == 0  # stops if the rebuilt init differs
    text = capsys.readouterr().out
    assert text.startswith("| set |") and text.endswith("|\n")
    assert text.strip("\n") in report.read_text()  # the report carries the printed table
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| objects")]
    assert [r[3] for r in rows] == list(shortcut.FACTORS)
    for r in rows:
        for cell in r[4:6]:
            assert 0.0 <= float(cell) <= 100.0
    # a corrupted recording of the initial k-NN is caught: the rebuilt model is not the run's
    res = next(out.rglob("results.json"))
    original = res.read_text()
    data = json.loads(original)
    data["metrics"]["test/knn_top1_init"] += 0.25
    res.write_text(json.dumps(data))
    with pytest.raises(SystemExit, match="not the run's initialisation"):
        shortcut.main(["--results", str(out), "--recompute"])
    # without the checkpoint the table regenerates from the run's cached shares
    res.write_text(original)
    next(out.rglob("last.ckpt")).unlink()
    assert shortcut.main(["--results", str(out)]) == 0
    assert capsys.readouterr().out == text


RESULTS = REPO / "results" / "dino"


@pytest.mark.skipif(not list(RESULTS.glob("*/*/*/seed*/dino_shortcut.json")), reason="no committed diagnosis")
def test_dino_report_regenerates_from_the_committed_shares(shortcut, tmp_path):
    report = tmp_path / "REPORT.md"
    assert shortcut.main(["--results", str(RESULTS), "--report", str(report)]) == 0
    assert report.read_text(encoding="utf-8") == (RESULTS / "REPORT.md").read_text(encoding="utf-8")

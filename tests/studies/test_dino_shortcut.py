"""benchmarks/dino_shortcut.py: the explained-variance share against independent formulas, the whole
diagnosis on a tiny DINO run (whose rebuilt initial model must match the run's recorded k-NN), and its
page results/dino/FEATURES.md, which regenerates byte for byte from the committed shares."""
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
    report = tmp_path / "FEATURES.md"
    assert shortcut.main(["--results", str(out), "--report", str(report)]) == 0  # stops if the rebuilt init differs
    text = capsys.readouterr().out
    assert text.startswith("| set |") and text.endswith("|\n")
    assert text.strip("\n") in report.read_text()  # the page carries the printed table
    assert str(tmp_path) not in report.read_text()
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
COMMITTED = sorted(RESULTS.glob("*/*/*/seed*/dino_shortcut.json"))


@pytest.mark.skipif(not COMMITTED, reason="no committed diagnosis")
def test_features_page_regenerates_from_the_committed_shares(shortcut, tmp_path, capsys):
    page = tmp_path / "FEATURES.md"
    assert shortcut.main(["--results", str(RESULTS), "--report", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == (RESULTS / "FEATURES.md").read_text(encoding="utf-8")
    assert str(REPO) not in page.read_text(encoding="utf-8")  # no machine path
    assert capsys.readouterr().out.strip("\n") in page.read_text(encoding="utf-8")  # the printed table


@pytest.mark.skipif(not COMMITTED, reason="no committed diagnosis")
def test_zero_variance_change_is_no_test(shortcut, tmp_path, capsys):
    """Three seeds whose shares are the same: every change has zero variance, so no test (never p = 0)."""
    runs = sorted((RESULTS / "objects" / "none").glob("*/seed*/results.json"))
    assert len(runs) >= 2
    shares = {"init": {f: 0.1 for f in shortcut.FACTORS}, "trained": {f: 0.25 for f in shortcut.FACTORS}}
    for res in runs:
        where = tmp_path / res.parent.relative_to(RESULTS)
        where.mkdir(parents=True)
        (where / "results.json").write_bytes(res.read_bytes())
        (where / shortcut.CACHE).write_text(json.dumps(shares))
    page = tmp_path / "FEATURES.md"
    assert shortcut.main(["--results", str(tmp_path), "--report", str(page)]) == 0
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines() if line.startswith("| objects")]
    assert [r[3] for r in rows] == list(shortcut.FACTORS)
    for r in rows:
        assert r[6].startswith("+15.0, no test (zero variance") and "p =" not in r[6]
        assert r[4] == "10.0 [10.0, 10.0]" and r[5] == "25.0 [25.0, 25.0]"
    assert str(tmp_path) not in page.read_text(encoding="utf-8")


def test_chance_levels_use_the_sets_classes_and_the_factors_columns(shortcut):
    """The constants behind the chance paragraph: the sets' classes and default training split, and the columns of
    each scene factor (scene_factors on a stand-in dataset)."""
    import inspect

    from pebench.datamodules.synthetic.objects import NUM_OBJECT_CLASSES, ObjectsDataModule
    from pebench.datamodules.synthetic.textures import TEXTURE_CLASSES, TexturesDataModule

    assert shortcut.CLASSES == {"objects": NUM_OBJECT_CLASSES, "textures": len(TEXTURE_CLASSES)}
    for cls in (ObjectsDataModule, TexturesDataModule):
        assert inspect.signature(cls.__init__).parameters["train_size"].default == shortcut.TRAIN_SIZE

    class Scenes:
        def scene(self, i):
            return {"bg": np.full((2, 2), i / 10), "r": 1.0 + i, "centre": (i, 2 * i + i % 2), "colour": np.ones(3) * i}

    factors = shortcut.scene_factors(Scenes(), np.arange(6) % 3, 3)
    assert set(factors) == set(shortcut.FACTORS)
    for name, z in factors.items():
        if name != "class":
            assert z.reshape(len(z), -1).shape[1] == shortcut.DOF[name]

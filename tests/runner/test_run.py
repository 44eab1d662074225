"""End-to-end runs (tiny): fast_dev_run per dataset, results.json, reproduction from config.yaml,
kill-and-resume, non-finite loss, eval."""
from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
import yaml

from pebench.cli import main
from pebench.datamodules import get_datamodule_class, list_datamodules
from pebench.encodings import get_pe_class, list_pes
from pebench.runner.run import RESULT_KEYS, load_registries

load_registries()
SYNTHETIC = [n for n in list_datamodules() if not get_datamodule_class(n).needs_data_root]
TINY = {"dataset": "shapes", "pe": "ape", "epochs": 1, "batch_size": 32, "lr": 1e-3,
        "data": {"train_size": 64, "val_size": 40}, "analyses": "none", "progress_bar": False}


def _run_dir(out: Path, dataset="shapes", pe="ape", model="vit-nano", seed=0) -> Path:
    return out / dataset / pe / model / f"seed{seed}"


def _no_tmp_files(root: Path) -> None:
    assert not [p for p in root.rglob("*.tmp")], list(root.rglob("*.tmp"))


def _applicable(dataset: str) -> list[str]:
    modality = get_datamodule_class(dataset).modality
    return [pe for pe in list_pes() if modality in get_pe_class(pe).modalities]


def _matrix() -> list[tuple[str, str]]:
    """Every PE on one dataset of each datamodule family (image, video, events, points, probes, video
    probe), every other embedded dataset with one PE: the image probes share one datamodule, objects and
    textures share the square-image base of shapes, the detection sets test their PEs in
    tests/test_detection.py, and the full product would cost minutes of the suite's 10-minute budget."""
    full = ("shapes", "moving-shapes", "synthetic-events", "primitives", "probe-translation", "probe-motion")
    out = []
    for d in SYNTHETIC:
        if d == "primitives-scene":  # segmentation: every point PE in tests/test_segmentation.py, on tiny rooms
            continue
        pes = _applicable(d)
        out += [(d, pe) for pe in (pes if d in full else pes[-1:])]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("dataset,pe", _matrix())
def test_fast_dev_run_every_embedded_dataset(dataset, pe, tmp_path):
    """Every PE trains (one batch) on one embedded dataset of each family; every embedded dataset trains."""
    out = tmp_path / "runs"
    rc = main(["run", "--dataset", dataset, "--pe", pe, "--fast-dev-run", "--batch-size", "4",
               "--no-progress-bar", "--out", str(out)])
    assert rc == 0
    res = json.loads((_run_dir(out, dataset, pe) / "results.json").read_text())
    assert res["status"] == "complete" and res["dataset"] == dataset and res["pe"] == pe
    assert 0.0 <= res["metrics"][res["primary_metric"]] <= 1.0
    _no_tmp_files(out)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    cfg = root / "tiny.yaml"
    cfg.write_text(yaml.safe_dump({**TINY, "out": str(root / "runs")}))
    assert main(["run", "--config", str(cfg)]) == 0
    run_dir = _run_dir(root / "runs")
    return root, run_dir, json.loads((run_dir / "results.json").read_text())


def test_dataset_info_records_the_probes_no_pe_ceiling():
    """What results.json's ``dataset_info`` holds: the leaderboard states it without importing datamodules."""
    from pebench.runner.run import dataset_info

    assert dataset_info(get_datamodule_class("probe-decay")) == {"no_pe_bound": 0.5}
    assert dataset_info(get_datamodule_class("probe-context")) == {"no_pe_bound": 1 / 3}
    assert dataset_info(get_datamodule_class("shapes")) == {"no_pe_bound": None}


@pytest.mark.slow
def test_results_json_schema_and_files(tiny_run):
    root, run_dir, res = tiny_run
    assert set(RESULT_KEYS) <= set(res)
    assert res["status"] == "complete" and res["task"] == "classification"
    assert res["primary_metric"] == "val/acc1" and res["primary_metric"] in res["metrics"]
    assert set(res["metrics"]) >= {"val/acc1", "val/mean_class_acc", "val/loss"}
    assert all(0.0 <= res["metrics"][k] <= 1.0 for k in res["metrics"] if "acc" in k)
    assert res["variant"] == "ape" and res["seed"] == 0 and res["model"] == "vit-nano"
    assert res["pe_label"] == "ape" and res["dataset_info"] == {"no_pe_bound": None}  # read by the leaderboard
    assert res["val_samples"] == 40
    assert set(res["versions"]) >= {"python", "torch", "lightning", "timm", "torchmetrics", "pebench"}
    assert res["n_params"] > 0 and res["wall_time_s"] > 0
    assert res["config"]["data"] == TINY["data"]
    for name in ("config.yaml", "results.json", "last.ckpt", "metrics.csv"):
        assert (run_dir / name).is_file(), name
    _no_tmp_files(root)
    # the schema version is recorded in both files, and the written results read back as a typed RunResult
    from pebench.core.schema import SCHEMA_VERSION, RunResult
    assert res["schema_version"] == SCHEMA_VERSION
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["schema_version"] == SCHEMA_VERSION
    typed = RunResult.from_dict(res)
    assert (typed.dataset, typed.pe, typed.seed, typed.complete) == (res["dataset"], "ape", 0, True)


@pytest.mark.slow
def test_config_yaml_reproduces_run(tiny_run, capsys):
    root, run_dir, first = tiny_run
    assert main(["run", "--config", str(run_dir / "config.yaml")]) == 0
    again = json.loads((run_dir / "results.json").read_text())
    assert again["run_dir"] == first["run_dir"] and again["config"] == first["config"]
    assert again["metrics"] == first["metrics"]  # identical, not just close
    assert again["resumed_from"] is None  # a complete run is re-run from scratch


@pytest.mark.slow
def test_resume_from_last_ckpt(tiny_run):
    root, run_dir, _ = tiny_run
    res = json.loads((run_dir / "results.json").read_text())
    # as left by a 2-epoch run killed after its first epoch (resuming with other options than the
    # run directory's is refused: a directory holds one configuration)
    res["status"] = "running"
    res["config"]["epochs"] = 2
    (run_dir / "results.json").write_text(json.dumps(res))
    (run_dir / "config.yaml").write_text(yaml.safe_dump(res["config"]))
    assert main(["run", "--config", str(run_dir / "config.yaml")]) == 0
    res = json.loads((run_dir / "results.json").read_text())
    assert res["resumed_from"]["epoch"] == 1 and res["resumed_from"]["checkpoint"] == "last.ckpt"
    assert res["status"] == "complete"
    import torch
    ckpt = torch.load(run_dir / "last.ckpt", weights_only=False)  # written at the end of epoch index 1
    assert ckpt["epoch"] == 1 and ckpt["loops"]["fit_loop"]["epoch_progress"]["current"]["processed"] == 2
    lines = (run_dir / "metrics.csv").read_text().splitlines()
    epochs = {ln.split(",")[0] for ln in lines[1:]}
    assert "0" not in epochs and "1" in epochs  # only epoch 1 was trained in this attempt
    assert list(run_dir.glob("metrics.attempt*.csv"))  # the earlier attempt's log is kept


@pytest.mark.slow
def test_non_finite_loss_exits_1_and_marks_failed(tmp_path, capsys, monkeypatch):
    from pebench.tasks.classification import ClassificationTask, NonFiniteLossError

    def boom(self, batch, batch_idx):
        raise NonFiniteLossError(f"non-finite training loss nan at global step 0, epoch 0, batch {batch_idx}")

    monkeypatch.setattr(ClassificationTask, "training_step", boom)
    out = tmp_path / "runs"
    rc = main(["run", "--pe", "ape", "--epochs", "1", "--batch-size", "16", "--data-option", "train_size=32",
               "--data-option", "val_size=16", "--analyses", "none", "--no-progress-bar", "--out", str(out)])
    assert rc == 1
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("bench:")]
    assert any("non-finite" in ln and "batch 0" in ln for ln in err)
    res = json.loads((_run_dir(out) / "results.json").read_text())
    assert res["status"] == "failed" and "non-finite" in res["error"]


@pytest.mark.slow
def test_analyses_requested(tmp_path):
    out = tmp_path / "runs"
    rc = main(["run", "--pe", "ape", "--epochs", "1", "--batch-size", "16", "--data-option", "train_size=32",
               "--data-option", "val_size=16", "--analyses", "geometry", "--no-progress-bar", "--out", str(out)])
    res = json.loads((_run_dir(out) / "results.json").read_text())
    if hasattr(importlib.import_module("pebench.analysis"), "run_analyses"):
        assert rc == 0 and res["status"] == "complete"
        assert {"layers", "ssdc", "eed_percent"} <= set(res["geometry"])
    else:  # explicitly requested but not installed: never "complete"
        assert res["analyses"] == "unavailable" and res["status"] != "complete"


@pytest.mark.slow
def test_eval_corrupt_checkpoint_and_extrapolation(tiny_run, tmp_path, capsys):
    root, run_dir, _ = tiny_run
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.yaml").write_text((run_dir / "config.yaml").read_text())
    (broken / "last.ckpt").write_bytes(b"this is not a checkpoint")
    (broken / "results.json").write_text((run_dir / "results.json").read_text())  # complete: eval reads its ckpt
    has_eval = hasattr(importlib.import_module("pebench.analysis"), "evaluate_extrapolation")
    assert main(["eval", "--run", str(broken), "--resolutions", "32,48"]) == 2
    line = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(line) == 1 and line[0].startswith("bench: error:")
    if has_eval:
        assert "corrupt or incompatible" in line[0]
        assert main(["eval", "--run", str(run_dir), "--resolutions", "24,32"]) == 0
        res = json.loads((run_dir / "results.json").read_text())
        assert len(res["extrapolation"]) == 2


@pytest.mark.slow
def test_compile_option_trains_and_checkpoint_loads_uncompiled(tmp_path):
    """``--compile`` (torch.compile of the backbone, in place) trains, records the flag in
    config.yaml, and writes a checkpoint that an uncompiled task loads strictly (same keys)."""
    import torch

    from pebench.tasks.classification import ClassificationTask
    out = tmp_path / "runs"
    # the smallest preset (vit-probe: 2 blocks; dynamo compiles each block index and grad mode apart, so the
    # inductor time scales with depth) and one 2-step epoch: a compiled training step, validation and last.ckpt
    rc = main(["run", "--dataset", "shapes", "--pe", "pape", "--model", "vit-probe", "--compile", "--epochs", "1",
               "--batch-size", "8",
               "--resolution", "16", "--data-option", "train_size=16", "--data-option", "val_size=8",
               "--analyses", "none", "--no-progress-bar", "--accelerator", "cpu", "--out", str(out)])
    assert rc == 0
    run_dir = _run_dir(out, pe="pape", model="vit-probe")
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["compile"] is True
    task = ClassificationTask.load_from_checkpoint(str(run_dir / "last.ckpt"), map_location="cpu")
    state = torch.load(run_dir / "last.ckpt", map_location="cpu", weights_only=False)["state_dict"]
    assert not any("_orig_mod" in k for k in state)
    assert set(task.state_dict()) == set(state)

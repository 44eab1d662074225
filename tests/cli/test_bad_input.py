"""Bad input (issue #17, sections 3 and 4): every user mistake is one line ``bench: error: ...`` with
exit code 2 and creates nothing; missing data is an error, not a skip; skipped samples are counted by
reason and shown; ``results.json`` is strict JSON.

Most cases run in-process through ``pebench.cli.main`` (the exit code is its return value); the few
that train use the tiny fixtures of ``fixtures_real.py`` with ``--fast-dev-run``.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import fixtures_real as F  # noqa: E402
import pytest
import yaml

from pebench.cli import main  # noqa: E402
from pebench.runner.run import load_registries  # noqa: E402

load_registries()

TINY = ["--dataset", "shapes", "--pe", "ape", "--epochs", "1", "--batch-size", "16", "--resolution", "16",
        "--data-option", "train_size=32", "--data-option", "val_size=16", "--analyses", "none",
        "--no-progress-bar", "--accelerator", "cpu"]


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("GPU available", "TPU available"))]
    assert len(lines) == 1, err
    assert lines[0].startswith("bench: error: ") and "Traceback" not in err, err
    return lines[0]


def _created(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def _strict_load(path: Path) -> dict:
    def refuse(name: str):
        raise ValueError(f"non-standard JSON constant {name} in {path}")
    return json.loads(path.read_text(), parse_constant=refuse)


# ------------------------------------------------------------------------------ §4 option values
OPTION_CASES = {
    "lr_nan": (["--lr", "nan"], ["lr must be > 0 and finite", "nan"]),
    "lr_inf": (["--lr", "inf"], ["lr must be > 0 and finite", "inf"]),
    "label_smoothing_2": (["--label-smoothing", "2"], ["label_smoothing must be >= 0 and < 1"]),
    "drop_path_1.5": (["--drop-path", "1.5"], ["drop_path must be >= 0 and < 1"]),
    "weight_decay_negative": (["--weight-decay", "-1"], ["weight_decay must be >= 0"]),
    "warmup_negative": (["--warmup-epochs", "-3"], ["warmup_epochs must be >= 0"]),
    "layer_decay_zero": (["--layer-decay", "0"], ["layer_decay must be > 0 and <= 1"]),
    "limit_train_batches_0": (["--limit-train-batches", "0"], ["limit_train_batches must be > 0"]),
    "limit_val_batches_fractional_count": (["--limit-val-batches", "2.5"], ["whole number of batches"]),
    "max_skipped_fraction_2": (["--max-skipped-fraction", "2"], ["max_skipped_fraction must be >= 0 and <= 1"]),
    "val_every_0": (["--val-every", "0"], ["val_every must be >= 1"]),
    "give_up_no_colon": (["--give-up", "400"], ["give_up must be STEP:X"]),
    "give_up_step_0": (["--give-up", "0:0.3"], ["give_up must be STEP:X"]),
    "stop_at_nan": (["--stop-at", "nan"], ["stop_at must be", "finite"]),
    "lr_schedule_unknown": (["--lr-schedule", "step"], ["--lr-schedule", "cosine", "constant"]),
    "lr_schedule_dino": (["--task", "dino", "--lr-schedule", "constant"], ["--lr-schedule does not apply to --task dino"]),
    "extrapolation_not_a_size": (["--extrapolation-resolutions", "24,abc"], ["'abc' is not a resolution"]),
}


@pytest.mark.parametrize("case", sorted(OPTION_CASES))
def test_bad_option_values_exit_2(case, tmp_path, capsys):
    args, expect = OPTION_CASES[case]
    out = tmp_path / "runs"
    assert main(["run", *TINY, *args, "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    for e in expect:
        assert e in line, line
    assert _created(tmp_path) == []


def test_config_file_goes_through_the_same_validation(tmp_path, capsys):
    for bad in ({"lr": float("nan")}, {"label_smoothing": 2}, {"out": ""}, {"limit_train_batches": 0}):
        cfg = tmp_path / "bad.yaml"
        cfg.write_text(yaml.safe_dump({"dataset": "shapes", **bad}))
        assert main(["run", "--config", str(cfg), "--print-config"]) == 2, bad
        assert next(iter(bad)) in _one_error_line(capsys), bad


def test_empty_out_writes_nothing_into_the_working_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", *TINY, "--out", ""]) == 2
    assert "out must name a directory" in _one_error_line(capsys)
    assert _created(tmp_path) == []


def test_data_option_sizes_validated(tmp_path, capsys):
    for opt, key in (("train_size=0", "train_size"), ("val_size=-2", "val_size"), ("noise=nan", "noise")):
        assert main(["run", *TINY, "--data-option", opt, "--out", str(tmp_path / "runs")]) == 2
        line = _one_error_line(capsys)
        assert f"data option {key} must be" in line, line
    assert _created(tmp_path) == []


def test_extrapolation_size_not_divisible_fails_up_front(tmp_path, capsys):
    # shapes has patch 4: 30 is not a multiple of it (today: a "complete" run with error rows)
    assert main(["run", *TINY, "--analyses", "extrapolation", "--extrapolation-resolutions", "16,30,33",
                 "--out", str(tmp_path / "runs")]) == 2
    line = _one_error_line(capsys)
    assert "'30'" in line and "divisible" in line, line
    assert _created(tmp_path) == []


def test_alpha_on_a_non_additive_pe_says_it_does_not_apply(tmp_path, capsys):
    args = [a if a != "ape" else "rope-axial" for a in TINY]
    assert main(["run", *args, "--analyses", "geometry,alpha", "--out", str(tmp_path / "runs")]) == 2
    line = _one_error_line(capsys)
    assert "analysis 'alpha' does not apply to PE 'rope-axial'" in line and "additive" in line, line
    assert _created(tmp_path) == []


# ------------------------------------------------------------------------------ §4 eval / leaderboard
def test_eval_bad_resolutions_exit_2_and_touch_nothing(tmp_path, capsys):
    import importlib.util  # the run-directory helpers live beside the reliability tests (tests/runner)

    spec = importlib.util.spec_from_file_location(
        "reliability_helpers", Path(__file__).resolve().parents[1] / "runner" / "test_reliability.py")
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    _checkpoint_of, _run_dir_with_config = helpers._checkpoint_of, helpers._run_dir_with_config

    run_dir = _run_dir_with_config(tmp_path, "ape")
    (run_dir / "last.ckpt").write_bytes(_checkpoint_of(tmp_path, "ape").read_bytes())
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    for res, expect in (("30,abc,0", "'abc' is not a resolution"), ("0", "'0' is not a resolution"),
                        ("16,30", "'30'")):
        assert main(["eval", "--run", str(run_dir), "--resolutions", res]) == 2, res
        line = _one_error_line(capsys)
        assert expect in line, line
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before  # no results.json, no plot


def test_leaderboard_out_is_a_directory_exit_2(tmp_path, capsys):
    (tmp_path / "runs").mkdir()
    (tmp_path / "lb").mkdir()
    assert main(["leaderboard", "--results", str(tmp_path / "runs"), "--out", str(tmp_path / "lb")]) == 2
    assert "is a directory" in _one_error_line(capsys)
    assert main(["leaderboard", "--results", str(tmp_path / "runs"), "--out", "  "]) == 2
    assert "--out must name a markdown file" in _one_error_line(capsys)
    assert _created(tmp_path) == ["lb", "runs"]


# ------------------------------------------------------------------------------ §4 full disk
def test_full_disk_is_one_line_and_nothing_half_written(tmp_path, capsys, monkeypatch):
    """ENOSPC from the first atomic write (fsync of config.yaml's temp file): exit 1, one line,
    no temp file and no truncated file left."""
    real_fsync = os.fsync
    out = tmp_path / "runs"

    def full(fd):
        if str(out) in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(fd)

    if not os.path.exists("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd")
    monkeypatch.setattr(os, "fsync", full)
    assert main(["run", *TINY, "--out", str(out)]) == 1
    line = _one_error_line(capsys)
    assert "No space left on device" in line, line
    files = [p for p in out.rglob("*") if p.is_file()]
    assert not [p for p in files if p.name.endswith(".tmp")], files
    assert not [p for p in files if p.name in ("config.yaml", "results.json", "last.ckpt")], files


# ------------------------------------------------------------------------------ §4 data roots: nothing created
def test_corrupt_cifar_pickles_exit_2_before_the_run_directory(tmp_path, capsys):
    root = F.cifar100(tmp_path / "cifar")
    (root / "cifar-100-python" / "train").write_bytes(b"\x80\x04not a pickle at all")
    out = tmp_path / "runs"
    assert main(["run", "--preset", "cifar100-smoke", "--data-root", str(root), "--out", str(out),
                 "--accelerator", "cpu", "--no-progress-bar"]) == 2
    line = _one_error_line(capsys)
    assert "cannot read" in line and "expected layout" in line, line
    assert _created(out) == []


def test_ucmerced_without_images_exit_2_before_the_run_directory(tmp_path, capsys):
    root = F.ucmerced(tmp_path / "ucm")
    for tif in (root / "UCMerced_LandUse" / "Images").rglob("*.tif"):
        tif.unlink()
    out = tmp_path / "runs"
    assert main(["run", "--preset", "ucmerced-smoke", "--data-root", str(root), "--out", str(out),
                 "--accelerator", "cpu", "--no-progress-bar"]) == 2
    line = _one_error_line(capsys)
    assert "no images found" in line and "expected layout" in line, line
    assert _created(out) == []


# ------------------------------------------------------------------------------ §3 missing data
def test_ucf101_flat_layout_exit_2_naming_the_layout(tmp_path, capsys):
    root = F.ucf101(tmp_path / "ucf")
    videos = root / "UCF-101"
    for avi in list(videos.rglob("*.avi")):
        avi.rename(videos / avi.name)
    for d in [d for d in videos.iterdir() if d.is_dir()]:
        d.rmdir()
    out = tmp_path / "runs"
    assert main(["run", "--preset", "ucf101-smoke", "--data-root", str(root), "--out", str(out),
                 "--accelerator", "cpu", "--no-progress-bar"]) == 2
    line = _one_error_line(capsys)
    assert "do not exist" not in line and "none of the" in line, line
    assert "one folder per class" in line and "<root>/UCF-101/<Class>/v_*.avi" in line, line
    assert _created(out) == []


def test_missing_files_are_counted_apart_from_corrupt_ones(tmp_path):
    from pebench.datamodules import build_datamodule

    root = F.ucf101(tmp_path / "ucf", per_class=4)  # fold 1: 9 train, 3 test videos (g04)
    (root / "UCF-101" / "Basketball" / "v_Basketball_g01_c01.avi").unlink()  # in trainlist01
    F.truncate(root / "UCF-101" / "YoYo" / "v_YoYo_g04_c01.avi", keep=0.05)  # in testlist01: exists, undecodable
    dm = build_datamodule("ucf101", data_root=str(root), batch_size=8, resolution="4x32", frame_stride=2)
    assert dm.preflight() == {"train": 8, "val": 3}
    assert dm.skipped_samples == {"missing": 1}
    assert dm.missing_by_split["train"][:2] == (9, 1) and dm.missing_by_split["test"][:2] == (3, 0)
    assert not any("Basketball_g01" in p for p, _ in dm.samples("train"))
    batches = list(dm.val_dataloader())
    assert sum(b[2]["skipped"] for b in batches) == 1 and sum(len(b[1]) for b in batches) == 2
    assert dm.skipped_samples == {"missing": 1}  # corrupt files are counted in the batches, not as missing


def test_too_many_missing_files_exit_2_unless_allowed(tmp_path, capsys):
    root = F.ucf101(tmp_path / "ucf")  # 3 train videos: one missing is 33 % > 5 %
    (root / "UCF-101" / "YoYo" / "v_YoYo_g01_c01.avi").unlink()
    out = tmp_path / "runs"
    args = ["run", "--preset", "ucf101-smoke", "--data-root", str(root), "--out", str(out), "--accelerator", "cpu",
            "--no-progress-bar"]
    assert main(args) == 2
    line = _one_error_line(capsys)
    assert "1 of the 3 train files listed do not exist" in line and "max_skipped_fraction=0.05" in line, line
    assert _created(out) == []
    # allowed: it runs, and the missing file is counted under its own reason
    assert main([*args, "--max-skipped-fraction", "0.5", "--fast-dev-run", "--analyses", "none"]) == 0
    res = _strict_load(next(out.rglob("results.json")))
    assert res["status"] == "complete" and res["skipped_samples"]["by_reason"] == {"missing": 1, "corrupt": 0}
    assert "skipped (missing)" in capsys.readouterr().out


def test_ucf101_corrupt_clips_counted_shown_and_not_complete(tmp_path, capsys):
    """One of the three test clips corrupt (33 % > 5 %): status incomplete with the reason, counted
    by reason and shown in the summary. All three corrupt: incomplete, no obscure analysis error,
    strict JSON although the validation metrics have no samples."""
    root = F.ucf101(tmp_path / "ucf")
    # in testlist01; cut inside the header, so no frame decodes (a later cut is read: test_video_files.py)
    F.truncate(root / "UCF-101" / "Basketball" / "v_Basketball_g02_c01.avi", keep=0.05)
    out = tmp_path / "runs"
    args = ["run", "--preset", "ucf101-smoke", "--data-root", str(root), "--out", str(out), "--accelerator", "cpu",
            "--no-progress-bar", "--fast-dev-run"]
    assert main([*args, "--analyses", "none"]) == 3
    captured = capsys.readouterr()
    res = _strict_load(next(out.rglob("results.json")))
    assert res["status"] == "incomplete" and res["val_samples"] == 2
    assert res["skipped_samples"]["by_reason"]["corrupt"] >= 1 and res["skipped_samples"]["by_reason"]["missing"] == 0
    assert res["skipped_samples"]["fraction"]["val"] == pytest.approx(1 / 3, abs=1e-5)
    assert "1 of 3 val samples" in res["incomplete_reason"] and "max_skipped_fraction=0.05" in res["incomplete_reason"]
    assert "skipped (corrupt)" in captured.out and "incomplete because" in captured.out
    assert "bench: warning: 1 of 3 val samples" in captured.err

    for avi in ("ApplyEyeMakeup/v_ApplyEyeMakeup_g02_c01.avi", "YoYo/v_YoYo_g02_c01.avi"):
        F.truncate(root / "UCF-101" / avi, keep=0.05)
    shutil.rmtree(out)
    assert main([*args, "--analyses", "geometry"]) == 3
    captured = capsys.readouterr()
    res = _strict_load(next(out.rglob("results.json")))
    assert res["status"] == "incomplete" and res["val_samples"] == 0
    assert res["incomplete_reason"].startswith("no val samples: all 3 read were corrupt")
    assert "expected layout" in res["incomplete_reason"]
    assert "analysis_errors" not in res and "Traceback" not in captured.err
    assert "cannot reshape" not in captured.err


# ------------------------------------------------------------------------------ strict JSON
def test_results_json_is_strict_json():
    from pebench.runner.run import _strict_json

    obj = {"metrics": {"val/acc1": float("nan"), "val/loss": float("inf"), "ok": 0.5},
           "rows": [{"acc1": float("-inf")}, (1.0, float("nan"))], "n": 3, "s": "nan"}
    text = json.dumps(_strict_json(obj), allow_nan=False)
    assert json.loads(text) == {"metrics": {"val/acc1": None, "val/loss": None, "ok": 0.5},
                                "rows": [{"acc1": None}, [1.0, None]], "n": 3, "s": "nan"}


def test_ucf101_all_training_clips_corrupt_is_incomplete(tmp_path, capsys):
    root = F.ucf101(tmp_path / "ucf")
    for avi in sorted((root / "UCF-101").rglob("*_g01_c01.avi")):  # the three videos of trainlist01
        F.truncate(avi, keep=0.05)  # undecodable
    out = tmp_path / "runs"
    assert main(["run", "--preset", "ucf101-smoke", "--data-root", str(root), "--out", str(out), "--accelerator",
                 "cpu", "--no-progress-bar", "--fast-dev-run", "--analyses", "none"]) == 3
    res = _strict_load(next(out.rglob("results.json")))
    assert res["status"] == "incomplete" and res["skipped_samples"]["fraction"]["train"] == 1.0
    assert res["incomplete_reason"].startswith("no train samples: all 3 read were corrupt")
    assert "incomplete because" in capsys.readouterr().out


def test_whole_batch_counts_reach_lightning_as_ints(tmp_path, capsys):
    """``--limit-train-batches 2`` (a count, parsed as the float 2.0) trains 2 batches; Lightning
    refuses a float above 1, so it must arrive as an int. A clean run reports zero skips."""
    out = tmp_path / "runs"
    assert main(["run", *TINY, "--limit-train-batches", "2", "--limit-val-batches", "1", "--out", str(out)]) == 0
    res = _strict_load(next(out.rglob("results.json")))
    assert res["status"] == "complete" and res["val_samples"] == 16
    assert res["skipped_samples"] == {"in_batches": 0, "by_reason": {"missing": 0, "corrupt": 0},
                                      "fraction": {"train": 0.0, "val": 0.0}}
    import torch
    assert torch.load(next(out.rglob("last.ckpt")), weights_only=False)["global_step"] == 2
    assert "skipped (" not in capsys.readouterr().out  # nothing skipped: no skip rows in the summary


def _bench(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``bench`` in its own process: in-process runs cannot show Lightning's banners (pytest captures
    logging), and a banner printed before the error line is what this must rule out."""
    return subprocess.run([sys.executable, "-m", "pebench.cli", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_run_dir_errors_come_before_lightning_prints_anything(tmp_path, capsys):
    """An output root under a regular file, and a rerun of a run directory with another configuration,
    are one line on stderr (no "GPU available" banner before it), exit 2, nothing on stdout, nothing created."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    r = _bench("run", *TINY, "--fast-dev-run", "--out", str(blocker / "runs"), cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("bench: error: output directory"), r.stderr

    runs = tmp_path / "runs"
    assert main(["run", *TINY, "--limit-train-batches", "1", "--limit-val-batches", "1", "--out", str(runs)]) == 0
    capsys.readouterr()
    before = sorted(p.name for p in (runs / "shapes" / "ape" / "vit-nano" / "seed0").iterdir())
    r = _bench("run", *TINY, "--limit-train-batches", "1", "--limit-val-batches", "1", "--out", str(runs),
               "--lr", "0.01", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("bench: error: ") and "lr" in r.stderr, r.stderr
    assert sorted(p.name for p in (runs / "shapes" / "ape" / "vit-nano" / "seed0").iterdir()) == before

"""CLI surface: one-line user errors (exit 2), --help, list, --print-config. No training here."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pebench.cli import build_parser, main
from pebench.core.options import declared_options
from pebench.datamodules import get_datamodule_class, list_datamodules
from pebench.runner.config import RunConfig
from pebench.runner.run import load_registries

load_registries()


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("bench: error: "), err
    assert "Traceback" not in err
    return lines[0]


def _no_run_dirs(out: Path) -> None:
    assert not out.exists() or not any(p.is_dir() for p in out.iterdir()), list(out.rglob("*"))


@pytest.mark.parametrize("args, expect", [
    (["--dataset", "nope"], ["unknown dataset 'nope'", "shapes"]),
    (["--pe", "nope"], ["unknown PE 'nope'", "ape"]),
    (["--model", "nope"], ["unknown model 'nope'", "vit-nano"]),
    (["--resolution", "30"], ["not divisible", "patch size"]),
    (["--dataset", "primitives", "--pe", "lookhere"], ["does not apply", "points"]),
    (["--rpt", "--pe", "none"], ["conflicting flags", "--rpt"]),
    (["--pool", "cls"], ["conflicting flags", "--class-token"]),
    (["--epochs", "abc"], ["--epochs"]),
    (["--analyses", "geometry,nope"], ["unknown analysis 'nope'"]),
    (["--preset", "no-such-preset"], ["unknown preset"]),
    (["--pe", "ape", "--pe-option", "bogus=1"], ["--pe-option", "bogus"]),
    (["--no-such-flag"], ["unrecognized arguments"]),
])
def test_run_user_errors_exit_2_one_line(args, expect, tmp_path, capsys):
    if "primitives" in args and "primitives" not in list_datamodules():
        pytest.skip("primitives not registered")
    out = tmp_path / "runs"
    assert main(["run", *args, "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    for e in expect:
        assert e in line
    _no_run_dirs(out)


def test_config_file_with_unknown_key(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("dataset: shapes\nepochz: 3\n")
    assert main(["run", "--config", str(cfg), "--out", str(tmp_path / "runs")]) == 2
    line = _one_error_line(capsys)
    assert "'epochz'" in line and "valid keys" in line and "epochs" in line


def test_unwritable_out_dir(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert main(["run", "--out", str(blocker / "runs"), "--fast-dev-run"]) == 2
    assert "not writable" in _one_error_line(capsys)


def test_real_dataset_without_data_root_names_layout(tmp_path, capsys):
    real = [n for n in list_datamodules() if get_datamodule_class(n).needs_data_root]
    if not real:
        pytest.skip("no real datasets registered")
    cls = get_datamodule_class(real[0])
    assert main(["run", "--dataset", real[0], "--out", str(tmp_path / "runs")]) == 2
    line = _one_error_line(capsys)
    assert "--data-root" in line or "data root" in line
    assert cls.expected_layout.split()[0] in line
    _no_run_dirs(tmp_path / "runs")


def test_run_help_mentions_every_flag(capsys):
    with pytest.raises(SystemExit) as ex:
        main(["run", "--help"])
    assert ex.value.code == 0
    text = capsys.readouterr().out
    required = ["--dataset", "--pe", "--model", "--epochs", "--batch-size", "--lr", "--seed", "--resolution",
                "--data-root", "--out", "--devices", "--accelerator", "--strategy", "--num-nodes", "--precision",
                "--fast-dev-run", "--config", "--preset", "--print-config", "--analyses", "--rpt",
                "--deterministic", "--tensorboard", "--class-token", "--pool", "--pe-option", "--num-workers",
                "--label-smoothing", "--weight-decay", "--warmup-epochs", "--layer-decay",
                "--extrapolation-resolutions"]
    for flag in required + [opt.cli_flag for opt in declared_options(RunConfig)]:
        assert flag in text, flag


def test_every_option_has_help_text():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    assert set(sub.choices) >= {"run", "list", "leaderboard", "sweep", "eval", "perf"}
    for name, p in sub.choices.items():
        for action in p._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"bench {name} {action.option_strings[0]} has no help"


def test_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for word in ["shapes", "image", "ape", "none", "vit-nano", "128", "modalities", "--data-root"]:
        assert word in out


def test_print_config_precedence(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("dataset: shapes\npe: ape\nepochs: 5\ndata: {train_size: 64}\n")
    assert main(["run", "--config", str(cfg), "--epochs", "2", "--data-option", "val_size=16",
                 "--pe-option", "mlp_hidden=32", "--print-config"]) == 0
    resolved = yaml.safe_load(capsys.readouterr().out)
    assert resolved["pe"] == "ape" and resolved["epochs"] == 2  # flag beats file
    assert resolved["data"] == {"train_size": 64, "val_size": 16}
    assert resolved["pe_options"] == {"mlp_hidden": 32}
    assert not (tmp_path / "runs").exists()


def test_print_config_default_run(capsys):
    assert main(["run", "--print-config"]) == 0
    resolved = yaml.safe_load(capsys.readouterr().out)
    assert resolved["dataset"] == "shapes" and resolved["model"] == "vit-nano"
    from pebench.encodings import list_pes
    assert resolved["pe"] in list_pes() and resolved["pe"] != "none"


def test_perf_unknown_benchmark(capsys):
    assert main(["perf", "no-such-bench"]) == 2
    line = _one_error_line(capsys)
    assert "unknown benchmark 'no-such-bench'" in line and "attention-budget" in line


def test_module_entry_point_from_repo_root():
    """`python -m pebench.cli` works (the DDP launcher re-executes this form) and returns 0."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-m", "pebench.cli", "list", "models"], cwd=root, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "vit-nano" in r.stdout
    if shutil.which("bench"):
        r = subprocess.run(["bench", "run", "--pe", "nope"], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "unknown PE" in r.stderr


def test_every_shipped_preset_loads(capsys):
    from pebench.runner.config import list_presets

    for name in list_presets():
        assert main(["run", "--preset", name, "--print-config"]) == 0, name
        resolved = yaml.safe_load(capsys.readouterr().out)
        assert resolved["dataset"] in list_datamodules(), name


def test_task_setup_registry_picks_the_datasets_task_and_lists_valid_ones(tmp_path, capsys):
    """--task defaults to the dataset's own task; a task that is not available, or options a task does
    not take, stop with one line and exit code 2."""
    from pebench.runner.config import RunConfig
    from pebench.tasks import list_tasks, resolve_task

    assert {"classification", "dino"} <= set(list_tasks())
    assert resolve_task(RunConfig(dataset="shapes")).task == "classification"
    assert main(["run", "--task-option", "n_local=2", "--fast-dev-run", "--out", str(tmp_path)]) == 2
    assert "takes no options" in capsys.readouterr().err


def test_true_false_data_options_accept_words_and_reject_others(capsys):
    """One parser (pebench.core.options.parse_bool) for config keys and datamodule flags."""
    from pebench.core.options import parse_bool
    from pebench.datamodules.base import bool_option

    assert [parse_bool(v) for v in (True, "Yes", " on", "0", "FALSE", "maybe", 2)] == [True, True, True, False,
                                                                                      False, None, None]
    assert bool_option("scannet", "normals", "true") is True
    with pytest.raises(ValueError, match="scannet: data option normals must be true or false, got 'maybe'"):
        bool_option("scannet", "normals", "maybe")


@pytest.mark.parametrize("args, words", [(["--epochs", "-1"], "epochs must be >= 1"),
                                         (["--batch-size", "0"], "batch_size must be >= 1"),
                                         (["--lr", "nan"], "lr must be > 0 and finite")])
def test_option_bounds_are_checked_before_torch_is_imported(args, words):
    """A bad option value answers before the heavy imports (the latency figure is `bench perf startup`'s)."""
    code = ("import sys\nfrom pebench.cli import main\nrc = main(sys.argv[1:])\n"
            "print('TORCH', 'torch' in sys.modules, rc)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", code, "run", *args], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.stdout.strip().splitlines()[-1] == "TORCH False 2", r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and words in r.stderr

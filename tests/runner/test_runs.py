"""`bench runs` (run browser), training curves (curves.png, the sweep comparison), start-up
without torch, `bench run --help` defaults, option listings and the --logger choice (issue #18)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pebench.cli import build_parser, main
from pebench.leaderboard.curves import epoch_series, read_history, sweep_series, write_run_curves, write_sweep_curves
from pebench.leaderboard.runs import RUN_COLUMNS, not_complete_reason

HEADER = "epoch,step,train/acc1,train/loss_epoch,train/loss_step,val/acc1,val/loss\n"


def _results(dataset="shapes", pe="ape", model="vit-nano", seed=0, status="complete", acc=0.5, **extra):
    res = {"dataset": dataset, "pe": pe, "variant": pe, "model": model, "seed": seed, "status": status,
           "task": "classification", "primary_metric": "val/acc1", "metrics": {"val/acc1": acc, "val/loss": 1.0},
           "wall_time_s": 12.34, "config": {"dataset": dataset, "pe": pe, "epochs": 2, "max_time": None},
           "git_sha": "abc123"}
    res.update(extra)
    return res


def _write(root: Path, res: dict, csv: str | None = None) -> Path:
    d = root / res["dataset"] / res["variant"] / res["model"] / f"seed{res['seed']}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "results.json").write_text(json.dumps(res))
    if csv is not None:
        (d / "metrics.csv").write_text(csv)
    return d


@pytest.fixture
def results_tree(tmp_path):
    root = tmp_path / "runs"
    _write(root, _results(pe="ape", seed=1, acc=0.75, fingerprint="0123456789abcdef0123"))
    _write(root, _results(pe="ape", seed=0, acc=0.25))
    _write(root, _results(pe="ape", variant="ape+rpt", seed=0, status="failed", error="RuntimeError: boom"))
    _write(root, _results(pe="pape", seed=0, status="incomplete",
                          analysis_errors={"robustness": "ValueError: no samples"}))
    _write(root, _results(pe="sincos", seed=0, status="running"))
    bad = root / "shapes" / "none" / "vit-nano" / "seed0"
    bad.mkdir(parents=True)
    (bad / "results.json").write_text("{not json")
    return root


def _table_rows(text: str) -> list[list[str]]:
    lines = [ln for ln in text.splitlines() if ln.startswith("| ")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[1:]]


def test_runs_table_rows_order_status_and_reasons(results_tree, capsys):
    assert main(["runs", "--results", str(results_tree)]) == 0
    out = capsys.readouterr().out
    rows = _table_rows(out)
    header = [c.strip() for c in out.splitlines()[1].strip("|").split("|")]
    assert header == list(RUN_COLUMNS)
    by = {(r[1], r[3]): dict(zip(RUN_COLUMNS, r)) for r in rows}
    # sorted by dataset, PE, model, seed (seed 0 before seed 1)
    assert [(r[1], r[3]) for r in rows] == [("", ""), ("ape", "0"), ("ape", "1"), ("ape+rpt", "0"),
                                            ("pape", "0"), ("sincos", "0")]
    assert by[("ape", "1")]["value"] == "0.7500" and by[("ape", "1")]["fingerprint"] == "0123456789ab"
    assert by[("ape", "1")]["wall (s)"] == "12" and by[("ape", "1")]["reason"] == ""
    assert by[("ape+rpt", "0")]["status"] == "failed" and "RuntimeError: boom" in by[("ape+rpt", "0")]["reason"]
    assert "analysis robustness failed" in by[("pape", "0")]["reason"]
    assert by[("sincos", "0")]["status"] == "running" and "killed" in by[("sincos", "0")]["reason"]
    assert by[("", "")]["status"] == "unreadable" and "not valid JSON" in by[("", "")]["reason"]
    assert "6 run(s): 2 complete, 1 failed, 1 incomplete, 1 running, 1 unreadable" in out


def test_runs_filters(results_tree, capsys):
    assert main(["runs", "--results", str(results_tree), "--status", "failed,incomplete"]) == 0
    assert sorted(r[1] for r in _table_rows(capsys.readouterr().out)) == ["ape+rpt", "pape"]
    # --pe matches the base PE too: ape selects ape and ape+rpt
    assert main(["runs", "--results", str(results_tree), "--pe", "ape"]) == 0
    assert sorted(r[1] for r in _table_rows(capsys.readouterr().out)) == ["ape", "ape", "ape+rpt"]
    assert main(["runs", "--results", str(results_tree), "--dataset", "cifar100"]) == 0
    assert "match the filters" in capsys.readouterr().out


def test_runs_show_and_errors(results_tree, capsys):
    run = "shapes/ape/vit-nano/seed1"
    assert main(["runs", "show", run, "--results", str(results_tree)]) == 0
    out = capsys.readouterr().out
    assert "shapes / ape / vit-nano / seed 1" in out and "configuration" in out and "results.json" in out
    assert "0123456789ab" in out and "abc123" in out
    # a run directory path works as well
    assert main(["runs", "show", str(results_tree / run)]) == 0
    capsys.readouterr()
    for argv in (["runs", "show", "shapes/nope", "--results", str(results_tree)], ["runs", "show"],
                 ["runs", "--results", str(results_tree / "missing")]):
        assert main(argv) == 2
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert len(err) == 1 and err[0].startswith("bench: error:"), err


def test_not_complete_reason_rules():
    assert not_complete_reason({"status": "complete"}) == ""
    assert "max-time 00:00:01:00" in not_complete_reason(
        {"status": "incomplete", "config": {"max_time": "00:00:01:00", "epochs": 4}})
    assert not_complete_reason({"status": "incomplete", "analyses": "unavailable"}).startswith("analyses unavailable")
    assert not_complete_reason({"status": "interrupted", "interrupted_by": "SIGTERM",
                                "resume_command": "bench run --config runs/x/config.yaml"}) == \
        "interrupted by SIGTERM; resume: bench run --config runs/x/config.yaml"
    # an explicit reason recorded by bench run wins
    assert not_complete_reason({"status": "incomplete", "reason": "12% of val samples corrupt"}) == \
        "12% of val samples corrupt"


def test_runs_and_help_do_not_import_torch(results_tree):
    """`bench --help`, `bench run --help`, `bench runs` and `bench list presets` run without loading torch."""
    code = ("import sys\nfrom pebench.cli import main\n"
            "for argv in (['--help'], ['run', '--help'], ['list', '--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            f"assert main(['runs', '--results', {str(results_tree)!r}]) == 0\n"
            "assert main(['runs', 'show', 'shapes/ape/vit-nano/seed0', '--results', "
            f"{str(results_tree)!r}]) == 0\n"
            "assert main(['list', 'presets']) == 0\n"
            "bad = [m for m in ('torch', 'lightning', 'timm') if m in sys.modules]\n"
            "assert not bad, bad\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert r.returncode == 0, r.stderr[-2000:]


def test_run_help_states_every_default(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--epochs N training epochs (default: 3)" in out
    assert "--lr X peak learning rate (AdamW, warm-up then cosine) (default: 0.002)" in out
    assert "(default: the dataset's)" in out
    run = next(a for a in build_parser()._subparsers._group_actions[0].choices["run"]._actions
               if a.dest == "epochs")
    assert run.default is None  # "not given" stays distinguishable from the default in the parser
    parser = build_parser()._subparsers._group_actions[0].choices["run"]
    for action in parser._actions:
        if action.option_strings and action.dest not in ("help", "config", "preset", "print_config"):
            assert "default" in (action.help or ""), action.option_strings


# ------------------------------------------------------------------------------------- curves
def test_read_history_merges_attempts_and_drops_final_revalidation(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    # attempt 0: epoch 0 complete, epoch 1 killed after its validation row
    (d / "metrics.attempt0.csv").write_text(HEADER + "0,3,,,2.5,,\n0,3,,,,0.2,2.0\n0,3,0.1,2.2,,,\n"
                                                     "1,7,,,,0.3,1.9\n")
    # resumed: epoch 1 redone, epoch 2, then bench run's final re-validation logged at epoch 3
    (d / "metrics.csv").write_text(HEADER + "1,7,,,,0.4,1.5\n1,7,0.35,1.7,,,\n2,11,,,,0.6,1.0\n"
                                            "2,11,0.55,1.2,,,\n3,12,,,,0.6,1.0\n")
    h = read_history(d)
    assert h["val/acc1"] == {0: 0.2, 1: 0.4, 2: 0.6}
    assert h["val/loss"] == {0: 2.0, 1: 1.5, 2: 1.0}
    assert h["train/loss_epoch"] == {0: 2.2, 1: 1.7, 2: 1.2}
    assert h["train/acc1"] == {0: 0.1, 1: 0.35, 2: 0.55}
    assert h["train/loss_step"] == {0: 2.5}
    assert epoch_series(h) == {"train_loss": "train/loss_epoch", "val_loss": "val/loss",
                               "train_metric": "train/acc1", "val_metric": "val/acc1"}
    path = write_run_curves(d, _results(seed=3))
    assert path == d / "curves.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from matplotlib.image import imread
    assert imread(path).shape[:2] == (340, 1000)
    (tmp_path / "empty").mkdir()
    assert write_run_curves(tmp_path / "empty", _results()) is None  # nothing logged: no plot


def test_sweep_curves_average_over_seeds(tmp_path, capsys):
    root = tmp_path / "runs"
    for seed, (a0, a1) in enumerate([(0.2, 0.6), (0.4, 0.8)]):
        _write(root, _results(pe="ape", seed=seed), HEADER + f"0,1,0.1,2.0,,{a0},1.5\n1,2,0.2,1.0,,{a1},0.5\n")
    _write(root, _results(pe="pape", seed=0), HEADER + "0,1,0.1,2.0,,0.9,0.3\n")
    _write(root, _results(pe="none", seed=0, status="failed"), HEADER + "0,1,0.1,2.0,,0.1,2.0\n")
    s = sweep_series(root)
    assert sorted(s["shapes"]) == ["ape", "pape"]  # complete runs only
    assert s["shapes"]["ape"]["val_metric"] == {0: [0.2, 0.4], 1: [0.6, 0.8]}
    assert s["shapes"]["pape"]["val_loss"] == {0: [0.3]}
    out = write_sweep_curves(root, tmp_path / "LB_curves.png")
    assert out is not None and out.read_bytes()[:4] == b"\x89PNG"
    # regenerating gives the same bytes (no timestamps in the PNG)
    first = out.read_bytes()
    write_sweep_curves(root, out)
    assert out.read_bytes() == first
    # bench leaderboard writes it next to the markdown, named after it
    assert main(["leaderboard", "--results", str(root), "--out", str(tmp_path / "LB.md")]) == 0
    assert (tmp_path / "LB.md").is_file() and (tmp_path / "LB_curves.png").read_bytes() == first
    assert f"wrote {tmp_path / 'LB_curves.png'}" in capsys.readouterr().out


# ------------------------------------------------------------------------------------- loggers
TINY_RUN = ["run", "--dataset", "shapes", "--pe", "ape", "--epochs", "2", "--batch-size", "32",
            "--data-option", "train_size=64", "--data-option", "val_size=32", "--analyses", "none",
            "--no-progress-bar"]


def test_logger_wandb_missing_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
    assert main([*TINY_RUN, "--logger", "wandb", "--out", str(tmp_path / "runs")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert err == ["bench: error: --logger wandb needs the wandb package, which is not installed: "
                   "pip install -e '.[wandb]'"]
    assert not (tmp_path / "runs" / "shapes").exists()  # nothing created before validation passed


def test_logger_flag_validation(capsys):
    assert main(["run", "--logger", "mlflow", "--print-config"]) == 2
    assert "invalid choice: 'mlflow'" in capsys.readouterr().err
    assert main(["run", "--logger", "wandb", "--tensorboard", "--print-config"]) == 2
    assert "conflicting flags" in capsys.readouterr().err
    assert main(["run", "--tensorboard", "--print-config"]) == 0  # the alias resolves to logger: tensorboard
    assert "logger: tensorboard" in capsys.readouterr().out


@pytest.mark.slow
def test_wandb_offline_run_writes_curves_and_local_files(tmp_path, monkeypatch, capsys):
    """A tiny run with --logger wandb: W&B offline files under <run>/wandb/, metrics.csv kept,
    curves.png from it, and `bench runs` lists the run. Needs the optional wandb extra."""
    pytest.importorskip("wandb", reason="the wandb extra is not installed (pip install -e '.[wandb]')")
    monkeypatch.delenv("WANDB_MODE", raising=False)  # offline is the default, not the environment's doing
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "runs"
    assert main([*TINY_RUN, "--logger", "wandb", "--out", str(out)]) == 0
    run_dir = out / "shapes" / "ape" / "vit-nano" / "seed0"
    offline = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(offline) == 1 and list(offline[0].glob("run-*.wandb")), list((run_dir / "wandb").iterdir())
    hist = read_history(run_dir)
    assert sorted(hist["val/acc1"]) == [0, 1] and sorted(hist["train/loss_epoch"]) == [0, 1]
    assert (run_dir / "curves.png").read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    assert main(["runs", "--results", str(out)]) == 0
    rows = _table_rows(capsys.readouterr().out)
    assert len(rows) == 1 and rows[0][:5] == ["shapes", "ape", "vit-nano", "0", "complete"]


# ------------------------------------------------------------------------------------- provenance
def test_add_provenance_keeps_replaced_rows():
    from pebench.leaderboard.runs import add_provenance

    res = {"extrapolation": [{"resolution": "32", "acc1": 0.5, "n_samples": 128}]}
    new = [{"resolution": "32", "acc1": 0.6, "n_samples": 512}, {"resolution": "48", "acc1": 0.4, "n_samples": 512}]
    e1 = add_provenance(res, "extrapolation", new, "bench eval --run r", "abc", now="2026-01-01T00:00:00Z")
    assert res["extrapolation"] == new
    assert e1 == {"section": "extrapolation", "command": "bench eval --run r", "samples": 512, "git_sha": "abc",
                  "time": "2026-01-01T00:00:00Z",
                  "replaced": {"value": [{"resolution": "32", "acc1": 0.5, "n_samples": 128}], "samples": 128,
                               "added_by": "bench run"}}
    mixed = [{"resolution": "24", "acc1": 0.7, "n_samples": 100}, {"resolution": "32", "acc1": 0.6, "n_samples": 90}]
    e2 = add_provenance(res, "extrapolation", mixed, "bench eval --run r --resolutions 24,32", None)
    assert e2["samples"] == {"24": 100, "32": 90}
    assert e2["replaced"]["added_by"] == "bench eval --run r" and e2["replaced"]["value"] == new
    assert [p["command"] for p in res["provenance"]] == ["bench eval --run r", "bench eval --run r --resolutions 24,32"]
    assert add_provenance({}, "extrapolation", new, "c", None)["replaced"] is None


@pytest.fixture(scope="module")
def tiny_csv_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ux") / "runs"
    assert main([*TINY_RUN, "--out", str(out), "--extrapolation-resolutions", "32",
                 "--analyses", "extrapolation"]) == 0
    return out, out / "shapes" / "ape" / "vit-nano" / "seed0"


@pytest.mark.slow
def test_run_writes_curves_png(tiny_csv_run):
    out, run_dir = tiny_csv_run
    hist = read_history(run_dir)
    assert sorted(hist["val/acc1"]) == [0, 1] and sorted(hist["train/acc1"]) == [0, 1]
    assert (run_dir / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert (run_dir / "extrapolation.png").is_file()


@pytest.mark.slow
def test_eval_records_provenance_and_keeps_replaced_rows(tiny_csv_run, capsys):
    out, run_dir = tiny_csv_run
    before = json.loads((run_dir / "results.json").read_text())
    assert [r["resolution"] for r in before["extrapolation"]] == ["32"] and "provenance" not in before
    capsys.readouterr()
    assert main(["eval", "--run", str(run_dir), "--resolutions", "24,32"]) == 0
    assert "replaced the extrapolation rows of bench run" in capsys.readouterr().err
    res = json.loads((run_dir / "results.json").read_text())
    assert [r["resolution"] for r in res["extrapolation"]] == ["24", "32"]
    (entry,) = res["provenance"]
    assert entry["section"] == "extrapolation" and entry["command"] == f"bench eval --run {run_dir} --resolutions 24,32"
    assert entry["samples"] == 32  # the whole validation set (val_size=32) at each size
    assert entry["replaced"]["value"] == before["extrapolation"] and entry["replaced"]["added_by"] == "bench run"
    assert entry["git_sha"] == before["git_sha"] and entry["time"].endswith("Z")
    assert main(["runs", "show", str(run_dir)]) == 0
    assert "extrapolation from" in capsys.readouterr().out


# ------------------------------------------------------------------------------------- option listings
def test_list_pes_options_is_the_validated_declaration(capsys):
    from pebench.encodings import build_pe, list_pes, pe_options
    from pebench.encodings.base import PEConfigError

    assert main(["list", "pes", "--options"]) == 0
    rows = _table_rows(capsys.readouterr().out.split("PE options")[1])
    listed = {(r[0], r[1]): r for r in rows}
    declared = [(n, o) for n in list_pes() for o in pe_options(n)]
    assert len(rows) == len(declared) and declared
    for name, o in declared:
        row = listed[(name, o["key"])]
        assert row[2].startswith(o["type"]) and row[4] == o["help"]
        d = o["default"]
        shown = "none" if d is None else ("true" if d else "false") if isinstance(d, bool) else str(d)
        assert row[3] == shown
    # a key that is not listed is rejected by the same declaration
    with pytest.raises((TypeError, PEConfigError)):
        build_pe("pape", dim=32, num_heads=2, depth=1, spatial_dims=2, not_an_option=1)


def test_list_datasets_options_match_what_the_constructor_accepts(capsys):
    from pebench.datamodules import data_options, get_datamodule_class, list_datamodules

    assert main(["list", "datasets", "--options"]) == 0
    out = capsys.readouterr().out
    rows = _table_rows(out.split("dataset options")[1])
    assert ["shapes", "train_size", "int", "4096", "training samples generated per epoch"] in rows
    for name in list_datamodules():
        cls = get_datamodule_class(name)
        opts = data_options(cls)
        assert [r[1] for r in rows if r[0] == name] == [o.name for o in opts]
        if cls.needs_data_root:
            continue
        # every listed key with its listed default is accepted; an unlisted key is refused
        cls(**{o.name: o.default for o in opts if not o.required})
        with pytest.raises(TypeError, match="not_an_option"):
            cls(not_an_option=1)


# ------------------------------------------------------------------------------------- self-contained
def test_repository_refers_only_to_documents_it_contains():
    """Code and docs cite docs/architecture.md, not design notes kept outside the repository."""
    import re

    repo = Path(__file__).resolve().parents[2]
    assert (repo / "docs" / "architecture.md").is_file()
    external = re.compile("DESIGN" + r"(\.md|\s*§|\s*\\u00a7)|DEVELOPERS" + r"\.md")
    files = [repo / "README.md", repo / "pyproject.toml"]
    for folder in ("bench", "encodings", "models", "datamodules", "analysis", "leaderboard", "tests", "docs",
                   "benchmarks"):
        files += [p for p in (repo / folder).rglob("*") if p.suffix in (".py", ".md", ".toml", ".json", ".yaml")]
    hits = [f"{p.relative_to(repo)}:{i}" for p in files if p.is_file()
            for i, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
            if external.search(line)]
    assert not hits, hits

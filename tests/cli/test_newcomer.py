"""What `bench` promises a first-time user, tried from an empty folder as they would (issue #50).

Each case runs ``bench`` (``pebench.cli.main``, in this process; one case in a fresh interpreter to see
what it imports) in an empty working directory with the default ``--out runs`` and asserts the outcome:
a complete run is not retrained, a failed run's message names only files that exist, a batch larger than
the data is announced in one line and recorded, float16 autocast on a CPU is a one-line user error that
creates nothing, and smoke runs stay off the leaderboard unless asked for. Runs are ``--fast-dev-run``-sized (64 training samples at 16 px);
the default run's wall time is measured by ``bench perf e2e``, not here.

The issue's items and where each is tried (all from an empty folder; all run in ``.ci/run``'s ``pytest -q``):
1 rerun of a complete run, 2 a failed run's message, 3 an oversized batch, 4 smoke runs, 6 the README's
examples write under the user's run folder, 9 ``16-mixed`` on a CPU: here; 5 ``bench analyze`` (progress,
SIGINT / SIGTERM, portable folder names, bad input first): tests/cli/test_analyze_progress.py; 7 cross-references:
tests/cli/test_cross_references.py; 8 where real data comes from: tests/cli/test_dataset_sources.py and
tests/datamodules/test_library_layouts.py; 9 bounds errors before the heavy imports: tests/cli/test_cli.py
(their latency: ``bench perf startup``; 6's default-run time: ``bench perf e2e``).
"""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pebench.cli import main

#: a run small enough for the test suite: 64 samples at 16 px, one epoch, no analyses
TINY = ["--data-option", "train_size=64", "--data-option", "val_size=32", "--batch-size", "32", "--resolution", "16",
        "--epochs", "1", "--analyses", "none", "--no-progress-bar"]
RUN = Path("runs/shapes/pape/vit-nano/seed0")  # the default dataset, PE and model, seed 0

#: a file name in a message: a path ending in one of the extensions the run directory and the leaderboard use
_FILE = re.compile(r"[\w./+-]*\w\.(?:ckpt|json|yaml|csv|png|md|html)\b")


def named_files_missing(text: str, *dirs: Path) -> list[str]:
    """The file names in ``text`` that exist neither as given (relative to the working directory) nor in
    any of ``dirs``: every message states what is true about the files it names."""
    missing = []
    for name in sorted(set(_FILE.findall(text))):
        if not any((d / name).exists() for d in (Path("."), *dirs)) and not Path(name).exists():
            missing.append(name)
    return missing


@pytest.fixture
def empty_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _results() -> dict:
    return json.loads((RUN / "results.json").read_text(encoding="utf-8"))


def test_a_complete_run_is_reported_not_retrained(empty_folder, capsys):
    assert main(["run", "--fast-dev-run", *TINY]) == 0
    first = (RUN / "results.json").read_bytes()
    capsys.readouterr()
    assert main(["run", "--fast-dev-run", *TINY]) == 0
    out, err = capsys.readouterr()
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert len(lines) == 1, out + err  # one line, no Lightning banners: nothing was trained
    line = lines[0]
    res = _results()
    assert str(RUN) in line and "complete" in line and res["primary_metric"] in line and "--force" in line
    assert f"{res['metrics'][res['primary_metric']]:.4f}" in line
    assert (RUN / "results.json").read_bytes() == first  # untouched
    assert named_files_missing(line, RUN) == []
    # the same answer from a fresh interpreter, without importing torch or Lightning
    code = ("import sys; from pebench.cli import main; rc = main(sys.argv[1:]); "
            "print('heavy:', sorted(m for m in ('torch', 'lightning') if m in sys.modules)); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, "run", "--fast-dev-run", *TINY], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "already complete" in proc.stdout and "heavy: []" in proc.stdout, proc.stdout + proc.stderr
    # a results.json from before dataset_default_task was recorded: decided after the imports, still not retrained
    old = _results()
    old.pop("dataset_default_task")
    (RUN / "results.json").write_text(json.dumps(old), encoding="utf-8")
    before = (RUN / "results.json").read_bytes()
    assert main(["run", "--fast-dev-run", *TINY]) == 0
    out, err = capsys.readouterr()
    assert "already complete" in out and "run directory" not in err
    assert (RUN / "results.json").read_bytes() == before
    # --force trains it again; another configuration in the same directory is still refused
    assert main(["run", "--fast-dev-run", *TINY, "--force"]) == 0
    assert "run directory" in capsys.readouterr().err
    assert (RUN / "results.json").read_bytes() != before
    assert main(["run", "--fast-dev-run", *TINY, "--lr", "1e-3"]) == 2
    assert "another configuration" in capsys.readouterr().err


def test_a_failed_run_names_only_files_that_exist(empty_folder, capsys):
    """``--lr 1e30`` turns the loss non-finite at step 1, before any checkpoint: the message must not say
    one was kept."""
    assert main(["run", *TINY, "--lr", "1e30", "--warmup-epochs", "0", "--epochs", "2"]) == 1
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if ln.startswith("bench: error:")]
    assert len(errors) == 1 and "non-finite training loss" in errors[0], err
    assert "results.json" in errors[0]
    assert named_files_missing(errors[0], RUN) == []
    assert ("last.ckpt kept" in errors[0]) == (RUN / "last.ckpt").is_file()
    assert _results()["status"] == "failed"


def test_named_files_missing_sees_a_false_claim(empty_folder):
    """The check above can fail: a message naming an absent checkpoint is caught."""
    RUN.mkdir(parents=True)
    (RUN / "results.json").write_text("{}", encoding="utf-8")
    assert named_files_missing("training stopped; last.ckpt kept; results.json status failed", RUN) == ["last.ckpt"]


def test_a_batch_larger_than_the_data_is_announced_and_recorded(empty_folder, capsys):
    """The clamp is the intent (the shipped *-smoke presets train full-batch on the tests' tiny fixtures): one
    line names the batch asked for and the split's size, and results.json records the batch trained with."""
    assert main(["run", *TINY, "--batch-size", "100000000", "--fast-dev-run"]) == 0
    notes = [ln for ln in capsys.readouterr().err.splitlines() if "larger than the training split" in ln]
    assert len(notes) == 1 and "100000000" in notes[0] and "64 samples" in notes[0], notes
    res = _results()
    assert res["batch_size_effective"] == 64 and res["config"]["batch_size"] == 100000000
    assert named_files_missing(notes[0], RUN) == []
    assert main(["run", *TINY, "--fast-dev-run", "--out", "fits"]) == 0  # a batch that fits: no note, null
    assert "larger than the training split" not in capsys.readouterr().err
    assert json.loads(next(Path("fits").rglob("results.json")).read_text())["batch_size_effective"] is None


def test_float16_autocast_on_a_cpu_is_a_user_error(empty_folder, capsys):
    assert main(["run", "--precision", "16-mixed", "--accelerator", "cpu", "--fast-dev-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "16-mixed" in err[0] and "bf16-mixed" in err[0], err
    assert list(empty_folder.iterdir()) == []


def test_smoke_runs_are_recorded_and_kept_off_the_leaderboard(empty_folder, capsys):
    assert main(["run", "--fast-dev-run", *TINY]) == 0
    assert _results()["limited"] == {"fast_dev_run": True}
    capsys.readouterr()
    assert main(["leaderboard", "--results", "runs", "--out", "runs/lb.md"]) == 2
    err = capsys.readouterr().err
    assert "1 smoke run(s) left out" in err and "--include-smoke" in err
    assert main(["leaderboard", "--results", "runs", "--out", "runs/lb.md", "--include-smoke"]) == 0
    assert "from 1 complete run(s)" in Path("runs/lb.md").read_text(encoding="utf-8")
    # a full run beside it (the smoke run's file without its limits): tabulated, the smoke run counted apart
    full = _results()
    full.pop("limited")
    full["config"]["fast_dev_run"] = False
    full["seed"] = full["config"]["seed"] = 1
    (Path("runs/shapes/pape/vit-nano/seed1")).mkdir(parents=True)
    Path("runs/shapes/pape/vit-nano/seed1/results.json").write_text(json.dumps(full), encoding="utf-8")
    assert main(["leaderboard", "--results", "runs", "--out", "runs/lb.md"]) == 0
    out = capsys.readouterr().out
    assert named_files_missing(out) == []
    head = Path("runs/lb.md").read_text(encoding="utf-8")
    assert "from 1 complete run(s)" in head and "1 smoke run(s) left out" in head
    # the README's html example, run where the README invites it: it writes beside the runs, nothing else
    assert main(readme_command("bench leaderboard", "--format html")) == 0
    assert Path("runs/LEADERBOARD.html").is_file() and sorted(p.name for p in empty_folder.iterdir()) == ["runs"]


README = Path(__file__).resolve().parents[2] / "README.md"


def readme_command(prefix: str, *words: str) -> list[str]:
    """The arguments (after ``bench``) of the README's one command line starting with ``prefix`` and holding
    ``words``."""
    lines = [ln.strip() for ln in README.read_text(encoding="utf-8").splitlines()
             if ln.strip().startswith(prefix) and all(w in ln for w in words)]
    assert len(lines) == 1, lines
    return shlex.split(lines[0])[1:]


def test_the_readme_examples_write_under_the_run_folder():
    """Every ``--out`` of a README command is ``runs`` or under it: an example never writes over a file of the
    repository it is run in (the committed LEADERBOARD.* at its root)."""
    outs = re.findall(r"^bench .*?--out (\S+)", README.read_text(encoding="utf-8"), flags=re.M)
    assert outs and all(o == "runs" or o.startswith("runs/") for o in outs), outs

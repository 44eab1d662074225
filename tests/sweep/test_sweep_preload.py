"""``bench sweep --preload``: runs forked from a preloaded worker give the same results as the
default subprocess runner, with the thread count and the ``--deterministic`` CPU pins in effect."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from pebench.sweep.local import RunSpec, plan_sweep, run_sweep
from pebench.sweep.preload import preload_runner

TINY = ("--epochs", "1", "--limit-train-batches", "3", "--batch-size", "16", "--analyses", "none", "--deterministic",
        "--data-option", "train_size=48", "--data-option", "val_size=32", "--data-option", "test_size=32",
        "--no-progress-bar")


def _results(spec: RunSpec) -> dict:
    return json.loads((spec.run_dir / "results.json").read_text())


def _specs(out: Path, seeds: list[int]) -> list[RunSpec]:
    specs = plan_sweep(["probe-translation"], ["pape"], seeds, "vit-probe", str(out), extra_args=TINY)
    return [dataclasses.replace(s, threads=1, deterministic=True, single_process=True) for s in specs]


def test_preloaded_runs_equal_subprocess_runs(tmp_path: Path, capfd) -> None:
    forked = _specs(tmp_path / "forked", [0, 1, 2])
    outcomes = run_sweep(forked, runner=preload_runner, workers=2)
    assert [o["status"] for o in outcomes] == ["complete"] * 3
    err = capfd.readouterr().err
    preloads = [line for line in err.splitlines() if "preloaded torch/Lightning" in line]
    assert 1 <= len(preloads) <= 2, err[-2000:]  # one per worker that ran something, never per run
    # the same run by the default runner: a fresh `bench run` subprocess
    ref = _specs(tmp_path / "subprocess", [0])[0]
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    subprocess.run(ref.command(), check=True, env={**os.environ, **env}, capture_output=True)
    a, b = _results(forked[0]), _results(ref)
    assert a["metrics"] == b["metrics"]  # bit-identical: same pins, threads and flush-to-zero
    for r in (a, b):
        assert r["numerics"]["deterministic_pins"]["applied"] is True
        assert r["numerics"]["torch_threads"] == 1
        assert r["numerics"]["flush_denormal"] is True
    assert _results(forked[1])["seed"] == 1 and _results(forked[2])["metrics"] != a["metrics"]


def test_fallback_to_subprocess_where_fork_cannot_give_the_same_run(tmp_path: Path, monkeypatch) -> None:
    import pebench.sweep.preload as sp
    calls = []
    monkeypatch.setattr(sp, "default_runner", lambda spec: calls.append(spec.key) or 0)
    spec = _specs(tmp_path, [0])[0]
    import torch  # noqa: F401 - once torch is imported, threads and pins can no longer be set here
    assert "torch" in sys.modules
    assert sp.preload_runner(spec) == 0 and calls == [spec.key]
    multi = dataclasses.replace(spec, single_process=False)  # DDP ranks re-execute the command line
    monkeypatch.setattr(sp, "_preloaded", {"threads": 1, "deterministic": True})
    assert sp.preload_runner(multi) == 0 and len(calls) == 2
    other = dataclasses.replace(spec, threads=2)  # preloaded with 1 thread
    assert sp.preload_runner(other) == 0 and len(calls) == 3

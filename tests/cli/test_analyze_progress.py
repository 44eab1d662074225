"""``bench analyze`` tells what it is doing and what it leaves behind (issue #50 item 5): one stderr line per
stage and analysis (none with ``--no-progress-bar``), and SIGTERM / SIGINT end it with ``status: interrupted``
and the command that runs it again, in results.json and in the one line the CLI prints."""
from __future__ import annotations

import json
import shlex
import signal

import pytest
import timm
import torch
from safetensors.torch import save_file

import pebench.cli.analyze as analyze
from pebench.cli import main
from pebench.cli.parser import build_parser

SMALL = {"img_size": 32, "patch_size": 8, "depth": 2, "embed_dim": 32, "num_heads": 2}
FAST = ["--data-option", "train_size=32", "--data-option", "val_size=16", "--probe-samples", "32",
        "--analysis-option", "probe_size=8", "--analysis-option", "rpi_permutations=2",
        "--analysis-option", "robustness_samples=8", "--resolutions", "32,64"]


@pytest.fixture
def command(tmp_path):
    torch.manual_seed(0)
    m = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=0, **SMALL)
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, str(tmp_path / "vit.safetensors"))
    return ["analyze", "--model", "timm:vit_tiny_patch16_224", "--checkpoint", str(tmp_path / "vit.safetensors"),
            "--dataset", "shapes", "--out", str(tmp_path / "out"), "--analyses", "geometry,robustness",
            *[a for k, v in SMALL.items() for a in ("--model-option", f"{k}={v}")], *FAST]


def test_progress_lines_per_stage_and_analysis(command, capsys):
    assert main(command) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("bench analyze:")]
    assert any("reading checkpoint" in ln for ln in err) and any("linear probe" in ln for ln in err)
    for i, name in enumerate(["geometry", "robustness"], 1):
        assert any(ln.startswith(f"bench analyze: analysis {i}/2: {name} done in") for ln in err), err
    assert main([*command, "--no-progress-bar"]) == 0
    assert "bench analyze:" not in capsys.readouterr().err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_leaves_status_interrupted_and_the_command_to_rerun(command, capsys, monkeypatch, tmp_path, signum):
    real = analyze.run_analyses

    def stopped(*args, **kwargs):  # the signal arrives during the first analysis
        signal.raise_signal(signum)
        return real(*args, **kwargs)

    monkeypatch.setattr(analyze, "run_analyses", stopped)
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert main(command) == 128 + signum
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers  # restored
    err = capsys.readouterr().err.strip().splitlines()[-1]
    res = json.loads(next((tmp_path / "out").rglob("results.json")).read_text(encoding="utf-8"))
    assert res["status"] == "interrupted" and res["interrupted_by"] == signal.Signals(signum).name
    assert err.startswith("bench: interrupted") and res["resume_command"] in err
    words = shlex.split(res["resume_command"])
    assert words[:2] == ["bench", "analyze"]
    again = build_parser().parse_args(words[1:])  # the command parses back to the same arguments
    first = build_parser().parse_args(command)
    assert vars(again) == vars(first)

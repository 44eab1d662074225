"""``bench analyze`` tells what it is doing and what it leaves behind (issue #50 item 5): one stderr line per
stage and analysis (none with ``--no-progress-bar``), and SIGTERM / SIGINT end it with ``status: interrupted``
and the command that runs it again, in results.json and in the one line the CLI prints."""
from __future__ import annotations

import json
import re
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
    assert err[0].startswith("bench analyze: checkpoint ") and "read and checked" in err[0], err
    assert any("linear probe" in ln for ln in err)
    for i, name in enumerate(["geometry", "robustness"], 1):
        assert any(ln.startswith(f"bench analyze: analysis {i}/2: {name} done in") for ln in err), err
    # inside geometry, one line per pass over the probe (each yields every layer): clean, K = 2 RPI
    # permutations of the model, K of its untrained twin
    passes = [ln.split(": ", 2)[2] for ln in err if ln.startswith("bench analyze: geometry: pass")]
    assert [p.split(" done in ")[0] for p in passes] == [
        "pass 1/5 (clean tokens, 2 layers)", "pass 2/5 (RPI permutation 1/2)", "pass 3/5 (RPI permutation 2/2)",
        "pass 4/5 (RPI permutation 1/2, untrained twin)", "pass 5/5 (RPI permutation 2/2, untrained twin)"], err
    # the alpha sweep: one line per alpha (none from the geometry it runs); extrapolation: one per size
    assert main(_with(command, "--analyses", "alpha,extrapolation")) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("bench analyze:")]
    alphas = [ln for ln in err if ln.startswith("bench analyze: alpha: alpha ")]
    assert len(alphas) == 8 and "alpha 1/8 (alpha = 1) done in" in alphas[0], err
    assert not any("geometry: pass" in ln for ln in err), err
    sizes = [ln.split(" done in ")[0] for ln in err if ln.startswith("bench analyze: extrapolation: size")]
    assert sizes == ["bench analyze: extrapolation: size 1/2 (32)", "bench analyze: extrapolation: size 2/2 (64)"]
    assert main([*command, "--no-progress-bar"]) == 0
    assert "bench analyze:" not in capsys.readouterr().err


def _with(command: list[str], flag: str, value: str) -> list[str]:
    """``command`` with ``flag``'s value replaced (or the pair appended)."""
    out = list(command)
    if flag in out:
        out[out.index(flag) + 1] = value
    else:
        out += [flag, value]
    return out


#: each bad input of bench analyze: (flag, value, words of its one-line error)
BAD_INPUT = [("--checkpoint", "missing.safetensors", "does not exist"),
             ("--analyses", "geometri", "unknown analysis 'geometri'"),
             ("--resolution", "30", "not divisible by the patch size"),
             ("--model", "timm:vit_no_such_model", "unknown timm model"),
             ("--model", "vit_tiny_patch16_224", "--model must be timm:<name>"),
             ("--dataset", "no-such-data", "no-such-data"),
             ("--dataset", "moving-shapes", "reads image datasets"),
             ("--analysis-option", "no_such_option=1", "unknown analysis option"),
             ("--model-option", "embed_dim=64", "does not fit the model"),
             ("--resolutions", "33", "33"),
             ("--probe-samples", "0", "--probe-samples")]


@pytest.mark.parametrize("flag, value, words", BAD_INPUT, ids=[f"{f}={v}" for f, v, _ in BAD_INPUT])
def test_bad_input_is_the_only_line_and_nothing_is_written(command, capsys, tmp_path, flag, value, words):
    """A user error comes before any stage line: stderr holds the one error line, stdout nothing, no folder."""
    assert main(_with(command, flag, value)) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith("bench: error:") and words in lines[0], err
    assert not (tmp_path / "out").exists()


def test_an_out_that_is_a_file_is_the_only_line(command, capsys, tmp_path):
    (tmp_path / "out").write_text("not a folder", encoding="utf-8")
    assert main(command) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("bench: error: --out ") and "is a file" in err, err
    assert (tmp_path / "out").read_text(encoding="utf-8") == "not a folder"


def test_run_directory_names_are_portable(command, tmp_path):
    """No ``:`` (Windows, SMB shares, rsync / scp ``host:path``): the model's folder is ``timm-<name>``, while
    results.json keeps the --model given."""
    assert main([*command, "--no-progress-bar"]) == 0
    (res_path,) = (tmp_path / "out").rglob("results.json")
    rel = res_path.parent.relative_to(tmp_path / "out")
    assert rel.as_posix() == "shapes/ape/timm-vit_tiny_patch16_224/seed0"
    assert all(re.fullmatch(r"[A-Za-z0-9._+-]+", part) for part in rel.parts)
    assert json.loads(res_path.read_text(encoding="utf-8"))["model"] == "timm:vit_tiny_patch16_224"
    assert analyze.model_folder("timm:a/b c") == "timm-a-b-c"


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


def test_the_first_unit_says_what_the_rest_will_take():
    from pebench.analysis.progress import Steps, reporting

    lines: list[str] = []
    with reporting(lines.append):
        steps = Steps("geometry", 17, "pass")
        steps.done("clean")
        steps.done("RPI permutation 1/8, trained")
    assert "; the other 16 pass(s) will take about" in lines[0]
    assert "will take" not in lines[1]


def test_quick_protocol_is_stated_and_overridable(command, capsys, tmp_path):
    """--protocol quick: geometry only, K = 2 shared permutations, no untrained twin (3 passes), 256 probe images and
    a 256-sample probe unless the command line says otherwise; results.json names the protocol."""
    base = [a for a in command if a not in ("--analyses", "geometry,robustness")]
    base = _drop_option(_drop_option(base, "--probe-samples"), "--analysis-option", "rpi_permutations=2")
    assert main([*base, "--protocol", "quick", "--analysis-option", "probe_size=8"]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("bench analyze: geometry: pass")]
    assert [ln.split(": ", 2)[2].split(" done in ")[0] for ln in err] == [
        "pass 1/3 (clean tokens, 2 layers)", "pass 2/3 (RPI permutation 1/2)", "pass 3/3 (RPI permutation 2/2)"]
    res = json.loads(next((tmp_path / "out").glob("**/results.json")).read_text())
    cfg = res["config"]
    assert cfg["protocol"] == "quick" and cfg["analyses"] == ["geometry"] and cfg["probe_samples"] == 256
    assert {k: cfg["analysis_options"][k] for k in ("probe_size", "rpi_permutations", "rpi_draw", "rpi_null")} == {
        "probe_size": 8, "rpi_permutations": 2, "rpi_draw": "shared", "rpi_null": False}
    assert res["geometry"]["rpi_permutations"] == 2 and not res["geometry"].get("ssdc_rpi_gain")  # no twin, no gain
    # an explicit value wins over the protocol's
    assert main([*base, "--protocol", "quick", "--analysis-option", "probe_size=8", "--analysis-option",
                 "rpi_permutations=3", "--out", str(tmp_path / "o2")]) == 0
    res = json.loads(next((tmp_path / "o2").glob("**/results.json")).read_text())
    assert res["config"]["analysis_options"]["rpi_permutations"] == 3


def _drop_option(argv: list[str], flag: str, value: str | None = None) -> list[str]:
    """``argv`` without ``flag`` and its value (only the pair whose value is ``value``, when given)."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == flag and i + 1 < len(argv) and (value is None or argv[i + 1] == value):
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out

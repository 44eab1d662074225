"""No file pebench reads runs code: one planted pickle per load site (docs/security.md).

Each planted file holds an object whose unpickling would call ``open(marker, "w")`` and so create ``marker``.
Every site must refuse the file with one line (exit code 2 through the CLI) and leave ``marker`` absent:

* ``bench run`` resuming an interrupted run from ``last.ckpt`` / ``hpc_ckpt_*.ckpt`` (pebench.runner.resume);
* ``--eval-checkpoint best`` reloading the best validation's checkpoint (pebench.runner.stopping.load_best);
* ``bench eval --run`` (Lightning's ``load_from_checkpoint``, ``weights_only=True``);
* ``bench card --checkpoint`` (the same), and a URL there: refused, nothing fetched;
* ``bench analyze``'s checkpoint readers (``.pth`` files and zip-archive members);
* the CIFAR-100 reader (Python pickles; :class:`pebench.datamodules.images.cifar.CIFARUnpickler`).
"""
from __future__ import annotations

import http.server
import json
import pickle
import threading
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from fixtures_real import cifar100

from pebench.cli import main
from pebench.core.errors import UserError
from pebench.runner.run import load_registries

load_registries()

TINY = {"dataset": "shapes", "pe": "ape", "epochs": 1, "batch_size": 16, "lr": 1e-3, "resolution": 16,
        "data": {"train_size": 32, "val_size": 16}, "analyses": "none", "progress_bar": False,
        "accelerator": "cpu"}
RUN = Path("shapes/ape/vit-nano/seed0")


class CreatesFile:
    """Unpickling this calls ``open(path, "w")``: the file's existence afterwards proves code ran."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _planted_checkpoint(path: Path, marker: Path) -> Path:
    """A ``torch.save`` file shaped like a Lightning checkpoint, carrying the planted object."""
    torch.save({"state_dict": {}, "epoch": 0, "global_step": 0, "hyper_parameters": {"pe": "ape"},
                "callbacks": CreatesFile(marker)}, path)
    return path


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench: error: "), err
    return err[0]


def test_planted_object_really_runs_code_under_a_plain_load(tmp_path):
    """The control: the planted file does create the marker when loaded the unsafe way."""
    marker = tmp_path / "ran"
    path = _planted_checkpoint(tmp_path / "x.ckpt", marker)
    torch.load(path, weights_only=False)
    assert marker.exists()


@pytest.mark.parametrize("name", ["last.ckpt", "hpc_ckpt_3.ckpt"])
def test_resume_refuses_planted_checkpoint(tmp_path, capsys, name):
    out, marker = tmp_path / "runs", tmp_path / "ran"
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    run_dir = out / RUN
    run_dir.mkdir(parents=True)
    _planted_checkpoint(run_dir / name, marker)
    (run_dir / "results.json").write_text(json.dumps({"status": "interrupted"}))
    assert main(["run", "--config", str(cfg), "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    assert "cannot resume" in line and name in line, line
    assert not marker.exists()


def test_load_best_refuses_planted_checkpoint(tmp_path):
    from lightning.pytorch.callbacks import ModelCheckpoint

    from pebench.runner.stopping import load_best

    marker = tmp_path / "ran"
    best = ModelCheckpoint(dirpath=tmp_path, monitor="val/acc1", mode="max")
    best.best_model_path = str(_planted_checkpoint(tmp_path / "best.ckpt", marker))
    trainer = SimpleNamespace(callbacks=[best], world_size=1)
    with pytest.raises(UserError, match="best.ckpt"):
        load_best(trainer, SimpleNamespace(device=torch.device("cpu")))
    assert not marker.exists()


def _complete_run_dir(tmp_path: Path) -> Path:
    """A run directory with the resolved config.yaml of the tiny run and a complete results.json."""
    from pebench.cli import build_parser
    from pebench.runner.config import config_to_yaml, run_config_from_args, run_dir_for

    cfg_file = tmp_path / "tiny.yaml"
    cfg_file.write_text(yaml.safe_dump({**TINY, "out": str(tmp_path / "runs")}))
    cfg = run_config_from_args(build_parser().parse_args(["run", "--config", str(cfg_file)]))
    run_dir = run_dir_for(cfg)
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(config_to_yaml(cfg))
    (run_dir / "results.json").write_text(json.dumps({"status": "complete", "dataset": "shapes", "pe": "ape"}))
    return run_dir


def test_eval_refuses_planted_checkpoint(tmp_path, capsys):
    marker = tmp_path / "ran"
    run_dir = _complete_run_dir(tmp_path)
    _planted_checkpoint(run_dir / "last.ckpt", marker)
    assert main(["eval", "--run", str(run_dir), "--resolutions", "16"]) == 2
    assert "last.ckpt" in _one_error_line(capsys)
    assert not marker.exists()
    assert json.loads((run_dir / "results.json").read_text())["status"] == "complete"  # untouched


def test_card_refuses_planted_checkpoint(tmp_path, capsys):
    marker = tmp_path / "ran"
    path = _planted_checkpoint(tmp_path / "x.ckpt", marker)
    assert main(["card", "--checkpoint", str(path)]) == 2
    assert "x.ckpt" in _one_error_line(capsys)
    assert not marker.exists()


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Serves the planted checkpoint to anyone who asks, and counts who did."""

    requests: list[str] = []
    payload = b""

    def do_GET(self):  # noqa: N802 - the http.server interface
        type(self).requests.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(type(self).payload)

    def log_message(self, *args):
        pass


def test_checkpoint_urls_are_refused_and_nothing_is_fetched(tmp_path, capsys):
    marker = tmp_path / "ran"
    _Recorder.payload = _planted_checkpoint(tmp_path / "served.ckpt", marker).read_bytes()
    _Recorder.requests = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/model.ckpt"
        assert main(["card", "--checkpoint", url]) == 2
        line = _one_error_line(capsys)
        assert "URL" in line and "never downloads" in line, line
        from pebench.analysis.checkpoint_import import read_checkpoint
        from pebench.analysis.pretrained import read_state_dict

        for reader in (read_checkpoint, read_state_dict):
            with pytest.raises(UserError, match="URL"):
                reader(url)
    finally:
        server.shutdown()
        server.server_close()
    assert _Recorder.requests == [] and not marker.exists()


def test_analyze_readers_refuse_planted_files(tmp_path):
    from pebench.analysis.checkpoint_import import read_checkpoint
    from pebench.analysis.pretrained import read_state_dict

    marker = tmp_path / "ran"
    pth = _planted_checkpoint(tmp_path / "model.pth", marker)
    with pytest.raises(UserError, match="model.pth"):
        read_checkpoint(pth)
    with pytest.raises(UserError, match="model.pth"):
        read_state_dict(pth)
    archive = tmp_path / "weights.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(pth, "inner/model.pth")
    with pytest.raises(UserError, match="inner/model.pth"):
        read_checkpoint(archive, member="inner/model.pth")
    assert not marker.exists()


def test_cifar_reader_refuses_planted_pickle(tmp_path, capsys):
    from pebench.datamodules.images.cifar import read_cifar_pickle

    marker = tmp_path / "ran"
    root = cifar100(tmp_path / "data")
    train = root / "cifar-100-python" / "train"
    assert read_cifar_pickle(str(train))["data"].shape == (6, 3072)  # the official format is read
    for protocol in (2, 4, 5):
        train.write_bytes(pickle.dumps({"data": CreatesFile(marker), "fine_labels": [0]}, protocol=protocol))
        with pytest.raises(pickle.UnpicklingError, match="refused"):
            read_cifar_pickle(str(train))
    assert main(["run", "--dataset", "cifar100", "--data-root", str(root), "--out", str(tmp_path / "runs"),
                 "--fast-dev-run", "--analyses", "none"]) == 2
    line = _one_error_line(capsys)
    assert "cifar100" in line and "train" in line, line
    assert not marker.exists() and not (tmp_path / "runs").exists()

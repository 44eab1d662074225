"""``--data-option channels=3`` of ``fashion-mnist`` / ``mnist``: the grey image over three channels, at any
``--resolution``, for pretrained RGB models (``bench analyze``), on fixture IDX files."""
from __future__ import annotations

import json

import pytest
import torch
from fixtures_idx import write_idx_root

from pebench.analysis.pretrained import TimmTask
from pebench.cli import main
from pebench.datamodules import build_datamodule


@pytest.fixture
def root(tmp_path):
    """Four IDX files: 40 training images (4 per class) and 10 test images of 28x28 px."""
    return write_idx_root(tmp_path, n_train=40, n_test=10)


@pytest.mark.parametrize("name", ["fashion-mnist", "mnist"])
def test_three_channels_repeat_the_grey_image_at_the_resolution(root, name):
    grey = build_datamodule(name, data_root=str(root), resolution=56, val_per_class=1)
    rgb = build_datamodule(name, data_root=str(root), resolution=56, val_per_class=1, channels="3")
    assert (grey.in_chans, rgb.in_chans) == (1, 3) and tuple(rgb.input_shape()) == (3, 56, 56)
    mean, std = rgb.normalisation()
    assert mean == grey.normalisation()[0] * 3 and std == grey.normalisation()[1] * 3
    x1, y1 = grey.val_dataset()[0]
    x3, y3 = rgb.val_dataset((224,))[0]
    assert tuple(x1.shape) == (1, 56, 56) and tuple(x3.shape) == (3, 224, 224) and y1 == y3
    assert torch.equal(x3[0], x3[1]) and torch.equal(x3[1], x3[2])
    x3_56, _ = rgb.val_dataset()[0]
    assert torch.equal(x3_56, x1.expand(3, -1, -1))  # the same pixels, repeated
    xt, _ = rgb.train_dataset()[0]
    assert tuple(xt.shape) == (3, 56, 56)


@pytest.mark.parametrize("value", ["2", "0", "rgb"])
def test_other_channel_counts_are_refused_in_one_line(root, value, capsys, tmp_path):
    rc = main(["run", "--dataset", "fashion-mnist", "--data-root", str(root), "--pe", "none", "--fast-dev-run",
               "--data-option", f"channels={value}", "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and "channels" in err[-1] and len([ln for ln in err if "Error" in ln or "error" in ln]) <= 1
    assert not (tmp_path / "runs").exists()


def test_bench_analyze_of_an_rgb_model_needs_three_channels(root, tmp_path, capsys):
    """A 3-channel timm model on fashion-mnist: refused with the hint at one channel, analysed at three."""
    torch.manual_seed(0)
    task = TimmTask("vit_small_patch14_dinov2", {"depth": 1, "img_size": 56})
    torch.save(task.model.state_dict(), tmp_path / "vit.pth")
    argv = ["analyze", "--model", "timm:vit_small_patch14_dinov2", "--model-option", "depth=1", "--model-option",
            "img_size=56", "--checkpoint", str(tmp_path / "vit.pth"), "--dataset", "fashion-mnist", "--data-root",
            str(root), "--resolution", "56", "--data-option", "val_per_class=1", "--probe-samples", "20",
            "--analyses", "geometry", "--analysis-option", "probe_size=4", "--analysis-option", "rpi_permutations=1",
            "--out", str(tmp_path / "runs")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "has 1 input channels" in err and "--data-option channels=3" in err
    assert not (tmp_path / "runs").exists()
    assert main([*argv, "--data-option", "channels=3"]) == 0, capsys.readouterr().err
    geo = json.loads(next((tmp_path / "runs").rglob("results.json")).read_text())["geometry"]
    assert len(geo["ssdc"]) == 1 and geo["probe_size"] == 4

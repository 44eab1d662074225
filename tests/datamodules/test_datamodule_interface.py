"""The datamodule interface: channels and normalisation are declared class attributes that models
and analyses read from the datamodule (no lookups of module constants, no silent fallbacks)."""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch

import pebench.analysis.robustness as rob_mod
from pebench.analysis.robustness import image_codec, shift_context
from pebench.cli import main
from pebench.datamodules import BenchDataModule, build_datamodule, get_datamodule_class, list_datamodules
from pebench.datamodules import registry as dm_registry
from pebench.datamodules.synthetic.shapes import LUMA, ShapesDataModule, render_shapes, shapes_scene


class GrayShapesDataModule(ShapesDataModule):
    """``shapes`` in grayscale: only the channel count and the constants are declared."""

    in_chans = 1
    mean, std = 0.2, 0.1


@pytest.fixture
def gray_registered(monkeypatch):
    """``shapes-gray`` in the dataset registry for this test only."""
    monkeypatch.setattr(GrayShapesDataModule, "name", "shapes-gray")
    monkeypatch.setitem(dm_registry._DATASETS._entries, "shapes-gray", GrayShapesDataModule)
    return GrayShapesDataModule


def test_every_dataset_declares_channels_and_image_datasets_their_normalisation():
    for name in list_datamodules():
        cls = get_datamodule_class(name)
        assert hasattr(cls, "in_chans"), name
        if cls.modality in ("image", "video"):
            assert cls.mean is not None and cls.std is not None, name


def test_gray_shapes_inputs_follow_the_declared_channels_and_constants():
    gray = GrayShapesDataModule(train_size=8, val_size=4, resolution=16)
    colour = ShapesDataModule(train_size=8, val_size=4, resolution=16)
    assert gray.input_shape() == (1, 16, 16) and gray.input_shape(24) == (1, 24, 24)
    x, y = gray.val_dataset()[0]
    assert x.shape == (1, 16, 16) and x.dtype == torch.float32
    assert y == colour.val_dataset()[0][1]  # the same scenes
    assert gray.normalisation() == ((0.2,), (0.1,))
    assert colour.normalisation() == ((0.15,) * 3, (0.14,) * 3)


def test_gray_shapes_fast_dev_run_and_robustness_uses_its_constants(gray_registered, tmp_path, monkeypatch):
    codecs: list[Any] = []
    real_jpeg = rob_mod.PERTURBATIONS["jpeg"]

    def recording_jpeg(x, g, p, ctx):
        codecs.append(ctx["codec"])
        return real_jpeg(x, g, p, ctx)

    monkeypatch.setitem(rob_mod.PERTURBATIONS, "jpeg", recording_jpeg)
    out = tmp_path / "runs"
    assert main(["run", "--dataset", "shapes-gray", "--pe", "ape", "--fast-dev-run", "--resolution", "16",
                 "--batch-size", "4", "--data-option", "train_size=8", "--data-option", "val_size=4",
                 "--analyses", "robustness", "--analysis-option", "robustness_samples=4", "--accelerator", "cpu",
                 "--no-progress-bar", "--out", str(out)]) == 0
    (path,) = out.rglob("results.json")
    r = json.loads(path.read_text())
    assert r["status"] == "complete" and "jpeg" in r["robustness"], r.get("analysis_errors")
    assert codecs and all(c is not None for c in codecs)
    to_unit, from_unit = codecs[0]
    zeros = torch.zeros(2, 1, 4, 4)
    torch.testing.assert_close(to_unit(zeros), torch.full_like(zeros, 0.2))  # x * std + mean
    torch.testing.assert_close(from_unit(torch.full_like(zeros, 0.3)), torch.full_like(zeros, 1.0))


def test_codec_reads_the_declared_constants():
    shapes = build_datamodule("shapes", train_size=8, val_size=4)
    objects = build_datamodule("objects", train_size=8, val_size=4)
    x = torch.zeros(1, 3, 2, 2)
    torch.testing.assert_close(image_codec(shapes)[0](x)[0, :, 0, 0], torch.full((3,), 0.15))
    torch.testing.assert_close(image_codec(objects)[0](x)[0, :, 0, 0], torch.tensor([0.485, 0.456, 0.406]))
    probe = build_datamodule("probe-translation")
    torch.testing.assert_close(image_codec(probe)[0](x)[0, :, 0, 0], torch.full((3,), 0.3))
    assert image_codec(None) is None  # no datamodule: per-image min-max


def test_missing_normalisation_is_an_error_naming_the_dataset():
    events = build_datamodule("synthetic-events", train_size=8, val_size=4)
    with pytest.raises(ValueError, match="synthetic-events"):
        image_codec(events)
    assert shift_context(events, ["dropout", "noise"])["codec"] is None  # no shift needs it

    class Undeclared(ShapesDataModule):
        mean = None

    with pytest.raises(ValueError, match="declares no input normalisation"):
        Undeclared(train_size=8, val_size=4)

    class WrongLength(ShapesDataModule):
        mean = (0.1, 0.2)

    with pytest.raises(ValueError, match="2 values for 3 channels"):
        WrongLength(train_size=8, val_size=4)


def test_a_dataset_without_a_channel_count_is_refused():
    class NoChannels(BenchDataModule):
        name = "no-channels"

        @property
        def num_classes(self) -> int:
            return 2

        def input_shape(self, resolution=None):
            return (1, 4, 4)

        def train_dataset(self):
            return []

        def val_dataset(self, resolution=None):
            return []

    with pytest.raises(TypeError, match="no-channels.*in_chans"):
        NoChannels()


def test_gray_render_is_the_luma_of_the_colour_render():
    scene = shapes_scene(np.random.default_rng(0))
    rgb = render_shapes(scene, (16,), np.random.default_rng(1), noise=0.0, mean=0.0, std=1.0)
    gray = render_shapes(scene, (16,), np.random.default_rng(1), noise=0.0, mean=0.0, std=1.0, chans=1)
    np.testing.assert_allclose(gray[0], np.tensordot(np.asarray(LUMA), rgb, axes=1), rtol=1e-5, atol=1e-6)

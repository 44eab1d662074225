"""``photos``: crops of the photographs packaged by scikit-image, matplotlib and Debian's
lomiri-wallpapers-16.04 (the real files, not fixtures)."""
from __future__ import annotations

import hashlib
import importlib.util
import os

import numpy as np
import pytest
import torch
from PIL import Image

from pebench.datamodules import DataRootError, build_datamodule
from pebench.datamodules.images.photos import SOURCES, PhotosDataModule, source_dir

HAS_SKIMAGE = importlib.util.find_spec("skimage") is not None
HAS_LOMIRI = os.path.isfile(os.path.join(PhotosDataModule.DEFAULT_ROOT, SOURCES["lomiri"][1][0]))
needs_skimage = pytest.mark.skipif(not HAS_SKIMAGE, reason="scikit-image is absent (pip install scikit-image; "
                                   "in the test extra)")
needs_lomiri = pytest.mark.skipif(not HAS_LOMIRI, reason="the Debian package lomiri-wallpapers-16.04 is absent "
                                  "(.ci/run installs it)")


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@needs_skimage
def test_skimage_photographs_are_the_packaged_files():
    from skimage.data._registry import registry  # scikit-image's own SHA-256 of each bundled file

    folder = source_dir("skimage", "")
    for name in SOURCES["skimage"][1]:
        assert _sha256(os.path.join(folder, name)) == registry[f"data/{name}"], name


def test_mpl_photograph_is_present_and_a_photograph():
    path = os.path.join(source_dir("mpl", ""), "grace_hopper.jpg")
    with Image.open(path) as img:
        assert img.format == "JPEG" and img.mode == "RGB" and min(img.size) >= 500


@needs_skimage
def test_crops_are_deterministic_labelled_by_image_and_resolution_free():
    dm = build_datamodule("photos", sources="skimage,mpl", batch_size=64, resolution=32, val_per_image=2,
                          train_per_image=1)
    assert dm.sources == ["skimage", "mpl"] and dm.num_classes == 13 and dm.input_shape() == (3, 32, 32)
    assert dm.preflight() == {"train": 13, "val": 26}
    x, y, info = next(iter(dm.val_dataloader()))
    assert x.shape == (26, 3, 32, 32) and info == {"skipped": 0}
    assert y.tolist() == [i for i in range(13) for _ in range(2)]
    again = build_datamodule("photos", sources="skimage,mpl", batch_size=64, resolution=32, val_per_image=2)
    assert torch.equal(next(iter(again.val_dataloader()))[0], x)  # same seed, same crops
    other = build_datamodule("photos", sources="skimage,mpl", batch_size=64, resolution=32, val_per_image=2, seed=1)
    assert not torch.equal(next(iter(other.val_dataloader()))[0], x)
    assert dm.boxes("train") != dm.boxes("val")[::2]  # train and val crops are drawn apart
    # the boxes are in the image's coordinates: another resolution shows the same content
    big = next(iter(dm.eval_dataloader(96)))[0]
    down = torch.nn.functional.interpolate(big, size=(32, 32), mode="area")
    assert (down - x).abs().mean() < 0.1 and (down - x[torch.randperm(26)]).abs().mean() > 0.3


@needs_skimage
def test_crop_matches_an_independent_pil_crop():
    dm = build_datamodule("photos", sources="skimage", batch_size=64, resolution=48, val_per_image=2, max_side=4096)
    ds = dm.val_dataset()
    mean, std = (torch.tensor(v).view(3, 1, 1) for v in dm.normalisation())
    for i in (0, 3, 17):  # astronaut (RGB), camera (grayscale), retina (RGB, 1411 px)
        path, label, (top, left, sh, sw) = ds.samples[i]
        with Image.open(path) as img:
            rgb = img.convert("RGB")
        w, h = rgb.size
        box = (left * w, top * h, (left + sw) * w, (top + sh) * h)
        ref = np.asarray(rgb.resize((48, 48), Image.Resampling.BILINEAR, box=box, reducing_gap=None), np.float32)
        ours = (ds[i][0] * std + mean).clamp(0, 1).permute(1, 2, 0).numpy() * 255
        assert np.abs(ours - ref).mean() < 6.0, (i, np.abs(ours - ref).mean())
        assert abs(sh * h - sw * w) < 1e-6 * max(w, h)  # square in pixels


@needs_lomiri
def test_lomiri_photographs_and_fast_dev_run(tmp_path):
    from pebench.cli import main

    dm = build_datamodule("photos", sources="lomiri", resolution=32, train_per_image=1, val_per_image=1,
                          max_side=256)
    assert dm.num_classes == 13 and all(p.startswith(PhotosDataModule.DEFAULT_ROOT) for _, p in dm.images)
    for _, path in dm.images:
        with Image.open(path) as img:
            assert img.format == "JPEG" and min(img.size) >= 1000, path
    assert main(["run", "--dataset", "photos", "--resolution", "32", "--fast-dev-run", "--batch-size", "8",
                 "--data-option", "sources=lomiri", "--data-option", "max_side=256", "--data-option",
                 "train_per_image=1", "--data-option", "val_per_image=1", "--analyses", "none",
                 "--out", str(tmp_path), "--no-progress-bar"]) == 0
    assert len(list(tmp_path.glob("photos/**/results.json"))) == 1


def test_bad_sources_are_one_line_errors(tmp_path):
    with pytest.raises(ValueError, match="sources must be"):
        build_datamodule("photos", sources="nope")
    with pytest.raises(DataRootError, match="lomiri-wallpapers-16.04") as e:
        build_datamodule("photos", sources="lomiri", data_root=str(tmp_path))
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="val_per_image"):
        build_datamodule("photos", val_per_image=0)

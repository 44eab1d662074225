"""The readers accept the layouts the libraries write (docs/datasets.md, "Where they come from").

For each library writer installed here (torchvision, tonic, torch-geometric, the nuScenes devkit) a tiny
fixture is built in exactly the files the library's download and extract step leaves, the library's own
class reads it (only its checksum / archive-presence check is monkeypatched, where it has one, and the
test says so), and pebench's datamodule then reads the same folder with the same samples and labels.
No network: nothing here downloads.
"""
from __future__ import annotations

import gzip
import tarfile
from pathlib import Path

import numpy as np
import pytest
from fixtures_idx import idx_bytes
from fixtures_nuscenes import nuscenes_db
from fixtures_real import IN_WNIDS, cifar100, dvsgesture, modelnet_raw, ucf101, write_image

from pebench.datamodules import build_datamodule


def test_cifar100_as_torchvision_downloads_it(tmp_path, monkeypatch):
    """``CIFAR100(root, download=True)`` unpacks ``<root>/cifar-100-python/{train,test,meta}``."""
    from torchvision.datasets import CIFAR100, cifar

    root = cifar100(tmp_path, n_train=7, n_test=5)
    # only the md5 checks: the fixture's pickles are not the official files
    monkeypatch.setattr(CIFAR100, "_check_integrity", lambda self: True)
    monkeypatch.setattr(cifar, "check_integrity", lambda path, md5=None: True)
    dm = build_datamodule("cifar100", data_root=str(root))
    for train, split in ((True, "train"), (False, "test")):
        tv = CIFAR100(str(root), train=train, download=False)
        data, targets = dm.arrays(split)
        assert len(tv) == len(targets) == (7 if train else 5)
        assert list(tv.targets) == targets
        assert np.array_equal(tv.data, data)
    assert dm.classes == CIFAR100(str(root), train=False).classes


def _write_idx(folder: Path, stem: str, array: np.ndarray) -> None:
    """One IDX file (big-endian header: 0, 0, dtype code 0x08 = ubyte, ndim; then the dimensions) and its
    ``.gz``: torchvision's download leaves both (it extracts each archive and keeps it)."""
    raw = idx_bytes(array.astype(np.uint8))
    (folder / stem).write_bytes(raw)
    (folder / f"{stem}.gz").write_bytes(gzip.compress(raw))


@pytest.mark.parametrize("name,tv_class", [("mnist", "MNIST"), ("fashion-mnist", "FashionMNIST")])
def test_idx_files_as_torchvision_downloads_them(tmp_path, name, tv_class):
    """``MNIST(root, download=True)`` writes ``<root>/MNIST/raw/*-ubyte`` and ``*-ubyte.gz``; torchvision checks
    only that the files exist, so nothing is monkeypatched."""
    import torchvision.datasets as tvd

    raw = tmp_path / tv_class / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    counts = {"train": 30, "t10k": 20}  # 3 and 2 of each class: the hold-out below takes 1 per class
    for split, n in counts.items():
        labels = np.arange(n) % 10
        _write_idx(raw, f"{split}-images-idx3-ubyte", rng.integers(0, 256, (n, 28, 28)))
        _write_idx(raw, f"{split}-labels-idx1-ubyte", labels)
    dm = build_datamodule(name, data_root=str(raw), val_per_class=1)
    for split, train in (("train", True), ("t10k", False)):
        tv = getattr(tvd, tv_class)(str(tmp_path), train=train, download=False)
        images, labels = dm.arrays(split)
        assert len(tv) == len(labels) == counts[split]
        assert np.array_equal(tv.targets.numpy(), labels)
        assert np.array_equal(tv.data.numpy(), images)


def _imagenet_archives(root: Path, per_class: int = 2) -> dict[str, list[str]]:
    """The three ILSVRC2012 archives torchvision's ``ImageNet`` parses, in miniature: the devkit (``meta.mat``
    with the synsets, the validation ground truth as ILSVRC ids), the training tar of per-class tars and
    the flat validation tar. Returns the wnid of each image by split."""
    import scipy.io

    tmp = root / "_build"
    ids = {w: i + 1 for i, w in enumerate(IN_WNIDS)}  # ILSVRC2012_ID, 1-based
    synsets = np.array([(ids[w], w, f"class {w}, alias", "gloss", 0, 0, per_class) for w in IN_WNIDS],
                       dtype=[("ILSVRC2012_ID", "O"), ("WNID", "O"), ("words", "O"), ("gloss", "O"),
                              ("num_children", "O"), ("wordnet_height", "O"), ("num_train_images", "O")])
    data = tmp / "ILSVRC2012_devkit_t12" / "data"
    data.mkdir(parents=True)
    scipy.io.savemat(data / "meta.mat", {"synsets": synsets})
    val_wnids = [IN_WNIDS[(i * 2) % len(IN_WNIDS)] for i in range(per_class * len(IN_WNIDS))]
    (data / "ILSVRC2012_validation_ground_truth.txt").write_text("".join(f"{ids[w]}\n" for w in val_wnids))
    with tarfile.open(root / "ILSVRC2012_devkit_t12.tar.gz", "w:gz") as t:
        t.add(tmp / "ILSVRC2012_devkit_t12", arcname="ILSVRC2012_devkit_t12")
    with tarfile.open(root / "ILSVRC2012_img_train.tar", "w") as outer:
        for ci, w in enumerate(IN_WNIDS):
            inner = tmp / f"{w}.tar"
            with tarfile.open(inner, "w") as t:
                for j in range(per_class):
                    t.add(write_image(tmp / w / f"{w}_{j}.JPEG", seed=ci * 10 + j), arcname=f"{w}_{j}.JPEG")
            outer.add(inner, arcname=f"{w}.tar")
    with tarfile.open(root / "ILSVRC2012_img_val.tar", "w") as t:
        for i in range(len(val_wnids)):
            name = f"ILSVRC2012_val_{i + 1:08d}.JPEG"
            t.add(write_image(tmp / "val" / name, seed=100 + i), arcname=name)
    return {"train": [w for w in IN_WNIDS for _ in range(per_class)], "val": val_wnids}


def test_imagenet_as_torchvision_parses_the_archives(tmp_path, monkeypatch):
    """``ImageNet(root, split=...)`` with the three archives in the root writes ``meta.bin``, ``train/<wnid>/``
    and ``val/<wnid>/``; the reader finds ``meta.bin`` and takes its file lists from torchvision."""
    import torchvision.datasets.imagenet as tvi

    root = tmp_path / "imagenet"
    root.mkdir()
    wnids = _imagenet_archives(root)
    # only the md5 check of each archive: the miniature archives are not the official files
    monkeypatch.setattr(tvi, "_verify_archive", lambda root, file, md5: None)
    tv = {split: tvi.ImageNet(str(root), split=split) for split in ("train", "val")}
    assert (root / "meta.bin").is_file() and sorted(p.name for p in (root / "val").iterdir()) == sorted(IN_WNIDS)
    dm = build_datamodule("imagenet", data_root=str(root))
    canon = dm.mapping()
    for split in ("train", "val"):
        ours = dm.scan(split)
        assert sorted(tv[split].wnids[t] for _, t in tv[split].samples) == sorted(wnids[split])
        assert ours == [(p, canon[tv[split].wnids[t]]) for p, t in tv[split].samples]
    assert [label for _, label in dm.scan("train")] == sorted(canon[w] for w in wnids["train"])


def test_dvsgesture_as_tonic_downloads_it(tmp_path, monkeypatch):
    """``DVSGesture(save_to=root, train=...)`` unpacks ``<root>/DVSGesture/ibmGesture{Train,Test}/userNN_<light>/
    <label>.npy``."""
    from tonic.datasets import DVSGesture

    root = dvsgesture(tmp_path, labels=(0, 3, 10))
    # only its presence check (the downloaded .tar.gz and at least 100 .npy files): a fixture has neither
    monkeypatch.setattr(DVSGesture, "_check_exists", lambda self: True)
    monkeypatch.setattr(DVSGesture, "download", lambda self: pytest.fail("tonic tried to download"))
    dm = build_datamodule("dvsgesture", data_root=str(root))
    for train in (True, False):
        lib, ours = DVSGesture(save_to=str(root), train=train), dm.tonic_dataset(train)
        assert len(lib) == len(ours) == 3
        assert sorted(zip(lib.data, lib.targets)) == sorted(zip(ours.data, ours.targets))
        events, label = lib[0]
        assert events.dtype.names == ("x", "y", "p", "t") and label in (0, 3, 10)


#: the ModelNet10 class names: torch-geometric's ModelNet looks for them in raw/ (even for name="40") before
#: it downloads; the real ModelNet40 holds all ten, so the fixture does too and nothing is monkeypatched
MODELNET10 = ("bathtub", "bed", "chair", "desk", "dresser", "monitor", "night_stand", "sofa", "table", "toilet")


def test_modelnet40_as_torch_geometric_downloads_it(tmp_path):
    """``ModelNet(root, name='40')`` unpacks ``ModelNet40.zip`` as ``<root>/raw/<class>/{train,test}/*.off`` and
    writes ``<root>/processed/``; the reader reads that root, torch-geometric's processed files included."""
    from torch_geometric.datasets import ModelNet

    root = modelnet_raw(tmp_path / "mn", classes=(*MODELNET10, "airplane"), per_split=1)
    dm = build_datamodule("modelnet40", data_root=str(root))
    for train in (True, False):
        lib = ModelNet(str(root), name="40", train=train)
        ours = dm.pyg_dataset(train)
        assert len(lib) == len(ours) == 11
        assert sorted(lib.y.tolist()) == sorted(ours.y.tolist()) == list(range(11))
    assert dm.classes == sorted((*MODELNET10, "airplane"))


def test_ucf101_as_torchvision_reads_it(tmp_path):
    """torchvision's ``UCF101(<root>/UCF-101, <root>/ucfTrainTestlist, ...)`` reads the unpacked release (it does
    not download). It decodes every video's timestamps with PyAV on construction, which is not installed
    here (nor a dependency); the timestamps (one per frame, counted with OpenCV) go in through its own cache
    argument ``_precomputed_metadata``, so its class listing and fold selection run unchanged."""
    import cv2
    import torch
    from torchvision.datasets import UCF101

    root = ucf101(tmp_path)
    videos = sorted(str(p) for p in (root / "UCF-101").rglob("*.avi"))
    frames = [int(cv2.VideoCapture(v).get(cv2.CAP_PROP_FRAME_COUNT)) for v in videos]
    meta = {"video_paths": videos, "video_pts": [torch.arange(n) for n in frames], "video_fps": [25.0] * len(videos)}
    dm = build_datamodule("ucf101", data_root=str(root), fold=1)
    for train, split in ((True, "train"), (False, "test")):
        tv = UCF101(str(root / "UCF-101"), str(root / "ucfTrainTestlist"), frames_per_clip=4, fold=1, train=train,
                    _precomputed_metadata=meta)
        theirs = sorted(tv.samples[i] for i in tv.indices)
        assert theirs and sorted(dm.samples(split)) == theirs


def test_nuscenes_as_the_devkit_reads_it(tmp_path):
    """The devkit's ``NuScenes(version, dataroot)`` reads the untarred release; the reader opens the same root
    and takes every lidarseg keyframe of the devkit's mini splits."""
    from nuscenes import NuScenes
    from nuscenes.utils.splits import create_splits_scenes

    fx = nuscenes_db(tmp_path / "nusc")
    nusc = NuScenes(version=fx.version, dataroot=str(fx.root), verbose=False)
    splits = create_splits_scenes()
    dm = build_datamodule("nuscenes", data_root=str(fx.root))
    def scene(sd_token: str) -> str:
        sample = nusc.get("sample", nusc.get("sample_data", sd_token)["sample_token"])
        return nusc.get("scene", sample["scene_token"])["name"]

    for split, scenes in (("train", splits["mini_train"]), ("val", splits["mini_val"])):
        keyframes = {rec["sample_data_token"] for rec in nusc.lidarseg if scene(rec["sample_data_token"]) in scenes}
        ds = dm.train_dataset() if split == "train" else dm.val_dataset()
        assert keyframes and len(ds) == len(keyframes)

"""Real-dataset readers on tiny fixtures written in the official on-disk formats (fixtures_real.py)."""
from __future__ import annotations

import importlib
import os
import shutil

import fixtures_real as F  # noqa: E402
import pytest
import torch

from pebench.datamodules import DataRootError, build_datamodule  # noqa: E402
from pebench.datamodules.corrupt import skip_corrupt_collate  # noqa: E402
from pebench.datamodules.images.imagenet import IMAGENET100_WNIDS  # noqa: E402


def _batches(dm, which="val"):
    loader = getattr(dm, f"{which}_dataloader")()
    return list(loader)


def _one(dm, which="val"):
    xs, ys, skipped = [], [], 0
    for x, y, info in _batches(dm, which):
        xs.append(x), ys.append(y)
        skipped += info["skipped"]
    return torch.cat(xs), torch.cat(ys), skipped


# ---------------------------------------------------------------- images
def test_imagenet_folder_and_metabin_match_imagefolder(tmp_path):
    from torchvision.datasets import ImageFolder

    root = F.imagenet(tmp_path / "in", meta_bin=False)
    dm = build_datamodule("imagenet", data_root=str(root), batch_size=4, resolution=32)
    x, y, skipped = _one(dm)
    assert x.shape == (6, 3, 32, 32) and skipped == 0 and dm.num_classes == 1000
    assert y.tolist() == [0, 0, 1, 1, 452, 452]  # canonical 1K indices (n02869837 = bonnet = 452, 0-based)
    ref = ImageFolder(str(root / "val"), transform=dm.val_dataset().transform)
    for i in (0, 3, 5):
        assert torch.equal(ref[i][0], dm.val_dataset()[i][0])
    xt, yt, _ = _one(dm, "train")
    assert xt.shape == (6, 3, 32, 32) and sorted(yt.tolist()) == [0, 0, 1, 1, 452, 452]
    # torchvision's parsed layout (meta.bin present): same samples, no archive parsing
    F.imagenet(tmp_path / "in2", meta_bin=True)
    dm2 = build_datamodule("imagenet", data_root=str(tmp_path / "in2"), batch_size=4, resolution=32)
    assert [(os.path.basename(p), t) for p, t in dm2.samples("val")] == \
        [(os.path.basename(p), t) for p, t in dm.samples("val")]


def test_imagenet100_filters_full_root(tmp_path):
    root = F.imagenet(tmp_path / "in", wnids=["n01440764", *F.IN100_WNIDS])
    dm = build_datamodule("imagenet100", data_root=str(root), batch_size=8, resolution=32)
    _, y, _ = _one(dm)
    order = sorted(IMAGENET100_WNIDS)
    assert dm.num_classes == 100 and len(IMAGENET100_WNIDS) == 100
    assert y.tolist() == [order.index("n01558993")] * 2 + [order.index("n02869837")] * 2


def test_imagenet_eval_sets(tmp_path):
    v2 = build_datamodule("imagenet-v2", data_root=str(F.imagenet_v2(tmp_path / "v2")), batch_size=8, resolution=32)
    assert _one(v2)[1].tolist() == [0, 0, 1, 1, 999, 999]
    with pytest.raises(ValueError, match="evaluation-only"):
        v2.train_dataset()
    r = build_datamodule("imagenet-r", data_root=str(F.imagenet_r(tmp_path / "r")), batch_size=8, resolution=32)
    assert _one(r)[1].tolist() == [1, 1, 452, 452] and r.class_subset == [1, 452]
    hr = build_datamodule("imagenet-hr", data_root=str(F.imagenet_hr(tmp_path / "hr")), batch_size=8, resolution=64)
    x, y, _ = _one(hr)
    assert x.shape == (2, 3, 64, 64) and y.tolist() == [1, 0]


def test_cifar100_matches_torchvision(tmp_path, monkeypatch):
    import torchvision.datasets.cifar as tvc

    root = F.cifar100(tmp_path)
    dm = build_datamodule("cifar100", data_root=str(root), batch_size=3)
    x, y, _ = _one(dm)
    assert x.shape == (4, 3, 32, 32) and dm.verified == {"test": False}
    # torchvision's reader, its md5 check disabled for the fixture
    monkeypatch.setattr(tvc, "check_integrity", lambda *a, **k: True)
    monkeypatch.setattr(tvc.CIFAR100, "_check_integrity", lambda self: True)
    ref = tvc.CIFAR100(str(root), train=False, transform=dm.val_dataset().transform)
    assert y.tolist() == list(ref.targets)
    assert torch.equal(x, torch.stack([ref[i][0] for i in range(len(ref))]))
    assert dm.classes == ref.classes
    assert _one(dm, "train")[0].shape == (6, 3, 32, 32)


def test_tiny_imagenet_matches_imagefolder_and_grayscale(tmp_path):
    from torchvision.datasets import ImageFolder

    root = F.tiny_imagenet(tmp_path)
    dm = build_datamodule("tiny-imagenet", data_root=str(root), batch_size=8, resolution=32)
    ref = ImageFolder(str(root / "tiny-imagenet-200" / "train"))
    assert [t for _, t in dm.samples("train")] == ref.targets
    assert [p for p, _ in dm.samples("train")] == [p for p, _ in ref.samples]
    x, y, _ = _one(dm)  # includes a grayscale JPEG
    assert x.shape == (4, 3, 32, 32) and sorted(y.tolist()) == [0, 0, 1, 1]
    assert dict(zip([os.path.basename(p) for p, _ in dm.samples("val")], y.tolist()))["val_0.JPEG"] == 1


@pytest.mark.parametrize("split_files", [True, False])
def test_ucmerced_splits(tmp_path, split_files):
    root = F.ucmerced(tmp_path, split_files=split_files)
    dm = build_datamodule("ucmerced", data_root=str(root), batch_size=16, resolution=32)
    sizes = {s: len(dm.samples(s)) for s in ("train", "val", "test")}
    assert sizes == {"train": 9, "val": 3, "test": 3}
    x, y, _ = _one(dm)  # one 40x37 TIFF among them
    assert x.shape == (3, 3, 32, 32) and sorted(y.tolist()) == [0, 1, 2]
    assert len(set(dm.samples("train")) | set(dm.samples("val")) | set(dm.samples("test"))) == 15
    xt, _, _ = next(iter(dm.test_dataloader()))
    assert xt.shape[1:] == (3, 32, 32)


# ---------------------------------------------------------------- video
def test_ucf101_clips_and_folds(tmp_path):
    import decord

    root = F.ucf101(tmp_path)
    dm = build_datamodule("ucf101", data_root=str(root), batch_size=4, resolution="4x32", frame_stride=2)
    x, y, _ = _one(dm, "train")
    assert x.shape == (3, 3, 4, 32, 32) and sorted(y.tolist()) == [0, 1, 2] and dm.num_classes == 3
    xv, yv, _ = _one(dm)
    assert xv.shape == (3, 3, 4, 32, 32) and yv.tolist() == [0, 1, 2]
    dm3 = build_datamodule("ucf101", data_root=str(root), batch_size=4, resolution="4x32", fold=2, eval_clips=3)
    assert dm3.samples("test") != dm.samples("test")
    xt, _, _ = next(iter(dm3.test_dataloader()))
    assert xt.shape == (3, 3, 3, 4, 32, 32)  # (B, K clips, C, T, S, S)
    from pebench.datamodules.video.ucf101 import clip_indices, clip_starts
    assert clip_starts(13, 4, 2, 1) == [3] and clip_indices(13, 4, 2, 3) == [3, 5, 7, 9]
    assert clip_indices(5, 4, 2, 0) == [0, 2, 4, 4] and clip_starts(13, 4, 2, 3) == [0, 3, 6]
    # the clip is the decoded frames, resized + normalised (S = 32 -> resize to 37, centre crop)
    path = dm.samples("test")[0][0]
    raw = torch.from_numpy(decord.VideoReader(path).get_batch([3, 5, 7, 9]).asnumpy()).permute(0, 3, 1, 2)
    assert torch.allclose(dm.val_dataset()[0][0], dm.val_dataset().transform(raw).permute(1, 0, 2, 3))


# ---------------------------------------------------------------- events
def test_dvsgesture_matches_tonic(tmp_path, monkeypatch):
    import tonic

    root = F.dvsgesture(tmp_path)
    dm = build_datamodule("dvsgesture", data_root=str(root), batch_size=8, resolution="4x32", log_counts=False,
                          tokens="frames")  # the default is spiking (the PaPE paper's tokens)
    x, y, _ = _one(dm)
    assert x.shape == (3, 2, 4, 32, 32) and dm.num_classes == 11
    # stock tonic class on the same folder (its archive check bypassed), same transform
    monkeypatch.setattr(tonic.datasets.DVSGesture, "_check_exists", lambda self: True)
    from pebench.datamodules.events.dvsgesture import event_transform
    ref = tonic.datasets.DVSGesture(str(root), train=False, transform=event_transform(4, 32))
    assert y.tolist() == list(ref.targets)
    for i in range(len(ref)):
        assert torch.equal(x[i], torch.from_numpy(ref[i][0]).float().permute(1, 0, 2, 3))
    assert x.sum() > 0
    assert _one(dm, "train")[0].shape == (3, 2, 4, 32, 32)
    # the default tokens follow the PaPE paper: asynchronous spiking-patch tokens, no time bins
    assert build_datamodule("dvsgesture", data_root=str(root), resolution=32).tokens == "spiking"


# ---------------------------------------------------------------- points
def test_modelnet_matches_pyg_and_never_downloads(tmp_path, monkeypatch):
    import torch_geometric.data.dataset as pygd
    from torch_geometric.datasets import ModelNet

    def _no_download(*a, **k):
        raise AssertionError("tried to download")

    root = F.modelnet_raw(tmp_path / "ours")
    monkeypatch.setattr(ModelNet, "download", _no_download)
    dm = build_datamodule("modelnet40", data_root=str(root), batch_size=8, resolution=128)
    x, y, skipped = _one(dm)
    assert x.shape == (6, 128, 3) and skipped == 0 and dm.num_classes == 3
    assert torch.allclose(x.norm(dim=-1).amax(dim=1), torch.ones(6), atol=1e-5)
    x2, _, _ = _one(dm)
    assert torch.equal(x, x2)  # evaluation points are reproducible
    # stock torch-geometric ModelNet processing the same raw/ (its class-name check pointed at the fixture)
    shutil.copytree(root / "raw", tmp_path / "pyg" / "raw")
    monkeypatch.setattr(ModelNet, "raw_file_names", property(lambda self: ["airplane", "chair", "sofa"]))
    ref = ModelNet(str(tmp_path / "pyg"), name="40", train=False)
    ours = dm.pyg_dataset(False)
    assert len(ref) == len(ours) == 6 and pygd is not None

    def key(d):  # PyG keeps glob order within a class, pebench sorts the files: compare as multisets
        return int(d.y), d.pos.flatten().tolist(), d.face.flatten().tolist()

    assert sorted(key(ref[i]) for i in range(6)) == sorted(key(ours[i]) for i in range(6))
    assert sorted(y.tolist()) == sorted(int(ref[i].y) for i in range(6))


def test_modelnet_resampled_layout(tmp_path):
    root = F.modelnet_resampled(tmp_path)
    dm = build_datamodule("modelnet40", data_root=str(root), batch_size=8, resolution=64)
    x, y, _ = _one(dm)
    assert x.shape == (4, 64, 3) and y.tolist() == [0, 0, 1, 1] and dm.layout == "resampled"
    assert _one(dm, "train")[0].shape == (4, 64, 3)


# ---------------------------------------------------------------- bad roots
BAD = {
    "imagenet": (lambda p: F.imagenet(p), "val"),
    "cifar100": (lambda p: F.cifar100(p), "cifar-100-python/meta"),
    "tiny-imagenet": (lambda p: F.tiny_imagenet(p), "tiny-imagenet-200/val/val_annotations.txt"),
    "ucmerced": (lambda p: F.ucmerced(p, split_files=True), "uc_merced-test.txt"),
    "ucf101": (lambda p: F.ucf101(p), "ucfTrainTestlist/testlist01.txt"),
    "dvsgesture": (lambda p: F.dvsgesture(p), "DVSGesture/ibmGestureTest"),
    "modelnet40": (lambda p: F.modelnet_resampled(p), "modelnet40_normal_resampled/modelnet40_test.txt"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_roots_raise_data_root_error(tmp_path, name):
    make, remove = BAD[name]
    missing = tmp_path / "nope"
    with pytest.raises(DataRootError, match="nope"):
        build_datamodule(name, data_root=str(missing))
    with pytest.raises(DataRootError):
        build_datamodule(name)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataRootError, match="expected"):
        build_datamodule(name, data_root=str(tmp_path / "empty"))
    root = make(tmp_path / "root")
    target = root / remove
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    with pytest.raises(DataRootError) as e:
        build_datamodule(name, data_root=str(root))
    msg = str(e.value)
    assert "\n" not in msg and os.path.basename(remove) in msg and "expected" in msg


# ---------------------------------------------------------------- corrupt samples
def _corrupt_cases(tmp_path):
    img = F.imagenet(tmp_path / "img")
    F.truncate(img / "val" / "n01443537" / "n01443537_val_0.JPEG")
    ucf = F.ucf101(tmp_path / "ucf")
    # in testlist01; cut inside the header: undecodable (a cut after some frames is read: test_video_files.py)
    F.truncate(ucf / "UCF-101" / "Basketball" / "v_Basketball_g02_c01.avi", keep=0.05)
    dvs = F.dvsgesture(tmp_path / "dvs")
    F.truncate(dvs / "DVSGesture" / "ibmGestureTest" / "user24_led" / "3.npy", keep=0.5)
    mn = F.modelnet_raw(tmp_path / "mn")
    F.truncate(mn / "raw" / "chair" / "test" / "chair_0101.off", keep=0.6)
    return [("imagenet", img, {"resolution": 32}, 6), ("ucf101", ucf, {"resolution": "4x32"}, 3),
            ("dvsgesture", dvs, {"resolution": "4x32", "tokens": "frames"}, 3),
            ("modelnet40", mn, {"resolution": 64}, 6)]


def test_corrupt_files_are_skipped_and_counted(tmp_path):
    for name, root, kw, n in _corrupt_cases(tmp_path):
        dm = build_datamodule(name, data_root=str(root), batch_size=2, **kw)
        batches = _batches(dm)
        assert all(len(b) == 3 for b in batches), name
        assert sum(b[2]["skipped"] for b in batches) == 1, name
        assert sum(len(b[1]) for b in batches) == n - 1, name
        assert all(b[0].shape[1:] == dm.input_shape() for b in batches), name


def test_all_corrupt_batch_is_empty_with_trailing_shape():
    x, y, info = skip_corrupt_collate([None, None], sample_shape=(3, 8, 8))
    assert x.shape == (0, 3, 8, 8) and y.shape == (0,) and y.dtype == torch.long and info == {"skipped": 2}
    x, y, info = skip_corrupt_collate([(torch.zeros(2), 1), None])
    assert x.shape == (1, 2) and y.tolist() == [1] and info == {"skipped": 1}


# ---------------------------------------------------------------- presets
def test_presets_exist_for_every_real_dataset():
    import yaml

    names = ["imagenet", "imagenet100", "cifar100", "tiny-imagenet", "ucmerced", "ucf101", "dvsgesture", "modelnet40"]
    folder = os.path.join(os.path.dirname(importlib.import_module("pebench").__file__), "presets")
    for n in names:
        for suffix in ("", "-smoke"):
            with open(os.path.join(folder, f"{n}{suffix}.yaml")) as f:
                cfg = yaml.safe_load(f)
            assert cfg["dataset"] == n and cfg["epochs"] >= 1 and cfg["batch_size"] >= 1
            assert {"model", "pe", "lr", "resolution", "precision"} <= set(cfg)


# ---------------------------------------------------------------- end to end through the CLI
FIXTURE_DIRS = {"imagenet": "imagenet", "cifar100": "cifar", "tiny-imagenet": "tiny", "ucmerced": "ucm",
                "ucf101": "ucf", "dvsgesture": "dvs", "modelnet40": "mn"}


@pytest.fixture(scope="module")
def fixture_roots(tmp_path_factory):
    return F.all_fixtures(tmp_path_factory.mktemp("real"))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FIXTURE_DIRS))
def test_cli_fast_dev_run_on_fixture(name, fixture_roots, tmp_path):
    cli = pytest.importorskip("pebench.cli")
    root = fixture_roots[name]
    rc = cli.main(["run", "--preset", f"{name}-smoke", "--dataset", name, "--data-root", str(root),
                   "--fast-dev-run", "--out", str(tmp_path), "--analyses", "none"])
    assert rc in (0, None)
    results = list(tmp_path.glob(f"{name}/**/results.json"))
    assert len(results) == 1


def test_cli_missing_root_exit_code_2(tmp_path, capsys):
    cli = pytest.importorskip("pebench.cli")
    with pytest.raises(SystemExit) as e:
        rc = cli.main(["run", "--dataset", "ucmerced", "--data-root", str(tmp_path / "nope"), "--out", str(tmp_path)])
        raise SystemExit(rc)
    assert e.value.code == 2 and "nope" in capsys.readouterr().err

"""fashion-mnist / mnist: the IDX reader against torchvision's on the real Debian files, the files'
checksums and class counts, a fast-dev-run, and one-line exit-2 errors for damaged IDX files."""
from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from fixtures_idx import idx_bytes, write_idx_root

from pebench.datamodules import DataRootError, build_datamodule
from pebench.datamodules.images.idx import IDXError, read_idx, read_idx_bytes
from pebench.datamodules.images.mnist import (
    FASHION_MNIST_DEBIAN_GZ_SHA256,
    FASHION_MNIST_SHA256,
    IDX_FILES,
    FashionMNISTDataModule,
)

ROOT = FashionMNISTDataModule.DEFAULT_ROOT
needs_debian = pytest.mark.skipif(not os.path.isdir(ROOT), reason=f"{ROOT} is absent: install the Debian package "
                                  "dataset-fashion-mnist (.ci/run does)")


# ---------------------------------------------------------------- tiny IDX files written here
def test_reader_decodes_every_idx_type_big_endian():
    rng = np.random.default_rng(1)
    cases = [(np.uint8, 0x08), (np.int8, 0x09), (np.int16, 0x0B), (np.int32, 0x0C), (np.float32, 0x0D),
             (np.float64, 0x0E)]
    for dtype, code in cases:
        arr = (rng.normal(size=(3, 4, 5)) * 100).astype(dtype)
        out = read_idx_bytes(idx_bytes(arr, code))
        assert out.dtype == np.dtype(dtype) and out.dtype.isnative and np.array_equal(out, arr), dtype
    # the header's sizes are big-endian: 256 items is 00 00 01 00, not 00 01 00 00
    assert read_idx_bytes(bytes([0, 0, 8, 1, 0, 0, 1, 0]) + bytes(range(256))).shape == (256,)


def test_reader_matches_torchvision_on_fixture(tmp_path):
    from torchvision.datasets.mnist import read_image_file, read_label_file

    root = write_idx_root(tmp_path / "plain", gz=False)
    for split in IDX_FILES:
        img_stem, lab_stem = IDX_FILES[split]
        assert torch.equal(torch.from_numpy(read_idx(str(root / img_stem), ndim=3)), read_image_file(str(root / img_stem)))
        ours = torch.from_numpy(read_idx(str(root / lab_stem), ndim=1)).long()
        assert torch.equal(ours, read_label_file(str(root / lab_stem)))
    dm = build_datamodule("mnist", data_root=str(root), batch_size=8, val_per_class=1)
    assert dm.preflight() == {"train": 20, "val": 10, "test": 20} and len(dm.test_dataset()) == 20 and dm.verified == {}
    x, y, info = next(iter(dm.test_dataloader()))
    assert x.shape == (8, 1, 28, 28) and info == {"skipped": 0} and y.tolist() == list(range(8))
    raw = torch.from_numpy(read_idx(str(root / IDX_FILES["t10k"][0])))[:8].float() / 255
    assert torch.allclose(x[:, 0], (raw - 0.1307) / 0.3081, atol=1e-5)  # no resampling at 28 px


# ---------------------------------------------------------------- the real files (Debian package)
@needs_debian
def test_real_files_checksums_and_class_counts():
    for name, digest in FASHION_MNIST_DEBIAN_GZ_SHA256.items():
        with open(os.path.join(ROOT, name), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == digest, name
    dm = build_datamodule("fashion-mnist")
    assert dm.data_root == ROOT and dm.num_classes == 10 and dm.input_shape() == (1, 28, 28)
    train_images, train_labels = dm.arrays("train")
    test_images, test_labels = dm.arrays("t10k")
    assert dm.verified == {stem: True for stem in FASHION_MNIST_SHA256}
    assert train_images.shape == (60000, 28, 28) and test_images.shape == (10000, 28, 28)
    assert np.bincount(train_labels).tolist() == [6000] * 10
    assert np.bincount(test_labels).tolist() == [1000] * 10
    # the declared normalisation is the training file's pixel statistics
    n = train_images.size
    mean = train_images.sum(dtype=np.int64) / n / 255
    std = np.sqrt(np.square(train_images, dtype=np.int64).sum() / n / 255**2 - mean**2)
    assert abs(mean - dm.mean) < 5e-5 and abs(std - dm.std) < 5e-5
    # the hold-out: 500 per class from the training file, disjoint from train, fixed under the run seed
    tr, va = dm.split_indices()
    assert len(va) == 5000 and len(tr) == 55000 and not set(tr) & set(va)
    assert np.bincount(train_labels[va]).tolist() == [500] * 10
    assert np.array_equal(build_datamodule("fashion-mnist", seed=7).split_indices()[1], va)
    assert not np.array_equal(build_datamodule("fashion-mnist", split_seed=1).split_indices()[1], va)


@needs_debian
def test_train_per_class_is_a_fixed_balanced_subset_beside_the_same_hold_out():
    _, labels = build_datamodule("fashion-mnist").arrays("train")
    tr_all, va = build_datamodule("fashion-mnist").split_indices()
    tr, va_sub = build_datamodule("fashion-mnist", train_per_class=120).split_indices()
    assert np.array_equal(va_sub, va)  # the subset size leaves the hold-out as it was
    assert len(tr) == 1200 and np.bincount(labels[tr]).tolist() == [120] * 10 and set(tr) <= set(tr_all)
    assert np.array_equal(build_datamodule("fashion-mnist", train_per_class=120, seed=5).split_indices()[0], tr)
    assert not np.array_equal(build_datamodule("fashion-mnist", train_per_class=120, split_seed=2).split_indices()[0], tr)
    assert len(build_datamodule("fashion-mnist", train_per_class=120).train_dataset()) == 1200
    with pytest.raises(DataRootError, match="fewer than train_per_class=5501"):
        build_datamodule("fashion-mnist", train_per_class=5501).split_indices()


@needs_debian
def test_real_files_match_torchvision_reader(tmp_path):
    from torchvision.datasets.mnist import read_image_file, read_label_file

    dm = build_datamodule("fashion-mnist")
    for split, (img_stem, lab_stem) in IDX_FILES.items():
        images, labels = dm.arrays(split)
        for stem in (img_stem, lab_stem):  # torchvision's readers take the decompressed files
            (tmp_path / stem).write_bytes(gzip.decompress((Path(ROOT) / f"{stem}.gz").read_bytes()))
        assert torch.equal(torch.from_numpy(images), read_image_file(str(tmp_path / img_stem)))
        assert torch.equal(torch.from_numpy(labels), read_label_file(str(tmp_path / lab_stem)))


@needs_debian
def test_fast_dev_run_on_real_files(tmp_path):
    import json

    from pebench.cli import main

    # the real training file and a 30-image hold-out; robustness inverts the one-channel normalisation
    # (geometry and extrapolation also apply: they cost minutes of the suite, so they are not run here)
    rc = main(["run", "--dataset", "fashion-mnist", "--fast-dev-run", "--batch-size", "16", "--out", str(tmp_path),
               "--data-option", "val_per_class=3", "--analyses", "robustness", "--no-progress-bar"])
    assert rc in (0, None)
    results = list(tmp_path.glob("fashion-mnist/**/results.json"))
    assert len(results) == 1
    res = json.loads(results[0].read_text())
    assert res["dataset"] == "fashion-mnist" and res["skipped_samples"]["by_reason"]["corrupt"] == 0
    assert res["status"] == "complete" and res["val_samples"] == 16 and res["analyses"] == ["robustness"]
    # t10k is evaluated as the test split after training (the hold-out is val), and test/acc1 is the primary metric
    assert res["primary_metric"] == "test/acc1" and "test/acc1" in res["metrics"] and "val/acc1" in res["metrics"]
    assert res["robustness"]["jpeg"]["acc"] is not None and res["robustness"]["blur"]["acc"] is not None


# ---------------------------------------------------------------- damaged roots: one line, exit 2, nothing written
def _truncate(root: Path) -> str:
    p = root / "train-images-idx3-ubyte.gz"
    p.write_bytes(gzip.compress(gzip.decompress(p.read_bytes())[:5000]))  # a valid gzip of a cut IDX file
    return "truncated"


def _truncate_gzip(root: Path) -> str:
    p = root / "t10k-images-idx3-ubyte.gz"
    p.write_bytes(p.read_bytes()[:200])  # the gzip stream itself cut
    return "truncated"


def _bad_magic(root: Path) -> str:
    p = root / "train-labels-idx1-ubyte.gz"
    data = bytearray(gzip.decompress(p.read_bytes()))
    data[:4] = b"\x12\x34\x08\x01"
    p.write_bytes(gzip.compress(bytes(data)))
    return "magic number 0x12340801"


def _counts_disagree(root: Path) -> str:
    labels = (np.arange(29) % 10).astype(np.uint8)
    (root / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_bytes(labels)))
    return "30 images but"


def _missing(root: Path) -> str:
    (root / "t10k-labels-idx1-ubyte.gz").unlink()
    return "t10k-labels-idx1-ubyte"


@pytest.mark.parametrize("damage", [_truncate, _truncate_gzip, _bad_magic, _counts_disagree, _missing])
def test_damaged_idx_file_is_one_line_exit_2(tmp_path, capsys, damage):
    from pebench.cli import main

    root = write_idx_root(tmp_path / "root")
    expect = damage(root)
    with pytest.raises(DataRootError, match=expect):
        build_datamodule("fashion-mnist", data_root=str(root), val_per_class=1).preflight()
    out = tmp_path / "runs"
    assert main(["run", "--dataset", "fashion-mnist", "--data-root", str(root), "--out", str(out),
                 "--data-option", "val_per_class=1", "--fast-dev-run"]) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("bench: error: ") and expect in lines[0], lines
    assert not out.exists() or not any(out.iterdir())


def test_idx_error_is_a_data_root_error_naming_the_file():
    with pytest.raises(IDXError, match="shorter than the 4-byte"):
        read_idx_bytes(b"\x00\x00", "'x.idx'")
    with pytest.raises(DataRootError, match="2 bytes after"):
        read_idx_bytes(idx_bytes(np.zeros(3, np.uint8)) + b"\x00\x00", "'x.idx'")
    with pytest.raises(DataRootError, match="expected 3"):
        read_idx_bytes(idx_bytes(np.zeros(3, np.uint8)), "'x.idx'", ndim=3)


def test_mnist_needs_a_data_root_and_names_the_layout(tmp_path):
    with pytest.raises(DataRootError, match="--data-root"):
        build_datamodule("mnist")
    with pytest.raises(DataRootError, match="train-images-idx3-ubyte"):
        build_datamodule("mnist", data_root=str(tmp_path))
    with pytest.raises(ValueError, match="val_per_class"):
        build_datamodule("mnist", data_root=str(write_idx_root(tmp_path / "r")), val_per_class=0)

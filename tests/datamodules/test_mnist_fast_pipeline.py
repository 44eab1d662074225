"""fashion-mnist / mnist: the fast pipeline (:class:`GrayPipeline`: the eval split resized and standardised once as
one batched tensor op, the train augmentation called without ``Compose``) gives the same samples as the per-sample
v2 ``transform`` (``torch.equal``, not allclose), with the same labels and counts, on a fixture IDX set at
28 -> 24 and 28 -> 224 px, 1 and 3 channels."""
from __future__ import annotations

import pytest
import torch
from fixtures_idx import write_idx_root

from pebench.datamodules import build_datamodule
from pebench.datamodules.images.mnist import GrayPipeline


def _dm(tmp_path, name: str, resolution: int, channels: int):
    root = write_idx_root(tmp_path / "idx", n_train=60, n_test=40)
    return build_datamodule(name, data_root=str(root), resolution=resolution, channels=channels, val_per_class=2,
                            train_per_class=3)


def _pairs(ds):
    for i in range(len(ds)):
        yield ds.load(i), ds.load_reference(i)


@pytest.mark.parametrize("name", ["fashion-mnist", "mnist"])
@pytest.mark.parametrize("resolution,channels", [(24, 1), (24, 3), (224, 3), (28, 1)])
def test_eval_splits_are_the_per_sample_transform(tmp_path, name, resolution, channels):
    dm = _dm(tmp_path, name, resolution, channels)
    sizes = {"train": 30, "val": 20, "test": 40}
    for split, ds in (("val", dm.val_dataset()), ("test", dm.test_dataset()),
                      ("train", dm.make_dataset("train", train=False))):
        assert ds.pipeline is not None and len(ds) == sizes[split]
        assert ds.pipeline._float is None  # nothing is computed before the first sample (preflight only counts)
        for (x, y), (x_ref, y_ref) in _pairs(ds):
            assert x.shape == (channels, resolution, resolution) and x.dtype == torch.float32
            assert torch.equal(x, x_ref) and y == y_ref
        assert ds.pipeline._float is not None  # the whole split was precomputed
        assert [ds[i][1] for i in range(len(ds))] == ds.targets  # labels unchanged


@pytest.mark.parametrize("name", ["fashion-mnist", "mnist"])
@pytest.mark.parametrize("resolution,channels", [(24, 1), (224, 3)])
def test_train_augmentation_is_the_per_sample_transform_draw_for_draw(tmp_path, name, resolution, channels):
    ds = _dm(tmp_path, name, resolution, channels).train_dataset()
    assert ds.pipeline is not None and ds.pipeline.train and len(ds) == 30
    for seed in range(3):
        torch.manual_seed(seed)
        fast = [ds.load(i) for i in range(len(ds))]
        after_fast = torch.rand(1)
        torch.manual_seed(seed)
        ref = [ds.load_reference(i) for i in range(len(ds))]
        assert all(torch.equal(a[0], b[0]) and a[1] == b[1] for a, b in zip(fast, ref))
        assert torch.equal(after_fast, torch.rand(1))  # the same random draws consumed


@pytest.mark.parametrize("resolution", [24, 224])
def test_storage_tiers_give_the_same_samples(tmp_path, resolution, monkeypatch):
    """Over the float budget the resized uint8 images are kept; over the uint8 budget nothing is precomputed."""
    ds = _dm(tmp_path, "fashion-mnist", resolution, 3).val_dataset()
    ref = [ds.load_reference(i)[0] for i in range(len(ds))]
    for float_bytes, uint8_bytes in ((0, 2 << 30), (0, 0)):
        monkeypatch.setattr(GrayPipeline, "FLOAT_BYTES", float_bytes)
        monkeypatch.setattr(GrayPipeline, "UINT8_BYTES", uint8_bytes)
        ds.pipeline._src = None
        assert all(torch.equal(ds.load(i)[0], r) for i, r in enumerate(ref))
        assert ds.pipeline._float is None and (ds.pipeline._u8 is None) == (uint8_bytes == 0)

"""``bench perf analyze`` (pebench.perf.analyze): the photographs it analyses and its records (``--quick``)."""
from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("skimage")

from pebench.perf import PERF_COMMANDS  # noqa: E402
from pebench.perf.analyze import MEAN, PHOTOS, STD, photo_crops  # noqa: E402


def test_photo_crops_are_deterministic_normalised_photographs():
    x, y = photo_crops(2 * len(PHOTOS) + 3, 32, seed=1)
    assert x.shape == (2 * len(PHOTOS) + 3, 3, 32, 32) and x.dtype == torch.float32
    assert y.tolist() == [i % len(PHOTOS) for i in range(len(y))]
    again, _ = photo_crops(2 * len(PHOTOS) + 3, 32, seed=1)
    assert torch.equal(x, again)
    assert not torch.equal(x, photo_crops(2 * len(PHOTOS) + 3, 32, seed=2)[0])
    # back in [0, 1] after undoing the normalisation, and every crop distinct
    unit = x * torch.tensor(STD).view(1, 3, 1, 1) + torch.tensor(MEAN).view(1, 3, 1, 1)
    assert unit.min() >= -1e-6 and unit.max() <= 1 + 1e-6
    flat = x.flatten(1)
    assert len({tuple(r[:64].tolist()) for r in flat}) == len(flat)
    # grey photographs become RGB with equal channels (camera.png is PHOTOS[8])
    grey = PHOTOS.index("camera.png")
    torch.testing.assert_close(unit[grey, 0], unit[grey, 1])


def test_quick_suite_records(tmp_path):
    js = tmp_path / "perf.json"
    assert PERF_COMMANDS["analyze"](["--quick", "--json", str(js)]) == 0
    rows = [r for r in json.loads(js.read_text()) if r.get("suite") == "analyze" and r["name"].startswith("analyze")]
    ratio, one, budget, one_budget = rows
    assert "K=2" in ratio["a"] and ratio["b"] == "one forward pass, same images"
    # five probe passes against one: the analysis costs more than the forward pass
    assert ratio["a_value"] > ratio["b_value"] > 0 and ratio["ratio"] > 1
    # one permutation (3 passes) is timed by the same call with rpi_permutations=1; the target stays the default's
    assert "rpi_permutations=1" in one["a"] and 0 < one["a_value"]
    assert budget["b_value"] == 180.0 and budget["a_value"] == ratio["a_value"] and "target" not in budget
    assert one_budget["a_value"] == one["a_value"] and "target" not in one_budget

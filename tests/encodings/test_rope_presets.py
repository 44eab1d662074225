"""The presets of issue #74: DINOv3's RoPE recipe (``imagenet100-dinov3``) and the extrapolation study's setting
(``imagenet100-extrapolation``): what each sets, its published numbers in docs/published_numbers.md (marked not
reproduced here), and a ``--fast-dev-run`` of each through ``bench run --preset`` on the ImageNet-100 fixture of
tests/support/fixtures_real.py (shrunk to vit-nano at 32 px; the extrapolation analysis at 32 and 64 px)."""
from __future__ import annotations

import json
import pathlib

import fixtures_real as F
import pytest

from pebench.cli import main
from pebench.encodings import build_pe
from pebench.runner.config import load_preset, merge, preset_info

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_dinov3_preset_is_dinov3s_released_rope_config():
    cfg = merge(load_preset("imagenet100-dinov3"))
    assert cfg.pe == "rope-dinov3" and cfg.dataset == "imagenet100" and cfg.resolution == 224
    # DINOv3's configs: pos_embed_rope_base 100, normalize_coords separate, rescale_coords 2, no shift / jitter
    assert cfg.pe_options == {"base": 100.0, "normalize_coords": "separate", "rescale": 2.0, "aug_draws": "block",
                              "rotate_half": True}
    pe = build_pe("rope-dinov3", dim=384, num_heads=6, depth=12, spatial_dims=2, num_prefix_tokens=1, grid=(14, 14),
                  **cfg.pe_options)
    assert (pe.shift, pe.jitter, pe.rescale, pe.min_period) == (None, None, 2.0, None)
    assert cfg.class_token and cfg.coord_aug == "none"  # the PE draws DINOv3's rescale itself: no second one


def test_extrapolation_preset_reaches_4_57_times_the_training_side():
    cfg = merge(load_preset("imagenet100-extrapolation"))
    assert cfg.dataset == "imagenet100" and cfg.resolution == 224 and cfg.pe == "fire" and cfg.model == "vit-tiny"
    sides = [int(r) for r in cfg.extrapolation_resolutions]
    assert sides[0] == 224 and max(sides) == 1024 and round(1024 / 224, 2) == 4.57


@pytest.mark.parametrize("preset,numbers", [("imagenet100-dinov3", ("90.2", "54.9")),
                                            ("imagenet100-extrapolation", ("63.1", "18.9"))])
def test_published_numbers_sit_beside_the_preset_and_are_marked_unreproduced(preset, numbers):
    doc = (REPO / "docs" / "published_numbers.md").read_text(encoding="utf-8")
    row = next(line for line in doc.splitlines() if line.startswith(f"| `{preset}` |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert all(n in cells[4] for n in numbers), row
    assert cells[-1] == "no"  # the "reproduced here" column
    assert "Not reproduced here" in doc[:doc.index(row)]
    assert preset_info(preset)["description"].endswith("not run by pebench")


@pytest.fixture(scope="module")
def imagenet100_root(tmp_path_factory):
    return F.imagenet(tmp_path_factory.mktemp("in100") / "in", wnids=["n01440764", *F.IN100_WNIDS])


@pytest.mark.slow
@pytest.mark.parametrize("preset,pe,extra", [
    ("imagenet100-dinov3", "rope-dinov3", ["--analyses", "none"]),
    ("imagenet100-extrapolation", "fire", ["--analyses", "extrapolation", "--extrapolation-resolutions", "32,64"]),
])
def test_preset_fast_dev_run_on_the_fixture(preset, pe, extra, imagenet100_root, tmp_path):
    out = tmp_path / "runs"
    rc = main(["run", "--preset", preset, "--data-root", str(imagenet100_root), "--fast-dev-run", "--model", "vit-nano",
               "--resolution", "32", "--batch-size", "4", "--num-workers", "0", "--precision", "32-true",
               "--accelerator", "cpu", "--no-progress-bar", "--out", str(out), *extra])
    assert rc in (0, None)
    res = json.loads(next(out.glob(f"imagenet100/{pe}/vit-nano/seed0/results.json")).read_text())
    assert res["status"] == "complete" and res["pe"] == pe
    assert res["config"]["pe_options"] == merge(load_preset(preset)).pe_options
    if preset == "imagenet100-extrapolation":
        assert [e["resolution"] for e in res["extrapolation"]] == ["32", "64"]
        assert all(0.0 <= e["acc1"] <= 1.0 for e in res["extrapolation"])

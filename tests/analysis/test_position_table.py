"""``bench analyze --position-table``: the SSDC paper's inference-time interventions on a learned absolute table
(pebench.analysis.pretrained.with_position_table), on tiny random-weight timm ViTs.

Checked against timm itself: the table kept is the one timm's forward pass resamples to the input grid (the model
built for that grid computes the same tokens as the original); the permuted table is a row permutation of it (class
row untouched); the zeroed table makes the model equivariant to permutations of the patches, the defining property
of a transformer without a PE; a model with no absolute table is one line, exit 2, before anything is written."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import timm
import torch
from safetensors.torch import save_file
from timm.layers import resample_abs_pos_embed

from pebench.analysis.pretrained import TimmTask, table_permutation, with_position_table
from pebench.cli import main
from pebench.core.errors import ConfigError

os.environ["HF_HUB_OFFLINE"] = "1"

#: a checkpoint made at 32 px (a 4 x 4 grid of 8 px patches), analysed at 48 px (6 x 6): the table is resampled
SMALL = {"img_size": 32, "patch_size": 8, "depth": 2, "embed_dim": 32, "num_heads": 2}
NAME = "vit_small_patch14_dinov2"  # DINOv2's layout: a class-token row in the table, layer scale


def _task() -> TimmTask:
    torch.manual_seed(1)
    task = TimmTask(NAME, SMALL)
    with torch.no_grad():  # a table with structure (timm initialises it to small noise)
        task.model.pos_embed.normal_(0.0, 1.0)
    return task.eval()


def _tokens(task: TimmTask, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return task.model.forward_features(x)


def test_the_kept_table_is_the_one_timm_resamples():
    task = _task()
    x = torch.randn(2, 3, 48, 48)
    kept = with_position_table(task, (6, 6), "as-trained", seed=0)
    assert kept.model.patch_embed.grid_size == (6, 6)
    torch.testing.assert_close(_tokens(kept, x), _tokens(task, x), rtol=1e-5, atol=1e-5)
    resampled = resample_abs_pos_embed(task.model.pos_embed.detach(), new_size=[6, 6], old_size=[4, 4],
                                       num_prefix_tokens=1)
    assert torch.equal(kept.model.pos_embed.detach(), resampled)
    others = {k: v for k, v in kept.model.state_dict().items() if k != "pos_embed"}
    assert all(torch.equal(v, task.model.state_dict()[k]) for k, v in others.items())


def test_the_permuted_table_permutes_the_patch_rows_only():
    task = _task()
    kept = with_position_table(task, (6, 6), "as-trained", seed=3).model.pos_embed.detach()
    permuted = with_position_table(task, (6, 6), "permuted", seed=3).model.pos_embed.detach()
    perm = np.random.default_rng([3, 1]).permutation(36)
    assert torch.equal(table_permutation(36, 3), torch.from_numpy(perm))
    assert torch.equal(permuted[:, 0], kept[:, 0])  # the class-token row
    assert torch.equal(permuted[:, 1:], kept[:, 1:][:, perm])
    assert not torch.equal(permuted, kept)
    other_seed = with_position_table(task, (6, 6), "permuted", seed=4).model.pos_embed.detach()
    assert not torch.equal(other_seed, permuted)


def test_the_zeroed_table_makes_the_model_equivariant_to_patch_permutations():
    task = _task()
    zeroed = with_position_table(task, (6, 6), "zeroed", seed=0)
    table = zeroed.model.pos_embed.detach()
    assert torch.count_nonzero(table[:, 1:]) == 0 and torch.count_nonzero(table[:, 0]) > 0
    x = torch.randn(1, 3, 48, 48)
    # permute the 36 patches of the image (8 px blocks): the patch tokens come out permuted the same way
    perm = torch.from_numpy(np.random.default_rng(0).permutation(36))
    blocks = x.reshape(1, 3, 6, 8, 6, 8).permute(0, 2, 4, 1, 3, 5).reshape(1, 36, 3, 8, 8)
    shuffled = blocks[:, perm].reshape(1, 6, 6, 3, 8, 8).permute(0, 3, 1, 4, 2, 5).reshape(1, 3, 48, 48)
    a, b = _tokens(zeroed, x), _tokens(zeroed, shuffled)
    torch.testing.assert_close(b[:, 1:], a[:, 1:][:, perm], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(b[:, 0], a[:, 0], rtol=1e-4, atol=1e-5)  # the class token does not move
    kept = with_position_table(task, (6, 6), "as-trained", seed=0)  # with its table it is not equivariant
    assert not torch.allclose(_tokens(kept, shuffled)[:, 1:], _tokens(kept, x)[:, 1:][:, perm], atol=1e-3)


def test_a_model_without_an_absolute_table_is_a_config_error():
    rope = TimmTask("vit_small_patch16_rope_224", SMALL)
    with pytest.raises(ConfigError, match="has no absolute position table"):
        with_position_table(rope, (4, 4), "zeroed", seed=0)
    with pytest.raises(ConfigError, match="must be one of as-trained, permuted, zeroed"):
        with_position_table(_task(), (4, 4), "shuffled", seed=0)


def test_bench_analyze_runs_each_table_in_its_own_variant(tmp_path, capsys):
    task = _task()
    ckpt = tmp_path / "dinov2.safetensors"
    save_file({k: v.contiguous() for k, v in task.model.state_dict().items()}, str(ckpt))
    model = [a for k, v in SMALL.items() for a in ("--model-option", f"{k}={v}")]
    fast = ["--analyses", "geometry", "--data-option", "train_size=32", "--data-option", "val_size=16",
            "--probe-samples", "32", "--analysis-option", "probe_size=8", "--analysis-option", "rpi_permutations=2",
            "--analysis-option", "rpi_null=false", "--no-progress-bar"]
    out = tmp_path / "runs"
    fingerprints = {}
    for table in ("as-trained", "permuted", "zeroed"):
        rc = main(["analyze", "--model", f"timm:{NAME}", "--checkpoint", str(ckpt), "--dataset", "shapes",
                   "--out", str(out), "--position-table", table, *model, *fast])
        assert rc == 0, capsys.readouterr().err
        variant = "ape" if table == "as-trained" else f"ape+{table}-table"
        res = json.loads((out / "shapes" / variant / f"timm-{NAME}" / "seed0" / "results.json").read_text())
        assert res["status"] == "complete" and res["variant"] == variant and res["pe"] == "ape"
        assert res["config"].get("position_table") == (None if table == "as-trained" else table)
        src = res["model_source"]
        assert src.get("position_table") == (None if table == "as-trained" else table)
        if table == "permuted":
            assert src["position_table_permutation"] == table_permutation(16, 0).tolist()
        fingerprints[table] = res["fingerprint"]
    assert len(set(fingerprints.values())) == 3
    capsys.readouterr()
    rope = tmp_path / "rope.safetensors"
    rope_model = timm.create_model("vit_small_patch16_rope_224", pretrained=False, num_classes=0, **SMALL)
    save_file({k: v.contiguous() for k, v in rope_model.state_dict().items()}, str(rope))
    rc = main(["analyze", "--model", "timm:vit_small_patch16_rope_224", "--checkpoint", str(rope), "--dataset",
               "shapes", "--out", str(tmp_path / "rope-runs"), "--position-table", "zeroed", *model, *fast])
    lines = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "has no absolute position table (its PE is rope-axial)" in lines[0]
    assert not (tmp_path / "rope-runs").exists()

"""Detection on asynchronous spiking-patch tokens (``--data-option tokens=spiking`` on ``gen1`` /
``events-det``): the deterministic token map (:func:`~pebench.tasks.detection.scatter_token_map`)
against a per-cell loop reference, its invariance to token order and to padding, its agreement with
the grid path when every cell holds one token (and with the tubelet path's mean over time), the whole
detector's token map under permutation and added padding for ``pape`` and ``ape`` (coords MLP), and
``events-det`` with spiking tokens end to end (``bench run --fast-dev-run``)."""
from __future__ import annotations

import json
import math

import pytest
import torch

from pebench.cli import main
from pebench.datamodules.events.spiking import EventTokens
from pebench.tasks.detection import DetectionTask, scatter_token_map

SMALL = dict(train_recordings=1, val_recordings=1, test_recordings=1, duration_s=0.8)


def _loop_reference(tokens, coords, mask, h, w):
    """Per sample, per cell: the mean of the real tokens in it, by explicit loops (zeros if none)."""
    B, N, D = tokens.shape
    out = torch.zeros(B, D, h, w, dtype=torch.float64)
    for b in range(B):
        for i in range(h):
            for j in range(w):
                rows = [tokens[b, n].double() for n in range(N)
                        if mask[b, n] and int(coords[b, n, -2]) == i and int(coords[b, n, -1]) == j]
                if rows:
                    out[b, :, i, j] = torch.stack(rows).mean(0)
    return out


def _random_tokens(seed: int, B: int = 3, N: int = 17, D: int = 6, h: int = 3, w: int = 4):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randn(B, N, D, generator=g)
    t = torch.rand(B, N, 1, generator=g) * 5  # continuous time, irrelevant to the map
    y = torch.randint(0, h, (B, N, 1), generator=g).float()
    x = torch.randint(0, w, (B, N, 1), generator=g).float()
    mask = torch.rand(B, N, generator=g) < 0.8
    mask[:, 0] = True
    return tokens, torch.cat([t, y, x], -1), mask, (h, w)


def test_scatter_matches_a_per_cell_loop_and_leaves_empty_cells_zero():
    tokens, coords, mask, (h, w) = _random_tokens(0)
    got = scatter_token_map(tokens, coords, mask, (h, w))
    ref = _loop_reference(tokens, coords, mask, h, w)
    assert got.shape == (3, 6, h, w)
    assert torch.allclose(got.double(), ref, atol=1e-6)
    # cells that only padding tokens (or nothing) point at are exactly zero
    tokens[:, :, :] = 0.0
    tokens[0, 0] = 1.0  # the one real token of sample 0 with a value
    only = scatter_token_map(tokens, coords, mask, (h, w))
    cy, cx = int(coords[0, 0, 1]), int(coords[0, 0, 2])
    n_same = int((mask[0] & (coords[0, :, 1] == cy) & (coords[0, :, 2] == cx)).sum())
    assert torch.allclose(only[0, :, cy, cx], torch.full((6,), 1.0 / n_same))
    assert only.abs().sum() == pytest.approx(6.0 / n_same)


def test_scatter_is_invariant_to_token_order_and_to_padding_and_deterministic():
    tokens, coords, mask, hw = _random_tokens(1)
    ref = scatter_token_map(tokens, coords, mask, hw)
    assert torch.equal(ref, scatter_token_map(tokens, coords, mask, hw))  # two calls: bit for bit
    perm = torch.randperm(tokens.shape[1], generator=torch.Generator().manual_seed(2))
    assert torch.allclose(scatter_token_map(tokens[:, perm], coords[:, perm], mask[:, perm], hw), ref, atol=1e-6)
    # padding slots: any values (NaN included), any coords (outside the map too) -> no change
    B, _, D = tokens.shape
    pad_x = torch.full((B, 5, D), float("nan"))
    pad_c = torch.tensor([0.0, 99.0, -7.0]).expand(B, 5, 3)
    padded = scatter_token_map(torch.cat([tokens, pad_x], 1), torch.cat([coords, pad_c], 1),
                               torch.cat([mask, torch.zeros(B, 5, dtype=torch.bool)], 1), hw)
    assert torch.equal(padded, ref)
    with pytest.raises(ValueError, match="outside"):  # a *real* token off the map is an error
        scatter_token_map(tokens, coords.index_fill(2, torch.tensor([2]), 9.0), mask, hw)


def test_one_token_per_cell_is_the_grid_path_and_tubelets_average_over_time():
    B, D, T, h, w = 2, 5, 3, 3, 4
    tokens = torch.randn(B, T * h * w, D)
    tt, yy, xx = torch.meshgrid(torch.arange(T), torch.arange(h), torch.arange(w), indexing="ij")
    coords = torch.stack([tt, yy, xx], -1).reshape(-1, 3).float()  # row-major (t, y, x), shared (N, 3)
    grid_path = tokens.transpose(1, 2).reshape(B, D, T, h, w)  # what DetectionTask.token_map does on a grid
    first = tokens[:, : h * w]  # t = 0 only: one token per cell
    assert torch.allclose(scatter_token_map(first, coords[: h * w], None, (h, w)), grid_path[:, :, 0], atol=1e-6)
    assert torch.allclose(scatter_token_map(tokens, coords, None, (h, w)), grid_path.mean(2), atol=1e-6)


def _spiking_task(pe: str) -> DetectionTask:
    torch.manual_seed(0)
    return DetectionTask(modality="events", num_classes=2, in_chans=2, model="vit-nano", pe=pe, patch_size=8,
                         fpn_dim=32, head_convs=1, tokens="spiking",
                         tokenizer_options={"buckets": 4, "threshold": 32}).eval()


@pytest.mark.parametrize("pe", ["pape", "ape"])
def test_detector_token_map_ignores_token_order_and_padding(pe):
    """Backbone (every PE is permutation-equivariant with its coords and honours the key mask) +
    scatter: the map, and so the detections, do not depend on token order or padding."""
    g = torch.Generator().manual_seed(3)
    B, N, hw = 2, 12, (32, 40)  # 4 x 5 cells of 8 px
    vol = torch.rand(B, N, 2, 4, 8, 8, generator=g)
    coords = torch.cat([torch.rand(B, N, 1, generator=g) * 4, torch.randint(0, 4, (B, N, 1), generator=g).float(),
                        torch.randint(0, 5, (B, N, 1), generator=g).float()], -1)
    mask = torch.ones(B, N, dtype=torch.bool)
    mask[1, 9:] = False  # sample 1 has 9 real tokens
    task = _spiking_task(pe)
    with torch.no_grad():
        ref = task.token_map(EventTokens(vol, coords, mask), input_hw=hw)
        again = task.token_map(EventTokens(vol, coords, mask), input_hw=hw)
        perm = torch.randperm(N, generator=g)
        permuted = task.token_map(EventTokens(vol[:, perm], coords[:, perm], mask[:, perm]), input_hw=hw)
        pad = 4
        padded = task.token_map(EventTokens(torch.cat([vol, torch.rand(B, pad, 2, 4, 8, 8, generator=g)], 1),
                                            torch.cat([coords, torch.zeros(B, pad, 3)], 1),
                                            torch.cat([mask, torch.zeros(B, pad, dtype=torch.bool)], 1)), input_hw=hw)
    assert ref.shape == (B, 128, 4, 5) and torch.isfinite(ref).all()
    assert torch.equal(ref, again)
    assert torch.allclose(permuted, ref, atol=1e-5) and torch.allclose(padded, ref, atol=1e-5)
    with pytest.raises(ValueError, match="input_hw"):
        task.token_map(EventTokens(vol, coords, mask))


def test_events_det_spiking_batches_and_the_ape_coords_path(tmp_path):
    """Loader -> padded tokens + targets with input_hw -> losses and a backward pass with ``ape``
    (grid=None: its coordinate MLP) and detections in the input frame."""
    from pebench.datamodules import build_datamodule

    dm = build_datamodule("events-det", cache_dir=str(tmp_path), tokens="spiking", batch_size=4, **SMALL)
    assert dm.window_us == 100_000 and dm.tokenizer_options()["threshold"] == 32
    inputs, targets, info = next(iter(dm.train_dataloader()))
    assert isinstance(inputs, EventTokens) and inputs.volumes.shape[2:] == (2, 8, 8, 8)
    assert all(t["input_hw"] == (64, 80) for t in targets) and info["skipped"] == 0
    assert info["tokens_kept"] == int(inputs.mask.sum()) and info["tokens_kept"] > 0
    real = inputs.coords[inputs.mask]
    assert real[:, 1].max() < 8 and real[:, 2].max() < 10 and real[:, 0].min() >= 0  # cells of 8 px, t >= 0
    # a training grid is ignored with spiking tokens: ape gets no table but its coords MLP
    task = DetectionTask(modality="events", num_classes=2, in_chans=2, model="vit-nano", pe="ape", patch_size=8,
                         train_grid=(2, 8, 10), fpn_dim=32, head_convs=1, tokens="spiking",
                         tokenizer_options=dm.tokenizer_options())
    assert task.backbone.pe.table is None and task.backbone.pe.coord_mlp is not None
    losses, _ = task.losses(inputs, targets)
    loss = sum(losses.values())
    loss.backward()
    assert math.isfinite(float(loss)) and task.tokenizer.proj.weight.grad.abs().sum() > 0
    assert task.backbone.pe.coord_mlp[0].weight.grad.abs().sum() > 0
    dets = task.eval()(inputs, targets)
    assert len(dets) == len(targets) and all(d["boxes"].shape[-1] == 4 for d in dets)


def test_events_det_spiking_fast_dev_run_pape(tmp_path):
    out = tmp_path / "runs"
    args = ["run", "--dataset", "events-det", "--fast-dev-run", "--batch-size", "4", "--pe", "pape",
            "--data-option", "tokens=spiking", "--data-option", f"cache_dir={tmp_path / 'cache'}",
            *[a for k, v in SMALL.items() for a in ("--data-option", f"{k}={v}")],
            "--task-option", "fpn_dim=32", "--task-option", "head_convs=1", "--accelerator", "cpu",
            "--no-progress-bar", "--out", str(out)]
    assert main(args) == 0
    (path,) = out.rglob("results.json")
    r = json.loads(path.read_text())
    assert path.parent.parent.parent.name == "pape+spiking"  # events-det's default tokens are frames
    assert r["status"] == "complete" and r["task"] == "detection" and r["primary_metric"] == "val/map"
    assert r["metrics"]["val/map_images"] >= 1 and 0.0 <= r["metrics"]["val/map"] <= 1.0 and "test/map" in r["metrics"]
    assert r["token_cap"]["max_tokens"] == 256 and r["token_cap"]["val"]["tokens_per_sample"] > 0

"""Robustness (FS on mAP / mIoU) and extrapolation for the detection and segmentation tasks
(``pebench.tasks.detection.shift`` / ``segmentation.shift``, reached through each task setup's
``analysis_hooks``): the definitions on hand-computed values, oracle models through
the real evaluation paths (perfect predictions -> metric 1.0 and FS 0), a larger token grid for a
relative PE and for APE's resampled table, and ``bench run --analyses robustness,extrapolation``
end to end on ``shapes-det`` and ``primitives-scene``."""
from __future__ import annotations

import json
import math

import pytest
import torch
from torch import nn

from pebench.analysis.robustness import PERTURBATIONS, dense_fragility
from pebench.datamodules import build_datamodule
from pebench.datamodules.scenes.scene_common import scene_collate
from pebench.tasks import get_task_setup
from pebench.tasks.detection import shift as det
from pebench.tasks.segmentation import shift as seg


# ------------------------------------------------------------------------------- definitions
def test_fs_and_floor_definitions_on_hand_computed_values():
    assert dense_fragility(0.2, 0.15, None) == pytest.approx(0.25)
    assert dense_fragility(0.2, 0.15, "undefined") is None
    assert det.map_fs_reason(0.0099) is not None and det.map_fs_reason(0.01) is None
    assert det.map_fs_reason(float("nan")) is not None
    # rows target, columns prediction; supports 6, 3, 1. Predicting class 0 everywhere: IoU_0 = 6 / 10,
    # classes 1 and 2 present with IoU 0 -> mIoU (0.6 + 0 + 0) / 3 = 0.2
    cm = torch.tensor([[5, 1, 0], [2, 1, 0], [0, 0, 1]])
    assert seg.majority_miou(cm) == pytest.approx(0.2)
    assert seg.miou_fs_reason(0.2, 0.2) is not None and seg.miou_fs_reason(0.21, 0.2) is None
    assert seg.miou_fs_reason(0.0, None) is not None


def test_dense_tasks_run_robustness_and_extrapolation_by_default_and_refuse_alpha_by_name():
    from pebench.runner.config import ANALYSES, ConfigError
    from pebench.tasks.detection.setup import detection_analyses
    from pebench.tasks.segmentation.setup import segmentation_analyses

    for keep in (detection_analyses, segmentation_analyses):
        assert keep(list(ANALYSES), False) == ["geometry", "robustness", "extrapolation"]  # the defaults
        assert keep(list(ANALYSES), True) == ["geometry", "robustness", "extrapolation"]  # --analyses all
        assert keep(["robustness"], True) == ["robustness"]
        with pytest.raises(ConfigError, match="'alpha' does not apply"):
            keep(["geometry", "alpha"], True)


def test_scene_dropout_removes_exactly_round_p_n_points_and_keeps_labels_with_points():
    coord = torch.arange(30, dtype=torch.float32).reshape(10, 3)
    scenes = [(coord, coord[:, :1] * 2, torch.arange(10)), (coord[:5], coord[:5, :1] * 2, torch.arange(5))]
    inputs, target, _ = scene_collate(scenes)
    out, t = seg.scene_dropout(inputs, target, 0.4, torch.Generator().manual_seed(0))
    assert out["mask"].sum(1).tolist() == [6, 3]  # 10 - round(4), 5 - round(2)
    for b in range(2):
        m = out["mask"][b]
        assert torch.equal(out["coord"][b][m][:, 0], t[b][m].float() * 3)  # each label stays with its point
        assert torch.equal(out["feat"][b][m][:, 0], out["coord"][b][m][:, 0] * 2)
    j, tj = seg.scene_jitter(inputs, target, 0.05, torch.Generator().manual_seed(0))
    assert torch.equal(tj, target) and 0.01 < (j["coord"] - inputs["coord"]).std() < 0.1


def test_tile_scenes_keeps_scene_0_and_places_the_others_apart():
    box = torch.rand(50, 3) * torch.tensor([3.0, 2.0, 1.0])
    scenes = [(box + k, torch.full((50, 1), float(k)), torch.full((50,), k)) for k in range(4)]
    c, f, t = seg.tile_scenes(scenes)
    assert c.shape == (200, 3) and torch.equal(c[:50], scenes[0][0]) and torch.equal(t, torch.cat([s[2] for s in scenes]))
    lo = [c[t == k, :2].min(0).values for k in range(4)]
    hi = [c[t == k, :2].max(0).values for k in range(4)]
    for a in range(4):
        for b in range(a + 1, 4):  # axis-aligned footprints separated by at least the gap on some axis
            gap = torch.maximum(lo[b] - hi[a], lo[a] - hi[b]).max()
            assert gap >= seg.SCENE_GAP_M - 1e-5
    assert torch.allclose(c[t == 3, 2], scenes[3][0][:, 2])  # z untouched


# ------------------------------------------------------------------------------- detection oracle
class _OracleDetector(nn.Module):
    """Returns each image's ground-truth boxes (input frame) with score 1 while the input is not
    blacked out; a blacked-out image (all values < -50) gets no detections."""

    modality = "image"

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(1))

    def forward(self, x, targets):
        out = []
        for xi, t in zip(x, targets):
            n = 0 if bool((xi < -50).all()) else len(t["boxes"])
            out.append({"boxes": t["boxes"][:n].clone(), "scores": torch.ones(n), "labels": t["labels"][:n].clone()})
        return out


@pytest.fixture(scope="module")
def det_dm(tmp_path_factory):
    return build_datamodule("shapes-det", train_size=1, val_size=6, test_size=1, resolution=32, batch_size=4,
                            cache_dir=str(tmp_path_factory.mktemp("det")))


def test_perfect_detector_map_1_and_fs_0_then_fs_1_when_blacked_out(det_dm, monkeypatch):
    monkeypatch.setitem(PERTURBATIONS, "identity", lambda x, g, p, ctx: x)
    monkeypatch.setitem(PERTURBATIONS, "blackout", lambda x, g, p, ctx: torch.full_like(x, -100.0))
    res = get_task_setup("detection").analysis_hooks().robustness(_OracleDetector(), det_dm,
                                                                  shifts=["identity", "blackout", "jpeg"])
    assert res["metric"] == "map" and res["n_samples"] == 6
    assert res["clean"] == pytest.approx(1.0)  # boxes mapped back to the original frame match exactly
    assert res["identity"]["fs"] == pytest.approx(0.0) and res["jpeg"]["fs"] == pytest.approx(0.0)
    assert res["blackout"]["value"] == 0.0 and res["blackout"]["fs"] == pytest.approx(1.0)
    assert res["jpeg"]["params"] == {"quality": 5} and res["jpeg"]["fs_reason"] is None


def test_map_below_the_floor_gives_no_fs(det_dm, monkeypatch):
    monkeypatch.setitem(PERTURBATIONS, "blackout", lambda x, g, p, ctx: torch.full_like(x, -100.0))
    loader = [(torch.full((b[0].shape[0], *b[0].shape[1:]), -100.0), b[1], b[2]) for b in det_dm.eval_dataloader(None)]
    res = det.robustness(_OracleDetector(), det_dm, shifts=["blur"], loader=loader)
    assert res["clean"] == 0.0 and res["blur"]["fs"] is None and "floor" in res["blur"]["fs_reason"]


@pytest.mark.parametrize("pe", ["rope-axial", "ape"])
def test_detection_extrapolation_runs_larger_grids(det_dm, pe, monkeypatch):
    from pebench.encodings.ape import LearnedAPE
    from pebench.tasks.detection import DetectionTask

    grids = []
    real = LearnedAPE.table_for_grid
    monkeypatch.setattr(LearnedAPE, "table_for_grid", lambda self, g: grids.append(tuple(g)) or real(self, g))
    torch.manual_seed(0)
    task = DetectionTask(num_classes=3, model="vit-nano", pe=pe, patch_size=8, train_grid=(4, 4), fpn_dim=32,
                         head_convs=1)
    hooks = get_task_setup("detection").analysis_hooks()
    default_resolutions, check_resolutions = hooks.default_resolutions, hooks.check_resolutions
    evaluate_extrapolation = hooks.evaluate_extrapolation
    assert default_resolutions(det_dm, task) == ["32", "48", "64"]
    check_resolutions(task, det_dm, ["48", "64"])
    rows = evaluate_extrapolation(task, det_dm, ["32", "48", "64"], max_samples=2)
    assert [r["n_tokens"] for r in rows] == [16, 36, 64] and all(r["metric"] == "map" for r in rows)
    assert all(0.0 <= r["map"] <= 1.0 and r["n_samples"] == 2 for r in rows), rows
    if pe == "ape":  # the table resampled to the larger grids (its native rule)
        assert {(6, 6), (8, 8)} <= set(grids)
    bad = evaluate_extrapolation(task, det_dm, ["36"], max_samples=1)  # not a patch multiple: an error row
    assert "error" in bad[0]


# ------------------------------------------------------------------------------- segmentation
class _SceneDM:
    """Scenes whose first feature is the point's label; point count grows as 1 / grid_size²."""

    modality = "points"

    def __init__(self, grid_size: float = 0.1, n_scenes: int = 4) -> None:
        self.grid_size, self.resolution, self.batch_size, self.n = grid_size, (10000,), 2, n_scenes

    def eval_dataloader(self, res=None):
        g = torch.Generator().manual_seed(1)
        scenes = []
        for _ in range(self.n):
            m = int(round(2.0 / self.grid_size ** 2))  # a 2 m x 1 m room, 1 point per voxel area
            c = torch.rand(m, 3, generator=g) * torch.tensor([2.0, 1.0, 0.5])
            lab = (c[:, 0] > 1.0).long() + (c[:, 2] > 0.4).long()  # classes 0, 1, 2 by position
            scenes.append((c, lab[:, None].float(), lab))
        return [scene_collate(scenes[i:i + 2]) for i in range(0, self.n, 2)]


class _OracleSegmenter(nn.Module):
    modality = "points"

    def __init__(self) -> None:
        super().__init__()
        from lightning.fabric.utilities.data import AttributeDict

        self.hparams = AttributeDict(num_classes=3, ignore_index=-1, grid_size=0.1)

    def forward(self, inputs):
        return torch.nn.functional.one_hot(inputs["feat"][..., 0].long(), 3).float()


def test_perfect_segmenter_miou_1_and_fs_0_under_jitter_and_dropout():
    dm = _SceneDM()
    res = get_task_setup("segmentation").analysis_hooks().robustness(_OracleSegmenter(), dm, seed=3)
    assert res["metric"] == "miou" and res["clean"] == pytest.approx(1.0) and res["n_samples"] == 4
    assert 0.0 < res["majority_miou"] < 0.5
    for s in ("jitter", "point_dropout"):
        assert res[s]["fs"] == pytest.approx(0.0) and res[s]["value"] == pytest.approx(1.0), s
    assert res["jitter"]["params"] == {"sigma": 0.05} and res["point_dropout"]["params"] == {"p": 0.5}


def test_segmentation_extrapolation_denser_and_tiled_with_pape():
    from pebench.tasks.segmentation import SegmentationTask

    torch.manual_seed(0)
    task = SegmentationTask(num_classes=3, feat_dim=1, model="vit-nano", pe="pape", patch_size=8, grid_size=0.1)
    dm = _SceneDM()
    hooks = get_task_setup("segmentation").analysis_hooks()
    default_resolutions, check_resolutions = hooks.default_resolutions, hooks.check_resolutions
    evaluate_extrapolation = hooks.evaluate_extrapolation
    assert default_resolutions(dm, task) == ["1x1", "2x1", "4x1", "1x2", "1x4"]
    with pytest.raises(ValueError, match="FxK"):
        check_resolutions(task, dm, ["2xfoo"])
    rows = {r["resolution"]: r for r in evaluate_extrapolation(task, dm, ["1", "2x1", "1x2", "1x8"])}
    one, dense, tiled = rows["1"], rows["2x1"], rows["1x2"]
    assert dense["n_points"] == pytest.approx(2 * one["n_points"], rel=0.01)  # grid / sqrt(2): 2x the points
    assert dense["grid_size_m"] == pytest.approx(0.1 / math.sqrt(2), rel=1e-4) and dense["extent_m"][0] < 2.1
    assert dense["n_tokens"] == pytest.approx(2 * one["n_tokens"], rel=0.05)  # same area, 2x the tokens
    assert tiled["n_tokens"] == pytest.approx(2 * one["n_tokens"], rel=0.05)
    assert tiled["extent_m"][0] > 4.0 and tiled["n_samples"] == 2 and tiled["scenes_tiled"] == 2
    assert all(0.0 <= r["miou"] <= 1.0 for r in (one, dense, tiled))
    assert "error" in rows["1x8"]  # 4 scenes cannot fill a tile of 8
    assert dm.grid_size == 0.1  # the run's datamodule is untouched


# ------------------------------------------------------------------------------- end to end
def test_bench_run_detection_and_segmentation_with_robustness_and_extrapolation(tmp_path, monkeypatch, capsys):
    from pebench.cli import main

    monkeypatch.setenv("PEBENCH_CACHE", str(tmp_path / "cache"))
    common = ["--accelerator", "cpu", "--no-progress-bar", "--out", str(tmp_path / "runs"),
              "--analyses", "robustness,extrapolation", "--analysis-option", "robustness_samples=2",
              "--analysis-option", "extrapolation_samples=2"]
    # one training step (not --fast-dev-run) so that last.ckpt exists for bench eval below
    assert main(["run", "--dataset", "shapes-det", "--pe", "rope-axial", "--resolution", "32", "--batch-size", "2",
                 "--epochs", "1", "--limit-train-batches", "1", "--limit-val-batches", "1",
                 "--data-option", "train_size=2", "--data-option", "val_size=2", "--data-option", "test_size=2",
                 "--data-option", f"cache_dir={tmp_path / 'cache'}", "--task-option", "fpn_dim=32",
                 "--task-option", "head_convs=1", "--extrapolation-resolutions", "32,48", *common]) == 0
    assert main(["run", "--dataset", "primitives-scene", "--pe", "sincos", "--batch-size", "2", "--fast-dev-run",
                 "--data-option", "train_size=2", "--data-option", "val_size=2", "--data-option", "density=15",
                 "--extrapolation-resolutions", "1x1,2x1,1x2", *common]) == 0
    for dataset, metric, n in (("shapes-det", "map", 2), ("primitives-scene", "miou", 3)):
        (path,) = (tmp_path / "runs" / dataset).rglob("results.json")
        r = json.loads(path.read_text())
        assert r["status"] == "complete" and r["analyses"] == ["robustness", "extrapolation"], r.get("analysis_errors")
        assert r["robustness"]["metric"] == metric and r["robustness"]["n_samples"] == 2
        assert len(r["extrapolation"]) == n and all(row["metric"] == metric for row in r["extrapolation"])
        assert (path.parent / "robustness.png").is_file() and (path.parent / "extrapolation.png").is_file()
    det_run = next((tmp_path / "runs" / "shapes-det").rglob("results.json")).parent
    assert main(["eval", "--run", str(det_run), "--resolutions", "40"]) == 0  # bench eval: mAP at another size
    r = json.loads((det_run / "results.json").read_text())
    assert [row["resolution"] for row in r["extrapolation"]] == ["40"] and r["extrapolation"][0]["metric"] == "map"
    assert r["extrapolation"][0]["n_tokens"] == 25 and r["provenance"][-1]["replaced"] is not None
    assert main(["run", "--dataset", "primitives-scene", "--analyses", "alpha", "--pe", "sincos",
                 "--out", str(tmp_path / "r2")]) == 2
    assert "does not apply to --task segmentation" in capsys.readouterr().err

"""3-D scene semantic segmentation (issue #15): the mIoU metric, the scene tokenizer, the ScanNet
reader on fixtures in its real formats (binary PLY with the NYU40 ``label`` field, written with
plyfile; Pointcept's preprocessed ``.npy`` folders), the embedded ``primitives-scene`` set, and tiny
``--fast-dev-run`` runs for every PE that applies to points.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from pebench.datamodules.scenes.scene_common import IGNORE_INDEX, grid_sample, scene_collate
from pebench.models.scene_tokenizer import fps_knn_patches, knn_interpolate, serialize_patches
from pebench.tasks.segmentation.miou import SegmentationMetrics, iou_from_confusion


# ------------------------------------------------------------------------------------------ metric
def test_hand_computed_confusion_and_torchmetrics_jaccard():
    from torchmetrics.classification import MulticlassJaccardIndex

    #             class:  0  0  1  1  2  ign ign
    target = torch.tensor([0, 0, 1, 1, 2, -1, -1])
    preds = torch.tensor([0, 1, 1, 1, 0, 2, 3])
    # confusion (rows target): t0 -> p0, p1; t1 -> p1, p1; t2 -> p0; the two ignored points count nowhere
    m = SegmentationMetrics(4, ignore_index=-1, class_names=["a", "b", "c", "d"])
    m.update(preds, target)
    s = m.summary()
    # IoU_0 = 1 / (1 + FN 1 + FP 1) ; IoU_1 = 2 / (2 + FP 1) ; IoU_2 = 0 / (FN 1) ; class 3: absent
    assert s["iou_per_class"] == pytest.approx({"a": 1 / 3, "b": 2 / 3, "c": 0.0, "d": None})
    assert s["miou"] == pytest.approx((1 / 3 + 2 / 3 + 0) / 3)  # mean over the classes present
    assert s["oacc"] == pytest.approx(3 / 5) and s["support_per_class"] == {"a": 2, "b": 2, "c": 1, "d": 0}
    ref = MulticlassJaccardIndex(4, average="macro", ignore_index=-1)(preds, target)
    assert float(m.compute()["miou"]) == pytest.approx(float(ref))
    per = MulticlassJaccardIndex(4, average="none", ignore_index=-1)(preds, target)
    assert per[:3].tolist() == pytest.approx([1 / 3, 2 / 3, 0.0])
    # logits in, (B, M) padded targets: same state
    m2 = SegmentationMetrics(4)
    m2.update(torch.nn.functional.one_hot(preds, 4).float().view(1, 7, 4), target.view(1, 7))
    assert torch.equal(m2.confmat, m.confmat)
    assert iou_from_confusion(torch.eye(3) * 5)["miou"] == 1.0


# ---------------------------------------------------------------------------------------- tokenizer
def test_grid_sample_serialization_and_interpolation():
    rng = np.random.default_rng(0)
    pts = rng.uniform(0, 1, (500, 3)).astype(np.float32)
    keep = grid_sample(pts, 0.25)
    vox = np.floor((pts[keep] - pts.min(0)) / 0.25)
    assert len({tuple(v) for v in vox}) == len(keep) == len({tuple(v) for v in np.floor((pts - pts.min(0)) / 0.25)})
    assert keep[0] == 0  # evaluation: the first point of each voxel
    # a padded batch of 2 scenes (70 and 45 points): each real point lands in exactly one patch
    coord = torch.zeros(2, 70, 3)
    coord[0] = torch.rand(70, 3)
    coord[1, :45] = torch.rand(45, 3) * 3
    mask = torch.arange(70).unsqueeze(0) < torch.tensor([[70], [45]])
    idx, pmask = serialize_patches(coord, mask, k=16, cell=0.1)
    assert idx.shape == (2, 5, 16)
    for b, n in ((0, 70), (1, 45)):
        assert sorted(idx[b][pmask[b]].tolist()) == list(range(n))
    assert pmask.any(-1).sum(1).tolist() == [5, 3]
    idx, pmask, tmask = fps_knn_patches(coord, mask, k=16)
    assert tmask.sum(1).tolist() == [5, 3] and bool((idx[1][pmask[1]] < 45).all())
    # interpolation = inverse squared-distance weights over the k nearest real sources
    x = torch.randn(2, 5, 4)
    pos_x = torch.rand(2, 5, 3)
    mask_x = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    pos_y = torch.rand(2, 7, 3)
    out = knn_interpolate(x, pos_x, mask_x, pos_y, torch.ones(2, 7, dtype=torch.bool), k=2, use_pyg=False)
    for b in range(2):
        for j in range(7):
            n = int(mask_x[b].sum())
            d2 = ((pos_x[b, :n] - pos_y[b, j]) ** 2).sum(-1)
            nn_ = d2.topk(2, largest=False).indices
            w = 1 / d2[nn_]
            assert torch.allclose(out[b, j], (x[b, nn_] * w[:, None]).sum(0) / w.sum(), atol=1e-5)


def test_rpi_permutes_only_real_tokens():
    from pebench.models.tokenizers import TokenBatch
    from pebench.tasks.segmentation import SegmentationTask

    x = torch.arange(2 * 4, dtype=torch.float32).view(2, 4, 1)
    mask = torch.tensor([[True] * 4, [True, True, False, False]])
    tb = SegmentationTask.permute_content(TokenBatch(x, torch.zeros(2, 4, 3), None, mask), torch.tensor([3, 1, 0, 2]))
    assert tb.x[0, :, 0].tolist() == [3, 1, 0, 2]
    assert tb.x[1, :, 0].tolist() == [5, 4, 6, 7]  # scene 1 uses (1, 0), padding stays


# -------------------------------------------------------------------------------------- fixtures
NYU = np.array([1, 2, 39, 13, 5, 0])  # wall, floor, otherfurniture, (13: not a benchmark class), chair, unlabelled
S20 = np.array([0, 1, 19, -1, 4, -1])


def _write_raw_scannet(root, scenes=("scene0000_00", "scene0001_00"), val=("scene0002_00",)):
    from plyfile import PlyData, PlyElement

    rng = np.random.default_rng(1)
    for name in (*scenes, *val):
        d = root / "scans" / name
        d.mkdir(parents=True)
        n = 60
        xyz = rng.uniform(0, 3, (n, 3)).astype(np.float32)
        rgb = rng.integers(0, 256, (n, 3)).astype(np.uint8)
        label = NYU[np.arange(n) % len(NYU)].astype(np.uint16)
        faces = np.array([(np.array([i, i + 1, i + 2], dtype=np.int32),) for i in range(n - 2)],
                         dtype=[("vertex_indices", "i4", (3,))])
        vdt = [("x", "f4"), ("y", "f4"), ("z", "f4"), ("red", "u1"), ("green", "u1"), ("blue", "u1"), ("alpha", "u1")]
        v = np.array([(*p, *c, 255) for p, c in zip(xyz, rgb)], dtype=vdt)
        PlyData([PlyElement.describe(v, "vertex"), PlyElement.describe(faces, "face")], text=False,
                byte_order="<").write(str(d / f"{name}_vh_clean_2.ply"))
        lv = np.array([(*p, *c, 255, lab) for p, c, lab in zip(xyz, rgb, label)], dtype=vdt + [("label", "u2")])
        PlyData([PlyElement.describe(lv, "vertex"), PlyElement.describe(faces, "face")], text=False,
                byte_order="<").write(str(d / f"{name}_vh_clean_2.labels.ply"))
    (root / "scannetv2_train.txt").write_text("\n".join(scenes) + "\n")
    (root / "scannetv2_val.txt").write_text("\n".join(val) + "\n")


def _write_preprocessed(root, n_scenes=2):
    rng = np.random.default_rng(2)
    for split in ("train", "val"):
        for i in range(n_scenes):
            d = root / split / f"scene{i:04d}_00"
            d.mkdir(parents=True)
            n = 80 + 10 * i
            seg = (np.arange(n) % 21 - 1).astype(np.int16)  # -1 .. 19
            np.save(d / "coord.npy", rng.uniform(0, 4, (n, 3)).astype(np.float32))
            # the colour's red channel carries the label (for the perfect-prediction test)
            color = np.stack([np.clip(seg, 0, 255), rng.integers(0, 256, n), rng.integers(0, 256, n)], 1)
            np.save(d / "color.npy", color.astype(np.uint8))
            nrm = rng.standard_normal((n, 3))
            np.save(d / "normal.npy", (nrm / np.linalg.norm(nrm, axis=1, keepdims=True)).astype(np.float32))
            np.save(d / "segment20.npy", seg)


def test_scannet_raw_ply_labels_and_corrupt_scene(tmp_path):
    from pebench.datamodules import build_datamodule

    _write_raw_scannet(tmp_path)
    dm = build_datamodule("scannet", data_root=str(tmp_path), batch_size=2, grid_size=0.0)
    assert dm.layout == "raw" and dm.num_classes == 20 and dm.feat_dim == 6 and dm.default_task == "segmentation"
    coord, feat, target = dm.val_dataset()[0]
    assert coord.shape == (60, 3) and feat.shape == (60, 6)
    assert target.tolist() == S20[np.arange(60) % 6].tolist()  # NYU40 -> 20 classes, others ignored
    assert np.allclose(np.linalg.norm(feat[1:-1, 3:], axis=1), 1.0, atol=1e-5)  # face normals
    # a truncated mesh is skipped and counted, not fatal
    bad = tmp_path / "scans" / "scene0001_00" / "scene0001_00_vh_clean_2.ply"
    bad.write_bytes(bad.read_bytes()[:300])
    ds = dm.train_dataset()
    inputs, tgt, info = scene_collate([ds[0], ds[1]])
    assert info == {"skipped": 1} and inputs["coord"].shape[0] == 1


def test_scannet_preprocessed_collate_and_perfect_predictions_give_miou_1(tmp_path):
    import lightning as L

    from pebench.datamodules import build_datamodule
    from pebench.tasks.segmentation import SegmentationTask

    _write_preprocessed(tmp_path)
    dm = build_datamodule("scannet", data_root=str(tmp_path), batch_size=2, grid_size=0.0)
    assert dm.layout == "preprocessed"
    inputs, target, info = next(iter(dm.val_dataloader()))
    assert inputs["coord"].shape == (2, 90, 3) and inputs["feat"].shape == (2, 90, 6) and info["skipped"] == 0
    assert inputs["mask"].sum(1).tolist() == [80, 90] and bool((target[0, 80:] == IGNORE_INDEX).all())

    class Oracle(SegmentationTask):
        def forward(self, inputs, content_perm=None):  # the label, read back from the red channel
            lab = (inputs["feat"][..., 0] * 255).round().long().clamp(0, 19)
            return torch.nn.functional.one_hot(lab, 20).float()

    task = Oracle(num_classes=20, feat_dim=6, class_names=dm.class_names, grid_size=0.02, patch_size=8)
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False)
    res = trainer.validate(task, datamodule=dm, verbose=False)[0]
    assert res["val/miou"] == 1.0 and res["val/oacc"] == 1.0
    # label 0 at indices 1, 22, 43, 64 (+ 85 in the 90-point scene); -1 and padding not counted
    assert task.last_summary["val"]["support_per_class"]["wall"] == 4 + 5


def test_primitives_scene_written_in_scannet_layout_atomically(tmp_path, monkeypatch):
    from pebench.datamodules import build_datamodule

    monkeypatch.setenv("PEBENCH_CACHE", str(tmp_path))
    dm = build_datamodule("primitives-scene", train_size=3, val_size=2, batch_size=2)
    ds = dm.val_dataset()
    assert dm.layout == "preprocessed" and len(ds) == 2 and len(dm.train_dataset()) == 3
    scene = os.path.join(dm.data_root, "val", "scene00000")
    assert sorted(os.listdir(scene)) == ["color.npy", "coord.npy", "normal.npy", "segment20.npy"]
    assert not [p for p in os.listdir(os.path.dirname(dm.data_root)) if p.startswith(".tmp")]
    c1, f1, t1 = ds[0]
    again = build_datamodule("primitives-scene", train_size=3, val_size=2).val_dataset()[0]
    assert np.array_equal(c1, again[0]) and np.array_equal(t1, again[2])  # deterministic
    assert set(np.unique(t1)) == {0, 1, 2, 3, 4} or set(np.unique(t1)) >= {0, 1}
    assert f1.shape[1] == dm.feat_dim == 3 and coord_unit_ok(dm)


def coord_unit_ok(dm) -> bool:
    return dm.coord_unit == "m" and dm.ignore_index == -1 and dm.label_kind == "point-labels"


# ------------------------------------------------------------------------------------------ runs
def test_fast_dev_run_every_point_pe_on_primitives_scene(tmp_path, monkeypatch):
    from pebench.encodings import get_pe_class, list_pes
    from pebench.runner.config import RunConfig
    from pebench.runner.run import run

    monkeypatch.setenv("PEBENCH_CACHE", str(tmp_path / "cache"))
    pes = [p for p in list_pes() if "points" in get_pe_class(p).modalities]
    assert {"pape", "sincos", "rope-axial", "ape", "none"} <= set(pes) and "lookhere" not in pes
    for pe in pes:
        # pape: geometry on 4 probe scenes in 2 batches whose padded token counts differ (the RPI
        # permutation's length must follow each batch)
        extra = {"analyses": "geometry", "analysis_options": {"probe_size": 4, "rpi_permutations": 1}} \
            if pe == "pape" else {"analyses": "none"}
        cfg = RunConfig(dataset="primitives-scene", pe=pe, fast_dev_run=True, batch_size=2, progress_bar=False,
                        out=str(tmp_path / "runs"), data={"train_size": 2, "val_size": 4, "density": 20.0}, accelerator="cpu",
                        task_options={"patching": "fps"} if pe == "sincos" else {}, **extra)
        res = run(cfg)
        assert res["status"] == "complete", (pe, res.get("analysis_errors"))
        assert res["task"] == "segmentation" and res["primary_metric"] == "val/miou"
        assert 0.0 <= res["metrics"]["val/miou"] <= 1.0 and "val/oacc" in res["metrics"]
        assert res["segmentation"]["coord_unit"] == "m" and set(res["segmentation"]["val_iou_per_class"]) == {
            "floor", "wall", "box", "cylinder", "sphere"}
        if pe == "pape":
            g = res["geometry"]
            assert g["distance"] == "euclidean" and len(g["ssdc"]) == 4 and g["probe_size"] == 4
            assert all(v is not None for v in g["ssdc_rpi"])


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("GPU available", "TPU available"))]
    assert len(lines) == 1 and lines[0].startswith("bench: error: ") and "Traceback" not in err, err
    return lines[0]


def test_bad_layout_and_inapplicable_options_exit_2_with_one_line(tmp_path, capsys):
    from pebench.cli import main

    (tmp_path / "empty").mkdir()
    out = str(tmp_path / "r")
    assert main(["run", "--dataset", "scannet", "--data-root", str(tmp_path / "empty"), "--out", out]) == 2
    line = _one_error_line(capsys)
    assert line.startswith("bench: error: scannet:") and "scans" in line and "segment20" in line
    assert main(["run", "--dataset", "primitives-scene", "--analyses", "alpha", "--pe", "sincos", "--out", out]) == 2
    assert "does not apply to --task segmentation" in _one_error_line(capsys)
    assert main(["run", "--dataset", "primitives-scene", "--task-option", "patching=hilbert", "--out", out]) == 2
    assert "patching" in _one_error_line(capsys)
    assert not (tmp_path / "r").exists()

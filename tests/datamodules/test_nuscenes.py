"""nuScenes-lidarseg through nuscenes-devkit on the tiny database of ``fixtures_nuscenes.py``.

Checked against the files themselves (numpy reads, not the devkit): points, intensity and the
fine -> 16-class mapping with ``ignore`` -> -1; the devkit's splits; multi-sweep input (more points
in the keyframe's lidar frame, labels for the keyframe only, the time-lag channel); the default
pipeline (grid sampling that keeps keyframe points, range crop, seeded augmentation). The devkit's
official lidarseg evaluation equals torchmetrics' Jaccard index and the task's metric on the same
predictions (1.0 for perfect ones); bad roots are one ``DataRootError`` line (exit code 2 through
the CLI); damaged scans are skipped and counted; ``bench run --fast-dev-run`` trains on the fixture.
"""
from __future__ import annotations

import fixtures_nuscenes as FX  # noqa: E402
import numpy as np
import pytest
import torch
from pyquaternion import Quaternion

from pebench.datamodules import DataRootError, build_datamodule  # noqa: E402
from pebench.datamodules.scenes import nuscenes as N  # noqa: E402
from pebench.tasks.segmentation.miou import SegmentationMetrics  # noqa: E402

#: fine class name -> the lidarseg challenge class (None = ignore), written out by hand from the
#: challenge's definition so the devkit's mapper is checked, not trusted
CHALLENGE = {
    "human.pedestrian.adult": "pedestrian", "human.pedestrian.child": "pedestrian",
    "human.pedestrian.police_officer": "pedestrian", "human.pedestrian.construction_worker": "pedestrian",
    "vehicle.car": "car", "vehicle.motorcycle": "motorcycle", "vehicle.bicycle": "bicycle",
    "vehicle.bus.bendy": "bus", "vehicle.bus.rigid": "bus", "vehicle.truck": "truck",
    "vehicle.construction": "construction_vehicle", "vehicle.trailer": "trailer",
    "movable_object.barrier": "barrier", "movable_object.trafficcone": "traffic_cone",
    "flat.driveable_surface": "driveable_surface", "flat.sidewalk": "sidewalk", "flat.terrain": "terrain",
    "flat.other": "other_flat", "static.manmade": "manmade", "static.vegetation": "vegetation",
}


def _expected_target(fine: np.ndarray) -> np.ndarray:
    names = [FX.FINE_CLASSES[i] for i in fine]
    return np.array([N.CLASS_NAMES.index(CHALLENGE[n]) if n in CHALLENGE else -1 for n in names], dtype=np.int64)


@pytest.fixture()
def db(tmp_path):
    return FX.nuscenes_db(tmp_path / "nuscenes")


def _dm(fx, **kw):
    """Every point of a scan, in file order (``grid_size=0``; the resolution is above the scan size)."""
    return build_datamodule("nuscenes", data_root=str(fx.root), batch_size=2, **{"grid_size": 0, **kw})


def test_database_loads_through_devkit_with_its_splits(db):
    dm = _dm(db)
    assert dm.version == "v1.0-mini" and len(dm.nusc.lidarseg) == len(db.keyframes) == 5
    assert dm.num_classes == 16 and dm.ignore_index == -1 and dm.feat_dim == 1 and dm.coord_unit == "m"
    assert dm.default_task == "segmentation" and dm.label_kind == "point-labels" and dm.modality == "points"
    train, val = dm.train_dataset(), dm.val_dataset()
    scene_of = {sd: scene for sd, (_, _, scene) in db.keyframes.items()}
    assert {scene_of[s.sd_token] for s in train.scans} == {"scene-0061"}            # mini_train
    assert {scene_of[s.sd_token] for s in val.scans} == {"scene-0103", "scene-0916"}  # mini_val
    assert len(train) == 2 and len(val) == 3


def test_points_and_labels_round_trip(db):
    dm = _dm(db)
    ds = dm.val_dataset()
    ignored = 0
    for i, scan in enumerate(ds.scans):
        pts, fine, _ = db.keyframes[scan.sd_token]
        coord, feat, target = ds[i]
        assert np.array_equal(coord, pts[:, :3])                                     # metres, file order
        assert np.allclose(feat[:, 0], pts[:, 3] / 255.0) and feat.dtype == np.float32
        assert np.array_equal(target, _expected_target(fine)) and target.dtype == np.int64
        ignored += int((target == -1).sum())
    assert ignored > 0  # the fixture's labels include ignored fine classes (noise, animal, vehicle.ego, ...)
    # the lookup table equals the devkit's own element-wise convert_label
    from nuscenes.eval.lidarseg.utils import LidarsegClassMapper

    fine = np.arange(len(FX.FINE_CLASSES), dtype=np.uint8)
    assert np.array_equal(dm.lut[fine], LidarsegClassMapper(dm.nusc).convert_label(fine) - 1)
    # a batch: padded to the longest scan, padding masked and ignored
    inputs, targets, info = next(iter(dm.val_dataloader()))
    lengths = [len(db.keyframes[s.sd_token][0]) for s in ds.scans[:2]]
    assert inputs["coord"].shape == (2, max(lengths), 3) and inputs["feat"].shape == (2, max(lengths), 1)
    assert inputs["mask"].sum(1).tolist() == lengths and info == {"skipped": 0}
    assert targets.dtype == torch.int64 and (targets[~inputs["mask"]] == -1).all()


def test_multisweep_adds_unlabelled_points_with_time_lag(db):
    dm = _dm(db, sweeps=3)
    assert dm.feat_dim == 2
    ds = dm.val_dataset()
    # a keyframe return inside the ego car's 1 m radius stays (only earlier sweeps are filtered)
    pts, fine, _ = db.keyframes[ds.scans[0].sd_token]
    pts[0, :2] = (0.3, -0.2)
    pts.tofile(db.point_file(ds.scans[0].sd_token))
    for i, scan in enumerate(ds.scans):
        pts, fine, _ = db.keyframes[scan.sd_token]
        n = len(pts)
        coord, feat, target = ds[i]
        assert len(coord) == n + db.sweep_points[scan.sd_token] > n
        assert np.array_equal(coord[:n], pts[:, :3])
        assert np.array_equal(target[:n], _expected_target(fine)) and (target[n:] == -1).all()
        lag = feat[:, 1]
        assert (lag[:n] == 0).all() and np.allclose(np.unique(lag[n:]), [0.05, 0.10])
        # the previous sweep lies in the keyframe's lidar frame: the same extrinsics and ego rotation, the
        # ego 0.5 m further back along global x, so every point moves by R_lidar^T R_ego^T (-0.5, 0, 0)
        prev = dm.nusc.get("sample_data", dm.nusc.get("sample_data", scan.sd_token)["prev"])
        raw = np.fromfile(db.root / prev["filename"], dtype=np.float32).reshape(-1, 5)
        shift = (Quaternion(FX.LIDAR_ROTATION).rotation_matrix.T @ Quaternion(FX.EGO_ROTATION).rotation_matrix.T
                 @ np.array([-0.5, 0.0, 0.0]))
        assert np.allclose(coord[n:n + len(raw)] - raw[:, :3], shift, atol=1e-4)
    assert dm.train_dataset()[0][1].shape[1] == 2


def _random_predictions(ds, rng, perfect: bool = False) -> tuple[dict[str, np.ndarray], torch.Tensor, torch.Tensor]:
    preds, flat_p, flat_t = {}, [], []
    for i, scan in enumerate(ds.scans):
        _, _, target = ds[i]
        p = target.copy() if perfect else rng.integers(0, 16, len(target))
        if perfect:  # the challenge format has no 'ignore' prediction: any class on ignored points
            p[p < 0] = rng.integers(0, 16, int((p < 0).sum()))
        preds[scan.sd_token] = p
        flat_p.append(torch.from_numpy(p))
        flat_t.append(torch.from_numpy(target))
    return preds, torch.cat(flat_p), torch.cat(flat_t)


def test_devkit_lidarseg_eval_equals_torchmetrics_jaccard(db, tmp_path):
    """The official ``LidarSegEval`` (its ConfusionMatrix with 'ignore' row and column zeroed, nanmean
    over classes) and ``MulticlassJaccardIndex(average="macro", ignore_index=-1)`` agree: predictions
    are 1..16 in the devkit, so its zeroed 'ignore' column removes nothing beyond the ignored targets,
    and both leave out a class absent from targets and predictions (devkit: IoU nan, skipped by
    nanmean; torchmetrics: weight 0)."""
    from torchmetrics.classification import MulticlassJaccardIndex

    dm = _dm(db)
    ds = dm.val_dataset()
    rng = np.random.default_rng(0)
    for case in ("random", "perfect"):
        preds, p, t = _random_predictions(ds, rng, perfect=case == "perfect")
        out = tmp_path / case
        N.write_lidarseg_predictions(preds, str(out), "mini_val")
        official = N.devkit_lidarseg_eval(dm.nusc, str(out), "mini_val")
        jaccard = MulticlassJaccardIndex(num_classes=16, ignore_index=-1, average="macro")(p, t)
        ours = SegmentationMetrics(16, ignore_index=-1, class_names=N.CLASS_NAMES)  # what the task logs
        ours.update(p, t)
        assert official["miou"] == pytest.approx(float(jaccard), abs=1e-6), case
        assert float(ours.compute()["miou"]) == pytest.approx(official["miou"], abs=1e-6), case
        per_class = ours.summary()["iou_per_class"]  # None where the devkit has nan (absent from both)
        devkit = {n: None if np.isnan(v) else pytest.approx(v, abs=1e-6) for n, v in official["iou_per_class"].items()}
        assert per_class == {n: devkit[n] for n in N.CLASS_NAMES}, case
        if case == "perfect":
            assert official["miou"] == pytest.approx(1.0) and float(jaccard) == pytest.approx(1.0)
        else:
            assert 0.0 < official["miou"] < 0.2


def test_devkit_confusion_and_jaccard_on_absent_and_false_positive_classes():
    """Hand-made confusion: class 5 absent from both (left out by both), class 7 only predicted (IoU 0 in
    both), ignored targets dropped."""
    from nuscenes.eval.lidarseg.utils import ConfusionMatrix
    from torchmetrics.classification import MulticlassJaccardIndex

    t = np.array([0, 0, 1, 1, 2, 2, -1, -1, 3])
    p = np.array([0, 1, 1, 1, 2, 7, 5, 9, 3])
    cm = ConfusionMatrix(17, ignore_idx=0)
    cm.update(t + 1, p + 1)            # devkit indices: 0 = ignore, classes 1..16
    iou = cm.get_per_class_iou()[1:]
    # class 0: 1/2; class 1: 2/3; class 2: 1/2; class 3: 1; class 7: 0 (false positive only); others absent
    assert np.allclose(iou[[0, 1, 2, 3, 7]], [0.5, 2 / 3, 0.5, 1.0, 0.0]) and np.isnan(iou[[4, 5, 6, 8]]).all()
    expected = (0.5 + 2 / 3 + 0.5 + 1.0 + 0.0) / 5
    jaccard = MulticlassJaccardIndex(num_classes=16, ignore_index=-1, average="macro")(
        torch.from_numpy(p), torch.from_numpy(t))
    assert cm.get_mean_iou() == pytest.approx(expected) and float(jaccard) == pytest.approx(expected)


@pytest.mark.parametrize("damage", ["missing_table", "wrong_version", "no_labels", "bad_json", "test_version"])
def test_bad_roots_are_one_line_data_root_errors(tmp_path, damage):
    fx = FX.nuscenes_db(tmp_path / "nuscenes")
    tables = fx.root / fx.version
    kw, expect = {}, None
    if damage == "missing_table":
        (tables / "sample_data.json").unlink()
        expect = "sample_data.json"
    elif damage == "wrong_version":
        kw, expect = {"version": "v1.0-trainval"}, "v1.0-trainval"
    elif damage == "no_labels":
        (tables / "lidarseg.json").unlink()
        expect = "lidarseg"
    elif damage == "bad_json":
        (tables / "scene.json").write_text("[{")
        expect = "cannot load"
    else:
        kw, expect = {"version": "v1.0-test"}, "no public lidarseg labels"
    with pytest.raises(DataRootError) as e:
        _dm(fx, **kw)
    msg = str(e.value)
    assert expect in msg and "\n" not in msg, msg


def test_truncated_scans_are_skipped_and_counted(db):
    dm = _dm(db)
    scans = dm.val_dataset().scans
    FX.truncate(db.point_file(scans[0].sd_token), 20 * 7 + 4)   # 36 floats: not whole rows of 5
    FX.truncate(db.point_file(scans[2].sd_token), 20 * 7)       # whole rows, fewer points than labels
    skipped, kept = 0, 0
    for inputs, _targets, info in dm.val_dataloader():
        skipped += info["skipped"]
        kept += inputs["coord"].shape[0]
    assert skipped == 2 and kept == 1


def test_default_pipeline_grid_sampling_crop_and_augmentation(db):
    """Defaults (0.05 m grid, augmentation): evaluation keeps the first point per voxel (keyframe points,
    the labelled ones, win over sweeps); max_range crops around the sensor; training scans are
    augmented, capped at the resolution and reproducible under torch's seed."""
    dm = build_datamodule("nuscenes", data_root=str(db.root), batch_size=2, sweeps=3, grid_size=8.0)
    ds = dm.val_dataset()
    full = _dm(db, sweeps=3).val_dataset()
    for i in range(len(ds)):
        allc, allf, _ = full[i]
        coord, feat, target = ds[i]
        vox = np.floor((allc - allc.min(0)) / 8.0).astype(np.int64)
        key_voxels = {tuple(v) for v in vox[allf[:, 1] == 0]}
        assert len(coord) == len({tuple(v) for v in vox}) < len(allc)
        assert int((feat[:, 1] == 0).sum()) == len(key_voxels)   # one keyframe point per voxel that has one
    crop = _dm(db, max_range=10.0).val_dataset()
    for i, scan in enumerate(crop.scans):
        pts = db.keyframes[scan.sd_token][0]
        coord = crop[i][0]
        assert np.array_equal(coord, pts[np.hypot(pts[:, 0], pts[:, 1]) <= 10.0, :3])
    train = build_datamodule("nuscenes", data_root=str(db.root), batch_size=2, resolution=24).train_dataset()
    torch.manual_seed(0)
    first = train[0]
    torch.manual_seed(0)
    again = train[0]
    pts = db.keyframes[train.scans[0].sd_token][0]
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    coord, feat, target = first
    assert len(coord) == len(feat) == len(target) == 24 < len(pts)
    assert not np.isin(coord[:, 0], pts[:, 0]).all()                 # rotated / scaled / jittered
    assert np.isin(feat[:, 0], pts[:, 3] / 255.0).all() and ((target >= -1) & (target < 16)).all()


@pytest.mark.slow
def test_cli_fast_dev_run_and_bad_version_exit_code(db, tmp_path, capsys):
    """``bench run --dataset nuscenes`` trains the segmentation task on the fixture (a truncated validation
    scan is skipped and counted in ``results.json``); a wrong version is one ``bench: error`` line with
    exit code 2 and creates nothing."""
    import json

    from pebench.cli import main

    first_val = _dm(db).val_dataset().scans[0]
    FX.truncate(db.point_file(first_val.sd_token), 20 * 5)
    out = tmp_path / "runs"
    rc = main(["run", "--preset", "nuscenes-smoke", "--data-root", str(db.root), "--pe", "pape", "--fast-dev-run",
               "--out", str(out), "--no-progress-bar", "--accelerator", "cpu", "--max-skipped-fraction", "0.9"])
    assert rc in (0, None)
    res = json.loads(next(out.glob("nuscenes/pape/*/seed0/results.json")).read_text())
    assert res["task"] == "segmentation" and res["primary_metric"] == "val/miou" and res["status"] == "complete"
    skipped = res["skipped_samples"]  # counted each time the scan is read (validation runs twice here)
    assert skipped["by_reason"]["corrupt"] >= 1 and skipped["fraction"]["val"] > 0
    assert 0.0 <= res["metrics"]["val/miou"] <= 1.0
    seg = res["segmentation"]
    assert seg["class_names"] == list(N.CLASS_NAMES) and seg["coord_unit"] == "m" and seg["ignore_index"] == -1
    assert seg["tokenizer"]["patch_size"] == 32 and seg["tokenizer"]["grid_size_m"] == 0.05
    capsys.readouterr()
    bad = tmp_path / "bad"
    rc = main(["run", "--dataset", "nuscenes", "--data-root", str(db.root), "--data-option", "version=v1.0-trainval",
               "--out", str(bad)])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and len(err) == 1 and err[0].startswith("bench: error: nuscenes: table folder") and not bad.exists()

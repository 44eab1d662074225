"""2-D detection (``--task detection``): box formats at every boundary, COCO mAP through the whole
pipeline (loader -> model output format -> evaluator, original frame) against pycocotools called
directly, the ``coco`` reader on a fixture in the official layout (crowd box, unused category ids,
images of several sizes, a corrupt JPEG), ``shapes-det`` fast-dev-runs for the PE families, and
the user mistakes that exit 2."""
from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from pebench.cli import main
from pebench.datamodules import build_datamodule
from pebench.datamodules.detection_common import to_original_frame, xywh_to_xyxy, xyxy_to_xywh

#: fixture categories: ids with gaps, id 5 listed but never annotated
CATS = [{"id": 1, "name": "a"}, {"id": 5, "name": "unused"}, {"id": 90, "name": "b"}]
#: (width, height, [(category id, [x, y, w, h], iscrowd)]) per validation image
VAL_IMAGES = [
    (80, 60, [(1, [10.0, 12.0, 30.0, 20.0], 0), (90, [50.0, 5.0, 25.0, 40.0], 0), (1, [2.0, 40.0, 20.0, 15.0], 1)]),
    (50, 90, [(90, [5.0, 5.0, 10.0, 10.0], 0), (1, [20.5, 30.25, 24.0, 50.0], 0)]),
    (64, 64, []),  # no annotation: only false positives count
    (120, 40, [(90, [0.0, 0.0, 119.0, 39.0], 0)]),
]


def _jpeg(path: Path, w: int, h: int, seed: int) -> None:
    from PIL import Image

    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 255, size=(h, w, 3), dtype=np.uint8)).save(path, quality=90)


def write_coco(root: Path, corrupt: bool = False) -> Path:
    """A tiny COCO 2017 tree in the official layout (train = val images, relabelled ids)."""
    (root / "annotations").mkdir(parents=True)
    for split, offset in (("train2017", 100), ("val2017", 0)):
        (root / split).mkdir()
        images, anns = [], []
        for k, (w, h, objs) in enumerate(VAL_IMAGES):
            iid = offset + k + 1
            name = f"{iid:012d}.jpg"
            _jpeg(root / split / name, w, h, iid)
            images.append({"id": iid, "width": w, "height": h, "file_name": name})
            for cat, box, crowd in objs:
                anns.append({"id": len(anns) + 1 + offset, "image_id": iid, "category_id": cat, "bbox": box,
                             "area": box[2] * box[3], "iscrowd": crowd})
        if corrupt and split == "val2017":  # a fifth image whose JPEG is truncated
            iid = 5
            _jpeg(root / split / f"{iid:012d}.jpg", 40, 40, iid)
            data = (root / split / f"{iid:012d}.jpg").read_bytes()
            (root / split / f"{iid:012d}.jpg").write_bytes(data[: len(data) // 3])
            images.append({"id": iid, "width": 40, "height": 40, "file_name": f"{iid:012d}.jpg"})
            anns.append({"id": 999, "image_id": iid, "category_id": 1, "bbox": [1.0, 1.0, 10.0, 10.0], "area": 100.0,
                         "iscrowd": 0})
        (root / "annotations" / f"instances_{split}.json").write_text(
            json.dumps({"images": images, "annotations": anns, "categories": CATS}))
    return root


@pytest.fixture
def coco_root(tmp_path):
    return write_coco(tmp_path / "coco")


def _val_batches(dm, resolution=None):
    loader = torch.utils.data.DataLoader(dm.val_dataset(resolution), batch_size=3, shuffle=False,
                                         collate_fn=dm.val_dataset(resolution).collate_fn)
    return list(loader)


def _gt_xywh(coco, image_id):
    return {a["id"]: a["bbox"] for a in coco.imgToAnns[image_id] if not a["iscrowd"]}


# ------------------------------------------------------------------ box formats
def test_xywh_xyxy_round_trip():
    xywh = torch.tensor([[1.5, 2.0, 3.0, 4.25], [0.0, 0.0, 10.0, 1.0]])
    xyxy = xywh_to_xyxy(xywh)
    assert xyxy.tolist() == [[1.5, 2.0, 4.5, 6.25], [0.0, 0.0, 10.0, 1.0]]
    assert torch.equal(xyxy_to_xywh(xyxy), xywh)


def test_loader_boxes_map_back_to_the_file(coco_root):
    """COCO xywh in the file -> xyxy in the padded input frame (the model's) -> original frame -> xywh."""
    dm = build_datamodule("coco", data_root=str(coco_root), resolution=64)
    assert dm.label_to_category_id == [1, 5, 90] and dm.num_classes == 3
    coco = dm.coco_gt("val")
    seen = 0
    for inputs, targets, info in _val_batches(dm):
        assert inputs.shape[1:] == (3, 64, 64) and info["skipped"] == 0
        for t in targets:
            h, w = t["orig_size"]
            assert t["scale"] == pytest.approx(64 / max(h, w))
            back = xyxy_to_xywh(to_original_frame(t["boxes"], t)).tolist()
            want = [a["bbox"] for a in coco.imgToAnns[t["image_id"]] if not a["iscrowd"]]
            assert len(back) == len(want)  # the crowd box is not a training target
            for b, g in zip(back, want):
                assert b == pytest.approx(g, abs=1e-3)
            labels = [dm.label_to_category_id[int(l)] for l in t["labels"]]
            assert labels == [a["category_id"] for a in coco.imgToAnns[t["image_id"]] if not a["iscrowd"]]
            # padding at bottom / right only: the content starts at (0, 0)
            assert (t["boxes"][:, 2] <= round(w * t["scale"]) + 1e-4).all()
            seen += 1
    assert seen == len(VAL_IMAGES)


# ------------------------------------------------------------------ mAP through the pipeline
def _detections_from(targets, shift=None):
    """Model-format detections (input frame) equal to the targets; ``shift``: image id -> (index, dx)
    moves that box by dx pixels in the ORIGINAL frame."""
    out = []
    for t in targets:
        boxes = t["boxes"].clone()
        if shift and t["image_id"] in shift:
            i, dx = shift[t["image_id"]]
            sx, _ = t["scale_xy"]
            boxes[i, 0::2] += dx * sx
        out.append({"boxes": boxes, "scores": torch.linspace(0.9, 0.5, len(boxes)), "labels": t["labels"]})
    return out


def _evaluate(dm, shift=None):
    from pebench.tasks.detection.coco_eval import CocoEvaluator

    ev = CocoEvaluator()
    for _, targets, _ in _val_batches(dm):
        ev.update(_detections_from(targets, shift), targets, dm.label_to_category_id)
    return ev.compute(dm.coco_gt("val"))


def test_perfect_predictions_give_ap_one(coco_root):
    dm = build_datamodule("coco", data_root=str(coco_root), resolution=64)
    metrics, n = _evaluate(dm)
    assert n == len(VAL_IMAGES)
    for k in ("map", "map_50", "map_75"):
        assert metrics[k] == pytest.approx(1.0), (k, metrics)
    # areas 100, 600, 1000, 1200 (small), 4641 (medium); no large box -> NaN (COCOeval's -1)
    assert metrics["map_small"] == pytest.approx(1.0) and metrics["map_medium"] == pytest.approx(1.0)
    assert math.isnan(metrics["map_large"])


def test_one_pixel_shift_matches_pycocotools_directly(coco_root):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    dm = build_datamodule("coco", data_root=str(coco_root), resolution=64)
    got, _ = _evaluate(dm, shift={2: (0, 1.0)})  # the 10 x 10 box of image 2, one pixel right
    assert got["map"] < 1.0
    # the same detections written by hand in COCO's result format, evaluated by pycocotools alone
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(coco_root / "annotations" / "instances_val2017.json"))
        res = []
        for iid in sorted(gt.imgs):
            anns = [a for a in gt.imgToAnns[iid] if not a["iscrowd"]]
            for k, a in enumerate(anns):
                x, y, w, h = a["bbox"]
                res.append({"image_id": iid, "category_id": a["category_id"], "score": float(np.linspace(0.9, 0.5, len(anns))[k]),
                            "bbox": [x + (1.0 if (iid, k) == (2, 0) else 0.0), y, w, h]})
        ev = COCOeval(gt, gt.loadRes(res), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    names = ["map", "map_50", "map_75", "map_small", "map_medium", "map_large"]
    for i, k in enumerate(names):
        want = ev.stats[i]
        assert (math.isnan(got[k]) and want == -1) or got[k] == pytest.approx(want, abs=1e-9), (k, got[k], want)


def test_a_detection_on_the_crowd_region_is_not_a_false_positive(coco_root):
    from pebench.tasks.detection.coco_eval import CocoEvaluator

    dm = build_datamodule("coco", data_root=str(coco_root), resolution=64)
    ev = CocoEvaluator()
    for _, targets, _ in _val_batches(dm):
        dets = _detections_from(targets)
        for t, d in zip(targets, dets):
            if t["image_id"] == 1:  # add a low-score detection exactly on the crowd box [2, 40, 20, 15]
                crowd = torch.tensor([[2.0, 40.0, 22.0, 55.0]]) * torch.tensor([*t["scale_xy"], *t["scale_xy"]])
                d["boxes"] = torch.cat([d["boxes"], crowd])
                d["scores"] = torch.cat([d["scores"], torch.tensor([0.99])])
                d["labels"] = torch.cat([d["labels"], torch.tensor([0])])
        ev.update(dets, targets, dm.label_to_category_id)
    assert ev.compute(dm.coco_gt("val"))[0]["map"] == pytest.approx(1.0)


# ------------------------------------------------------------------ model
def test_event_voxels_average_the_time_axis_before_the_pyramid():
    from pebench.tasks.detection import DetectionTask

    torch.manual_seed(0)
    task = DetectionTask(modality="events", num_classes=2, in_chans=2, patch_size=8, tubelet=2, pe="rope-axial",
                         train_grid=(2, 4, 4), fpn_dim=32, head_convs=1).eval()
    x = torch.randn(2, 2, 4, 32, 32)
    fmap = task.token_map(x)
    assert fmap.shape == (2, 128, 4, 4)
    targets = [{"boxes": torch.tensor([[1.0, 2.0, 20.0, 30.0]]), "labels": torch.tensor([1]), "image_id": i,
                "orig_size": (32, 32), "scale": 1.0} for i in range(2)]
    losses, dets = task.losses(x, targets, detect=True)
    assert set(losses) == {"classification", "bbox_regression", "bbox_ctrness"}
    assert all(torch.isfinite(v) for v in losses.values()) and len(dets) == 2


# ------------------------------------------------------------------ end to end
@pytest.fixture(scope="module")
def det_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("shapes-det-cache"))


def _results(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.rglob("results.json"))]


def test_shapes_det_fast_dev_run_every_pe_family(tmp_path, det_cache):
    base = ["run", "--dataset", "shapes-det", "--fast-dev-run", "--resolution", "32", "--batch-size", "4",
            "--data-option", "train_size=4", "--data-option", "val_size=4", "--data-option", "test_size=4",
            "--data-option", f"cache_dir={det_cache}", "--task-option", "fpn_dim=32", "--task-option", "head_convs=1",
            "--accelerator", "cpu", "--no-progress-bar", "--out", str(tmp_path)]
    pes = ["none", "ape", "rope-axial", "pape", "alibi", "lookhere"]
    for pe in pes:
        assert main(base + ["--pe", pe]) == 0, pe
    res = _results(tmp_path)
    assert sorted(r["pe"] for r in res) == sorted(pes)
    for r in res:
        assert r["status"] == "complete" and r["task"] == "detection" and r["primary_metric"] == "val/map"
        assert r["detection_images"] == {"val": 4, "test": 4}
        assert 0.0 <= r["metrics"]["val/map"] <= 1.0 and "test/map" in r["metrics"]


def test_shapes_det_cache_is_deterministic_and_read_by_the_coco_reader(tmp_path, det_cache):
    from pebench.datamodules.images.coco import CocoFormatDataModule

    a = build_datamodule("shapes-det", train_size=3, val_size=2, test_size=2, cache_dir=str(tmp_path / "a"))
    b = build_datamodule("shapes-det", train_size=3, val_size=2, test_size=2, cache_dir=str(tmp_path / "b"))
    assert isinstance(a, CocoFormatDataModule) and a.has_test_split
    for split in ("train", "val", "test"):
        ja = Path(a.ann_file(split)).read_text()
        assert ja == Path(b.ann_file(split)).read_text()
    for p in Path(a.cache_root).rglob("*.jpg"):
        assert p.read_bytes() == (Path(b.cache_root) / p.relative_to(a.cache_root)).read_bytes()
    assert not [p for p in (tmp_path / "a" / "shapes-det").iterdir() if p.name.startswith(".")]  # no temp dir left


def test_coco_fixture_end_to_end_with_geometry_and_a_corrupt_jpeg(tmp_path):
    root = write_coco(tmp_path / "coco", corrupt=True)
    out = tmp_path / "runs"
    rc = main(["run", "--preset", "coco-smoke", "--data-root", str(root), "--fast-dev-run", "--analyses", "geometry", "--analysis-option", "probe_size=4", "--analysis-option", "rpi_permutations=1",
               "--max-skipped-fraction", "0.5", "--accelerator", "cpu", "--no-progress-bar", "--out", str(out)])
    assert rc == 0
    (r,) = _results(out)
    assert r["status"] == "complete"
    assert r["task"] == "detection" and r["primary_metric"] == "val/map"
    assert r["detection_images"] == {"val": len(VAL_IMAGES)}  # the corrupt one is skipped, every other once
    assert r["skipped_samples"]["by_reason"]["corrupt"] >= 1
    assert len(r["geometry"]["ssdc"]) == 4 and r["geometry"]["probe_size"] == 4


def test_corrupt_jpeg_is_skipped_and_counted_in_the_batch(tmp_path):
    root = write_coco(tmp_path / "coco", corrupt=True)
    dm = build_datamodule("coco", data_root=str(root), resolution=32)
    batches = _val_batches(dm)
    assert sum(b[2]["skipped"] for b in batches) == 1
    assert sorted(t["image_id"] for b in batches for t in b[1]) == [1, 2, 3, 4]


@pytest.mark.parametrize("case", ["no_root", "no_annotations", "bad_json"])
def test_bad_coco_layout_exits_2_with_one_line(tmp_path, capsys, case):
    root = tmp_path / "coco"
    if case != "no_root":
        write_coco(root)
        if case == "no_annotations":
            (root / "annotations" / "instances_val2017.json").unlink()
        else:
            (root / "annotations" / "instances_val2017.json").write_text("{not json")
    out = tmp_path / "runs"
    assert main(["run", "--dataset", "coco", "--data-root", str(root), "--out", str(out), "--fast-dev-run",
                 "--accelerator", "cpu", "--no-progress-bar"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench: error:") and "expected layout" in err[0], err
    assert not out.exists() or not any(out.rglob("results.json"))


def test_analyses_that_read_class_logits_are_refused_for_detection(tmp_path, capsys, det_cache):
    # robustness and extrapolation apply (FS on mAP, mAP per size: tests/test_dense_analyses.py); alpha does not
    assert main(["run", "--dataset", "shapes-det", "--analyses", "alpha", "--pe", "sincos", "--fast-dev-run",
                 "--data-option", f"cache_dir={det_cache}", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not apply to --task detection" in err[0], err


def test_leaderboard_detection_table(tmp_path):
    """A detection dataset gets its own table: mAP metrics as percentages, val/map first, the image
    count as a plain number."""
    from pebench.leaderboard import collect_results, render_leaderboard

    for pe, seed, m in (("none", 0, 0.10), ("none", 1, 0.12), ("pape", 0, 0.30), ("pape", 1, 0.34)):
        d = tmp_path / "shapes-det" / pe / "vit-nano" / f"seed{seed}"
        d.mkdir(parents=True)
        (d / "results.json").write_text(json.dumps({
            "dataset": "shapes-det", "pe": pe, "model": "vit-nano", "seed": seed, "task": "detection",
            "status": "complete", "primary_metric": "val/map",
            "metrics": {"val/map": m, "val/map_50": 2 * m, "val/map_images": 128.0, "test/map": m - 0.01}}))
    md = render_leaderboard(*collect_results(tmp_path))
    assert "## shapes-det" in md and "Task: `detection`. Primary metric: `val/map`." in md
    header = next(l for l in md.splitlines() if l.startswith("| Model"))
    assert header.startswith("| Model | PE | n | val/map (%) |") and "val/map_images |" in header
    row = next(l for l in md.splitlines() if l.startswith("| vit-nano | pape"))
    assert "| 32.0 ± 2.8 |" in row and "| 128.0000 ± 0.0000 |" in row


def test_bench_eval_on_a_detection_run_with_a_corrupt_checkpoint_is_one_line_exit_2(tmp_path, capsys):
    # bench eval evaluates detection runs (mAP per size; tests/test_dense_analyses.py); a bad checkpoint is exit 2
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("dataset: shapes-det\ntask: detection\npe: pape\n")
    (run / "last.ckpt").write_bytes(b"")
    (run / "results.json").write_text('{"status": "complete"}')  # bench eval evaluates complete runs only
    assert main(["eval", "--run", str(run), "--resolutions", "96"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "corrupt or incompatible checkpoint" in err[0], err


def _ddp_worker(rank: int, world: int, root: str, port: int, out: str) -> None:
    import torch.distributed as dist

    from pebench.tasks.detection.coco_eval import CocoEvaluator

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        dm = build_datamodule("coco", data_root=root, resolution=64)
        ev = CocoEvaluator()
        targets = [t for _, ts, _ in _val_batches(dm) for t in ts]
        mine = targets[rank::world]  # uneven: 3 images on rank 0, 1 on rank 1
        ev.update(_detections_from(mine, shift={2: (0, 1.0)}), mine, dm.label_to_category_id)
        metrics, n = ev.compute(dm.coco_gt("val"))
        Path(out, f"rank{rank}.json").write_text(json.dumps({"metrics": metrics, "n": n}))
    finally:
        dist.destroy_process_group()


@pytest.mark.ddp
def test_coco_evaluator_is_exact_across_ddp_ranks(coco_root, tmp_path):
    """Two gloo ranks, each with part of the images: every rank gets the single-process numbers."""
    import torch.multiprocessing as mp
    from ddp_support import free_port

    mp.spawn(_ddp_worker, args=(2, str(coco_root), free_port(), str(tmp_path)), nprocs=2, join=True)
    dm = build_datamodule("coco", data_root=str(coco_root), resolution=64)
    single, n = _evaluate(dm, shift={2: (0, 1.0)})
    for rank in (0, 1):
        got = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert got["n"] == n == len(VAL_IMAGES)
        for k, v in single.items():
            g = got["metrics"][k]
            assert (math.isnan(v) and math.isnan(g)) or g == pytest.approx(v), (k, g, v)

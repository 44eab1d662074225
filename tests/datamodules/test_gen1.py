"""GEN1 (``gen1``) and its embedded twin ``events-det``: the DAT writer / reader against expelliarmus
(an independent decoder) and against the byte layout, both ``_bbox.npy`` dtypes, the Prophesee /
RVT box filters on hand-made boxes, the window before each label and its binning against
``numpy.histogramdd``, truncated and unreadable files skipped and counted, layout mistakes that exit
2 with one line, perfect predictions scoring AP 1.0 through ``coco_gt`` and the COCO evaluator, and
``--fast-dev-run`` on ``events-det``."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from pebench.cli import main
from pebench.datamodules import build_datamodule
from pebench.datamodules.events.gen1 import (
    BBOX_DTYPE,
    BBOX_DTYPE_TS,
    EVENT_DTYPE,
    DatRecording,
    load_boxes,
    read_dat,
    write_dat,
)

H, W = 240, 304


def _events(n: int, rng: np.random.Generator, t_max: int = 2_000_000, hw: tuple[int, int] = (H, W)) -> np.ndarray:
    ev = np.zeros(n, dtype=EVENT_DTYPE)
    ev["t"] = np.sort(rng.integers(0, t_max, n))
    ev["x"], ev["y"] = rng.integers(0, hw[1], n), rng.integers(0, hw[0], n)
    ev["p"] = rng.random(n) < 0.5
    return ev


def _boxes(rows: list[tuple], legacy: bool) -> np.ndarray:
    """rows of (t, x, y, w, h, class_id) -> a ``_bbox.npy`` array in either dtype."""
    arr = np.zeros(len(rows), dtype=BBOX_DTYPE_TS if legacy else BBOX_DTYPE)
    for i, (t, x, y, w, h, c) in enumerate(rows):
        arr[i]["ts" if legacy else "t"] = t
        arr[i]["x"], arr[i]["y"], arr[i]["w"], arr[i]["h"], arr[i]["class_id"] = x, y, w, h, c
        arr[i]["track_id"] = i
        arr[i]["confidence" if legacy else "class_confidence"] = 1.0
    return arr


def _gen1_root(root: Path, rows: dict[str, list[tuple]], events: np.ndarray | None = None) -> Path:
    """A GEN1 tree: one recording per split (train with the ``ts`` dtype, val / test with ``t``)."""
    rng = np.random.default_rng(0)
    for split in ("train", "val", "test"):
        (root / split).mkdir(parents=True)
        write_dat(str(root / split / "rec_td.dat"), _events(4000, rng) if events is None else events, H, W)
        np.save(root / split / "rec_bbox.npy", _boxes(rows.get(split, rows["val"]), legacy=split == "train"))
    return root


# ------------------------------------------------------------------------------------ DAT format
def test_dat_round_trip_bytes_and_expelliarmus(tmp_path):
    from expelliarmus import Wizard

    # packing limits: 14-bit x / y at both ends, both polarities, the uint32 time range
    ev = np.zeros(4, dtype=EVENT_DTYPE)
    ev["x"], ev["y"], ev["p"] = [0, 16383, 5, 16383], [16383, 0, 7, 16383], [1, 0, 1, 1]
    ev["t"] = [0, 1, 70_000_000, 2 ** 32 - 1]
    path = tmp_path / "limits_td.dat"
    write_dat(str(path), ev, height=16384, width=16384)
    data = path.read_bytes()
    header, body = data.split(b"% Width 16384\n")
    assert header.startswith(b"% Data file containing Event2D events.\n% Version 2\n") and b"% Height 16384\n" in header
    assert body[:2] == bytes([0, 8]) and len(body) == 2 + 8 * len(ev)  # Event2D type, 8-byte records
    assert body[2:10] == struct.pack("<II", 0, 0 | 16383 << 14 | 1 << 28)
    assert body[-8:] == struct.pack("<II", 2 ** 32 - 1, 16383 | 16383 << 14 | 1 << 28)
    rec = DatRecording(str(path))
    assert (rec.header.height, rec.header.width, rec.num_events, rec.truncated) == (16384, 16384, 4, False)
    for got in (read_dat(str(path)), Wizard(encoding="dat").read(str(path))):
        for k in "txyp":
            assert np.array_equal(got[k].astype(np.int64), ev[k].astype(np.int64)), k

    # random GEN1-sized stream, both directions against expelliarmus
    ev = _events(5000, np.random.default_rng(1))
    write_dat(str(tmp_path / "a_td.dat"), ev, H, W)
    theirs = Wizard(encoding="dat").read(str(tmp_path / "a_td.dat"))
    Wizard(encoding="dat").save(str(tmp_path / "b_td.dat"), theirs)  # expelliarmus's own header
    for got in (theirs, read_dat(str(tmp_path / "b_td.dat"))):
        assert all(np.array_equal(got[k].astype(np.int64), ev[k].astype(np.int64)) for k in "txyp")

    with pytest.raises(ValueError, match="outside"):
        write_dat(str(tmp_path / "c_td.dat"), ev, 100, 100)
    bad = ev[:1].copy()
    bad["t"] = 2 ** 32
    with pytest.raises(ValueError, match="uint32"):
        write_dat(str(tmp_path / "c_td.dat"), bad, H, W)


def test_both_bbox_dtypes_read_the_same(tmp_path):
    rows = [(600_000, 10.5, 20.0, 40.0, 30.0, 0), (700_000, -5.0, 3.0, 12.0, 36.0, 1)]
    for legacy in (True, False):
        np.save(tmp_path / f"{legacy}.npy", _boxes(rows, legacy))
        got = load_boxes(str(tmp_path / f"{legacy}.npy"))
        assert got.dtype == BBOX_DTYPE
        assert got["t"].tolist() == [600_000, 700_000] and got["class_id"].tolist() == [0, 1]
        assert np.allclose(np.stack([got[k] for k in "xywh"], 1), [r[1:5] for r in rows])
    np.save(tmp_path / "bad.npy", np.zeros(3, dtype=[("a", "<f4")]))
    with pytest.raises(ValueError, match="not a GEN1 box array"):
        load_boxes(str(tmp_path / "bad.npy"))


# ------------------------------------------------------------------------------------ protocol
#: (t, x, y, w, h, class) -> kept on train / on val: why
FILTER_CASES = [
    ((500_000, 10, 10, 40, 40, 0), False, False),    # label at 0.5 s: skipped (t must be > 0.5 s)
    ((500_001, 10, 10, 40, 40, 0), True, True),      # just after 0.5 s
    ((600_000, 10, 10, 20, 20, 1), False, False),    # diagonal 28.3 < 30
    ((600_000, 100, 10, 18, 24, 1), True, True),     # diagonal exactly 30
    ((600_000, 10, 100, 9, 40, 1), False, False),    # side 9 < 10
    ((600_000, 60, 100, 10, 40, 1), True, True),     # side exactly 10
    ((700_000, 0, 50, 274, 40, 0), False, True),     # wider than (9 * 304) // 10 = 273: dropped on train only
    ((700_000, 0, 150, 273, 40, 0), True, True),     # 273 wide: kept
    ((800_000, -32, 50, 40, 30, 0), False, False),   # clipped to 8 x 30: side 8 < 10
    ((800_000, 290, 200, 40, 60, 1), True, True),    # clipped to 14 x 40 at the right edge
    ((800_000, 400, 50, 40, 40, 0), False, False),   # entirely outside the frame
]


def test_prophesee_and_rvt_filters_on_hand_made_boxes(tmp_path):
    rows = [c[0] for c in FILTER_CASES]
    dm = build_datamodule("gen1", data_root=str(_gen1_root(tmp_path / "g", {"train": rows, "val": rows})))
    for split, col in (("train", 1), ("val", 2)):
        got = sorted((s.t, tuple(np.round(b, 3))) for s in dm.samples(split) for b in s.boxes.tolist())
        want = []
        for case in FILTER_CASES:
            (t, x, y, w, h, _), keep = case[0], case[col]
            if keep:
                x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + w, W), min(y + h, H)
                want.append((t, (float(x0), float(y0), float(x1), float(y1))))
        assert got == sorted(want), split
    # one sample per label time left; image ids are sample indices; labels contiguous, ids 1 / 2
    gt = dm.coco_gt("val")
    assert sorted(gt.imgs) == list(range(len(dm.samples("val"))))
    assert {a["category_id"] for a in gt.dataset["annotations"]} == {1, 2} and dm.label_to_category_id == [1, 2]
    boxes = torch.tensor([[0.0, 0.0, 20.0, 20.0], [0.0, 0.0, 18.0, 24.0], [0.0, 0.0, 9.0, 40.0]])
    kept, scores, labels = dm.filter_predictions(boxes, torch.ones(3), torch.zeros(3, dtype=torch.long))
    assert kept.tolist() == [[0.0, 0.0, 18.0, 24.0]] and len(scores) == len(labels) == 1


def test_window_before_the_label_and_its_bins(tmp_path):
    t_label, window = 1_000_000, 50_000
    ev = np.zeros(6, dtype=EVENT_DTYPE)
    #                 before window   first µs        bin 1     last µs    at label   after
    ev["t"] = [t_label - window - 1, t_label - window, 962_600, t_label - 1, t_label, t_label + 5]
    ev["x"], ev["y"], ev["p"] = [1, 2, 3, 4, 5, 6], [10, 20, 30, 40, 50, 60], [1, 0, 1, 1, 0, 0]
    root = _gen1_root(tmp_path / "g", {"val": [(t_label, 0, 0, 40, 40, 0)]}, events=ev)
    dm = build_datamodule("gen1", data_root=str(root), time_bins=4, window_ms=50, log_counts=False,
                          resolution="4x240", tokens="frames")
    ds = dm.val_dataset()
    assert ds.events(0)["t"].tolist() == [t_label - window, 962_600, t_label - 1]  # strictly before the label
    x, target = ds[0]
    assert x.shape == (2, 4, 240, 304) and x.sum() == 3
    assert x[0, 0, 20, 2] == 1 and x[1, 1, 30, 3] == 1 and x[1, 3, 40, 4] == 1  # (polarity, bin, y, x)
    assert target["boxes"].tolist() == [[0.0, 0.0, 40.0, 40.0]] and target["orig_size"] == (240, 304)

    # random stream, downscaled input: the voxels against numpy.histogramdd on the same window
    rng = np.random.default_rng(3)
    ev = _events(20000, rng, t_max=1_200_000)
    root = _gen1_root(tmp_path / "h", {"val": [(t_label, 30, 60, 90, 60, 1)]}, events=ev)
    dm = build_datamodule("gen1", data_root=str(root), time_bins=10, log_counts=False, resolution="10x120",
                          tokens="frames")
    x, target = dm.val_dataset()[0]
    assert x.shape == (2, 10, 128, 160)  # 120 x 152 content padded to multiples of 16
    sel = ev[(ev["t"] >= t_label - window) & (ev["t"] < t_label)]
    ref, _ = np.histogramdd(np.stack([sel["p"].astype(float), sel["t"] - (t_label - window),
                                      np.floor((sel["y"] + 0.5) * 0.5), np.floor((sel["x"] + 0.5) * 0.5)], 1),
                            bins=(2, 10, 128, 160), range=((0, 2), (0, window), (0, 128), (0, 160)))
    assert np.array_equal(x.numpy(), ref.astype(np.float32))
    assert target["scale"] == 0.5 and target["boxes"].tolist() == [[15.0, 30.0, 60.0, 60.0]]


def test_truncated_and_unreadable_files_are_skipped_and_counted(tmp_path):
    rows = [(t, 10, 10, 40, 40, 0) for t in (600_000, 900_000, 1_500_000)]
    ev = _events(3000, np.random.default_rng(4), t_max=2_000_000)
    root = _gen1_root(tmp_path / "g", {"val": rows}, events=ev)
    dat = root / "val" / "rec_td.dat"
    data = dat.read_bytes()
    head = len(data) - 8 * len(ev)  # text lines + type / size bytes
    cut = head + 8 * int(np.searchsorted(ev["t"], 1_000_000)) + 3  # inside the first record at t >= 1 s
    dat.write_bytes(data[:cut])
    rec = DatRecording(str(dat))
    assert rec.truncated and rec.last_t < 1_000_000
    dm = build_datamodule("gen1", data_root=str(root), batch_size=8, tokens="frames")
    (inputs, targets, info) = next(iter(dm.val_dataloader()))
    assert info == {"skipped": 1} and [t["image_id"] for t in targets] == [0, 1] and inputs.shape[0] == 2

    (root / "test" / "rec_td.dat").write_bytes(b"% Data file containing Event2D events.\n% Version")  # cut header
    np.save(root / "test" / "other_bbox.npy", _boxes(rows, False))  # its .dat is missing: not listed
    (root / "test" / "bad_td.dat").write_bytes(data)
    (root / "test" / "bad_bbox.npy").write_bytes(b"\x93NUMPY garbage")
    dm = build_datamodule("gen1", data_root=str(root), batch_size=8, tokens="frames")
    assert dm.preflight()["test"] == 3 and dm.skipped_samples == {"corrupt": 1}
    (inputs, targets, info) = next(iter(dm.test_dataloader()))
    assert info == {"skipped": 3} and targets == [] and tuple(inputs.shape) == (0, 2, 10, 240, 304)


@pytest.mark.parametrize("case", ["no-root", "no-val", "no-dat", "no-boxes"])
def test_bad_layout_exits_2_with_one_line(tmp_path, capsys, case):
    root = tmp_path / "gen1"
    if case != "no-root":
        _gen1_root(root, {"val": [(600_000, 10, 10, 40, 40, 0)]})
        if case == "no-val":
            for p in (root / "val").iterdir():
                p.unlink()
            (root / "val").rmdir()
        elif case == "no-dat":
            (root / "train" / "rec_td.dat").unlink()
        else:
            (root / "train" / "rec_bbox.npy").unlink()
    out = tmp_path / "runs"
    assert main(["run", "--dataset", "gen1", "--data-root", str(root), "--fast-dev-run", "--accelerator", "cpu",
                 "--no-progress-bar", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench: error: gen1") and "expected layout" in err[0], err
    assert not out.exists() or not any(p.is_file() for p in out.rglob("*"))


# ------------------------------------------------------------------------------------ evaluation
def test_perfect_predictions_score_ap_1_through_coco_gt_and_the_evaluator(tmp_path):
    from pebench.tasks.detection.coco_eval import CocoEvaluator

    rows = [(600_000, 10, 10, 40, 40, 0), (600_000, 100.5, 50.25, 12, 60, 1), (700_000, 200, 100, 80, 50, 0),
            (700_000, 150, 20, 8, 40, 1), (800_000, -20, 200, 60, 60, 1)]  # a filtered box and a clipped one
    root = _gen1_root(tmp_path / "g", {"val": rows})
    dm = build_datamodule("gen1", data_root=str(root), batch_size=2, resolution="10x120")  # input = sensor x 0.5
    for with_fp, use_filter in ((False, True), (True, True), (True, False)):
        ev = CocoEvaluator()
        for _inputs, targets, _ in dm.val_dataloader():
            dets = []
            for t in targets:
                boxes, labels, scores = t["boxes"], t["labels"], torch.full((len(t["labels"]),), 0.9)  # input frame
                if with_fp:  # a more confident 3 x 3 px (sensor frame) false positive
                    boxes = torch.cat([boxes, torch.tensor([[1.0, 1.0, 2.5, 2.5]])])
                    labels, scores = torch.cat([labels, torch.tensor([0])]), torch.cat([scores, torch.tensor([1.0])])
                dets.append({"boxes": boxes, "scores": scores, "labels": labels})
            ev.update(dets, targets, dm.label_to_category_id, dm.filter_predictions if use_filter else None)
        metrics, n = ev.compute(dm.coco_gt("val"))
        assert n == 3
        if use_filter:  # the Prophesee size filter removes the false positive
            assert metrics["map"] == pytest.approx(1.0) and metrics["map_50"] == pytest.approx(1.0)
        else:
            assert metrics["map"] < 0.9


# ------------------------------------------------------------------------------------ events-det
@pytest.fixture(scope="module")
def events_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("events-det-cache"))


def test_events_det_cache_is_deterministic_and_in_gen1_format(tmp_path):
    kw = dict(train_recordings=1, val_recordings=1, test_recordings=1, duration_s=0.8)
    a = build_datamodule("events-det", cache_dir=str(tmp_path / "a"), **kw)
    b = build_datamodule("events-det", cache_dir=str(tmp_path / "b"), **kw)
    files = sorted(p.relative_to(a.data_root) for p in Path(a.data_root).rglob("*") if p.is_file())
    want = [f"{s}/rec0000_{k}" for s in ("test", "train", "val") for k in ("bbox.npy", "td.dat")]
    assert [str(p) for p in files] == want
    for p in files:
        assert (Path(a.data_root) / p).read_bytes() == (Path(b.data_root) / p).read_bytes()
    assert np.load(Path(a.data_root) / "train" / "rec0000_bbox.npy").dtype == BBOX_DTYPE_TS
    assert np.load(Path(a.data_root) / "val" / "rec0000_bbox.npy").dtype == BBOX_DTYPE
    assert not [p for p in (tmp_path / "a" / "events-det").iterdir() if p.name.startswith(".")]
    assert a.num_classes == 2 and a.input_shape() == (2, 4, 64, 80) and a.default_task == "detection"


def test_events_det_fast_dev_run_none_and_pape(tmp_path, events_cache):
    base = ["run", "--dataset", "events-det", "--fast-dev-run", "--batch-size", "4", "--data-option",
            "train_recordings=1", "--data-option", "val_recordings=1", "--data-option", "test_recordings=1",
            "--data-option", "duration_s=0.8", "--data-option", f"cache_dir={events_cache}", "--task-option",
            "fpn_dim=32", "--task-option", "head_convs=1", "--accelerator", "cpu", "--no-progress-bar", "--out",
            str(tmp_path)]
    for pe in ("none", "pape"):
        assert main(base + ["--pe", pe]) == 0, pe
    res = [json.loads(p.read_text()) for p in sorted(tmp_path.rglob("results.json"))]
    assert sorted(r["pe"] for r in res) == ["none", "pape"]
    for r in res:
        assert r["status"] == "complete" and r["task"] == "detection" and r["primary_metric"] == "val/map"
        assert r["metrics"]["val/map_images"] >= 1 and 0.0 <= r["metrics"]["val/map"] <= 1.0
        assert "test/map" in r["metrics"]


def test_gen1_fixture_end_to_end_counts_a_truncated_recording(tmp_path):
    rows = [(t, 10, 10, 60, 40, 0) for t in (600_000, 900_000, 1_500_000)] + [(900_000, 150, 80, 20, 50, 1)]
    root = _gen1_root(tmp_path / "g", {"val": rows}, events=_events(3000, np.random.default_rng(5)))
    dat = root / "val" / "rec_td.dat"
    dat.write_bytes(dat.read_bytes()[:-8 * 1000 - 5])  # cut inside a record: the 1.5 s sample is lost
    out = tmp_path / "runs"
    assert main(["run", "--dataset", "gen1", "--data-root", str(root), "--pe", "pape", "--fast-dev-run",
                 "--resolution", "2x64", "--batch-size", "4", "--max-skipped-fraction", "0.5", "--task-option",
                 "fpn_dim=32", "--task-option", "head_convs=1", "--analyses", "none", "--accelerator", "cpu",
                 "--no-progress-bar", "--out", str(out), "--data-option", "tokens=frames"]) == 0
    (path,) = out.rglob("results.json")
    r = json.loads(path.read_text())
    assert path.parent.parent.parent.name == "pape+frames"  # gen1 defaults to spiking tokens
    assert r["task"] == "detection" and r["metrics"]["val/map_images"] == 2
    assert r["skipped_samples"]["by_reason"]["corrupt"] >= 1


# ------------------------------------------------------------------------------ spiking tokens
def test_gen1_spiking_tokens_from_a_hand_built_window(tmp_path):
    """tokens=spiking (the gen1 default): the 200 ms before the label, scaled by the pixel-centre
    rule, tokenized on the padded input frame; one cell fed exactly 256 events fires once at its
    last event, a cell with 255 does not, events before the window do not count."""
    t_label, t_first = 1_000_000, 850_000
    parts = []

    def block(n, t0, t1, x0, y0):  # n events in a 32 x 32 sensor block, times t0 .. t1 (inclusive)
        ev = np.zeros(n, dtype=EVENT_DTYPE)
        ev["t"] = np.linspace(t0, t1, n).round()
        ev["x"], ev["y"] = x0 + np.arange(n) % 32, y0 + (np.arange(n) // 32) % 32
        ev["p"] = np.arange(n) % 2 == 0
        return ev

    parts.append(block(300, 100_000, 799_999, 160, 0))            # before the window (t < 800 ms): no token
    parts.append(block(256, t_first, 990_000, 32, 64))            # 256 in cell (y 2, x 1) at scale 1/2
    parts.append(block(255, t_first + 1, 995_000, 224, 192))      # 255: below threshold
    ev = np.concatenate(parts)
    ev = ev[np.argsort(ev["t"], kind="stable")]
    root = _gen1_root(tmp_path / "g", {"val": [(t_label, 30, 60, 90, 60, 1)]}, events=ev)
    dm = build_datamodule("gen1", data_root=str(root), resolution="120", batch_size=2)
    assert dm.tokens == "spiking" and dm.window_us == 200_000
    tokens, target = dm.val_dataset()[0]
    assert target["input_hw"] == (128, 160) and target["boxes"].tolist() == [[15.0, 30.0, 60.0, 60.0]]
    assert tokens.fired == 1 and tokens.volumes.shape == (1, 2, 8, 16, 16)
    # t in units of 100 ms from the window's first event; (y, x) the 16 px cell of the 120 x 152 input
    assert np.allclose(tokens.coords, [[(990_000 - t_first) / 100_000, 2, 1]])
    assert np.isclose(np.expm1(tokens.volumes.astype(np.float64)).sum(), 256)  # log1p counts of its 256 events
    inputs, targets, info = next(iter(dm.val_dataloader()))
    assert inputs.mask.tolist() == [[True]] and targets[0]["input_hw"] == (128, 160)
    assert info == {"skipped": 0, "capped": 0, "tokens_fired": 1, "tokens_kept": 1}
    with pytest.raises(ValueError, match="tokens must be one of"):
        build_datamodule("gen1", data_root=str(root), tokens="voxels")


def test_gen1_fixture_end_to_end_with_spiking_tokens(tmp_path):
    rows = [(t, 10, 10, 60, 40, 0) for t in (600_000, 900_000)] + [(900_000, 150, 80, 20, 50, 1)]
    root = _gen1_root(tmp_path / "g", {"val": rows}, events=_events(60_000, np.random.default_rng(6)))
    out = tmp_path / "runs"
    assert main(["run", "--dataset", "gen1", "--data-root", str(root), "--pe", "pape", "--fast-dev-run",
                 "--resolution", "64", "--batch-size", "4", "--data-option", "spike_threshold=16",
                 "--task-option", "fpn_dim=32", "--task-option", "head_convs=1", "--analyses", "none",
                 "--accelerator", "cpu", "--no-progress-bar", "--out", str(out)]) == 0
    (path,) = out.rglob("results.json")
    r = json.loads(path.read_text())
    assert path.parent.parent.parent.name == "pape"  # spiking is gen1's default: no suffix
    assert r["status"] == "complete" and r["task"] == "detection" and r["metrics"]["val/map_images"] == 2
    assert r["token_cap"]["max_tokens"] == 512 and r["token_cap"]["val"]["tokens_per_sample"] > 1

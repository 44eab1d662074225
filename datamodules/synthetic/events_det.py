"""``events-det``: embedded synthetic event-camera detection, written in GEN1's released format
(``<split>/<rec>_td.dat`` + ``<rec>_bbox.npy``) and read by the ``gen1`` reader
(:class:`~.gen1.Gen1DataModule`), so the DAT decoding, both box dtypes, the Prophesee / RVT
filters, the windowing and the sensor-frame evaluation run without a download.

Each recording is ``duration_s`` (2 s) of a static camera watching a ``64 x 80`` (H x W) scene on
a smooth static background, with 2 to ``max_objects`` moving objects of GEN1's two classes:

* **car** (class 0): a wide box (24-40 x 12-20 px) with a window band and two dark wheels,
  driving horizontally at 30-80 px/s in either direction, entering / leaving through the sides;
* **pedestrian** (class 1): a tall ellipse body (8-14 x 20-32 px) with a head, walking slowly
  (8-25 px/s) in a random direction with a vertical bob of 1 px at 2 Hz.

Objects are brighter or darker than the background (random), anti-aliased, and painted in
drawing order (later ones occlude earlier ones; boxes stay whole, as GEN1's labels do). Frames
at ``fine_steps`` instants become events through an idealised DVS pixel
(:func:`~.synthetic_events.contrast_events`: per-pixel thresholds ~ N(0.25, 0.025) on the log
intensity) plus uniform background noise (``noise_hz`` per pixel, random polarity). Labels are
written every 100 ms (the first at 0.1 s): box ``x, y, w, h`` of every object that overlaps the
frame at that time, *unclipped* (GEN1 has boxes reaching outside the frame; the reader clips).
The Prophesee filters then do real work here: labels up to 0.5 s are skipped, small cars
(diagonal < 30 px) and thin pedestrians (side < 10 px) are dropped, and clipped boxes at the
borders can fall below the limits. The training split's boxes use the original ``ts`` /
``confidence`` dtype, validation and test the toolbox's ``t`` / ``class_confidence`` one.

Files (deterministic for a given seed and sizes; written into a temporary folder that is then
renamed, so a half-written cache never exists)::

    <cache_dir>/events-det/<key>/{train,val,test}/rec<NNNN>_td.dat
    <cache_dir>/events-det/<key>/{train,val,test}/rec<NNNN>_bbox.npy

``cache_dir`` defaults to ``~/.cache/pebench``. Default input: the whole sensor (``"4x64"``: 4
time bins of the 50 ms window, scale 1), patch 8, tubelet 2 -> a ``2 x 8 x 10`` token grid.

Tokens: ``frames`` is this set's default (unlike ``gen1``), so its existing runs and tests keep their
meaning. ``tokens=spiking`` (``pape+spiking`` run directories) reads the 100 ms before each label
(``spiking_window_ms``) into spiking-patch tokens on the ``8 x 10`` cells of patch 8: 32 events per
token (half an event per pixel of a cell; the background noise, 0.5 Hz per pixel, gives a cell
about 3 events per 100 ms and so almost never fires), 20 ms refractory period (up to 5 tokens per
cell in the window), ``t`` in units of 25 ms (the frames path's tubelet time unit), 8 age buckets,
at most 256 tokens (the window fires about 50 on average; the cap holds 400 = 5 x 80 tokens only
in a scene with motion everywhere).
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, ClassVar

import numpy as np

from pebench.core.errors import ConfigError
from pebench.core.io import publish_dir

from ..base import float_option, int_option
from ..events.gen1 import BBOX_DTYPE, BBOX_DTYPE_TS, EVENT_DTYPE, Gen1DataModule, write_dat
from ..registry import register_datamodule
from .synthetic_events import contrast_events

__all__ = ["EventsDetDataModule", "write_events_det", "render_recording", "SENSOR_HW"]

SENSOR_HW = (64, 80)
_VERSION = 1  # bump when the generator changes (new cache key)
LABEL_PERIOD_US = 100_000


def _objects(rng: np.random.Generator, n: int, duration_s: float) -> list[dict[str, Any]]:
    """Draw ``n`` objects: class, size, trajectory parameters and contrast."""
    H, W = SENSOR_HW
    out = []
    for _ in range(n):
        cls = int(rng.integers(2))
        fg_dark = bool(rng.random() < 0.5)
        if cls == 0:  # car
            w, h = float(rng.uniform(26, 44)), float(rng.uniform(12, 20))
            v = float(rng.uniform(30, 80)) * (1 if rng.random() < 0.5 else -1)
            # at a random labelled time tc the car's left edge is somewhere in [-w/2, W - w/2]
            tc = float(rng.uniform(0.5, duration_s))
            x0 = float(rng.uniform(-w / 2, W - w / 2)) - v * tc
            y0 = float(rng.uniform(0, H - h))
            vel = (v, 0.0)
        else:  # pedestrian
            w, h = float(rng.uniform(9, 16)), float(rng.uniform(26, 40))
            speed, ang = float(rng.uniform(8, 25)), float(rng.uniform(0, 2 * np.pi))
            vel = (speed * np.cos(ang), speed * np.sin(ang))
            x0, y0 = float(rng.uniform(0, W - w)), float(rng.uniform(0, H - h))
        out.append({"cls": cls, "w": w, "h": h, "x0": x0, "y0": y0, "vel": vel,
                    "phase": float(rng.uniform(0, 2 * np.pi)),
                    "level": float(rng.uniform(0.05, 0.2) if fg_dark else rng.uniform(0.8, 1.0))})
    return out


def _box(obj: dict[str, Any], t: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Top-left ``x, y`` ``(k,)`` and ``w, h`` of ``obj`` at times ``t`` ``(k,)`` (s), sensor pixels
    (unclipped)."""
    x = obj["x0"] + obj["vel"][0] * t
    y = obj["y0"] + obj["vel"][1] * t
    if obj["cls"] == 1:
        y = y + np.sin(2 * np.pi * 2.0 * t + obj["phase"])
    return x, y, obj["w"], obj["h"]


def _paint(img: np.ndarray, obj: dict[str, Any], t: np.ndarray) -> None:
    """Paint ``obj`` (anti-aliased) into the frames ``img`` ``(k, H, W)`` at times ``t`` ``(k,)``, in
    place, computing only inside the pixels its boxes touch."""
    H, W = img.shape[1:]
    x, y, w, h = _box(obj, t)
    c0, c1 = int(max(0, np.floor(x.min()) - 2)), int(min(W, np.ceil(x.max() + w) + 2))
    r0, r1 = int(max(0, np.floor(y.min()) - 2)), int(min(H, np.ceil(y.max() + h) + 2))
    if c0 >= c1 or r0 >= r1:
        return
    yy = (np.arange(r0, r1) + 0.5)[None, :, None]  # pixel centres, (1, h', 1)
    xx = (np.arange(c0, c1) + 0.5)[None, None, :]  # (1, 1, w')
    x, y = x[:, None, None], y[:, None, None]      # (k, 1, 1)
    cx, cy = x + w / 2, y + h / 2
    level = np.full((len(t), r1 - r0, c1 - c0), obj["level"])
    if obj["cls"] == 0:  # car: rectangle, a lighter window band, two dark wheels on the bottom edge
        sd = np.maximum(np.abs(xx - cx) - w / 2, np.abs(yy - cy) - h / 2)
        window = (np.abs(xx - cx) < 0.3 * w) & (yy > y + 0.15 * h) & (yy < y + 0.45 * h)
        level = np.where(window, 0.5 * (obj["level"] + 0.55), level)
        r = 0.18 * h + 1.0
        for fx in (0.22, 0.78):
            wheel = np.clip(0.5 - (np.hypot(xx - (x + fx * w), yy - (y + h - r)) - r), 0, 1)
            level = level * (1 - wheel) + 0.02 * wheel
    else:  # pedestrian: body ellipse under a head disc
        bh = 0.78 * h
        a, b = w / 2, bh / 2
        sd = (np.hypot((xx - cx) / a, (yy - (y + h - b)) / b) - 1) * min(a, b)
        hr = 0.11 * h + 0.5
        sd = np.minimum(sd, np.hypot(xx - cx, yy - (y + hr)) - hr)
    cov = np.clip(0.5 - sd, 0, 1)
    view = img[:, r0:r1, c0:c1]
    view *= 1 - cov
    view += level * cov


def render_recording(rng: np.random.Generator, duration_s: float = 2.0, fine_steps: int = 400, max_objects: int = 4,
                     threshold: float = 0.25, noise_hz: float = 0.5, chunk: int = 50) -> tuple[np.ndarray, list[tuple]]:
    """One recording -> (events :data:`~.gen1.EVENT_DTYPE` sorted by ``t`` µs, label rows
    ``(t_us, x, y, w, h, class_id, track_id)``). Frames are rendered ``chunk`` instants at a time."""
    H, W = SENSOR_HW
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float64) + 0.5  # pixel centres
    a = rng.uniform(0, 2 * np.pi)  # smooth static background in [0.3, 0.6]
    ramp = np.cos(a) * xx / W + np.sin(a) * yy / H
    bg = 0.3 + 0.3 * (ramp - ramp.min()) / max(1e-6, float(np.ptp(ramp)))
    objs = _objects(rng, int(rng.integers(2, max_objects + 1)), duration_s)
    times = np.linspace(0.0, duration_s, fine_steps + 1)
    logi = np.empty((fine_steps + 1, H * W))
    for k0 in range(0, fine_steps + 1, chunk):
        t = times[k0:k0 + chunk]
        img = np.repeat(bg[None], len(t), axis=0)  # (k, H, W)
        for o in objs:
            _paint(img, o, t)
        logi[k0:k0 + len(t)] = np.log(img.reshape(len(t), -1) + 1e-3)
    thr = np.maximum(threshold * (1 + 0.1 * rng.standard_normal(H * W)), 0.05 * threshold)
    duration_us = duration_s * 1e6
    pix, t_us, pol = contrast_events(logi, thr, duration_us / fine_steps)
    n_noise = int(rng.poisson(noise_hz * duration_s * H * W))
    ev = np.empty(len(pix) + n_noise, dtype=EVENT_DTYPE)
    ev["x"] = np.concatenate([pix % W, rng.integers(0, W, n_noise)])
    ev["y"] = np.concatenate([pix // W, rng.integers(0, H, n_noise)])
    ev["p"] = np.concatenate([pol, rng.random(n_noise) < 0.5])
    ev["t"] = np.round(np.concatenate([t_us, rng.uniform(0, duration_us, n_noise)])).astype(np.int64)
    ev = ev[np.argsort(ev["t"], kind="stable")]
    labels = []
    for t_lab in range(LABEL_PERIOD_US, int(duration_us), LABEL_PERIOD_US):
        for tid, o in enumerate(objs):
            x, y, w, h = (float(np.asarray(v).reshape(-1)[0]) for v in _box(o, np.array([t_lab / 1e6])))
            if x < W and y < H and x + w > 0 and y + h > 0:
                labels.append((t_lab, x, y, w, h, o["cls"], tid))
    return ev, labels


def _box_array(rows: list[tuple], legacy: bool) -> np.ndarray:
    dtype = BBOX_DTYPE_TS if legacy else BBOX_DTYPE
    arr = np.zeros(len(rows), dtype=dtype)
    if rows:
        cols = list(zip(*rows))
        arr["ts" if legacy else "t"] = cols[0]
        for i, k in enumerate(("x", "y", "w", "h", "class_id", "track_id"), start=1):
            arr[k] = cols[i]
        arr["confidence" if legacy else "class_confidence"] = 1.0
    return arr


def write_events_det(root: str, sizes: dict[str, int], seed: int, **render_kw: Any) -> str:
    """Write ``sizes[split]`` recordings per split into ``root`` (which must not exist yet); -> ``root``.

    Written into a temporary sibling folder and renamed at the end (atomic on one filesystem); if
    another process finished first, its copy is kept."""
    with publish_dir(root, ".events-det-tmp-") as tmp:
        for k, (split, n) in enumerate(sizes.items()):
            os.makedirs(os.path.join(tmp, split))
            for i in range(n):
                rng = np.random.default_rng([seed, k, i, _VERSION])
                ev, rows = render_recording(rng, **render_kw)
                stem = os.path.join(tmp, split, f"rec{i:04d}")
                write_dat(stem + "_td.dat", ev, *SENSOR_HW)
                np.save(stem + "_bbox.npy", _box_array(rows, legacy=split == "train"))
    return root


@register_datamodule("events-det")
class EventsDetDataModule(Gen1DataModule):
    """Embedded synthetic event-camera detection in GEN1's format (see the module docstring)."""

    name: ClassVar[str] = "events-det"
    needs_data_root: ClassVar[bool] = False
    expected_layout: ClassVar[str] = ("written by pebench into <cache_dir>/events-det/<key>/{train,val,test}/"
                                      "rec<NNNN>_td.dat + rec<NNNN>_bbox.npy")
    default_resolution: ClassVar[int | str] = "4x64"
    default_height: ClassVar[int] = 64
    patch_size: ClassVar[int] = 8
    tubelet: ClassVar[int] = 2
    sensor_hw: ClassVar[tuple[int, int]] = SENSOR_HW
    option_help: ClassVar[dict[str, str]] = {
        **Gen1DataModule.option_help,
        "train_recordings": "training recordings written (each gives one sample per 100 ms label after 0.5 s)",
        "val_recordings": "validation recordings written",
        "test_recordings": "test recordings written (held out)",
        "max_objects": "at most this many moving objects per recording (at least 2)",
        "duration_s": "length of each recording in seconds (> 0.6: labels up to 0.5 s are skipped)",
        "data_seed": "seed of the written recordings (the same set for every run seed)",
        "cache_dir": "folder of the written files (default ~/.cache/pebench)",
    }
    #: a lighter detector for CPU runs (models/tasks/detection/setup.py; --task-option overrides it)
    detection_defaults: ClassVar[dict] = {"fpn_dim": 64, "head_convs": 2}
    spiking_window_ms: ClassVar[float] = 100.0

    def __init__(self, train_recordings: int = 64, val_recordings: int = 16, test_recordings: int = 16,
                 max_objects: int = 4, duration_s: float = 2.0, data_seed: int = 0, cache_dir: str | None = None,
                 time_bins: int = 4, tokens: str = "frames", spike_threshold: int = 32, refractory_ms: float = 20.0,
                 time_scale_ms: float = 25.0, age_buckets: int = 8, max_tokens: int = 256, **kwargs: Any) -> None:
        if kwargs.get("data_root"):
            raise ConfigError("events-det is embedded (written into cache_dir); it takes no --data-root")
        self.sizes = {"train": int_option(self.name, "train_recordings", train_recordings),
                      "val": int_option(self.name, "val_recordings", val_recordings),
                      "test": int_option(self.name, "test_recordings", test_recordings)}
        self.max_objects = int_option(self.name, "max_objects", max_objects, minimum=2)
        self.duration_s = float_option(self.name, "duration_s", duration_s)
        if self.duration_s <= 0.6:
            raise ConfigError(f"{self.name}: data option duration_s must be > 0.6 (labels up to 0.5 s are skipped), "
                             f"got {duration_s!r}")
        self.data_seed = int_option(self.name, "data_seed", data_seed, minimum=0)
        cache = os.path.expanduser(str(cache_dir) if cache_dir else os.path.join("~", ".cache", "pebench"))
        spec = [_VERSION, self.sizes, self.max_objects, self.duration_s, self.data_seed]
        key = hashlib.sha1(json.dumps(spec).encode()).hexdigest()[:12]
        super().__init__(time_bins=time_bins, tokens=tokens, spike_threshold=spike_threshold,
                         refractory_ms=refractory_ms, time_scale_ms=time_scale_ms, age_buckets=age_buckets,
                         max_tokens=max_tokens, **kwargs)
        self.data_root = os.path.join(cache, "events-det", key)
        if not os.path.isdir(self.data_root):
            write_events_det(self.data_root, self.sizes, self.data_seed, duration_s=self.duration_s,
                             max_objects=self.max_objects)
        self.validate()

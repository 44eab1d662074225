"""``synthetic-events``: embedded synthetic event-camera scenes (DVS-like), 8 classes.

Scenes (data option ``scene``):

* ``jumps`` (default): an object (disc or square, random size) appears in one quadrant of the
  sensor, stays there for 0.3-0.4 s, then **jumps** to a neighbouring quadrant (clockwise or
  counter-clockwise) and stays for another 0.3-0.4 s. Label ``2 * q_first + (0 if the second
  quadrant is the clockwise neighbour else 1)``, quadrants 0 = top-left, 1 = top-right,
  2 = bottom-right, 3 = bottom-left. Whether the object is brighter or darker than the
  background (so which polarity its appearance fires) and both intensities are random; the
  position inside each quadrant is uniform (away from its borders). The label depends only on
  *where* and *in which order* things happen. **No-PE ceiling = chance (1/8), exactly**: a
  block permutation of the four ``S/2 x S/2`` quadrants that sends the first and second
  quadrant of any class to those of any other class maps the scene distribution of one class
  onto the other's (positions uniform inside a quadrant, per-pixel thresholds i.i.d., noise
  uniform), and, since ``S/2`` is a multiple of the patch size, maps every token (frames tubelet
  or spiking patch) to a token with the same content at another cell. A model without a PE and
  with mean pooling is a function of the multiset of token contents, so its output distribution
  is the same for every class. A PE that sees only the spatial axes (``lookhere`` on events) can
  tell which two quadrants are involved but needs the time coordinate for their order. A
  *relative* PE (its attention logits depend on coordinate differences only: ``pape``,
  ``rope-*``, ``alibi``) cannot tell which quadrants: two classes with the same jump vector
  (top-left -> top-right and bottom-left -> bottom-right) look alike to it, so its ceiling is
  4/8 (jump vector and order) and 2/8 without the order; use ``hops`` for relative PEs.
* ``hops``: the same appear / jump / stay timing, but the label is the **jump direction** among
  8 compass directions (0 = east, then clockwise on screen: south-east, south, ..., north-east).
  The sensor is cut into ``8 x 8`` blocks (one block = one ``patch x patch`` cell at the default
  32 x 32 with patch 4); the object's centre sits at block ``b + u`` (``b`` in 1..6 per axis, ``u``
  uniform in ``[0, 1)^2``) and jumps by exactly 3 blocks per axis (diagonals: 3 blocks on each
  axis), so both positions keep the object inside the sensor. Opposite directions visit the same
  pair of places and differ **only in time order**; neighbouring directions differ in relative
  place. **No-PE ceiling = chance (1/8), exactly**: the jump is a whole number of blocks, hence of
  patches, so the object's tokens at its second place are distributed like those at its first
  (same sub-patch offset, i.i.d. per-pixel thresholds, uniform noise) whatever the direction;
  a model without PE sees the same distribution of token-content multisets for every class.
  Unlike ``jumps`` it needs no absolute position: a *relative* PE (``pape``, ``rope-*``,
  ``alibi``) can reach 100 % from the displacement and the order in time.
* ``gestures``: the earlier 8 DVS-Gesture-like motions (swipe right, left, down, up, circle
  cw / ccw, zoom in / out); local motion alone separates swipes, polarity separates zooms.

Frames are rendered at ``fine_steps`` fine time steps (independent of the number of time bins) and
converted to events like an idealised DVS pixel (ESIM-style): a pixel fires an event of
polarity ``sign(d)`` each time its log intensity moved by the contrast threshold (per-pixel
thresholds ~ N(C, 0.1 C)) since its last event; timestamps are spread linearly inside the
fine step. Uniform background-activity noise events are added. Streams are numpy structured
arrays with tonic's DVS-Gesture dtype (``x, y`` int16, ``p`` bool, ``t`` int64 microseconds over
a 1 s clip), sorted by ``t``; the stream depends on the sensor side only, not on the bin count; ``dataset.events(i)`` returns the raw stream so
robustness analyses can perturb it, and ``dataset.to_voxels(events)`` bins any stream.

Tokens (data option ``tokens``, see :mod:`.event_transforms`): ``frames`` (default) bins with
``tonic.transforms.ToFrame(sensor_size=(S, S, 2), n_time_bins=T)`` (tonic's time bins
span first..last event, width ``(t_last - t_first) // T``) -> ``(T, 2, S, S)`` counts,
permuted to ``(2, T, S, S)`` float32. Resolution ``"TxS"`` = time bins x sensor side (``S``
alone keeps the default bin count). ``spiking``: spiking-patch tokens
(:mod:`pebench.models.spiking`) of the raw stream with ``patch = 4``; defaults for these 1 s
clips: 12 events per token, 2 ms refractory period, t in units of 50 ms, 8 age buckets,
at most 256 tokens. ``augment=true`` (``tokens=spiking``, training split): tonic flip with the
label remapped (:data:`FLIP_LABEL`), a rotation of up to ±15°, drop-by-time, drop-by-area, drop-event
(:class:`~.event_transforms.Augment`).
"""
from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import torch

from pebench.core.errors import ConfigError

from ..base import int_option, parse_resolution
from ..events.event_transforms import SPIKING_HELP, Augment, SpikingOptions, parse_tokens
from ..events.spiking import pad_collate
from ..registry import register_datamodule
from .render import SyntheticDataset, SyntheticSplitsDataModule, check_size, shape_alpha

__all__ = ["SyntheticEventsDataModule", "EventDataset", "SpikingEventDataset", "EVENT_DTYPE", "GESTURES",
           "events_scene", "jumps_scene", "render_events", "contrast_events", "events_to_voxels", "SCENES",
           "QUADRANT_ORIGINS"]

#: == ``tonic.datasets.DVSGesture.dtype`` (spelled out: importing tonic costs ~3 s; a test checks it)
EVENT_DTYPE = np.dtype([("x", "<i2"), ("y", "<i2"), ("p", "?"), ("t", "<i8")])
GESTURES = ("swipe-right", "swipe-left", "swipe-down", "swipe-up", "circle-cw", "circle-ccw", "zoom-in", "zoom-out")
SCENES = ("jumps", "hops", "gestures")
#: ``hops`` directions ``(dy, dx)``: 0 = east, then clockwise on screen (y down)
HOP_DIRECTIONS = np.array([[0, 1], [1, 1], [1, 0], [1, -1], [0, -1], [-1, -1], [-1, 0], [-1, 1]])
#: ``hops``: blocks per sensor side, jump length in blocks (per axis)
HOP_BLOCKS, HOP_LENGTH = 8, 3
#: normalised (y, x) origin of quadrants 0..3 (clockwise from top-left)
QUADRANT_ORIGINS = np.array([[0.0, 0.0], [0.0, 0.5], [0.5, 0.5], [0.5, 0.0]])
#: label after a left-right flip: gestures swap right/left swipes and cw/ccw circles; jumps mirror
#: the quadrants (0 <-> 1, 2 <-> 3), which swaps clockwise and counter-clockwise
FLIP_LABEL = {"gestures": [1, 0, 2, 3, 5, 4, 6, 7],
              "jumps": [2 * [1, 0, 3, 2][q] + (1 - d) for q in range(4) for d in range(2)],
              "hops": [4, 3, 2, 1, 0, 7, 6, 5]}  # (dy, dx) -> (dy, -dx)


def jumps_scene(rng: np.random.Generator) -> dict[str, Any]:
    """An object appears in quadrant ``q``, then jumps to the clockwise (``d = 0``) or
    counter-clockwise (``d = 1``) neighbour; label ``2 q + d`` (module docstring)."""
    label = int(rng.integers(8))
    q, d = divmod(label, 2)
    q2 = (q + (1 if d == 0 else -1)) % 4
    r = float(rng.uniform(0.08, 0.12))
    lo = r + 0.03  # keep the object inside its quadrant
    centres = np.stack([QUADRANT_ORIGINS[qq] + rng.uniform(lo, 0.5 - lo, 2) for qq in (q, q2)])  # (2, 2)
    t1 = rng.uniform(0.03, 0.12)
    t2 = t1 + rng.uniform(0.3, 0.4)
    t3 = t2 + rng.uniform(0.3, 0.4)
    hi, low = rng.uniform(0.6, 1.0), rng.uniform(0.08, 0.2)
    bright = bool(rng.random() < 0.5)
    return {"label": label, "scene": "jumps", "kind": str(rng.choice(["disc", "square"])), "r": r,
            "centres": centres, "times": np.array([t1, t2, t3]),
            "fg": float(hi if bright else low), "bg": float(low if bright else hi)}


def hops_scene(rng: np.random.Generator) -> dict[str, Any]:
    """An object appears at block ``b + u``, then jumps by ``HOP_LENGTH`` blocks in direction
    ``label`` (:data:`HOP_DIRECTIONS`); timing, contrast and shape as :func:`jumps_scene` (module
    docstring)."""
    label = int(rng.integers(8))
    d = HOP_DIRECTIONS[label]  # (2,) dy, dx
    hi_b = HOP_BLOCKS - 2  # blocks 1 .. 6 keep an object of half-size <= 1 block inside the sensor
    start = np.array([rng.integers(1, hi_b + 1) if k == 0 else
                      rng.integers(1, hi_b - HOP_LENGTH + 1) if k > 0 else
                      rng.integers(1 + HOP_LENGTH, hi_b + 1) for k in d])  # (2,) block of the first place
    u = rng.uniform(0.0, 1.0, 2)  # sub-block offset, shared by both places
    centres = np.stack([start + u, start + HOP_LENGTH * d + u]) / HOP_BLOCKS  # (2, 2) normalised
    t1 = rng.uniform(0.03, 0.12)
    t2 = t1 + rng.uniform(0.3, 0.4)
    t3 = t2 + rng.uniform(0.3, 0.4)
    hi, low = rng.uniform(0.6, 1.0), rng.uniform(0.08, 0.2)
    bright = bool(rng.random() < 0.5)
    return {"label": label, "scene": "hops", "kind": str(rng.choice(["disc", "square"])),
            "r": float(rng.uniform(0.07, 0.1)), "centres": centres, "times": np.array([t1, t2, t3]),
            "fg": float(hi if bright else low), "bg": float(low if bright else hi)}


#: scene name -> scene generator
SCENE_FNS = {"jumps": jumps_scene, "hops": hops_scene}


def scene_alpha(scene: dict[str, Any], t: np.ndarray, side: int) -> np.ndarray:
    """Object coverage ``(len(t), S, S)`` in ``[0, 1]`` at normalised times ``t``."""
    if scene.get("scene") in ("jumps", "hops"):
        t1, t2, t3 = scene["times"]
        out = np.zeros((len(t), side, side), dtype=np.float32)
        for (cy, cx), (a, b) in zip(scene["centres"], ((t1, t2), (t2, t3))):
            on = (t >= a) & (t < b)
            out[on] = shape_alpha(scene["kind"], cy, cx, scene["r"], side)
        return out
    cy, cx, r = trajectory(scene, t)
    return shape_alpha(scene["kind"], cy, cx, r, side)


def events_scene(rng: np.random.Generator) -> dict[str, Any]:
    label = int(rng.integers(len(GESTURES)))
    a, b = rng.uniform(0.0, 0.12), rng.uniform(0.88, 1.0)  # gesture active in [a, b]
    scene = {"label": label, "kind": str(rng.choice(["disc", "square"])), "window": (float(a), float(b)),
             "fg": float(rng.uniform(0.6, 1.0)), "bg": float(rng.uniform(0.08, 0.2))}
    if label < 4:  # swipes: (dy, dx) of the motion
        d = np.array([[0, 1], [0, -1], [1, 0], [-1, 0]][label], dtype=np.float64)
        other = rng.uniform(0.3, 0.7)
        start = 0.5 - 0.25 * d + (1 - np.abs(d)) * (other - 0.5) + rng.uniform(-0.04, 0.04, 2) * np.abs(d)
        scene.update(start=start, delta=0.5 * d, r=float(rng.uniform(0.08, 0.12)))
    elif label < 6:  # circles; angle increases clockwise on screen (y down)
        scene.update(centre=0.5 + rng.uniform(-0.07, 0.07, 2), R=float(rng.uniform(0.18, 0.24)),
                     phase=float(rng.uniform(0, 2 * np.pi)), sense=1.0 if label == 4 else -1.0,
                     r=float(rng.uniform(0.07, 0.1)))
    else:  # zoom: radius grows (6) or shrinks (7)
        r0, r1 = rng.uniform(0.04, 0.07), rng.uniform(0.22, 0.28)
        scene.update(centre=rng.uniform(0.38, 0.62, 2), radii=(r0, r1) if label == 6 else (r1, r0))
    return scene


def trajectory(scene: dict[str, Any], t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shape centre ``(y, x)`` and half-size at normalised times ``t``: three ``(len(t),)`` arrays."""
    a, b = scene["window"]
    s = np.clip((t - a) / (b - a), 0.0, 1.0)
    label = scene["label"]
    if label < 4:
        yx = scene["start"][None] + s[:, None] * scene["delta"][None]
        return yx[:, 0], yx[:, 1], np.full_like(s, scene["r"])
    if label < 6:
        phi = scene["phase"] + scene["sense"] * 2 * np.pi * 0.85 * s
        cy, cx = scene["centre"]
        return cy + scene["R"] * np.sin(phi), cx + scene["R"] * np.cos(phi), np.full_like(s, scene["r"])
    r0, r1 = scene["radii"]
    return np.full_like(s, scene["centre"][0]), np.full_like(s, scene["centre"][1]), r0 + s * (r1 - r0)


def contrast_events(logi: np.ndarray, thr: np.ndarray, step_us: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Idealised DVS pixels (ESIM): log intensities ``logi`` ``(K + 1, P)`` of ``P`` pixels at ``K + 1``
    instants ``step_us`` apart and per-pixel contrast thresholds ``thr`` ``(P,)`` -> the events
    ``(pixel index, t in µs (float), polarity ON)``, three ``(n,)`` arrays ordered by step, not by time.

    Each pixel's reference level is ``L0 + m * thr`` (``m`` integer); a step moving ``L`` to ``u``
    thresholds above ``L0`` fires until the reference is within one threshold,
    ``m_k = clip(m_{k-1}, floor u, ceil u)``; a step's events are spread evenly inside it."""
    steps = logi.shape[0] - 1
    act = np.flatnonzero(np.ptp(logi, axis=0) >= thr.min())  # pixels that can fire at all
    u = (logi[:, act] - logi[0, act]) / thr[act]  # (K + 1, P')
    lo, hi = np.floor(u), np.ceil(u)
    m = np.zeros((steps + 1, len(act)))
    for k in range(1, steps + 1):
        m[k] = np.clip(m[k - 1], lo[k], hi[k])
    dm = np.diff(m, axis=0).astype(np.int64)  # (K, P') signed event counts per step
    kk, pp = np.nonzero(dm)
    cnt = np.abs(dm[kk, pp])
    rep = np.repeat(np.arange(len(kk)), cnt)
    j = np.arange(len(rep)) - np.repeat(np.cumsum(cnt) - cnt, cnt)  # 0..cnt-1 within a pixel-step
    return act[pp[rep]], (kk[rep] + (j + 1) / (cnt[rep] + 1)) * step_us, dm[kk, pp][rep] > 0


def render_events(scene: dict[str, Any], side: int, rng: np.random.Generator, fine_steps: int = 48,
                  threshold: float = 0.25, noise_rate: float = 0.02, duration_us: int = 1_000_000) -> np.ndarray:
    """Scene -> event stream (structured array, ``EVENT_DTYPE``, sorted by ``t``) on an ``S x S`` sensor."""
    t = np.linspace(0.0, 1.0, fine_steps + 1)
    alpha = scene_alpha(scene, t, side)  # (K + 1, S, S)
    logi = np.log(scene["bg"] + (scene["fg"] - scene["bg"]) * alpha.reshape(len(t), -1) + 1e-3)  # (K + 1, S*S)
    thr = np.maximum(threshold * (1 + 0.1 * rng.standard_normal((side, side))), 0.05 * threshold)
    pix, t_us, pol = contrast_events(logi, thr.reshape(-1), duration_us / fine_steps)
    ts = [t_us]
    xs, ys, ps = [pix % side], [pix // side], [pol]
    n_noise = rng.poisson(noise_rate * side * side)
    xs.append(rng.integers(0, side, n_noise)), ys.append(rng.integers(0, side, n_noise))
    ts.append(rng.uniform(0, duration_us, n_noise)), ps.append(rng.random(n_noise) < 0.5)
    ev = np.empty(sum(len(v) for v in ts), dtype=EVENT_DTYPE)
    ev["x"], ev["y"] = np.concatenate(xs), np.concatenate(ys)
    ev["t"], ev["p"] = np.round(np.concatenate(ts)).astype(np.int64), np.concatenate(ps)
    return ev[np.argsort(ev["t"], kind="stable")]


def events_to_voxels(events: np.ndarray, side: int, time_bins: int) -> np.ndarray:
    """Bin a stream with tonic's ``ToFrame`` -> ``(2, T, S, S)`` float32 counts (polarity first)."""
    if len(events) == 0 or events["t"][-1] - events["t"][0] < time_bins:  # tonic cannot bin these
        return np.zeros((2, time_bins, side, side), dtype=np.float32)
    from tonic.transforms import ToFrame  # deferred: start-up time (tonic, ~0.2 s)

    frames = ToFrame(sensor_size=(side, side, 2), n_time_bins=time_bins)(events)  # (T, 2, S, S)
    return np.ascontiguousarray(frames.transpose(1, 0, 2, 3), dtype=np.float32)


def _render_voxels(scene: dict[str, Any], resolution: tuple[int, ...], rng: np.random.Generator,
                   **kw: Any) -> np.ndarray:
    bins, side = resolution
    return events_to_voxels(render_events(scene, side, rng, **kw), side, bins)


class EventDataset(SyntheticDataset):
    """Adds access to the raw event stream of a sample."""

    def __init__(self, *args: Any, event_kw: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.event_kw = event_kw
        self.time_bins, self.side = self.resolution
        self.sensor_size = (self.side, self.side, 2)

    def render_rng(self, i: int) -> np.random.Generator:  # side only: same stream for any bin count
        return np.random.default_rng([self.seed, self.split_id, self._index(i), 1, self.side])

    def events(self, i: int) -> np.ndarray:
        """Raw stream of sample ``i`` (structured array, tonic dtype, sorted by ``t``)."""
        return render_events(self.scene(i), self.side, self.render_rng(i), **self.event_kw)

    def to_voxels(self, events: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(events_to_voxels(events, self.side, self.time_bins))


class SpikingEventDataset(EventDataset):
    """``tokens=spiking``: index -> ``(SpikeTokens, label)``; batches padded by ``pad_collate``.

    ``augment`` (training) transforms ``(events, label)``; ``stream_transform(events, i)``
    (robustness) perturbs the stream of sample ``i`` before tokenization."""

    def __init__(self, *args: Any, spiking: SpikingOptions, augment: Augment | None = None, **kwargs: Any) -> None:

        super().__init__(*args, **kwargs)
        self.spiking, self.augment = spiking, augment
        self.stream_transform: Any = None
        self.collate_fn = pad_collate

    def tokens(self, events: np.ndarray):
        return self.spiking.tokenize(events, (self.side, self.side))

    def __getitem__(self, i: int):
        scene = self.scene(i)
        events = render_events(scene, self.side, self.render_rng(i), **self.event_kw)
        label = int(scene["label"])
        if self.augment is not None:
            events, label = self.augment(events, label)
        if self.stream_transform is not None:
            events = self.stream_transform(events, int(i))
        return self.tokens(events), label


@register_datamodule("synthetic-events")
class SyntheticEventsDataModule(SyntheticSplitsDataModule):
    """8 DVS-like classes (quadrant jumps or gestures); see the module docstring."""

    modality = "events"
    in_chans = 2  # polarities
    needs_data_root = False
    default_resolution = "8x32"
    patch_size = 4
    tubelet = 2
    num_groups = 64
    option_help = {**SPIKING_HELP, "scene": "jumps = object jumps between neighbouring quadrants (label = where "
                   "and in which order; no-PE ceiling 1/8, relative PEs 4/8); hops = object jumps 3 blocks in "
                   "one of 8 directions (label = direction: relative place and order; no-PE ceiling 1/8); "
                   "gestures = DVS-Gesture-like motions"}

    def __init__(self, train_size: int = 4096, val_size: int = 512, time_bins: int = 8, fine_steps: int = 48,
                 threshold: float = 0.25, noise_rate: float = 0.02, scene: str = "jumps", tokens: str = "frames",
                 spike_threshold: int = 12, refractory_ms: float = 2.0, time_scale_ms: float = 50.0,
                 age_buckets: int = 8, max_tokens: int = 256, augment: bool = False, **kwargs: Any) -> None:
        if kwargs.get("resolution") is None:
            kwargs["resolution"] = f"{int(time_bins)}x32"
        super().__init__(**kwargs)
        self.train_size = int_option(self.name, "train_size", train_size)
        self.val_size = int_option(self.name, "val_size", val_size)
        self.time_bins = int_option(self.name, "time_bins", time_bins)
        if str(scene) not in SCENES:
            raise ConfigError(f"{self.name}: data option scene must be one of {', '.join(SCENES)}, got {scene!r}")
        self.scene = str(scene)
        self.tokens = parse_tokens(self.name, tokens)
        self.spiking = SpikingOptions.parse(self.name, self.patch_size, spike_threshold, refractory_ms, time_scale_ms,
                                            age_buckets, max_tokens)
        self.augment = augment if isinstance(augment, bool) else str(augment).lower() in ("1", "true", "yes")
        if self.augment and self.tokens != "spiking":
            raise ConfigError(f"{self.name}: data option augment applies to tokens=spiking")
        self.event_kw = {"fine_steps": int(fine_steps), "threshold": float(threshold), "noise_rate": float(noise_rate)}
        self.resolution = self._res(self.resolution)

    @property
    def num_classes(self) -> int:
        return len(GESTURES)

    def tokenizer_options(self) -> dict[str, Any]:
        """``tokens=spiking``: :meth:`SpikingOptions.record`; frames need nothing."""
        return self.spiking.record() if self.tokens == "spiking" else {}

    def _res(self, resolution: Any) -> tuple[int, int]:
        if resolution is None:
            return self.resolution
        res = resolution if isinstance(resolution, tuple) else parse_resolution(resolution)
        res = (self.time_bins, res[0]) if len(res) == 1 else tuple(res)
        check_size("event voxel size (time bins x side)", res)
        return res

    def input_shape(self, resolution: Any = None) -> tuple[int, ...]:
        t, s = self._res(resolution)
        return (self.in_chans, t, s, s)

    def _dataset(self, split: str, size: int, resolution: Any) -> EventDataset:
        scene_fn = SCENE_FNS.get(self.scene, events_scene)
        args = (scene_fn, partial(_render_voxels, **self.event_kw), size, self.seed, split, self._res(resolution))
        if self.tokens == "spiking":
            side = self._res(resolution)[1]
            aug = Augment((side, side, 2), FLIP_LABEL[self.scene]) if self.augment and split == "train" else None
            return SpikingEventDataset(*args, event_kw=self.event_kw, spiking=self.spiking, augment=aug)
        return EventDataset(*args, event_kw=self.event_kw)

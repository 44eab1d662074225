"""Event streams as events: the ``tokens=frames|spiking`` data option, training augmentations
and stream perturbations, all on raw structured streams (``x, y, p, t``; ``t`` in µs).

* ``tokens=spiking`` (:class:`SpikingOptions`): each sample becomes spiking-patch tokens
  (:func:`pebench.datamodules.events.spiking.spiking_patches`, in the loader's workers) and batches are padded
  with a key mask (:func:`pebench.datamodules.events.spiking.pad_collate`). Options: ``spike_threshold``
  (events per token), ``refractory_ms``, ``time_scale_ms`` (unit of the ``t`` coordinate),
  ``age_buckets`` (K), ``max_tokens`` (cap per sample, most recent kept; 0 = no cap).
* Training augmentations (``augment=true``), as in the PaPE harness's event pipeline, through
  tonic's transforms: horizontal flip (tonic ``RandomFlipLR`` with ``p=1`` applied on a coin
  drawn here, so the label can be remapped: left/right gestures swap), a small rotation
  (:func:`random_rotate`, uniform in ``±ROTATE_DEGREES`` = 15° about the sensor centre; tonic 1.7
  has no rotation transform, so it is written here), drop-by-time
  (``DropEventByTime``, 10-20 % of the duration), drop-by-area (``DropEventByArea``, a box of 10-20 % of
  the sensor side; the ratio is drawn here because tonic 1.7 draws a ``(lo, hi)`` tuple from
  ``[hi, 1)``), drop-event (``DropEvent``, p in [0, 0.1]). tonic draws from numpy's global
  generator, which Lightning seeds per worker; so does the rotation.
* Stream perturbations for robustness (:data:`STREAM_SHIFTS`), applied before tokenization with
  an explicit ``numpy.random.Generator`` so they are reproducible: ``dropout`` (each event dropped
  with probability ``p``), ``noise`` (``rate ×`` the stream's event count of uniform events over
  the sensor and the stream's time span, random polarity), ``time_jitter`` (Gaussian jitter of
  ``std_ms`` on every timestamp, clipped to the stream's span, re-sorted).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from pebench.core.errors import ConfigError

from ..base import float_option, int_option
from .spiking import spiking_patches

__all__ = ["SpikingOptions", "parse_tokens", "Augment", "rotate_events", "random_rotate", "ROTATE_DEGREES",
           "STREAM_SHIFTS", "STREAM_SHIFT_PARAMS", "stream_dropout",
           "StreamShift", "stream_shift_loaders", "spiking_analyses", "SPIKING_ANALYSES",
           "stream_noise", "stream_time_jitter", "TOKENS", "SPIKING_HELP"]

TOKENS = ("frames", "spiking")

SPIKING_HELP = {
    "tokens": "event tokens: frames = binned voxel tubelets on a grid; spiking = asynchronous spiking-patch "
              "tokens with continuous time coords and a padding mask",
    "spike_threshold": "tokens=spiking: events a patch counts before it fires a token",
    "refractory_ms": "tokens=spiking: a patch ignores its events for this long after it fires",
    "time_scale_ms": "tokens=spiking: unit of the token time coordinate t",
    "age_buckets": "tokens=spiking: K log-spaced event-age buckets (1 ms * 2^k) of a token's count volume",
    "max_tokens": "tokens=spiking: cap on tokens per sample, the most recent kept (0 = no cap)",
    "augment": "training augmentation: flip (labels remapped), rotation (±15°), drop by time / area, drop events",
}


def parse_tokens(dataset: str, tokens: Any) -> str:
    t = str(tokens).strip().lower()
    if t not in TOKENS:
        raise ValueError(f"{dataset}: data option tokens must be one of {', '.join(TOKENS)}, got {tokens!r}")
    return t


@dataclass(frozen=True)
class SpikingOptions:
    """Validated spiking-tokenizer options; :meth:`kwargs` feeds ``spiking_patches``."""

    patch: int
    threshold: int
    refractory_ms: float
    time_scale_ms: float
    buckets: int
    max_tokens: int  # 0 = no cap

    @classmethod
    def parse(cls, dataset: str, patch: int, spike_threshold: Any, refractory_ms: Any, time_scale_ms: Any,
              age_buckets: Any, max_tokens: Any) -> "SpikingOptions":
        ts = float_option(dataset, "time_scale_ms", time_scale_ms)
        if ts <= 0:
            raise ValueError(f"{dataset}: data option time_scale_ms must be > 0, got {time_scale_ms!r}")
        return cls(int(patch), int_option(dataset, "spike_threshold", spike_threshold),
                   float_option(dataset, "refractory_ms", refractory_ms), ts,
                   int_option(dataset, "age_buckets", age_buckets), int_option(dataset, "max_tokens", max_tokens, 0))

    def kwargs(self) -> dict[str, Any]:
        return {"patch": self.patch, "threshold": self.threshold, "refractory_us": int(round(self.refractory_ms * 1000)),
                "buckets": self.buckets, "time_scale_us": self.time_scale_ms * 1000.0,
                "max_tokens": self.max_tokens or None}

    def record(self) -> dict[str, Any]:
        """What the model's tokenizer needs (the age-bucket count) and, as a record in the task's
        hyper-parameters, the loader's other spiking settings (cap included)."""
        return {"buckets": self.buckets, "threshold": self.threshold, "refractory_ms": self.refractory_ms,
                "time_scale_ms": self.time_scale_ms, "max_tokens": self.max_tokens}

    def tokenize(self, events: np.ndarray, sensor_hw: Sequence[int]):

        return spiking_patches(events, sensor_hw, **self.kwargs())


#: largest angle (degrees) of the training rotation
ROTATE_DEGREES = 15.0


def rotate_events(events: np.ndarray, sensor_size: Sequence[int], degrees: float) -> np.ndarray:
    """Rotate every event's pixel by ``degrees`` (counter-clockwise on screen, y down) about the
    sensor centre ``((W-1)/2, (H-1)/2)`` (``sensor_size = (W, H, P)``, tonic's order), round to the
    nearest pixel and drop the events that leave the sensor. Polarity and time are kept."""
    W, H = int(sensor_size[0]), int(sensor_size[1])
    th = np.deg2rad(degrees)
    cx, cy = (W - 1) / 2.0, (H - 1) / 2.0
    dx, dy = events["x"].astype(np.float64) - cx, events["y"].astype(np.float64) - cy
    x = np.rint(cx + np.cos(th) * dx + np.sin(th) * dy)  # y down: screen-ccw is (dx, dy) -> (c dx + s dy, -s dx + c dy)
    y = np.rint(cy - np.sin(th) * dx + np.cos(th) * dy)
    keep = (x >= 0) & (x < W) & (y >= 0) & (y < H)
    out = events[keep].copy()
    out["x"], out["y"] = x[keep].astype(out["x"].dtype), y[keep].astype(out["y"].dtype)
    return out


def random_rotate(events: np.ndarray, sensor_size: Sequence[int], max_degrees: float = ROTATE_DEGREES) -> np.ndarray:
    """:func:`rotate_events` by an angle uniform in ``[-max_degrees, max_degrees]`` (numpy's global
    generator, like tonic's random transforms)."""
    return rotate_events(events, sensor_size, np.random.uniform(-max_degrees, max_degrees))


class Augment:
    """Training augmentation of a stream and its label (module docstring); picklable."""

    def __init__(self, sensor_size: tuple[int, int, int], flip_label: Sequence[int] | None,
                 rotate_degrees: float = ROTATE_DEGREES) -> None:
        self.sensor_size, self.flip_label = tuple(sensor_size), None if flip_label is None else list(flip_label)
        self.rotate_degrees = float(rotate_degrees)

    def __call__(self, events: np.ndarray, label: int) -> tuple[np.ndarray, int]:
        import tonic.transforms as T  # deferred: start-up time (tonic, ~0.2 s)

        if self.flip_label is not None and np.random.rand() < 0.5:
            events = T.RandomFlipLR(sensor_size=self.sensor_size, p=1.0)(events)
            label = self.flip_label[label]
        if self.rotate_degrees > 0 and len(events):
            events = random_rotate(events, self.sensor_size, self.rotate_degrees)
        side = self.sensor_size[0]
        if len(events) > 1 and events["t"][-1] > events["t"][0]:
            events = T.DropEventByTime(duration_ratio=(0.1, 0.2))(events)
        if len(events):
            # tonic's drop_by_area takes ratio * sensor side as the box side; keep the box >= 1 pixel.
            # The ratio is drawn here: tonic 1.7 draws a (lo, hi) tuple as uniform(hi), i.e. in [hi, 1),
            # which dropped boxes of up to the whole sensor
            ratio = float(np.random.uniform(max(0.1, 1.0 / side), 0.2))
            events = T.DropEventByArea(sensor_size=self.sensor_size, area_ratio=ratio)(events)
            events = T.DropEvent(p=(0.0, 0.1))(events)
        return events, label


# ------------------------------------------------------------------------------- perturbations
def stream_dropout(events: np.ndarray, rng: np.random.Generator, p: float = 0.5, **_: Any) -> np.ndarray:
    """Each event dropped independently with probability ``p``."""
    return events[rng.random(len(events)) >= p]


def stream_noise(events: np.ndarray, rng: np.random.Generator, sensor_hw: Sequence[int], rate: float = 0.5,
                 **_: Any) -> np.ndarray:
    """Add ``round(rate * len(events))`` uniform background events (sensor x span x polarity)."""
    n = int(round(rate * len(events)))
    if n == 0 or len(events) == 0:
        return events
    noise = np.empty(n, dtype=events.dtype)
    noise["x"] = rng.integers(0, sensor_hw[1], n)
    noise["y"] = rng.integers(0, sensor_hw[0], n)
    noise["p"] = rng.random(n) < 0.5
    noise["t"] = rng.integers(int(events["t"].min()), int(events["t"].max()) + 1, n)
    out = np.concatenate([events, noise])
    return out[np.argsort(out["t"], kind="stable")]


def stream_time_jitter(events: np.ndarray, rng: np.random.Generator, std_ms: float = 10.0, **_: Any) -> np.ndarray:
    """Gaussian jitter of ``std_ms`` on every timestamp, clipped to the stream's span, re-sorted."""
    if len(events) == 0:
        return events
    out = events.copy()
    t = out["t"].astype(np.float64) + rng.normal(0.0, std_ms * 1000.0, len(out))
    out["t"] = np.clip(np.round(t), events["t"].min(), events["t"].max()).astype(out["t"].dtype)
    return out[np.argsort(out["t"], kind="stable")]


#: robustness shifts on raw streams: name -> fn(events, rng, sensor_hw=..., **params)
STREAM_SHIFTS: dict[str, Callable[..., np.ndarray]] = {
    "dropout": stream_dropout, "noise": stream_noise, "time_jitter": stream_time_jitter}
STREAM_SHIFT_PARAMS: dict[str, dict[str, float]] = {
    "dropout": {"p": 0.5}, "noise": {"rate": 0.5}, "time_jitter": {"std_ms": 10.0}}


#: analyses that apply to spiking-patch tokens (per-sample coords, padding): robustness perturbs
#: the raw streams; SSDC/EED (geometry), the alpha sweep and resolution extrapolation assume one
#: token grid shared by the batch
SPIKING_ANALYSES = ("robustness",)


def spiking_analyses(analyses: Sequence[str], explicit: bool) -> list[str]:
    """The analyses of a ``tokens=spiking`` run: those that do not apply are dropped from the
    defaults (and from ``all``); asked for by name they are a one-line error."""
    bad = [a for a in analyses if a not in SPIKING_ANALYSES]
    if bad and explicit:
        raise ConfigError(f"analysis {bad[0]!r} does not apply to tokens=spiking (per-sample token coords with "
                         f"padding, no shared grid); available: {', '.join(SPIKING_ANALYSES)}, none")
    return [a for a in analyses if a in SPIKING_ANALYSES]


class StreamShift:
    """``stream_transform`` of a spiking dataset: shift ``name`` on sample ``index`` with its own
    generator ``default_rng([seed, index])`` (independent of batching and workers); picklable."""

    def __init__(self, name: str, params: dict[str, float], seed: int, sensor_hw: Sequence[int]) -> None:
        if name not in STREAM_SHIFTS:
            raise ValueError(f"unknown event-stream shift {name!r}; available: {', '.join(STREAM_SHIFTS)}")
        self.name, self.params, self.seed, self.sensor_hw = name, dict(params), int(seed), tuple(sensor_hw)

    def __call__(self, events: np.ndarray, index: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, int(index)])
        return STREAM_SHIFTS[self.name](events, rng, sensor_hw=self.sensor_hw, **self.params)


def stream_shift_loaders(datamodule: Any, params: dict[str, dict[str, float]], seed: int) -> dict[str, Any]:
    """One validation loader per shift in ``params`` (name -> parameters), in a fixed order, whose
    streams are perturbed before tokenization (``tokens=spiking`` datamodules)."""
    out = {}
    for k, (name, prm) in enumerate(params.items()):
        ds = datamodule.val_dataset()
        side = int(getattr(ds, "side", 0) or ds.size)
        ds.stream_transform = StreamShift(name, prm, (int(seed) * 1_000_003 + 7919 * (k + 1)) % (2 ** 63), (side, side))
        out[name] = datamodule._loader(ds, shuffle=False)
    return out

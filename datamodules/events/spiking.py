"""Spiking-patch tokens: event streams as asynchronous tokens with continuous time coordinates.

Tokenization as described for the "Spiking Patches" tokenizer of the PaPE paper's event
experiments (Parabolic Position Encoding, event-camera results on DvsGesture / GEN1), written
from that description (no code copied):

* The sensor is cut into ``patch x patch`` cells (``H // patch`` rows, ``W // patch`` columns;
  events in a remainder strip are dropped). Each cell counts the events it receives, in time
  order. When its count reaches ``threshold`` it **fires a token** at the time ``t_f`` of that
  event, resets its count to 0 and **ignores its events for a refractory period** ``R``: an event
  at ``t`` with ``t - t_f < R`` is neither counted nor absorbed. Events left over at the end of
  the stream (a count below ``threshold``) emit nothing. So every token absorbs exactly
  ``threshold`` events.
* A token's content is the ``2 x K x patch x patch`` count volume of the events it absorbed:
  polarity (0 = OFF, 1 = ON), age bucket, row and column inside the cell. The age of an event
  is ``a = t_f - t`` (>= 0); with edges ``e_k = 1 ms * 2^k`` (k = 0 .. K-2) its bucket is the
  number of edges ``<= a``: bucket 0 is ``a < 1 ms``, bucket ``k`` is ``2^(k-1) ms <= a < 2^k ms``,
  the last bucket ``K-1`` holds every ``a >= 2^(K-2) ms``. Counts are compressed with
  ``log1p`` and embedded by one linear map to ``D`` (:class:`pebench.models.spiking.SpikingPatchTokenizer`;
  a conv whose kernel covers the whole volume is the same map).
* Coordinates ``(t, y, x)``: ``t = (t_f - t_0) / time_scale`` with ``t_0`` the stream's first
  event and ``time_scale`` in microseconds (option; 50 ms on DvsGesture, 100 ms on GEN1, as in
  the PaPE harness), continuous; ``y, x`` the cell's row and column (patch units, as the grid
  tokenizers). ``grid = None``: the tokens are not a regular grid, so every PE takes its
  coordinate path (``ape`` uses its coordinate MLP: ``train_grid_for`` gives ``None``).
* Variable token count: a cap ``max_tokens`` keeps the **most recent** tokens (largest ``t_f``)
  when a stream fires more; tokens are returned in firing order (ties by cell index). Samples
  of a batch are padded to the longest (zero volume, coords 0) and a key mask ``(B, N)`` (True =
  real token) travels with them; the backbone masks padded keys in every attention call and
  mean pooling averages real tokens only. A stream that fires no token gets one empty token
  (zero volume at coords ``(0, 0, 0)``), so attention always has a key to attend to.

Vectorised numpy: the only Python loop runs over the *firing rounds* (the most tokens one cell
fires, about ``duration / R``), each round advancing every cell at once with ``searchsorted``;
volumes come from one ``bincount``.

This module is the data side (it runs in the loaders' workers and defines the batch type);
the model side, the tokenizer that embeds the volumes, is :mod:`pebench.models.spiking`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = ["detection_spiking_collate", "spiking_patches", "age_bucket", "SpikeTokens", "EventTokens", "pad_collate", "SPIKING_DEFAULTS",
           "CAP_COUNTS", "cap_report"]

#: defaults of the tokenizer (``threshold`` events, ``refractory_us`` and ``time_scale_us`` in µs)
SPIKING_DEFAULTS = {"threshold": 256, "refractory_us": 100_000, "buckets": 8, "time_scale_us": 50_000}


def age_bucket(age_us: np.ndarray, buckets: int) -> np.ndarray:
    """Age bucket of ages ``>= 0`` in µs: the number of edges ``1 ms * 2^k`` (k < K-1) ``<= age``."""
    edges = 1000 * (2 ** np.arange(buckets - 1, dtype=np.int64))  # (K-1,) µs
    return np.searchsorted(edges, np.asarray(age_us), side="right")


@functools.lru_cache(maxsize=8)
def log1p_table(threshold: int) -> np.ndarray:
    """``float32 log1p`` of the counts ``0 .. threshold`` (one token absorbs ``threshold`` events), read-only."""
    table = np.log1p(np.arange(threshold + 1, dtype=np.float32))
    table.flags.writeable = False
    return table


@dataclass
class SpikeTokens:
    """One stream's tokens: ``volumes (N, 2, K, p, p)`` log1p counts, ``coords (N, 3)`` (t, y, x),
    ``fired`` = tokens before the cap (``>= N`` unless the stream was empty)."""

    volumes: np.ndarray
    coords: np.ndarray
    fired: int


def spiking_patches(events: np.ndarray, sensor_hw: Sequence[int], patch: int, threshold: int = 256,
                    refractory_us: int = 100_000, buckets: int = 8, time_scale_us: float = 50_000.0,
                    max_tokens: int | None = None) -> SpikeTokens:
    """Structured events (``x, y, p, t``; ``t`` in µs) -> :class:`SpikeTokens` (module docstring).

    Events need not be sorted (a stable sort by ``t`` is applied when they are not)."""
    if threshold < 1 or patch < 1 or buckets < 1 or refractory_us < 0 or time_scale_us <= 0:
        raise ValueError("spiking_patches: threshold, patch, buckets >= 1, refractory >= 0, time_scale > 0")
    H, W = int(sensor_hw[0]), int(sensor_hw[1])
    gh, gw = H // patch, W // patch
    vol_shape = (2, buckets, patch, patch)
    empty = SpikeTokens(np.zeros((0, *vol_shape), np.float32), np.zeros((0, 3), np.float32), 0)
    if len(events) == 0 or gh == 0 or gw == 0:
        return empty
    t = events["t"].astype(np.int64)
    if np.any(t[1:] < t[:-1]):
        o = np.argsort(t, kind="stable")
        events, t = events[o], t[o]
    t0 = int(t[0])
    x, y = events["x"].astype(np.int64), events["y"].astype(np.int64)
    pol = events["p"].astype(np.int64)
    t = t - t0
    if not (x.min() >= 0 and y.min() >= 0 and x.max() < gw * patch and y.max() < gh * patch):
        # events in a remainder strip (or off the sensor): dropped. Checked first because the boolean
        # indexing of four stream-long arrays took a quarter of a DvsGesture-scale call, and no event falls
        # outside when the patch divides the sensor
        keep = (x >= 0) & (y >= 0) & (x < gw * patch) & (y < gh * patch)
        x, y, t, pol = x[keep], y[keep], t[keep], pol[keep]
        if len(t) == 0:
            return empty
    cell = (y // patch) * gw + (x // patch)  # (E,)
    # stable: time order kept inside a cell; 16-bit keys get numpy's O(E) radix sort
    order = np.argsort(cell.astype(np.int16) if gh * gw <= np.iinfo(np.int16).max else cell, kind="stable")
    cs, ts = cell[order], t[order]
    n_cells = gh * gw
    starts = np.searchsorted(cs, np.arange(n_cells), side="left")
    ends = np.searchsorted(cs, np.arange(n_cells), side="right")
    span = int(ts.max()) + int(refractory_us) + 1
    key = cs * span + ts  # sorted: (cell, t)
    ptr = starts.copy()  # first event of each cell's current accumulation
    active = np.flatnonzero(ends - starts >= threshold)
    f_cell, f_first, f_last = [], [], []
    while active.size:
        last = ptr[active] + threshold - 1  # the event that makes the count reach threshold
        f_cell.append(active), f_first.append(ptr[active]), f_last.append(last)
        tf = ts[last]
        nxt = np.searchsorted(key, active * span + tf + int(refractory_us), side="left")  # first t >= t_f + R
        ptr[active] = np.maximum(nxt, last + 1)
        active = active[ends[active] - ptr[active] >= threshold]
    if not f_cell:
        return empty
    fc, ff, fl = np.concatenate(f_cell), np.concatenate(f_first), np.concatenate(f_last)
    tf = ts[fl]
    o = np.lexsort((fc, tf))  # firing order, ties by cell
    fired = len(o)
    if max_tokens is not None and fired > max_tokens:
        o = o[fired - max_tokens:]  # the most recent
    fc, ff, tf = fc[o], ff[o], tf[o]
    F = len(fc)
    idx = (ff[:, None] + np.arange(threshold)[None]).reshape(-1)  # (F * threshold,) absorbed events
    ev = order[idx]
    bucket = np.minimum(age_bucket(np.repeat(tf, threshold) - ts[idx], buckets), buckets - 1)
    flat = (((np.repeat(np.arange(F), threshold) * 2 + pol[ev]) * buckets + bucket) * patch
            + y[ev] % patch) * patch + x[ev] % patch
    counts = np.bincount(flat, minlength=F * 2 * buckets * patch * patch)  # each in 0 .. threshold
    # log1p of a count is read from a table of the threshold + 1 values it can take (the same float32
    # log1p of the same float32 inputs, so the same bits as applying it to the counts, and log1p(0) = 0):
    # finding the non-zero counts and scattering their log1p took twice as long as this one gather
    volumes = log1p_table(threshold)[counts].reshape(F, *vol_shape)  # (F, 2, K, p, p)
    coords = np.stack([tf / float(time_scale_us), fc // gw, fc % gw], axis=1).astype(np.float32)  # (F, 3)
    return SpikeTokens(volumes, coords, fired)


@dataclass
class EventTokens:
    """A padded batch of spiking-patch tokens (the model input of ``tokens=spiking``).

    ``volumes (B, N, 2, K, p, p)`` (float16 in loaders, to halve their memory), ``coords (B, N, 3)``
    float32, ``mask (B, N)`` bool (True = real token). Lightning moves it between devices as a
    dataclass; ``to``, indexing / slicing over the batch and ``len`` make it usable where code
    handles a batch tensor."""

    volumes: Tensor
    coords: Tensor
    mask: Tensor

    def to(self, *args: Any, **kwargs: Any) -> "EventTokens":
        """``volumes.to(...)``; coords and mask follow it to its device (they keep their dtypes)."""
        v = self.volumes.to(*args, **kwargs)
        return EventTokens(v, self.coords.to(v.device), self.mask.to(v.device))

    def __getitem__(self, i: Any) -> "EventTokens":
        if isinstance(i, int):
            i = slice(i, i + 1)
        return EventTokens(self.volumes[i], self.coords[i], self.mask[i])

    def __len__(self) -> int:
        return int(self.mask.shape[0])

    @property
    def shape(self) -> torch.Size:
        """``(B, N)``: batch size and padded token count."""
        return self.mask.shape

    @property
    def device(self) -> torch.device:
        return self.coords.device

    @property
    def is_cuda(self) -> bool:
        return self.coords.is_cuda


#: per-batch counts ``pad_collate`` adds to the batch's info dict (summed over a split by ``bench run``,
#: results.json ``token_cap``): samples that fired more tokens than the cap, tokens fired, tokens kept
CAP_COUNTS = ("capped", "tokens_fired", "tokens_kept")


def pad_collate(batch: Sequence[Any]) -> tuple[EventTokens, Tensor, dict[str, int]]:
    """``[(SpikeTokens, label) | None]`` -> ``(EventTokens, labels (B,), info)``, ``info`` =
    ``{"skipped": n, "capped": samples whose stream fired more than the cap, "tokens_fired": sum,
    "tokens_kept": sum}`` (:data:`CAP_COUNTS`).

    Pads to the longest sample; a sample without tokens gets one empty real token (docstring)."""
    kept = [b for b in batch if b is not None]
    skipped = len(batch) - len(kept)
    if not kept:
        z = torch.zeros(0, 1, 2, 1, 1, 1, dtype=torch.float16)
        return EventTokens(z, torch.zeros(0, 1, 3), torch.zeros(0, 1, dtype=torch.bool)), \
            torch.empty(0, dtype=torch.long), {"skipped": skipped, **dict.fromkeys(CAP_COUNTS, 0)}
    vol_shape = kept[0][0].volumes.shape[1:]
    n = max(1, max(len(s.coords) for s, _ in kept))
    B = len(kept)
    volumes = torch.zeros(B, n, *vol_shape, dtype=torch.float16)
    coords = torch.zeros(B, n, 3)
    mask = torch.zeros(B, n, dtype=torch.bool)
    for b, (s, _) in enumerate(kept):
        k = len(s.coords)
        volumes[b, :k] = torch.from_numpy(s.volumes)
        coords[b, :k] = torch.from_numpy(s.coords)
        mask[b, :max(k, 1)] = True
    labels = torch.tensor([int(lbl) for _, lbl in kept], dtype=torch.long)
    info = {"skipped": skipped, "capped": sum(int(s.fired > len(s.coords)) for s, _ in kept),
            "tokens_fired": sum(int(s.fired) for s, _ in kept), "tokens_kept": sum(len(s.coords) for s, _ in kept)}
    return EventTokens(volumes, coords, mask), labels, info


def cap_report(max_tokens: int, counts: dict[str, Sequence[int]]) -> dict[str, Any]:
    """results.json ``token_cap``: how often the per-sample cap was hit.

    ``counts``: split -> ``(samples, capped, tokens_fired, tokens_kept)`` summed over the split's
    batches (training: every epoch of this attempt; validation: the last pass). Per split:
    ``samples``, ``capped`` (samples that fired more tokens than ``max_tokens``; their oldest
    tokens were dropped), ``capped_fraction``, ``tokens_per_sample`` (mean kept) and
    ``fired_per_sample`` (mean fired, before the cap). ``max_tokens`` 0 = no cap."""
    out: dict[str, Any] = {"max_tokens": int(max_tokens) or None}
    for split, (n, capped, fired, kept) in counts.items():
        out[split] = {"samples": int(n), "capped": int(capped),
                      "capped_fraction": round(capped / n, 6) if n else None,
                      "tokens_per_sample": round(kept / n, 3) if n else None,
                      "fired_per_sample": round(fired / n, 3) if n else None}
    return out


def detection_spiking_collate(batch: Sequence[Any]) -> tuple[Any, list[dict], dict[str, int]]:
    """``[(SpikeTokens, target) | None]`` -> ``(EventTokens (B, N, ...), [target] * B, info)``: the
    classification collate (:func:`pad_collate`: padding, key mask, skip and
    cap counts) with the targets kept as the list of dicts (it would make class labels of them)."""

    tokens, _, info = pad_collate([None if b is None else (b[0], 0) for b in batch])
    return tokens, [b[1] for b in batch if b is not None], info

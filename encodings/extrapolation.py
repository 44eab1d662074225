"""Extrapolation rules: how a PE trained on one token grid is evaluated on another, as one PE option.

A PE that supports them declares the option ``extrapolation`` (``--pe-option extrapolation=<rule>``,
recorded with the other PE options in ``config.yaml`` / ``results.json``); ``native`` (the default) is
what the PE always did. A rule acts only in evaluation (``model.eval()``) and only when the token grid
differs from the training grid ``G``; training, and evaluation at ``G``, are unchanged by every rule.

Notation: coordinates ``c_a`` are patch indices counted from 0 on axis ``a`` (what the tokenizers give);
the evaluation grid's extent on axis ``a`` is ``E_a = max c_a - min c_a + 1`` (its grid size for grid
tokens); the per-axis scale is ``s_a = E_a / G_a`` and the token-count scale ``s = prod_a s_a``.

RoPE family (``rope-axial``; rule names :data:`ROPE_RULES`). A RoPE rotates channel pair ``k`` of
axis ``a`` by ``c_a w_k`` with the ladder ``w_k = base^(-k/F)``, ``k = 0..F-1``:

* ``native``: the coordinates as they are (rotations of positions never seen in training).
* ``pi``: position interpolation (Chen et al., 2023, "Extending Context Window of Large Language
  Models via Positional Interpolation"): ``c_a -> c_a / s_a``, which maps the evaluation grid onto the
  training range (applied for ``s_a < 1`` too).
* ``ntk``: NTK-aware scaling (bloc97, 2023, as written in Peng et al. 2023, YaRN, Sec. 3.1 / eq. 16):
  the base becomes ``base * s_a^(|D| / (|D| - 2))`` with ``|D| = 2F`` channels per ladder, i.e.
  ``w_k -> w_k * s_a^(-k / (F - 1))``: the highest frequency is kept, the lowest interpolated by
  ``1 / s_a``. Only for ``s_a > 1`` (extension); ``F >= 2`` needed.
* ``yarn``: YaRN (Peng et al., ICLR 2024, "YaRN: Efficient Context Window Extension of Large Language
  Models"), "NTK-by-parts" plus attention temperature. Per pair, ``r = G_a / lambda_k`` with the
  wavelength ``lambda_k = 2 pi / w_k`` (rotations over the training extent), the ramp
  ``gamma = clamp((r - alpha) / (beta - alpha), 0, 1)`` with the published ``alpha = 1``, ``beta = 32``,
  and ``w_k -> (1 - gamma) w_k / s_a + gamma w_k`` (for ``s_a > 1``). The logits are multiplied by
  ``(0.1 ln s + 1)^2`` (q and k each by ``0.1 ln s + 1``, YaRN's ``sqrt(1/t)``), ``s`` the token-count
  scale (pebench's n-D reading of YaRN's context-length ratio; 1 for ``s <= 1``).
* ``normalized``: DINOv3's normalised coordinates (Simeoni et al., 2025, "DINOv3"; its RoPE takes patch
  centres ``(i + 0.5) / E_a`` per axis, ``normalize_coords="separate"``, its default) re-expressed in
  training units: ``c_a -> (c_a + 0.5) G_a / E_a - 0.5``, so the evaluation grid's normalised
  coordinates coincide with the training grid's. For an exactly relative PE it differs from ``pi`` by
  a translation only, which does not change the logits.

Absolute table (``ape``; :data:`TABLE_RULES`): ``native`` resamples the learned table to the new grid
(:func:`resample_table`: timm's ``resample_abs_pos_embed``, bicubic, for 2-D; trilinear for 3-D);
``pi`` and ``normalized`` look the training table up at the mapped coordinates above (linear
interpolation between table rows, :func:`sample_table`, edges clamped).
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import PEConfigError

__all__ = ["ROPE_RULES", "TABLE_RULES", "YARN_ALPHA", "YARN_BETA", "grid_extent", "axis_scales", "map_coords",
           "ntk_frequencies", "yarn_frequencies", "yarn_logit_scale", "resample_table", "sample_table",
           "check_rule", "set_extrapolation", "extrapolation_rules_of"]

#: rules of the RoPE family (see the module docstring)
ROPE_RULES = ("native", "pi", "ntk", "yarn", "normalized")
#: rules of a learned absolute table (ape)
TABLE_RULES = ("native", "pi", "normalized")
#: YaRN's ramp bounds (Peng et al. 2023, the values published for LLaMA)
YARN_ALPHA, YARN_BETA = 1.0, 32.0


def check_rule(pe_name: str, rule: str, rules: Sequence[str], train_grid: Sequence[int] | None) -> str:
    """``rule`` if it is one of ``rules`` and applicable (a rule other than ``native`` needs the
    training grid), else :class:`PEConfigError` (one line)."""
    if rule not in rules:
        raise PEConfigError(f"{pe_name} extrapolation must be one of {', '.join(rules)}, got {rule!r}")
    if rule != "native" and train_grid is None:
        raise PEConfigError(f"{pe_name} extrapolation={rule} needs a training grid (tokens on a grid); "
                            "this model has none (point clouds)")
    return rule


def grid_extent(coords: Tensor) -> tuple[int, ...]:
    """Per-axis extent ``max - min + 1`` (rounded) of coords ``(B, N, p)`` / ``(N, p)`` over all tokens."""
    c = coords.reshape(-1, coords.shape[-1])
    return tuple(int(round(v)) for v in (c.amax(0) - c.amin(0) + 1).tolist())


def axis_scales(train_grid: Sequence[int], extent: Sequence[int]) -> list[float]:
    """``s_a = E_a / G_a`` per axis."""
    return [float(e) / float(g) for e, g in zip(extent, train_grid)]


def map_coords(rule: str, coords: Tensor, train_grid: Sequence[int], extent: Sequence[int]) -> Tensor:
    """Coordinates under a coordinate rule: ``pi`` ``c / s``, ``normalized`` ``(c + 0.5) G / E - 0.5``;
    any other rule leaves them as they are. coords ``(..., p)``."""
    s = torch.tensor(axis_scales(train_grid, extent), dtype=coords.dtype, device=coords.device)  # (p,)
    if rule == "pi":
        return coords / s
    if rule == "normalized":
        return (coords + 0.5) / s - 0.5
    return coords


def ntk_frequencies(omega: Tensor, k: Tensor, n_ladder: int, s: float) -> Tensor:
    """NTK-aware scaling of frequencies ``omega`` whose ladder index is ``k`` in a ladder of ``n_ladder``:
    ``omega * s^(-k / (n_ladder - 1))`` for ``s > 1``, else unchanged."""
    if s <= 1.0:
        return omega
    if n_ladder < 2:
        raise PEConfigError("extrapolation=ntk needs at least 2 frequencies per axis")
    return omega * s ** (-k.to(omega.dtype) / (n_ladder - 1))


def yarn_frequencies(omega: Tensor, train_extent: float, s: float, alpha: float = YARN_ALPHA,
                     beta: float = YARN_BETA) -> Tensor:
    """YaRN's NTK-by-parts frequencies for ``s > 1`` (else unchanged): ramp ``gamma`` of the rotations
    ``r = train_extent * omega / (2 pi)`` over the training extent, ``(1 - gamma) omega / s + gamma omega``."""
    if s <= 1.0:
        return omega
    r = train_extent * omega / (2 * math.pi)
    gamma = ((r - alpha) / (beta - alpha)).clamp(0.0, 1.0)
    return (1 - gamma) * omega / s + gamma * omega


def yarn_logit_scale(s: float) -> float:
    """YaRN's attention temperature as a factor on the logits, ``(0.1 ln s + 1)^2`` (1 for ``s <= 1``)."""
    return (0.1 * math.log(s) + 1.0) ** 2 if s > 1.0 else 1.0


def resample_table(table: Tensor, train_grid: Sequence[int], grid: Sequence[int]) -> Tensor:
    """A learned absolute table ``(1, prod(train_grid), D)`` resampled to ``grid``: ``(prod(grid), D)``
    (2-D: timm's ``resample_abs_pos_embed``, bicubic; 3-D: trilinear, ``align_corners=False``)."""
    from timm.layers import resample_abs_pos_embed  # deferred: only the resampling needs it

    grid, train_grid = [int(g) for g in grid], [int(g) for g in train_grid]
    if len(grid) == 2:
        return resample_abs_pos_embed(table, new_size=grid, old_size=train_grid, num_prefix_tokens=0)[0]
    vol = table.reshape(1, *train_grid, table.shape[-1]).movedim(-1, 1)  # (1, D, t, h, w)
    vol = F.interpolate(vol, size=grid, mode="trilinear", align_corners=False)
    return vol.movedim(1, -1).reshape(-1, table.shape[-1])


def sample_table(table: Tensor, train_grid: Sequence[int], coords: Tensor) -> Tensor:
    """The table ``(1, prod(train_grid), D)`` at continuous table positions ``coords (B, N, p)`` (row
    ``c`` = cell ``c`` of the training grid), (bi/tri)linear between rows, clamped at the edges:
    ``(B, N, D)``."""
    p, D = len(train_grid), table.shape[-1]
    vol = table.reshape(1, *train_grid, D).movedim(-1, 1)  # (1, D, *G)
    B, N = coords.shape[0], coords.shape[1]
    size = torch.tensor([max(g - 1, 1) for g in train_grid], dtype=coords.dtype, device=coords.device)
    norm = (coords / size * 2 - 1).clamp(-1, 1).flip(-1)  # grid_sample wants (x, y[, z]), last axis first
    norm = norm.reshape(1, B * N, *([1] * (p - 1)), p).to(vol.dtype)
    out = F.grid_sample(vol.expand(1, -1, *train_grid), norm, mode="bilinear", padding_mode="border",
                        align_corners=True)  # (1, D, B*N, 1[, 1])
    return out.reshape(D, B * N).T.reshape(B, N, D)


def extrapolation_rules_of(pe: nn.Module | type) -> tuple[str, ...]:
    """The rules the PE (an instance or its class) accepts (its ``extrapolation`` option's choices), ``()`` if
    it has none."""
    cls = pe if isinstance(pe, type) else type(pe)
    for opt in getattr(cls, "options", ()):
        if opt.name == "extrapolation":
            return tuple(opt.choices or ())
    return ()


@contextmanager
def set_extrapolation(pe: nn.Module, rule: str) -> Iterator[None]:
    """Temporarily evaluate ``pe`` (a PE with the ``extrapolation`` option) under ``rule``: one trained
    model compared across rules (:func:`pebench.analysis.extrapolation.evaluate_extrapolation_rules`)."""
    rules = extrapolation_rules_of(pe)
    if not rules:
        raise PEConfigError(f"PE {getattr(pe, 'name', '?')!r} has no extrapolation option")
    old = pe.extrapolation
    check_rule(pe.name, rule, rules, pe.train_grid)
    pe.extrapolation = rule
    try:
        yield
    finally:
        pe.extrapolation = old

"""``cpe``: the conditional positional encoding (PEG) of CPVT, and its kNN form for tokens off a grid.

Paper: Chu et al., ICLR 2023, "Conditional Positional Encodings for Vision Transformers" (CPVT).
The position generator (PEG) is a depthwise 3x3 convolution over the token map, added to the tokens
(``x + conv(x)``, the convolution with a bias); its position signal is implicit, from the zero padding
at the borders of the map and the convolution's fixed neighbourhood. It acts between blocks, through
:meth:`~pebench.encodings.base.PositionalEncoding.after_block`: after block ``after_block`` (0 = after
the first block, the paper's default position), once (see *Placement* for a PEG before every block).

Initialisation and weight decay follow the official PEG (Twins' ``PosCNN`` and timm's ``PosConv``,
the code CPVT's authors released with Twins): the depthwise kernel is drawn from
``N(0, 2 / fan_out)`` with ``fan_out = prod(kernel) * out_channels / groups = 3^p`` (std ``sqrt(2/9)``
for CPVT's 3x3), the bias starts at 0, and every parameter of the PEG is excluded from weight decay
(their ``no_weight_decay`` lists the position block's parameters). pebench's earlier recipe is kept
as options: ``init=torch`` (PyTorch's default convolution init, kernel and bias ``U(-1/3, 1/3)`` for
3x3) and ``decay=true`` (the PEG's kernel decayed like any weight).

Placement (option ``placement``): ``once`` (the default, CPVT's single PEG after block
``after_block``) or ``every``: a PEG of its own before every block (``x + PEG_l(x)`` feeds block
``l``, ``l = 0 .. L-1``; the backbone calls ``after_block(-1, ...)`` before the first block), as
Point Transformer V3 (Wu et al., CVPR 2024) places its conditional PE, xCPE, in front of every block.
PTv3's xCPE generator is a full sparse submanifold 3-D convolution followed by a linear layer and a
LayerNorm; here each position keeps this module's generator (the depthwise grid convolution or the
kNN form), so ``every`` changes where and how often the PE acts, not what it computes.

Two neighbourhoods (option ``mode``; ``auto``: ``grid`` when the PE is built with a training grid,
else ``knn``):

* ``grid``: tokens on a regular grid (``grid`` given at run time). A depthwise convolution with kernel
  3 on every axis over ``p`` axes (p = 2: CPVT's 3x3; p = 3, video / events: 3x3x3; p = 1: 3), zero
  padding. A token's cell is the rank of its coordinate among the distinct coordinates of the sample's
  real tokens, axis by axis, so the map is built from ``coords`` and not from token order: the PE is
  equivariant to permuting tokens together with their coords, invariant to translating (or any
  increasing per-axis affine map of) the coords, and applies to any grid size (extrapolation).
  Tokens on a grid have distinct coords; a grid with a missing row or column of real tokens closes
  the gap (there is no cell for an empty rank).
* ``knn``: tokens that are not on a grid (point groups, spiking-patch tokens; ``grid`` is ``None``).
  The same idea on the token neighbourhood: each token aggregates its ``k`` nearest real tokens
  (itself included; default ``3^p``, the convolution's neighbourhood size; Euclidean distance,
  brute force over all pairs, ties at the k-th distance broken by token order) with per-channel
  weights that are an MLP of the offset, ``out_i = sum_j w(c_j - c_i) * x_j + b``, ``w: R^p -> R^D``
  (two linear layers, hidden width 32, GELU), a continuous depthwise convolution. Offsets are divided by
  the sample's mean distance to the k-th neighbour, so the result does not depend on the coordinate
  unit (patches, metres). No sparse-convolution package is used (Point Transformer V3's xCPE is a
  sparse 3-D convolution on voxels; this is the dense, package-free analogue).

Padding masks: padded tokens neither contribute (they are not placed in the map / not candidates as
neighbours) nor receive (their tokens are returned unchanged). Prefix tokens (CLS) carry no position:
untouched.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pebench.core.options import Option

from .base import CoordsCache, PEConfigError, PositionalEncoding
from .registry import register_pe

__all__ = ["ConditionalPE", "MODES", "PLACEMENTS", "INITS", "grid_cells", "KNN_HIDDEN", "official_peg_init_"]

#: neighbourhoods of ``cpe`` (see the module docstring)
MODES = ("auto", "grid", "knn")
#: where the PEGs act (see the module docstring)
PLACEMENTS = ("once", "every")
#: initialisations of the grid form's convolution (see the module docstring)
INITS = ("official", "torch")
#: hidden width of the offset MLP of the kNN form
KNN_HIDDEN = 32
_CONVS = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}


def official_peg_init_(conv: nn.Module) -> None:
    """The official PEG's init of a convolution (Twins ``PosCNN`` / timm ``PosConv`` via their models'
    ``_init_weights``): kernel ``N(0, 2 / fan_out)``, ``fan_out = prod(kernel) * out_channels / groups``;
    bias 0."""
    fan_out = math.prod(conv.kernel_size) * conv.out_channels // conv.groups
    with torch.no_grad():
        conv.weight.normal_(0.0, math.sqrt(2.0 / fan_out))
        if conv.bias is not None:
            conv.bias.zero_()


def grid_cells(coords: Tensor, valid: Tensor | None) -> tuple[Tensor, list[int]]:
    """Grid cell of every token from its coords: on each axis, the rank of its coordinate among the
    distinct coordinates of the sample's real tokens.

    coords: ``(B, N, p)``; valid: ``(B, N)`` bool or ``None`` (all real).
    -> cells ``(B, N, p)`` long (padded tokens: a rank past the last real one), the map's extent per
    axis (the largest over the batch).
    """
    B, N, p = coords.shape
    cells, extent = [], []
    for a in range(p):
        v = coords[..., a]
        if valid is not None:
            v = v.masked_fill(~valid, float("inf"))  # padded tokens sort last
        s, order = v.sort(dim=1)  # (B, N)
        new = torch.ones_like(s, dtype=torch.bool)
        new[:, 1:] = s[:, 1:] != s[:, :-1]  # the first of each run of equal values
        rank = torch.empty_like(order).scatter_(1, order, new.long().cumsum(1) - 1)  # (B, N)
        real = rank if valid is None else rank.masked_fill(~valid, -1)
        extent.append(int(real.amax()) + 1)
        cells.append(rank)
    return torch.stack(cells, dim=-1), extent


@register_pe("cpe", order=120)
class ConditionalPE(PositionalEncoding):
    """CPVT's position generator (PEG) between blocks. Options: ``after_block``, ``mode``, ``k``,
    ``placement``, ``init``, ``decay``."""

    #: the map is placed by coordinate ranks (grid) or offsets (knn): translating the coords changes nothing
    relative = True
    rotation_invariant = False
    distance_decay = False
    learned = True
    options = (Option("after_block", "int", 0, "the block after which the PEG acts (0: after the first, CPVT's default; "
                      "placement=once only)"),
               Option("mode", "str", "auto", "neighbourhood: grid (depthwise conv over the token grid), knn (kNN "
                      "aggregation over coords, for tokens off a grid), auto (grid if built with a grid)",
                      choices=MODES),
               Option("k", "int", None, "neighbours of the knn form, the token itself included (default 3^p)"),
               Option("placement", "str", "once", "once: one PEG after block after_block (CPVT); every: a PEG of its "
                      "own before every block (PTv3's xCPE placement)", choices=PLACEMENTS),
               Option("init", "str", "official", "grid form's conv init: official (Twins/timm PEG: N(0, 2/fan_out), "
                      "bias 0); torch (PyTorch's default, pebench's earlier init)", choices=INITS),
               Option("decay", "bool", False, "apply weight decay to the PEG's parameters (pebench's earlier recipe); "
                      "false: excluded, as the official PEG"))

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, after_block: int = 0,
                 mode: str = "auto", k: int | None = None, placement: str = "once", init: str = "official",
                 decay: bool = False) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if not 0 <= after_block < depth:
            raise PEConfigError(f"cpe after_block must be in 0 .. {depth - 1} (the model has {depth} blocks), "
                                f"got {after_block}")
        if mode not in MODES:
            raise PEConfigError(f"cpe mode must be one of {', '.join(MODES)}, got {mode!r}")
        if placement not in PLACEMENTS:
            raise PEConfigError(f"cpe placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
        if placement == "every" and after_block != 0:
            raise PEConfigError("cpe after_block does not apply with placement=every (a PEG before every block)")
        if init not in INITS:
            raise PEConfigError(f"cpe init must be one of {', '.join(INITS)}, got {init!r}")
        self.after_block_index = after_block
        self.placement, self.init, self.decay = placement, init, bool(decay)
        self.mode = ("grid" if grid is not None else "knn") if mode == "auto" else mode
        n_pegs = depth if placement == "every" else 1
        if self.mode == "grid":
            if spatial_dims not in _CONVS:
                raise PEConfigError(f"cpe mode=grid needs 1-, 2- or 3-D coords, got p={spatial_dims}")
            convs = [self._make_conv(dim, spatial_dims) for _ in range(n_pegs)]
            if placement == "once":
                self.conv = convs[0]
            else:
                self.convs = nn.ModuleList(convs)
        else:
            if init != "official":
                raise PEConfigError("cpe init applies to the grid form's convolution; the knn form (tokens off a "
                                    "grid) has none")
            self.k = 3 ** spatial_dims if k is None else int(k)
            if self.k < 1:
                raise PEConfigError(f"cpe k must be >= 1, got {k}")
            mlps = [nn.Sequential(nn.Linear(spatial_dims, KNN_HIDDEN), nn.GELU(), nn.Linear(KNN_HIDDEN, dim))
                    for _ in range(n_pegs)]
            if placement == "once":
                self.offset_mlp = mlps[0]
                self.knn_bias = nn.Parameter(torch.zeros(dim))
            else:
                self.offset_mlps = nn.ModuleList(mlps)
                self.knn_biases = nn.Parameter(torch.zeros(n_pegs, dim))  # (L, D)
        self._cells = CoordsCache()

    def _make_conv(self, dim: int, spatial_dims: int) -> nn.Module:
        conv = _CONVS[spatial_dims](dim, dim, 3, padding=1, groups=dim)  # depthwise, zero padding
        if self.init == "official":
            official_peg_init_(conv)
        return conv  # init=torch: PyTorch's default init, kept

    def peg_index(self, i: int) -> int | None:
        """Which PEG acts in ``after_block(i, ...)``: ``None`` (none), else its index (0 with
        ``placement=once``; ``i + 1``, the block it feeds, with ``placement=every``)."""
        if self.placement == "once":
            return 0 if i == self.after_block_index else None
        return i + 1 if -1 <= i < self.depth - 1 else None

    def after_block(self, i: int, x: Tensor, coords: Tensor, grid: Sequence[int] | None,
                    mask: Tensor | None) -> Tensor:
        j = self.peg_index(i)
        if j is None:
            return x
        P = self.num_prefix_tokens
        xp = x[:, P:]  # (B, N, D)
        valid = mask[:, P:] if mask is not None else None  # (B, N) or None
        if self.mode == "grid":
            if grid is None:
                raise ValueError("cpe was built for tokens on a grid (mode=grid) but got tokens without one; "
                                 "build it with mode=knn for point / spiking tokens")
            conv = self.conv if self.placement == "once" else self.convs[j]
            out = self._grid_conv(xp, coords, valid, conv)
        else:
            if self.placement == "once":
                mlp, bias = self.offset_mlp, self.knn_bias
            else:
                mlp, bias = self.offset_mlps[j], self.knn_biases[j]
            out = self._knn(xp, coords, valid, mlp, bias)
        if valid is not None:
            out = out * valid.unsqueeze(-1)  # padded tokens receive nothing
        return torch.cat([x[:, :P], xp + out], dim=1)

    def no_weight_decay(self) -> set[str]:
        """Every parameter of the PEG(s) unless ``decay`` (the official PEG's exclusion)."""
        return set() if self.decay else {n for n, _ in self.named_parameters()}

    def _cells_of(self, coords: Tensor, valid: Tensor | None) -> tuple[Tensor, list[int]]:
        c = coords if coords.dim() == 3 else coords.unsqueeze(0)  # (B | 1, N, p)
        if valid is not None:
            return grid_cells(c.expand(valid.shape[0], -1, -1), valid)
        return self._cells.get(coords, ("cells", coords.shape, coords.device), lambda: grid_cells(c, None))

    def _grid_conv(self, xp: Tensor, coords: Tensor, valid: Tensor | None, conv: nn.Module) -> Tensor:
        """Depthwise convolution ``conv`` over the token map: ``(B, N, D) -> (B, N, D)`` (bias included)."""
        B, N, D = xp.shape
        cells, extent = self._cells_of(coords, valid)  # (B | 1, N, p)
        S = 1
        flat = torch.zeros_like(cells[..., 0])
        for a in reversed(range(len(extent))):  # row-major flat index of each cell
            flat = flat + cells[..., a] * S
            S *= extent[a]
        if valid is not None:
            flat = flat.masked_fill(~valid, S)  # padded tokens: one spare slot past the map
        flat = flat.expand(B, -1).unsqueeze(-1).expand(-1, -1, D)  # (B, N, D)
        src = xp if valid is None else xp * valid.unsqueeze(-1)
        dense = xp.new_zeros(B, S + 1, D).scatter(1, flat, src)  # (B, S + 1, D); empty cells stay 0
        fmap = dense[:, :S].reshape(B, *extent, D).movedim(-1, 1)  # (B, D, *extent)
        y = conv(fmap).movedim(1, -1).reshape(B, S, D)  # (B, S, D)
        return torch.gather(F.pad(y, (0, 0, 0, 1)), 1, flat)  # (B, N, D)

    def _knn(self, xp: Tensor, coords: Tensor, valid: Tensor | None, mlp: nn.Module, bias: Tensor) -> Tensor:
        """kNN aggregation with offset-MLP ``mlp`` weights: ``(B, N, D) -> (B, N, D)`` (bias ``(D,)`` included)."""
        B, N, D = xp.shape
        c = (coords if coords.dim() == 3 else coords.unsqueeze(0)).to(xp.dtype).expand(B, -1, -1)  # (B, N, p)
        dist = torch.cdist(c, c)  # (B, N, N): query i, candidate j
        if valid is not None:
            dist = dist.masked_fill(~valid.unsqueeze(1), float("inf"))  # padded tokens are no neighbours
        k = min(self.k, N)
        d_k, idx = dist.topk(k, dim=-1, largest=False)  # (B, N, k), nearest first
        ok = torch.isfinite(d_k)  # fewer than k real tokens: the rest do not count
        if valid is not None:
            ok = ok & valid.unsqueeze(-1)
        scale = self._offset_scale(d_k, ok, valid)  # (B, 1, 1, 1)
        nb = idx.unsqueeze(-1)  # (B, N, k, 1)
        c_j = torch.gather(c.unsqueeze(1).expand(-1, N, -1, -1), 2, nb.expand(-1, -1, -1, c.shape[-1]))
        offsets = ((c_j - c.unsqueeze(2)) / scale).to(bias.dtype)  # (B, N, k, p)
        w = mlp(offsets)  # (B, N, k, D)
        x_j = torch.gather(xp.unsqueeze(1).expand(-1, N, -1, -1), 2, nb.expand(-1, -1, -1, D))  # (B, N, k, D)
        return (w * x_j * ok.unsqueeze(-1)).sum(2) + bias  # (B, N, D)

    @staticmethod
    def _offset_scale(d_k: Tensor, ok: Tensor, valid: Tensor | None) -> Tensor:
        """Per sample: the mean over real tokens of the distance to their farthest counted neighbour."""
        far = torch.where(ok, d_k, torch.zeros_like(d_k)).amax(-1)  # (B, N)
        n = valid.sum(1).clamp_min(1) if valid is not None else torch.full_like(far[:, 0], far.shape[1])
        far = far if valid is None else far * valid
        scale = far.sum(1) / n  # (B,)
        return torch.where(scale > 0, scale, torch.ones_like(scale)).view(-1, 1, 1, 1)

    def extra_repr(self) -> str:
        extra = f", k={self.k}" if self.mode == "knn" else ""
        where = f"after_block={self.after_block_index}" if self.placement == "once" else "placement=every"
        return super().extra_repr() + f", {where}, mode={self.mode}{extra}, init={self.init}, decay={self.decay}"

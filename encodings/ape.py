"""``ape``: learned absolute position embedding (Dosovitskiy et al., ICLR 2021, "An Image is
Worth 16x16 Words").

* A model holds only the parameters its input type uses (parameter counts are reported): built
  with a training ``grid`` (images, video, event frames) it owns the table and nothing else;
  built with ``grid=None`` (point clouds) it owns the coords MLP and no table. The backbone
  passes the tokenizer's training grid (``None`` for point groups), so this needs no extra
  argument. A table APE given non-grid tokens (``grid=None`` at forward) raises
  :class:`PEConfigError`.
* Grid tokens: a learned table with one row per cell of the *training* grid. On another grid
  the table is resampled to that grid (bicubic for 2-D via timm's ``resample_abs_pos_embed``,
  trilinear for 3-D), which is the standard ViT fine-tuning rule. Each token then picks the
  row at its own integer coords, so permuting tokens with their coords permutes the output
  and at the training grid the lookup is exactly the table (interpolation is the identity).
* Extrapolation rules (option ``extrapolation``, :mod:`~pebench.encodings.extrapolation`): ``native``
  (the default) is the resampling above; ``pi`` and ``normalized`` instead look the training table up
  at the position-interpolated / DINOv3-normalised coordinates (linear between rows). They act in
  evaluation only, on a grid other than the training grid.
* Non-grid tokens (point clouds): a learned two-layer MLP of the coords (``mlp_hidden`` wide).
* Table init (option ``init``): "ssdc" (default) = N(0, 1), as ``nn.Embedding`` in the SSDC
  paper's code; "timm" = truncated normal, std 0.02 (timm / DeiT). Chosen by measurement: with
  the default budget of ``bench run --dataset shapes --pe ape --analyses none`` (vit-nano,
  4 epochs of 64 steps, seed 0) the std-0.02 table does not learn the task in time
  (val/acc1 after epochs 1-4: 0.141, 0.115, 0.115, 0.102; chance 0.125), N(0, 1) does (0.486,
  0.768, 0.887, 0.916), one seed each on a heavily loaded 2-core machine. The shapes task
  needs position (``none`` stays at chance there too).
* CLS: prefix tokens get no position (the backbone adds them after ``encode_tokens``).
* ``alpha`` scales the added embedding at inference (docs/architecture.md §4).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor, nn

from pebench.core.options import Option

from . import extrapolation as extrap
from .base import PEConfigError, PositionalEncoding, batch_coords
from .coords import is_canonical_grid_coords
from .registry import register_pe

__all__ = ["LearnedAPE", "grid_table_lookup", "APE_INITS"]

#: table initialisations: "ssdc" = N(0, 1) (nn.Embedding, the default); "timm" = trunc. normal std 0.02 (timm/DeiT)
APE_INITS = ("ssdc", "timm")


def grid_table_lookup(table: Tensor, coords: Tensor, grid: Sequence[int]) -> Tensor:
    """Rows of a row-major grid table ``(prod(grid), D)`` at integer coords ``(B, N, p)``."""
    idx = torch.round(coords).long()  # (B, N, p)
    size = torch.tensor(grid, device=coords.device)
    if bool(((idx < 0) | (idx >= size)).any()):
        raise ValueError(f"coords outside grid {tuple(grid)}: ape needs integer patch coords in range")
    strides = torch.ones(len(grid), dtype=torch.long, device=coords.device)
    for d in range(len(grid) - 2, -1, -1):
        strides[d] = strides[d + 1] * grid[d + 1]
    flat = (idx * strides).sum(-1)  # (B, N)
    return table[flat]  # (B, N, D)


def _is_canonical(coords: Tensor, grid: Sequence[int]) -> bool:
    return is_canonical_grid_coords(coords, grid)


@register_pe("ape", order=10)
class LearnedAPE(PositionalEncoding):
    relative = False
    rotation_invariant = False
    distance_decay = False
    learned = True
    additive = True
    options = (
        Option("init", "str", "ssdc", "table init: ssdc = N(0, 1) (nn.Embedding, SSDC paper); timm = trunc. "
               "normal std 0.02 (timm/DeiT)", APE_INITS),
        Option("mlp_hidden", "int", 128, "hidden width of the coords MLP (point clouds only)"),
        Option("extrapolation", "str", "native", "rule on an unseen grid, in evaluation: native (table resampled, "
               "timm), pi, normalized (table read at mapped coords; pebench.encodings.extrapolation)",
               choices=extrap.TABLE_RULES),
    )

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None,
                 init: str = "ssdc", mlp_hidden: int = 128, extrapolation: str = "native") -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if init not in APE_INITS:
            raise PEConfigError(f"unknown ape init {init!r}; available: {', '.join(APE_INITS)}")
        self.init = init
        #: extrapolation rule (:mod:`~pebench.encodings.extrapolation`)
        self.extrapolation = extrap.check_rule("ape", extrapolation, extrap.TABLE_RULES, self.train_grid)
        self.coord_mlp: nn.Module | None = None
        if self.train_grid is not None:
            if len(self.train_grid) != spatial_dims:
                raise PEConfigError(f"grid {self.train_grid} has {len(self.train_grid)} axes, expected {spatial_dims}")
            n = 1
            for g in self.train_grid:
                n *= g
            self.table = nn.Parameter(torch.zeros(1, n, dim))  # (1, prod(grid), D)
            if init == "timm":
                nn.init.trunc_normal_(self.table, std=0.02)
            else:  # "ssdc"
                nn.init.normal_(self.table, std=1.0)
        else:
            self.table = None
            # tokens that do not lie on a grid (point groups): position = MLP(coords)
            self.coord_mlp = nn.Sequential(nn.Linear(spatial_dims, mlp_hidden), nn.GELU(), nn.Linear(mlp_hidden, dim))

    def table_for_grid(self, grid: Sequence[int]) -> Tensor:
        """The table resampled to ``grid``: ``(prod(grid), D)``."""
        grid = tuple(int(g) for g in grid)
        if self.table is None:
            raise PEConfigError("ape was built without a training grid; it has no table to resample")
        if grid == self.train_grid:
            return self.table[0]
        return extrap.resample_table(self.table, self.train_grid, grid)

    def _rule_applies(self, grid: Sequence[int] | None) -> bool:
        return (self.extrapolation != "native" and not self.training and grid is not None and self.table is not None
                and tuple(int(g) for g in grid) != self.train_grid)

    def encode_tokens(self, x: Tensor, coords: Tensor, grid: Sequence[int] | None) -> Tensor:
        if self._rule_applies(grid):  # pi / normalized: the training table at mapped coords
            c = batch_coords(coords, x.shape[0]).to(torch.promote_types(x.dtype, torch.float32))  # (B, N, p)
            mapped = extrap.map_coords(self.extrapolation, c, self.train_grid, grid)
            pos = extrap.sample_table(self.table.to(c.dtype), self.train_grid, mapped)  # (B, N, D)
            return x + self.alpha * pos.to(x.dtype)
        if grid is not None and self.table is not None and _is_canonical(coords, grid):
            # Fast path (perf, issue #7): coords *are* the tokenizer's cached row-major grid, so the
            # lookup would pick row n for token n: add the table by broadcasting (bit-identical
            # output; no index gather / scatter-add backward, no range-check sync).
            # At the training grid the (1, N, D) table itself (no select/copy in backward); alpha == 1
            # skips the multiply (1.0 * v == v exactly).
            same = tuple(int(g) for g in grid) == self.train_grid
            pos = (self.table if same else self.table_for_grid(grid)).to(x.dtype)
            return x + pos if self.alpha == 1.0 else x + self.alpha * pos
        coords = batch_coords(coords, x.shape[0]).to(x.dtype)  # (B, N, p)
        if self.table is None:
            pos = self.coord_mlp(coords)  # (B, N, D)
        elif grid is None:
            raise PEConfigError(f"ape was built for grid tokens (training grid {self.train_grid}) and has no "
                                "coords MLP; non-grid tokens need an ape built with grid=None")
        else:
            pos = grid_table_lookup(self.table_for_grid(grid), coords, grid)  # (B, N, D)
        return x + self.alpha * pos.to(x.dtype)

    @property
    def accepts_coord_augment(self) -> bool:
        return self.table is None  # the table is looked up at integer grid coords; the coords MLP takes any

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):  # type: ignore[override]
        # checkpoints written before grid models stopped holding the (unused) coords MLP: drop its keys
        if self.coord_mlp is None:
            for key in [k for k in state_dict if k.startswith(prefix + "coord_mlp.")]:
                del state_dict[key]
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def no_weight_decay(self) -> set[str]:
        return {"table"} if self.table is not None else set()

"""``rpb``: learned relative position bias, a table indexed by the offset on the token grid.

Papers: Liu et al., ICCV 2021, "Swin Transformer: Hierarchical Vision Transformer using Shifted Windows"
(the table, one per block) and Bao et al., ICLR 2022, "BEiT: BERT Pre-Training of Image Transformers"
(the same table over a whole ViT's patch grid, resampled at other resolutions); the option
``variant=cpb`` is Liu et al., CVPR 2022, "Swin Transformer V2: Scaling Up Capacity and Resolution",
its log-spaced continuous position bias.

* ``variant=table`` (default, Swin/BEiT): block ``l`` owns a table ``T_l: (H, 2G_1 - 1, ..., 2G_p - 1)``
  over the offsets of the training grid ``G``; the bias of query ``i`` and key ``j`` is
  ``T_l[h, r_i - r_j + G - 1]`` (query minus key, as in Swin; row-major flattening as timm's
  ``RelPosBias``, so the same weights give the same bias: tested). Initialisation: truncated normal,
  std 0.02 (Swin / timm).
* ``variant=cpb`` (SwinV2): the bias is ``16 sigmoid(MLP(d))`` with ``MLP = Linear(p, 512) -> ReLU ->
  Linear(512, H, no bias)`` of the log-spaced offset ``d_a = sign(D_a) log2(1 + 8 |D_a| / (G_a - 1)) /
  log2(8)`` (``D = r_i - r_j``, normalised by the *training* grid: SwinV2's ``pretrained_window_size``);
  evaluated once per offset of the current grid, then indexed like the table. As timm's ``RelPosMlp``
  (``mode="swin"``) in evaluation (timm adds a dropout of 0.125 after the ReLU; the official SwinV2 code
  has none, nor has pebench). Its layers are ``nn.Linear``: inside the backbone they get its truncated
  normal (std 0.02, zero bias) init, which is also what SwinV2's own ``_init_weights`` gives its CPB MLP.

Offsets and grids. Coordinates are patch indices; offsets are rounded to the nearest integer (grid
tokens have integer offsets; non-grid coords use the nearest entry). The current grid's extent per axis
``E_a = round(max c_a - min c_a) + 1`` decides the offsets needed: on a grid larger than the training
grid (``W_a = max(E_a, G_a)``) the ``table`` variant is resampled to ``2W - 1`` entries per axis with
timm's ``resize_rel_pos_bias_table`` (the BEiT rule: geometric spacing, 2-D) or trilinearly
(``align_corners=False``, 3-D: video / events; pebench's choice, timm has no 3-D rule); ``cpb`` simply
evaluates its MLP at the larger offsets. Offsets beyond the table are clamped to its edge. The bias is a
function of ``r_i - r_j`` (and the extent, which shifts do not change): exactly relative, not rotation
invariant.

Needs the training grid (images, video, events; point clouds are refused). CLS rows and columns of the
bias are zero (pebench's convention; BEiT adds three learned CLS entries instead). The bias is computed
in float32 or wider and cast to q's dtype; the FlexAttention ``score_mod`` reads the same table entry.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pebench.core.options import Option

from .base import LayerPE, PEConfigError, PositionalEncoding
from .bias import BiasLayerPE
from .extrapolation import grid_extent
from .registry import register_pe

__all__ = ["RelPosBias", "RelPosBiasLayer", "RPB_VARIANTS", "resize_offset_table", "log_spaced_offsets"]

RPB_VARIANTS = ("table", "cpb")
#: SwinV2's CPB: hidden width, output gain and log-scale range
CPB_HIDDEN, CPB_GAIN, CPB_RANGE = 512, 16.0, 8.0
#: the most int64 entries of a kept offset index (32 MiB): larger ones (long sequences) are recomputed per call
INDEX_CACHE_MAX = 2 ** 22


def resize_offset_table(table: Tensor, window: Sequence[int]) -> Tensor:
    """An offset table ``(H, 2G_1 - 1, ...)`` resized to ``2W - 1`` entries per axis (see the module docstring)."""
    size = tuple(2 * int(w) - 1 for w in window)
    if tuple(table.shape[1:]) == size:
        return table
    if len(window) == 2:
        from timm.layers.pos_embed_rel import resize_rel_pos_bias_table  # deferred: only resampling needs it

        return resize_rel_pos_bias_table(table, new_window_size=tuple(int(w) for w in window),
                                         new_bias_shape=(table.shape[0], *size))
    return F.interpolate(table.unsqueeze(0), size=size, mode="trilinear", align_corners=False)[0]


def log_spaced_offsets(window: Sequence[int], train_grid: Sequence[int], dtype: torch.dtype,
                       device: torch.device | None = None) -> Tensor:
    """SwinV2's log-spaced offsets ``(2W_1 - 1, ..., 2W_p - 1, p)`` of a ``window``, normalised by the training grid."""
    axes = [torch.arange(-(w - 1), w, dtype=dtype, device=device) / max(g - 1, 1) * CPB_RANGE
            for w, g in zip(window, train_grid)]
    d = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)  # (..., p)
    return torch.sign(d) * torch.log2(1.0 + d.abs()) / math.log2(CPB_RANGE)


class RelPosBiasLayer(BiasLayerPE):
    """One block's relative position bias (a table, or SwinV2's CPB MLP)."""

    def __init__(self, num_heads: int, train_grid: Sequence[int], num_prefix_tokens: int, variant: str) -> None:
        super().__init__()
        self.train_grid = tuple(int(g) for g in train_grid)
        self.variant = variant
        self.num_heads = num_heads
        self.num_prefix_tokens = num_prefix_tokens
        if variant == "table":
            self.table = nn.Parameter(torch.zeros(num_heads, *(2 * g - 1 for g in self.train_grid)))
            nn.init.trunc_normal_(self.table, std=0.02)
        else:
            p = len(self.train_grid)
            self.cpb = nn.Sequential(nn.Linear(p, CPB_HIDDEN), nn.ReLU(), nn.Linear(CPB_HIDDEN, num_heads, bias=False))
        self._resized: tuple | None = None  # (key, resized table) for the table variant off the training grid
        # (coords tensor, its version, window, flat index): the offsets' index depends on the coords alone, and a
        # backbone passes the same coords tensor to every step (timm's RelPosBias keeps the index as a buffer)
        self._index: tuple | None = None
        # (key, bias) for evaluation (no grad): the bias is a function of the parameters and the coords alone, so
        # evaluation steps over one coords tensor reuse it until a parameter or the coords change (see bias())
        self._eval_bias: tuple | None = None

    def offset_table(self, window: tuple[int, ...], dtype: torch.dtype) -> Tensor:
        """The bias of every offset of ``window``: ``(H, 2W_1 - 1, ...)`` in ``dtype``."""
        if self.variant == "cpb":
            fc1, fc2 = self.cpb[0], self.cpb[2]
            d = log_spaced_offsets(window, self.train_grid, dtype, fc1.weight.device)  # (..., p)
            out = F.linear(torch.relu(F.linear(d, fc1.weight.to(dtype), fc1.bias.to(dtype))), fc2.weight.to(dtype))
            return (CPB_GAIN * torch.sigmoid(out)).movedim(-1, 0)  # (H, ...)
        if window == self.train_grid:
            return self.table.to(dtype)
        if torch.is_grad_enabled() or self.table.is_inference():  # no cache: a kept tensor would carry one step's
            # graph into the next; a table made under inference_mode has no version counter to key it by
            return resize_offset_table(self.table.to(dtype), window).to(dtype)
        key = (window, self.table._version, self.table.data_ptr(), dtype)
        if self._resized is None or self._resized[0] != key:
            self._resized = (key, resize_offset_table(self.table.to(dtype), window).to(dtype))
        return self._resized[1]

    def _window(self, c: Tensor) -> tuple[int, ...]:
        return tuple(max(e, g) for e, g in zip(grid_extent(c), self.train_grid))

    def _flat_index(self, off: Tensor, window: Sequence[int]) -> Tensor:
        """Flat row-major table index of rounded offsets ``off (..., p)`` (clamped to the table)."""
        idx = None
        for a, w in enumerate(window):
            ia = (torch.round(off[..., a]) + (w - 1)).clamp(0, 2 * w - 2).long()
            idx = ia if idx is None else idx * (2 * w - 1) + ia
        return idx

    def _window_and_index(self, coords: Tensor, c: Tensor) -> tuple[tuple[int, ...], Tensor]:
        """The window and the flat index ``(B|1, N, N)`` of ``r_i - r_j`` for ``c`` (``coords`` promoted), kept
        for the next call with the same ``coords`` object, unmodified (its version; coords made under
        ``inference_mode`` have none and are not kept), and at most :data:`INDEX_CACHE_MAX` entries. The cache
        holds the tensor itself, so its memory cannot be reused by other coordinates while the entry lives."""
        if coords.is_inference():  # made under inference_mode: no version counter to tell an in-place change
            window = self._window(c)
            return window, self._flat_index(c[:, :, None, :] - c[:, None, :, :], window)
        cached = self._index
        if cached is not None and cached[0] is coords and cached[1] == coords._version:
            return cached[2], cached[3]
        window = self._window(c)
        idx = self._flat_index(c[:, :, None, :] - c[:, None, :, :], window)  # (B|1, N, N): r_i - r_j
        keep = idx.numel() <= INDEX_CACHE_MAX and not coords.requires_grad  # no graph kept alive through coords
        self._index = (coords, coords._version, window, idx) if keep else None
        return window, idx

    def bias(self, coords: Tensor) -> Tensor:
        """The bias ``(B|1, H, P + N, P + N)`` of ``coords``. Without grad (evaluation) it is kept for the next
        call with the same coords tensor, unmodified, the same parameters (their versions: an optimiser step or a
        ``load_state_dict`` changes them), output dtype and grad modes, and at most :data:`INDEX_CACHE_MAX`
        entries; timm's ``RelPosBias`` gathers its table on every call. With grad it is built every call (a kept
        tensor would carry one step's graph into the next)."""
        params = tuple(self.parameters())
        if (torch.is_grad_enabled() or coords.requires_grad or coords.is_inference()
                or any(p.is_inference() for p in params)):  # inference tensors have no version counter to key by
            self._eval_bias = None
            return self._build_bias(coords)
        key = (coords._version, getattr(self, "_dtype", None), torch.is_inference_mode_enabled(),
               tuple((p._version, p.data_ptr()) for p in params))
        kept = self._eval_bias
        if kept is not None and kept[0] is coords and kept[1] == key:
            return kept[2]
        out = self._build_bias(coords)
        self._eval_bias = (coords, key, out) if out.numel() <= INDEX_CACHE_MAX else None
        return out

    def _build_bias(self, coords: Tensor) -> Tensor:
        c = coords if coords.dim() == 3 else coords.unsqueeze(0)  # (B|1, N, p)
        c = c.to(torch.promote_types(c.dtype, torch.float32))
        window, idx = self._window_and_index(coords, c)
        flat = self.offset_table(window, c.dtype).reshape(self.num_heads, -1)  # (H, prod(2W - 1))
        # index_select, not flat[:, idx]: the same gather, but its backward is an index_add_ (about 3x faster on
        # CPU for a 256-token grid than advanced indexing's accumulating index_put_)
        picked = flat.index_select(1, idx.reshape(-1)).view(self.num_heads, *idx.shape)  # (H, B|1, N, N)
        return self._finish(picked.movedim(0, 1))  # (B|1, H, N, N) -> with prefix rows / cols

    def _bias_entry(self, c: Tensor) -> Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]:
        window = self._window(c)
        flat = self.offset_table(window, c.dtype).reshape(self.num_heads, -1)  # (H, prod(2W - 1))

        def entry(b: Tensor, h: Tensor, i: Tensor, j: Tensor) -> Tensor:
            idx = None
            for a, w in enumerate(window):
                ia = (torch.round(c[b, i, a] - c[b, j, a]) + (w - 1)).clamp(0, 2 * w - 2).to(torch.int64)
                idx = ia if idx is None else idx * (2 * w - 1) + ia
            return flat[h, idx]
        return entry


@register_pe("rpb", order=62)
class RelPosBias(PositionalEncoding):
    """Learned relative position bias on the grid (Swin/BEiT table; SwinV2 CPB as ``variant=cpb``)."""

    relative = True
    rotation_invariant = False
    distance_decay = False
    learned = True
    modalities = ("image", "video", "events")
    needs_grid = True  # the offset table is indexed by grid offsets
    options = (
        Option("variant", "str", "table", "table: Swin/BEiT learned table per block (resampled with timm at larger "
               "grids); cpb: SwinV2 log-spaced continuous position bias (an MLP of log offsets)",
               choices=RPB_VARIANTS),
        Option("modality", "str", None, "input modality; 'points' is refused"),
    )

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, variant: str = "table",
                 modality: str | None = None) -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if modality is not None and modality not in self.modalities:
            raise PEConfigError(f"rpb does not apply to {modality!r}; it supports {', '.join(self.modalities)}")
        if variant not in RPB_VARIANTS:
            raise PEConfigError(f"rpb variant must be one of {', '.join(RPB_VARIANTS)}, got {variant!r}")
        if self.train_grid is None:
            raise PEConfigError("rpb needs the training grid (tokens on a grid: images, video, events)")
        if len(self.train_grid) != spatial_dims:
            raise PEConfigError(f"grid {self.train_grid} has {len(self.train_grid)} axes, expected {spatial_dims}")
        self.variant = variant
        self.layers = nn.ModuleList(RelPosBiasLayer(num_heads, self.train_grid, num_prefix_tokens, variant)
                                    for _ in range(depth))

    @property
    def accepts_coord_augment(self) -> bool:
        return False  # offsets are read on the integer grid

    def layer(self, i: int) -> LayerPE:
        return self.layers[i]

    def no_weight_decay(self) -> set[str]:
        return {f"layers.{i}.table" for i in range(self.depth)} if self.variant == "table" else set()

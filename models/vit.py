"""A ViT backbone with a pluggable positional encoding (docs/architecture.md §2-3).

The backbone takes *tokens* (from a tokenizer) and their ``coords``; it never looks at token
index. Every attention call goes through :func:`pebench.models.attention.attend` with the PE's
per-layer ``qk`` transform and additive ``bias`` (dense SDPA, bias-free SDPA or FlexAttention, per
PE, device and phase; ``Attention.impl`` forces one). Blocks reuse timm's ``Mlp``, ``DropPath`` and
``LayerScale``; attention is our own because timm's ``Attention`` has no hook for a per-layer PE on
q/k or an attention bias.

Presets (width, depth, heads): the PaPE paper's vit-nano/tiny/small/base and DeiT's ViT-S/16.

**Windowed attention** (``attn_window=W``, off by default; :func:`window_layout`): for long token
sequences in serialization order (the scene tokenizer's z-order patches), each block attends within
windows of ``W`` consecutive tokens, as Point Transformer V3's serialized attention (Wu et al., CVPR
2024) does with its patches. Windows are formed by reshaping ``(B, N, D) -> (B * N/W, W, D)`` (coords
and key masks the same way, padded with masked slots), so every block -- and its PE, from the tokens'
own coords -- runs unchanged inside a window. Blocks 1, 3, 5, ... shift the window borders by
``W // 2`` tokens (Swin's shifted windows, Liu et al. ICCV 2021; PTv3's "shift patch" interaction)
so that information crosses windows; pebench has one serialization order, so PTv3's default of
alternating orders does not apply. A scene with at most ``W`` real tokens is one window in every
block (full attention).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F
from timm.layers import DropPath, LayerScale, Mlp, trunc_normal_
from torch import Tensor, nn

from pebench.core.errors import ConfigError
from pebench.core.registry import Registry
from pebench.encodings import LayerPE, PositionalEncoding, build_pe
from pebench.encodings.base import batch_coords
from pebench.encodings.coord_augment import CoordAugment, build_coord_augment

from .attention import attend, attention_mask, check_impl_name

__all__ = ["ViTConfig", "MODELS", "model_config", "ViTBackbone", "Attention", "Block", "build_backbone", "list_models",
           "attention_mask", "TAPS", "check_attn_window", "window_layout", "set_attention_impl",
           "attention_impls_used", "set_coord_augment", "fold_qk_basis"]

#: token representations :meth:`ViTBackbone.forward_intermediates` can return
TAPS = ("attn_in", "block_out")


@dataclass(frozen=True)
class ViTConfig:
    embed_dim: int
    depth: int
    num_heads: int
    mlp_ratio: float = 4.0


#: the ViT presets (``--model``), found by name like every other named thing (pebench.core.registry)
MODELS: Registry[ViTConfig] = Registry("model")
MODELS.add("vit-nano", ViTConfig(128, 4, 4), order=0)      # head dim 32
MODELS.add("vit-tiny", ViTConfig(256, 7, 8), order=1)      # head dim 32
MODELS.add("vit-small", ViTConfig(512, 10, 8), order=2)    # head dim 64
MODELS.add("vit-base", ViTConfig(768, 12, 12), order=3)    # head dim 64
MODELS.add("vit-s16", ViTConfig(384, 12, 6), order=4)      # DeiT ViT-S/16, head dim 64
MODELS.add("vit-nano12", ViTConfig(128, 12, 4), order=5)   # 12 narrow blocks for CPU DINO / EED-over-depth studies
MODELS.add("vit-probe", ViTConfig(64, 2, 4), order=6)      # the probe suite's CPU recipe (docs/probes.md), head dim 16


def list_models() -> list[str]:
    """The preset names, in listing order."""
    return MODELS.names()


def model_config(name: str) -> ViTConfig:
    """The preset called ``name``; an unknown name raises ``ValueError`` listing the valid ones."""
    return MODELS.get(name)


def check_attn_window(value: object) -> int | None:
    """``attn_window``: ``None`` (or ``"none"`` / ``"full"``: full attention) or an integer ``>= 2`` (tokens
    per window); anything else is a one-line ``ValueError``."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "full")):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise ConfigError(f"attn_window must be an integer >= 2 (tokens per attention window) or none, got {value!r}")
    return value


def window_layout(n_real: Tensor, T: int, window: int, shifted: bool) -> tuple[Tensor, Tensor, Tensor, int]:
    """Where each token goes in the windowed layout of one block.

    ``n_real (B,)``: real tokens per sequence (padding is last), ``T``: the padded length. Slot ``s``
    of sequence ``b`` (``S = n_win * window`` slots; window ``s // window``) holds token
    ``s - shift_b``, or is a padding slot when that is outside ``0 .. T-1``; ``shift_b = window // 2``
    on shifted blocks for sequences of more than ``window`` real tokens, else 0.
    -> token index per slot ``(B, S)`` (clamped to ``0 .. T-1`` on padding slots: the edge token,
    whose coords keep the window's coordinate range), padding-slot mask ``(B, S)``, ``shift (B,)``,
    ``n_win``.
    """
    half = window // 2 if shifted else 0
    shift = torch.where(n_real > window, half, 0) if half else torch.zeros_like(n_real)  # (B,)
    n_win = math.ceil((T + half) / window)
    pos = torch.arange(n_win * window, device=n_real.device).unsqueeze(0) - shift.unsqueeze(1)  # (B, S)
    return pos.clamp(0, T - 1), (pos < 0) | (pos >= T), shift, n_win


def fold_qk_basis(weight: Tensor, bias: Tensor | None, basis: Tensor) -> tuple[Tensor, Tensor | None]:
    """The fused qkv projection ``weight (3 H d, D)``, ``bias (3 H d,)`` with a per-head map ``basis (H, d, d)``
    applied to its q and k rows (``W_q[h] <- basis[h] W_q[h]``, likewise ``W_k``, ``b_q``, ``b_k``; v unchanged),
    so ``F.linear(x, *fold_qk_basis(W, b, M))`` gives ``M q`` and ``M k`` per head
    (:meth:`~pebench.encodings.base.LayerPE.qk_basis`). Computed with autocast off in the weight's dtype (an
    autocast linear then casts the folded weight, as it casts the plain one); differentiable in all three."""
    H, d, _ = basis.shape
    D = weight.shape[-1]
    with torch.autocast(weight.device.type, enabled=False):
        m = basis.to(weight.dtype)
        # v's rows go through the identity (exact: one non-zero term per entry) instead of being sliced off and
        # concatenated back: slicing a parameter costs a zero-filled (3 H d, D) gradient per slice in backward.
        # One (3, H, d, d) map per product, so basis's gradient sums its parts in the same order as before.
        eye = torch.eye(d, dtype=m.dtype, device=m.device).expand(1, H, d, d)
        w = torch.matmul(torch.cat([m.expand(2, H, d, d), eye]), weight.view(3, H, d, D))  # (3, H, d, D): q, k, v
        if bias is None:
            return w.reshape(3 * H * d, D), None
        b = torch.matmul(torch.cat([m.expand(2, H, d, d), eye]), bias.view(3, H, d, 1))  # (3, H, d, 1)
        return w.reshape(3 * H * d, D), b.reshape(3 * H * d)


class Attention(nn.Module):
    """Multi-head self-attention whose q/k and logits are shaped by a :class:`LayerPE`.

    ``impl``: the attention implementation (``auto`` | ``dense`` | ``sdpa`` | ``flex``, see
    :mod:`pebench.models.attention`); ``impls_used``: the ``(phase, impl)`` pairs this layer has run
    (phase ``train`` with gradients, ``eval`` without), for ``results.json``."""

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = True, attn_drop: float = 0.0,
                 proj_drop: float = 0.0) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5  # of the original head dim, whatever qk() returns
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = attn_drop
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)
        self.impl = "auto"
        self.impls_used: set[tuple[str, str]] = set()

    def forward(self, x: Tensor, coords: Tensor, layer_pe: LayerPE, key_mask: Tensor | None = None) -> Tensor:
        B, T, D = x.shape
        basis = layer_pe.qk_basis(self.qkv.weight.dtype)  # (H, d, d) or None
        if basis is None:
            qkv = self.qkv(x)
        else:  # the PE's per-head basis change folded into the q/k rows of the projection
            qkv = F.linear(x, *fold_qk_basis(self.qkv.weight, self.qkv.bias, basis))
        qkv = qkv.reshape(B, T, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # each (B, H, T, d)
        out, used = attend(q, k, v, x, layer_pe, coords, key_mask, scale=self.scale, impl=self.impl,
                           dropout_p=self.attn_drop if self.training else 0.0,
                           basis_folded=basis is not None)  # (B, H, T, d)
        if not torch.compiler.is_compiling():
            self.impls_used.add(("train" if torch.is_grad_enabled() else "eval", used))
        out = self.proj(out.transpose(1, 2).reshape(B, T, D))
        return self.proj_drop(out) if self.proj_drop.p else out  # p = 0: no module call (per-layer Python time)


def set_attention_impl(module: nn.Module, impl: str) -> None:
    """Set ``impl`` (validated: ``auto`` | ``dense`` | ``sdpa`` | ``flex``) on every :class:`Attention` of
    ``module``."""
    impl = check_impl_name(impl)
    for m in module.modules():
        if isinstance(m, Attention):
            m.impl = impl


def set_coord_augment(module: nn.Module, name: str) -> None:
    """Give every :class:`ViTBackbone` of ``module`` the coordinate augmentation ``name`` (``none`` |
    ``dinov3``; :mod:`pebench.encodings.coord_augment`), applied to the coords in training only: it takes
    its backbone's mode now and follows it from then on, so a backbone kept in evaluation mode (DINO's
    teacher) never sees augmented coords.
    ``ValueError`` for an unknown name or a PE that needs integer grid coords (ape's table)."""
    for m in module.modules():
        if isinstance(m, ViTBackbone):
            aug = build_coord_augment(name)
            if aug is not None and not m.pe.accepts_coord_augment:
                raise ConfigError(f"coordinate augmentation {name!r} does not apply to PE {m.pe.name!r} here: it "
                                 "reads integer grid coords (use --coord-aug none)")
            if aug is not None:
                aug.train(m.training)  # follows its backbone's mode (a teacher kept in evaluation: off)
            m.coord_aug = aug


def attention_impls_used(module: nn.Module) -> dict[str, str]:
    """The implementations the :class:`Attention` layers of ``module`` ran, per phase:
    ``{"train": "dense", "eval": "flex"}`` (several: comma-joined, sorted; a phase never run: absent)."""
    seen: dict[str, set[str]] = {}
    for m in module.modules():
        if isinstance(m, Attention):
            for phase, impl in m.impls_used:
                seen.setdefault(phase, set()).add(impl)
    return {phase: ",".join(sorted(seen[phase])) for phase in sorted(seen)}


class Block(nn.Module):
    """Pre-norm transformer block (timm ``Block`` layout)."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4.0, drop_path: float = 0.0,
                 init_values: float | None = None, proj_drop: float = 0.0, attn_drop: float = 0.0) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, num_heads, attn_drop=attn_drop, proj_drop=proj_drop)
        self.ls1 = LayerScale(dim, init_values) if init_values else nn.Identity()
        self.drop_path1 = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), act_layer=nn.GELU, drop=proj_drop)
        self.ls2 = LayerScale(dim, init_values) if init_values else nn.Identity()
        self.drop_path2 = DropPath(drop_path) if drop_path > 0 else nn.Identity()

    def forward(self, x: Tensor, coords: Tensor, layer_pe: LayerPE, key_mask: Tensor | None = None) -> Tensor:
        x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x), coords, layer_pe, key_mask)))
        return x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))


class ViTBackbone(nn.Module):
    """Transformer encoder over tokens with coords. ``forward`` maps ``(B, N, D) -> (B, P + N, D)``
    where ``P = num_prefix_tokens`` (0 unless ``class_token=True``)."""

    def __init__(self, embed_dim: int, depth: int, num_heads: int, pe: PositionalEncoding,
                 mlp_ratio: float = 4.0, class_token: bool = False, drop_path_rate: float = 0.0,
                 drop_rate: float = 0.0, init_values: float | None = None, attn_window: int | None = None) -> None:
        super().__init__()
        if pe.num_prefix_tokens != int(class_token):
            raise ValueError("PE built for a different number of prefix tokens than the backbone uses")
        #: tokens per attention window (None: full attention); see the module docstring
        self.attn_window = check_attn_window(attn_window)
        if self.attn_window is not None and class_token:
            raise ConfigError("attn_window does not apply with a class token (a window has no place for it)")
        self.embed_dim = embed_dim
        self.depth = depth
        self.num_heads = num_heads
        self.num_prefix_tokens = int(class_token)
        self.pe = pe
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim)) if class_token else None
        dpr = torch.linspace(0, drop_path_rate, depth).tolist()
        self.blocks = nn.ModuleList(
            Block(embed_dim, num_heads, mlp_ratio, drop_path=dpr[i], init_values=init_values, proj_drop=drop_rate)
            for i in range(depth))
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        #: coordinate augmentation in training (None: off; :func:`set_coord_augment`); no parameters
        self.coord_aug: CoordAugment | None = None
        self.apply(self._init_weights)
        if self.cls_token is not None:
            nn.init.normal_(self.cls_token, std=1e-6)

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)

    def no_weight_decay(self) -> set[str]:
        names = {"cls_token"} if self.cls_token is not None else set()
        return names | {f"pe.{n}" for n in self.pe.no_weight_decay()}

    def _prepare(self, x: Tensor, coords: Tensor, grid: Sequence[int] | None,
                 mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None]:
        """-> tokens ``(B, P + N, D)`` with the PE's embedding and prefix tokens, then the PE's
        ``after_block(-1, ...)`` (what it adds before the first block; the identity for every PE but
        ``cpe placement=every``), the coords every PE part reads (augmented in training when ``coord_aug``
        is set), the mask ``(B, P + N)`` or None."""
        if x.dim() != 3 or x.shape[-1] != self.embed_dim:
            raise ValueError(f"expected tokens (B, N, {self.embed_dim}), got {tuple(x.shape)}")
        if coords.shape[-2] != x.shape[1] or coords.shape[-1] != self.pe.spatial_dims:
            raise ValueError(f"coords {tuple(coords.shape)} do not match tokens {tuple(x.shape)} "
                             f"with p={self.pe.spatial_dims}")
        if self.coord_aug is not None:
            coords = self.coord_aug(coords, x.shape[0], grid, mask)  # identity in evaluation
        x = self.pe.encode_tokens(x, coords, grid)  # (B, N, D)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)  # (B, 1 + N, D)
            if mask is not None:
                mask = torch.cat([mask.new_ones(mask.shape[0], 1), mask], dim=1)
        x = self.pe.after_block(-1, x, coords, grid, mask)  # "after block -1": before the first (cpe placement=every)
        return x, coords, mask

    def forward(self, x: Tensor, coords: Tensor, grid: Sequence[int] | None = None,
                mask: Tensor | None = None) -> Tensor:
        """x: ``(B, N, D)`` tokens, coords ``(B, N, p)``/``(N, p)``, mask ``(B, N)`` bool (True = valid)."""
        x, coords, mask = self._prepare(x, coords, grid, mask)
        for i in range(len(self.blocks)):
            x = self._block(i, x, coords, mask)
            x = self.pe.after_block(i, x, coords, grid, mask)  # identity except for PEs between blocks (cpe)
        return self.norm(x)  # (B, P + N, D)

    def _block(self, i: int, x: Tensor, coords: Tensor, mask: Tensor | None) -> Tensor:
        """Block ``i`` on ``x (B, T, D)``: over all tokens, or within windows (``attn_window``)."""
        blk, W, B, T = self.blocks[i], self.attn_window, x.shape[0], x.shape[1]
        if W is None or T <= W:
            return blk(x, coords, self.pe.layer(i), mask)  # full attention (the default path)
        n_real = mask.sum(1) if mask is not None else torch.full((B,), T, device=x.device)
        idx, pad, shift, n_win = window_layout(n_real, T, W, shifted=i % 2 == 1)  # (B, S) x 2, (B,)
        c = batch_coords(coords, B)
        xw = torch.gather(x, 1, idx.unsqueeze(-1).expand(-1, -1, x.shape[-1])).masked_fill(pad.unsqueeze(-1), 0.0)
        cw = torch.gather(c, 1, idx.unsqueeze(-1).expand(-1, -1, c.shape[-1]))  # (B, S, p)
        mw = ~pad if mask is None else torch.gather(mask, 1, idx) & ~pad  # (B, S)
        mw = mw.view(B * n_win, W)
        mw = mw | ~mw.any(1, keepdim=True)  # a window without a real key (padding only): no all -inf row
        out = blk(xw.view(B * n_win, W, -1), cw.view(B * n_win, W, -1), self.pe.layer(i),
                  None if bool(mw.all()) else mw)  # (B * n_win, W, D)
        back = torch.arange(T, device=x.device).unsqueeze(0) + shift.unsqueeze(1)  # (B, T): token t's slot
        return torch.gather(out.view(B, n_win * W, -1), 1, back.unsqueeze(-1).expand(-1, -1, x.shape[-1]))

    def forward_intermediates(self, x: Tensor, coords: Tensor, grid: Sequence[int] | None = None,
                              mask: Tensor | None = None, return_prefix: bool = False,
                              norm: bool = False, tap: str = "block_out") -> list[Tensor]:
        """Per-block token representations, one ``(B, N, D)`` tensor per block (patch tokens
        unless ``return_prefix``).

        ``tap`` chooses the representation (:data:`TAPS`):

        * ``"attn_in"``: the input of block ``l``'s attention, i.e. its first LayerNorm's output
          ``norm1(x_l)`` for ``l = 0 .. L-1`` (layer 0 = LN1(embedding + PE)); the representation
          the SSDC paper measures.
        * ``"block_out"``: the residual stream after block ``l`` for ``l = 1 .. L``;
          ``norm=True`` applies the final LayerNorm to each (only with this tap).
        """
        if tap not in TAPS:
            raise ValueError(f"unknown tap {tap!r}; available: {', '.join(TAPS)}")
        if norm and tap != "block_out":
            raise ValueError("norm=True applies the final LayerNorm to block outputs; use tap='block_out'")
        x, coords, mask = self._prepare(x, coords, grid, mask)
        feats = []
        for i, blk in enumerate(self.blocks):
            if tap == "attn_in":
                y = blk.norm1(x)  # (B, P + N, D): what blk.attn receives
                feats.append(y if return_prefix else y[:, self.num_prefix_tokens:])
                if i == len(self.blocks) - 1:
                    break  # the last block's output is not part of this tap
            x = self._block(i, x, coords, mask)  # (B, P + N, D)
            x = self.pe.after_block(i, x, coords, grid, mask)  # the same stream as forward()
            if tap == "block_out":
                y = self.norm(x) if norm else x
                feats.append(y if return_prefix else y[:, self.num_prefix_tokens:])
        return feats

    @staticmethod
    def tap_layers(tap: str, depth: int) -> list[int]:
        """Layer indices of :meth:`forward_intermediates`' outputs: ``0..L-1`` for ``attn_in``,
        ``1..L`` for ``block_out``."""
        if tap not in TAPS:
            raise ValueError(f"unknown tap {tap!r}; available: {', '.join(TAPS)}")
        return list(range(depth)) if tap == "attn_in" else list(range(1, depth + 1))


def build_backbone(name: str = "vit-nano", pe: str = "none", spatial_dims: int = 2,
                   grid: Sequence[int] | None = None, class_token: bool = False,
                   drop_path_rate: float = 0.0, attn_window: int | None = None, **pe_options) -> ViTBackbone:
    """Build a preset backbone with the PE called ``pe`` (extra kwargs go to the PE); ``attn_window``:
    tokens per attention window (None: full attention; see the module docstring)."""
    cfg = model_config(name)
    pe_module = build_pe(pe, dim=cfg.embed_dim, num_heads=cfg.num_heads, depth=cfg.depth,
                         spatial_dims=spatial_dims, num_prefix_tokens=int(class_token), grid=grid, **pe_options)
    return ViTBackbone(cfg.embed_dim, cfg.depth, cfg.num_heads, pe_module, mlp_ratio=cfg.mlp_ratio,
                       class_token=class_token, drop_path_rate=drop_path_rate, attn_window=attn_window)

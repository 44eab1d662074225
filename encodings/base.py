"""The positional-encoding interface every PE in pebench implements (docs/architecture.md §3).

A PE has a model-level part (:class:`PositionalEncoding`) and a per-layer part
(:class:`LayerPE`). Position is carried by ``coords`` (float, patch units), never by token
index, so every PE is equivariant to permuting tokens together with their coords.

Conventions shared by all PEs
-----------------------------
* ``coords``: ``(B, N, p)`` or ``(N, p)`` (broadcast over the batch), patch tokens only.
* ``grid``: the integer grid shape ``(h, w)`` / ``(t, h, w)`` when tokens lie on a regular
  grid in row-major order, else ``None`` (point clouds).
* Prefix tokens (CLS): ``num_prefix_tokens`` tokens are prepended by the backbone *after*
  :meth:`PositionalEncoding.encode_tokens`. They carry no position: additive terms skip them,
  rotations are the identity on them, attention biases between a prefix token and any other
  token are zero, PaPE's augmentation is zero for them.
* ``q``/``k`` given to :meth:`LayerPE.qk` are ``(B, H, P + N, d)`` (P prefix tokens first).
  ``qk`` may return tensors with a larger last dimension (PaPE augments q and k); the
  attention call keeps ``scale = 1/sqrt(d)`` of the *original* head dim.
* ``bias`` returns an additive attention bias broadcastable to ``(B, H, P + N, P + N)``,
  added to the scaled logits, or ``None``.
* :meth:`PositionalEncoding.after_block` may change the residual stream ``(B, P + N, D)`` between
  blocks, and before the first (``i = -1``) (the conditional PE ``cpe`` adds its convolution there); the
  identity for every other PE.
"""
from __future__ import annotations

import abc
from typing import Any, Callable, ClassVar, Sequence

import torch
from torch import Tensor, nn

from pebench.core.errors import UserError
from pebench.core.options import Option

__all__ = ["PositionalEncoding", "LayerPE", "IdentityLayerPE", "PEConfigError", "ALL_MODALITIES",
           "batch_coords", "layer_tables_batchable", "LayerTables", "CoordsCache"]

ALL_MODALITIES = ("image", "video", "events", "points")


class PEConfigError(UserError):
    """A PE was asked for something it cannot do (wrong modality, bad option)."""


def batch_coords(coords: Tensor, batch_size: int) -> Tensor:
    """Return coords as ``(B, N, p)`` (expanding a broadcast ``(N, p)``)."""
    if coords.dim() == 2:
        return coords.unsqueeze(0).expand(batch_size, -1, -1)
    if coords.dim() != 3:
        raise ValueError(f"coords must be (N, p) or (B, N, p), got shape {tuple(coords.shape)}")
    return coords


def layer_tables_batchable(coords: Tensor) -> bool:
    """Whether a PE computes every layer's per-token tables at once, in ``encode_tokens`` (comrope, string,
    rope-mixed): while training (each layer's table is kept for the backward anyway) or when the batch shares its
    coords (``(N, p)`` / ``(1, N, p)``: one row per table). Not for per-sample coords in evaluation, where all
    layers' ``(B, ...)`` tables would be held at once instead of one at a time."""
    return torch.is_grad_enabled() or coords.dim() == 2 or coords.shape[0] == 1


class LayerTables(abc.ABC):
    """Mixin of a :class:`LayerPE` whose per-token tables its PE may compute for every layer at once (in
    ``encode_tokens``, when :func:`layer_tables_batchable`) and hand over with :meth:`prepare` (comrope, string,
    rope-mixed). The layer defines :meth:`table_key`, what its tables depend on besides the coords;
    :meth:`take_prepared` returns the handed tables once, and only while that key still matches (no optimizer step,
    dtype or grad-mode change in between). Pickling and deepcopy leave the tables out (they may hold a graph)."""

    _prepared: tuple[Any, ...] | None = None  # (key, coords, *tables)
    #: per-forward attributes that pickling and deepcopy drop
    TRANSIENT: tuple[str, ...] = ("_prepared",)

    @abc.abstractmethod
    def table_key(self, dtype: torch.dtype) -> tuple[Any, ...]:
        """What the layer's tables depend on besides the coords (parameter versions, dtype, grad mode)."""

    def prepare(self, key: tuple[Any, ...], coords: Tensor, *tables: Tensor) -> None:
        """Hand this layer its tables of the current forward, for ``coords``, under ``key`` (:meth:`table_key`)."""
        self._prepared = (key, coords, *tables)

    def take_prepared(self, dtype: torch.dtype) -> tuple[Any, ...] | None:
        """``(key, coords, *tables)`` as prepared, if the key still matches; consumed either way."""
        prepared, self._prepared = self._prepared, None
        return prepared if prepared is not None and prepared[0] == self.table_key(dtype) else None

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), **{name: None for name in self.TRANSIENT}}  # type: ignore[misc]


class CoordsCache:
    """One-entry cache of tables computed from ``coords`` alone (centred coords, PaPE's key
    columns, RoPE's sin/cos): reused while the *same* coords tensor object comes back unmodified
    with the same ``key``, which the tokenizers' canonical grid coords do every block of every
    step. The entry holds a reference to ``coords``, so its memory cannot be reused by another
    tensor; an in-place edit bumps ``_version`` and misses. Coords that require grad or are
    inference tensors (no version counter) are never cached, and nothing is stored under
    ``torch.inference_mode`` (its tensors cannot be saved for backward later); an entry made
    outside inference mode may be read inside it.
    """

    def __init__(self) -> None:
        self._entry: tuple[Tensor, int, Any, Any] | None = None  # (coords, version, key, value)

    def get(self, coords: Tensor, key: Any, compute: Callable[[], Any]) -> Any:
        usable = not (coords.requires_grad or coords.is_inference())
        hit = self._entry
        if usable and hit is not None and hit[0] is coords and hit[1] == coords._version and hit[2] == key:
            return hit[3]
        value = compute()
        if usable and not torch.is_inference_mode_enabled():
            self._entry = (coords, coords._version, key, value)
        return value

    def clear(self) -> None:
        self._entry = None


class LayerPE(nn.Module):
    """Per-layer part of a PE: acts on queries/keys and/or adds an attention bias."""

    def qk(self, q: Tensor, k: Tensor, x: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        """Return (possibly rotated / augmented) queries and keys.

        q, k: ``(B, H, P + N, d)``; x: the block's normalised input ``(B, P + N, D)``;
        coords: ``(B, N, p)`` or ``(N, p)``.
        """
        return q, k

    def bias(self, coords: Tensor) -> Tensor | None:
        """Additive attention bias broadcastable to ``(B, H, P + N, P + N)``, or ``None``."""
        return None

    def qk_basis(self, dtype: torch.dtype) -> Tensor | None:
        """Optional: a per-head linear map ``M (H, d, d)`` that :meth:`qk` applies to every row of q and k
        (prefix rows too) before anything else, i.e. ``qk(q, k) == qk_after_basis(M q, M k)``; ``None``
        (the default): no such map. ``dtype``: the q/k projection's weight dtype (``M`` comes in it or wider).

        A token-independent map commutes with the linear q/k projection, so the attention folds it into
        the projection weights (``W_q <- M W_q``, ``b_q <- M b_q`` per head: one ``(d, d) x (d, D)`` product
        per head and step) and then calls :meth:`qk_after_basis`, instead of two ``(d, d)`` products per
        token (:func:`pebench.models.vit.fold_qk_basis`; exact up to float rounding, tested)."""
        return None

    def qk_after_basis(self, q: Tensor, k: Tensor, x: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`qk` for q and k that already carry :meth:`qk_basis`'s map. Without a map (``qk_basis`` None) that
        is :meth:`qk` itself; a layer that declares a map overrides this (a registry-wide test checks it)."""
        return self.qk(q, k, x, coords)


class IdentityLayerPE(LayerPE):
    """A layer part that does nothing (used by PEs that only act on the token embedding)."""


class PositionalEncoding(nn.Module):
    """Model-level PE. Subclasses register themselves with :func:`pebench.encodings.register_pe`.

    Constructor arguments shared by every PE (passed by the backbone):
        dim: token width D; num_heads: H; depth: number of blocks L; spatial_dims: p;
        num_prefix_tokens: P (CLS tokens, which carry no position);
        grid: the training grid (needed by ``ape``; optional for others).
    PE-specific keyword options follow (e.g. ``impl="naive"`` for PaPE), declared in ``options``.
    """

    #: CLI name, set by the registry.
    name: ClassVar[str] = "?"
    #: True for PEs added to the token embedding (APE, sincos): they honour ``alpha``.
    additive: ClassVar[bool] = False
    #: Modalities the PE applies to (LookHere refuses point clouds).
    modalities: ClassVar[Sequence[str]] = ALL_MODALITIES
    #: True when the attention logits depend on the coordinates only through their differences (exactly
    #: relative: shifting every coordinate changes nothing), False when they do not (absolute PEs, LieRE).
    #: Every PE declares it; the tests check the declaration against the model's outputs.
    relative: ClassVar[bool | None] = None
    #: True when the logits depend on the coordinates only through distances (rotating every coordinate
    #: changes nothing: alibi, pape-ri, and trivially none). Declared by every PE; tested.
    rotation_invariant: ClassVar[bool | None] = None
    #: True when the PE is designed to make attention fall off with distance, by a fixed or learned
    #: monotone bias or mask (alibi, lookhere, pape, pape-ri). Declared by every PE; tested at initialisation.
    distance_decay: ClassVar[bool | None] = None
    #: True when the PE has trainable parameters at its default options. Declared by every PE; tested.
    learned: ClassVar[bool | None] = None
    #: True when the PE needs the tokens' integer training grid (a table indexed by grid offsets: rpb), so it
    #: does not apply to token sets off a grid (spiking patches, set probes); a one-line PEConfigError there.
    needs_grid: ClassVar[bool] = False
    #: The PE's keyword options (``--pe-option KEY=VALUE``), one :class:`~pebench.core.options.Option`
    #: each: ``build_pe`` validates against them, ``pe_options`` lists them, ``variant_label`` names
    #: non-default settings. Keys and defaults match the constructor's keyword arguments (tested).
    options: ClassVar[tuple[Option, ...]] = ()

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None) -> None:
        super().__init__()
        if dim % num_heads:
            raise PEConfigError(f"dim {dim} is not divisible by num_heads {num_heads}")
        if spatial_dims < 1:
            raise PEConfigError(f"spatial_dims must be >= 1, got {spatial_dims}")
        self.dim = dim
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.depth = depth
        self.spatial_dims = spatial_dims
        self.num_prefix_tokens = num_prefix_tokens
        self.train_grid = tuple(int(g) for g in grid) if grid is not None else None
        #: Inference-time scale of additive PEs (docs/architecture.md §4, alpha scaling).
        self.alpha = 1.0

    def encode_tokens(self, x: Tensor, coords: Tensor, grid: Sequence[int] | None) -> Tensor:
        """Add the PE to patch tokens ``x: (B, N, D)`` (identity for non-additive PEs)."""
        return x

    def layer(self, i: int) -> LayerPE:
        """The per-layer part for block ``i``."""
        return _IDENTITY

    @property
    def accepts_coord_augment(self) -> bool:
        """Whether the PE takes continuous coords, so that the training-time coordinate augmentation
        (:mod:`~pebench.encodings.coord_augment`) applies; False where coords must be integer grid
        cells (ape's table)."""
        return True

    def after_block(self, i: int, x: Tensor, coords: Tensor, grid: Sequence[int] | None,
                    mask: Tensor | None) -> Tensor:
        """The residual stream after block ``i``, ``x: (B, P + N, D)``, as the next block (and the
        backbone's taps) see it; the identity unless the PE acts between blocks (``cpe``). The backbone
        also calls it once with ``i = -1`` before the first block (``cpe placement=every`` acts there too).

        coords: ``(B, N, p)`` or ``(N, p)`` (patch tokens); grid: as in :meth:`encode_tokens`;
        mask: ``(B, P + N)`` bool, True = a real token, or ``None``."""
        return x

    def no_weight_decay(self) -> set[str]:
        """Parameter names (relative to this module) excluded from weight decay."""
        return set()

    def extra_repr(self) -> str:
        return f"dim={self.dim}, heads={self.num_heads}, p={self.spatial_dims}, prefix={self.num_prefix_tokens}"


_IDENTITY = IdentityLayerPE()

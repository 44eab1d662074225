"""Pretrained timm ViTs as subjects of pebench's analyses (``bench analyze``).

:class:`TimmTask` wraps one of timm's own model definitions (``VisionTransformer``: plain APE ViTs,
DeiT, DINOv2; ``Eva``: rope-vit axial / mixed, DINOv3, EVA02) in the interface the analyses of
:func:`~pebench.analysis.evaluators.run_analyses` read from a trained pebench task, so geometry,
robustness, alpha and extrapolation run unchanged on it:

================================  ==========================================================
pebench task interface            timm adapter
================================  ==========================================================
``features(x, content_perm, tap)``  per-block patch tokens ``[(B, N, D)] * L`` and coords ``(N, 2)``
``forward(x)``                    logits of the analysis head (see *Head* below)
``tokenize_count(x)`` / ``tokenizer.grid_for``  patch grid of the input (its size must divide)
``backbone.depth / embed_dim / pe``  ``len(blocks)``, ``embed_dim``, :class:`TimmPE`
``hparams``                       the constructor arguments (the untrained twin of the RPI null band
                                  is ``TimmTask(**hparams)`` built after ``torch.manual_seed(seed)``:
                                  timm's own initialisation of the same architecture)
================================  ==========================================================

**Taps.** ``block_out`` (layers ``1..L``) is timm's own ``forward_intermediates(x, indices=None,
norm=False, output_fmt="NLC", intermediates_only=True)``: the residual stream after each block with
the prefix tokens (class, register) split off by timm. ``attn_in`` (layers ``0..L-1``) is the tensor
that enters each block's attention module, captured by a forward *pre*-hook on ``blocks[i].attn``
during the same ``forward_intermediates`` call, prefix tokens dropped; the call stops once the last
block's attention input is captured (that block's attention and MLP feed no ``attn_in`` tap). In
timm's pre-norm blocks the attention receives ``blocks[i].norm1(x)`` (the LN1 output, the SSDC paper's tap); hooking the
attention's input rather than ``norm1``'s output also stays right for timm's post-norm blocks, whose
attention reads the raw stream.

**Coordinates.** The same contract as pebench's backbone: patch tokens in timm's row-major order
(``NHWC`` flattened), coords ``(N, 2)`` = integer ``(row, column)`` grid positions in patch units
(:func:`~pebench.encodings.coords.canonical_grid_coords`).

**RPI.** A forward hook on ``model.patch_embed`` permutes the patch embeddings (the *content*)
before timm adds anything positional: for APE models the (resampled) ``pos_embed`` is then added in
place, so every position keeps its embedding while the contents move; for RoPE models (axial,
mixed, DINOv3) the rotary tables are computed from the grid and applied by token index, so the
rotary coordinates stay in place while the tokens move. Prefix tokens are never permuted. This is
pebench's ``permute_content`` (content against coords) for both families.

**α (additive APE only).** :class:`TimmPE`'s ``alpha`` scales the patch part of ``pos_embed``
(the class / register entries, which are not positional, stay as they are); models without an
absolute table are not additive and the α sweep does not apply (``alpha_sweep`` is ``None``).

**Extrapolation.** Models are always built with ``dynamic_img_size=True``, so each model applies
its native rule at any input size: the APE table is resampled to the new grid by timm's
``resample_abs_pos_embed`` (bicubic interpolation), and RoPE tables are computed on the larger grid
by the model's own rope module (``get_embed(shape=(H, W))``; the DINOv3 rope normalises the grid to
``[-1, 1]`` itself). At the checkpoint's own grid both are exact (no resampling happens).

**Inputs.** Batches arrive normalised by the datamodule; they are mapped to the model's own
normalisation (``pretrained_cfg`` mean / std) by one per-channel affine map derived from the
datamodule's codec (:func:`~pebench.analysis.robustness.image_codec`), so shifts such as JPEG act
on the datamodule's images and the model sees inputs as it was trained to.

**Head.** Accuracy (robustness, extrapolation, the α sweep) needs a classifier for the dataset's
classes. ``head="probe"`` (default) fits a closed-form ridge-regression linear probe (float64,
deterministic) on timm's pooled pre-logits features of the first ``probe_samples`` training samples
in loader order; ``head="native"`` uses the checkpoint's own classifier, which must have the
dataset's number of classes.

**Checkpoints.** Local files only (``pretrained=False`` always): safetensors or ``torch.save``
files (``.pth`` / ``.pt`` / ``.bin``) holding a state dict, possibly under a ``"model"`` or
``"state_dict"`` key, in timm's key layout (as the hub delivers timm weights). Keys and shapes
must match the model exactly; :func:`check_state_dict` names the first mismatching key.
"""
from __future__ import annotations

import contextlib
import difflib
import hashlib
import math
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import timm
import torch
from safetensors.torch import load_file
from timm.layers import resample_abs_pos_embed
from timm.layers.pos_embed_sincos import RotaryEmbeddingCat, RotaryEmbeddingDinoV3, RotaryEmbeddingMixed
from timm.models.eva import Eva
from timm.models.vision_transformer import VisionTransformer
from torch import Tensor, nn
from torch.utils.data import DataLoader, Subset

from pebench.core.errors import ConfigError, UserError
from pebench.core.io import local_file
from pebench.encodings.coords import canonical_grid_coords
from pebench.models.tokenizers import ResolutionError

from .geometry import TAPS
from .robustness import image_codec

__all__ = ["TimmTask", "TimmPE", "CheckpointError", "read_state_dict", "check_state_dict", "file_sha256",
           "pe_family", "extrapolation_rule", "TAP_SOURCES", "input_affine_for", "fit_probe", "accuracy",
           "SUPPORTED_CLASSES", "PROBE_RIDGE", "POSITION_TABLES", "table_permutation", "with_position_table"]

#: timm model classes the adapter reads (subclasses included)
SUPPORTED_CLASSES = (VisionTransformer, Eva)
#: ridge strength of the linear probe, relative to the mean feature variance (standardised features)
PROBE_RIDGE = 1e-2
_ROPE_NAMES = ((RotaryEmbeddingMixed, "rope-mixed"), (RotaryEmbeddingDinoV3, "rope-dinov3"),
               (RotaryEmbeddingCat, "rope-axial"))
_UNWRAP_KEYS = ("model", "state_dict")


class CheckpointError(UserError):
    """A checkpoint that is missing, unreadable or does not fit the model (one line; CLI exit 2)."""

    phase = "checkpoint"


# ------------------------------------------------------------------------------ checkpoints
def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_state_dict(path: str | Path) -> dict[str, Tensor]:
    """The state dict stored in ``path`` (safetensors, or a ``torch.save`` file read with
    ``weights_only=True``), unwrapped from a ``"model"`` / ``"state_dict"`` key."""
    p = local_file(path)  # a URL, a missing path or a directory: one line, nothing fetched
    try:
        if p.suffix == ".safetensors":
            sd: Any = load_file(str(p), device="cpu")
        else:
            sd = torch.load(str(p), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any failure to read is a bad file for the user
        raise CheckpointError(f"cannot read checkpoint {str(p)!r} ({type(e).__name__}: "
                              f"{' '.join(str(e).split())[:160]})") from None
    for key in _UNWRAP_KEYS:
        if isinstance(sd, dict) and isinstance(sd.get(key), dict):
            sd = sd[key]
            break
    if not isinstance(sd, dict) or not sd or not all(isinstance(v, Tensor) for v in sd.values()):
        raise CheckpointError(f"checkpoint {str(p)!r} holds no state dict of tensors (optionally under "
                              f"{' or '.join(repr(k) for k in _UNWRAP_KEYS)})")
    return sd


def check_state_dict(model: nn.Module, sd: dict[str, Tensor], source: str) -> None:
    """Raise :class:`CheckpointError` naming the first key (in the model's order, then the
    checkpoint's) that is missing, has another shape, or is unknown to the model."""
    expected = model.state_dict()
    for key, t in expected.items():
        if key not in sd:
            raise CheckpointError(f"checkpoint {source!r} does not fit the model: missing key {key!r}")
        if tuple(sd[key].shape) != tuple(t.shape):
            raise CheckpointError(f"checkpoint {source!r} does not fit the model: key {key!r} has shape "
                                  f"{tuple(sd[key].shape)}, the model expects {tuple(t.shape)}")
    for key in sd:
        if key not in expected:
            raise CheckpointError(f"checkpoint {source!r} does not fit the model: unexpected key {key!r}")


# ------------------------------------------------------------------------------ model parts
def pe_family(model: nn.Module) -> str:
    """The model's native positional encoding in pebench's words: ``ape``, ``rope-axial``,
    ``rope-mixed``, ``rope-dinov3``, joined with ``+`` when both kinds are present (``ape+rope-axial``)."""
    parts = ["ape"] if getattr(model, "pos_embed", None) is not None else []
    rope = getattr(model, "rope", None)
    if rope is not None:
        parts.append(next((n for cls, n in _ROPE_NAMES if isinstance(rope, cls)), f"rope-{type(rope).__name__}"))
    return "+".join(parts) or "none"


def extrapolation_rule(model: nn.Module) -> str:
    """How the model reaches another input size (timm's native rule, ``dynamic_img_size=True``)."""
    rules = []
    if getattr(model, "pos_embed", None) is not None:
        rules.append("APE table resampled to the new grid (timm resample_abs_pos_embed, bicubic)")
    if getattr(model, "rope", None) is not None:
        rules.append(f"rotary tables computed on the new grid ({type(model.rope).__name__}.get_embed)")
    return "; ".join(rules) or "no positional encoding"


#: how the adapter reads each tap from timm (recorded in results.json)
TAP_SOURCES = {"block_out": "timm forward_intermediates(indices=None, norm=False, output_fmt='NLC'), prefix tokens "
                            "split off by timm",
               "attn_in": "forward pre-hook on blocks[i].attn: the tensor entering each block's attention "
                          "(= blocks[i].norm1 output in pre-norm blocks), prefix tokens dropped"}


class TimmPE:
    """What the analyses ask of ``task.backbone.pe``: ``additive`` (an absolute table is added to
    the tokens), ``alpha`` (scale of that table's patch part), ``num_heads``, ``spatial_dims``."""

    spatial_dims = 2

    def __init__(self, model: nn.Module) -> None:
        self._model = model
        self.name = pe_family(model)
        self.additive = getattr(model, "pos_embed", None) is not None
        self.num_heads = int(getattr(model.blocks[0].attn, "num_heads", 8))
        self._alpha = 1.0
        self._table: Tensor | None = None  # the unscaled pos_embed, kept while alpha != 1

    @property
    def alpha(self) -> float:
        return self._alpha

    @alpha.setter
    def alpha(self, value: float) -> None:
        if not self.additive:  # alpha = 1 (the model as it is) is the only value without an APE
            if float(value) != 1.0:
                raise ValueError(f"alpha scales an additive APE; {self.name} has none")
            return
        pos = self._model.pos_embed  # (1, P' + N, D), P' = prefix entries of the table
        if self._table is None:
            self._table = pos.detach().clone()
        start = 0 if getattr(self._model, "no_embed_class", False) else int(self._model.num_prefix_tokens)
        with torch.no_grad():
            pos.copy_(self._table)
            pos[:, start:].mul_(float(value))
        self._alpha = float(value)
        if self._alpha == 1.0:
            self._table = None


class _Backbone:
    """``task.backbone`` as the analyses read it (not a module: the parameters live in ``task.model``)."""

    def __init__(self, model: nn.Module) -> None:
        self.depth = len(model.blocks)
        self.embed_dim = int(model.embed_dim)
        self.num_prefix_tokens = int(model.num_prefix_tokens)
        self.pe = TimmPE(model)


class _PatchGrid:
    """``task.tokenizer``: the patch grid of an input size (sizes must divide by the patch size)."""

    spatial_dims = 2

    def __init__(self, patch_size: Sequence[int]) -> None:
        self.patch_size = tuple(int(p) for p in patch_size)

    def grid_for(self, size: Sequence[int]) -> tuple[int, ...]:
        size = tuple(int(s) for s in size)
        if any(s % p for s, p in zip(size, self.patch_size)):
            raise ResolutionError(f"image size {size} is not divisible by the patch size {self.patch_size}")
        return tuple(s // p for s, p in zip(size, self.patch_size))


# ------------------------------------------------------------------------------ the task
class _TapsComplete(Exception):
    """Raised by the ``attn_in`` capture at the last block's attention input: the last block's attention
    and MLP compute nothing that tap needs, so the forward pass stops there (the tokens already
    captured are exactly those of the full pass)."""


class TimmTask(nn.Module):
    """A timm ViT read as a pebench image task (see the module docstring).

    ``name``: a timm model name; ``model_options``: further ``timm.create_model`` keyword
    arguments (e.g. ``img_size``, ``patch_size``, ``depth``); ``num_classes``: the classifier
    size of the checkpoint (0: none); ``input_affine``: ``(scale, shift)`` per channel mapping the
    datamodule's normalised inputs to the model's normalisation (``None``: identity);
    ``head_classes``: classes of the analysis head (a probe, see :func:`fit_probe`; 0: the model's
    own classifier).
    """

    modality = "image"

    def __init__(self, name: str, model_options: dict[str, Any] | None = None, num_classes: int = 0,
                 input_affine: tuple[list[float], list[float]] | None = None, head_classes: int = 0) -> None:
        super().__init__()
        options = dict(model_options or {})
        for key in ("pretrained", "dynamic_img_size", "num_classes"):
            if key in options:
                raise ConfigError(f"model option {key!r} is set by bench analyze itself")
        if not timm.is_model(name):
            close = difflib.get_close_matches(name, timm.list_models(), n=3)
            raise ConfigError(f"unknown timm model {name!r}" + (f"; did you mean {', '.join(close)}?" if close else ""))
        self.hparams = {"name": name, "model_options": options, "num_classes": int(num_classes),
                        "input_affine": input_affine, "head_classes": int(head_classes)}
        try:
            self.model = timm.create_model(name, pretrained=False, num_classes=int(num_classes),
                                           dynamic_img_size=True, **options)
        except (TypeError, AssertionError) as e:  # an option the model does not take, or a bad value
            raise ConfigError(f"timm model {name!r} with options {options}: "
                             f"{' '.join(str(e).split()) or type(e).__name__}") from None
        if not isinstance(self.model, SUPPORTED_CLASSES):
            raise ConfigError(f"timm model {name!r} is a {type(self.model).__name__}; bench analyze reads "
                             f"timm's {' and '.join(c.__name__ for c in SUPPORTED_CLASSES)} models")
        self.backbone = _Backbone(self.model)
        self.tokenizer = _PatchGrid(self.model.patch_embed.patch_size)
        self.register_buffer("in_scale", torch.ones(1, self.in_chans, 1, 1), persistent=False)
        self.register_buffer("in_shift", torch.zeros(1, self.in_chans, 1, 1), persistent=False)
        self.set_input_affine(input_affine)
        width = int(getattr(self.model, "head_hidden_size", self.model.num_features))  # pooled feature size
        self.head = nn.Linear(width, int(head_classes)) if head_classes else None

    def set_input_affine(self, affine: tuple[Sequence[float], Sequence[float]] | None) -> None:
        """Set the per-channel map ``x * scale + shift`` from the datamodule's inputs to the model's
        (``None``: identity); see :func:`input_affine_for`."""
        scale, shift = affine or ([1.0] * self.in_chans, [0.0] * self.in_chans)
        if len(scale) != self.in_chans or len(shift) != self.in_chans:
            raise ValueError(f"input map has {len(scale)} channels; the model takes {self.in_chans}")
        with torch.no_grad():
            self.in_scale.copy_(torch.tensor(list(scale), dtype=torch.float32).view(1, -1, 1, 1))
            self.in_shift.copy_(torch.tensor(list(shift), dtype=torch.float32).view(1, -1, 1, 1))
        self.hparams["input_affine"] = None if affine is None else ([float(v) for v in scale],
                                                                    [float(v) for v in shift])

    @property
    def in_chans(self) -> int:
        return int(self.model.patch_embed.proj.in_channels)

    def _prep(self, x: Tensor) -> Tensor:
        """Datamodule normalisation -> the model's (``(B, C, H, W)``)."""
        return x * self.in_scale.to(x.dtype) + self.in_shift.to(x.dtype)

    def tokenize_count(self, inputs: Tensor) -> int:
        return int(math.prod(self.tokenizer.grid_for(inputs.shape[-2:])))

    @contextlib.contextmanager
    def _content_permuted(self, perm: Tensor | None) -> Iterator[None]:
        """Permute the patch embeddings (before any PE) for the duration of the block."""
        if perm is None:
            yield
            return

        def permute(t: Tensor) -> Tensor:  # (B, N, D); perm (N,) shared, or (B, N) one per sample
            if perm.dim() == 2:
                return t.gather(1, perm.unsqueeze(-1).expand(-1, -1, t.shape[-1]))
            return t[:, perm]

        def hook(module: nn.Module, args: Any, out: Tensor) -> Tensor:
            if out.dim() == 4:  # (B, H, W, D): dynamic_img_size keeps the grid shape
                B, H, W, D = out.shape
                return permute(out.reshape(B, H * W, D)).reshape(B, H, W, D)
            return permute(out)  # (B, N, D)

        handle = self.model.patch_embed.register_forward_hook(hook)
        try:
            yield
        finally:
            handle.remove()

    def features(self, inputs: Tensor, content_perm: Tensor | None = None,
                 tap: str = "block_out") -> tuple[list[Tensor], Tensor]:
        """Per-block patch tokens ``[(B, N, D)] * depth`` at ``tap`` and their coords ``(N, 2)``."""
        if tap not in TAPS:
            raise ValueError(f"unknown tap {tap!r}; available: {', '.join(TAPS)}")
        grid = self.tokenizer.grid_for(inputs.shape[-2:])
        P = self.backbone.num_prefix_tokens
        depth = len(self.model.blocks)
        attn_in: list[Tensor] = []

        def capture(module: nn.Module, args: Any, kwargs: dict) -> None:
            x = args[0] if args else kwargs["x"]  # (B, P + N, D): what the attention receives
            attn_in.append(x[:, P:])
            if len(attn_in) == depth:  # the last tap: the rest of the forward pass is not needed
                raise _TapsComplete

        handles = [blk.attn.register_forward_pre_hook(capture, with_kwargs=True)
                   for blk in self.model.blocks] if tap == "attn_in" else []
        out: Any = None
        try:
            with self._content_permuted(content_perm):
                out = self.model.forward_intermediates(self._prep(inputs), indices=None, norm=False,
                                                       output_fmt="NLC", intermediates_only=True)
        except _TapsComplete:
            pass
        finally:
            for h in handles:
                h.remove()
        feats = attn_in if tap == "attn_in" else list(out)
        return feats, canonical_grid_coords(grid, inputs.device)

    def pooled(self, inputs: Tensor) -> Tensor:
        """timm's pooled pre-logits features ``(B, D')`` (its own pooling and norms)."""
        return self.model.forward_head(self.model.forward_features(self._prep(inputs)), pre_logits=True)

    def forward(self, inputs: Tensor) -> Tensor:
        """Logits ``(B, C)`` of the analysis head (the probe, or the model's own classifier)."""
        self.tokenizer.grid_for(inputs.shape[-2:])
        if self.head is not None:
            return self.head(self.pooled(inputs))
        return self.model(self._prep(inputs))

    def load_checkpoint(self, sd: dict[str, Tensor], source: str) -> None:
        check_state_dict(self.model, sd, source)
        self.model.load_state_dict(sd, strict=True)


# ------------------------------------------------------------------------------ position-table interventions
#: ``bench analyze --position-table``: the learned absolute table as trained, or the inference-time interventions of
#: "Positional encodings anchor the spatial structure of vision transformers" (SSDC): its patch rows permuted by one
#: fixed permutation, or set to zero (the model without its PE, equivariant to permutations of the patches)
POSITION_TABLES = ("as-trained", "permuted", "zeroed")
#: the random stream of the table permutation (stream 0 of the seed draws the data and the RPI permutations)
_TABLE_STREAM = 1


def table_permutation(rows: int, seed: int) -> Tensor:
    """The fixed permutation of a table's ``rows`` patch rows under ``--position-table permuted``:
    ``numpy.random.default_rng([seed, 1]).permutation(rows)`` (a stream of the run's seed of its own)."""
    return torch.from_numpy(np.random.default_rng([int(seed), _TABLE_STREAM]).permutation(int(rows)))


def with_position_table(task: "TimmTask", grid: Sequence[int], mode: str, seed: int) -> "TimmTask":
    """``task``'s weights in the same architecture built for the token ``grid`` (``img_size`` = grid × patch, so the
    forward pass uses the table as given, without resampling it again), its absolute table resampled once to ``grid``
    as timm's forward pass resamples it (``resample_abs_pos_embed``, bicubic), then with its patch rows kept
    (``as-trained``), permuted (``permuted``: row ``i`` of the new table is row ``p[i]`` of the resampled one,
    ``p = table_permutation(rows, seed)``) or set to zero (``zeroed``). Prefix (class / register) rows and every other
    parameter are the task's. ``ConfigError`` for a model without an absolute table."""
    if mode not in POSITION_TABLES:
        raise ConfigError(f"--position-table must be one of {', '.join(POSITION_TABLES)}, got {mode!r}")
    model = task.model
    if getattr(model, "pos_embed", None) is None:
        raise ConfigError(f"--position-table {mode}: timm:{task.hparams['name']} has no absolute position table "
                          f"(its PE is {pe_family(model)})")
    gh, gw = (int(g) for g in grid)
    prefix = 0 if getattr(model, "no_embed_class", False) else int(model.num_prefix_tokens)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        table = resample_abs_pos_embed(state["pos_embed"], new_size=[gh, gw], old_size=list(model.patch_embed.grid_size),
                                       num_prefix_tokens=prefix)
        if mode == "permuted":
            table[:, prefix:] = table[:, prefix:][:, table_permutation(gh * gw, seed)]
        elif mode == "zeroed":
            table[:, prefix:] = 0.0
    ph, pw = task.tokenizer.patch_size
    options = dict(task.hparams["model_options"], img_size=(gh * ph, gw * pw))
    new = TimmTask(task.hparams["name"], options, task.hparams["num_classes"],
                   head_classes=task.hparams["head_classes"])
    new.load_checkpoint(dict(state, pos_embed=table), f"the {mode} table")
    new.set_input_affine(task.hparams["input_affine"])
    return new


# ------------------------------------------------------------------------------ inputs and head
def input_affine_for(datamodule: Any, model: nn.Module) -> tuple[list[float], list[float]] | None:
    """``(scale, shift)`` per channel with ``model_input = x * scale + shift`` for the datamodule's
    normalised ``x`` (``None`` when the datamodule exposes no normalisation or the model no mean / std)."""
    codec = image_codec(datamodule)
    cfg = getattr(model, "pretrained_cfg", None) or {}
    if codec is None or cfg.get("mean") is None or cfg.get("std") is None:
        return None
    to_unit = codec[0]
    c = len(cfg["mean"])
    zero = to_unit(torch.zeros(1, c, 1, 1, dtype=torch.float64)).flatten()  # the datamodule's mean
    one = to_unit(torch.ones(1, c, 1, 1, dtype=torch.float64)).flatten() - zero  # its std
    mean = torch.tensor(cfg["mean"], dtype=torch.float64)
    std = torch.tensor(cfg["std"], dtype=torch.float64)
    return (one / std).tolist(), ((zero - mean) / std).tolist()


def _ordered(dataset: Any, n: int | None, batch_size: int) -> DataLoader:
    if n is not None and n < len(dataset):
        dataset = Subset(dataset, range(int(n)))
    return DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=0,
                      collate_fn=getattr(dataset, "collate_fn", None))


def fit_probe(task: TimmTask, datamodule: Any, samples: int | None, batch_size: int = 64) -> dict[str, Any]:
    """Fit ``task.head`` as a ridge-regression probe on timm's pooled features of the first
    ``samples`` training samples (in order). Closed form in float64 on standardised features:
    ``W = (ZᵀZ + λ n I)⁻¹ Zᵀ(Y − Ȳ)``, ``λ =`` :data:`PROBE_RIDGE`.
    Returns ``{"samples", "train_acc1"}``."""
    if task.head is None:
        raise ValueError("fit_probe: the task has no probe head (head_classes = 0)")
    device = next(task.parameters()).device
    zs, ys = [], []
    was_training = task.training
    task.eval()
    try:
        with torch.no_grad():
            for batch in _ordered(datamodule.train_dataset(), samples, batch_size):
                x, y = batch[0].to(device), batch[1]
                zs.append(task.pooled(x).double().cpu())
                ys.append(y.long().cpu())
    finally:
        task.train(was_training)
    if not zs:
        raise ValueError("fit_probe: the training set is empty")
    z, y = torch.cat(zs), torch.cat(ys)  # (n, D), (n,)
    n, c = z.shape[0], task.head.out_features
    onehot = torch.nn.functional.one_hot(y, c).double()  # (n, C)
    mu, sd = z.mean(0), z.std(0, unbiased=False).clamp_min(1e-8)
    zn = (z - mu) / sd
    ybar = onehot.mean(0)
    gram = zn.T @ zn + PROBE_RIDGE * n * torch.eye(zn.shape[1], dtype=torch.float64)
    w = torch.linalg.solve(gram, zn.T @ (onehot - ybar))  # (D, C)
    with torch.no_grad():
        task.head.weight.copy_((w / sd[:, None]).T.float())
        task.head.bias.copy_((ybar - (mu / sd) @ w).float())
    train_acc = float(((zn @ w + ybar).argmax(1) == y).double().mean())
    return {"samples": int(n), "train_acc1": train_acc}


def accuracy(task: TimmTask, loader: Any) -> tuple[float | None, int]:
    """Top-1 accuracy of ``task`` over ``loader`` and the number of samples."""
    device = next(task.parameters()).device
    correct = n = 0
    was_training = task.training
    task.eval()
    try:
        with torch.no_grad():
            for batch in loader:
                x, y = batch[0].to(device), batch[1].to(device)
                correct += int((task(x).argmax(-1) == y).sum())
                n += int(y.numel())
    finally:
        task.train(was_training)
    return (correct / n if n else None), n

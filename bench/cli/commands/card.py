"""``bench card``: an analytic card of a positional encoding, measured without training.

The card probes each block's attention logits with random content, through the public PE
interface only: tokens ``X`` -> ``pe.encode_tokens`` (additive PEs) -> the block's ``norm1`` and
``qkv`` projection -> ``pe.layer(i).qk`` -> ``q k^T / sqrt(d)`` + ``pe.layer(i).bias``. Every block
is probed with the same content (a probe of each layer's attention, not the residual stream a
trained model would feed it). The backbone is a fresh one (initialisation, ``--seed``) or the
one in a trained checkpoint (``--checkpoint``). Content vectors are i.i.d. ``N(0, s^2)`` per
channel with ``s = 0.5`` (norm about 5.7 at width 128, the scale of patch tokens at
initialisation).

Effective logits. The model sees logits only through a softmax over keys, which ignores a
constant per query (PaPE's implementation drops such a constant) and makes a logit far below
the row's maximum invisible (LookHere masks keys with -1e9). So every comparison uses
*effective logits*: clip each row at ``max - 30``, then subtract the row's mean.

Columns (means over samples, heads and blocks; ``G`` the training grid side, default 8):

* ``shift``: relative change ``mean|dL| / mean|L|`` of the effective logits among the tokens
  of a ``G/2 x G/2`` block of content moved from the top-left to the bottom-right corner of the
  grid (softmax over the block's keys). 0 for PEs that see only relative positions.
* ``rot90``: the same when the whole ``G x G`` arrangement of content is rotated by 90 degrees
  (pairs compared at their rotated positions). 0 for rotation-invariant PEs.
* ``mirror``: the same under a left-right reflection: directionality (a PE whose logits depend
  on ``r_j - r_i`` only through ``|r_j - r_i|`` or ``|dx|`` gives 0).
* ``att d=0``, ``att <=1.5``, ``att <=3``, ``att <=6``, ``att >6``: attention mass vs distance:
  with one content vector shared by all tokens (so only position varies), ``N`` times the mean
  softmax weight of keys at Euclidean distance (patch units) in ``{0}``, ``(0, 1.5]``,
  ``(1.5, 3]``, ``(3, 6]``, ``> 6`` from the query (1 = uniform attention; NaN when the grid
  has no such pair, e.g. ``> 6`` for ``G < 6``).
* ``|L| <G``, ``|L| >=G``: logits beyond the training grid: on a ``2G x 2G`` grid (each PE's own
  rule for unseen grids), shared content as above, mean magnitude of the effective logits of
  pairs whose largest coordinate difference is ``< G`` (separations the training grid has) and
  ``>= G`` (separations it never had); ``att >=G``: ``4N`` times the mean softmax weight of the
  latter pairs (1 = uniform; near 0 when attention never reaches that far).

``none`` gives 0 in the first three columns, 1 in the attention columns and 0 in the ``|L|`` ones.
"""
from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Any, Sequence

from pebench.core.errors import ConfigError
from pebench.core.io import local_file

if TYPE_CHECKING:  # torch is imported inside the functions: `bench --help` stays torch-free
    import torch  # deferred: start-up time (torch; the CLI reads CARD_HELP from this module)

__all__ = ["cmd_card", "CARD_COLUMNS", "CARD_HELP", "pe_card", "card_rows", "backbone_from_checkpoint", "block_logits", "effective",
           "format_card"]

CARD_COLUMNS = ("shift", "rot90", "mirror", "att d=0", "att <=1.5", "att <=3", "att <=6", "att >6",
                "|L| <G", "|L| >=G", "att >=G")
#: the column definitions as `bench card --help` prints them
CARD_HELP = """\
Probe: random content tokens (N(0, 0.25) per channel) -> encode_tokens -> each block's norm1, qkv,
layer(i).qk, q k^T/sqrt(d) + layer(i).bias. Effective logits: each row clipped at max - 30, minus its
mean (what the softmax sees). Means over 8 samples, heads and blocks; G = training grid side (8).
  shift      relative change mean|dL|/mean|L| of effective logits of a G/2 x G/2 block of content moved
             from the top-left to the bottom-right corner (0: PE sees only relative positions)
  rot90      the same when the G x G content is rotated by 90 degrees (0: rotation invariant)
  mirror     the same under a left-right reflection (directionality; 0: no left/right asymmetry)
  att d=0 .. att >6
             attention mass vs Euclidean distance (patch units; bins 0, <=1.5, <=3, <=6, >6): N x mean
             softmax weight with one content vector shared by all tokens (1 = uniform)
  |L| <G, |L| >=G
             beyond the training grid: on a 2G x 2G grid (each PE's own rule), shared content, mean
             |effective logit| of pairs with max coordinate difference < G / >= G
  att >=G    4N x mean softmax weight of the latter pairs (1 = uniform; ~0: never attends that far)
none: 0 in shift/rot90/mirror and the |L| columns, 1 in the attention columns."""
_DIST_BINS = (0.0, 1.5, 3.0, 6.0)  # upper edges of the first four distance bins
_CLIP = 30.0


def _grid_coords(g: int) -> "torch.Tensor":
    import torch  # deferred: start-up time (torch; the CLI reads CARD_HELP from this module)

    ys, xs = torch.meshgrid(torch.arange(g), torch.arange(g), indexing="ij")
    return torch.stack([ys.flatten(), xs.flatten()], dim=-1).float()  # (g*g, 2) (y, x), row-major


def block_logits(backbone: Any, i: int, x: Any, coords: Any, grid: Sequence[int]) -> Any:
    """Attention logits ``(B, H, N, N)`` of block ``i`` for tokens ``x: (B, N, D)`` at ``coords``."""
    blk = backbone.blocks[i]
    h = blk.norm1(backbone.pe.encode_tokens(x, coords, tuple(grid)))  # (B, N, D)
    B, N, D = h.shape
    H = blk.attn.num_heads
    q, k, _ = blk.attn.qkv(h).reshape(B, N, 3, H, D // H).permute(2, 0, 3, 1, 4).unbind(0)  # (B, H, N, d)
    lpe = backbone.pe.layer(i)
    q, k = lpe.qk(q, k, h, coords)  # (B, H, N, d') with d' >= d
    logits = (q @ k.transpose(-1, -2)) * blk.attn.scale  # (B, H, N, N)
    bias = lpe.bias(coords)
    return logits if bias is None else logits + bias


def effective(logits: Any) -> Any:
    """Clip each row at ``max - 30`` and subtract the row mean (what the softmax can see)."""
    import torch  # deferred: start-up time (torch; the CLI reads CARD_HELP from this module)

    top = logits.amax(dim=-1, keepdim=True)
    c = torch.maximum(logits, top - _CLIP)
    return c - c.mean(dim=-1, keepdim=True)


def _rel_change(a: Any, b: Any) -> float:
    den = float(a.abs().mean())
    num = float((a - b).abs().mean())
    return 0.0 if num == 0.0 else num / den if den > 0 else math.inf


def pe_card(backbone: Any, grid: int = 8, samples: int = 8, content_std: float = 0.5, seed: int = 0,
            layers: Sequence[int] | None = None) -> dict[str, float]:
    """The card's columns (see the module docstring) for a 2-D backbone; ``layers`` default: all."""
    import torch  # deferred: start-up time (torch; the CLI reads CARD_HELP from this module)

    g = int(grid)
    if g < 2 or g % 2:
        raise ConfigError(f"card grid side must be an even integer >= 2, got {grid}")
    layers = list(range(backbone.depth)) if layers is None else list(layers)
    gen = torch.Generator().manual_seed(int(seed))
    D, N = backbone.embed_dim, g * g
    coords = _grid_coords(g)  # (N, 2)
    x = torch.randn(samples, N, D, generator=gen) * content_std  # (B, N, D)
    shared = (torch.randn(samples, 1, D, generator=gen) * content_std)  # (B, 1, D)
    # shift: a (g/2)^2 block of content at the top-left vs the bottom-right corner
    w = g // 2
    block = torch.randn(samples, w * w, D, generator=gen) * content_std
    cell = coords.long()
    idx_a = ((cell[:, 0] < w) & (cell[:, 1] < w)).nonzero().squeeze(1)  # row-major block order
    idx_b = ((cell[:, 0] >= g - w) & (cell[:, 1] >= g - w)).nonzero().squeeze(1)
    xa, xb = x.clone(), x.clone()
    xa[:, idx_a], xb[:, idx_b] = block, block
    # rot90 / mirror: content of cell (y, x) moves to perm_rot[(y, x)] / perm_mir[(y, x)]
    def moved(fn) -> "torch.Tensor":
        tgt = [fn(int(y), int(x_)) for y, x_ in cell]
        return torch.tensor([y * g + x_ for y, x_ in tgt])  # source token -> destination token
    rot = moved(lambda y, x_: (x_, g - 1 - y))
    mir = moved(lambda y, x_: (y, g - 1 - x_))

    def rearranged(dest: "torch.Tensor") -> "torch.Tensor":
        out = torch.empty_like(x)
        out[:, dest] = x
        return out

    xr, xm = rearranged(rot), rearranged(mir)
    big, coords2 = 2 * g, _grid_coords(2 * g)
    d2 = torch.cdist(coords, coords)  # (N, N)
    cheb2 = (coords2[:, None] - coords2[None]).abs().amax(-1)  # (4N, 4N)
    bins = [d2 == 0] + [(d2 > lo) & (d2 <= hi) for lo, hi in zip(_DIST_BINS[:-1], _DIST_BINS[1:])] + [d2 > _DIST_BINS[-1]]
    acc: dict[str, list[float]] = {c: [] for c in CARD_COLUMNS}
    with torch.no_grad():
        for i in layers:
            base = block_logits(backbone, i, x, coords, (g, g))
            la = block_logits(backbone, i, xa, coords, (g, g))[..., idx_a[:, None], idx_a]
            lb = block_logits(backbone, i, xb, coords, (g, g))[..., idx_b[:, None], idx_b]
            acc["shift"].append(_rel_change(effective(la), effective(lb)))
            for name, xt, dest in (("rot90", xr, rot), ("mirror", xm, mir)):
                lt = block_logits(backbone, i, xt, coords, (g, g))[..., dest[:, None], dest]
                acc[name].append(_rel_change(effective(base), effective(lt)))
            att = block_logits(backbone, i, shared.expand(-1, N, -1), coords, (g, g)).softmax(-1)  # (B, H, N, N)
            for col, m in zip(CARD_COLUMNS[3:8], bins):
                acc[col].append(float(att[..., m].mean()) * N)
            l2 = block_logits(backbone, i, shared.expand(-1, big * big, -1), coords2, (big, big))  # (B, H, 4N, 4N)
            e2 = effective(l2).abs()
            acc["|L| <G"].append(float(e2[..., cheb2 < g].mean()))
            acc["|L| >=G"].append(float(e2[..., cheb2 >= g].mean()))
            acc["att >=G"].append(float(l2.softmax(-1)[..., cheb2 >= g].mean()) * big * big)
    return {c: math.fsum(v) / len(v) for c, v in acc.items()}


def backbone_from_checkpoint(path: str) -> tuple[Any, dict[str, Any]]:
    """The backbone of a ``bench run`` checkpoint and its hyper-parameters (image runs only)."""
    from pebench.tasks.classification import ClassificationTask  # deferred: start-up time (torch)

    local = local_file(path)  # a URL, a missing path or a directory: one line, nothing fetched
    try:  # weights_only: the checkpoint's pickle may hold tensors and plain containers, never code
        task = ClassificationTask.load_from_checkpoint(str(local), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - not a classification checkpoint of this version
        raise ConfigError(f"cannot load checkpoint {path!r}: {type(e).__name__}: {' '.join(str(e).split())}") from None
    if task.modality != "image":
        raise ConfigError(f"bench card measures 2-D (image) PEs; checkpoint {path!r} is a {task.modality} model")
    task.eval()
    return task.backbone, dict(task.hparams)


def card_rows(pes: Sequence[str], model: str = "vit-nano", grid: int = 8, samples: int = 8, seed: int = 0,
              checkpoint: str | None = None) -> list[tuple[str, dict[str, float]]]:
    """``[(label, card)]`` for fresh backbones of each PE (or for one checkpoint)."""
    import torch  # deferred: start-up time (torch; the CLI reads CARD_HELP from this module)

    from pebench.models import build_backbone  # deferred: start-up time (torch)

    if checkpoint is not None:
        backbone, hp = backbone_from_checkpoint(checkpoint)
        train_grid = hp.get("train_grid")
        g = int(train_grid[0]) if train_grid else grid
        return [(f"{hp.get('pe')} (checkpoint)", pe_card(backbone, grid=g, samples=samples, seed=seed))]
    rows = []
    for pe in pes:
        torch.manual_seed(seed)
        backbone = build_backbone(model, pe=pe, spatial_dims=2, grid=(grid, grid)).eval()
        rows.append((pe, pe_card(backbone, grid=grid, samples=samples, seed=seed)))
    return rows


def format_card(rows: Sequence[tuple[str, dict[str, float]]]) -> str:
    """Markdown table of card rows (3 decimals)."""
    head = "| PE | " + " | ".join(c.replace("|", "\\|") for c in CARD_COLUMNS) + " |"  # `|L|`: escaped in a table
    sep = "|---|" + "---:|" * len(CARD_COLUMNS)
    lines = [head, sep]
    for label, card in rows:
        lines.append(f"| {label} | " + " | ".join(f"{card[c]:.3f}" for c in CARD_COLUMNS) + " |")
    return "\n".join(lines)


def cmd_card(args: argparse.Namespace) -> int:
    """``bench card``: the analytic PE card table (torch imported here, not at module import)."""
    from pebench.encodings import get_pe_class, list_pes  # deferred: start-up time (torch)
    from pebench.models import list_models  # deferred: start-up time (torch)

    if args.grid < 2 or args.grid % 2:
        raise ConfigError(f"--grid must be an even integer >= 2, got {args.grid}")
    if args.samples < 1:
        raise ConfigError(f"--samples must be >= 1, got {args.samples}")
    if args.model not in list_models():
        raise ConfigError(f"unknown model {args.model!r}; available: {', '.join(list_models())}")
    if args.checkpoint is not None and args.pe is not None:
        raise ConfigError("--checkpoint and --pe exclude each other (the checkpoint names its PE)")
    pes = [p.strip() for p in (args.pe or "").split(",") if p.strip()]
    for pe in pes:
        if "image" not in get_pe_class(pe).modalities:  # unknown names raise the registry's ValueError
            raise ConfigError(f"PE {pe!r} does not apply to images")
    pes = pes or [p for p in list_pes() if "image" in get_pe_class(p).modalities]
    print(format_card(card_rows(pes, model=args.model, grid=args.grid, samples=args.samples, seed=args.seed,
                                checkpoint=args.checkpoint)))
    return 0

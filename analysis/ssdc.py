"""Spatial Similarity–Distance Correlation (SSDC), docs/architecture.md §4.

SSDC follows "Positional encodings anchor the spatial structure of vision transformers": for
one layer, the cosine-similarity matrix of the L2-normalised *patch* tokens, averaged over the
probe batch,

    S = mean_b( Ẑ_b Ẑ_bᵀ ),        Ẑ_b = tokens_b / ||tokens_b||   (row-wise),   S: (N, N)

is compared with the pairwise distance ``D`` of the tokens' ``coords`` (L1 by default,
Euclidean as an option) through Spearman's rank correlation over the strict upper triangle:

    SSDC = Spearman({S_ij}_{i<j}, {−D_ij}_{i<j}).

A layer whose token similarity decays with spatial distance has SSDC > 0.

Ties (many in ``D`` for grid coords) get *average* ranks, exactly like
``scipy.stats.spearmanr`` / ``scipy.stats.rankdata(method="average")``. Everything stays in
torch (CPU or GPU); ranks and correlation sums are float64. For ``N = 4096`` (8.4M pairs) the
ranking uses an order-preserving float64 → non-negative int64 key so that the CPU sort takes
PyTorch's parallel radix-sort path, and integer-valued inputs (L1 distances of integer grids)
are ranked by counting (``bincount``) without a sort.

Distances are rounded to ``decimals`` (default 9) decimal places before ranking, so that
distances that are mathematically equal but differ by float round-off (e.g. coords like
``0.1 * k``) still count as ties. Pass ``decimals=None`` to rank the raw float distances.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "ssdc",
    "ssdc_from_similarity",
    "spearman",
    "average_ranks",
    "cosine_similarity_sum",
    "pairwise_distance",
    "check_distance",
    "as_shared_coords",
    "as_token_batch",
    "DISTANCES",
]

DISTANCES = ("l1", "euclidean")

_INT64_MAX = torch.iinfo(torch.int64).max
_INT64_MIN = torch.iinfo(torch.int64).min
# Integer-valued inputs whose value range is at most this (or 4x the element count) are
# ranked by counting instead of sorting.
_BINCOUNT_MAX_RANGE = 1 << 22


# ----------------------------------------------------------------------------- ranking
# The helpers with a trailing underscore may overwrite (and reuse the memory of) their input;
# at N = 4096 every fresh 67 MB buffer costs about as much as the arithmetic on it.
def _float_keys_(x: Tensor) -> Tensor:
    """Order-preserving map float64 ``(n,)`` → int64 ``(n,)``, in place (NaN-free input).

    ``−0.0`` is first folded onto ``+0.0``; then non-negative floats keep their bit pattern
    and negative floats get their 63 magnitude bits flipped (reversing their order while
    staying below every non-negative key). Returns an int64 view of ``x``'s memory.
    """
    x.add_(0.0)  # -0.0 + 0.0 = +0.0
    bits = x.view(torch.int64)
    flip = bits >> 63  # 0 or -1 (arithmetic shift)
    flip &= _INT64_MAX
    bits ^= flip
    return bits


def _ranks_by_counting(v: Tensor, num_bins: int) -> Tensor:
    """Average ranks of non-negative int64 ``v`` ``(n,)`` with ``max(v) < num_bins``."""
    counts = torch.bincount(v, minlength=num_bins)  # (num_bins,)
    ends = torch.cumsum(counts, 0)  # 1-based rank of the last member of each value
    avg = ends.to(torch.float64) - (counts.to(torch.float64) - 1.0) / 2.0  # (num_bins,)
    return avg.index_select(0, v)  # (n,)


def _ranks_by_sorting_(keys: Tensor) -> Tensor:
    """Average ranks (1-based, float64) of int64 ``keys`` ``(n,)``; overwrites ``keys``."""
    n = keys.numel()
    device = keys.device
    lo, hi = torch.aminmax(keys)
    # Shift to non-negative keys when that cannot overflow: PyTorch's CPU sort then takes its
    # (much faster) parallel radix path; on CUDA it is a radix sort either way.
    if bool(lo >= 0) or bool(hi <= _INT64_MAX + lo):
        keys.sub_(lo)
    sorted_keys, perm = torch.sort(keys, stable=True)  # (n,), (n,)
    new_group = torch.ones(n, dtype=torch.bool, device=device)  # first of a tie group
    torch.ne(sorted_keys[1:], sorted_keys[:-1], out=new_group[1:])
    ranks = keys.view(torch.float64)  # reuse the keys' memory for the output
    if bool(new_group.all()):  # no ties: rank = sorted position + 1
        src = torch.arange(1, n + 1, out=sorted_keys.view(torch.float64))
    else:
        group = torch.cumsum(new_group, 0)  # (n,) 1-based tie-group id in sorted order
        group -= 1
        counts = torch.bincount(group)  # (G,)
        ends = torch.cumsum(counts, 0)  # (G,) 1-based rank of each group's last member
        avg = ends.to(torch.float64) - (counts.to(torch.float64) - 1.0) / 2.0  # (G,)
        src = avg.index_select(0, group)  # (n,) rank of each sorted element
    ranks.scatter_(0, perm, src)
    return ranks


def _looks_integral(x: Tensor) -> bool:
    """Whether every element of float64 ``x`` is an integer with |x| < 2**53 (prefix check
    first, so continuous data is rejected in O(1))."""
    head = x[:1024]
    if not bool((head == torch.round(head)).all()):
        return False
    if not bool(torch.isfinite(x).all()) or not bool(x.abs().max() < 2.0**53):
        return False
    return bool((x == torch.round(x)).all())


def _average_ranks_(flat: Tensor) -> Tensor:
    """:func:`average_ranks` of a 1-D tensor the caller owns (it may be overwritten)."""
    n = flat.numel()
    if n == 0:
        return torch.empty(0, dtype=torch.float64, device=flat.device)
    if flat.dtype == torch.bool:
        flat = flat.to(torch.int64)
    if flat.is_complex():
        raise ValueError("average_ranks does not support complex tensors")
    if flat.is_floating_point():
        flat = flat.to(torch.float64)
        if bool(torch.isnan(flat).any()):
            return torch.full((n,), float("nan"), dtype=torch.float64, device=flat.device)
        if not _looks_integral(flat):
            return _ranks_by_sorting_(_float_keys_(flat))
        flat = flat.to(torch.int64)  # exact: integer-valued floats below 2**53
    ints = flat.to(torch.int64)
    lo, hi = torch.aminmax(ints)
    span = float(hi) - float(lo)
    if span < max(_BINCOUNT_MAX_RANGE, 4 * n):
        return _ranks_by_counting(ints - lo, int(span) + 1)
    return _ranks_by_sorting_(ints)


def average_ranks(x: Tensor) -> Tensor:
    """1-based ranks of the elements of ``x`` with ties given their average rank.

    Equivalent to ``scipy.stats.rankdata(x.ravel(), method="average")``: returns a float64
    tensor of shape ``(x.numel(),)`` on ``x``'s device; ``x`` is not modified. NaN anywhere in
    ``x`` gives all-NaN ranks (scipy's ``nan_policy="propagate"``). No Python loop over
    elements: a sort plus tie-group averaging, or a ``bincount`` for integer-valued data with
    a small range.
    """
    if not isinstance(x, Tensor):
        raise ValueError(f"average_ranks expects a torch.Tensor, got {type(x).__name__}")
    return _average_ranks_(x.reshape(-1).clone())


def _pearson_of_ranks_(rx: Tensor, ry: Tensor) -> Tensor:
    """Pearson correlation of two float64 rank vectors ``(n,)`` (centred in place);
    NaN if one is constant."""
    n = rx.numel()
    mean = (n + 1) / 2.0  # exact mean of average ranks 1..n
    dx = rx.sub_(mean)
    dy = ry.sub_(mean)
    num = torch.dot(dx, dy)
    den = torch.sqrt(torch.dot(dx, dx) * torch.dot(dy, dy))
    nan = torch.full((), float("nan"), dtype=torch.float64, device=rx.device)
    r = torch.where(den > 0, num / torch.where(den > 0, den, torch.ones_like(den)), nan)
    return r.clamp(-1.0, 1.0)  # clamp keeps NaN


def spearman(x: Tensor, y: Tensor) -> Tensor:
    """Spearman rank correlation of ``x`` and ``y`` (same number of elements, flattened).

    Average ranks for ties, as ``scipy.stats.spearmanr``. Returns a 0-dim float64 tensor on
    the inputs' device; NaN when either side is constant (or contains NaN) or has < 2 elements.
    """
    if not isinstance(x, Tensor) or not isinstance(y, Tensor):
        raise ValueError("spearman expects two torch.Tensors")
    if x.numel() != y.numel():
        raise ValueError(f"spearman: x and y must have the same number of elements, got "
                         f"{x.numel()} and {y.numel()}")
    if x.numel() < 2:
        return torch.full((), float("nan"), dtype=torch.float64, device=x.device)
    return _pearson_of_ranks_(average_ranks(x), average_ranks(y))


# ----------------------------------------------------------------------------- inputs
def check_distance(distance: str) -> str:
    """``distance`` lower-cased, if it is one of :data:`DISTANCES` (else ``ValueError``)."""
    if not isinstance(distance, str) or distance.lower() not in DISTANCES:
        raise ValueError(f"distance must be one of {DISTANCES}, got {distance!r}")
    return distance.lower()


def as_shared_coords(coords: Tensor) -> Tensor:
    """``(N, p)`` or ``(B, N, p)`` (identical over the batch; the first is used) → ``(N, p)``."""
    if not isinstance(coords, Tensor):
        coords = torch.as_tensor(coords)
    if coords.dim() == 3:
        if coords.shape[0] < 1:
            raise ValueError("coords of shape (B, N, p) needs B >= 1")
        coords = coords[0]
    if coords.dim() != 2:
        raise ValueError(f"coords must be (N, p) or (B, N, p), got shape {tuple(coords.shape)}")
    if coords.shape[0] < 2 or coords.shape[1] < 1:
        raise ValueError(f"coords needs N >= 2 tokens and p >= 1 dims, got {tuple(coords.shape)}")
    return coords


def as_token_batch(tokens: Tensor) -> Tensor:
    """``(N, D)`` or ``(B, N, D)`` → ``(B, N, D)``."""
    if not isinstance(tokens, Tensor):
        raise ValueError(f"tokens must be a torch.Tensor, got {type(tokens).__name__}")
    if tokens.dim() == 2:
        tokens = tokens.unsqueeze(0)
    if tokens.dim() != 3:
        raise ValueError(f"tokens must be (B, N, D) or (N, D), got shape {tuple(tokens.shape)}")
    if tokens.shape[0] < 1 or tokens.shape[2] < 1:
        raise ValueError(f"tokens must have B >= 1 and D >= 1, got shape {tuple(tokens.shape)}")
    return tokens


def pairwise_distance(coords: Tensor, distance: str = "l1", *, decimals: int | None = 9) -> Tensor:
    """Pairwise coordinate distances ``(N, N)`` in float64 (``coords``: ``(N, p)``/``(B, N, p)``).

    Rounded to ``decimals`` decimal places (``None``: no rounding) so round-off does not
    break ties.
    """
    distance = check_distance(distance)
    c = as_shared_coords(coords).to(torch.float64)  # (N, p)
    if distance == "l1":
        d = torch.cdist(c, c, p=1.0)
    else:  # exact difference-based Euclidean distance (no |x|²+|y|²−2xy shortcut)
        d = torch.cdist(c, c, p=2.0, compute_mode="donot_use_mm_for_euclid_dist")
    if decimals is not None:
        d = torch.round(d, decimals=int(decimals))
    return d  # (N, N)


def cosine_similarity_sum(tokens: Tensor, dtype: torch.dtype = torch.float64) -> tuple[Tensor, int]:
    """``Σ_b Ẑ_b Ẑ_bᵀ`` ``(N, N)`` and ``B`` for tokens ``(B, N, D)`` (or ``(N, D)``).

    One ``(N, B·D) @ (B·D, N)`` matmul in ``dtype`` (no ``(B, N, N)`` intermediate).
    Zero tokens normalise to zero vectors.
    """
    t = as_token_batch(tokens)
    b, n, d = t.shape
    z = F.normalize(t.to(dtype), p=2.0, dim=-1)  # (B, N, D)
    zt = z.transpose(0, 1).reshape(n, b * d)  # (N, B·D)
    return zt @ zt.transpose(0, 1), b  # (N, N), B


# ----------------------------------------------------------------------------- SSDC
def _upper_pairs(m: Tensor) -> Tensor:
    """Strict upper triangle of ``m`` ``(N, N)`` in row-major pair order ``(N(N-1)/2,)``.

    Concatenates the N−1 row slices (views; one copy kernel) — cheaper than a triu index
    gather or a boolean mask for N in the thousands.
    """
    n = m.shape[0]
    return torch.cat([m[i, i + 1:] for i in range(n - 1)])


def _integer_offsets(c: Tensor) -> Tensor | None:
    """``c − c[0]`` as int64 ``(N, p)`` when every coordinate difference is an integer of
    moderate size (grid coords, also with a common sub-patch offset), else ``None``."""
    rel = c.to(torch.float64) - c[:1].to(torch.float64)  # (N, p)
    if not bool(torch.isfinite(rel).all()):
        return None
    if bool((rel == torch.round(rel)).all()) and bool(rel.abs().max() < 2.0**20):
        return rel.to(torch.int64)
    return None


def _neg_distance_pair_ranks(coords: Tensor, distance: str, decimals: int | None,
                             device: torch.device) -> Tensor:
    """Average ranks ``(P,)`` of ``{−D_ij}_{i<j}`` (row-major pair order), float64.

    Integer coordinate differences use exact int64 distances (L1, or squared Euclidean,
    which has the same ranks as Euclidean) ranked by counting; otherwise float64 distances
    (rounded to ``decimals``) are ranked by sorting.
    """
    c = as_shared_coords(coords).to(device)
    ints = _integer_offsets(c)
    if ints is None:
        d = pairwise_distance(c, distance, decimals=decimals)  # (N, N) float64
        return _average_ranks_(_upper_pairs(d).neg_())
    n, p = ints.shape
    span = int(ints.max()) - int(ints.min())
    bound = p * span if distance == "l1" else p * span * span  # max possible distance
    dtype = torch.int32 if bound < 2**31 - 1 else torch.int64  # int32 halves the traffic
    ints = ints.to(dtype)
    d = torch.zeros(n, n, dtype=dtype, device=device)  # (N, N)
    for k in range(p):  # p <= a few
        diff = ints[:, None, k] - ints[None, :, k]  # (N, N)
        d += diff.abs_() if distance == "l1" else diff.mul_(diff)
    d_pairs = _upper_pairs(d)  # (P,), >= 0
    del d
    hi = int(d_pairs.max())
    neg = d_pairs.neg_().add_(hi)  # (P,) = hi − D, in [0, hi], same order as −D
    if hi < max(_BINCOUNT_MAX_RANGE, 4 * neg.numel()):
        return _ranks_by_counting(neg, hi + 1)
    return _ranks_by_sorting_(neg.to(torch.int64))


#: the last few ``{−D_ij}`` rank vectors (grids up to :data:`_CACHED_MAX_TOKENS` tokens), keyed by the coords'
#: values, distance, rounding and device: every layer, permutation and pass of one geometry analysis ranks the
#: same grid, and ranking it was half the time of an SSDC at N = 256 (0.09 of 0.16 s, loaded 2-core CPU)
_DISTANCE_RANKS: dict[tuple, Tensor] = {}
_CACHED_MAX_TOKENS = 1024


def _distance_ranks(c: Tensor, distance: str, decimals: int | None, device: torch.device) -> Tensor:
    """:func:`_neg_distance_pair_ranks`, remembered for small grids; a fresh copy each call (the caller
    centres it in place)."""
    if c.shape[0] > _CACHED_MAX_TOKENS:
        return _neg_distance_pair_ranks(c, distance, decimals, device)
    cpu = c.detach().to("cpu", torch.float64).contiguous()
    key = (tuple(cpu.shape), cpu.numpy().tobytes(), distance, decimals, str(device))
    ranks = _DISTANCE_RANKS.get(key)
    if ranks is None:
        ranks = _DISTANCE_RANKS[key] = _neg_distance_pair_ranks(c, distance, decimals, device)
        while len(_DISTANCE_RANKS) > 4:
            _DISTANCE_RANKS.pop(next(iter(_DISTANCE_RANKS)))
    return ranks.clone()


def ssdc_from_similarity(S: Tensor, coords: Tensor, distance: str = "l1", *,
                         decimals: int | None = 9) -> Tensor:
    """SSDC from a (batch-averaged) similarity matrix ``S`` ``(N, N)`` and ``coords`` ``(N, p)``.

    Returns a 0-dim float64 tensor (NaN when either side is constant over the pairs).
    """
    if not isinstance(S, Tensor) or S.dim() != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(f"S must be a square (N, N) tensor, got "
                         f"{tuple(S.shape) if isinstance(S, Tensor) else type(S).__name__}")
    distance = check_distance(distance)
    c = as_shared_coords(coords)
    n = S.shape[0]
    if c.shape[0] != n:
        raise ValueError(f"S is ({n}, {n}) but coords has N = {c.shape[0]} tokens")
    rank_s = _average_ranks_(_upper_pairs(S.to(torch.float64)))  # (P,), P = N(N-1)/2
    rank_neg_d = _distance_ranks(c, distance, decimals, S.device)  # (P,)
    return _pearson_of_ranks_(rank_s, rank_neg_d)


def ssdc(tokens: Tensor, coords: Tensor, distance: str = "l1", *, decimals: int | None = 9) -> float:
    """SSDC of one layer's patch tokens (docs/architecture.md §4).

    Args:
        tokens: ``(B, N, D)`` or ``(N, D)`` patch tokens (no CLS / prefix tokens).
        coords: ``(N, p)``, or ``(B, N, p)`` identical across the batch (the first is used).
        distance: ``"l1"`` (default) or ``"euclidean"``.
        decimals: distances are rounded to this many decimals before ranking (``None``: off).

    Returns:
        Spearman({S_ij}_{i<j}, {−D_ij}_{i<j}) as a float; NaN if either side is constant.
    """
    distance = check_distance(distance)
    t = as_token_batch(tokens)
    c = as_shared_coords(coords)
    if c.shape[0] != t.shape[1]:
        raise ValueError(f"tokens have N = {t.shape[1]} but coords have N = {c.shape[0]}")
    s_sum, b = cosine_similarity_sum(t)  # (N, N) float64
    return float(ssdc_from_similarity(s_sum / b, c, distance, decimals=decimals))

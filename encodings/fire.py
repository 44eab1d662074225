"""``fire``: FIRE, a learned function of the progressively normalised distance as attention bias.

Paper: Li et al., ICLR 2024, "Functional Interpolation for Relative Positions Improves Long Context
Transformers" (FIRE). Published form (causal text, query position ``i``, key ``j <= i``): the bias of
head ``h`` is

    b_h(i, j) = f_theta( psi(i - j) / psi(max(L, i)) )_h,      psi(x) = log(c x + 1),

with ``f_theta`` an MLP ``1 -> 32 -> H`` (ReLU) shared by the heads (one output each), ``c`` a learned
scalar (initialised to 0.1), ``L`` a learned threshold (``|512 * m|`` with a learned multiplier ``m``,
initialised to 1, on the fixed 512), and ``eps = 1e-6`` added to the denominator. These defaults are
the paper's appendix code (``mlp_width=32, init_c=0.1, init_L=512, eps=1e-6``, ``log(|c x| + 1)``).
Each block has its own FIRE module (the appendix module is instantiated per attention layer). The MLP's
weights are raw parameters drawn as ``nn.Linear``'s default init (``U(+-1/sqrt(fan_in))``), so that the
backbone's re-initialisation of its ``nn.Linear`` layers (std 0.02) does not replace the published init.

pebench's n-D (bidirectional) reading, stated here because the paper defines only the causal 1-D case:

* distance ``i - j`` -> the Euclidean distance ``||r_j - r_i||`` of the coordinates, in patch units;
* query position ``i`` (the farthest key a causal query sees) -> ``R_i = max_j ||r_j - r_i||``, the
  distance from query ``i`` to its farthest key (over the tokens given, padding included), so the
  normaliser is ``psi(max(L, R_i)) + eps``. With ``L = 512`` patches no ViT grid in pebench exceeds the
  threshold at initialisation: the progressive part matters only once ``L`` has been learned smaller.

Evaluation (``impl``): the MLP's input ``x_ij`` is a function of the pair's distance and of the query's
normaliser, itself a function of the query's farthest-key distance ``R_i``; on a grid both take few
distinct values (a 16 x 16 grid: 65,536 pairs, 120 distinct distances). ``impl="unique"`` (default)
evaluates the MLP once per distinct (distance, ``R_i``) key and gathers the ``(B|1, N, N, H)`` bias from
that table; the keys depend on the coords alone and are cached per coords tensor. The same function and
the same gradients (each key's entries share every derivative), summed in another order; ``impl="dense"`` evaluates it on every pair (the formula as written; tests hold the two equal in
float64). Runs committed before ``unique`` existed used ``dense``.

The bias depends on distances only: exactly relative and rotation invariant (declared; tested). It is
a bias PE like ALiBi: a dense ``(B, H, N, N)`` bias for short sequences and a FlexAttention
``score_mod`` (the MLP evaluated per logit, no ``T x T`` tensor) for long ones
(:mod:`pebench.models.attention`); the per-query ``R_i`` is computed in chunks of queries (memory
``O(chunk * N)``). Prefix (CLS) rows and columns of the bias are zero. The bias is computed in float32
or wider and cast to q's dtype.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pebench.core.options import Option

from .base import CoordsCache, LayerPE, PEConfigError, PositionalEncoding
from .bias import BiasLayerPE, entry_distance, pairwise_distance
from .registry import register_pe

__all__ = ["FIRE", "FIRELayer", "farthest_distance", "FIRE_IMPLS"]

#: ``impl``: the MLP once per distinct (distance, normaliser) key, or on every pair
FIRE_IMPLS = ("unique", "dense")

#: queries per chunk when computing each query's farthest-key distance
_CHUNK = 1024


def farthest_distance(c: Tensor) -> Tensor:
    """``R_i = max_j ||c_j - c_i||`` of coords ``(B, N, p)``: ``(B, N)``, in chunks of queries."""
    out = [pairwise_distance_rows(c, c[:, s:s + _CHUNK]).amax(-1) for s in range(0, c.shape[1], _CHUNK)]
    return torch.cat(out, dim=1)


def pairwise_distance_rows(c: Tensor, rows: Tensor) -> Tensor:
    """Exact distances ``(B, n, N)`` from ``rows (B, n, p)`` to every point of ``c (B, N, p)``."""
    return torch.cdist(rows, c, compute_mode="donot_use_mm_for_euclid_dist")


class FIRELayer(BiasLayerPE):
    """One block's FIRE: the MLP ``1 -> width -> H``, ``c`` and the threshold multiplier."""

    def __init__(self, num_heads: int, num_prefix_tokens: int, width: int = 32, init_c: float = 0.1,
                 init_L: float = 512.0, eps: float = 1e-6, impl: str = "unique") -> None:
        super().__init__()
        self.impl = impl
        self._coord_cache = CoordsCache()  # impl="unique": the pairs' keys, see _pair_keys
        # MLP 1 -> width -> H as raw parameters, nn.Linear's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        self.fc1_weight = nn.Parameter(torch.empty(width).uniform_(-1.0, 1.0))  # (W,): fan_in 1
        self.fc1_bias = nn.Parameter(torch.empty(width).uniform_(-1.0, 1.0))  # (W,)
        bound = 1 / math.sqrt(width)
        self.fc2_weight = nn.Parameter(torch.empty(num_heads, width).uniform_(-bound, bound))  # (H, W)
        self.fc2_bias = nn.Parameter(torch.empty(num_heads).uniform_(-bound, bound))  # (H,)
        self.c = nn.Parameter(torch.tensor(float(init_c)))
        self.register_buffer("init_L", torch.tensor(float(init_L)), persistent=False)  # fixed
        self.L_multiplier = nn.Parameter(torch.tensor(1.0))
        self.eps = float(eps)
        self.num_heads = num_heads
        self.num_prefix_tokens = num_prefix_tokens

    def _psi(self, x: Tensor) -> Tensor:
        return torch.log(torch.abs(self.c.to(x.dtype) * x) + 1)

    def normaliser(self, c: Tensor) -> Tensor:
        """``psi(max(L, R_i)) + eps`` per query: ``(B, N)`` from coords ``(B, N, p)``."""
        threshold = torch.abs(self.L_multiplier * self.init_L).to(c.dtype)
        return self._psi(torch.maximum(farthest_distance(c), threshold)) + self.eps

    def _mlp(self, x: Tensor) -> Tensor:
        """``f_theta``: ``(..., )`` -> ``(..., H)``."""
        hidden = torch.relu(x.unsqueeze(-1) * self.fc1_weight.to(x.dtype) + self.fc1_bias.to(x.dtype))  # (..., W)
        return F.linear(hidden, self.fc2_weight.to(x.dtype), self.fc2_bias.to(x.dtype))  # (..., H)

    def _pair_keys(self, coords: Tensor, c: Tensor) -> tuple[Tensor, Tensor, Tensor, torch.Size]:
        """For ``impl="unique"``, from the coords alone (cached per coords tensor: the tokenizers' grid comes
        back every step): one representative pair per distinct (distance, farthest-key distance of the query)
        key, its distance ``(U,)`` and its query's ``R_i`` ``(U,)``, the key of every pair ``(B|1 * N * N,)``
        and the pairs' shape. The MLP input is a function of the two (the normaliser is one of ``R_i``)."""
        def compute() -> tuple[Tensor, Tensor, Tensor, torch.Size]:
            d = pairwise_distance(c)  # (B|1, N, N)
            far = d.amax(-1)  # (B|1, N): farthest_distance's R_i
            _, key_d = torch.unique(d, return_inverse=True)  # (B|1, N, N)
            _, key_r = torch.unique(far, return_inverse=True)  # (B|1, N)
            key = key_d * (int(key_r.max()) + 1) + key_r.unsqueeze(-1)  # (B|1, N, N)
            keys, inverse = torch.unique(key.flatten(), return_inverse=True)  # (U,), (B|1 * N * N,)
            first = torch.full((keys.numel(),), inverse.numel(), dtype=torch.long, device=d.device)
            first.scatter_reduce_(0, inverse, torch.arange(inverse.numel(), device=d.device), "amin")  # (U,)
            return d.flatten()[first], far.flatten()[first // d.shape[-1]], inverse, d.shape
        return self._coord_cache.get(coords, (c.dtype, c.device, tuple(c.shape)), compute)

    def bias(self, coords: Tensor) -> Tensor:
        c = coords if coords.dim() == 3 else coords.unsqueeze(0)  # (B|1, N, p)
        c = c.to(torch.promote_types(c.dtype, torch.float32))
        threshold = torch.abs(self.L_multiplier * self.init_L).to(c.dtype)
        if self.impl == "dense":
            d = pairwise_distance(c)  # (B|1, N, N); coords carry no gradient
            norm = self._psi(torch.maximum(d.amax(-1), threshold)) + self.eps  # (B|1, N)
            bias = self._mlp(self._psi(d) / norm.unsqueeze(-1))  # (B|1, N, N, H)
        else:  # one MLP row per distinct (distance, R_i) key, gathered back to the pairs
            d_u, far_u, inverse, shape = self._pair_keys(coords, c)
            x = self._psi(d_u) / (self._psi(torch.maximum(far_u, threshold)) + self.eps)  # (U,)
            table = self._mlp(x).t()  # (H, U)
            # index_select, not table[:, inverse]: the same gather, whose backward is an index_add_ instead of advanced
            # indexing's accumulating index_put_ (as rpb's table)
            picked = table.index_select(1, inverse)  # (H, B|1 * N * N)
            return self._finish(picked.view(-1, *shape).movedim(0, 1))  # (B|1, H, N, N), + prefix
        return self._finish(bias.movedim(-1, 1))  # (B|1, H, N, N) -> with prefix rows / cols

    def _bias_entry(self, c: Tensor) -> Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]:
        dt = c.dtype
        norm = self.normaliser(c)  # (B, N)
        w1, b1 = self.fc1_weight.to(dt), self.fc1_bias.to(dt)  # (W,), (W,)
        w2, b2 = self.fc2_weight.to(dt), self.fc2_bias.to(dt)  # (H, W), (H,)
        cval = self.c.to(dt)
        width = w1.shape[0]

        def entry(b: Tensor, h: Tensor, i: Tensor, j: Tensor) -> Tensor:
            x = torch.log(torch.abs(cval * entry_distance(c, b, i, j)) + 1) / norm[b, i]
            out = b2[h]
            for u in range(width):  # the MLP of one scalar, unrolled (score_mod works on scalars)
                out = out + w2[h, u] * torch.relu(w1[u] * x + b1[u])
            return out
        return entry


@register_pe("fire", order=65)
class FIRE(PositionalEncoding):
    """FIRE (Li et al. 2024) on the Euclidean distance of n-D coords; one module per block."""

    relative = True
    rotation_invariant = True
    distance_decay = False  # learned: the bias can take any shape; nothing makes it decay at initialisation
    learned = True
    options = (
        Option("mlp_width", "int", 32, "hidden width of the per-block MLP 1 -> width -> heads (published: 32)"),
        Option("init_c", "float", 0.1, "initial c of psi(x) = log(c x + 1) (published: 0.1)"),
        Option("init_L", "float", 512.0, "the threshold L (patch units) that the learned multiplier scales "
               "(published: 512)"),
        Option("impl", "str", "unique", "unique: the MLP once per distinct (distance, normaliser) key, gathered; "
               "dense: on every pair (same function and gradients, another summation order)", FIRE_IMPLS),
    )

    def __init__(self, dim: int, num_heads: int, depth: int, spatial_dims: int,
                 num_prefix_tokens: int = 0, grid: Sequence[int] | None = None, mlp_width: int = 32,
                 init_c: float = 0.1, init_L: float = 512.0, impl: str = "unique") -> None:
        super().__init__(dim, num_heads, depth, spatial_dims, num_prefix_tokens, grid)
        if mlp_width < 1:
            raise PEConfigError(f"fire mlp_width must be >= 1, got {mlp_width}")
        if not (math.isfinite(init_c) and init_c > 0):
            raise PEConfigError(f"fire init_c must be a finite number > 0, got {init_c}")
        if not (math.isfinite(init_L) and init_L > 0):
            raise PEConfigError(f"fire init_L must be a finite number > 0, got {init_L}")
        self.mlp_width, self.init_c, self.init_L, self.impl = int(mlp_width), float(init_c), float(init_L), impl
        self.layers = nn.ModuleList(FIRELayer(num_heads, num_prefix_tokens, self.mlp_width, self.init_c, self.init_L,
                                              impl=impl) for _ in range(depth))

    def layer(self, i: int) -> LayerPE:
        return self.layers[i]

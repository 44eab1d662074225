"""The base of the PEs that only add an attention bias (``alibi``, ``fire``, ``lookhere``, ``rpb``): the bias as
a dense tensor and as a FlexAttention ``score_mod`` (``pebench.models.attention``), and the exact coordinate
distances they build it from.

FlexAttention's ``score_mod`` interface: PyTorch, ``torch.nn.attention.flex_attention`` (Dong et al., 2024,
"Flex Attention: A Programming Model for Generating Optimized Attention Kernels", arXiv:2412.05496).
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from .base import LayerPE, batch_coords

__all__ = ["BiasLayerPE", "ScoreMod", "pairwise_distance", "entry_distance"]


def pairwise_distance(c: Tensor) -> Tensor:
    """Exact Euclidean distances ``(B, N, N)`` of coords ``(B, N, p)`` (no matmul expansion)."""
    return torch.cdist(c, c, compute_mode="donot_use_mm_for_euclid_dist")


def entry_distance(c: Tensor, b: Tensor, i: Tensor, j: Tensor) -> Tensor:
    """``||c[b, j] - c[b, i]||`` for index tensors (one entry of :func:`pairwise_distance`, in a score_mod)."""
    sq = None
    for dim in range(c.shape[-1]):
        diff = c[b, j, dim] - c[b, i, dim]
        sq = diff * diff if sq is None else sq + diff * diff
    return torch.sqrt(sq)


#: FlexAttention's ``score_mod(score, b, h, q_idx, kv_idx) -> score`` (scalar-style tensor ops)
ScoreMod = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]


class BiasLayerPE(LayerPE):
    """A layer PE that only adds a bias; remembers q's dtype from ``qk`` to cast the bias.

    Subclasses give the bias twice: as a ``(B|1, H, P + N, P + N)`` tensor (``bias``, the dense
    reference) and as a FlexAttention ``score_mod`` (``flex_score_mod``) computing one entry of it
    from the coordinates, so that no ``T x T`` tensor is formed (``pebench.models.attention``)."""

    num_prefix_tokens: int = 0

    def flex_score_mod(self, coords: Tensor, batch_size: int) -> ScoreMod:
        """``score_mod`` adding ``bias(coords)[b, h, q_idx, kv_idx]`` to the scaled logit."""
        c = batch_coords(coords, batch_size)
        c = c.to(torch.promote_types(c.dtype, torch.float32)).contiguous()  # (B, N, p)
        entry = self._bias_entry(c)
        P = self.num_prefix_tokens
        if not P:
            return lambda score, b, h, q_idx, kv_idx: score + entry(b, h, q_idx, kv_idx)

        def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            patch = (q_idx >= P) & (kv_idx >= P)  # prefix rows and columns: no bias
            i, j = torch.where(q_idx >= P, q_idx - P, 0), torch.where(kv_idx >= P, kv_idx - P, 0)
            return score + torch.where(patch, entry(b, h, i, j), 0.0)
        return score_mod

    #: the subclass's ``(b, h, i, j) -> bias`` between patch tokens ``i`` and ``j`` of coords ``c (B, N, p)``
    _bias_entry: Callable[[Tensor], Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]]

    def qk(self, q: Tensor, k: Tensor, x: Tensor, coords: Tensor) -> tuple[Tensor, Tensor]:
        if self.__dict__.get("_dtype") is not q.dtype:  # set once: nn.Module.__setattr__ costs every call
            self._dtype = q.dtype
        return q, k

    def _finish(self, bias: Tensor) -> Tensor:
        """Zero prefix rows/cols and cast: ``(B, H, N, N) -> (B, H, P + N, P + N)``."""
        P = self.num_prefix_tokens
        if P:
            bias = F.pad(bias, (P, 0, P, 0))
        return bias.to(getattr(self, "_dtype", bias.dtype))

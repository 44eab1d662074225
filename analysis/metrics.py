"""torchmetrics versions of the per-layer geometry measures (SSDC, EED), docs/architecture.md §4.

SSDC ("Positional encodings anchor the spatial structure of vision transformers") and EED
("The inductive bottleneck in vision transformers"; entropy effective rank of Roy & Vetterli,
2007) are both non-linear functions of *sums* over the probe set, so the metrics keep only sum
states (``dist_reduce_fx="sum"``) and DDP reduces them exactly; ``compute()`` then applies
the same functions as :mod:`.ssdc` / :mod:`.eed`:

* :class:`SSDCMetric`: ``sim_sum`` ``(N, N)`` = Σ_b Ẑ_b Ẑ_bᵀ, ``count`` = number of samples B;
  SSDC is computed on ``sim_sum / count``.
* :class:`EEDMetric`: ``sum_x`` ``(D,)``, ``sum_xxT`` ``(D, D)``, ``count`` = number of tokens;
  the covariance is formed from these moments in float64 (EED% from ``compute()``, the top-1
  eigenvalue share from ``compute_top1_share()``, both from one eigendecomposition from
  ``compute_with_top1_share()``).

Float states default to float64 (``state_dtype``); torchmetrics keeps them in that dtype under
``.half()`` / ``.float()`` of the surrounding module.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor, nn
from torchmetrics import Metric

from .eed import eed_and_top1_from_moments, eed_from_moments, top1_share_from_moments
from .ssdc import as_shared_coords, as_token_batch, check_distance, cosine_similarity_sum, ssdc_from_similarity

__all__ = ["SSDCMetric", "EEDMetric", "LayerwiseGeometry"]


class SSDCMetric(Metric):
    """Streaming SSDC of one layer.

    Args:
        coords: ``(N, p)`` (or ``(B, N, p)`` identical over the batch) coords of the N patch
            tokens, in the frame the PE sees.
        distance: ``"l1"`` (default) or ``"euclidean"``.
        decimals: distance rounding before ranking (see :mod:`.ssdc`).
        state_dtype: dtype of ``sim_sum`` (float64 by default).

    ``update(tokens)`` with tokens ``(B, N, D)`` (or ``(N, D)``); ``compute()`` returns a 0-dim
    float64 tensor (NaN before any update or when S is constant over the pairs).
    """

    full_state_update = False
    is_differentiable = False
    higher_is_better = None

    sim_sum: Tensor
    count: Tensor

    def __init__(self, coords: Tensor, distance: str = "l1", *, decimals: int | None = 9,
                 state_dtype: torch.dtype = torch.float64, **kwargs) -> None:
        super().__init__(**kwargs)
        self.distance = check_distance(distance)
        self.decimals = decimals
        if not state_dtype.is_floating_point:
            raise ValueError(f"state_dtype must be a floating dtype, got {state_dtype}")
        self.state_dtype = state_dtype
        c = as_shared_coords(coords).detach().to(torch.float64)  # (N, p)
        self.num_tokens = int(c.shape[0])
        # A plain attribute, not a buffer: module-wide ``.half()`` must not round the coords.
        # It is moved to the states' device in compute().
        self.coords = c
        n = self.num_tokens
        self.add_state("sim_sum", default=torch.zeros(n, n, dtype=state_dtype), dist_reduce_fx="sum")
        self.add_state("count", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, tokens: Tensor) -> None:
        t = as_token_batch(tokens)  # (B, N, D)
        if t.shape[1] != self.num_tokens:
            raise ValueError(f"SSDCMetric was built for N = {self.num_tokens} patch tokens, got "
                             f"tokens of shape {tuple(t.shape)}")
        s_sum, b = cosine_similarity_sum(t.detach(), dtype=self.state_dtype)  # (N, N)
        self.sim_sum += s_sum.to(self.sim_sum.device)
        self.count += b

    def compute(self) -> Tensor:
        S = self.sim_sum.to(torch.float64) / self.count  # (N, N); NaN if count == 0
        return ssdc_from_similarity(S, self.coords.to(S.device), self.distance,
                                    decimals=self.decimals)


class EEDMetric(Metric):
    """Streaming EED% of one layer from token moments.

    Args:
        dim: token feature dimension D.
        state_dtype: dtype of ``sum_x`` / ``sum_xxT`` (float64 by default).

    ``update(tokens)`` with tokens ``(B, N, D)`` or ``(M, D)`` (all tokens pooled);
    ``compute()`` returns a 0-dim float64 tensor (NaN with fewer than 2 tokens).
    """

    full_state_update = False
    is_differentiable = False
    higher_is_better = None

    sum_x: Tensor
    sum_xxT: Tensor
    count: Tensor

    def __init__(self, dim: int, *, state_dtype: torch.dtype = torch.float64, **kwargs) -> None:
        super().__init__(**kwargs)
        if not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        if not state_dtype.is_floating_point:
            raise ValueError(f"state_dtype must be a floating dtype, got {state_dtype}")
        self.dim = dim
        self.state_dtype = state_dtype
        self.add_state("sum_x", default=torch.zeros(dim, dtype=state_dtype), dist_reduce_fx="sum")
        self.add_state("sum_xxT", default=torch.zeros(dim, dim, dtype=state_dtype), dist_reduce_fx="sum")
        self.add_state("count", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, tokens: Tensor) -> None:
        if not isinstance(tokens, Tensor) or tokens.dim() not in (2, 3) or tokens.shape[-1] != self.dim:
            shape = tuple(tokens.shape) if isinstance(tokens, Tensor) else type(tokens).__name__
            raise ValueError(f"EEDMetric(dim={self.dim}) expects tokens (M, {self.dim}) or "
                             f"(B, N, {self.dim}), got {shape}")
        x = tokens.detach().reshape(-1, self.dim).to(self.state_dtype)  # (M, D)
        self.sum_x += x.sum(dim=0)
        self.sum_xxT += x.transpose(0, 1) @ x
        self.count += x.shape[0]

    def compute(self) -> Tensor:
        return eed_from_moments(self.sum_x, self.sum_xxT, self.count)

    def compute_top1_share(self) -> Tensor:
        """Top-1 eigenvalue share ``λ_max / Σλ`` of the same covariance (0-dim float64)."""
        return top1_share_from_moments(self.sum_x, self.sum_xxT, self.count)

    def compute_with_top1_share(self) -> tuple[Tensor, Tensor]:
        """``(compute(), compute_top1_share())`` from one eigendecomposition of the covariance, on the states
        synchronised across processes as ``compute()`` does (torchmetrics' ``sync_context``)."""
        with self.sync_context(dist_sync_fn=self.dist_sync_fn, should_sync=self._to_sync,
                               should_unsync=self._should_unsync):
            return eed_and_top1_from_moments(self.sum_x, self.sum_xxT, self.count)


class LayerwiseGeometry(nn.Module):
    """One :class:`SSDCMetric` and one :class:`EEDMetric` per layer.

    ``update(layer_tokens)`` takes a sequence of ``num_layers`` patch-token tensors
    ``(B, N, D)``; ``compute()`` returns ``{"ssdc": [float] * L, "eed_percent": [float] * L,
    "eed_top1_share": [float] * L}``.
    Both metric lists are ordinary submodules, so ``.to(device)`` moves them and each metric
    syncs its own sum states under DDP.
    """

    def __init__(self, num_layers: int, coords: Tensor, dim: int, distance: str = "l1", *,
                 decimals: int | None = 9, state_dtype: torch.dtype = torch.float64) -> None:
        super().__init__()
        if not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"num_layers must be a positive int, got {num_layers!r}")
        self.num_layers = num_layers
        self.ssdc = nn.ModuleList(
            SSDCMetric(coords, distance, decimals=decimals, state_dtype=state_dtype)
            for _ in range(num_layers))
        self.eed = nn.ModuleList(EEDMetric(dim, state_dtype=state_dtype) for _ in range(num_layers))

    def update(self, layer_tokens: Sequence[Tensor]) -> None:
        if isinstance(layer_tokens, Tensor) or len(layer_tokens) != self.num_layers:
            got = "a single tensor" if isinstance(layer_tokens, Tensor) else f"{len(layer_tokens)}"
            raise ValueError(f"expected a sequence of {self.num_layers} per-layer token tensors, "
                             f"got {got}")
        for s, e, t in zip(self.ssdc, self.eed, layer_tokens):
            s.update(t)
            e.update(t)

    def compute(self) -> dict[str, list[float]]:
        eed = [m.compute_with_top1_share() for m in self.eed]  # one eigendecomposition per layer
        return {
            "ssdc": [float(m.compute()) for m in self.ssdc],
            "eed_percent": [float(v) for v, _ in eed],
            "eed_top1_share": [float(t) for _, t in eed],
        }

    def reset(self) -> None:
        for m in (*self.ssdc, *self.eed):
            m.reset()

    def forward(self, layer_tokens: Sequence[Tensor]) -> None:  # noqa: D401
        """Alias of :meth:`update` (no per-batch value is computed)."""
        self.update(layer_tokens)

"""Effective Encoding Dimension (EED), docs/architecture.md §4.

EED follows "The inductive bottleneck in vision transformers" (Effective Encoding Dimension),
which uses the entropy effective rank of Roy & Vetterli (2007, "The effective rank: a measure
of effective dimensionality"). For one layer, with tokens pooled over the probe set:

    C   = Cov(tokens)                     (D, D)
    λ   = eigvalsh(C), clipped at 0       (D,)
    p_k = λ_k / Σ_j λ_j
    N_eff = exp(−Σ_k p_k log p_k)         (0 · log 0 = 0)
    EED% = 100 · N_eff / D                ∈ [100/D, 100]

Reported beside it: the **top-1 eigenvalue share** ``λ_max / Σλ`` of the same covariance
(:func:`top1_share_from_covariance`). When one direction carries most of the variance (as on
the raw residual stream of a ViT) EED% is small whatever the rest of the spectrum does; the
share makes that visible.

Which representation the EED paper measures: its text speaks of "the token embeddings at
layer l" and their empirical covariance, without saying whether before or after a LayerNorm,
and no public code was found; pebench chooses the tap by a measurement (``benchmarks/README.md``).

The covariance normalisation (1/M or 1/(M−1)) cancels in ``p_k``; this module uses the
biased 1/M form everywhere (also for the streaming moments of :class:`EEDMetric`), so the
functional and streaming versions agree. Eigenvalues are computed in float64 with
``torch.linalg.eigvalsh``; tiny negative eigenvalues from round-off are clipped to 0.
An all-zero covariance (constant tokens) gives NaN. :func:`eed_and_top1_from_moments` returns both
numbers from one eigendecomposition (what the geometry analysis reads per layer).

The eigendecomposition runs on one intra-op thread (:func:`_one_thread`): for the ``D × D`` covariances
met here (D in the hundreds) MKL's threaded ``syevd`` gains nothing on two cores and, on a loaded
machine, spends its time in thread barriers: 3.8 s against 0.06 s for one 384 × 384 matrix with 2 threads
against 1, load average 11 on the 2-core development machine. Same algorithm; only the split of its
reductions can differ, at round-off.
"""
from __future__ import annotations

import contextlib
import math
from typing import Iterator

import torch
from torch import Tensor

__all__ = ["eed", "eed_from_moments", "eed_from_covariance", "eed_top1_share", "top1_share_from_covariance",
           "top1_share_from_moments", "eed_and_top1_from_moments"]


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """One intra-op thread for the block (the previous count restored); see the module docstring."""
    threads = torch.get_num_threads()
    if threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _eigenvalues(cov: Tensor) -> Tensor:
    """Eigenvalues ``(D,)`` (ascending, float64, clipped at 0) of a covariance ``(D, D)``."""
    if not isinstance(cov, Tensor) or cov.dim() != 2 or cov.shape[0] != cov.shape[1] or cov.shape[0] < 1:
        raise ValueError("cov must be a square (D, D) tensor with D >= 1")
    c = cov.to(torch.float64)
    c = 0.5 * (c + c.transpose(0, 1))  # exact symmetry for eigvalsh
    with _one_thread():
        return torch.linalg.eigvalsh(c).clamp_min(0.0)  # (D,)


def _top1_share(lam: Tensor) -> Tensor:
    """``λ_max / Σλ`` of ascending eigenvalues ``(D,)`` (NaN when Σλ = 0)."""
    total = lam.sum()
    safe_total = torch.where(total > 0, total, torch.ones_like(total))
    return torch.where(total > 0, lam[-1] / safe_total, torch.full_like(total, math.nan))


def top1_share_from_covariance(cov: Tensor) -> Tensor:
    """``λ_max / Σλ`` of a covariance ``(D, D)``; 0-dim float64 tensor (NaN when Σλ = 0)."""
    return _top1_share(_eigenvalues(cov))


def _eed_percent(lam: Tensor) -> Tensor:
    """EED% of eigenvalues ``(D,)`` (NaN when Σλ = 0)."""
    dim = lam.shape[0]
    total = lam.sum()
    safe_total = torch.where(total > 0, total, torch.ones_like(total))
    p = lam / safe_total  # (D,)
    entropy = -torch.special.xlogy(p, p).sum()  # xlogy(0, 0) = 0
    out = 100.0 * torch.exp(entropy) / dim
    return torch.where(total > 0, out, torch.full_like(out, math.nan))


def eed_from_covariance(cov: Tensor) -> Tensor:
    """EED% from a (any positive scale) covariance ``(D, D)``; 0-dim float64 tensor."""
    return _eed_percent(_eigenvalues(cov))


def _moments_covariance(sum_x: Tensor, sum_xxT: Tensor, count) -> Tensor | None:
    """The biased covariance ``Σxxᵀ/M − μμᵀ`` ``(D, D)`` in float64, or None when ``count < 2``."""
    n = float(count)
    if n < 2:
        return None
    mean = sum_x.to(torch.float64) / n  # (D,)
    return sum_xxT.to(torch.float64) / n - torch.outer(mean, mean)


def eed_and_top1_from_moments(sum_x: Tensor, sum_xxT: Tensor, count) -> tuple[Tensor, Tensor]:
    """``(EED%, top-1 eigenvalue share)`` from the streaming moments of :func:`eed_from_moments`, from one
    eigendecomposition; both NaN when ``count < 2``."""
    cov = _moments_covariance(sum_x, sum_xxT, count)
    if cov is None:
        nan = torch.full((), math.nan, dtype=torch.float64, device=sum_x.device)
        return nan, nan.clone()
    lam = _eigenvalues(cov)
    return _eed_percent(lam), _top1_share(lam)


def eed_from_moments(sum_x: Tensor, sum_xxT: Tensor, count) -> Tensor:
    """EED% from streaming moments: ``sum_x`` ``(D,)`` = Σ x, ``sum_xxT`` ``(D, D)`` = Σ x xᵀ,
    ``count`` = number of tokens M. Covariance ``Σxxᵀ/M − μμᵀ`` in float64.

    Returns a 0-dim float64 tensor; NaN when ``count < 2``.
    """
    if not isinstance(sum_x, Tensor) or not isinstance(sum_xxT, Tensor):
        raise ValueError("sum_x and sum_xxT must be torch.Tensors")
    if sum_x.dim() != 1 or sum_xxT.shape != (sum_x.shape[0], sum_x.shape[0]):
        raise ValueError(f"expected sum_x (D,) and sum_xxT (D, D), got {tuple(sum_x.shape)} and "
                         f"{tuple(sum_xxT.shape)}")
    n = float(count)
    if n < 2:
        return torch.full((), math.nan, dtype=torch.float64, device=sum_x.device)
    mean = sum_x.to(torch.float64) / n  # (D,)
    cov = sum_xxT.to(torch.float64) / n - torch.outer(mean, mean)  # (D, D), biased
    return eed_from_covariance(cov)


def top1_share_from_moments(sum_x: Tensor, sum_xxT: Tensor, count) -> Tensor:
    """Top-1 eigenvalue share from the same streaming moments as :func:`eed_from_moments`."""
    n = float(count)
    if n < 2:
        return torch.full((), math.nan, dtype=torch.float64, device=sum_x.device)
    mean = sum_x.to(torch.float64) / n  # (D,)
    return top1_share_from_covariance(sum_xxT.to(torch.float64) / n - torch.outer(mean, mean))


def _pooled_covariance(tokens: Tensor, what: str) -> Tensor:
    if not isinstance(tokens, Tensor):
        raise ValueError(f"tokens must be a torch.Tensor, got {type(tokens).__name__}")
    if tokens.dim() not in (2, 3):
        raise ValueError(f"tokens must be (M, D) or (B, N, D), got shape {tuple(tokens.shape)}")
    dim = tokens.shape[-1]
    x = tokens.reshape(-1, dim).to(torch.float64)  # (M, D)
    if dim < 1 or x.shape[0] < 2:
        raise ValueError(f"{what} needs at least 2 tokens and D >= 1, got {x.shape[0]} tokens of dim {dim}")
    xc = x - x.mean(dim=0, keepdim=True)  # (M, D)
    return xc.transpose(0, 1) @ xc / x.shape[0]  # (D, D), biased


def eed_top1_share(tokens: Tensor) -> float:
    """Top-1 eigenvalue share ``λ_max / Σλ`` of the token covariance (tokens ``(M, D)`` or
    ``(B, N, D)``, pooled); NaN for constant tokens."""
    return float(top1_share_from_covariance(_pooled_covariance(tokens, "eed_top1_share")))


def eed(tokens: Tensor) -> float:
    """EED% of tokens ``(M, D)`` or ``(B, N, D)`` (pooled to ``(B·N, D)``).

    Returns ``100 · N_eff / D`` as a float (NaN for constant tokens).
    """
    return float(eed_from_covariance(_pooled_covariance(tokens, "eed")))

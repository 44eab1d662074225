"""DINO projection head, loss, centring and schedules (Caron et al., ICCV 2021, "Emerging
Properties in Self-Supervised Vision Transformers").

* :class:`DINOHead`: 3-layer MLP ``in -> hidden -> hidden -> bottleneck`` (GELU; batch norm after the
  hidden linear layers only with ``use_bn``, the official ``use_bn_in_head``, off by default for ViTs),
  L2 normalisation, then a *weight-normalised* linear layer without bias to ``out_dim``
  prototypes whose row norms are fixed to 1 (the official ``norm_last_layer=True``: the weight
  ``V`` is used as ``V / ||V_row||``, i.e. ``weight_norm`` with the gain frozen at 1).
* :func:`dino_loss`: for teacher outputs ``t_i`` (global views only) and student outputs ``s_v``
  (all views), with centre ``c``, teacher temperature ``tau_t`` and student ``tau_s``::

      P_t(i) = softmax((t_i - c) / tau_t)            (sharpened, centred; no gradient)
      L = mean_{(i, v): v != i}  mean_b  sum_k  -P_t(i)[b, k] * log_softmax(s_v / tau_s)[b, k]

  over every pair of a teacher global view ``i`` and a student view ``v`` except the same view.
* :func:`teacher_entropies`: collapse monitors (the paper's Sec. 5.3 / Fig. 7 diagnostics): the
  mean entropy of the centred, sharpened teacher distribution of each sample (``log K`` when the
  teacher collapses to the uniform distribution) and the entropy of the batch-mean distribution
  (``0`` when every sample collapses onto one prototype).
* :func:`update_center`: ``c <- m c + (1 - m) mean(teacher outputs)``, the batch mean taken over
  all DDP ranks (``all_reduce`` of the sum, divided by the global count).
* :func:`ema_update`: teacher ``<- m teacher + (1 - m) student`` over parameters.
* :func:`cosine_schedule`: ``final + (base - final) (1 + cos(pi k / K)) / 2`` after an optional
  linear warm-up from ``warmup_start``; used for the learning rate, weight decay (0.04 -> 0.4) and
  teacher momentum (0.996 -> 1) per step, as in the official recipe.

Own code, not the ``lightly`` package: lightly's ``DINOLoss``/``DINOProjectionHead`` would pull in
``pytorch_lightning`` (a second copy of Lightning next to ``lightning``) and hydra for three small
functions; these are re-derived from the paper and tested against a direct implementation of the
formula above (tests/test_dino.py).
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import torch
import torch.distributed as dist
import torch.nn.functional as F
from timm.layers import trunc_normal_
from torch import Tensor, nn

__all__ = ["DINOHead", "dino_loss", "teacher_entropies", "update_center", "ema_update", "cosine_schedule", "teacher_temperature"]


class DINOHead(nn.Module):
    """``(B, in_dim)`` -> ``(B, out_dim)`` prototype logits (before the temperature)."""

    def __init__(self, in_dim: int, out_dim: int = 65536, hidden_dim: int = 2048, bottleneck_dim: int = 256,
                 nlayers: int = 3, use_bn: bool = False) -> None:
        super().__init__()
        if nlayers < 1:
            raise ValueError(f"nlayers must be >= 1, got {nlayers}")

        def hidden(n_in: int) -> list[nn.Module]:  # Linear [-> BatchNorm] -> GELU, as the official use_bn_in_head
            return [nn.Linear(n_in, hidden_dim), *([nn.BatchNorm1d(hidden_dim)] if use_bn else []), nn.GELU()]

        if nlayers == 1:
            layers: list[nn.Module] = [nn.Linear(in_dim, bottleneck_dim)]
        else:
            layers = hidden(in_dim)
            for _ in range(nlayers - 2):
                layers += hidden(hidden_dim)
            layers.append(nn.Linear(hidden_dim, bottleneck_dim))
        self.mlp = nn.Sequential(*layers)
        for m in self.mlp:
            if isinstance(m, nn.Linear):
                trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
        # direction parameter V of the weight-normalised last layer; its rows are normalised in forward
        self.last_layer = nn.Parameter(torch.empty(out_dim, bottleneck_dim))  # (K, bottleneck)
        trunc_normal_(self.last_layer, std=0.02)
        self.out_dim = out_dim

    def forward(self, x: Tensor) -> Tensor:
        z = F.normalize(self.mlp(x), dim=-1, p=2)  # (B, bottleneck)
        return F.linear(z, F.normalize(self.last_layer, dim=1, p=2))  # (B, K)


def dino_loss(student: Sequence[Tensor], teacher: Sequence[Tensor], center: Tensor, teacher_temp: float,
              student_temp: float = 0.1) -> Tensor:
    """Cross-entropy between the centred, sharpened teacher softmax of each global view and the
    student log-softmax of every *other* view, averaged over pairs and samples.

    ``student``: ``V`` tensors ``(B, K)`` (the first ``len(teacher)`` are the global views, in the
    teacher's order); ``teacher``: ``G`` tensors ``(B, K)``; ``center``: ``(1, K)`` or ``(K,)``."""
    if len(teacher) < 1 or len(student) < 2:
        raise ValueError("dino_loss needs >= 1 teacher view and >= 2 student views")
    t_prob = [F.softmax((t.detach() - center) / teacher_temp, dim=-1) for t in teacher]  # G x (B, K)
    s_logp = [F.log_softmax(s / student_temp, dim=-1) for s in student]  # V x (B, K)
    total = student[0].new_zeros(())
    n = 0
    for i, p in enumerate(t_prob):
        for v, lq in enumerate(s_logp):
            if v == i:
                continue  # same view
            total = total + torch.sum(-p * lq, dim=-1).mean()
            n += 1
    return total / n


@torch.no_grad()
def teacher_entropies(teacher: Sequence[Tensor], center: Tensor, teacher_temp: float) -> tuple[Tensor, Tensor]:
    """``(mean_b H(P_t[b]), H(mean_b P_t[b]))`` in nats over all teacher views ``G x (B, K)``,
    with ``P_t = softmax((t - c) / tau_t)`` as in :func:`dino_loss`."""
    p = torch.cat([F.softmax((t.detach().float() - center.float()) / teacher_temp, dim=-1) for t in teacher])  # (G*B, K)
    per_sample = -(p * p.clamp_min(1e-30).log()).sum(-1).mean()
    mean = p.mean(0)  # (K,)
    return per_sample, -(mean * mean.clamp_min(1e-30).log()).sum()


@torch.no_grad()
def update_center(center: Tensor, teacher: Sequence[Tensor], momentum: float = 0.9) -> Tensor:
    """New centre ``(1, K)``: EMA of the teacher outputs' batch mean over all views and all ranks."""
    t = torch.cat([x.detach().float() for x in teacher])  # (G*B, K), float32 also under bf16 autocast
    total = t.sum(dim=0, keepdim=True)  # (1, K)
    count = torch.tensor(float(t.shape[0]), device=t.device, dtype=total.dtype)
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(total)
        dist.all_reduce(count)
    return (center * momentum + (total / count) * (1.0 - momentum)).to(center.dtype)


@torch.no_grad()
def ema_update(teacher: Iterable[Tensor], student: Iterable[Tensor], momentum: float) -> None:
    """In place: ``t <- m t + (1 - m) s`` for matching parameters."""
    t_list, s_list = list(teacher), list(student)
    if len(t_list) != len(s_list):
        raise ValueError("teacher and student have different numbers of parameters")
    if not t_list:
        return
    # the same two in-place ops as ``t.mul_(m).add_(s, alpha=1 - m)`` per tensor, batched into one
    # foreach call each (one kernel launch per dtype/device group instead of two per parameter)
    s_list = [s.detach() for s in s_list]
    torch._foreach_mul_(t_list, momentum)
    torch._foreach_add_(t_list, s_list, alpha=1.0 - momentum)


def cosine_schedule(step: int, total_steps: int, base: float, final: float, warmup_steps: int = 0,
                    warmup_start: float = 0.0) -> float:
    """Linear warm-up ``warmup_start -> base`` over ``warmup_steps``, then cosine ``base -> final``
    over the remaining steps (the value at the last step approaches ``final``)."""
    if warmup_steps > 0 and step < warmup_steps:
        return warmup_start + (base - warmup_start) * step / warmup_steps
    rest = max(1, total_steps - warmup_steps)
    t = min(1.0, (step - warmup_steps) / rest)
    return final + 0.5 * (base - final) * (1.0 + math.cos(math.pi * t))


def teacher_temperature(epoch: int, warmup_epochs: int, start: float = 0.04, final: float = 0.07) -> float:
    """Teacher temperature of ``epoch``: ``linspace(start, final, warmup_epochs)`` over the first
    ``warmup_epochs`` epochs (as the official schedule), then ``final``."""
    if warmup_epochs <= 0 or epoch >= warmup_epochs:
        return final
    if warmup_epochs == 1:
        return start
    return start + (final - start) * epoch / (warmup_epochs - 1)

"""Frozen-feature evaluation of self-supervised models: weighted k-NN and a linear probe.

* :func:`knn_predict` -- the weighted k-NN classifier of Wu et al. (CVPR 2018, "Unsupervised
  Feature Learning via Non-Parametric Instance Discrimination") as used by DINO (Caron et al.,
  ICCV 2021): features are L2-normalised, the ``k`` (default 20) training features with the
  largest cosine similarity ``s`` vote for their label with weight ``exp(s / T)`` (T = 0.07);
  classes are ranked by their summed votes.
* :func:`linear_probe` -- multinomial logistic regression on the frozen, standardised features
  (full-batch L-BFGS, L2 penalty, fixed iteration count; deterministic). This departs from
  DINO's linear evaluation (100 epochs of SGD on augmented images through the frozen backbone),
  which costs as much as training; here it is a cheap readout reported beside the k-NN.
* :func:`gather_eval_set` -- features / labels / dataset indices of all DDP ranks, concatenated
  and sorted by index, so every rank evaluates the exact full set (each sample once) and the
  result equals the single-process one.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor
from torchmetrics.utilities.distributed import gather_all_tensors

__all__ = ["knn_predict", "knn_accuracy", "linear_probe", "gather_eval_set"]


@torch.no_grad()
def knn_predict(train_feats: Tensor, train_labels: Tensor, query_feats: Tensor, num_classes: int, k: int = 20,
                temperature: float = 0.07, chunk: int = 1024) -> Tensor:
    """Class scores ``(Q, C)`` of each query (higher = more votes); see the module docstring.

    ``train_feats`` ``(M, D)``, ``train_labels`` ``(M,)``, ``query_feats`` ``(Q, D)``."""
    if train_feats.shape[0] == 0:
        raise ValueError("k-NN needs at least one training feature")
    k = min(int(k), train_feats.shape[0])
    bank = F.normalize(train_feats.float(), dim=1)  # (M, D)
    out = []
    for q in F.normalize(query_feats.float(), dim=1).split(chunk):
        sim = q @ bank.T  # (q, M) cosine similarity
        top_sim, top_idx = sim.topk(k, dim=1)  # (q, k)
        votes = torch.zeros(q.shape[0], num_classes, device=q.device, dtype=sim.dtype)
        votes.scatter_add_(1, train_labels[top_idx], (top_sim / temperature).exp())  # (q, C)
        out.append(votes)
    return torch.cat(out) if out else query_feats.new_zeros(0, num_classes)


def knn_accuracy(scores: Tensor, labels: Tensor, topk: tuple[int, ...] = (1, 5)) -> dict[int, float]:
    """Top-k accuracies (in [0, 1]) of class scores ``(Q, C)``."""
    out = {}
    for k in topk:
        kk = min(k, scores.shape[1])
        hit = (scores.topk(kk, dim=1).indices == labels[:, None]).any(dim=1)
        out[k] = float(hit.float().mean()) if labels.numel() else float("nan")
    return out


def linear_probe(train_feats: Tensor, train_labels: Tensor, test_feats: Tensor, test_labels: Tensor,
                 num_classes: int, weight_decay: float = 1e-4, max_iter: int = 100) -> float:
    """Test accuracy of a logistic-regression readout trained on the frozen features."""
    with torch.enable_grad(), torch.inference_mode(False):
        x = train_feats.detach().double().clone()
        mean, std = x.mean(0, keepdim=True), x.std(0, keepdim=True).clamp_min(1e-6)
        x = (x - mean) / std  # (M, D)
        y = train_labels.detach().clone()
        w = torch.zeros(x.shape[1], num_classes, dtype=torch.float64, device=x.device, requires_grad=True)
        b = torch.zeros(num_classes, dtype=torch.float64, device=x.device, requires_grad=True)
        opt = torch.optim.LBFGS([w, b], lr=1.0, max_iter=max_iter, history_size=20, line_search_fn="strong_wolfe")

        def closure() -> Tensor:
            opt.zero_grad()
            loss = F.cross_entropy(x @ w + b, y) + weight_decay * (w * w).sum()
            loss.backward()
            return loss

        opt.step(closure)
        xt = (test_feats.detach().double() - mean) / std
        pred = (xt @ w + b).argmax(1)
    return float((pred == test_labels).float().mean()) if test_labels.numel() else float("nan")


def gather_eval_set(feats: Tensor, labels: Tensor, index: Tensor) -> tuple[Tensor, Tensor]:
    """All ranks' ``(N_r, D)`` features and ``(N_r,)`` labels, ordered by dataset ``index``.

    Uses :func:`torchmetrics.utilities.distributed.gather_all_tensors` (uneven sizes allowed);
    in a single process it only sorts."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        feats = torch.cat(gather_all_tensors(feats.contiguous()))
        labels = torch.cat(gather_all_tensors(labels.contiguous()))
        index = torch.cat(gather_all_tensors(index.contiguous()))
    order = index.argsort()
    return feats[order], labels[order]

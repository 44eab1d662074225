"""Point groups: farthest point sampling + k nearest neighbours (Point-BERT / Point-MAE grouping).

The point tokenizer (:class:`pebench.models.PointTokenizer`) embeds these groups; they live on the
data side because a dataset uses the same grouping to compute what any model can see (the
``probe-parts`` no-PE ceiling), and a model may depend on the data's functions but not the reverse.
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["farthest_point_sample", "knn_group", "point_groups", "POINT_CENTRES"]


def farthest_point_sample(points: Tensor, n: int) -> Tensor:
    """Indices ``(B, n)`` of farthest point sampling of ``points (B, M, 3)``, seeded at point 0.

    Written in torch because torch-cluster's ``fps`` (which torch-geometric delegates to) has
    no wheels for the torch builds we pin; this loop is O(n·M) and fine for M <= 8192.
    """
    B, M, _ = points.shape
    if n > M:
        raise ValueError(f"cannot sample {n} centres from {M} points")
    idx = torch.zeros(B, n, dtype=torch.long, device=points.device)
    dist = torch.full((B, M), float("inf"), device=points.device, dtype=points.dtype)
    far = torch.zeros(B, dtype=torch.long, device=points.device)
    ar = torch.arange(B, device=points.device)
    for i in range(n):
        idx[:, i] = far
        d = ((points - points[ar, far].unsqueeze(1)) ** 2).sum(-1)  # (B, M)
        dist = torch.minimum(dist, d)
        far = dist.argmax(-1)
    return idx


def knn_group(points: Tensor, centres: Tensor, k: int) -> Tensor:
    """The ``k`` nearest points of each centre, relative to it: ``(B, G, k, 3)``."""
    d = torch.cdist(centres, points)  # (B, G, M)
    nn_idx = d.topk(k, dim=-1, largest=False).indices  # (B, G, k)
    grouped = torch.gather(points.unsqueeze(1).expand(-1, centres.shape[1], -1, -1), 2,
                           nn_idx.unsqueeze(-1).expand(-1, -1, -1, 3))  # (B, G, k, 3)
    return grouped - centres.unsqueeze(2)


#: ``PointTokenizer(centre=...)``: where a group's token sits and what its points are relative to
POINT_CENTRES = ("fps", "mean")


def point_groups(points: Tensor, num_groups: int, group_size: int, centre: str = "fps") -> tuple[Tensor, Tensor]:
    """FPS + kNN grouping of ``points (B, M, 3)`` -> ``(groups (B, G, k, 3), centres (B, G, 3))``,
    each group relative to its centre.

    ``centre="fps"`` (default, Point-MAE): the centre is the FPS point, so a group's content depends
    on *which* of its points FPS picked, which depends on the rest of the cloud. ``"mean"``: the same
    groups re-centred at their own mean, so a group's content is a function of its point set alone
    (translating a well separated cluster of ``k`` points leaves its token content unchanged; the
    point-cloud probe ``probe-parts`` relies on this)."""
    if centre not in POINT_CENTRES:
        raise ValueError(f"point tokenizer centre must be one of {', '.join(POINT_CENTRES)}, got {centre!r}")
    with torch.no_grad():
        centres = torch.gather(points, 1, farthest_point_sample(points, num_groups).unsqueeze(-1).expand(-1, -1, 3))
    groups = knn_group(points, centres, min(group_size, points.shape[1]))  # (B, G, k, 3)
    if centre == "mean":
        offset = groups.mean(dim=2, keepdim=True)  # (B, G, 1, 3)
        groups = groups - offset
        centres = centres + offset.squeeze(2)
    return groups, centres

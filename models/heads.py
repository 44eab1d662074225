"""Heads on top of the backbone's tokens. Dense heads (detection, segmentation) plug in here."""
from __future__ import annotations

from torch import Tensor, nn

from pebench.core.errors import ConfigError

__all__ = ["ClassificationHead"]


class ClassificationHead(nn.Module):
    """Pool tokens (``"mean"`` over valid patch tokens, or the ``"cls"`` token) -> linear logits."""

    def __init__(self, dim: int, num_classes: int, pool: str = "mean", num_prefix_tokens: int = 0,
                 drop: float = 0.0) -> None:
        super().__init__()
        if pool not in ("mean", "cls"):
            raise ConfigError(f"unknown pool {pool!r}; available: mean, cls")
        if pool == "cls" and num_prefix_tokens < 1:
            raise ConfigError("pool='cls' needs a class token (class_token=True)")
        self.pool = pool
        self.num_prefix_tokens = num_prefix_tokens
        self.drop = nn.Dropout(drop)
        self.fc = nn.Linear(dim, num_classes)
        nn.init.zeros_(self.fc.bias)
        nn.init.trunc_normal_(self.fc.weight, std=0.02)

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> Tensor:
        """tokens ``(B, P + N, D)``, mask ``(B, N)`` -> logits ``(B, C)``."""
        if self.pool == "cls":
            z = tokens[:, 0]
        else:
            patches = tokens[:, self.num_prefix_tokens:]  # (B, N, D)
            if mask is None:
                z = patches.mean(1)
            else:
                w = mask.to(patches.dtype).unsqueeze(-1)  # (B, N, 1)
                z = (patches * w).sum(1) / w.sum(1).clamp_min(1.0)
        return self.fc(self.drop(z))

"""Tokenizers, the PE-pluggable ViT backbone, heads and Lightning tasks."""
from .tokenizers import (ImageTokenizer, PointTokenizer, ResolutionError, TokenBatch, TubeletTokenizer,
                         farthest_point_sample, grid_coords, knn_group)
from .vit import VIT_PRESETS, Attention, Block, ViTBackbone, ViTConfig, build_backbone, list_models

__all__ = ["TokenBatch", "grid_coords", "ImageTokenizer", "TubeletTokenizer", "PointTokenizer",
           "farthest_point_sample", "knn_group", "ResolutionError", "ViTConfig", "VIT_PRESETS", "ViTBackbone",
           "Attention", "Block", "build_backbone", "list_models"]
from .heads import ClassificationHead  # noqa: E402
from .tasks import ClassificationTask, NonFiniteLossError, build_tokenizer, split_batch  # noqa: E402

__all__ += ["ClassificationHead", "ClassificationTask", "NonFiniteLossError", "build_tokenizer", "split_batch"]

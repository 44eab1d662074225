"""Tokenizers, the PE-pluggable ViT backbone, its attention entry point and heads.

The Lightning tasks built on them live in the folder ``models/tasks/`` (one folder per task), which is
mapped to the package :mod:`pebench.tasks` (pyproject ``package-dir``): a task sits above the analyses
it runs, the models sit below them.
"""
from .heads import ClassificationHead
from .tokenizers import (
                         ImageTokenizer,
                         PointTokenizer,
                         ResolutionError,
                         TokenBatch,
                         TubeletTokenizer,
                         farthest_point_sample,
                         grid_coords,
                         knn_group,
)
from .vit import MODELS, Attention, Block, ViTBackbone, ViTConfig, build_backbone, list_models, model_config

__all__ = ["TokenBatch", "grid_coords", "ImageTokenizer", "TubeletTokenizer", "PointTokenizer",
           "farthest_point_sample", "knn_group", "ResolutionError", "ViTConfig", "MODELS", "model_config", "ViTBackbone",
           "Attention", "Block", "build_backbone", "list_models", "ClassificationHead"]

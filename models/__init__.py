"""Tokenizers, the PE-pluggable ViT backbone, its attention entry point and heads.

The Lightning tasks built on them live in the folder ``models/tasks/`` (one folder per task), which is
mapped to the package :mod:`pebench.tasks` (pyproject ``package-dir``): a task sits above the analyses
it runs, the models sit below them.
"""
from .heads import ClassificationHead
from .tokenizers import (ImageTokenizer, PointTokenizer, ResolutionError, TokenBatch, TubeletTokenizer,
                         farthest_point_sample, grid_coords, knn_group)
from .vit import VIT_PRESETS, Attention, Block, ViTBackbone, ViTConfig, build_backbone, list_models

__all__ = ["TokenBatch", "grid_coords", "ImageTokenizer", "TubeletTokenizer", "PointTokenizer",
           "farthest_point_sample", "knn_group", "ResolutionError", "ViTConfig", "VIT_PRESETS", "ViTBackbone",
           "Attention", "Block", "build_backbone", "list_models", "ClassificationHead"]

"""Representation geometry (SSDC, EED), interventions, robustness and extrapolation analyses.

Exact definitions: DESIGN.md §4.

* :func:`ssdc` / :class:`SSDCMetric`: Spatial Similarity–Distance Correlation, from
  "Positional encodings anchor the spatial structure of vision transformers".
* :func:`eed` / :class:`EEDMetric`: Effective Encoding Dimension (EED%), from "The inductive
  bottleneck in vision transformers" (entropy effective rank, Roy & Vetterli 2007).
* :class:`LayerwiseGeometry`: one SSDC and one EED metric per layer.
"""
from .ssdc import ssdc, spearman, average_ranks, ssdc_from_similarity
from .eed import eed, eed_from_moments
from .metrics import SSDCMetric, EEDMetric, LayerwiseGeometry

__all__ = [
    "ssdc",
    "spearman",
    "average_ranks",
    "ssdc_from_similarity",
    "eed",
    "eed_from_moments",
    "SSDCMetric",
    "EEDMetric",
    "LayerwiseGeometry",
]

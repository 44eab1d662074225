"""Representation geometry (SSDC, EED), interventions, robustness and extrapolation analyses.

Exact definitions: docs/ARCHITECTURE.md §4.

* :func:`ssdc` / :class:`SSDCMetric`: Spatial Similarity–Distance Correlation, from
  "Positional encodings anchor the spatial structure of vision transformers".
* :func:`eed` / :class:`EEDMetric`: Effective Encoding Dimension (EED%), from "The inductive
  bottleneck in vision transformers" (entropy effective rank, Roy & Vetterli 2007).
* :class:`LayerwiseGeometry`: one SSDC and one EED metric per layer.

Post-training evaluators (run by ``bench run`` after training, rank 0, eval mode, no grad):

* :func:`run_analyses`: dispatches ``geometry``, ``robustness``, ``alpha``, ``extrapolation``
  (or ``all``) and writes their plots (:mod:`.evaluators`).
* :func:`.geometry.geometry` (per-layer SSDC, SSDC under RPI, EED%),
  :func:`.robustness.robustness` (fragility ``FS = 1 − A_shift / A_clean``; see :func:`fragility`),
  :func:`alpha_sweep` (additive PEs), :func:`evaluate_extrapolation` / :func:`plot_extrapolation`
  (also used by ``bench eval``). The ``geometry`` / ``robustness`` functions are not re-exported
  here so that they do not shadow their submodules.
"""
from .ssdc import ssdc, spearman, average_ranks, ssdc_from_similarity
from .eed import eed, eed_from_moments
from .metrics import SSDCMetric, EEDMetric, LayerwiseGeometry
from .geometry import rpi_permutation
from .robustness import fragility, perturb, SHIFTS
from .alpha import alpha_sweep, ALPHAS
from .extrapolation import evaluate_extrapolation, default_resolutions
from .plots import plot_geometry, plot_robustness, plot_alpha_sweep, plot_extrapolation, save_plot
from .evaluators import run_analyses

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
    "rpi_permutation",
    "fragility",
    "perturb",
    "SHIFTS",
    "alpha_sweep",
    "ALPHAS",
    "evaluate_extrapolation",
    "default_resolutions",
    "plot_geometry",
    "plot_robustness",
    "plot_alpha_sweep",
    "plot_extrapolation",
    "save_plot",
    "run_analyses",
]

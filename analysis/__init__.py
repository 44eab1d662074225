"""Representation geometry (SSDC, EED), interventions, robustness and extrapolation analyses.

Exact definitions: docs/architecture.md §4.

* :func:`ssdc` / :class:`SSDCMetric`: Spatial Similarity–Distance Correlation, from
  "Positional encodings anchor the spatial structure of vision transformers".
* :func:`eed` / :class:`EEDMetric`: Effective Encoding Dimension (EED%), from "The inductive
  bottleneck in vision transformers" (entropy effective rank, Roy & Vetterli 2007), and
  :func:`eed_top1_share` (largest eigenvalue's share of the same covariance).
* :class:`LayerwiseGeometry`: one SSDC and one EED metric per layer.

Post-training evaluators (run by ``bench run`` after training, rank 0, eval mode, no grad):

* :func:`run_analyses`: runs the named registered analyses (or ``all``) in their order and writes their
  plots (:mod:`.evaluators`). Each analysis registers itself in its own module with
  :func:`register_analysis` (name, results.json key, options, where it applies: :mod:`.registry`);
  :func:`list_analyses` lists them (``bench list analyses``). Besides the four of ``all`` (``geometry``,
  ``robustness``, ``alpha``, ``extrapolation``), ``attention`` (:mod:`.attention`: attention entropy and
  mean attention distance) and ``coord-robustness`` (:mod:`.coord_robustness`: ComRoPE's coordinate
  jitter / offset curves) run when named.
* :func:`.geometry.geometry` (per-layer SSDC at the SSDC paper's tap, SSDC under RPI over K
  permutations with a null band at initialisation, EED% and top-1 eigenvalue share),
  :func:`.robustness.robustness` (fragility ``FS = 1 − A_shift / A_clean``, undefined within 2
  standard errors of chance; see :func:`fragility`),
  :func:`alpha_sweep` (additive PEs), :func:`evaluate_extrapolation` / :func:`plot_extrapolation`
  (also used by ``bench eval``). The ``geometry`` / ``robustness`` functions are not re-exported
  here so that they do not shadow their submodules.
"""
from .alpha import ALPHAS, alpha_sweep
from .eed import eed, eed_from_moments, eed_top1_share
from .evaluators import TaskAnalyses, run_analyses
from .extrapolation import default_resolutions, evaluate_extrapolation
from .geometry import rpi_permutation
from .metrics import EEDMetric, LayerwiseGeometry, SSDCMetric
from .plots import plot_alpha_sweep, plot_extrapolation, plot_geometry, plot_robustness, save_plot
from .registry import Analysis, AnalysisContext, get_analysis, list_analyses, register_analysis
from .robustness import SHIFTS, fragility, fs_undefined_reason, perturb
from .ssdc import average_ranks, spearman, ssdc, ssdc_from_similarity

__all__ = [
    "ssdc",
    "spearman",
    "average_ranks",
    "ssdc_from_similarity",
    "eed",
    "eed_from_moments",
    "eed_top1_share",
    "SSDCMetric",
    "EEDMetric",
    "LayerwiseGeometry",
    "rpi_permutation",
    "fragility",
    "fs_undefined_reason",
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
    "TaskAnalyses",
    "Analysis",
    "AnalysisContext",
    "register_analysis",
    "list_analyses",
    "get_analysis",
]

"""Representation geometry (SSDC, EED), interventions, robustness and extrapolation analyses."""

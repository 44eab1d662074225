"""Real video datasets."""

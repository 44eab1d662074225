"""Real point-cloud classification datasets."""

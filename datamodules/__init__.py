"""Datasets as LightningDataModules: embedded synthetic sets and real-dataset readers."""

"""Datasets as LightningDataModules: embedded synthetic sets and real-dataset readers.

Batches are ``(inputs, labels)`` or ``(inputs, labels, info)`` where ``info`` is a dict that may
carry ``{"skipped": n}`` (corrupt samples dropped by the collate function); see ``base.py``.

Datasets are grouped by modality in sub-packages (``synthetic``, ``probes``, ``images``, ``video``,
``events``, ``points``, ``scenes``); the contract (``base``), the registry, the skip-corrupt loader
(``corrupt``) and helpers shared across them stay here.

A dataset registers itself with ``@register_datamodule(name)`` in its own module; the registry imports
the sub-packages' modules when a name is first asked for, so adding a dataset is adding one file.
"""
from .base import LABEL_KINDS, MODALITIES, BenchDataModule, DataRootError, parse_resolution
from .options import data_options
from .registry import build_datamodule, get_datamodule_class, list_datamodules, register_datamodule

__all__ = ["BenchDataModule", "DataRootError", "MODALITIES", "LABEL_KINDS", "parse_resolution", "build_datamodule",
           "get_datamodule_class", "list_datamodules", "register_datamodule", "data_options"]

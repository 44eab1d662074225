"""Datasets as LightningDataModules: embedded synthetic sets and real-dataset readers.

Batches are ``(inputs, labels)`` or ``(inputs, labels, info)`` where ``info`` is a dict that may
carry ``{"skipped": n}`` (corrupt samples dropped by the collate function); see ``base.py``.

Datasets are grouped by modality in sub-packages (``synthetic``, ``probes``, ``images``, ``video``,
``events``, ``points``, ``scenes``); the contract (``base``), the registry, the skip-corrupt loader
(``corrupt``) and helpers shared across them stay here.
"""
from .base import MODALITIES, BenchDataModule, DataRootError, parse_resolution
from .registry import build_datamodule, get_datamodule_class, list_datamodules, register_datamodule

__all__ = ["BenchDataModule", "DataRootError", "MODALITIES", "parse_resolution", "build_datamodule",
           "get_datamodule_class", "list_datamodules", "register_datamodule"]

# Importing a dataset's module registers it; the order below is the registration order that
# `list_datamodules()` (and so the CLI's dataset list) reports.
from .synthetic import shapes, moving_shapes, synthetic_events, primitives  # noqa: E402,F401
from .probes import probes, probe_motion  # noqa: E402,F401
from .synthetic import objects, textures  # noqa: E402,F401
from .probes import probe_parts  # noqa: E402,F401  (the point-cloud probe)
from .images import imagenet, cifar, tiny_imagenet, ucmerced  # noqa: E402,F401
from .video import ucf101  # noqa: E402,F401
from .events import dvsgesture  # noqa: E402,F401
from .points import modelnet  # noqa: E402,F401
from .scenes import nuscenes  # noqa: E402,F401
from .images import coco, shapes_det  # noqa: E402,F401  (2-D detection)
from .events import gen1, events_det  # noqa: E402,F401
from .scenes import scannet, primitives_scene  # noqa: E402,F401  (3-D scene segmentation)

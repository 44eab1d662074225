"""Datasets as LightningDataModules: embedded synthetic sets and real-dataset readers.

Batches are ``(inputs, labels)`` or ``(inputs, labels, info)`` where ``info`` is a dict that may
carry ``{"skipped": n}`` (corrupt samples dropped by the collate function); see ``base.py``.
"""
from .base import MODALITIES, BenchDataModule, DataRootError, parse_resolution
from .registry import build_datamodule, get_datamodule_class, list_datamodules, register_datamodule
from . import shapes, moving_shapes, synthetic_events, primitives, probes, probe_motion, objects, textures  # noqa: F401
from . import probe_parts  # noqa: F401  (the point-cloud probe)

__all__ = ["BenchDataModule", "DataRootError", "MODALITIES", "parse_resolution", "build_datamodule",
           "get_datamodule_class", "list_datamodules", "register_datamodule"]
from . import imagenet, cifar, tiny_imagenet, ucmerced, ucf101, dvsgesture, modelnet, nuscenes  # noqa: F401
from . import coco, shapes_det, gen1, events_det  # noqa: F401  (2-D detection)
from . import scannet, primitives_scene  # noqa: F401  (3-D scene segmentation)

"""Dataset options (``--data-option KEY=VALUE``) as :class:`~pebench.core.options.Option` values.

A datamodule declares its options as keyword arguments of its ``__init__`` (a method that takes ``**kwargs``
passes the rest on to its base; :class:`~pebench.datamodules.base.BenchDataModule` rejects what nobody took,
which is the validation of keys, and each constructor checks its values). :func:`data_options` reads those
signatures into the one option type of pebench, so ``bench list datasets --options`` lists them like the PE,
task and analysis options. The help of a key is the datamodule's ``option_help`` mapping (a class attribute,
merged along the class hierarchy) or, for keys several datamodules share, :data:`COMMON_DATA_HELP`.
"""
from __future__ import annotations

import inspect

from pebench.core.options import Option, kind_of

__all__ = ["data_options", "COMMON_DATA_HELP", "RUN_SET_DATA_ARGS"]

#: datamodule constructor arguments that `bench run` sets from its own flags (not --data-option keys)
RUN_SET_DATA_ARGS = ("batch_size", "num_workers", "seed", "resolution", "data_root")
#: meanings of option keys several datamodules share; a datamodule's ``option_help`` overrides or extends these
COMMON_DATA_HELP = {
    "train_size": "training samples generated per epoch", "val_size": "validation samples",
    "test_size": "held-out test samples", "noise": "std of additive Gaussian pixel noise",
    "distractors": "extra objects that carry no label information",
    "task": "which label the synthetic scene defines", "frames": "frames per clip",
    "time_bins": "time bins of the event voxel grid", "log_counts": "store log1p(event count) per voxel",
    "jitter": "std of Gaussian jitter on the sampled points", "fine_steps": "simulation steps per sample",
    "fold": "official train/test split fold", "frame_stride": "frames skipped between sampled frames",
    "eval_clips": "clips averaged per validation video", "split_seed": "seed of the stratified split",
    "split_fractions": "train and validation fractions of the split (the rest is test)",
    "data_seed": "seed of the generated data (default: the run's seed)",
    "threshold": "mean contrast threshold of the simulated event camera (log intensity)",
    "noise_rate": "spurious events per pixel and sample",
}


def data_options(cls: type) -> list[Option]:
    """The ``--data-option`` keys of datamodule class ``cls``: every keyword parameter of the ``__init__``
    methods along its class hierarchy, up to the first that takes no ``**kwargs``, minus
    :data:`RUN_SET_DATA_ARGS`; in signature order. The kind comes from the annotation (or, without one, the
    default's type); a parameter without a default is ``required``."""
    out: dict[str, Option] = {}
    helps: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        helps.update(getattr(klass, "__dict__", {}).get("option_help", {}) or {})
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        for p in params:
            if (p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name == "self" or p.name in RUN_SET_DATA_ARGS
                    or p.name in out):
                continue
            required = p.default is inspect.Parameter.empty
            default = None if required else p.default
            ann = p.annotation if p.annotation is not inspect.Parameter.empty else type(default).__name__
            kind, nullable = kind_of(ann)
            out[p.name] = Option(p.name, kind, default, helps.get(p.name) or COMMON_DATA_HELP.get(p.name)
                                 or f"see {klass.__module__}.{klass.__name__}", nullable=nullable, required=required)
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            break
    return list(out.values())

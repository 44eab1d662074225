"""The tasks ``bench run --task`` trains: one sub-package each (``classification``, ``detection``,
``segmentation``, ``dino``), holding its LightningModule, heads, metric glue, own analyses and setup.

This package imports no task (and no torch): :func:`list_tasks` reads the folder names,
:func:`get_task_setup` imports the one asked for (:mod:`.base`).
"""
from .base import (TASK_SETUPS, TaskSetup, analyses_except, default_task, geometry_only, get_task_setup, list_tasks,
                   register_task, resolve_task)

__all__ = ["TASK_SETUPS", "TaskSetup", "analyses_except", "default_task", "geometry_only", "get_task_setup",
           "list_tasks", "register_task", "resolve_task"]

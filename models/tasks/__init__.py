"""The tasks ``bench run --task`` trains: one sub-package each (``classification``, ``detection``,
``segmentation``, ``dino``), holding its LightningModule, heads, metric glue, own analyses and setup.

This package imports no task (and no torch): :func:`list_tasks` reads the folder names,
:func:`get_task_setup` imports the one asked for (:mod:`.base`).

The folder ``models/tasks/`` is the package ``pebench.tasks`` (pyproject ``package-dir``), not
``pebench.models.tasks``: the tasks sit above the analyses, the models below them. Imported under the
folder's other dotted name it would be a second copy with a second registry, so that is refused.
"""
if __name__ != "pebench.tasks":
    raise ImportError(f"the tasks package is pebench.tasks (models/tasks/ is mapped to it), not {__name__}")

from .base import (
    TASK_SETUPS,
    TaskSetup,
    analyses_except,
    default_task,
    geometry_only,
    get_task_setup,
    list_tasks,
    register_task,
    resolve_task,
)

__all__ = ["TASK_SETUPS", "TaskSetup", "analyses_except", "default_task", "geometry_only", "get_task_setup",
           "list_tasks", "register_task", "resolve_task"]

"""Tasks declare what they train on (issue #42 item 4); datasets only say what their targets are.

Each ``TaskSetup`` names the ``label_kind`` values (``class``, ``boxes``, ``point-labels``) and the modalities
it accepts; ``resolve_task`` checks the pair and names the tasks that fit the dataset."""
from __future__ import annotations

import pytest

from pebench.core.errors import ConfigError
from pebench.datamodules import LABEL_KINDS, get_datamodule_class, list_datamodules
from pebench.runner.config import RunConfig
from pebench.tasks import get_task_setup, list_tasks, resolve_task
from pebench.tasks.base import unfit_reason


def test_no_dataset_lists_tasks_and_each_declares_its_label_kind():
    for name in list_datamodules():
        cls = get_datamodule_class(name)
        assert "tasks" not in vars(cls) and not hasattr(cls, "tasks"), name
        assert cls.label_kind in LABEL_KINDS, name


def test_which_tasks_fit_which_datasets():
    """The pairs the former per-dataset lists allowed: classification on every classification-shaped set, DINO
    on the image ones, detection on box datasets (images, events), segmentation on scenes."""
    for name in list_datamodules():
        cls = get_datamodule_class(name)
        fit = {t for t in ("classification", "dino", "detection", "segmentation")
               if unfit_reason(get_task_setup(t), cls) is None}
        if cls.label_kind == "class":
            assert fit == ({"classification", "dino"} if cls.modality == "image" else {"classification"}), name
        elif cls.label_kind == "boxes":
            assert fit == {"detection"} and cls.modality in ("image", "events"), name
        else:
            assert fit == {"segmentation"} and cls.modality == "points", name
        assert cls.default_task in fit, name  # the dataset's default task trains on it


@pytest.mark.parametrize("dataset, task, message", [
    ("shapes", "detection", "it needs annotated boxes, the dataset has a class label per sample"),
    ("shapes-det", "classification", "it needs a class label per sample (a classification-shaped dataset), "
                                     "the dataset has annotated boxes; the tasks for this dataset: detection"),
    ("primitives-scene", "detection", "the tasks for this dataset: segmentation"),
    ("moving-shapes", "dino", "it needs an image dataset, the dataset is video data; the tasks for this dataset: "
                              "classification"),
])
def test_an_unfit_pair_is_one_config_error_naming_the_tasks_that_fit(dataset, task, message):
    with pytest.raises(ConfigError, match=f"--task {task} does not apply to dataset '{dataset}'") as e:
        resolve_task(RunConfig(dataset=dataset, task=task, pe="none"))
    assert message in str(e.value) and "\n" not in str(e.value)
    assert "classification" in list_tasks()
    assert resolve_task(RunConfig(dataset=dataset, task=None, pe="none")).task == get_datamodule_class(dataset).default_task

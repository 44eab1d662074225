"""A task is one folder under ``models/tasks/`` that registers its setup under the folder's name
(:mod:`pebench.tasks.base`): the names are listed without torch, each folder registers the task
of its name, a new folder is found and trained with nothing else edited, and the analysis layer names
no task (the tasks sit above it)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import pebench.tasks as tasks_pkg
from pebench.core.errors import ConfigError
from pebench.tasks import TASK_SETUPS, get_task_setup, list_tasks

_TOY = '''
"""A toy task: classification under another name, with its own extra result."""
from pebench.tasks import register_task
from pebench.tasks.classification import ClassificationSetup


@register_task("toy")
class ToySetup(ClassificationSetup):
    def extra_results(self, task):
        return {"toy": {"classes": int(task.hparams.num_classes)}}
'''


def test_task_names_are_listed_without_importing_torch():
    code = ("import sys, pebench.tasks as t, pebench.cli\n"
            "print(','.join(t.list_tasks()), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    names, torch_loaded = out.split()
    assert {"classification", "detection", "dino", "segmentation"} <= set(names.split(",")) and torch_loaded == "False"


def test_each_folder_registers_the_task_of_its_name():
    for name in list_tasks():
        setup = get_task_setup(name)
        assert setup.name == name and type(setup).__module__.startswith(f"pebench.tasks.{name}.")
    assert get_task_setup("detection").dense and get_task_setup("segmentation").dense
    assert not get_task_setup("classification").dense and get_task_setup("dino").checkpoint_class() is None
    with pytest.raises(ConfigError, match="unknown task 'nope'; available: .*classification"):
        get_task_setup("nope")


def test_the_analysis_layer_names_no_task():
    """analysis/ imports no task and dispatches on no task name: each task's setup hands its own
    robustness / extrapolation functions to the analyses."""
    root = Path(tasks_pkg.__file__).resolve().parents[2] / "analysis"
    for path in root.glob("*.py"):
        text = path.read_text()
        assert "models.tasks" not in text and "task_name" not in text, path.name


@pytest.fixture
def toy_task(tmp_path, monkeypatch):
    """A folder ``toy/`` on the task package's search path (as if added to models/tasks/)."""
    folder = tmp_path / "toy"
    folder.mkdir()
    (folder / "__init__.py").write_text(textwrap.dedent(_TOY))
    monkeypatch.setattr(tasks_pkg, "__path__", [*tasks_pkg.__path__, str(tmp_path)])
    monkeypatch.setattr(TASK_SETUPS, "_entries", dict(TASK_SETUPS._entries))  # forget "toy" afterwards
    yield "toy"
    sys.modules.pop("pebench.tasks.toy", None)


@pytest.mark.slow
def test_a_new_task_folder_is_found_by_name_and_runs(toy_task, tmp_path, monkeypatch):
    from pebench.datamodules import get_datamodule_class
    from pebench.runner.config import RunConfig
    from pebench.runner.run import run

    assert "toy" in list_tasks() and "toy" not in TASK_SETUPS.names()  # listed, not yet imported
    assert get_task_setup("toy").name == "toy"
    shapes = get_datamodule_class("shapes")
    assert not hasattr(shapes, "tasks")  # the task says what it trains on (accepts: class labels); no dataset edit
    cfg = RunConfig(dataset="shapes", pe="ape", task="toy", fast_dev_run=True, batch_size=8, accelerator="cpu",
                    progress_bar=False, out=str(tmp_path / "runs"), data={"train_size": 16, "val_size": 8})
    results = run(cfg)
    assert results["task"] == "toy" and results["toy"]["classes"] > 1  # the toy setup's own result key
    (path,) = (tmp_path / "runs").rglob("results.json")
    assert json.loads(path.read_text())["toy"] == results["toy"]


def test_run_options_name_the_analyses_the_evaluators_run():
    """`--analyses` is validated before torch is imported (pebench.runner.config.ANALYSES); it must name exactly
    the analyses pebench.analysis.evaluators dispatches, in the same order."""
    from pebench.analysis.evaluators import ANALYSIS_NAMES
    from pebench.runner.config import ANALYSES

    assert tuple(ANALYSES) == tuple(ANALYSIS_NAMES)

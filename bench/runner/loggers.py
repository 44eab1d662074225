"""The loggers of one run (CSV always; TensorBoard or W&B by ``--logger``) and Lightning's quieted output."""
from __future__ import annotations

import importlib
import logging
import os
import warnings
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger, WandbLogger

from pebench.runner.config import ConfigError, RunConfig, config_to_dict, variant_name

__all__ = ["build_loggers", "check_logger_installed", "quiet_lightning"]


class _DropTips(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "Tip:" not in str(record.msg)


def quiet_lightning() -> None:
    """Drop Lightning's advertising tip and warnings that are expected in a run directory."""
    log = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    if not any(isinstance(f, _DropTips) for f in log.filters):
        log.addFilter(_DropTips())
    for msg in (".*Experiment logs directory.*exists and is not empty.*", ".*smaller than the logging interval.*",
                ".*treespec, LeafSpec.*", ".*does not have many workers.*", ".*Checkpoint directory .* exists and is not empty.*"):
        warnings.filterwarnings("ignore", message=msg)


#: ``--logger`` -> (module that must be importable, extra that installs it)
_LOGGER_PACKAGES = {"tensorboard": ("tensorboard", "tensorboard"), "wandb": ("wandb", "wandb")}


def check_logger_installed(logger: str) -> None:
    if logger not in _LOGGER_PACKAGES:
        return
    module, extra = _LOGGER_PACKAGES[logger]
    try:
        importlib.import_module(module)
    except ImportError:
        raise ConfigError(f"--logger {logger} needs the {module} package, which is not installed: "
                          f"pip install -e '.[{extra}]'") from None


def build_loggers(cfg: RunConfig, run_dir: Path) -> list[Any]:
    """The CSV logger (always: ``metrics.csv``, read by ``curves.png`` and ``bench runs``) plus the
    one ``--logger`` names. W&B runs offline (files under ``<run>/wandb/``, ``wandb sync`` uploads
    them later) unless the environment sets ``WANDB_MODE=online``."""
    loggers: list[Any] = [CSVLogger(save_dir=run_dir, name="", version="")]
    if cfg.logger == "tensorboard":
        loggers.append(TensorBoardLogger(save_dir=run_dir, name="tensorboard", version=""))
    elif cfg.logger == "wandb":
        offline = os.environ.get("WANDB_MODE", "offline") != "online"
        if offline:
            os.environ["WANDB_MODE"] = "offline"  # wandb.init reads it; no network access is attempted
        loggers.append(WandbLogger(save_dir=str(run_dir), project=os.environ.get("WANDB_PROJECT", "pebench"),
                                   name=f"{cfg.dataset}/{variant_name(cfg)}/{cfg.model}/seed{cfg.seed}",
                                   offline=offline, config=config_to_dict(cfg)))
    return loggers

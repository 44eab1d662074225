"""The loggers of one run (CSV always; TensorBoard or W&B by ``--logger``) and Lightning's quieted output.

``metrics.csv`` and ``hparams.yaml`` are written atomically (:class:`AtomicCSVLogger`): Lightning's CSV logger
rewrites or appends to them in place, so a full disk or a kill mid-write left a 0-byte or torn ``metrics.csv``
while every other file of the run was whole."""
from __future__ import annotations

import csv
import importlib
import io
import logging
import os
import warnings
from pathlib import Path
from typing import Any

from lightning.pytorch.core.saving import save_hparams_to_yaml
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger, WandbLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.loggers.logger import rank_zero_experiment

from pebench.core.io import atomic_write_text
from pebench.runner.config import ConfigError, RunConfig, config_to_dict, variant_name

__all__ = ["build_loggers", "check_logger_installed", "quiet_lightning", "AtomicCSVLogger"]


class AtomicExperimentWriter(ExperimentWriter):
    """Lightning's CSV experiment writer with every file replaced whole (temp file, fsync, ``os.replace``):
    the same rows, header and column order as Lightning writes, never a partly written file."""

    def save(self) -> None:
        if not self.metrics:
            return
        new_keys = self._record_new_keys()
        old_rows: list[dict[str, str]] = []
        old_text = ""
        if os.path.isfile(self.metrics_file_path):
            with open(self.metrics_file_path, newline="", encoding="utf-8") as f:
                old_text = f.read()
            if new_keys:  # the header grows: every row is written again under it, as Lightning does
                old_rows = list(csv.DictReader(io.StringIO(old_text, newline="")))
        buf = io.StringIO(newline="")
        writer = csv.DictWriter(buf, fieldnames=self.metrics_keys)
        if new_keys or not old_text:
            writer.writeheader()
            writer.writerows(old_rows)
            text = buf.getvalue()
            buf.seek(0)
            buf.truncate()
        else:
            text = old_text
        writer.writerows(self.metrics)
        atomic_write_text(self.metrics_file_path, text + buf.getvalue())
        self.metrics = []

    def log_hparams(self, params: dict[str, Any]) -> None:
        self.hparams.update(params)
        path = Path(self.log_dir) / self.NAME_HPARAMS_FILE
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # Lightning's YAML writer, then an atomic move
        try:
            save_hparams_to_yaml(str(tmp), self.hparams)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)


class AtomicCSVLogger(CSVLogger):
    """:class:`CSVLogger` whose ``metrics.csv`` and ``hparams.yaml`` are replaced atomically on every save."""

    @property
    @rank_zero_experiment  # as Lightning's: other ranks get a dummy writer
    def experiment(self) -> AtomicExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = AtomicExperimentWriter(log_dir=self.log_dir)
        return self._experiment


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
    loggers: list[Any] = [AtomicCSVLogger(save_dir=run_dir, name="", version="")]
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

"""When training ends and which weights are evaluated: ``--stop-at``, ``--give-up`` and ``--eval-checkpoint``.

* ``--stop-at X``: training ends at the first validation whose value of the primary metric's validation
  form (``test/acc1`` -> ``val/acc1``) is above ``X``.
* ``--give-up STEP:Y``: it also ends at the first validation at or after optimizer step ``STEP`` whose value
  is not above ``Y`` (a run still on its loss plateau: "not learned within STEP steps").
* ``--eval-checkpoint best``: the final validation, the test split and the analyses read the weights of the
  validation with the best value (model selection on the validation split, as early stopping with
  restoring does) instead of the last step's; ``best.ckpt`` in the run directory holds them.

Lightning's ``EarlyStopping`` has the threshold but cannot report which of its rules stopped a run and has no
"not above Y by step S" rule, hence :class:`StopAtTarget`; the best weights are Lightning's ``ModelCheckpoint``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from pebench.core.errors import ConfigError
from pebench.runner.config import RunConfig, parse_give_up
from pebench.runner.resume import load_checkpoint

__all__ = ["StopAtTarget", "val_monitor", "stopping_callbacks", "stopped_record", "load_best"]


def _f32(x: Any) -> float:
    """``x`` rounded to float32 (the precision the metric was logged in)."""
    return float(torch.as_tensor(x, dtype=torch.float32))


def val_monitor(primary: str) -> str:
    """The validation form of a primary metric (``test/acc1`` -> ``val/acc1``; ``val/*`` unchanged)."""
    return "val/" + primary.split("/", 1)[1] if primary.startswith("test/") else primary


class StopAtTarget(Callback):
    """``--stop-at`` / ``--give-up`` (module docstring). All ranks agree: the metric is the reduced one and the
    decision goes through Lightning's boolean reduction, as in its EarlyStopping. ``reached_step`` /
    ``gave_up_step`` are kept in checkpoints, so a resumed run reports them too."""

    def __init__(self, target: float | None, give_up: tuple[int, float] | None, monitor: str) -> None:
        self.target = None if target is None else float(target)
        self.give_up = give_up
        self.monitor = monitor
        self.reached_step: int | None = None
        self.gave_up_step: int | None = None

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != "fit" or trainer.should_stop:
            return
        value = trainer.callback_metrics.get(self.monitor)
        if value is None:
            raise ConfigError(f"--stop-at / --give-up: the task logs no {self.monitor} to compare with")
        step, value = int(trainer.global_step), _f32(value)  # metrics are float32: compare in float32, so
        reached = self.target is not None and value > _f32(self.target)  # 588/600 is not above 0.98
        stuck = self.give_up is not None and step >= self.give_up[0] and not value > _f32(self.give_up[1])
        if trainer.strategy.reduce_boolean_decision(reached, all=False):
            self.reached_step, trainer.should_stop = step, True
        elif trainer.strategy.reduce_boolean_decision(stuck, all=False):
            self.gave_up_step, trainer.should_stop = step, True

    def state_dict(self) -> dict[str, Any]:
        return {"reached_step": self.reached_step, "gave_up_step": self.gave_up_step}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.reached_step = state_dict.get("reached_step")
        self.gave_up_step = state_dict.get("gave_up_step")


def stopping_callbacks(cfg: RunConfig, primary: str, run_dir: Path) -> list[Callback]:
    """The callbacks ``cfg`` asks for: :class:`StopAtTarget` and the best-validation ``ModelCheckpoint``."""
    out: list[Callback] = []
    monitor = val_monitor(primary)
    if cfg.stop_at is not None or cfg.give_up is not None:
        out.append(StopAtTarget(cfg.stop_at, parse_give_up(cfg.give_up) if cfg.give_up else None, monitor))
    if cfg.eval_checkpoint == "best":
        out.append(ModelCheckpoint(dirpath=run_dir, filename="best", monitor=monitor, mode="max", save_top_k=1,
                                   save_last=False, enable_version_counter=False, save_on_train_epoch_end=False,
                                   auto_insert_metric_name=False))
    return out


def stopped_record(trainer: L.Trainer, cfg: RunConfig) -> dict[str, Any] | None:
    """``results.json``'s ``stopped_at_target``: whether the target was reached, whether the run gave up, and
    the optimizer step at which training ended (the budget's last step when neither happened); ``None``
    without ``--stop-at`` / ``--give-up``."""
    if cfg.stop_at is None and cfg.give_up is None:
        return None
    stop = next(c for c in trainer.callbacks if isinstance(c, StopAtTarget))
    return {"target": cfg.stop_at, "give_up": cfg.give_up, "metric": stop.monitor,
            "reached": stop.reached_step is not None, "gave_up": stop.gave_up_step is not None,
            "global_step": int(trainer.global_step)}


def load_best(trainer: L.Trainer, task: L.LightningModule) -> dict[str, Any] | None:
    """With ``--eval-checkpoint best``: load the best validation's weights into ``task`` (every rank) and
    return ``results.json``'s ``evaluated_checkpoint``; ``None`` without it or before any validation."""
    best = next((c for c in trainer.callbacks if isinstance(c, ModelCheckpoint) and c.monitor is not None), None)
    if best is None or not best.best_model_path:
        return None
    if trainer.world_size > 1:
        trainer.strategy.barrier()  # rank 0 wrote it
    ckpt = load_checkpoint(best.best_model_path, map_location=task.device)  # weights only: nothing executes
    task.load_state_dict(ckpt["state_dict"])
    return {"which": "best", "metric": best.monitor, "value": float(best.best_model_score),
            "global_step": int(ckpt.get("global_step", 0))}

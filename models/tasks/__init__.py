"""LightningModules, one per task: ``classification`` (supervised) and ``dino`` (self-supervised)."""
from .classification import ClassificationTask, NonFiniteLossError, build_tokenizer, split_batch

__all__ = ["ClassificationTask", "NonFiniteLossError", "build_tokenizer", "split_batch"]
from .dino import DinoTask  # noqa: E402

__all__ += ["DinoTask"]

"""Training: the shared loop, its checkpoints and schedules."""

from emergence.core.train.checkpoint import (
    find_checkpoint,
    list_checkpoints,
    load_checkpoint,
    load_named_checkpoint,
    save_checkpoint,
)
from emergence.core.train.loop import TrainConfig, train
from emergence.core.train.schedule import checkpoint_steps, lr_factor

__all__ = [
    "TrainConfig",
    "checkpoint_steps",
    "find_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "load_named_checkpoint",
    "lr_factor",
    "save_checkpoint",
    "train",
]

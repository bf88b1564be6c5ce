"""Training: the shared loop, its checkpoints and schedules."""
from emergence.train.checkpoint import find_checkpoint, list_checkpoints, load_named_checkpoint, load_checkpoint, save_checkpoint
from emergence.train.loop import TrainConfig, train
from emergence.train.schedule import checkpoint_steps, lr_factor

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

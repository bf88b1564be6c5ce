"""The grounding runs' window and saliency params (inputs.py reads with them):
no torch, so the params rules load them without it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge

from emergence.core.config import load_beside, section
from emergence.core.train.config import TrainConfig

DEFAULT_SEQ_LEN = 64


@dataclass(frozen=True)
class WindowKeys:
    """What a grounding setting's training section holds beside TrainConfig: the length of the windows it
    trains on (None: its corpus's default, settings.py SEQ_LEN)."""

    seq_len: Annotated[int, Ge(2)] | None = None


def train_section(params: dict, name: str) -> tuple[TrainConfig, WindowKeys]:
    """A grounding setting's training section (grounding_train, visual_train): TrainConfig, whose seed and
    device come from base (refused here), plus seq_len; every problem of both at once."""
    fixed = {"seed": ("base.seeds", 0), "device": ("base.device", "cpu")}
    return load_beside(section(params, name), name, TrainConfig, WindowKeys, fixed)


def seq_len(params: dict) -> int:
    return int(section(params, "grounding_train").get("seq_len", DEFAULT_SEQ_LEN))


@dataclass
class SaliencyParams:
    models: list[str]  # runs analysed through attention (saliency, heads, ablation)
    batch_size: Annotated[int, Ge(1)] = 64

"""The grounding head ablation's params (ablation.py runs it): no torch, so the params rules load them without it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge


@dataclass
class HeadAblationParams:
    n_draws: Annotated[int, Ge(1)] = 5  # random control head sets per checkpoint
    seed: int = 0

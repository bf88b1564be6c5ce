"""The binding stress test's params (stress.py runs it): no torch, so the params rules load them without it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge

from emergence.core.rules import CheckpointName


@dataclass
class StressParams:
    checkpoint: CheckpointName = "final"  # final | step{N}: the checkpoint the report's tables and metrics read
    # also score every checkpoint at a multiple of N steps (0: none, the named checkpoint only): the frontier
    curve_every: Annotated[int, Ge(0)] = 0

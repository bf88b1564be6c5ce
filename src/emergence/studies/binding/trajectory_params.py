"""The binding trajectory's phase params (trajectory.py reads them):
no torch, so the params rules load them without it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge, Gt, Le, Lt

CHANCE = 0.1


@dataclass
class PhaseParams:
    n_programs: Annotated[int, Ge(1)] = 1000
    # following rate above chance that counts as following a heuristic: room must be left above chance
    heuristic_margin: Annotated[float, Gt(0), Lt(1 - CHANCE)] = 0.15
    # Deep-hop accuracy that counts as traversal: it must beat chance, and perfect accuracy is a reachable
    # bar. Well above chance on purpose: shortcuts outside the five controlled heuristics reach ~50 % on the
    # training distribution.
    traversal_accuracy: Annotated[float, Gt(CHANCE), Le(1)] = 0.8

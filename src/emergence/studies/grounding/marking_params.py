"""The marking control's params (marking.py runs it): no torch, so the params rules load them without it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge


@dataclass
class MarkingParams:
    model: str = "transformer4"  # a grounding_models entry
    seed: Annotated[int, Ge(0)] = 0

"""The tuned lens' training params (tuned_lens.py trains it): no torch, so the params rules load them without it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge, Gt


@dataclass
class LensParams:
    steps: Annotated[int, Ge(1)] = 250
    batch_size: Annotated[int, Ge(1)] = 16
    lr: Annotated[float, Gt(0)] = 1e-3
    seed: int = 0

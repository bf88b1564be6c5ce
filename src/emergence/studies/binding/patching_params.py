"""The binding patching's params (patching.py runs it): no torch, so the params rules load them without it."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from annotated_types import Ge

from emergence.core.rules import CheckpointName


@dataclasses.dataclass
class PatchingParams:
    n_pairs: Annotated[int, Ge(1)] = 200
    checkpoint: CheckpointName = "final"  # final | step{N}

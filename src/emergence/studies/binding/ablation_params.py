"""The binding head ablation's params (ablation.py runs it): no torch, so the params rules load them without it."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from annotated_types import Ge

from emergence.core.io import PipelineError
from emergence.core.rules import CheckpointName
from emergence.interp.ablation_modes import MODES


@dataclasses.dataclass
class BindingAblationParams:
    n_programs: Annotated[int, Ge(1)] = 500
    modes: list[str] = dataclasses.field(default_factory=lambda: list(MODES))
    checkpoint: CheckpointName = "final"  # final | step{N}

    def validate(self, where: str) -> None:
        if not self.modes or set(self.modes) - set(MODES):
            raise PipelineError(f"{where}.modes: a non-empty subset of {list(MODES)}, got {self.modes}")

"""The grounding_lens section: the tuned lens's own params, and which checkpoints and windows the stage
reads it out on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge

from emergence.interp.lens_params import LensParams


@dataclass
class GroundingLensParams(LensParams):
    n_checkpoints: Annotated[int, Ge(1)] = 4  # log-spaced checkpoints of a run, the last always among them
    kl_windows: Annotated[int, Ge(1)] = 256  # training windows the lens quality (KL to the output) is measured on

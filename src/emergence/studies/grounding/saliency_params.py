"""The head-saliency params (saliency.py computes it): no torch, so the params rules load them without it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from annotated_types import Gt, Le

Baseline = Literal["none", "init"]  # what a head's share is measured against: 0, or its share at step 0


@dataclass
class HeadParams:
    threshold: Annotated[float, Gt(0), Le(1)] = 0.3  # a share
    # An image has pool_grid**2 prefix positions where a caption has one or two v<ENV>: an untrained model's
    # heads already put about half their saliency there. "init": an image-setting head counts when its share
    # rises above its step-0 share (find_heads); "none": the share itself, as in the text settings.
    image_baseline: Baseline = "init"

    def baseline(self, setting: str) -> str:
        """What a head's share is measured against in `setting`: image_baseline in the image setting only."""
        return self.image_baseline if setting == "image" else "none"

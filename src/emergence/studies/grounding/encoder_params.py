"""The image encoder's params (dino_features.py encodes with it): no torch, so the params rules load them without it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge

from emergence.core.io import PipelineError
from emergence.core.rules import field_problems

PATCH = 14  # every DINOv2 checkpoint's patch, in pixels: a smaller image holds none
# Shapes of the published checkpoints, for the random-init fallback (the MLP width is hidden_size * mlp_ratio).
RANDOM_INIT_SHAPES = {
    "facebook/dinov2-small": dict(
        hidden_size=384, num_hidden_layers=12, num_attention_heads=6, mlp_ratio=4, patch_size=14
    ),
    "facebook/dinov2-base": dict(
        hidden_size=768, num_hidden_layers=12, num_attention_heads=12, mlp_ratio=4, patch_size=14
    ),
}


@dataclass
class EncoderParams:
    name: str = "facebook/dinov2-small"  # HF id, looked up in the local HF cache only
    local_dir: str = ""  # a directory with config.json + weights; wins over name
    allow_random_init: bool = False  # only then fall back to a seeded random DINOv2 of the same shape
    seed: Annotated[int, Ge(0)] = 0
    image_size: Annotated[int, Ge(PATCH)] = 224  # images resized (bicubic) to this square
    # patch grid average-pooled to pool_grid x pool_grid tokens (0 = keep all patches)
    pool_grid: Annotated[int, Ge(0)] = 4
    batch_size: Annotated[int, Ge(1)] = 16
    skip_bad_images: bool = False

    def validate(self, where: str) -> None:
        """The declared bounds too (load_encoder takes params built in code), then the rule a bound cannot say."""
        if problems := field_problems(self, where):
            raise PipelineError("\n".join(problems))
        if not self.name and not self.local_dir:
            raise PipelineError(f"{where}.name: set a DINOv2 model name or {where}.local_dir")
        if self.pool_grid > (grid := self.image_size // PATCH):  # known before the encoder loads: say it first
            raise PipelineError(
                f"{where}.pool_grid: {self.pool_grid} exceeds the {grid}x{grid} patch grid of image_size "
                f"{self.image_size} (raise image_size or lower pool_grid)"
            )

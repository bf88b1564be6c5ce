"""The attention-only model's config (attn_only.py builds it): no torch, so the params rules load it
without the model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from annotated_types import Ge

from emergence.core.io import PipelineError
from emergence.core.rules import field_problems

DTYPES = ("float32", "float64")  # torch dtypes, by their names in torch


@dataclass
class AttnOnlyConfig:
    n_layers: Annotated[int, Ge(1)] = 1
    d_vocab: Annotated[int, Ge(1)] = 128
    n_ctx: Annotated[int, Ge(1)] = 32
    dtype: Literal[tuple(DTYPES)] = "float32"  # float64 for leading-order checks at tiny learning rates

    def validate(self, where: str = "model") -> None:
        """The bounds and choices declared above (a model config comes from a plain dict or code, never
        from_dict)."""
        if problems := field_problems(self, where):
            raise PipelineError("\n".join(problems))

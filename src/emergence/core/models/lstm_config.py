"""The LSTM's config (lstm.py builds it); no torch, so the params rules load it without the model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge, Lt

from emergence.core.io import PipelineError
from emergence.core.rules import field_problems


@dataclass
class LSTMConfig:
    n_layers: Annotated[int, Ge(1)] = 4
    d_model: Annotated[int, Ge(1)] = 128
    d_vocab: Annotated[int, Ge(1)] = 41
    n_ctx: Annotated[int, Ge(1)] = 128  # an LSTM has no positional limit; kept so every arch bounds its inputs alike
    dropout: Annotated[float, Ge(0), Lt(1)] = 0.0
    d_prefix: Annotated[int, Ge(0)] = 0  # > 0: width of environment features read as a prefix (models/prefix.py)

    def validate(self, where: str = "model") -> None:
        """The bounds declared above (a model config comes from a plain dict or code, never from_dict)."""
        if problems := field_problems(self, where):
            raise PipelineError("\n".join(problems))

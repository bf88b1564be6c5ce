"""The Transformer's config (transformer.py builds it); no torch, so the params rules load it without the model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge, Gt, Lt

from emergence.core.io import PipelineError
from emergence.core.rules import field_problems

ACTIVATIONS = ("gelu", "gelu_tanh", "relu")  # transformer.py MLP: exact GELU, its tanh approximation, ReLU


@dataclass
class TransformerConfig:
    n_layers: Annotated[int, Ge(1)] = 4
    d_model: Annotated[int, Ge(1)] = 128
    n_heads: Annotated[int, Ge(1)] = 4
    d_head: Annotated[int, Ge(1)] = 32
    d_mlp: Annotated[int, Ge(1)] = 512
    n_ctx: Annotated[int, Ge(1)] = 128
    d_vocab: Annotated[int, Ge(1)] = 41
    pos: str = "rope"  # "rope" | "learned"
    act: str = "gelu"  # "gelu" (exact, erf) | "gelu_tanh" (GPT-2's tanh approximation) | "relu"
    dropout: Annotated[float, Ge(0), Lt(1)] = 0.0
    norm: str = "layernorm"
    rope_base: Annotated[float, Gt(0)] = 10000.0
    tie_embeddings: bool = False
    d_prefix: Annotated[int, Ge(0)] = 0  # > 0: width of environment features read as a prefix (models/prefix.py)
    conv_kernel: Annotated[int, Ge(0)] = 0  # > 0: causal depthwise conv over this many positions at each block's start

    def validate(self, where: str = "model") -> None:
        """The bounds declared above (a model config comes from a plain dict or code, never from_dict), then
        the rules a bound cannot say."""
        if problems := field_problems(self, where):
            raise PipelineError("\n".join(problems))

        def fail(key: str, rule: str) -> None:
            raise PipelineError(f"{where}.{key}: {rule}, got {getattr(self, key)!r}")

        if self.pos not in ("rope", "learned"):
            fail("pos", "must be rope or learned")
        if self.act not in ACTIVATIONS:
            fail("act", "must be gelu, gelu_tanh or relu")
        if self.norm != "layernorm":
            fail("norm", "must be layernorm")
        if self.pos == "rope" and self.d_head % 2:
            fail("d_head", "must be even when pos is rope")
        if not isinstance(self.tie_embeddings, bool):
            fail("tie_embeddings", "must be true or false")

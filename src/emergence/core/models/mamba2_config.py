"""Mamba-2's config (mamba2.py builds it); no torch, so the params rules load it without the model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge

from emergence.core.io import PipelineError
from emergence.core.rules import field_problems


@dataclass
class Mamba2Config:
    n_layers: Annotated[int, Ge(1)] = 4
    d_model: Annotated[int, Ge(1)] = 128
    d_vocab: Annotated[int, Ge(1)] = 41
    n_ctx: Annotated[int, Ge(1)] = 128  # Mamba has no positional limit; kept so every arch bounds its inputs alike
    d_state: Annotated[int, Ge(1)] = 64
    head_dim: Annotated[int, Ge(1)] = 32
    expand: Annotated[int, Ge(1)] = 2
    conv_kernel: Annotated[int, Ge(1)] = 4
    n_groups: Annotated[int, Ge(1)] = 1
    chunk_size: Annotated[int, Ge(1)] = 64
    d_prefix: Annotated[int, Ge(0)] = 0  # > 0: width of environment features read as a prefix (models/prefix.py)
    init: str = "hf"  # "hf" (HF's Mamba2 init) | "mamba_ssm" (the reference's: A, in_proj, conv1d differ)

    @property
    def n_heads(self) -> int:
        return self.expand * self.d_model // self.head_dim

    def validate(self, where: str = "model") -> None:
        """The bounds declared above (a model config comes from a plain dict or code, never from_dict), then
        the rules a bound cannot say."""
        if problems := field_problems(self, where):
            raise PipelineError("\n".join(problems))

        def fail(key: str, rule: str) -> None:
            raise PipelineError(f"{where}.{key}: {rule}, got {getattr(self, key)!r}")

        if (self.expand * self.d_model) % self.head_dim:
            fail("head_dim", f"must divide expand * d_model = {self.expand * self.d_model}")
        if self.n_heads % self.n_groups:
            fail("n_groups", f"must divide the number of heads expand * d_model / head_dim = {self.n_heads}")
        if self.init not in ("hf", "mamba_ssm"):
            fail("init", "must be hf or mamba_ssm")

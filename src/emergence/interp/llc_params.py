"""The LLC estimate's params (llc.py computes it): no torch, so the params rules load them without it."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from annotated_types import Ge, Gt

from emergence.core.io import PipelineError


@dataclasses.dataclass
class LLCParams:
    """params.yaml llc: devinterp's sampler settings, shared by the studies' LLC stages."""

    num_chains: Annotated[int, Ge(2)] = 4  # the spread over chains is reported
    num_draws: Annotated[int, Ge(1)] = 100
    lr: Annotated[float, Gt(0)] = 1e-4  # SGLD step size
    n_beta: Annotated[float, Gt(0)] = 10.0  # inverse temperature n * beta
    localization: Annotated[float, Ge(0)] = 100.0  # gamma: the pull toward the checkpoint's weights
    batch_size: Annotated[int, Ge(1)] = 32
    n_sequences: Annotated[int, Ge(1)] = 1024  # training sequences the chains draw their batches from
    every: Annotated[int, Ge(1)] = 1  # every k-th saved checkpoint (the last one always)

    def validate(self, where: str = "llc") -> None:
        if self.batch_size > self.n_sequences:  # the sampler draws whole batches of them
            raise PipelineError(f"{where}.batch_size: {self.batch_size}, more than n_sequences ({self.n_sequences})")


@dataclasses.dataclass
class LLCSeeds:
    """params.yaml binding_llc: the seeds of base.seeds whose checkpoints get an LLC curve; none at the
    default (opt-in, profiles/full.yaml: it costs ~4 min per binding seed on 2 cores)."""

    seeds: list[int]

    def validate(self, where: str = "binding_llc") -> None:
        if len(set(self.seeds)) != len(self.seeds):
            raise PipelineError(f"{where}.seeds: a seed is listed twice ({self.seeds})")

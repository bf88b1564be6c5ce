"""The association runs' and comparisons' params (compare.py computes them):
no torch, so the params rules load them without it."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge, Gt

from emergence.core.io import PipelineError
from emergence.core.rules import CheckpointName


@dataclass
class AssocRuns:
    layers: list[int]
    seeds: list[int]

    def validate(self, where: str) -> None:
        if not self.layers or min(self.layers) < 1:
            raise PipelineError(f"{where}.layers: a non-empty list of positive layer counts, got {self.layers}")
        if not self.seeds:
            raise PipelineError(f"{where}.seeds: at least one seed, got {self.seeds}")

    def names(self) -> list[str]:
        return [run_name(n_layers, seed) for n_layers in self.layers for seed in self.seeds]


def run_name(n_layers: int, seed: int) -> str:
    """Directory / file stem of one training run of the association study."""
    return f"L{n_layers}_seed{seed}"


@dataclasses.dataclass
class CompareParams:
    """params.yaml assoc_compare. Every run is compared with both bases; `basis` is the one the
    metrics, claims and figures report (the other stands beside it in the report's table)."""

    window_epochs: Annotated[int, Ge(1)] = 100
    basis: typing.Literal["corpus", "first_batch"] = "corpus"
    basis_batches: Annotated[int, Ge(1)] = 1  # first_batch: batches of B, Phi (the authors' BPE script: 4)
    basis_q: typing.Literal["same", "fresh"] = "same"  # first_batch: Q from those batches, or a fresh shuffle's


@dataclasses.dataclass
class CausalParams:
    checkpoint: CheckpointName = "final"  # final | step{N}
    n_sequences: Annotated[int, Ge(0)] = 0  # 0 = the whole corpus


@dataclasses.dataclass
class OrderParams:
    n_layers: Annotated[int, Ge(1)] = 3
    etas: list[float] = dataclasses.field(default_factory=lambda: [0.08, 0.04, 0.02, 0.01])
    steps: Annotated[int, Ge(4)] = 8  # W and P need 4 steps for a slope
    n_sequences: Annotated[int, Ge(1)] = 256

    def validate(self, where: str) -> None:
        if len(self.etas) < 2 or min(self.etas) <= 0:
            raise PipelineError(f"{where}.etas: at least two positive learning rates, got {self.etas}")


@dataclasses.dataclass
class AssocTrainParams:
    lr: Annotated[float, Gt(0)]
    epochs: Annotated[int, Ge(1)]
    batch_size: Annotated[int, Ge(0)] = 0  # 0 = full batch
    dense_until: Annotated[int, Ge(0)] = 20
    n_log_checkpoints: Annotated[int, Ge(0)] = 30
    # 0.1: every tenth of an epoch, as the authors log (--log_epochs 0.1)
    checkpoint_every_epochs: Annotated[float, Ge(0)] = 0
    dtype: str = "float32"
    on_nonfinite: typing.Literal["stop", "continue"] = "stop"  # as TrainConfig.on_nonfinite

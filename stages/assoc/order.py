"""Order check: the leading-term error must shrink like the next order (linearly in eta and steps).

Short full-batch float64 runs at several learning rates on a prefix of the
corpus (the basis is recomputed on that prefix), through the shared training
loop; every step is checkpointed and compared with its prediction.
"""
from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from emergence.studies.assoc.compare import weight_rows
from emergence.studies.assoc.theory import Basis, compute_basis
from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.studies.assoc.corpus import load_corpus
from emergence.core.io import PipelineError, write_parquet
from emergence.core.models import build_model
from emergence.core.train import TrainConfig, list_checkpoints, load_checkpoint, train


@dataclasses.dataclass
class OrderParams:
    n_layers: int = 3
    etas: list[float] = dataclasses.field(default_factory=lambda: [0.08, 0.04, 0.02, 0.01])
    steps: int = 8
    n_sequences: int = 256

    def validate(self, where: str) -> None:
        if len(self.etas) < 2 or min(self.etas) <= 0:
            raise PipelineError(f"{where}.etas: at least two positive learning rates, got {self.etas}")
        if self.steps < 4:
            raise PipelineError(f"{where}.steps: W and P need >= 4 steps for a slope, got {self.steps}")
        for key in ("n_layers", "n_sequences"):
            if getattr(self, key) < 1:
                raise PipelineError(f"{where}.{key}: must be >= 1, got {getattr(self, key)}")


def order_run(sequences: np.ndarray, basis: Basis, n_layers: int, eta: float, steps: int, work: Path) -> list[dict]:
    """Train from zero for `steps` full-batch steps at `eta`; leading-order rows at every step."""
    V = basis.B.shape[0]
    model = build_model("attn_only", dict(n_layers=n_layers, d_vocab=V, n_ctx=sequences.shape[1] - 1,
                                          dtype="float64"))
    block = torch.from_numpy(sequences.astype("int64"))
    cfg = TrainConfig(steps=steps, batch_size=len(sequences), lr=eta, optimizer="sgd", schedule="constant",
                      grad_clip=None, dense_until=steps, n_log_checkpoints=0, device="cpu")
    train(model, lambda step: (block[:, :-1], block[:, 1:]), cfg, work / "run", work / "scratch", progress=False)
    return [{"eta": eta, **row} for step, path in list_checkpoints(work / "run") if step > 0
            for row in weight_rows(load_checkpoint(path)[0], basis, step, eta)]


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    p = from_dict(OrderParams, section(params, "assoc_order"), "assoc_order")
    corpus = load_corpus(path_of(params, "assoc_corpus"))
    sequences = corpus.sequences[: p.n_sequences]
    basis = compute_basis(sequences, len(corpus.vocab))
    rows = []
    for eta in sorted(p.etas):
        with tempfile.TemporaryDirectory() as work:
            rows += order_run(sequences, basis, p.n_layers, eta, p.steps, Path(work))
    table = pd.DataFrame(rows)
    table.insert(0, "n_layers", p.n_layers)
    write_parquet(table, path_of(params, "assoc_order"))


if __name__ == "__main__":
    raise SystemExit(main())

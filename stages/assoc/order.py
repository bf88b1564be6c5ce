"""Order check: the leading-term error must shrink like the next order (linearly in eta and steps).

Short full-batch float64 runs at several learning rates on a prefix of the
corpus (the basis is recomputed on that prefix), through the shared training
loop; every step is checkpointed and compared with its prediction.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import write_parquet
from emergence.core.models.registry import build_model
from emergence.core.train.checkpoint import list_checkpoints, load_checkpoint
from emergence.core.train.config import TrainConfig
from emergence.core.train.loop import train
from emergence.studies.assoc.compare import weight_rows
from emergence.studies.assoc.compare_params import OrderParams
from emergence.studies.assoc.corpus import first_sequences, load_corpus
from emergence.studies.assoc.theory import Basis, compute_basis


def order_run(sequences: np.ndarray, basis: Basis, n_layers: int, eta: float, steps: int, work: Path) -> list[dict]:
    """Train from zero for `steps` full-batch steps at `eta`; leading-order rows at every step."""
    V = basis.B.shape[0]
    model = build_model("attn_only", dict(n_layers=n_layers, d_vocab=V, n_ctx=sequences.shape[1] - 1, dtype="float64"))
    block = torch.from_numpy(sequences.astype("int64"))
    cfg = TrainConfig(
        steps=steps,
        batch_size=len(sequences),
        lr=eta,
        optimizer="sgd",
        schedule="constant",
        grad_clip=None,
        dense_until=steps,
        n_log_checkpoints=0,
        device="cpu",
    )
    train(
        model,
        lambda step: (block[:, :-1], block[:, 1:]),
        cfg,
        work / "run",
        work / "scratch",
        progress=False,
        where="assoc_order",
    )
    return [
        {"eta": eta, **row}
        for step, path in list_checkpoints(work / "run")
        if step > 0
        for row in weight_rows(load_checkpoint(path)[0], basis, step, eta)
    ]


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    p = from_dict(OrderParams, section(params, "assoc_order"), "assoc_order")
    corpus = load_corpus(corpus_path := path_of(params, "assoc_corpus"))
    sequences = first_sequences(corpus, p.n_sequences, "assoc_order.n_sequences", corpus_path)
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

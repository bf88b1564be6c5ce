"""Train one attention-only model of the association study (one run per layer count and seed).

Plain SGD from exactly zero weights, as the theory assumes: no momentum, no
weight decay, no clipping, constant learning rate. With minibatches every
epoch visits a seed-dependent permutation of the corpus in whole batches.
"""

from __future__ import annotations

import torch

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, load_base, path_of, section
from emergence.core.io import PipelineError, file_sha256
from emergence.core.models.registry import build_model
from emergence.core.train.batches import epoch_batches
from emergence.core.train.config import TrainConfig
from emergence.core.train.loop import train
from emergence.studies.assoc.compare import checkpoint_steps, corpus_loss
from emergence.studies.assoc.compare_params import AssocTrainParams, run_name
from emergence.studies.assoc.corpus import load_corpus


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_layers=True)
    p = from_dict(AssocTrainParams, section(params, "assoc_train"), "assoc_train")
    corpus_path = path_of(params, "assoc_corpus")
    corpus = load_corpus(corpus_path)
    n = len(corpus.sequences)
    batch = p.batch_size or n
    if batch > n:
        raise PipelineError(f"assoc_train.batch_size: the corpus has only {n} sequences, got {batch}")
    per_epoch = n // batch
    cfg = TrainConfig(
        steps=p.epochs * per_epoch,
        batch_size=batch,
        lr=p.lr,
        optimizer="sgd",
        weight_decay=0.0,
        schedule="constant",
        grad_clip=None,
        seed=args.seed,
        dense_until=p.dense_until,
        n_log_checkpoints=p.n_log_checkpoints,
        checkpoint_every=checkpoint_steps(p.checkpoint_every_epochs, per_epoch, "assoc_train"),
        **load_base(params).train_keys(),
        on_nonfinite=p.on_nonfinite,
    )
    model = build_model(
        "attn_only",
        dict(n_layers=args.layers, d_vocab=len(corpus.vocab), n_ctx=corpus.sequences.shape[1] - 1, dtype=p.dtype),
        "assoc_train",
    )
    run = run_name(args.layers, args.seed)

    def eval_fn(model: torch.nn.Module, step: int) -> dict[str, float]:
        return {"corpus_loss": corpus_loss(model, corpus.sequences)}  # minibatch losses are noisy

    train(
        model,
        epoch_batches(corpus.sequences, batch, args.seed),
        cfg,
        out_dir=path_of(params, "assoc_runs") / run,
        scratch_dir=path_of(params, "assoc_scratch") / run,
        eval_fn=eval_fn,
        data_fingerprint=file_sha256(corpus_path),
        where="assoc_train",
    )


if __name__ == "__main__":
    raise SystemExit(main())

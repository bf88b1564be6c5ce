"""Cosine between every learned weight and its closed form, per checkpoint of one run, against both
bases: the whole corpus's and its first shuffled batch's (the authors'; assoc_compare.basis says which
one the report leads with)."""

from __future__ import annotations

from tqdm import tqdm

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import PipelineError, read_parquet, write_parquet
from emergence.core.train.checkpoint import list_checkpoints, load_checkpoint
from emergence.studies.assoc.compare import cosine_table, first_batch_rows
from emergence.studies.assoc.compare_params import CompareParams, run_name
from emergence.studies.assoc.corpus import load_corpus
from emergence.studies.assoc.theory import compute_basis, load_basis


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_layers=True)
    p = from_dict(CompareParams, section(params, "assoc_compare"), "assoc_compare")
    corpus = load_corpus(path_of(params, "assoc_corpus"))
    n_sequences = len(corpus.sequences)
    run = run_name(args.layers, args.seed)
    ckpts = list_checkpoints(path_of(params, "assoc_runs") / run)
    if not ckpts:
        raise PipelineError(f"{path_of(params, 'assoc_runs') / run}: no checkpoints")
    train_cfg = load_checkpoint(ckpts[0][1])[1]["meta"]["train"]
    per_epoch = n_sequences // train_cfg["batch_size"]
    rows, q_rows = first_batch_rows(n_sequences, train_cfg["batch_size"], p, args.seed)
    bases = {
        "corpus": load_basis(path_of(params, "assoc_basis")),
        # on the CPU: this stage runs where the engine runs (no GPU asked), with the host's memory; its V^3
        # products take minutes at V = 10,000
        "first_batch": compute_basis(corpus.sequences[rows], len(corpus.vocab), q_sequences=corpus.sequences[q_rows]),
    }
    models = ((step, load_checkpoint(path)[0]) for step, path in tqdm(ckpts, desc="checkpoints"))
    table = cosine_table(models, bases, train_cfg["lr"], per_epoch, p.window_epochs, train_cfg["checkpoint_every"])
    metrics = read_parquet(path_of(params, "assoc_runs") / run / "metrics.parquet", {"step": "i", "corpus_loss": "f"})
    table = table.merge(metrics[["step", "corpus_loss"]].dropna(), on="step", how="left")
    table.insert(0, "n_layers", args.layers)
    table.insert(1, "seed", args.seed)
    write_parquet(table, path_of(params, "assoc_cosines") / f"{run}.parquet")


if __name__ == "__main__":
    raise SystemExit(main())

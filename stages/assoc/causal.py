"""Training loss after removing each learned weight's theoretical direction (the paper's causal intervention)."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import write_parquet
from emergence.core.train.checkpoint import load_named_checkpoint
from emergence.studies.assoc.compare import causal_table
from emergence.studies.assoc.compare_params import CausalParams, run_name
from emergence.studies.assoc.corpus import first_sequences, load_corpus
from emergence.studies.assoc.theory import load_basis


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_layers=True)
    p = from_dict(CausalParams, section(params, "assoc_causal"), "assoc_causal")
    run = run_name(args.layers, args.seed)
    step, model = load_named_checkpoint(path_of(params, "assoc_runs") / run, p.checkpoint, "assoc_causal.checkpoint")
    corpus = load_corpus(corpus_path := path_of(params, "assoc_corpus"))
    sequences = first_sequences(corpus, p.n_sequences, "assoc_causal.n_sequences", corpus_path)
    table = causal_table(model, load_basis(path_of(params, "assoc_basis")), sequences)
    for i, (key, value) in enumerate((("n_layers", args.layers), ("seed", args.seed), ("step", step))):
        table.insert(i, key, value)
    write_parquet(table, path_of(params, "assoc_causal") / f"{run}.parquet")


if __name__ == "__main__":
    raise SystemExit(main())

"""Top associated tokens of probe words under the closed forms and the learned W_O and V."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import PipelineError, write_parquet
from emergence.core.train.checkpoint import load_named_checkpoint
from emergence.studies.assoc.compare import learned_matrices, theory_matrices, top_associations
from emergence.studies.assoc.compare_params import run_name
from emergence.studies.assoc.corpus import WordsParams, load_corpus
from emergence.studies.assoc.theory import load_basis


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    p = from_dict(WordsParams, section(params, "assoc_words"), "assoc_words")
    run_dir = path_of(params, "assoc_runs") / run_name(p.n_layers, p.seed)
    if not run_dir.is_dir():
        raise PipelineError(f"assoc_words.n_layers/seed: no run {run_dir} (see assoc_train.layers and seeds)")
    _, model = load_named_checkpoint(run_dir, p.checkpoint, "assoc_words.checkpoint")
    vocab = load_corpus(corpus := path_of(params, "assoc_corpus")).vocab
    if p.top_k > len(vocab):  # check bounds it by assoc_corpus.vocab_size; rare types may leave fewer
        raise PipelineError(f"assoc_words.top_k: {p.top_k} is more than the {len(vocab)} types of {corpus}")
    matrices = {**theory_matrices(load_basis(path_of(params, "assoc_basis"))), **learned_matrices(model)}
    write_parquet(
        top_associations(matrices, vocab, p.probes, p.top_k, "assoc_words.probes"), path_of(params, "assoc_words")
    )


if __name__ == "__main__":
    raise SystemExit(main())

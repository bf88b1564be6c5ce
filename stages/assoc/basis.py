"""Closed forms of the association study (B, Phi, Sigma_B, G, Q, Delta) from the corpus."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import load_base, path_of
from emergence.core.io import write_parquet
from emergence.core.train.loop import resolve_device
from emergence.studies.assoc.corpus import load_corpus
from emergence.studies.assoc.theory import basis_summary, compute_basis, save_basis


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    corpus = load_corpus(path_of(params, "assoc_corpus"))
    device = resolve_device(load_base(params).device)
    basis = compute_basis(corpus.sequences, len(corpus.vocab), device=device, progress=True)
    save_basis(basis, path_of(params, "assoc_basis"))
    write_parquet(basis_summary(basis), path_of(params, "assoc_basis_summary"))


if __name__ == "__main__":
    raise SystemExit(main())

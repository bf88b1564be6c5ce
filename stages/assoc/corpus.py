"""Tokenise the association study's corpus into T + 1-token sequences over a top-K vocabulary.

Source (paths.assoc_source) by assoc_corpus.format: `text` reads a
TinyStories-style file or directory (stories separated by <|endoftext|>),
`chat` reads the main-tier speech of a CHAT .cha file or directory.
"""

from __future__ import annotations

from emergence.core.chat import speech_documents
from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import write_json
from emergence.studies.assoc.corpus import CorpusParams, build_corpus, read_text_documents, save_corpus

READERS = {"text": read_text_documents, "chat": speech_documents}


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    p = from_dict(CorpusParams, section(params, "assoc_corpus"), "assoc_corpus")
    source = path_of(params, "assoc_source")
    corpus = build_corpus(READERS[p.format](source), p, str(source))
    summary = {
        "source": str(source),
        "format": p.format,
        "tokenizer": corpus.tokenizer,
        "sequences": p.sequences,
        "min_count": p.min_count,
        "vocab_size": len(corpus.vocab),
        "seq_len": int(corpus.sequences.shape[1] - 1),
        "n_sequences": int(len(corpus.sequences)),
        "n_documents": corpus.n_documents,
        "n_tokens": corpus.n_tokens,
        "n_types": corpus.n_types,
        "coverage": round(corpus.coverage, 6),
        "n_windows": corpus.n_windows,
    }
    save_corpus(corpus, path_of(params, "assoc_corpus"))
    write_json(summary, path_of(params, "assoc_corpus_summary"))


if __name__ == "__main__":
    raise SystemExit(main())

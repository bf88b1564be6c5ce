"""Tokenise the association study's corpus into T + 1-token sequences over a top-K vocabulary.

Source (paths.assoc_source) by assoc_corpus.format: `text` reads a
TinyStories-style file or directory (stories separated by <|endoftext|>),
`chat` reads the main-tier speech of a CHAT .cha file or directory. The
first stage to know the vocabulary, it refuses one that lacks a probe word
of assoc_words (rather than assoc_words failing after training).
"""

from __future__ import annotations

from emergence.core.chat import speech_documents
from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import PipelineError, write_json
from emergence.studies.assoc.corpus import (
    CorpusParams,
    WordsParams,
    build_corpus,
    missing_probes,
    read_text_documents,
    save_corpus,
)

READERS = {"text": read_text_documents, "chat": speech_documents}


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    p = from_dict(CorpusParams, section(params, "assoc_corpus"), "assoc_corpus")
    source = path_of(params, "assoc_source")
    probes = from_dict(WordsParams, section(params, "assoc_words"), "assoc_words").probes
    corpus = build_corpus(READERS[p.format](source), p, str(source))
    if missing := missing_probes(corpus.vocab, probes, str(source)):
        raise PipelineError(missing[0])
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

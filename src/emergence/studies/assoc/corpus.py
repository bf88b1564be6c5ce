"""Natural-text corpora as fixed-length training sequences over a top-K vocabulary.

The association study's rule (Im et al., arXiv 2601.19208, as our texts quote it):
"For training, we use 65536 of the filtered samples with sequence length at
least 201 and truncate all sequences to 201 tokens for training and computing
theoretical leading terms", and from the authors' answer to the reviewers,
"tokens with corpus frequency below 5 are excluded from the bigram and
interchangeability statistics". Ours:

- `sequences: stories` is that rule with T + 1 for 201: one sequence per
  document of at least T + 1 tokens, its first T + 1; `sequences: windows`
  instead cuts every document into consecutive non-overlapping windows of
  T + 1 (more sequences from few or long documents);
- the vocabulary is the K most frequent types among those seen at least
  `min_count` times, most frequent first and equal counts in the order first
  seen in the corpus, as the authors' `Counter.most_common` orders them (the
  ids are theirs too); a sequence is kept only if all its tokens are in it
  (ours: "filtered samples" read as samples inside the vocabulary; the paper
  excludes rare tokens from the statistics only; why: the model has no <unk>
  token, so a token left out of the statistics could not be trained on either);
- `story_filter: prefix` asks that of the sequence's own T + 1 tokens;
  `story_filter: whole` of every token of its document, as the authors'
  tiny-tokenize-natural.py keeps a story only if all of it is in the
  vocabulary (tiny-self-attn-natural.py then keeps those of >= T + 1 tokens
  and cuts their first T + 1). On the same stories the two select different
  sequences: `whole` drops a story whose out-of-vocabulary word comes late.
"""

from __future__ import annotations

import codecs
import dataclasses
import json
import os
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from annotated_types import Ge
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

from emergence.core.io import PipelineError, atomic_path, inside
from emergence.core.rules import CheckpointName, field_problems
from emergence.studies.assoc.stories import DOC_SEPARATOR

TOKENIZERS = ("word", "bpe")
SPECIALS = ("<unk>", "<pad>", "<s>", "</s>")  # the authors' BPE special tokens, ids 0-3
_WORD = re.compile(r"[^\W\d_]+|\S")  # a run of letters, or any single other non-space


def word_tokens(text: str, lowercase: bool = True) -> list[str]:
    """Words (runs of letters), lower-cased unless asked not to; every other non-space character alone."""
    return _WORD.findall(text.lower() if lowercase else text)


CHUNK = 1 << 18  # bytes read at a time: a text file is streamed, never held whole


def _utf8_chunks(file: Path) -> Iterator[str]:
    """The text of `file`, CHUNK bytes at a time (a character split across two chunks decoded whole)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0  # bytes of the file read so far
    with open(file, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            held = len(decoder.getstate()[0])  # the start of a character, from the chunk before
            try:
                text = decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as e:
                at = offset - held + e.start
                raise PipelineError(f"{file}: not UTF-8 text (invalid byte at offset {at})") from None
            yield text
            if not chunk:
                return
            offset += len(chunk)


def _split(texts: Iterator[str], separator: str) -> Iterator[str]:
    """The pieces of the concatenated `texts` between separators, holding only the piece being read
    (a separator that straddles two texts starts within the last len(separator) - 1 characters)."""
    keep = len(separator) - 1
    pieces: list[str] = []  # the current piece, minus its last `keep` characters (in `tail`)
    tail = ""
    for text in texts:
        parts = (tail + text).split(separator)
        for part in parts[:-1]:
            yield "".join(pieces) + part
            pieces = []
        cut = max(len(parts[-1]) - keep, 0)
        pieces.append(parts[-1][:cut])
        tail = parts[-1][cut:]
    yield "".join(pieces) + tail


def _text_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = inside(path, sorted(path.rglob("*.txt")))
        if not files:
            raise PipelineError(f"{path}: directory holds no .txt files")
        return files
    if path.exists():
        return [path]
    raise PipelineError(f"{path}: text file or directory not found")


def text_documents(path: str | os.PathLike) -> Iterator[str]:
    """Documents of a TinyStories-style .txt file, or of every *.txt under a directory (sorted,
    recursive), one at a time: split on `<|endoftext|>`, stripped, blank ones dropped. Memory: one
    chunk and one document, whatever the size of the file."""
    for file in _text_files(Path(path)):
        for doc in _split(_utf8_chunks(file), DOC_SEPARATOR):
            if doc := doc.strip():
                yield doc


def read_text_documents(path: str | os.PathLike) -> list[str]:
    """Every document of `text_documents(path)`."""
    return list(text_documents(path))


@dataclass(frozen=True)
class CorpusConfig:
    vocab_size: Annotated[int, Ge(2)]
    seq_len: Annotated[int, Ge(1)]
    tokenizer: Literal[TOKENIZERS] = "word"
    max_sequences: Annotated[int, Ge(0)] = 0  # 0 = keep all
    sequences: Literal["stories", "windows"] = "windows"  # one per long-enough document, or every window
    min_count: Annotated[int, Ge(1)] = 1  # types seen fewer times are never in the vocabulary
    story_filter: Literal["prefix", "whole"] = "prefix"  # in the vocabulary: the sequence's tokens, or its document's
    lowercase: bool = True  # the authors' word-level tokenizer lower-cases; their BPE keeps case
    bpe_specials: bool = (
        False  # the authors' BPE: <unk> <pad> <s> </s>, each story in <s> ... </s>, its whole vocabulary
    )

    def validate(self, where: str = "corpus") -> None:
        """The bounds and choices declared above (build_corpus checks a config built in code here), then the
        rules they cannot say."""
        if problems := field_problems(self, where):
            raise PipelineError("\n".join(problems))
        if self.bpe_specials and self.tokenizer != "bpe":
            raise PipelineError(f"{where}.bpe_specials: only with tokenizer: bpe, got tokenizer {self.tokenizer!r}")
        if self.bpe_specials and self.min_count != 1:
            raise PipelineError(
                f"{where}.min_count: bpe_specials keeps the tokenizer's whole vocabulary (the authors'), "
                f"so no type is left out; set min_count: 1, got {self.min_count}"
            )
        if self.bpe_specials and self.vocab_size < len(SPECIALS) + 2:
            raise PipelineError(f"{where}.vocab_size: bpe_specials needs >= {len(SPECIALS) + 2}, got {self.vocab_size}")


@dataclass
class Corpus:
    vocab: list[str]  # id -> token, most frequent first
    sequences: np.ndarray  # (N, seq_len + 1) int32
    tokenizer: str
    n_documents: int
    n_tokens: int  # all tokens of all documents
    n_types: int  # distinct types before the top-K cut
    coverage: float  # fraction of tokens whose type is in the vocabulary
    n_windows: int  # candidate sequences (windows, or long-enough documents) before the vocabulary filter

    @property
    def seq_len(self) -> int:
        return self.sequences.shape[1] - 1


def _bpe(documents: list[str], cfg: CorpusConfig) -> tuple[list[list[str]], list[str]]:
    """(token strings of each document, the tokenizer's vocabulary in id order) under a BPE trained on
    the documents themselves. bpe_specials: the authors' (tiny-tokenize-bpe.py): SPECIALS are ids 0-3
    and a template wraps every document in <s> ... </s>."""
    tok = Tokenizer(models.BPE())
    if cfg.lowercase:
        tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    specials = list(SPECIALS) if cfg.bpe_specials else []
    trainer = trainers.BpeTrainer(vocab_size=cfg.vocab_size, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(documents, trainer)
    if cfg.bpe_specials:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>", special_tokens=[(t, tok.token_to_id(t)) for t in ("<s>", "</s>")]
        )
    vocab = [tok.id_to_token(i) for i in range(tok.get_vocab_size())]
    return [enc.tokens for enc in tok.encode_batch(documents)], vocab


def _windows(ids: np.ndarray, width: int, first_only: bool) -> np.ndarray:
    """(n, width): consecutive non-overlapping windows, the ragged tail dropped; only the first
    when `first_only` (none for a shorter document)."""
    n = min(len(ids) // width, 1 if first_only else len(ids))
    return ids[: n * width].reshape(n, width)


def build_corpus(documents: list[str], cfg: CorpusConfig, source: str) -> Corpus:
    """Tokenise, keep the top-K types seen at least min_count times, cut into in-vocabulary
    sequences of seq_len + 1 (the first of each document, or every window).

    `source` (the input file or directory) names the data in every error.
    """
    cfg.validate()
    if cfg.tokenizer == "bpe":
        docs, bpe_vocab = _bpe(documents, cfg)
    else:
        docs = [word_tokens(d, cfg.lowercase) for d in documents]
    counts = Counter(t for doc in docs for t in doc)
    n_tokens = sum(counts.values())
    if n_tokens == 0:
        raise PipelineError(f"{source}: empty corpus, no tokens in {len(documents)} documents")
    if len(counts) == 1:
        raise PipelineError(f"{source}: vocabulary of one type ({next(iter(counts))!r}), need at least two")
    # equal counts keep the order first seen (a Counter iterates in insertion order; most_common is a stable sort)
    vocab = [t for t, n in counts.most_common() if n >= cfg.min_count][: cfg.vocab_size]
    if cfg.bpe_specials:  # the authors': the tokenizer's every token, unused ones too (V counts them in R = Y - 1/V)
        vocab = bpe_vocab
    if len(vocab) < 2:
        raise PipelineError(
            f"{source}: only {len(vocab)} type(s) seen >= min_count={cfg.min_count} times, need at least two"
        )
    ids = {t: i for i, t in enumerate(vocab)}
    width = cfg.seq_len + 1
    first_only = cfg.sequences == "stories"
    encoded = [np.array([ids.get(t, -1) for t in doc], dtype=np.int64) for doc in docs]  # -1: out of vocabulary
    per_doc = [_windows(e, width, first_only) for e in encoded]
    windows = np.concatenate(per_doc)  # (W, T+1)
    inside = (windows >= 0).all(axis=1)
    if cfg.story_filter == "whole":  # only windows of a document whose every token is in the vocabulary
        inside &= np.repeat([bool((e >= 0).all()) for e in encoded], [len(w) for w in per_doc])
    kept = windows[inside]
    if len(kept) == 0:
        longest = max(map(len, docs))
        raise PipelineError(
            f"{source}: no sequence of T+1={width} tokens inside the vocabulary survives ({len(windows)} candidate "
            f"{cfg.sequences}, vocab_size={cfg.vocab_size}, longest document {longest} tokens)"
        )
    if cfg.max_sequences:
        kept = kept[: cfg.max_sequences]
    return Corpus(
        vocab=vocab,
        sequences=kept.astype(np.int32),
        tokenizer=cfg.tokenizer,
        n_documents=len(documents),
        n_tokens=n_tokens,
        n_types=len(counts),
        coverage=sum(counts[t] for t in vocab) / n_tokens,
        n_windows=len(windows),
    )


def save_corpus(corpus: Corpus, path: str | os.PathLike) -> None:
    """One safetensors file: the sequences tensor, everything else as JSON metadata."""
    meta = {f.name: getattr(corpus, f.name) for f in dataclasses.fields(corpus) if f.name != "sequences"}
    # One metadata key only: safetensors serialises its metadata map in arbitrary order.
    header = {"corpus": json.dumps(meta, sort_keys=True)}
    data = save({"sequences": np.ascontiguousarray(corpus.sequences, dtype=np.int32)}, metadata=header)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)  # (save_file would create the file mode 0600)


def load_corpus(path: str | os.PathLike) -> Corpus:
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path}: corpus file not found")
    try:
        with safe_open(path, framework="np") as f:
            sequences = f.get_tensor("sequences")
            meta = json.loads((f.metadata() or {})["corpus"])
        corpus = Corpus(sequences=sequences, **meta)
    except (SafetensorError, OSError, ValueError, KeyError, TypeError) as e:
        raise PipelineError(f"{path}: not a readable corpus file ({e.__class__.__name__})") from None
    n_vocab = len(corpus.vocab)
    if sequences.dtype != np.int32 or sequences.ndim != 2 or sequences.shape[1] < 2:
        raise PipelineError(f"{path}: sequences must be (N, T+1) int32, got {sequences.dtype} {sequences.shape}")
    if sequences.size and not 0 <= sequences.min() <= sequences.max() < n_vocab:
        raise PipelineError(f"{path}: token ids outside the vocabulary of {n_vocab}")
    return corpus


def first_sequences(corpus: Corpus, n: int, where: str, path: str | os.PathLike) -> np.ndarray:
    """The corpus's first `n` sequences (0: all); `n` beyond the corpus (`path`) is refused, not clipped:
    a table would otherwise report a measurement on fewer sequences than its params say."""
    if n > len(corpus.sequences):
        raise PipelineError(f"{where}: {n} is more than the {len(corpus.sequences)} sequences of {path}")
    return corpus.sequences[: n or None]


@dataclass(frozen=True, kw_only=True)
class CorpusParams(CorpusConfig):
    """params.yaml assoc_corpus: the corpus settings plus the source's format."""

    format: Literal["text", "chat"]  # text: TinyStories-style file/dir; chat: CHAT main-tier speech


@dataclasses.dataclass
class WordsParams:
    """params.yaml assoc_words: probe words whose top associations are shown. assoc_corpus checks the
    probes against the vocabulary it builds (the first stage that knows it)."""

    probes: list[str]
    top_k: Annotated[int, Ge(1)] = 8
    n_layers: int = 3
    seed: int = 0
    checkpoint: CheckpointName = "final"

    def validate(self, where: str) -> None:
        if not self.probes:
            raise PipelineError(f"{where}.probes: at least one probe word")


def missing_probes(vocab: Sequence[str], probes: Sequence[str], source: str) -> list[str]:
    """One line naming every probe word outside `vocab` (the vocabulary built from `source`), or []."""
    known = set(vocab)
    missing = [p for p in probes if p not in known]
    if not missing:
        return []
    return [
        f"assoc_words.probes: {', '.join(map(repr, missing))} not in the {len(vocab)}-type vocabulary "
        f"built from {source}"
    ]

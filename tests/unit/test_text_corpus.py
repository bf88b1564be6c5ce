import tracemalloc
from collections import Counter
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from refusals import assert_names, refuses
from safetensors.numpy import save

import emergence.studies.assoc.corpus as corpus_module
from emergence.core.io import file_sha256
from emergence.studies.assoc.corpus import (
    CorpusConfig,
    build_corpus,
    first_sequences,
    load_corpus,
    missing_probes,
    read_text_documents,
    save_corpus,
    text_documents,
    word_tokens,
)
from emergence.studies.assoc.stories import StoryConfig, generate_stories, write_stories


def word_corpus(docs, vocab_size=2, seq_len=1, **kw):
    return build_corpus(docs, CorpusConfig(vocab_size, seq_len, **kw), "src.txt")


# --- tokeniser ------------------------------------------------------------------------------


def test_word_tokens_rules():
    assert word_tokens("Tom's dog, 2 cats!") == ["tom", "'", "s", "dog", ",", "2", "cats", "!"]
    assert word_tokens('Élan  café\n\tx_y 42"') == ["élan", "café", "x", "_", "y", "4", "2", '"']
    assert word_tokens(" \n ") == []


# --- vocabulary and windows -----------------------------------------------------------------


def test_top_k_ties_keep_the_order_first_seen():
    c = word_corpus(["d b a c b a c b a e e"], vocab_size=3)
    assert c.vocab == ["b", "a", "c"]  # b=a=3, b seen first; then c(2) beats e(2), seen later; d(1) is out
    assert (c.n_types, c.n_tokens) == (5, 11)
    assert c.coverage == pytest.approx(8 / 11)


def test_windows_are_non_overlapping_within_documents_and_in_vocabulary():
    #           windows of 2: (a b) (a b) (z a) (b a) (b a); z is out of a top-2 vocabulary
    c = word_corpus(["a b a b z a b a b a"])
    assert c.vocab == ["a", "b"]
    assert c.sequences.dtype == np.int32 and c.seq_len == 1
    assert c.sequences.tolist() == [[0, 1], [0, 1], [1, 0], [1, 0]]
    assert c.n_windows == 5
    # windows never span a document boundary; the ragged tail of each is dropped
    c = word_corpus(["a b a", "b a b"])
    assert c.sequences.tolist() == [[0, 1], [1, 0]]
    assert word_corpus(["a b a b z a b a b a"], max_sequences=3).sequences.shape == (3, 2)


def test_stories_keep_the_first_t_plus_1_tokens_of_each_long_enough_document():
    # the paper's rule at T + 1 = 3: a document of >= 3 tokens gives its first 3, once; shorter ones none
    docs = ["a b a b a b", "b a", "b b a z", "a z b a b"]
    c = word_corpus(docs, vocab_size=2, seq_len=2, sequences="stories")
    assert c.vocab == ["b", "a"]  # b 8, a 7 (z 2 is out of a top-2 vocabulary)
    # doc 1 -> (a b a); doc 2 too short; doc 3 -> (b b a); doc 4 -> (a z b) has an OOV: dropped
    assert c.sequences.tolist() == [[1, 0, 1], [0, 0, 1]]
    assert c.n_windows == 3  # the three documents long enough
    windows = word_corpus(docs, vocab_size=2, seq_len=2)  # every window: (a b a) (b a b) (b b a) (a z b)
    assert windows.sequences.tolist() == [[1, 0, 1], [0, 1, 0], [0, 0, 1]] and windows.n_windows == 4


def test_types_below_min_count_never_enter_the_vocabulary():
    # counts: a 4, b 3, c 2, d 1; top-4 with min_count 3 keeps a and b only, so windows with c or d go
    docs = ["a b a b c d a b c a"]
    assert word_corpus(docs, vocab_size=4, seq_len=1).vocab == ["a", "b", "c", "d"]
    c = word_corpus(docs, vocab_size=4, seq_len=1, min_count=3)
    assert c.vocab == ["a", "b"]
    assert c.sequences.tolist() == [[0, 1], [0, 1], [0, 1]]  # windows (a b) (a b) (c d) (a b) (c a)
    with refuses("src.txt", "only 1 type", "min_count=4"):
        word_corpus(docs, vocab_size=4, seq_len=1, min_count=4)


@pytest.mark.parametrize(
    "docs, vocab_size, seq_len, named",
    [
        ([], 4, 2, ["empty", "0 documents"]),
        (["  \n "], 4, 2, ["empty", "1 documents"]),
        (["a a a A"], 4, 2, ["one type", "'a'"]),
        (["a b c", "b a"], 4, 3, ["T+1=4", "(0 candidate"]),
        (["a x b y a z b w"], 2, 1, ["T+1=2", "(4 candidate"]),  # each has an OOV
    ],
)
def test_bad_corpora_name_the_source(docs, vocab_size, seq_len, named):
    with refuses("src.txt", *named):
        word_corpus(docs, vocab_size, seq_len)


@pytest.mark.parametrize(
    "cfg, key",
    [
        (CorpusConfig(1, 4), "corpus.vocab_size"),
        (CorpusConfig(8, 0), "corpus.seq_len"),
        (CorpusConfig(8, 4, tokenizer="char"), "corpus.tokenizer"),
        (CorpusConfig(8, 4, max_sequences=-1), "corpus.max_sequences"),
        (CorpusConfig(8, 4, min_count=0), "corpus.min_count"),
        (CorpusConfig(8, 4, sequences="chunks"), "corpus.sequences"),
    ],
)
def test_config_validation_names_the_key(cfg, key):
    with refuses(key):
        cfg.validate("corpus")


def test_bpe_round_trip_and_determinism():
    docs = generate_stories(StoryConfig(n_stories=60, seed=3))
    cfg = CorpusConfig(vocab_size=80, seq_len=8, tokenizer="bpe")
    c = build_corpus(docs, cfg, "stories")
    assert c.sequences.ndim == 2 and c.sequences.shape[1] == 9 and len(c.sequences) > 100
    assert c.sequences.dtype == np.int32
    assert len(c.vocab) <= 80 and c.sequences.max() < len(c.vocab)
    # the pieces of the first window spell the start of the first story, lower-cased, spaces dropped
    first = "".join(c.vocab[i] for i in c.sequences[0])
    assert "".join(docs[0].lower().split()).startswith(first)
    # ids follow frequency: id 0 is at least as common as id 1, ...
    counts = np.bincount(c.sequences.ravel(), minlength=len(c.vocab))
    assert counts[0] == counts.max()
    again = build_corpus(docs, cfg, "stories")
    assert again.vocab == c.vocab and np.array_equal(again.sequences, c.sequences)


# --- reading text ---------------------------------------------------------------------------


def test_read_text_documents_file_and_directory(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "two.txt").write_text("Third story.\n<|endoftext|>\n")
    (tmp_path / "a.txt").write_text("First story.\n<|endoftext|>\n  \n<|endoftext|>\nSecond\nstory.\n")
    (tmp_path / "notes.md").write_text("ignored")
    assert read_text_documents(tmp_path / "a.txt") == ["First story.", "Second\nstory."]
    assert read_text_documents(tmp_path) == ["First story.", "Second\nstory.", "Third story."]


def test_read_text_documents_errors(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok text " + b"\xff\xfe more")
    with refuses(bad, "UTF-8", "offset 8"):
        read_text_documents(tmp_path)
    with refuses(tmp_path / "missing.txt", "not found"):
        read_text_documents(tmp_path / "missing.txt")
    (tmp_path / "empty").mkdir()
    with refuses(tmp_path / "empty", "no .txt"):
        read_text_documents(tmp_path / "empty")


# --- embedded stories -----------------------------------------------------------------------


def test_stories_are_deterministic_and_round_trip(tmp_path):
    cfg = StoryConfig(n_stories=50, seed=7)
    stories = generate_stories(cfg)
    assert len(stories) == 50 and len(set(stories)) > 40
    assert stories != generate_stories(StoryConfig(n_stories=50, seed=8))
    write_stories(stories, tmp_path / "a.txt")
    write_stories(generate_stories(cfg), tmp_path / "b.txt")
    assert file_sha256(tmp_path / "a.txt") == file_sha256(tmp_path / "b.txt")
    assert read_text_documents(tmp_path / "a.txt") == stories


def test_default_stories_vocabulary():
    counts = Counter(t for s in generate_stories(StoryConfig()) for t in word_tokens(s))
    assert 150 <= len(counts) <= 400
    top = sum(n for _, n in counts.most_common(128)) / sum(counts.values())
    assert top > 0.9
    assert {'"', "!", "?", ","} <= counts.keys()


def test_story_config_validation():
    with refuses("stories.n_stories"):
        generate_stories(StoryConfig(n_stories=0))


# --- artifact -------------------------------------------------------------------------------


def test_save_load_round_trip_is_deterministic(tmp_path):
    c = word_corpus(["a b a b z a b a b a", "b b a"], vocab_size=2, max_sequences=0)
    save_corpus(c, tmp_path / "c.safetensors")
    save_corpus(c, tmp_path / "d.safetensors")
    assert file_sha256(tmp_path / "c.safetensors") == file_sha256(tmp_path / "d.safetensors")
    back = load_corpus(tmp_path / "c.safetensors")
    assert np.array_equal(back.sequences, c.sequences) and back.sequences.dtype == np.int32
    assert back.vocab == c.vocab and back.coverage == c.coverage
    assert (back.tokenizer, back.n_documents, back.n_tokens, back.n_types, back.n_windows) == (
        c.tokenizer,
        c.n_documents,
        c.n_tokens,
        c.n_types,
        c.n_windows,
    )


def test_load_corpus_errors_name_the_file(tmp_path):
    good = tmp_path / "good.safetensors"
    save_corpus(word_corpus(["a b a b"]), good)
    (tmp_path / "garbage.safetensors").write_bytes(b"\x00" * 40)
    (tmp_path / "truncated.safetensors").write_bytes(good.read_bytes()[:-3])
    (tmp_path / "nometa.safetensors").write_bytes(save({"sequences": np.zeros((2, 3), np.int32)}))
    meta = {
        "corpus": '{"vocab": ["a"], "tokenizer": "word", "n_documents": 1, "n_tokens": 1,'
        ' "n_types": 1, "coverage": 1.0, "n_windows": 1}'
    }
    (tmp_path / "badids.safetensors").write_bytes(save({"sequences": np.ones((2, 3), np.int32)}, meta))
    with refuses(tmp_path / "missing.safetensors", "not found"):
        load_corpus(tmp_path / "missing.safetensors")
    for name in ("garbage", "truncated", "nometa"):
        with refuses(tmp_path / f"{name}.safetensors", "readable"):
            load_corpus(tmp_path / f"{name}.safetensors")
    with refuses(tmp_path / "badids.safetensors", "token ids", "vocabulary of 1"):
        load_corpus(tmp_path / "badids.safetensors")


SEP = "<|endoftext|>"


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(["a", "b c", "é", "日本", "\n", SEP, "<|", "endoftext|>", "<|endof"]), max_size=40),
    chunk=st.integers(1, 20),
)
def test_streamed_documents_equal_the_whole_file_split(tmp_path_factory, pieces, chunk):
    """Whatever the chunk size (a separator or a character cut between chunks), streaming gives the
    documents of the whole text split at once."""
    text = "".join(pieces)
    path = tmp_path_factory.mktemp("s") / "s.txt"
    path.write_text(text, encoding="utf-8")
    expected = [d.strip() for d in text.split(SEP) if d.strip()]
    with mock.patch.object(corpus_module, "CHUNK", chunk):
        assert list(text_documents(path)) == expected


@pytest.mark.parametrize("at", [0, 6, 7, 8, 30])
def test_a_bad_byte_is_named_at_its_file_offset_across_chunks(tmp_path, at):
    data = bytearray("é story ".encode() * 5)
    data[at] = 0xFF
    path = tmp_path / "bad.txt"
    path.write_bytes(bytes(data))
    try:  # the offset Python names decoding the whole file at once
        bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        offset = e.start
    with (
        mock.patch.object(corpus_module, "CHUNK", 7),
        refuses(path, "UTF-8", f"offset {offset})"),
    ):
        list(text_documents(path))


def test_a_large_text_file_is_read_in_bounded_memory(tmp_path):
    """A 24 MiB file of 1 KiB documents. Held at once while streaming: one CHUNK of bytes, its
    decoded text (ASCII: 1 byte a character), the unfinished document's tail joined to it, the
    split pieces (their bytes, plus ~50 bytes of object header each) and one document: at most five
    buffers of <= CHUNK (1.25 MiB; measured 1.34 MB, 5.1 CHUNKs, with the decoder's own copy), under
    6 CHUNKs = 1.5 MiB, against ~72 MiB to read, decode and split the whole file at once."""
    doc = ("word " * 204)[:1020] + "\n"  # 1021 characters
    n_docs = 24 * 1024
    path = tmp_path / "big.txt"
    with open(path, "w") as f:
        for _ in range(n_docs // 1024):
            f.write((doc + SEP) * 1024)
    size = path.stat().st_size
    tracemalloc.start()
    try:
        count = sum(1 for _ in text_documents(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == n_docs
    assert peak < 6 * corpus_module.CHUNK < size / 16, (peak, size)


# --- what the association stages take from a built corpus -------------------------------------


def test_first_sequences_refuses_more_than_the_corpus_holds():
    corpus = word_corpus(["a b a b a b"], seq_len=1)  # windows of 2 tokens: 3 sequences
    assert len(first_sequences(corpus, 3, "x.n_sequences", "c.safetensors")) == 3
    assert len(first_sequences(corpus, 0, "x.n_sequences", "c.safetensors")) == 3  # 0: all
    assert first_sequences(corpus, 2, "x.n_sequences", "c.safetensors").tolist() == [[0, 1], [0, 1]]
    with refuses("x.n_sequences", 4, "3 sequences", "c.safetensors"):
        first_sequences(corpus, 4, "x.n_sequences", "c.safetensors")


def test_missing_probes_names_every_missing_word_in_one_line():
    assert missing_probes(["a", "b"], ["b", "a"], "src.txt") == []
    (line,) = missing_probes(["a", "b"], ["z", "a", "y"], "src.txt")
    assert_names(line, "assoc_words.probes", "'z', 'y'", "2-type", "src.txt")

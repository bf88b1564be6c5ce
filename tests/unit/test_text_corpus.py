"""The association study's text corpus: the word tokeniser, vocabulary and windows (or stories), BPE, the
corpus config and its errors as build_corpus reports them, reading text files (streamed, in bounded memory,
a bad byte named), the embedded stories and their widened form, the corpus artifact's exact bytes and checks,
and what the association stages take from a built corpus."""

from __future__ import annotations

import json
import tracemalloc
from collections import Counter
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from refusals import assert_names, assert_refused, refuses, refuses_key
from safetensors import safe_open
from safetensors.numpy import save

import emergence.studies.assoc.corpus as corpus_module
from emergence.core.config import from_dict
from emergence.core.io import file_sha256
from emergence.studies.assoc.corpus import (
    Corpus,
    CorpusConfig,
    WordsParams,
    build_corpus,
    first_sequences,
    load_corpus,
    missing_probes,
    read_text_documents,
    save_corpus,
    text_documents,
    word_tokens,
)
from emergence.studies.assoc.stories import StoryConfig, generate_stories, invented_names, write_stories


def word_corpus(docs, vocab_size=2, seq_len=1, **kw):
    return build_corpus(docs, CorpusConfig(vocab_size, seq_len, **kw), "src.txt")


# ---- tokeniser


def test_word_tokens_rules():
    assert word_tokens("Tom's dog, 2 cats!") == ["tom", "'", "s", "dog", ",", "2", "cats", "!"]
    assert word_tokens('Élan  café\n\tx_y 42"') == ["élan", "café", "x", "_", "y", "4", "2", '"']
    assert word_tokens(" \n ") == []


# ---- vocabulary and windows


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


def test_max_sequences_keeps_the_first_in_vocabulary_windows_in_document_order():
    # in-vocabulary windows of 2, in order: (a b) (a b) (b a) (b a); (z a) is dropped before the cut
    docs = ["a b a b z a b a b a", "a b"]
    assert word_corpus(docs, max_sequences=3).sequences.tolist() == [[0, 1], [0, 1], [1, 0]]
    assert word_corpus(docs, max_sequences=5).sequences.tolist() == [[0, 1], [0, 1], [1, 0], [1, 0], [0, 1]]


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


def test_a_single_surviving_sequence_is_a_corpus():
    c = build_corpus(["a b z a"], CorpusConfig(2, 1), "src.txt")  # windows (a b) (z a): one in-vocabulary
    assert c.vocab == ["a", "b"] and c.sequences.tolist() == [[0, 1]] and c.n_windows == 2


def test_no_surviving_sequence_message_states_the_counts():
    with refuses("src.txt", "T+1=2", "2 candidate stories", "vocab_size=2", "longest document 4 tokens"):
        build_corpus(["a y b x", "x a b"], CorpusConfig(2, 1, sequences="stories"), "src.txt")  # vocab: a, b
    with refuses("src.txt", "one type", "('x')"):
        build_corpus(["x x x"], CorpusConfig(2, 1), "src.txt")
    with refuses("src.txt", "empty", "1 documents"):
        build_corpus([" ", "!"][:1], CorpusConfig(2, 1), "src.txt")


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


def test_bpe_is_trained_to_the_vocabulary_size_and_quietly(capfd):
    docs = generate_stories(StoryConfig(n_stories=40, seed=1))
    c = build_corpus(docs, CorpusConfig(vocab_size=60, seq_len=4, tokenizer="bpe"), "stories")
    assert c.n_types <= 60  # the BPE's own vocabulary: types never exceed it
    assert capfd.readouterr() == ("", "")  # no progress bar drawn


# ---- corpus config


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


@pytest.mark.parametrize(
    "cfg, key, value",
    [
        (CorpusConfig(1, 4), "corpus.vocab_size", 1),
        (CorpusConfig(8, 0), "corpus.seq_len", 0),
        (CorpusConfig(8, 4, max_sequences=-1), "corpus.max_sequences", -1),
        (CorpusConfig(8, 4, min_count=0), "corpus.min_count", 0),
    ],
)
def test_build_corpus_refuses_a_config_outside_its_bounds_under_corpus(cfg, key, value):
    with refuses_key(key, value):
        build_corpus(["a b a b"], cfg, "src.txt")


@pytest.mark.parametrize(
    "cfg, key, value, rule",
    [
        (CorpusConfig(8, 4, tokenizer="char"), "corpus.tokenizer", "'char'", "one of word, bpe"),
        (CorpusConfig(8, 4, sequences="chunks"), "corpus.sequences", "'chunks'", "one of stories, windows"),
        (CorpusConfig(8, 4, story_filter="all"), "corpus.story_filter", "'all'", "one of prefix, whole"),
        (CorpusConfig(8, 4, bpe_specials=True), "corpus.bpe_specials", "'word'", "tokenizer: bpe"),
        # bpe_specials keeps every type: min_count 2 would leave some out
        (CorpusConfig(8, 4, tokenizer="bpe", bpe_specials=True, min_count=2), "corpus.min_count", 2, "min_count: 1"),
        # the 4 specials (<unk> <pad> <s> </s>) and 2 types at least: 5 is one short
        (CorpusConfig(5, 4, tokenizer="bpe", bpe_specials=True), "corpus.vocab_size", 5, ">= 6"),
    ],
)
def test_build_corpus_reports_a_bad_config_under_corpus(cfg, key, value, rule):
    with refuses(key, value, rule) as e:
        build_corpus(["a b a b"], cfg, "src.txt")
    assert_refused([str(e.value)], key)  # the key first


def test_boundary_configs_are_accepted():
    c = build_corpus(["a b a b c"], CorpusConfig(2, 1, max_sequences=0, min_count=1), "src.txt")
    assert c.sequences.tolist() == [[0, 1], [0, 1]]
    stories = build_corpus(["a b a", "b a b b"], CorpusConfig(2, 2, sequences="stories"), "src.txt")
    assert stories.sequences.tolist() == [[1, 0, 1], [0, 1, 0]]  # b 4, a 3: b is id 0


@pytest.mark.parametrize(
    "cfg",
    [
        # min_count above 1 is fine without bpe_specials
        CorpusConfig(2, 1, min_count=2),
        # the other value of each choice: stories, and the whole document's tokens in the vocabulary
        CorpusConfig(2, 1, sequences="stories", story_filter="whole"),
        # bpe_specials at its smallest vocabulary, 4 specials + 2 types, with min_count 1
        CorpusConfig(6, 1, tokenizer="bpe", bpe_specials=True),
    ],
)
def test_edge_configs_validate(cfg):
    assert cfg.validate() is None  # no error


def test_words_params_validation():
    from_dict(WordsParams, {"probes": ["a"], "top_k": 1}, "assoc_words")
    with refuses_key("assoc_words.top_k", 0):
        from_dict(WordsParams, {"probes": ["a"], "top_k": 0}, "assoc_words")
    with refuses("assoc_words.probes", "at least one") as e:
        WordsParams(probes=[]).validate("assoc_words")
    assert_refused([str(e.value)], "assoc_words.probes")


# ---- reading text


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


def test_a_character_cut_off_at_the_end_of_the_file_is_refused(tmp_path):
    path = tmp_path / "cut.txt"
    path.write_bytes("ab é".encode()[:-1])  # the two-byte é loses its last byte
    with refuses(path, "UTF-8", "offset 3)"):
        read_text_documents(path)


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


# ---- embedded stories


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


# ---- the stories widened to a real corpus's shape (profiles/paper_smoke.yaml)


def test_invented_names_are_distinct_capitalised_cv_words_that_spell_no_template_word():
    names = invented_names(70**2 + 10)  # past the two-syllable names, into the three-syllable ones
    assert names[:3] == ["Baba", "Babe", "Babi"] and len(set(names)) == len(names)
    assert {len(n) for n in names} == {4, 6}  # 70**2 minus the skipped words, then three syllables
    assert names.index("Bababa") == 70**2 - 6  # "like", "time", "gave", "made", "mine", "kite" skipped
    assert not {"Like", "Time", "Kite"} & set(names)
    template = Counter(t for s in generate_stories(StoryConfig(n_stories=3000)) for t in word_tokens(s))
    assert not {n.lower() for n in names} & template.keys()


def test_frames_tell_that_many_plots_and_lexicon_names_story_i_hero_i_mod_lexicon():
    one, three = (generate_stories(StoryConfig(n_stories=40, seed=5, frames=k)) for k in (1, 3))
    assert one == generate_stories(StoryConfig(n_stories=40, seed=5, frames=1, lexicon=0))
    ratio = sum(len(word_tokens(s)) for s in three) / sum(len(word_tokens(s)) for s in one)
    assert 2.5 < ratio < 3.5
    named = generate_stories(StoryConfig(n_stories=7, seed=5, frames=2, lexicon=3))
    names = invented_names(3)
    for i, story in enumerate(named):
        counts = Counter(t for t in word_tokens(story) if t.capitalize() in names)
        assert set(counts) == {names[i % 3].lower()} and counts[names[i % 3].lower()] >= 2  # once a frame at least


def test_lexicon_reaches_the_paper_vocabulary_with_201_token_stories():
    stories = generate_stories(StoryConfig(n_stories=3000, frames=3, lexicon=2900))
    corpus = build_corpus(stories, CorpusConfig(3000, 200, sequences="stories", min_count=5), "stories")
    assert len(corpus.vocab) == 3000 and corpus.sequences.shape[1] == 201 and len(corpus.sequences) > 2000


@pytest.mark.parametrize(
    ("cfg", "key", "value"),
    [
        (StoryConfig(n_stories=0), "stories.n_stories", 0),
        (StoryConfig(frames=0), "stories.frames", 0),
        (StoryConfig(lexicon=-1), "stories.lexicon", -1),
        (StoryConfig(lexicon=70**3 + 1), "stories.lexicon", 343001),
    ],
)
def test_story_widening_knobs_are_validated(cfg, key, value):
    # no argument: generate_stories calls it so, and its errors read "stories."
    with refuses_key(key, value):
        cfg.validate()


def test_the_last_valid_story_settings_pass():
    # one story of one frame with natural names only; and every three-syllable name's count of invented
    # names (70 syllables: 70**3), one below the first refused above
    assert StoryConfig(n_stories=1, frames=1, lexicon=0).validate() is None
    assert StoryConfig(lexicon=70**3).validate() is None


# ---- artifact


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


META = {"vocab": ["a", "b"], "tokenizer": "word", "n_documents": 1, "n_tokens": 6, "n_types": 2}


def corpus_file(path, sequences: np.ndarray, **meta) -> None:
    header = {"corpus": json.dumps({**META, "coverage": 1.0, "n_windows": 3, **meta})}
    path.write_bytes(save({"sequences": sequences}, header))


def test_saved_metadata_is_one_json_string_with_sorted_keys(tmp_path):
    c = build_corpus(["b a b a c"], CorpusConfig(2, 1), "src.txt")
    path = tmp_path / "c.safetensors"
    save_corpus(c, path)
    with safe_open(path, framework="np") as f:
        assert f.metadata() == {
            "corpus": '{"coverage": 0.8, "n_documents": 1, "n_tokens": 5, "n_types": 3, "n_windows": 2,'
            ' "tokenizer": "word", "vocab": ["b", "a"]}'  # b=a=2: in the order first seen
        }
        assert f.get_tensor("sequences").tolist() == [[0, 1], [0, 1]]


def test_sequences_are_saved_as_int32_whatever_their_dtype(tmp_path):
    c = Corpus(sequences=np.array([[0, 1, 1], [1, 0, 0]], dtype=np.int64), coverage=1.0, n_windows=2, **META)
    save_corpus(c, tmp_path / "c.safetensors")
    back = load_corpus(tmp_path / "c.safetensors")
    assert back.sequences.dtype == np.int32 and back.sequences.tolist() == [[0, 1, 1], [1, 0, 0]]


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


@pytest.mark.parametrize(
    "sequences, got",
    [
        (np.zeros((2, 1), np.int32), "int32 (2, 1)"),  # T + 1 = 1: no next token
        (np.zeros((2, 3), np.int64), "int64 (2, 3)"),
        (np.zeros(3, np.int32), "int32 (3,)"),
        (np.zeros((2, 3, 1), np.int32), "int32 (2, 3, 1)"),
    ],
)
def test_load_corpus_refuses_sequences_of_the_wrong_shape_or_dtype(tmp_path, sequences, got):
    path = tmp_path / "c.safetensors"
    corpus_file(path, sequences)
    with refuses(path, "sequences", "(N, T+1) int32", f"got {got}"):
        load_corpus(path)


def test_load_corpus_accepts_a_single_id_and_the_last_id(tmp_path):
    path = tmp_path / "c.safetensors"
    corpus_file(path, np.zeros((2, 3), np.int32))  # min == max
    assert load_corpus(path).sequences.tolist() == [[0, 0, 0], [0, 0, 0]]
    corpus_file(path, np.ones((1, 2), np.int32))  # id 1 = the last of two
    assert load_corpus(path).sequences.tolist() == [[1, 1]]
    corpus_file(path, np.full((1, 2), 2, np.int32))
    with refuses(path, "token ids", "vocabulary of 2"):
        load_corpus(path)


# ---- what the association stages take from a built corpus


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

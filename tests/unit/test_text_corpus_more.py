"""The corpus artifact's exact bytes and checks, config errors as build_corpus reports them, and edge cases."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from refusals import assert_refused, refuses
from safetensors import safe_open
from safetensors.numpy import save

from emergence.core.config import from_dict
from emergence.core.io import PipelineError
from emergence.studies.assoc.corpus import (
    Corpus,
    CorpusConfig,
    WordsParams,
    build_corpus,
    load_corpus,
    read_text_documents,
    save_corpus,
    word_tokens,
)
from emergence.studies.assoc.stories import StoryConfig, generate_stories, invented_names

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
    with pytest.raises(PipelineError) as e:
        build_corpus(["a b a b"], cfg, "src.txt")
    assert_refused(str(e.value).splitlines(), key, value)


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


def test_bpe_is_trained_to_the_vocabulary_size_and_quietly(capfd):
    docs = generate_stories(StoryConfig(n_stories=40, seed=1))
    c = build_corpus(docs, CorpusConfig(vocab_size=60, seq_len=4, tokenizer="bpe"), "stories")
    assert c.n_types <= 60  # the BPE's own vocabulary: types never exceed it
    assert capfd.readouterr() == ("", "")  # no progress bar drawn


def test_a_character_cut_off_at_the_end_of_the_file_is_refused(tmp_path):
    path = tmp_path / "cut.txt"
    path.write_bytes("ab é".encode()[:-1])  # the two-byte é loses its last byte
    with refuses(path, "UTF-8", "offset 3)"):
        read_text_documents(path)


def test_words_params_validation():
    from_dict(WordsParams, {"probes": ["a"], "top_k": 1}, "assoc_words")
    with pytest.raises(PipelineError) as e:
        from_dict(WordsParams, {"probes": ["a"], "top_k": 0}, "assoc_words")
    assert_refused(str(e.value).splitlines(), "assoc_words.top_k", 0)
    with refuses("assoc_words.probes", "at least one") as e:
        WordsParams(probes=[]).validate("assoc_words")
    assert_refused([str(e.value)], "assoc_words.probes")


# --- the stories widened to a real corpus's shape (profiles/paper_smoke.yaml) -------------------


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
    with pytest.raises(PipelineError) as e:
        cfg.validate()
    assert_refused(str(e.value).splitlines(), key, value)


def test_the_last_valid_story_settings_pass():
    # one story of one frame with natural names only; and every three-syllable name's count of invented
    # names (70 syllables: 70**3), one below the first refused above
    assert StoryConfig(n_stories=1, frames=1, lexicon=0).validate() is None
    assert StoryConfig(lexicon=70**3).validate() is None

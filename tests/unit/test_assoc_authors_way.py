"""The association study the authors' way (deeplearning-wisc/attn-dynamics-basis), as options: the
basis from the first shuffled batch(es), the whole-story filter, and the report's two bases side by side.
Expected values are worked by hand."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from refusals import refuses, refuses_key

from emergence.core.config import from_dict
from emergence.studies.assoc.compare import cosine, first_batch_rows
from emergence.studies.assoc.compare_params import CompareParams
from emergence.studies.assoc.corpus import CorpusConfig, build_corpus
from emergence.studies.assoc.report import _cosine_section, basis_comparison
from emergence.studies.assoc.theory import compute_basis


def test_the_first_batch_basis_differs_from_the_corpus_basis_by_the_worked_amount():
    # V = 2, T = 1. Sequence a = (0 -> 1), b = (1 -> 1); R = Y - 1/2 = (-1/2, 1/2) for both.
    # B_a = [[-1/2, 1/2], [0, 0]], B_b = [[0, 0], [-1/2, 1/2]], the corpus's B = (B_a + B_b) / 2.
    # <B_a, B> = 2 * (1/4 * 1/2) = 1/4; |B_a| = 1/sqrt(2); |B| = 1/2: cosine 1/sqrt(2), whichever is first.
    seqs = np.array([[0, 1], [1, 1]], dtype=np.int32)
    corpus = compute_basis(seqs, 2)
    rows, q_rows = first_batch_rows(2, 1, CompareParams(basis="first_batch"), seed=42)
    assert len(rows) == 1 and q_rows is rows  # one batch of one sequence; Q from the same
    first = compute_basis(seqs[rows], 2)
    expected_b = np.array([[-0.5, 0.5], [0, 0]]) if rows[0] == 0 else np.array([[0, 0], [-0.5, 0.5]])
    np.testing.assert_allclose(first.B.numpy(), expected_b)
    np.testing.assert_allclose(corpus.B.numpy(), [[-0.25, 0.25], [-0.25, 0.25]])
    assert cosine(first.B, corpus.B) == pytest.approx(1 / math.sqrt(2), abs=1e-12)


def test_q_from_other_sequences_keeps_g_from_the_first():
    rng = np.random.default_rng(0)
    seqs = rng.integers(0, 5, size=(12, 7)).astype(np.int32)
    own, mixed = compute_basis(seqs[:4], 5), compute_basis(seqs[:4], 5, q_sequences=seqs[4:])
    other = compute_basis(seqs[4:], 5)
    assert np.array_equal(mixed.B.numpy(), own.B.numpy()) and np.array_equal(mixed.G.numpy(), own.G.numpy())
    assert not np.allclose(mixed.Q.numpy(), own.Q.numpy())  # Q moved to the other sequences ...
    assert not np.allclose(mixed.Q.numpy(), other.Q.numpy())  # ... but scored with the first batch's G


def test_first_batch_rows_count_batches_and_draw_a_fresh_shuffle_for_q():
    p = CompareParams(basis="first_batch", basis_batches=4, basis_q="fresh")
    rows, q_rows = first_batch_rows(100, 8, p, seed=1)
    assert len(rows) == len(set(rows)) == 32 and len(q_rows) == 32  # 4 batches of 8
    assert set(rows) != set(q_rows)  # a second permutation, as the authors' second iter(dataloader)
    again = first_batch_rows(100, 8, p, seed=1)
    assert np.array_equal(again[0], rows) and np.array_equal(again[1], q_rows)  # seeded
    assert not np.array_equal(first_batch_rows(100, 8, p, seed=2)[0], rows)
    full, full_q = first_batch_rows(10, 10, CompareParams(basis="first_batch"), seed=0)
    assert full.tolist() == list(range(10)) and full_q.tolist() == list(range(10))  # full batch: the corpus
    assert len(first_batch_rows(10, 4, CompareParams(basis_batches=9), seed=0)[0]) == 10  # never past the corpus


def test_compare_params_are_checked():
    with refuses_key("assoc_compare.basis_batches", 0):
        from_dict(CompareParams, {"basis_batches": 0}, "assoc_compare")


DOCS = [
    "a b c d",  # all in the vocabulary, 4 tokens
    "a b c yy",  # its out-of-vocabulary word comes after the first T + 1 = 3 tokens
    "a zz b c",  # out of vocabulary inside the first 3
    "a b",  # shorter than T + 1
    "b c a b c a",
]


def test_the_whole_story_filter_counted_by_hand():
    # vocabulary: a, b, c (each seen >= 2 times); d, yy and zz once each (min_count 2 leaves them out).
    def build(story_filter):
        cfg = CorpusConfig(vocab_size=10, seq_len=2, sequences="stories", min_count=2, story_filter=story_filter)
        return build_corpus(DOCS, cfg, "docs")

    prefix, whole = build("prefix"), build("whole")
    assert prefix.vocab == whole.vocab and sorted(prefix.vocab) == ["a", "b", "c"]
    ids = {t: i for i, t in enumerate(prefix.vocab)}
    enc = lambda s: [ids[t] for t in s.split()]  # noqa: E731
    # prefix: docs 0, 1 and 4 (their first 3 tokens are inside); whole: doc 4 only (0 has d, 1 has yy)
    assert prefix.sequences.tolist() == [enc("a b c"), enc("a b c"), enc("b c a")]
    assert whole.sequences.tolist() == [enc("b c a")]
    assert prefix.n_windows == whole.n_windows == 4  # candidates before either filter: docs 0, 1, 2, 4


def test_the_whole_filter_applies_to_every_window_of_a_document():
    cfg = CorpusConfig(vocab_size=10, seq_len=1, sequences="windows", min_count=2, story_filter="whole")
    corpus = build_corpus(["a b a b zz", "a b a b"], cfg, "docs")
    assert len(corpus.sequences) == 2  # the second document's two windows; none of the first's


def test_tied_counts_keep_the_order_first_seen_as_the_authors_vocabulary_does():
    # the authors' word vocabulary is Counter.most_common (tiny-tokenize-natural.py): most frequent first, equal
    # counts in the order first seen. Here "the" 3 times; dog, saw, a, cat 2 times each, first seen in that order
    # (alphabetically: a, cat, dog, saw); zz once, under min_count 2, so the whole filter drops the third story.
    docs = ["the dog saw a cat", "a cat saw the dog", "zz the"]
    cfg = CorpusConfig(vocab_size=10, seq_len=2, sequences="stories", min_count=2, story_filter="whole")
    corpus = build_corpus(docs, cfg, "docs")
    assert corpus.vocab == ["the", "dog", "saw", "a", "cat"]  # ids 0-4
    assert corpus.sequences.tolist() == [[0, 1, 2], [3, 4, 2]]  # "the dog saw", "a cat saw"


def test_story_filter_is_checked():
    with refuses_key("corpus.story_filter", "'all'"):
        CorpusConfig(vocab_size=10, seq_len=2, story_filter="all").validate()


def frame(basis: str, mins: dict[str, float], n_layers: int = 3) -> pd.DataFrame:
    rows = [
        dict(basis=basis, n_layers=n_layers, seed=0, step=s, layer=-1 if w == "W_O" else 0, weight=w,
             cosine=c if s == 2 else 1.0, epoch=s, in_window=True, corpus_loss=1.0)
        for w, c in mins.items() for s in (1, 2)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_basis_comparison_says_which_basis_has_the_papers_order():
    # the paper's Table 2 (BPE): W_O 0.997891 < V 0.998800 < W 0.999914
    corpus = frame("corpus", {"W": 0.9991, "V": 0.9995, "W_O": 0.9999})  # W_O highest: not the paper's order
    first = frame("first_batch", {"W": 0.9998, "V": 0.9990, "W_O": 0.9980})  # W_O < V < W
    shallow = frame("first_batch", {"W": 0.1, "V": 0.1, "W_O": 0.1}, n_layers=1)  # only the deepest runs count
    t = basis_comparison(corpus, pd.concat([first, shallow]), "bpe")
    assert t["basis"].tolist() == ["corpus", "first_batch", "paper, Table 2"]
    assert t["lowest first"].tolist() == ["W < V < W_O", "W_O < V < W", "W_O < V < W"]
    assert t["paper's order"].tolist()[:2] == ["no", "yes"]
    assert t.loc[1, "W_O"] == pytest.approx(0.998)
    word = basis_comparison(corpus, first, "word")  # no paper numbers: no paper row, no verdict
    assert word["basis"].tolist() == ["corpus", "first_batch"] and "paper's order" not in word


def test_the_page_shows_the_second_basis_only_when_given():
    corpus = frame("corpus", {"W": 0.9991, "V": 0.9995, "W_O": 0.9999, "P": 0.995})
    first = frame("first_batch", {"W": 0.9998, "V": 0.9990, "W_O": 0.9980, "P": 0.993})
    alone, both = _cosine_section(corpus, "bpe"), _cosine_section(corpus, "bpe", first)
    assert "Both bases" not in alone and both.startswith(alone.rsplit("</table>", 1)[0])
    assert "first shuffled batch(es) of the corpus" in both and "W_O &lt; V &lt; W" in both
    para, table = both.split("\n")[-2:]
    assert para == (
        "<p>Both bases. The closed forms above are built from the whole corpus (every training sequence); beside "
        "them, the same runs against the first shuffled batch(es) of the corpus, as the authors&#x27; code computes "
        "them (assoc_compare.basis chooses which one leads; docs/associations.md).</p>"
    )
    caption = "<caption>Minimum cosine of the deepest runs, over layers and seeds, per basis</caption>"
    assert table.startswith("<table>" + caption)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", table)
    assert cells[:4] == ["corpus", "0.999100", "0.999500", "0.999900"]  # six decimals, like table 1
    assert cells[12:16] == ["paper, Table 2", "0.999914", "0.998800", "0.997891"]  # a BPE run: the paper's row


STORIES = ["Tom saw a dog. The dog ran to Tom.", "tom had a red ball. The ball was red.", "A dog and a ball."] * 4


def test_the_authors_bpe_has_their_specials_wraps_every_story_and_keeps_case():
    cfg = CorpusConfig(
        vocab_size=60, seq_len=4, tokenizer="bpe", sequences="stories", lowercase=False, bpe_specials=True
    )
    corpus = build_corpus(STORIES, cfg, "stories")
    assert corpus.vocab[:4] == ["<unk>", "<pad>", "<s>", "</s>"]  # ids 0-3, as the authors' trainer gives them
    assert "Tom" in corpus.vocab and "tom" in corpus.vocab  # case kept
    assert (corpus.sequences[:, 0] == 2).all()  # every sequence starts with <s>
    assert corpus.coverage == 1.0 and len(corpus.vocab) <= 60
    ours = build_corpus(STORIES, CorpusConfig(vocab_size=60, seq_len=4, tokenizer="bpe", sequences="stories"), "s")
    assert "<s>" not in ours.vocab and "Tom" not in ours.vocab  # our BPE: lower-cased, no specials
    # a short story wrapped: <s> + 5 tokens + </s> = 7 ids, of which the first T + 1 = 5
    short = build_corpus(["A dog and a ball."] * 3, cfg, "s")
    ids = {t: i for i, t in enumerate(short.vocab)}
    assert short.sequences[0].tolist() == [ids[t] for t in ("<s>", "A", "dog", "and", "a")]


def test_the_word_tokenizer_keeps_case_when_asked():
    cfg = CorpusConfig(vocab_size=50, seq_len=3, sequences="stories", lowercase=False)
    assert "Tom" in build_corpus(STORIES, cfg, "s").vocab
    assert "Tom" not in build_corpus(STORIES, CorpusConfig(vocab_size=50, seq_len=3, sequences="stories"), "s").vocab


@pytest.mark.parametrize(
    "change, key, value, rule",
    [
        ({"bpe_specials": True}, "corpus.bpe_specials", "'word'", "tokenizer: bpe"),
        ({"tokenizer": "bpe", "bpe_specials": True, "min_count": 5}, "corpus.min_count", 5, "min_count: 1"),
        ({"tokenizer": "bpe", "bpe_specials": True, "vocab_size": 5}, "corpus.vocab_size", 5, ">= 6"),
    ],
)
def test_bpe_specials_are_checked(change, key, value, rule):
    with refuses_key(key, value, rule):
        CorpusConfig(**{"vocab_size": 10, "seq_len": 2, **change}).validate()


def test_checkpoint_steps_come_to_whole_steps():
    from emergence.studies.assoc.compare import checkpoint_steps

    assert checkpoint_steps(0.1, 50, "assoc_train") == 5  # the authors' BPE run: a log every 0.1 epoch
    assert checkpoint_steps(5, 7, "assoc_train") == 35 and checkpoint_steps(0, 7, "assoc_train") == 0
    assert checkpoint_steps(0.2, 5, "assoc_train") == 1  # one step, the least allowed
    with refuses("assoc_train.checkpoint_every_epochs", 0.3, "7 steps", "2.1 steps"):
        checkpoint_steps(0.3, 7, "assoc_train")
    with refuses("assoc_train.checkpoint_every_epochs", "0.5 steps"):
        checkpoint_steps(0.1, 5, "assoc_train")


def test_the_window_counts_every_log_point_when_logs_come_more_often_than_epochs():
    from emergence.studies.assoc.compare import cosine_table

    basis = compute_basis(np.array([[0, 1, 2], [2, 1, 0]], dtype=np.int32), 3)
    model = _zero_model()
    steps = [(s, model) for s in (5, 10, 15, 50, 55)]
    by_epoch = cosine_table(steps, {"corpus": basis}, 0.1, steps_per_epoch=50, window_epochs=2)
    by_log = cosine_table(steps, {"corpus": basis}, 0.1, steps_per_epoch=50, window_epochs=2, log_every=5)
    w_o = lambda t: t[t["weight"] == "W_O"].set_index("step")["in_window"].to_dict()  # noqa: E731
    assert w_o(by_epoch) == {5: False, 10: False, 15: False, 50: True, 55: False}
    assert w_o(by_log) == {5: True, 10: True, 15: True, 50: True, 55: True}
    assert w_o(cosine_table(steps, {"corpus": basis}, 0.1, 50, 2, log_every=100)) == w_o(by_epoch)  # epochs win


def _zero_model():
    from emergence.core.models.registry import build_model

    return build_model("attn_only", dict(n_layers=1, d_vocab=3, n_ctx=2), "m")

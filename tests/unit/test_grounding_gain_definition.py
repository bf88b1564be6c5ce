"""The text grounding gain against values written down by hand, with every mismatch averaged.

G(v) = mean_n mean_{u != v} [ s(v<LAN> | c_n(u<ENV>)) - s(v<LAN> | c_n(v<ENV>)) ]
(gain.py, after Wu et al., arXiv 2510.13796). test_grounding.py checks it with one
mismatch, where averaging over one word or over all cannot differ; here there are three
target words, surprisals that differ from one mismatch to the other, and two contexts of
one word, so the mean over mismatches and the mean over contexts are both pinned down.

The model (tiny_models.LastEnvLookup) predicts from the context's last environment token u
alone: p(v<LAN> | context) = P[u][v] below, a power of 2, so every surprisal is a whole
number of bits (times ln 2 nats) and G can be added up by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from tiny_models import LastEnvLookup

from emergence.studies.grounding.gain import evaluation_pairs, gain_rows, gain_table, word_gains

WORDS = ["ball", "cup", "dog"]
VOCAB = ["<unk>", "<MOT>", "the", "ball<ENV>", "cup<ENV>", "dog<ENV>", "ball<LAN>", "cup<LAN>", "dog<LAN>"]
INDEX = {t: i for i, t in enumerate(VOCAB)}
LN2 = math.log(2.0)

# -log2 P[u][v]: rows u (the last environment token), columns v (the spoken target v<LAN>).
#            v:  ball cup dog
BITS = {
    "ball": [1, 4, 3],  # P = 1/2, 1/16, 1/8
    "cup": [3, 3, 5],  # P = 1/8, 1/8, 1/32
    "dog": [5, 3, 1],  # P = 1/32, 1/8, 1/2
}


def model(index: dict[str, int] = INDEX) -> LastEnvLookup:
    """Row u<ENV>: log P[u][v] at each v<LAN>, the rest of the mass spread evenly over the other tokens
    of `index` (a vocabulary holding every word's two forms)."""
    table = torch.zeros(len(index), len(index), dtype=torch.float64)  # rows of non-env tokens: never read here
    for u, bits in BITS.items():
        p = [2.0**-b for b in bits]
        row = torch.full((len(index),), math.log((1 - sum(p)) / (len(index) - 3)), dtype=torch.float64)
        for v, pv in zip(WORDS, p):
            row[index[f"{v}<LAN>"]] = math.log(pv)
        table[index[f"{u}<ENV>"]] = row
    return LastEnvLookup(table, [index[f"{w}<ENV>"] for w in WORDS])


EVAL_SET = pd.DataFrame(
    {
        "word": ["ball", "ball", "cup", "dog"],
        "context": [
            ["<MOT>", "ball<ENV>", "the"],
            ["<MOT>", "ball<ENV>", "dog<ENV>", "the"],  # dog<ENV> comes last: the swap cannot matter
            ["<MOT>", "cup<ENV>", "the", "the"],
            ["dog<ENV>", "the"],
        ],
        "others": [["cup", "dog"], ["cup", "dog"], ["ball", "dog"], ["ball", "cup"]],  # every u != v
    }
)

# By hand, in bits (s(v | u) = BITS[u][v]); the mismatched context swaps v<ENV> for u<ENV>:
#   context 0 (ball): matched s(ball | ball) = 1; mismatched s(ball | cup) = 3, s(ball | dog) = 5 -> mean 4; gain 3
#   context 1 (ball): the last env token is dog<ENV> whatever the swap: 5, 5 and 5 -> mean 5; gain 0
#   context 2 (cup):  matched s(cup | cup) = 3;   mismatched s(cup | ball) = 4, s(cup | dog) = 3 -> 3.5; gain 0.5
#   context 3 (dog):  matched s(dog | dog) = 1;   mismatched s(dog | ball) = 3, s(dog | cup) = 5 -> 4; gain 3
# One mismatch instead of both would give gains 2, 0, 1, 2 (the first u) or 4, 0, 0, 4 (the last u).
S_MATCHED = [1, 5, 3, 1]
S_MISMATCHED = [4, 5, 3.5, 4]
GAIN = [3, 0, 0.5, 3]
# G(v), the mean over v's contexts: ball (3 + 0) / 2 = 1.5, cup 0.5, dog 3.
G = {"ball": 1.5, "cup": 0.5, "dog": 3.0}


def test_each_context_averages_its_gain_over_every_mismatched_word():
    rows = gain_rows(model(), EVAL_SET, INDEX)
    assert rows["word"].tolist() == EVAL_SET["word"].tolist()
    np.testing.assert_allclose(rows["s_matched"], np.array(S_MATCHED) * LN2, atol=1e-5)
    np.testing.assert_allclose(rows["s_mismatched"], np.array(S_MISMATCHED) * LN2, atol=1e-5)
    np.testing.assert_allclose(rows["gain"], np.array(GAIN) * LN2, atol=1e-5)


def test_word_gain_averages_over_the_words_contexts():
    rows = gain_rows(model(), EVAL_SET, INDEX).assign(model="m", seed=0, step=10)
    words = word_gains(rows).set_index("word")
    assert sorted(words.index) == WORDS
    for word, g in G.items():
        assert words.loc[word, "gain"] == pytest.approx(g * LN2, abs=1e-5)
    # s_matched of ball: (1 + 5) / 2 = 3 bits; s_mismatched: (4 + 5) / 2 = 4.5 bits
    assert words.loc["ball", "s_matched"] == pytest.approx(3 * LN2, abs=1e-5)
    assert words.loc["ball", "s_mismatched"] == pytest.approx(4.5 * LN2, abs=1e-5)


def test_a_sample_of_mismatches_averages_over_that_sample_only():
    # The pipeline draws n_mismatched of the other words per context (tokens.evaluation_set);
    # the gain then averages over the drawn ones. Context 0 with dog only: 5 - 1 = 4 bits,
    # with cup only: 3 - 1 = 2 bits, against 3 bits with both.
    for others, bits in ((["dog"], 4), (["cup"], 2), (["cup", "dog"], 3)):
        one = EVAL_SET.iloc[:1].assign(others=[others])
        assert gain_rows(model(), one, INDEX).loc[0, "gain"] == pytest.approx(bits * LN2, abs=1e-5)


def test_evaluation_pairs_hold_the_matched_context_then_one_per_other_word():
    pairs = evaluation_pairs(EVAL_SET.iloc[:1], INDEX)
    decode = [[VOCAB[i] for i in c] for c in pairs.contexts]
    assert decode == [
        ["<MOT>", "ball<ENV>", "the"],
        ["<MOT>", "cup<ENV>", "the"],
        ["<MOT>", "dog<ENV>", "the"],
    ]
    assert pairs.targets == [INDEX["ball<LAN>"]] * 3
    assert pairs.matched.tolist() == [True, False, False] and pairs.rows.tolist() == [0, 0, 0]


def test_no_evaluation_context_gives_an_empty_gain_table():
    empty = EVAL_SET.iloc[:0]
    table = gain_table(empty, evaluation_pairs(empty, INDEX), np.zeros(0))  # index arrays, even when empty
    assert table.empty and list(table.columns[:4]) == ["context", "word", "s_matched", "s_mismatched"]


def test_gathered_surprisals_equal_the_full_distribution_across_batches():
    # the gathered path (no (N, V) array) must pick the same entries, batch boundaries included
    from emergence.studies.grounding.gain import last_log_probs, target_surprisal

    contexts = [[1, 3, 2], [4], [5, 2], [3, 3, 3, 3], [1], [2, 6], [7, 1, 2]]
    targets = [6, 7, 8, 6, 7, 8, 0]
    full = last_log_probs(model(), contexts, batch_size=3)  # (7, V)
    expected = -full[np.arange(len(contexts)), targets]
    np.testing.assert_allclose(target_surprisal(model(), contexts, targets, batch_size=3), expected, atol=1e-6)
    # by hand: context [1, 3, 2] ends its env tokens at 3 = ball<ENV>, s(ball<LAN> | ball) = 1 bit;
    # [5, 2] at dog<ENV> (5), s(dog<LAN> | dog) = 1 bit; [4] at cup<ENV>, s(cup<LAN> | cup) = 3 bits
    np.testing.assert_allclose(expected[[0, 2, 1]], np.array([1, 1, 3]) * LN2, atol=1e-5)

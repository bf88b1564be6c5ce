"""Study G's surprisals and gain table on a model whose log-probabilities are known: the default batches,
the empty and integer-typed inputs, and contexts left without a mismatched pair."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from emergence.studies.grounding.gain import EvalPairs, gain_table, sign_flip_test, target_surprisal, word_gains

V = 6


class Lookup(torch.nn.Module):
    """Logits at each position from a table of the token there; records each batch's size."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(V, V, generator=torch.Generator().manual_seed(0)))
        self.sizes: list[int] = []

    def forward(self, idx, prefix=None):
        self.sizes.append(idx.shape[0])
        return self.table[idx], None


def by_hand(model: Lookup, contexts, targets) -> np.ndarray:
    log_p = model.table.detach().log_softmax(-1).numpy()
    return np.array([-log_p[c[-1], t] for c, t in zip(contexts, targets)])


def test_surprisal_comes_in_default_batches_of_256():
    model = Lookup()
    contexts = [[1 + i % 5] * (1 + i % 3) for i in range(257)]
    targets = [i % V for i in range(257)]
    got = target_surprisal(model, contexts, targets)
    assert model.sizes == [256, 1]
    np.testing.assert_allclose(got, by_hand(model, contexts, targets), rtol=1e-5)


def test_surprisal_reads_targets_of_any_integer_type():
    model = Lookup()
    contexts, targets = [[1, 2], [3], [4, 5, 0]], np.array([5, 0, 3], dtype=np.int16)
    np.testing.assert_allclose(target_surprisal(model, contexts, targets), by_hand(model, contexts, targets), rtol=1e-5)


def test_no_context_has_no_surprisal():
    model = Lookup()
    got = target_surprisal(model, [], [])
    assert got.shape == (0,) and got.dtype == np.float64 and model.sizes == []


def test_gain_table_of_a_context_left_without_mismatched_pairs():
    """Rows 0 and 1 have mismatched pairs, row 2 (the last) none: its mismatched surprisal stays 0."""
    eval_set = pd.DataFrame({"word": ["a", "b", "c"]})
    pairs = EvalPairs(
        contexts=[[1]] * 6,
        targets=[0] * 6,
        rows=np.array([0, 0, 0, 1, 1, 2]),
        matched=np.array([True, False, False, True, False, True]),
    )
    table = gain_table(eval_set, pairs, np.array([1.0, 3.0, 5.0, 2.0, 4.5, 7.0]))
    expected = pd.DataFrame(
        {
            "context": np.arange(3),
            "word": ["a", "b", "c"],
            "s_matched": [1.0, 2.0, 7.0],
            "s_mismatched": [4.0, 4.5, 0.0],
            "gain": [3.0, 2.5, -7.0],
        }
    )
    pd.testing.assert_frame_equal(table, expected)
    only_matched = EvalPairs([[1]], [0], np.array([0]), np.array([True]))
    table = gain_table(eval_set.iloc[:1], only_matched, np.array([2.0]))
    assert table["s_mismatched"].dtype == np.float64 and table["gain"].tolist() == [-2.0]


@pytest.mark.parametrize("n", [1, 2])
def test_gain_table_rows_follow_the_eval_set(n):
    eval_set = pd.DataFrame({"word": ["x", "y"][:n]})
    pairs = EvalPairs([[1]] * 2 * n, [0] * 2 * n, np.repeat(np.arange(n), 2), np.tile([True, False], n))
    table = gain_table(eval_set, pairs, np.arange(1.0, 2 * n + 1))
    assert table["gain"].tolist() == [1.0] * n and table["s_matched"].tolist() == [1.0, 3.0][:n]


def test_sign_flip_of_float32_differences_is_that_of_their_float64_values():
    """Only the all +1 pattern reaches the mean of positive differences, as a tie: a mean taken in float32
    would round away from the draws' float64 means and lose the tie."""
    d = np.array([0.1, 0.7, 0.2], dtype=np.float32)
    p = sign_flip_test(d, n_perm=800)
    assert p == sign_flip_test(d.astype(np.float64), n_perm=800) and 0.1 < p < 0.2  # about 1 / 8


def test_sign_flip_of_one_difference():
    # one positive difference: the draws with +1 (about half) reach it
    p = sign_flip_test(np.array([2.0]), n_perm=1000)
    assert 0.45 < p < 0.6 and round(p * 1001) == pytest.approx(p * 1001)


def test_word_gains_average_each_words_contexts_per_run():
    rows = pd.DataFrame(
        {
            "model": "m",
            "seed": [0, 0, 0, 1],
            "step": 5,
            "word": ["b", "a", "b", "b"],
            "context": [0, 1, 2, 0],
            "s_matched": [1.0, 2.0, 3.0, 4.0],
            "s_mismatched": [2.0, 2.5, 6.0, 4.0],
            "gain": [1.0, 0.5, 3.0, 0.0],
        }
    )
    expected = pd.DataFrame(
        {
            "model": "m",
            "seed": [0, 0, 1],
            "step": 5,
            "word": ["a", "b", "b"],
            "s_matched": [2.0, 2.0, 4.0],
            "s_mismatched": [2.5, 4.0, 4.0],
            "gain": [0.5, 2.0, 0.0],
        }
    )
    pd.testing.assert_frame_equal(word_gains(rows), expected)
    assert word_gains(rows, keys=("model",))["gain"].tolist() == [0.5, pytest.approx(4 / 3)]

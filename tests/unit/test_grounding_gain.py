"""Study G's surprisals, gain table and word gains on a model whose log-probabilities are known (the
default batches, empty and integer-typed inputs, contexts left without a mismatched pair), and the
one-sided sign-flip p-value at exact values, where the report's tables use it.

Sign-flip definition (gain.sign_flip_test): with |d| the absolute differences and s_j in {-1, +1}^n
drawn uniformly (n_perm draws), p = (1 + #{j : mean(s_j |d|) >= mean(d)}) / (1 + n_perm).
Its expectation is (1 + n_perm q) / (1 + n_perm), q the exact probability over all 2^n sign
patterns, which the tests enumerate; its floor is 1 / (1 + n_perm); ties count (>=).

G itself, against values written down by hand: test_grounding_gain_definition.py."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import torch

from emergence.studies.grounding.gain import EvalPairs, gain_table, sign_flip_test, target_surprisal, word_gains
from emergence.studies.grounding.report import final_table, gain_by_checkpoint
from emergence.studies.grounding.report_mech import ablation_table

# ---- surprisal of the target

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


# ---- gain table and word gains


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


# ---- the sign-flip p-value


def exact_q(d) -> float:
    d = np.asarray(d, float)
    hits = sum(np.mean(np.array(s) * np.abs(d)) >= d.mean() - 1e-12 for s in itertools.product([-1, 1], repeat=len(d)))
    return hits / 2 ** len(d)


@pytest.mark.parametrize(
    "d, q",
    [
        ([3.0, -1.0, 2.0, 0.5, -0.25], None),
        ([1.0, 1.0, 1.0], 1 / 8),  # only all +1 reaches the mean, exactly (a tie)
        ([0.5, -0.4, 0.3, -0.2, 0.1, 0.05], None),
        ([-2.0, 1.0, 0.5, 0.25], None),
    ],
)
def test_p_matches_the_enumerated_distribution(d, q):
    q = exact_q(d) if q is None else q
    assert exact_q(d) == pytest.approx(q)
    n_perm = 200_000
    p = sign_flip_test(np.array(d), n_perm=n_perm, seed=1)
    want = (1 + n_perm * q) / (1 + n_perm)
    assert abs(p - want) < 5 * np.sqrt(q * (1 - q) / n_perm) + 1e-9, (p, want)


def test_enumeration_fixture_values_by_hand():
    # d = (3, -1, 2, 0.5, -0.25): mean 0.85, |d| sums to 6.75; a pattern reaches the mean iff the
    # magnitudes it negates sum to <= (6.75 - 4.25) / 2 = 1.25: {}, {1}, {0.5}, {0.25},
    # {1, 0.25}, {0.5, 0.25}: 6 of 32.
    assert exact_q([3.0, -1.0, 2.0, 0.5, -0.25]) == 6 / 32


@pytest.mark.parametrize("n_perm", [99, 999, 10_000])
def test_p_floor_is_one_over_n_perm_plus_one(n_perm):
    # 30 positive differences: only the all +1 pattern (probability 2^-30) reaches the mean.
    d = np.linspace(0.1, 3.0, 30)
    assert sign_flip_test(d, n_perm=n_perm) == 1 / (n_perm + 1)


def test_p_at_the_top_and_ties():
    assert sign_flip_test(-np.linspace(0.1, 3.0, 30), n_perm=500) == 1.0  # every draw >= a negative mean
    assert sign_flip_test(np.zeros(7), n_perm=500) == 1.0  # every draw ties with mean 0
    assert np.isnan(sign_flip_test(np.array([])))


def test_default_draws_and_seed():
    d = np.array([0.3, -0.1, 0.2, 0.05, -0.4, 0.25])
    p = sign_flip_test(d)
    assert p == sign_flip_test(d, n_perm=10_000, seed=0)
    assert round(p * 10_001) == pytest.approx(p * 10_001, abs=1e-6)  # a count over 10,000 draws, plus one


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


# ---- the p-values the report's tables state


def test_gain_p_value_is_over_words_of_seed_averaged_gains():
    # Word w has gains over 2 seeds x 3 contexts; its G(v) is their mean. 6 words: p is the
    # sign-flip p over those 6 means, not over the 36 rows (more rows give another p).
    rng = np.random.default_rng(0)
    rows = []
    for w in range(6):
        for seed in (0, 1):
            for _ in range(3):
                g = rng.normal(0.3, 1.0)
                rows.append(
                    dict(model="t", seed=seed, step=7, word=f"w{w}", s_matched=1.0, s_mismatched=1.0 + g, gain=g)
                )
    rows = pd.DataFrame(rows)
    per_word = rows.groupby("word")["gain"].mean().to_numpy()
    curve = gain_by_checkpoint(rows)
    assert curve.loc[0, "n_words"] == 6 and curve.loc[0, "G"] == pytest.approx(per_word.mean())
    assert curve.loc[0, "p_value"] == sign_flip_test(per_word)
    assert sign_flip_test(per_word) != sign_flip_test(rows["gain"].to_numpy())


def test_grounded_needs_p_strictly_below_one_percent_and_positive_g():
    curve = pd.DataFrame(
        {
            "model": ["a", "b", "c", "d", "d"],
            "step": [5, 5, 5, 1, 9],
            "G": [0.2, 0.2, 0.0, -0.1, 0.3],
            "p_value": [0.0099, 0.01, 0.001, 0.5, 0.002],
        }
    )
    last = final_table(curve).set_index("model")
    assert last["grounded (G > 0, p < 0.01)"].to_dict() == {"a": "yes", "b": "no", "c": "no", "d": "yes"}
    assert last.loc["d", "step"] == 9


def test_ablation_p_is_intervention_minus_control_over_paired_rows():
    # 5 paired (seed, context) rows with intervention above control by distinct amounts, one
    # pair reversed; one row without control (excluded from the pairs).
    inter = np.array([3.0, 2.5, 2.2, 2.9, 2.1, 9.0])
    ctrl = np.array([2.0, 2.4, 2.5, 2.0, 2.0, np.nan])
    df = pd.DataFrame(
        {
            "model": "t",
            "seed": [0, 0, 0, 1, 1, 1],
            "step": 4,
            "kind": "aggregate",
            "context": [0, 1, 2, 0, 1, 2],
            "original": 2.0,
            "intervention": inter,
            "control": ctrl,
            "n_heads": [2, 2, 2, 3, 3, 3],
            "n_control_heads": 2,
        }
    )
    row = ablation_table(df).iloc[0]
    diffs = inter[:5] - ctrl[:5]
    assert row["p (intervention > control)"] == sign_flip_test(diffs)
    n_perm = 10_000
    want = (1 + n_perm * exact_q(diffs)) / (1 + n_perm)
    assert abs(row["p (intervention > control)"] - want) < 0.02
    assert row["heads (mean)"] == 2.5 and row["intervention"] == pytest.approx(inter.mean())

"""The one-sided sign-flip p-value at exact values.

Definition (gain.sign_flip_test): with |d| the absolute differences and s_j in {-1, +1}^n
drawn uniformly (n_perm draws), p = (1 + #{j : mean(s_j |d|) >= mean(d)}) / (1 + n_perm).
Its expectation is (1 + n_perm q) / (1 + n_perm), q the exact probability over all 2^n sign
patterns, which the tests enumerate; its floor is 1 / (1 + n_perm); ties count (>=)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from emergence.studies.grounding.gain import sign_flip_test
from emergence.studies.grounding.report import final_table, gain_by_checkpoint
from emergence.studies.grounding.report_mech import ablation_table


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

"""Co-occurrence statistics and R^2 against loops and closed forms written here.

The fixtures tell the cases apart: every word's <ENV> and <LAN> counts differ (so a swap
shows), forms repeat inside a turn (token counts differ from turn counts), the turn index
is not 0..n-1 and a held-out turn holds the forms (so dropping the wrong turns shows)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from emergence.studies.grounding.cooc import FEATURES, cooccurrence_stats, r2_table, r_squared

# ---- co-occurrence statistics

# index 10..16; 13 and 16 are held out.
TURNS = pd.DataFrame(
    {
        "tokens": [
            ["<MOT>", "dog<ENV>", "dog<LAN>", "dog<LAN>"],
            ["<MOT>", "dog<ENV>", "dog<ENV>", "dog<ENV>", "cat<LAN>"],
            ["<CHI>", "cat<ENV>", "dog<ENV>"],
            ["<MOT>", "dog<ENV>", "dog<LAN>", "cat<ENV>", "cat<LAN>"],  # held out
            ["<MOT>", "dog<LAN>"],
            ["<MOT>", "cat<ENV>", "cat<LAN>", "cat<ENV>"],
            ["<MOT>", "cat<LAN>", "cat<LAN>", "cat<LAN>", "dog<LAN>"],  # held out
        ]
    },
    index=range(10, 17),
)
HELD_OUT = {13, 16}


def test_pmi_of_a_single_training_turn():
    # Turn 10 alone trains: dog's forms share it, so PMI = log((1 + .5) * 1 / ((1 + .5) * (1 + .5))) = log(2/3).
    s = cooccurrence_stats(TURNS, set(range(11, 17)), ["dog"]).set_index("word")
    assert s.loc["dog", "pmi"] == pytest.approx(np.log(2 / 3))


def test_counts_by_hand():
    # Training turns 10, 11, 12, 14, 15 (5 turns).
    # dog<ENV>: tokens 1 + 3 + 1 = 5 in turns 10, 11, 12; dog<LAN>: 2 + 1 = 3 in turns 10, 14; both: 10.
    # cat<ENV>: 1 + 2 = 3 in turns 12, 15; cat<LAN>: 1 + 1 = 2 in turns 11, 15; both: 15.
    # bird: never.
    s = cooccurrence_stats(TURNS, HELD_OUT, ["dog", "cat", "bird"]).set_index("word")
    cols = ["n_env", "n_lan", "turns_env", "turns_lan", "turns_both"]
    assert s.loc["dog", cols].tolist() == [5, 3, 3, 2, 1]
    assert s.loc["cat", cols].tolist() == [3, 2, 2, 2, 1]
    assert s.loc["bird", cols].tolist() == [0, 0, 0, 0, 0]
    assert s.loc["dog", "log_cooc"] == pytest.approx(np.log(1.5))
    assert s.loc["dog", "pmi"] == pytest.approx(np.log(1.5 * 5 / (3.5 * 2.5)))
    assert s.loc["dog", "p_lan_given_env"] == pytest.approx(1.5 / 4)
    assert s.loc["dog", "log_env"] == pytest.approx(np.log(5.5)) and s.loc["dog", "log_lan"] == pytest.approx(
        np.log(3.5)
    )
    assert s.loc["bird", "pmi"] == pytest.approx(np.log(0.5 * 5 / 0.25))
    assert s.loc["bird", "p_lan_given_env"] == pytest.approx(0.5)


def loop_stats(turns: pd.DataFrame, held_out: set[int], w: str) -> dict:
    kept = [toks for i, toks in turns["tokens"].items() if i not in held_out]
    e, la = w + "<ENV>", w + "<LAN>"
    n = {
        "n_env": sum(t.count(e) for t in kept),
        "n_lan": sum(t.count(la) for t in kept),
        "turns_env": sum(e in t for t in kept),
        "turns_lan": sum(la in t for t in kept),
        "turns_both": sum(e in t and la in t for t in kept),
    }
    both, te, tl, N = n["turns_both"] + 0.5, n["turns_env"] + 0.5, n["turns_lan"] + 0.5, len(kept)
    return {
        **n,
        "log_cooc": np.log(both),
        "pmi": np.log(both / N / ((te / N) * (tl / N))),
        "p_lan_given_env": both / (n["turns_env"] + 1),
        "log_env": np.log(n["n_env"] + 0.5),
        "log_lan": np.log(n["n_lan"] + 0.5),
    }


def test_stats_match_loops_on_random_turns():
    rng = np.random.default_rng(1)
    words = ["a", "b", "c", "d"]
    forms = [w + m for w in words for m in ("<ENV>", "<LAN>")] + ["<MOT>", "x<LAN>"]
    p = rng.dirichlet(np.ones(len(forms)) * 0.5)  # uneven: ENV and LAN rates differ per word
    turns = pd.DataFrame(
        {"tokens": [list(rng.choice(forms, size=rng.integers(1, 7), p=p)) for _ in range(40)]},
        index=rng.permutation(np.arange(100, 140)),
    )
    held = set(rng.choice(turns.index, 9, replace=False).tolist())
    s = cooccurrence_stats(turns, held, words).set_index("word")
    for w in words:
        want = loop_stats(turns, held, w)
        for col, v in want.items():
            assert s.loc[w, col] == pytest.approx(v), (w, col)


# ---- R² of the gains on the statistics


def test_r_squared_against_a_projection_and_the_adjustment_formula():
    rng = np.random.default_rng(2)
    n, k = 11, 3
    X = rng.normal(size=(n, k)) + np.arange(n)[:, None] * [0.3, -0.1, 0.0]  # non-centred columns
    y = X @ [1.0, -2.0, 0.5] + 4.0 + rng.normal(size=n)
    A = np.column_stack([np.ones(n), X])
    resid = y - A @ np.linalg.pinv(A) @ y
    r2 = 1 - (resid @ resid) / ((y - y.mean()) @ (y - y.mean()))
    got, adj = r_squared(y, X)
    assert got == pytest.approx(r2) and adj == pytest.approx(1 - (1 - r2) * (n - 1) / (n - k - 1))
    # one feature: R^2 is the squared correlation (intercept included: a shift changes nothing)
    got1, _ = r_squared(y, X[:, :1] + 100.0)
    assert got1 == pytest.approx(np.corrcoef(y, X[:, 0])[0, 1] ** 2)


def test_r_squared_undefined_cases():
    X = np.arange(4.0)[:, None]
    assert np.isnan(r_squared(np.full(4, 2.0), X)[0])  # constant gains: no variance to explain
    r2, adj = r_squared(np.array([1.0, 3.0, 2.0]), np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]]))
    assert r2 == pytest.approx(1.0) and np.isnan(adj)  # n = k + 1: no degrees of freedom left


def test_r_squared_of_small_gains_and_one_degree_of_freedom():
    # gains in hundredths (a total sum of squares far below 1) still have a fit; n = k + 2 has an adjusted one
    y, X = np.array([0.01, 0.03, 0.02, 0.05]), np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [3.0, 1.0]])
    A = np.column_stack([np.ones(4), X])
    resid = y - A @ np.linalg.pinv(A) @ y
    want = 1 - (resid @ resid) / ((y - y.mean()) @ (y - y.mean()))
    r2, adj = r_squared(y, X)
    assert r2 == pytest.approx(want) and adj == pytest.approx(1 - (1 - want) * 3 / 1)


def test_r2_table_uses_the_named_features_and_only_shared_words():
    rng = np.random.default_rng(3)
    words = list("abcdefgh")
    stats = pd.DataFrame({"word": words, **{f: rng.normal(size=8) for f in FEATURES}})
    gains = pd.DataFrame(
        {
            "model": ["m"] * 8 + ["m"] * 7,
            "seed": [1] * 15,
            "step": [30] * 8 + [5] * 7,
            "word": words + ["a", "b", "c", "d", "e", "f", "zz"],  # zz: not in stats
            "gain": rng.normal(size=15),
        }
    )
    table = r2_table(gains, stats, ["pmi", "log_lan"])
    assert table["step"].tolist() == [5, 30] and table["n_words"].tolist() == [6, 8]
    for step, n in ((5, 6), (30, 8)):
        g = gains[(gains["step"] == step) & gains["word"].isin(words)].merge(stats, on="word")
        want = r_squared(g["gain"].to_numpy(), g[["pmi", "log_lan"]].to_numpy())
        row = table[table["step"] == step].iloc[0]
        assert (row["r2"], row["adj_r2"]) == pytest.approx(want) and len(g) == n

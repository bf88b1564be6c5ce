"""Cosines, windows, the causal projection and association tables of the association study.

Most cases run on one random model, read at several steps. The cosines and leading-order errors are
pinned at values written down by hand: each checkpoint there is a different model whose weights sit at a
known angle and a known distance from the theory's directions, the theory matrices are chosen by hand (not
computed from a corpus), and the transposed theory is checked to give another, also hand-computed, cosine.

Construction: with D the theory direction of a weight, U a unit matrix orthogonal to D
(and to D^T), c the leading-order coefficient at the step, the learned weight is

    c * (a D + b |D| U)   ->   cosine = a / sqrt(a^2 + b^2),   rel_error = sqrt((a - 1)^2 + b^2),
                               norm = c |D| sqrt(a^2 + b^2).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from emergence.core.io import PipelineError
from emergence.core.models.registry import build_model
from emergence.studies.assoc.compare import (
    causal_table,
    corpus_loss,
    cosine,
    cosine_table,
    min_cosine_table,
    order_slopes,
    remove_direction,
    top_associations,
    weight_rows,
)
from emergence.studies.assoc.theory import Basis, compute_basis

# ---- a random model

V, T = 6, 5


@pytest.fixture(scope="module")
def setup():
    corpus = np.random.default_rng(1).integers(0, V, size=(12, T + 1))
    model = build_model("attn_only", dict(n_layers=2, d_vocab=V, n_ctx=T))
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()
    return corpus, model, compute_basis(corpus, V)


# ---- checkpoints built at known angles and distances from the theory's directions

CTX = 3  # context length: P and Delta have CTX entries
ETA = 0.5


def t(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


B = t([[3, 0], [4, 0]])  # |B| = 5
PHI = t([[0, 1], [0, 0]])  # B PHI = [[0, 3], [0, 4]], so (B PHI)^T = [[0, 0], [3, 4]], norm 5
Q = t([[1, 2], [-2, 0]])  # |Q| = 3
DELTA = t([2, -1, 2])  # |Delta| = 3
BASIS = Basis(B=B, Phi=PHI, Sigma_B=B.T @ B, G=(B @ PHI).T @ B, Q=Q, Delta=DELTA)

# Each weight's direction as the docstring of theory.py states it, its norm, and a unit U
# orthogonal to it and to its transpose (checked in test_the_construction_is_what_it_claims).
DIRECTIONS = {
    "W_O": (B, 5.0, t([[0, 0], [0, 1]])),
    "V": (t([[0, 0], [3, 4]]), 5.0, t([[1, 0], [0, 0]])),
    "W": (Q, 3.0, t([[0, 0], [0, 1]])),
    "P": (DELTA, 3.0, t([2, 2, -1]) / 3),
}

# Leading coefficients at eta = 1/2 (theory.py: W_O s eta, V C(s,2) eta^2, W and P
# (3 C(s,4) + 2 C(s,3)) eta^4):
#   s = 3: W_O 3/2, V 3/4, W/P (0 + 2)/16 = 1/8
#   s = 4: W_O 2,   V 6/4, W/P (3 + 8)/16 = 11/16
#   s = 6: W_O 3,   V 15/4, W/P (45 + 40)/16 = 85/16
COEF = {
    3: {"W_O": 1.5, "V": 0.75, "W": 0.125, "P": 0.125},
    4: {"W_O": 2.0, "V": 1.5, "W": 11 / 16, "P": 11 / 16},
    6: {"W_O": 3.0, "V": 3.75, "W": 85 / 16, "P": 85 / 16},
}

# (a, b) per checkpoint, and what they give:
#   s = 3: (1, 0)       cosine 1,                                rel_error 0,                         norm c |D|
#   s = 4: (1, 4/3)     cosine 1 / sqrt(1 + 16/9) = 3/5,         rel_error 4/3,                       norm c |D| 5/3
#   s = 6: (1/2, 6/5)   cosine (1/2) / sqrt(1/4 + 36/25) = 5/13, rel_error sqrt(1/4 + 36/25) = 13/10, norm c |D| 13/10
SHAPE = {3: (1.0, 0.0), 4: (1.0, 4 / 3), 6: (0.5, 1.2)}
# (cosine, rel_error, norm / (c |D|)) per checkpoint, from the table above:
EXPECTED = {3: (1.0, 0.0, 1.0), 4: (3 / 5, 4 / 3, 5 / 3), 6: (5 / 13, 13 / 10, 13 / 10)}


def checkpoint(step: int) -> torch.nn.Module:
    model = build_model("attn_only", dict(n_layers=1, d_vocab=2, n_ctx=CTX, dtype="float64"))
    a, b = SHAPE[step]
    with torch.no_grad():
        for name, (D, norm, U) in DIRECTIONS.items():
            model.weight(name, 0).copy_(COEF[step][name] * (a * D + b * norm * U))
    return model


def test_the_construction_is_what_it_claims():
    for D, norm, U in DIRECTIONS.values():
        assert float(D.norm()) == pytest.approx(norm) and float(U.norm()) == pytest.approx(1.0)
        assert float((D * U).sum()) == 0.0
        if D.dim() == 2:  # a matrix: U is orthogonal to its transpose as well
            assert float((D.T * U).sum()) == 0.0


# ---- cosine


def test_cosine_is_scale_free_and_undefined_at_zero():
    a = torch.randn(4, 4)
    assert cosine(a, 3 * a) == pytest.approx(1.0) and cosine(a, -a) == pytest.approx(-1.0)
    assert np.isnan(cosine(torch.zeros(4, 4), a))


def test_cosine_is_the_frobenius_cosine():
    # <B, B^T> = 3 * 3 = 9 (only entry (0, 0) meets), |B| = |B^T| = 5: 9/25.
    # (A Pearson correlation of the entries would be negative: not this.)
    assert cosine(B, B.T) == pytest.approx(9 / 25, abs=1e-12)
    assert cosine(DELTA, DIRECTIONS["P"][2]) == pytest.approx(0.0, abs=1e-12)
    assert cosine(-3 * Q, Q) == pytest.approx(-1.0, abs=1e-12)


# ---- weight rows: cosine, relative error and norm of each weight


@pytest.mark.parametrize("step", [3, 4, 6])
def test_weight_rows_give_the_built_cosine_and_relative_error(step):
    rows = pd.DataFrame(weight_rows(checkpoint(step), BASIS, step, ETA)).set_index("weight")
    cos, rel, norm = EXPECTED[step]
    for name, (_, d_norm, _) in DIRECTIONS.items():
        assert rows.loc[name, "cosine"] == pytest.approx(cos, abs=1e-12), name
        assert rows.loc[name, "rel_error"] == pytest.approx(rel, abs=1e-12), name
        assert rows.loc[name, "norm"] == pytest.approx(COEF[step][name] * d_norm * norm, abs=1e-12), name
    assert rows.loc["W_O", "layer"] == -1 and (rows.drop(index="W_O")["layer"] == 0).all()


def test_no_relative_error_before_the_theory_predicts_a_weight():
    # at step 0 every leading coefficient is 0: the relative error is undefined (NaN), not |learned| / 0
    rows = pd.DataFrame(weight_rows(checkpoint(3), BASIS, 0, ETA))
    assert rows["rel_error"].isna().all() and (rows["norm"] > 0).all()


def test_the_transposed_theory_gives_another_hand_computed_value():
    # At s = 4 (a = 1, b = 4/3), learned / c = D + (4/3) |D| U, norm (5/3) |D|:
    #   W_O: [[3, 0], [4, 20/3]] (norm 25/3) against B^T = [[3, 4], [0, 0]]: <, > = 9,
    #        cosine 9 / (25/3 * 5) = 27/125; rel_error |[[0, -4], [4, 20/3]]| / 5 = sqrt(688/9) / 5.
    #   V:   [[20/3, 0], [3, 4]] (norm 25/3) against B PHI = [[0, 3], [0, 4]]: <, > = 16,
    #        cosine 16 / (25/3 * 5) = 48/125, where (B PHI)^T gives 3/5.
    #   W:   [[1, 2], [-2, 4]] (norm 5) against Q^T = [[1, -2], [2, 0]]: <, > = 1 - 4 - 4 = -7,
    #        cosine -7 / (5 * 3) = -7/15.
    model = checkpoint(4)
    transposed = Basis(B=B.T, Phi=PHI, Sigma_B=B @ B.T, G=BASIS.G, Q=Q.T, Delta=DELTA)
    rows = pd.DataFrame(weight_rows(model, transposed, 4, ETA)).set_index("weight")
    assert rows.loc["W_O", "cosine"] == pytest.approx(27 / 125, abs=1e-12)
    assert rows.loc["W_O", "rel_error"] == pytest.approx(math.sqrt(688 / 9) / 5, abs=1e-12)
    assert rows.loc["W", "cosine"] == pytest.approx(-7 / 15, abs=1e-12)
    assert cosine(model.weight("V", 0), B @ PHI) == pytest.approx(48 / 125, abs=1e-12)
    right = pd.DataFrame(weight_rows(model, BASIS, 4, ETA)).set_index("weight")
    assert (right.loc[["W_O", "V", "W"], "cosine"] - 3 / 5).abs().max() < 1e-12


# ---- the causal projection


def test_remove_direction_removes_exactly_that_component():
    W, D = torch.randn(5, 5, dtype=torch.float64), torch.randn(5, 5, dtype=torch.float64)
    removed = remove_direction(W, D)
    assert abs(float((removed * D).sum())) < 1e-12
    assert torch.allclose(W - removed, (W * D).sum() / (D * D).sum() * D)  # only along D
    assert torch.allclose(remove_direction(removed, D), removed)
    # a float64 theory direction against float32 weights: the result is a float32 weight
    assert remove_direction(W.float(), D).dtype == torch.float32


def test_causal_table_restores_every_weight(setup):
    corpus, model, basis = setup
    before = {k: v.clone() for k, v in model.state_dict().items()}
    table = causal_table(model, basis, corpus)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert len(table) == 1 + 3 * 2 + 1  # original, (W, V, P) x 2 layers, W_O
    original = table.loc[table["weight"] == "none", "loss"].item()
    assert original == pytest.approx(corpus_loss(model, corpus))
    assert (table.loc[table["weight"] != "none", "loss"] != original).all()


def test_causal_table_gives_each_weights_cosine_before_its_direction_is_removed():
    # the s = 4 checkpoint: every weight sits at cosine 3/5 from its direction (after removal it would be 0)
    corpus = np.random.default_rng(2).integers(0, 2, size=(5, CTX + 1))
    table = causal_table(checkpoint(4), BASIS, corpus)
    removed = table[table["weight"] != "none"].set_index("weight")
    assert sorted(removed.index) == ["P", "V", "W", "W_O"]
    assert (removed["cosine"] - 3 / 5).abs().max() < 1e-12
    assert np.isnan(table.loc[table["weight"] == "none", "cosine"].item())


def test_corpus_loss_is_the_mean_over_every_position_whatever_the_chunks(setup):
    # 12 sequences read 5 at a time (chunks of 5, 5 and 2): every position weighs the same, not every chunk
    corpus, model, _ = setup
    x = torch.from_numpy(corpus[:, :-1]).long()
    y = torch.from_numpy(corpus[:, 1:]).long()
    with torch.no_grad():
        logits, _ = model(x)
        by_hand = -logits.double().log_softmax(-1).gather(-1, y[..., None]).mean().item()
    assert corpus_loss(model, corpus, rows=5) == pytest.approx(by_hand, rel=1e-6)


# ---- cosine table: bases, window and its minimum


def test_window_keeps_epoch_ends_where_the_weight_exists(setup):
    _, model, basis = setup
    table = cosine_table(
        [(s, model) for s in range(0, 9)], {"corpus": basis}, eta=0.1, steps_per_epoch=2, window_epochs=3
    )
    w_o = table[table["weight"] == "W_O"]
    assert w_o.loc[w_o["in_window"], "step"].tolist() == [2, 4, 6]
    w = table[(table["weight"] == "W") & (table["layer"] == 0)]
    assert w.loc[w["in_window"], "step"].tolist() == [4, 6]  # W is zero before step 3
    assert w["epoch"].tolist() == [s / 2 for s in range(9)]  # steps over steps_per_epoch
    table["n_layers"], table["seed"] = 2, 0
    t1 = min_cosine_table(table)
    assert len(t1) == 2 * 3 + 1 and (t1["n_checkpoints"] >= 2).all()


def test_each_row_names_the_basis_it_was_read_against():
    table = cosine_table([(3, checkpoint(3))], {"corpus": BASIS, "twin": BASIS}, ETA, 1, window_epochs=6)
    by_basis = {name: rows.drop(columns="basis").reset_index(drop=True) for name, rows in table.groupby("basis")}
    assert list(by_basis) == ["corpus", "twin"] and len(by_basis["corpus"]) == 4  # P, V, W, W_O
    pd.testing.assert_frame_equal(by_basis["corpus"], by_basis["twin"])


def test_the_window_minimum_is_read_from_distinct_checkpoints():
    # Cosines 1, 3/5, 5/13 at steps 3, 4, 6; every weight is non-zero from step 3 on, so with
    # one step per epoch and a 6-epoch window all three count and the minimum is 5/13 at step 6.
    table = cosine_table(
        [(s, checkpoint(s)) for s in (3, 4, 6)], {"corpus": BASIS}, ETA, steps_per_epoch=1, window_epochs=6
    )
    assert table["in_window"].all() and (table["basis"] == "corpus").all()
    for step, (cos, rel, _) in EXPECTED.items():
        at = table[table["step"] == step]
        assert (at["cosine"] - cos).abs().max() < 1e-12 and (at["rel_error"] - rel).abs().max() < 1e-12
    table["n_layers"], table["seed"] = 1, 0
    t1 = min_cosine_table(table)
    assert sorted(t1["weight"]) == ["P", "V", "W", "W_O"]
    assert (t1["min_cosine"] - 5 / 13).abs().max() < 1e-12
    assert (t1["step_of_min"] == 6).all() and (t1["n_checkpoints"] == 3).all()


# ---- order slopes and top associations


def test_order_slopes_recover_a_power_law():
    rows = [
        {"layer": 0, "weight": "V", "eta": eta, "step": s, "rel_error": 3 * eta * s}
        for eta in (0.1, 0.05, 0.025)
        for s in range(1, 7)
    ]
    slopes = order_slopes(pd.DataFrame(rows))
    assert slopes.loc[0, "slope_vs_eta"] == pytest.approx(1.0) and slopes.loc[0, "slope_vs_steps"] == pytest.approx(1.0)


def test_top_associations_rank_rows_and_name_unknown_probes():
    M = torch.tensor([[0.0, 3.0, 1.0], [2.0, 0.0, 5.0], [1.0, 1.0, 1.0]])
    table = top_associations({"M": M}, ["a", "b", "c"], ["b"], k=2)
    assert table["token"].tolist() == ["c", "a"] and table["rank"].tolist() == [1, 2]
    assert table.to_dict("records")[0] == {"probe": "b", "matrix": "M", "rank": 1, "token": "c", "score": 5.0}
    with pytest.raises(PipelineError, match=r"probes\[1\]: 'zebra'"):
        top_associations({"M": M}, ["a", "b", "c"], ["a", "zebra"], k=2)

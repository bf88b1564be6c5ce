"""Cosines, windows, the causal projection and association tables of the association study."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from emergence.core.io import PipelineError
from emergence.core.models import build_model
from emergence.studies.assoc.compare import (
    causal_table,
    corpus_loss,
    cosine,
    cosine_table,
    min_cosine_table,
    order_slopes,
    remove_direction,
    top_associations,
)
from emergence.studies.assoc.theory import compute_basis

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


def test_cosine_is_scale_free_and_undefined_at_zero():
    a = torch.randn(4, 4)
    assert cosine(a, 3 * a) == pytest.approx(1.0) and cosine(a, -a) == pytest.approx(-1.0)
    assert np.isnan(cosine(torch.zeros(4, 4), a))


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

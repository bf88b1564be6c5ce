"""The association study's params sections: each bound exactly at its edge, each refusal naming its key
and value (the exact words where validate writes them); and the smallest fit order_slopes makes (two
points)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from refusals import assert_refused, refuses

from emergence.core.config import from_dict
from emergence.core.io import PipelineError
from emergence.studies.assoc.compare import min_cosine_table, order_slopes
from emergence.studies.assoc.compare_params import AssocRuns, AssocTrainParams, CausalParams, CompareParams, OrderParams


def refusal(params) -> list[str]:
    """The one problem line of a hand-built section `sec`."""
    with refuses("sec.") as e:
        params.validate("sec")
    return [str(e.value)]


def refused(cls: type, values: dict) -> list[str]:
    """The problem lines of section `sec` holding `values`, loaded as a stage loads it."""
    with pytest.raises(PipelineError) as e:
        from_dict(cls, values, "sec")
    return str(e.value).splitlines()


def test_runs_bounds_and_messages():
    AssocRuns(layers=[1], seeds=[0]).validate("sec")
    assert_refused(refusal(AssocRuns(layers=[], seeds=[0])), "sec.layers", [])
    assert_refused(refusal(AssocRuns(layers=[2, 0], seeds=[0])), "sec.layers", [2, 0])
    assert_refused(refusal(AssocRuns(layers=[1], seeds=[])), "sec.seeds", [])


def test_compare_and_causal_bounds_and_messages():
    from_dict(CompareParams, dict(window_epochs=1, basis_batches=1), "sec")
    assert_refused(refused(CompareParams, dict(window_epochs=0)), "sec.window_epochs", 0)
    assert_refused(refused(CompareParams, dict(basis_batches=0)), "sec.basis_batches", 0)
    from_dict(CausalParams, dict(n_sequences=0), "sec")
    assert_refused(refused(CausalParams, dict(n_sequences=-1)), "sec.n_sequences", -1)


def test_order_params_bounds_and_messages():
    from_dict(OrderParams, dict(n_layers=1, etas=[0.5, 1.5], steps=4, n_sequences=1), "sec")
    assert_refused(refusal(OrderParams(etas=[0.1])), "sec.etas", [0.1])
    assert_refused(refusal(OrderParams(etas=[0.1, 0.0])), "sec.etas", [0.1, 0.0])
    assert_refused(refused(OrderParams, dict(steps=3)), "sec.steps", 3)  # W and P need 4 steps for a slope
    assert_refused(refused(OrderParams, dict(n_layers=0)), "sec.n_layers", 0)
    assert_refused(refused(OrderParams, dict(n_sequences=0)), "sec.n_sequences", 0)


def test_train_params_bounds_and_messages():
    edge = dict(lr=0.5, epochs=1, batch_size=0, dense_until=0, n_log_checkpoints=0, checkpoint_every_epochs=0)
    from_dict(AssocTrainParams, edge, "sec")
    from_dict(AssocTrainParams, {**edge, "on_nonfinite": "continue"}, "sec")
    assert_refused(refused(AssocTrainParams, {**edge, "on_nonfinite": "skip"}), "sec.on_nonfinite", "skip")
    assert_refused(refused(AssocTrainParams, {**edge, "lr": 0.0}), "sec.lr", 0.0)
    assert_refused(refused(AssocTrainParams, {**edge, "epochs": 0}), "sec.epochs", 0)
    for key in ("batch_size", "dense_until", "n_log_checkpoints", "checkpoint_every_epochs"):
        assert_refused(refused(AssocTrainParams, {**edge, key: -1}), f"sec.{key}", -1)
    # a checkpoint interval must be finite; -inf is refused too, not only as below 0
    for value in (math.inf, -math.inf, math.nan):
        lines = refused(AssocTrainParams, {**edge, "checkpoint_every_epochs": value})
        assert_refused(lines, "sec.checkpoint_every_epochs", value)


def test_two_points_give_their_exact_slope():
    # W from step 3: the smallest eta's fit starts at step 4, so steps 4 and 8 (error x 2**1.5), one eta.
    rows = [
        dict(layer=0, weight="W", eta=0.1, step=s, rel_error=e) for s, e in [(3, 1e-12), (4, 0.5), (8, 0.5 * 2**1.5)]
    ]
    rows += [dict(layer=0, weight="W", eta=0.4, step=8, rel_error=0.5 * 2**1.5 * 4**0.5)]
    slopes = order_slopes(pd.DataFrame(rows))
    assert slopes.loc[0, "slope_vs_steps"] == pytest.approx(1.5, rel=1e-12)
    assert slopes.loc[0, "slope_vs_eta"] == pytest.approx(0.5, rel=1e-12)


def test_min_cosine_table_by_hand():
    # Two runs; rows shuffled; a lower cosine outside the window (step 9) is ignored.
    rows = [
        (2, 0, 0, "V", 2, 0.7, True),
        (1, 5, -1, "W_O", 1, 0.9, True),
        (1, 5, -1, "W_O", 2, 0.8, True),
        (1, 5, -1, "W_O", 9, 0.1, False),
        (1, 0, 0, "W", 3, 0.6, True),
        (1, 0, 0, "W", 4, 0.65, True),
        (1, 0, -1, "W_O", 4, 0.95, True),
    ]
    cols = ["n_layers", "seed", "layer", "weight", "step", "cosine", "in_window"]
    got = min_cosine_table(pd.DataFrame(rows, columns=cols))
    expected = pd.DataFrame(
        [
            (1, 0, -1, "W_O", 0.95, 4, 1),
            (1, 0, 0, "W", 0.6, 3, 2),
            (1, 5, -1, "W_O", 0.8, 2, 2),
            (2, 0, 0, "V", 0.7, 2, 1),
        ],
        columns=["n_layers", "seed", "layer", "weight", "min_cosine", "step_of_min", "n_checkpoints"],
    )
    pd.testing.assert_frame_equal(got, expected)

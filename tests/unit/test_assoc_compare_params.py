"""The association study's params sections: each bound exactly at its edge, each refusal's exact words;
and the smallest fit order_slopes makes (two points)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from emergence.core.io import PipelineError
from emergence.studies.assoc.compare import (
    AssocRuns,
    AssocTrainParams,
    CausalParams,
    CompareParams,
    OrderParams,
    min_cosine_table,
    order_slopes,
)


def refusal(params) -> str:
    with pytest.raises(PipelineError) as e:
        params.validate("sec")
    return str(e.value)


def test_runs_bounds_and_messages():
    AssocRuns(layers=[1], seeds=[0]).validate("sec")
    assert refusal(AssocRuns(layers=[], seeds=[0])) == "sec.layers: a non-empty list of positive layer counts, got []"
    assert refusal(AssocRuns(layers=[2, 0], seeds=[0])) == (
        "sec.layers: a non-empty list of positive layer counts, got [2, 0]"
    )
    assert refusal(AssocRuns(layers=[1], seeds=[])) == "sec.seeds: at least one seed, got []"


def test_compare_and_causal_bounds_and_messages():
    CompareParams(window_epochs=1, basis_batches=1).validate("sec")
    assert refusal(CompareParams(window_epochs=0)) == "sec.window_epochs: must be >= 1, got 0"
    assert refusal(CompareParams(basis_batches=0)) == "sec.basis_batches: must be >= 1, got 0"
    CausalParams(n_sequences=0).validate("sec")
    assert refusal(CausalParams(n_sequences=-1)) == "sec.n_sequences: must be >= 0, got -1"


def test_order_params_bounds_and_messages():
    OrderParams(n_layers=1, etas=[0.5, 1.5], steps=4, n_sequences=1).validate("sec")
    assert refusal(OrderParams(etas=[0.1])) == "sec.etas: at least two positive learning rates, got [0.1]"
    assert refusal(OrderParams(etas=[0.1, 0.0])) == "sec.etas: at least two positive learning rates, got [0.1, 0.0]"
    assert refusal(OrderParams(steps=3)) == "sec.steps: W and P need >= 4 steps for a slope, got 3"
    assert refusal(OrderParams(n_layers=0)) == "sec.n_layers: must be >= 1, got 0"
    assert refusal(OrderParams(n_sequences=0)) == "sec.n_sequences: must be >= 1, got 0"


def test_train_params_bounds_and_messages():
    edge = dict(lr=0.5, epochs=1, batch_size=0, dense_until=0, n_log_checkpoints=0, checkpoint_every_epochs=0)
    AssocTrainParams(**edge).validate("sec")
    AssocTrainParams(**edge, on_nonfinite="continue").validate("sec")
    assert refusal(AssocTrainParams(**edge, on_nonfinite="skip")) == (
        "sec.on_nonfinite: must be stop or continue, got 'skip'"
    )
    assert refusal(AssocTrainParams(**{**edge, "lr": 0.0})) == "sec.lr: must be > 0, got 0.0"
    assert refusal(AssocTrainParams(**{**edge, "epochs": 0})) == "sec.epochs: must be >= 1, got 0"
    for key in ("batch_size", "dense_until", "n_log_checkpoints", "checkpoint_every_epochs"):
        assert refusal(AssocTrainParams(**{**edge, key: -1})) == f"sec.{key}: must be >= 0, got -1"
    # a checkpoint interval must be finite; -inf is caught here too, before the check of >= 0
    for value, shown in [(math.inf, "inf"), (-math.inf, "-inf"), (math.nan, "nan")]:
        assert refusal(AssocTrainParams(**{**edge, "checkpoint_every_epochs": value})) == (
            f"sec.checkpoint_every_epochs: must be a finite number, got {shown}"
        )


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

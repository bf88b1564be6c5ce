"""What interp/llc.estimate hands devinterp's sampler: the settings under their own names, the rows as
the dataset, the initial-loss batch count, the device the model is on, a private output folder, and a
loss read in eval mode. The sampler is replaced by a spy that stops the call, so no chain runs; then
what estimate makes of a given devinterp result: the table, and the line naming a chain that diverged."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import devinterp.slt.llc
import devinterp.slt.sampling
import numpy as np
import pandas as pd
import pytest
import torch
from refusals import refuses

from emergence.interp.llc import estimate
from emergence.interp.llc_params import LLCParams


class Stopped(Exception):
    """Raised by the spy once it has seen the call."""


@pytest.fixture
def seen(monkeypatch) -> dict:
    got: dict = {}

    def spy(model, dataset, observables, **kwargs):
        got.update(model=model, dataset=dataset, observables=observables, **kwargs)
        got["folder_there"] = Path(kwargs["output_path"]).parent.is_dir()  # while the call runs
        raise Stopped

    monkeypatch.setattr(devinterp.slt.sampling, "sample", spy)  # estimate imports it at call time
    return got


def loss(model: torch.nn.Module, rows: torch.Tensor) -> torch.Tensor:
    return model(rows.float()).sum(-1)  # (N,)


# distinct values, so a setting passed under another's name shows
P = LLCParams(num_chains=3, num_draws=7, lr=2e-4, n_beta=30.0, localization=50.0, batch_size=16, n_sequences=64)


@pytest.mark.parametrize(
    "n_rows, init_batches",
    [
        (40, 2),  # 40 // 16 whole batches
        (16, 1),  # one whole batch (fewer rows than that are refused: the sampler would stop on an empty batch)
        (200, 8),  # 12 whole batches, capped at 8
    ],
)
def test_the_sampler_gets_each_setting_under_its_name(seen, n_rows, init_batches):
    model = torch.nn.Linear(4, 2)
    rows = torch.arange(n_rows * 4).reshape(n_rows, 4)
    with pytest.raises(Stopped):
        estimate(model, rows, loss, P, seed=11)
    assert seen["model"] is model and seen["observables"] == {}
    assert torch.equal(torch.stack(list(seen["dataset"]["input_ids"])), rows)  # one row per sequence
    want = dict(lr=2e-4, n_beta=30.0, num_chains=3, num_draws=7, batch_size=16, localization=50.0, init_seed=11)
    assert {k: seen[k] for k in want} == want
    assert seen["num_init_loss_batches"] == init_batches
    assert seen["device"] == "cpu"  # None would let devinterp pick cuda when there is one: the model is on cpu
    assert seen["folder_there"] and not Path(seen["output_path"]).parent.exists()  # removed after the call


def test_a_model_off_the_cpu_leaves_the_device_to_the_sampler(seen):
    model = torch.nn.Linear(4, 2, device="meta")  # a device that is not cpu, on a machine without a GPU
    with pytest.raises(Stopped):
        estimate(model, torch.zeros(20, 4, dtype=torch.long), loss, P, seed=0)
    assert seen["device"] is None


def test_the_sampler_reads_the_loss_in_eval_mode(seen):
    """devinterp sets train mode for its chains; the loss it is given switches back before reading."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.9))
    rows = torch.ones(20, 4, dtype=torch.long)
    with pytest.raises(Stopped):
        estimate(model, rows, loss, P, seed=0)
    model.train()
    got = seen["loss_fn"](model, rows)
    assert not model.training
    torch.testing.assert_close(got, loss(model, rows))  # in eval mode the dropout is off: the same twice


class Result:
    """What devinterp's compute_llc returns, as far as estimate reads it: xarray-like fields with .values."""

    def __init__(self, trace, per_chain, init):
        self.loss_trace = SimpleNamespace(values=np.asarray(trace, dtype=float))
        self.llc_per_chain = SimpleNamespace(values=np.asarray(per_chain))
        self.init_loss = init


@pytest.fixture
def result(monkeypatch) -> dict:
    """The sampler returns at once; compute_llc returns whatever the test puts in box["result"]."""
    box: dict = {}
    monkeypatch.setattr(devinterp.slt.sampling, "sample", lambda **kwargs: "samples")
    monkeypatch.setattr(devinterp.slt.llc, "compute_llc", lambda samples: box["result"])
    return box


def test_the_table_is_one_row_per_chain_with_its_drift_and_the_initial_loss(result):
    # 3 chains of 8 draws: drift = n_beta * (mean of the last 2 - mean of the 2 before)
    trace = np.array([[5.0] * 8, [1, 1, 1, 1, 2, 2, 4, 4], [9, 9, 9, 9, 3, 3, 1, 1]])
    result["result"] = Result(trace, np.array([7, 8, 9]), 0.25)  # ints: the table holds floats
    table = estimate(torch.nn.Linear(4, 2), torch.zeros(20, 4, dtype=torch.long), loss, P, seed=0)
    want = pd.DataFrame(
        {"chain": [0, 1, 2], "llc": [7.0, 8.0, 9.0], "drift": [0.0, 30.0 * 2, 30.0 * -2], "init_loss": 0.25}
    )
    pd.testing.assert_frame_equal(table, want, check_index_type=False, check_column_type=False)


def test_a_chain_whose_llc_is_not_finite_with_a_finite_loss_is_named_at_its_draws(result):
    """A loss that turned nan names its SGLD step (test_llc.py runs one); an inf LLC from finite losses
    has no step to name."""
    result["result"] = Result(np.ones((2, 4)), np.array([1.0, np.inf]), 1.0)
    with refuses("chain 1", "its draws", "llc.lr", "llc.localization") as e:  # no SGLD step to name; what to change
        estimate(torch.nn.Linear(4, 2), torch.zeros(20, 4, dtype=torch.long), loss, P, seed=0)
    assert str(e.value).startswith("llc: ") and "SGLD step" not in str(e.value)

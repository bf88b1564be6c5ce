"""The LLC estimator (interp/llc.py over devinterp): stable across chains, larger at a trained point
than at a degenerate one, the same per seed, a diverged chain named, the packed loss by hand."""

from __future__ import annotations

import dataclasses
import math
import sys

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from refusals import assert_refused, refuses, refuses_key

from emergence.core.config import from_dict
from emergence.core.io import PipelineError
from emergence.core.models.registry import build_model
from emergence.core.rules import field_problems
from emergence.interp.llc import (
    drift,
    estimate,
    every_kth,
    largest_rise,
    llc_curve,
    llc_table,
    next_token,
    packed,
    unsettled_note,
)
from emergence.interp.llc_params import LLCParams, LLCSeeds

V, T = 8, 12
P = LLCParams(num_chains=3, num_draws=60, lr=1e-3, n_beta=50.0, localization=100.0, batch_size=16, n_sequences=128)


def windows(n: int = 256, seed: int = 0) -> torch.Tensor:
    """Sequences counting up mod V from a random start: next token = this + 1 (learnable in a few steps)."""
    start = torch.randint(V, (n, 1), generator=torch.Generator().manual_seed(seed))
    return (start + torch.arange(T)) % V  # (n, T)


def train(data: torch.Tensor) -> torch.nn.Module:
    torch.manual_seed(0)
    model = build_model("transformer", dict(n_layers=1, d_model=16, n_heads=2, d_head=8, d_mlp=32, n_ctx=T, d_vocab=V))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):
        loss = F.cross_entropy(model(data[:, :-1])[0].reshape(-1, V), data[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05  # a minimum of its task
    return model.eval()


@pytest.fixture(scope="module")
def trained() -> torch.nn.Module:
    return train(windows())


def llc_of(model: torch.nn.Module, seed: int = 0, p: LLCParams = P):
    rows, loss_fn = next_token(windows(128, seed=1))
    return estimate(model, rows, loss_fn, p, seed)


def test_chains_agree_within_a_stated_spread(trained):
    table = llc_of(trained)
    assert len(table) == P.num_chains and (table["llc"] > 0).all()
    assert table["llc"].std() / table["llc"].mean() < 0.25  # the spread over chains docs/llc.md states
    assert table["init_loss"].nunique() == 1 and table["init_loss"].iloc[0] < 0.05
    assert abs(table["drift"].mean()) <= 0.1 * table["llc"].mean()  # levelled off (measured -0.69 against 8.9)


def test_a_trained_point_has_a_larger_llc_than_a_degenerate_one(trained):
    """The same architecture at a degenerate minimum: trained to predict one token always, a function
    most weights can move around without changing."""
    constant = torch.zeros(256, T, dtype=torch.long)
    degenerate = train(constant)
    on_its_task = estimate(degenerate, *next_token(constant[:128]), P, 0)["llc"]
    assert llc_of(trained)["llc"].mean() > 10 * on_its_task.mean()


def test_the_same_seed_gives_the_same_numbers_and_another_seed_others(trained):
    a, b, c = llc_of(trained, 3), llc_of(trained, 3), llc_of(trained, 4)
    assert a.equals(b)
    assert not a["llc"].equals(c["llc"])


def test_a_diverging_chain_is_named_with_its_step_and_checkpoint(trained):
    wild = LLCParams(num_chains=2, num_draws=30, lr=1e6, n_beta=1e6, localization=0.0, batch_size=16, n_sequences=64)
    rows, loss_fn = next_token(windows(64))
    with refuses("chain 0", "SGLD step 2", "checkpoint step 7", "llc.lr", "llc.localization") as e:
        llc_table([(7, trained)], rows, loss_fn, wild, 0)
    assert str(e.value).startswith("llc: ")


@pytest.mark.parametrize("seeds", [[], [0], [2, 0, 1]])
def test_the_llc_seeds_are_any_distinct_seeds(seeds):
    assert from_dict(LLCSeeds, {"seeds": seeds}, "binding_llc").seeds == seeds


def test_an_llc_seed_listed_twice_is_refused_naming_the_seeds():
    with refuses_key("binding_llc.seeds", [0, 1, 0]):
        from_dict(LLCSeeds, {"seeds": [0, 1, 0]}, "binding_llc")


def test_a_batch_larger_than_the_sequences_there_are_is_refused(trained):
    """The sampler draws whole batches: fewer sequences than one batch would stop it on an empty one."""
    rows, loss_fn = next_token(windows(8, seed=1))
    with refuses("llc.batch_size", "16", "only 8"):
        estimate(trained, rows, loss_fn, P, 0)
    with refuses("llc.batch_size", "n_sequences"):
        from_dict(LLCParams, {"batch_size": 64, "n_sequences": 32}, "llc")


def test_the_chains_read_the_loss_without_dropout(trained):
    """devinterp puts the model in train mode for its chains; a checkpoint trained with dropout is still
    measured on its deterministic loss. With a step too small to move the weights, on rows that all hold
    one sequence, every draw's loss is the initial loss: LLC 0 (with dropout on, the draws scatter)."""
    model = build_model(
        "transformer", dict(n_layers=1, d_model=16, n_heads=2, d_head=8, d_mlp=32, n_ctx=T, d_vocab=V, dropout=0.5)
    )
    model.load_state_dict(trained.state_dict())
    still = dataclasses.replace(P, lr=1e-12, num_draws=10, num_chains=2, n_sequences=64)
    rows, loss_fn = next_token(windows(1, seed=1).expand(64, -1).contiguous())
    table = estimate(model, rows, loss_fn, still, 0)
    assert table["llc"].abs().max() < 1e-3, table


def test_packed_rows_give_the_mean_loss_over_each_rows_targets():
    torch.manual_seed(1)
    model = build_model("transformer", dict(n_layers=1, d_model=16, n_heads=2, d_head=8, d_mlp=32, n_ctx=T, d_vocab=V))
    idx = windows(4)
    targets = torch.full_like(idx, -1)
    targets[0, [2, 5]] = torch.tensor([1, 4])
    targets[1, [0, 7]] = torch.tensor([0, 3])  # token 0 is a target like any other
    targets[2, 6] = 2  # a single target: its loss, not half of it; row 3: no target at all
    rows, loss_fn = packed(idx, targets, ignore=-1)
    assert rows.shape == (4, 2 * T)
    got = loss_fn(model, rows)
    assert got.shape == (4, 2 * T - 1)
    logp = torch.log_softmax(model(idx)[0], -1)
    row0 = -(logp[0, 2, 1] + logp[0, 5, 4]) / 2
    torch.testing.assert_close(got[0], row0.expand(2 * T - 1))
    torch.testing.assert_close(got[1], (-(logp[1, 0, 0] + logp[1, 7, 3]) / 2).expand(2 * T - 1))
    torch.testing.assert_close(got[2], (-logp[2, 6, 2]).expand(2 * T - 1))
    assert (got[3] == 0).all()


def test_every_kth_keeps_the_first_and_the_last():
    assert every_kth(list(range(7)), 3) == [0, 3, 6]
    assert every_kth(list(range(8)), 3) == [0, 3, 6, 7]
    assert every_kth(list(range(4)), 1) == [0, 1, 2, 3]


INT_KEYS = ("num_chains", "num_draws", "batch_size", "n_sequences", "every")


@pytest.mark.parametrize(
    "values, key, value",
    [
        # each integer key by its own name: 0 is the first value below 1
        *[({key: 0}, f"llc.{key}", 0) for key in INT_KEYS],
        # one chain is an integer >= 1 but gives no spread over chains
        ({"num_chains": 1}, "llc.num_chains", 1),
        # lr and n_beta are open at 0 and must be finite (from_dict makes the floats)
        *[({key: 0}, f"llc.{key}", 0.0) for key in ("lr", "n_beta")],
        *[({key: -1e-4}, f"llc.{key}", -1e-4) for key in ("lr", "n_beta")],
        *[({key: math.inf}, f"llc.{key}", math.inf) for key in ("lr", "n_beta")],
        *[({key: math.nan}, f"llc.{key}", math.nan) for key in ("lr", "n_beta")],
        # no pull at all (0) is allowed, a push away is not
        ({"localization": -1}, "llc.localization", -1.0),
    ],
)
def test_bad_settings_are_one_line(values, key, value):
    with pytest.raises(PipelineError) as e:
        from_dict(LLCParams, values, "llc")
    lines = str(e.value).splitlines()
    assert len(lines) == 1
    assert_refused(lines, key, value)


def test_the_last_valid_settings_pass_as_given():
    # one below each of these fails above: 2 chains, 1 of everything else, the smallest positive float
    # for lr and n_beta, no localization
    tiny = math.ulp(0.0)
    values = dict(num_chains=2, num_draws=1, batch_size=1, n_sequences=1, every=1, lr=tiny, n_beta=tiny, localization=0)
    assert from_dict(LLCParams, values, "llc") == LLCParams(**{**values, "localization": 0.0})  # as given
    # the largest finite float is still a step size and a temperature
    big = sys.float_info.max
    assert from_dict(LLCParams, {"lr": big, "n_beta": big}, "llc") == LLCParams(lr=big, n_beta=big)


@pytest.mark.parametrize(
    "key, value",
    [
        # a bool is an int to Python, but True chains is no setting
        *[(key, True) for key in INT_KEYS],
        *[(key, 2.0) for key in INT_KEYS],
        *[(key, True) for key in ("lr", "n_beta")],
        *[(key, None) for key in ("lr", "n_beta")],
        ("localization", True),
        ("localization", None),
    ],
)
def test_settings_of_the_wrong_type_built_in_code_are_named(key, value):
    # from_dict stops these types before the bounds; the declared bounds alone still name them in an
    # LLCParams built in code (core/rules.py)
    problems = field_problems(dataclasses.replace(LLCParams(), **{key: value}), "llc")
    assert_refused(problems, f"llc.{key}", str(value))


def test_drift_is_the_last_quarter_against_the_one_before_in_llc_units():
    trace = np.array([[1, 1, 1, 1, 2, 2, 3, 3], [5] * 8, [4, 4, 4, 4, 4, 4, 3, 3], [0, 0, 0, 0, 0, 1, 0, 1]], float)
    np.testing.assert_allclose(drift(trace, 10.0), [10.0, 0.0, -10.0, 0.0])  # [-2q:-q] then [-q:]
    np.testing.assert_allclose(drift(trace[:, ::2], 10.0), [10.0, 0.0, -10.0, 0.0])  # 4 draws: q = 1
    odd = np.array([[9.0, 0.0, 0.0, 1.0, 2.0]])  # 5 draws: q = 1, so the draw before the last against it
    np.testing.assert_allclose(drift(odd, 10.0), [10.0])  # the first draws never enter (9 would)
    short = drift(trace[:, :3], 10.0)  # 4 chains, 3 draws: one nan per chain, not per draw
    assert short.shape == (4,) and np.isnan(short).all()  # fewer than 4 draws: no quarter to compare


def test_the_note_counts_checkpoints_whose_chains_had_not_levelled_off():
    table = pd.DataFrame(
        dict(step=[0, 0, 5, 5, 9, 9], chain=[0, 1] * 3, llc=[2.0, 2.0, -1.0, -1.0, 0.0, 0.0],
             drift=[0.2, 0.2, 0.1, 0.3, 0.0, 0.0], init_loss=1.0)
    )  # fmt: skip
    curve = llc_curve(table, [])
    assert curve["drift"].tolist() == pytest.approx([0.2, 0.2, 0.0])
    # step 0: 0.2 <= 10 % of 2 (on the boundary); step 5: 0.2 > 10 % of |-1|; step 9: 0 <= 0
    assert unsettled_note(curve).startswith("At 1 of 3 checkpoints the chains' loss had not levelled off")
    assert unsettled_note(curve[curve["step"] != 5]).startswith("At every checkpoint the chains' loss had levelled")
    assert unsettled_note(curve.assign(drift=np.nan)).startswith("At 3 of 3")  # unknown is not settled


def test_the_curve_is_the_mean_and_sample_spread_over_each_checkpoints_chains():
    table = pd.DataFrame(
        dict(run=["a"] * 3 + ["b"] * 3 + ["a"] * 2, step=[5] * 6 + [9] * 2, chain=[0, 1, 2] * 2 + [0, 1],
             llc=[1.0, 2.0, 6.0, 3.0, 3.0, 3.0, -1.0, 1.0], drift=[0.0, 0.3, 0.0, 0.1, 0.1, 0.1, 0.0, 0.0],
             init_loss=1.0)
    )  # fmt: skip
    curve = llc_curve(table, ["run"]).set_index(["run", "step"])
    for (run, step), g in table.groupby(["run", "step"]):
        values = g["llc"].tolist()
        mean = sum(values) / len(values)
        sd = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
        got = curve.loc[(run, step)]
        assert (got["llc"], got["llc_sd"], got["n_chains"]) == (pytest.approx(mean), pytest.approx(sd), len(values))
    assert curve.loc[("a", 5), "llc"] == pytest.approx(3.0)  # the chains' mean (their median is 2)
    assert curve.loc[("a", 5), "drift"] == pytest.approx(0.1)


def test_the_rows_a_table_draws_from_follow_its_seed_not_the_global_generator(monkeypatch):
    """llc_table keeps n_sequences of the rows, a subset drawn by its own seed: the same seed draws the same
    rows whatever state torch's global generator is in, another seed other rows. Each checkpoint gets them."""
    import emergence.interp.llc as llc

    drawn = []

    def fake_estimate(model, rows, loss_fn, p, seed):
        drawn.append(rows)
        n = float(len(drawn))  # each call's numbers differ; columns in another order than the table's
        return pd.DataFrame({"init_loss": [n, n], "drift": [-n, n], "llc": [10 * n, 20 * n], "chain": [0, 1]})

    monkeypatch.setattr(llc, "estimate", fake_estimate)
    rows = torch.arange(40).unsqueeze(1).expand(40, 3)  # row i holds i: rows are told apart by value
    p = dataclasses.replace(P, n_sequences=10)
    subsets = []
    for global_seed, seed in [(1, 5), (2, 5), (1, 6)]:
        torch.manual_seed(global_seed)
        table = llc_table([(3, None), (9, None)], rows, None, p, seed)
        n = len(drawn) - 1.0  # the first checkpoint's call
        want = {"step": [3, 3, 9, 9], "chain": [0, 1, 0, 1], "llc": [10 * n, 20 * n, 10 * n + 10, 20 * n + 20]}
        want |= {"drift": [-n, n, -n - 1, n + 1], "init_loss": [n, n, n + 1, n + 1]}
        pd.testing.assert_frame_equal(table, pd.DataFrame(want))  # one row per chain and checkpoint, index 0..3
        first, second = drawn[-2:]
        assert torch.equal(first, second) and first.shape == (10, 3)
        assert first[:, 0].unique().numel() == 10  # 10 distinct rows of the 40
        subsets.append(first[:, 0].tolist())
    assert subsets[0] == subsets[1]  # same seed, other global state
    assert subsets[0] != subsets[2]  # another seed


def test_the_largest_rise_between_consecutive_checkpoints():
    def curve(points: dict[int, float]) -> pd.DataFrame:
        return pd.DataFrame({"step": list(points), "llc": list(points.values())})

    assert largest_rise(curve({10: 1.0})) is None
    assert largest_rise(curve({10: 1.0, 0: 3.0})) == (0, 10)  # two checkpoints, unsorted: a fall is the largest
    # 0 -> 10 rises 1, 10 -> 100 rises 2, 100 -> 1000 falls: (10, 100), not a gap between non-neighbours
    assert largest_rise(curve({1000: 0.5, 0: 1.0, 100: 4.0, 10: 2.0})) == (10, 100)

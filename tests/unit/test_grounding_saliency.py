"""Study G's saliency shares on hand-built saliency tensors: the environment edges, the prediction's other
edges and the gather edges carry known amounts, so a wrong position set, normalisation, head / layer or
checkpoint pick shows; the heads found from the shares and their summary, value by value."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from refusals import refuses, refuses_key

from emergence.core.config import from_dict
from emergence.studies.grounding import saliency
from emergence.studies.grounding.saliency import (
    SALIENCY_COLUMNS,
    find_heads,
    head_summary,
    rise_over_init,
    saliency_rows,
    saliency_shares,
    saliency_table,
)
from emergence.studies.grounding.saliency_params import HeadParams

# ---- checkpoints whose saliency is known

L, H = 2, 2
CONTEXTS = [[1, 2, 3, 4, 5], [6, 7, 8]]  # padded to T = 5, predictions at 4 and 2
TARGETS = [9, 10]
ENV_POS = [[0, 2], [1]]


class Checkpoint(torch.nn.Module):
    """Stands in for a model: its parameter gives the device, `k` which saliency the fake returns."""

    def __init__(self, k: int, device: str = "cpu"):
        super().__init__()
        self.k = k
        self.w = torch.nn.Parameter(torch.zeros(1, device=device))


@pytest.fixture
def calls(monkeypatch) -> list[dict]:
    """head_saliency replaced by seeded integer saliencies (L, B, H, T, T), signed, causal (j <= i) and zero
    in the rows after each prediction, as the real one; every call's inputs and output are kept."""
    seen: list[dict] = []

    def fake(model, idx, pred, targets, prefix=None):
        B, T = idx.shape
        T += 0 if prefix is None else prefix.shape[1]
        g = torch.Generator().manual_seed(1000 * model.k + int(idx.sum()))
        S = torch.randint(-9, 10, (L, B, H, T, T), generator=g).float().to(idx.device)
        S = S * torch.ones(T, T, device=idx.device).tril()
        S = S * (torch.arange(T, device=idx.device)[None, :] <= pred[:, None])[None, :, None, :, None]
        seen.append({"model": model, "idx": idx, "pred": pred, "targets": targets, "prefix": prefix, "S": S})
        return S

    monkeypatch.setattr(saliency, "head_saliency", fake)
    return seen


def by_definition(S: torch.Tensor, b: int, p: int, env: list[int]) -> dict[str, np.ndarray]:
    """The module docstring's shares of context b, edge by edge, from its saliency S (L, B, H, T, T)."""
    S = S[:, b].numpy()
    T = S.shape[-1]
    agg, gather = np.zeros((L, H)), np.zeros((L, H))
    env_to_pred, other_to_pred = np.zeros(L), np.zeros(L)
    for layer in range(L):
        for h in range(H):
            a = np.abs(S[layer, h])
            agg[layer, h] = sum(a[p, j] for j in env) / a.sum()
            gather[layer, h] = sum(a[i, j] for i in env for j in range(i)) / a.sum()
        flow = np.abs(S[layer].sum(0))
        env_to_pred[layer] = sum(flow[p, j] for j in env) / flow.sum()
        other_to_pred[layer] = sum(flow[p, j] for j in range(T) if j not in env) / flow.sum()
    return {"aggregate_share": agg, "gather_share": gather, "env_to_pred": env_to_pred, "other_to_pred": other_to_pred}


# ---- shares of one batch


def test_shares_of_a_hand_built_saliency(monkeypatch):
    """One context [1 2 3 4], v<ENV> at 1, one layer, two heads; head 0 carries 6 on the edge v<ENV> -> p,
    1 on each other edge into p (3 in all), 4 on the gather edge 1 <- 0, 5 on the diagonal 1 <- 1 (not a
    gather edge: j < i) and 1 on each of the 4 remaining causal edges: total 22. Head 1 is twice head 0
    except -3 on v<ENV> -> p: |S| total 35; the layer flow |S_0 + S_1| is 3 on v<ENV> -> p, 3 on each other
    edge: total 51."""
    S0 = torch.zeros(4, 4)
    S0[3, 1], S0[3, 0], S0[3, 2], S0[3, 3] = 6, 1, 1, 1
    S0[1, 0], S0[1, 1] = 4, 5
    S0[0, 0], S0[2, 0], S0[2, 1], S0[2, 2] = 1, 1, 1, 1
    S1 = 2 * S0
    S1[3, 1] = -3
    S = torch.stack([S0, S1])[None, None]  # (L=1, B=1, H=2, T, T)
    got_args = {}

    def fake(model, idx, pred, targets):
        got_args.update(idx=idx.tolist(), pred=pred.tolist(), targets=targets.tolist())
        return S

    monkeypatch.setattr(saliency, "head_saliency", fake)
    shares = saliency_shares(Checkpoint(0), [[1, 2, 3, 4]], [7], [[1]])
    assert got_args == {"idx": [[1, 2, 3, 4]], "pred": [3], "targets": [7]}
    torch.testing.assert_close(shares["aggregate_share"], torch.tensor([[[6 / 22, 3 / 35]]]))
    torch.testing.assert_close(shares["gather_share"], torch.tensor([[[4 / 22, 8 / 35]]]))
    torch.testing.assert_close(shares["env_to_pred"], torch.tensor([[3 / 51]]))
    torch.testing.assert_close(shares["other_to_pred"], torch.tensor([[9 / 51]]))


def test_a_head_with_no_saliency_has_zero_shares(monkeypatch):
    """A head (and a layer) whose saliency is all zero: shares 0, not 0/0."""
    S = torch.zeros(1, 1, 2, 3, 3)
    S[0, 0, 1, 2, 0] = 2.0  # head 1: all on v<ENV> (position 0) -> p; head 0: nothing
    monkeypatch.setattr(saliency, "head_saliency", lambda model, idx, pred, targets: S)
    shares = saliency_shares(Checkpoint(0), [[1, 2, 3]], [4], [[0]])
    assert shares["aggregate_share"].tolist() == [[[0.0, 1.0]]]
    assert shares["gather_share"].tolist() == [[[0.0, 0.0]]]
    assert shares["env_to_pred"].tolist() == [[1.0]] and shares["other_to_pred"].tolist() == [[0.0]]


def test_batch_shares_follow_the_definition_context_by_context(calls):
    shares = saliency_shares(Checkpoint(3), CONTEXTS, TARGETS, ENV_POS)
    (call,) = calls
    assert call["pred"].tolist() == [4, 2] and call["targets"].tolist() == TARGETS
    assert call["idx"].tolist() == [[1, 2, 3, 4, 5], [6, 7, 8, 0, 0]]
    for b, (context, env) in enumerate(zip(CONTEXTS, ENV_POS)):
        for metric, value in by_definition(call["S"], b, len(context) - 1, env).items():
            np.testing.assert_allclose(shares[metric][b].numpy(), value, rtol=1e-6, err_msg=metric)


def test_prefix_positions_come_first_and_count_as_environment(calls):
    prefixes = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)  # (B, P=3, d)
    shares = saliency_shares(Checkpoint(1), CONTEXTS, TARGETS, ENV_POS, prefixes)
    (call,) = calls
    assert torch.equal(call["prefix"], prefixes) and call["pred"].tolist() == [7, 5]
    for b, (context, env) in enumerate(zip(CONTEXTS, ENV_POS)):
        expected = by_definition(call["S"], b, 3 + len(context) - 1, [0, 1, 2] + [3 + j for j in env])
        for metric, value in expected.items():
            np.testing.assert_allclose(shares[metric][b].numpy(), value, rtol=1e-6, err_msg=metric)


def test_shares_stay_on_the_models_device(monkeypatch):
    """Every tensor built inside saliency_shares goes to the model's device (here "meta": a tensor left on the
    CPU either reaches head_saliency there or fails to combine with the saliency)."""
    seen = {}

    def fake(model, idx, pred, targets, prefix=None):
        seen.update(idx=idx.device, pred=pred.device, targets=targets.device, prefix=prefix.device)
        return torch.ones(L, idx.shape[0], H, idx.shape[1] + prefix.shape[1], idx.shape[1] + prefix.shape[1]).to(
            idx.device
        )

    monkeypatch.setattr(saliency, "head_saliency", fake)
    shares = saliency_shares(Checkpoint(0, "meta"), CONTEXTS, TARGETS, ENV_POS, torch.zeros(2, 3, 4))
    meta = torch.device("meta")
    assert seen == {"idx": meta, "pred": meta, "targets": meta, "prefix": meta}
    assert {k: (v.device, tuple(v.shape)) for k, v in shares.items()} == {
        "aggregate_share": (meta, (2, L, H)),
        "gather_share": (meta, (2, L, H)),
        "env_to_pred": (meta, (2, L)),
        "other_to_pred": (meta, (2, L)),
    }


# ---- rows over batches, and the table over checkpoints


def expected_rows(calls_of_model: list[dict], contexts, env_pos, n_prefix: int = 0) -> dict:
    """(layer, head, metric) -> the mean share over the contexts, from the fake's saliencies by definition."""
    per_context = []
    for call in calls_of_model:
        for b in range(call["idx"].shape[0]):
            n = len(per_context)
            env = list(range(n_prefix)) + [n_prefix + j for j in env_pos[n]]
            per_context.append(by_definition(call["S"], b, n_prefix + len(contexts[n]) - 1, env))
    out = {}
    for metric in per_context[0]:
        mean = np.mean([s[metric] for s in per_context], axis=0)
        if mean.ndim == 2:
            out |= {(layer, head, metric): mean[layer, head] for layer in range(L) for head in range(H)}
        else:
            out |= {(layer, -1, metric): mean[layer] for layer in range(L)}
    return out


def test_rows_average_the_contexts_over_batches(calls):
    contexts, targets, env_pos = CONTEXTS + [[3, 1]], TARGETS + [4], ENV_POS + [[0]]
    rows = saliency_rows(Checkpoint(2), contexts, targets, env_pos, batch_size=2)
    assert [c["idx"].shape[0] for c in calls] == [2, 1]
    assert list(rows.columns) == ["layer", "head", "metric", "value"]
    expected = expected_rows(calls, contexts, env_pos)
    keys = [(r.layer, r.head, r.metric) for r in rows.itertuples()]
    assert keys == [  # head metrics by layer and head, then the layer rows (head -1)
        *[(layer, head, m) for m in ("aggregate_share", "gather_share") for layer in range(L) for head in range(H)],
        *[(layer, -1, m) for m in ("env_to_pred", "other_to_pred") for layer in range(L)],
    ]
    np.testing.assert_allclose(rows["value"], [expected[k] for k in keys], rtol=1e-6)


def test_rows_with_prefixes_slice_them_with_their_batch(calls):
    prefixes = torch.arange(3 * 2 * 2, dtype=torch.float32).reshape(3, 2, 2)
    contexts, targets, env_pos = CONTEXTS + [[3, 1]], TARGETS + [4], ENV_POS + [[0]]
    rows = saliency_rows(Checkpoint(2), contexts, targets, env_pos, batch_size=2, prefixes=prefixes)
    assert torch.equal(calls[0]["prefix"], prefixes[:2]) and torch.equal(calls[1]["prefix"], prefixes[2:])
    expected = expected_rows(calls, contexts, env_pos, n_prefix=2)
    np.testing.assert_allclose(rows["value"], [expected[(r.layer, r.head, r.metric)] for r in rows.itertuples()])


def test_default_batches_hold_64_contexts(calls):
    contexts = [[1 + i % 7, 2] for i in range(65)]
    saliency_rows(Checkpoint(0), contexts, [3] * 65, [[0]] * 65)
    assert [c["idx"].shape[0] for c in calls] == [64, 1]
    calls.clear()
    saliency_table([(0, Checkpoint(0))], contexts, [3] * 65, [[0]] * 65)
    assert [c["idx"].shape[0] for c in calls] == [64, 1]


def test_table_keeps_each_checkpoints_own_rows(calls):
    table = saliency_table([(0, Checkpoint(0)), (7, Checkpoint(1))], CONTEXTS, TARGETS, ENV_POS, 1)
    assert list(table.columns) == list(SALIENCY_COLUMNS)
    assert table.index.equals(pd.RangeIndex(2 * (2 * L * H + 2 * L)))
    assert table["step"].tolist() == [0] * 12 + [7] * 12
    for step, k in ((0, 0), (7, 1)):
        expected = expected_rows([c for c in calls if c["model"].k == k], CONTEXTS, ENV_POS)
        part = table[table["step"] == step]
        np.testing.assert_allclose(part["value"], [expected[(r.layer, r.head, r.metric)] for r in part.itertuples()])
    # the two checkpoints' saliencies differ, so a step picking the other's rows would show
    assert not np.allclose(table["value"][:12], table["value"][12:])


# ---- rise over init


def test_rise_over_init_matches_rows_by_key_in_any_order():
    table = pd.DataFrame(
        {
            "seed": [0, 0, 1, 0, 1, 2],
            "step": [5, 0, 0, 9, 5, 5],
            "layer": 0,
            "head": 1,
            "metric": "aggregate_share",
            "value": [0.65, 0.5, 0.2, 0.9, 0.6, 0.7],
        },
        index=[10, 3, 7, 1, 4, 2],
    )
    rise = rise_over_init(table)
    assert rise.index.tolist() == [10, 3, 7, 1, 4, 2]
    # seed 0: (0.65 - 0.5) / 0.5, 0, (0.9 - 0.5) / 0.5; seed 1: 0, (0.6 - 0.2) / 0.8; seed 2: no step 0
    np.testing.assert_allclose(rise.to_numpy(), [0.3, 0.0, 0.0, 0.8, 0.5, np.nan])
    # the rise of a filtered table lines up with its rows, not with positions
    found = find_heads(table, 0.4, "init")
    assert found[["seed", "step", "share"]].values.tolist() == [[0, 9, 0.9], [1, 5, 0.6]]


def test_rise_over_init_of_a_share_already_at_one():
    """s0 = 1 leaves no room: the rise is 0 where the share stays 1 (at step 0 too), not 0/0."""
    table = pd.DataFrame({"step": [0, 5], "layer": 0, "head": 0, "metric": "gather_share", "value": [1.0, 1.0]})
    assert rise_over_init(table).tolist() == [0.0, 0.0]


def test_rise_over_init_needs_step_0():
    table = pd.DataFrame({"step": [5], "layer": 0, "head": 0, "metric": "gather_share", "value": [0.5]})
    with refuses("saliency: ", "step-0"):
        rise_over_init(table)


# ---- heads found and their summary

SAL = pd.DataFrame(
    {
        "model": "t",
        "seed": [1, 1, 1, 1, 1, 0, 0, 0],
        "step": 10,
        "layer": [1, 0, 0, 1, 1, 1, 0, 0],
        "head": [0, 1, 0, 1, -1, 1, 0, 0],
        "metric": [
            "aggregate_share", "aggregate_share", "gather_share", "gather_share", "env_to_pred",
            "aggregate_share", "aggregate_share", "gather_share",
        ],
        "value": [0.8, 0.3, 0.5, 0.29, 0.9, 0.31, 0.3000001, 0.2],
    },
    index=[5, 6, 7, 8, 9, 10, 11, 12],
)  # fmt: skip


def test_find_heads_lists_every_kind_in_order():
    heads = find_heads(SAL, 0.3)
    expected = pd.DataFrame(
        {
            "model": "t",
            "seed": [0, 0, 1, 1, 1],
            "step": 10,
            "layer": [0, 1, 0, 1, 0],
            "head": [0, 1, 1, 0, 0],
            "kind": ["aggregate", "aggregate", "aggregate", "aggregate", "gather"],
            "share": [0.3000001, 0.31, 0.3, 0.8, 0.5],
        }
    )
    pd.testing.assert_frame_equal(heads, expected)
    # exactly at the threshold counts; the layer row (head -1) is never a head
    assert find_heads(SAL, 0.5)[["seed", "layer", "head", "kind"]].values.tolist() == [
        [1, 1, 0, "aggregate"],
        [1, 0, 0, "gather"],
    ]
    assert find_heads(SAL, 0.95).empty


def test_find_heads_by_baseline():
    table = pd.DataFrame(
        {
            "step": [0, 0, 5, 5],
            "layer": 0,
            "head": [0, 1, 0, 1],
            "metric": "aggregate_share",
            "value": [0.6, 0.0, 0.7, 0.4],
        }
    )
    # by the share: both step-0 heads' 0.6 and both step-5 heads; by the rise: (0.7 - 0.6) / 0.4 = 0.25 no,
    # (0.4 - 0) / 1 = 0.4 yes
    assert find_heads(table, 0.35)[["step", "head"]].values.tolist() == [[0, 0], [5, 0], [5, 1]]
    assert find_heads(table, 0.35, "none")[["step", "head"]].values.tolist() == [[0, 0], [5, 0], [5, 1]]
    assert find_heads(table, 0.35, "init")[["step", "head", "share"]].values.tolist() == [[5, 1, 0.4]]
    with refuses("baseline", "'first'", "('none', 'init')", error=ValueError):
        find_heads(table, 0.35, "first")


def test_head_summary_counts_and_mean_layers():
    heads = find_heads(SAL, 0.3)
    summary = head_summary(heads)
    expected = pd.DataFrame(
        {
            "model": "t",
            "seed": [0, 1, 1],
            "step": 10,
            "kind": ["aggregate", "aggregate", "gather"],
            "count": [2, 2, 1],
            "mean_layer": [0.5, 0.5, 0.0],
        }
    )
    pd.testing.assert_frame_equal(summary, expected)
    by_seedless = head_summary(heads, keys=("model",))
    assert by_seedless.values.tolist() == [["t", "aggregate", 4, 0.5], ["t", "gather", 1, 0.0]]


# ---- head params


@pytest.mark.parametrize("threshold", [0.3, 1.0, 1e-9])
def test_head_params_accept_shares_in_the_half_open_unit_interval(threshold):
    p = from_dict(HeadParams, {"threshold": threshold, "image_baseline": "none"}, "heads")
    assert p.threshold == threshold and p.baseline("image") == "none" and p.baseline("text") == "none"
    assert from_dict(HeadParams, {"image_baseline": "init"}, "heads").baseline("image") == "init"


@pytest.mark.parametrize("threshold", [0.0, -0.1, 1.5, 1.0000001])
def test_head_params_refuse_other_thresholds(threshold):
    with refuses_key("heads.threshold", threshold):
        from_dict(HeadParams, {"threshold": threshold}, "heads")


def test_head_params_refuse_an_unknown_baseline():
    with refuses_key("heads.image_baseline", "first"):
        from_dict(HeadParams, {"image_baseline": "first"}, "heads")


def test_head_summary_mean_layer_is_the_mean_not_the_middle():
    heads = pd.DataFrame(
        {"model": "t", "seed": 0, "step": 5, "layer": [0, 0, 3], "head": [0, 1, 2], "kind": "aggregate", "share": 0.5}
    )
    summary = head_summary(heads)
    assert summary[["count", "mean_layer"]].values.tolist() == [[3, 1.0]]  # (0 + 0 + 3) / 3; the median is 0

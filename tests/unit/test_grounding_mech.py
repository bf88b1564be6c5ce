"""Study G's mechanistic analyses on tiny models: saliency shares, heads, ablation, co-occurrence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from refusals import refuses
from tiny_models import no_hooks

from emergence.core.io import PipelineError
from emergence.core.models.registry import build_model
from emergence.interp.ablation import ablation_hook
from emergence.interp.saliency import head_saliency
from emergence.studies.grounding.ablation import ablation_rows, control_heads
from emergence.studies.grounding.cooc import cooccurrence_stats, r2_table, r_squared
from emergence.studies.grounding.gain import target_surprisal
from emergence.studies.grounding.inputs import spread_checkpoints
from emergence.studies.grounding.report_mech import ablation_table, heads_table
from emergence.studies.grounding.saliency import find_heads, head_summary, saliency_rows, saliency_shares
from emergence.studies.grounding.tokens import model_entry

pytestmark = pytest.mark.usefixtures("one_thread")

L, H, V = 2, 3, 9
CONTEXTS = [[1, 2, 3, 4, 5], [2, 6, 1], [7, 2, 3, 8, 1, 4, 6]]
TARGETS = [5, 3, 2]
ENV_POS = [[1, 3], [1], [0]]


def tiny() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(
        "transformer", dict(n_layers=L, d_model=24, n_heads=H, d_head=8, d_mlp=32, n_ctx=8, d_vocab=V)
    ).eval()


def shares_by_loops(model, context, target, env_pos) -> dict[str, np.ndarray]:
    """The definitions, edge by edge, for one unpadded context."""
    idx = torch.tensor([context])
    S = head_saliency(model, idx, torch.tensor([len(context) - 1]), torch.tensor([target]))[:, 0].abs().numpy()
    flow = np.abs(
        head_saliency(model, idx, torch.tensor([len(context) - 1]), torch.tensor([target]))[:, 0].sum(1).numpy()
    )  # (L, T, T)
    p, T = len(context) - 1, len(context)
    agg, gather = np.zeros((L, H)), np.zeros((L, H))
    for layer in range(L):
        for h in range(H):
            total = S[layer, h].sum()
            agg[layer, h] = sum(S[layer, h, p, j] for j in env_pos) / total
            gather[layer, h] = sum(S[layer, h, i, j] for i in env_pos for j in range(i)) / total
    env_to_pred = np.array([sum(flow[l_, p, j] for j in env_pos) / flow[l_].sum() for l_ in range(L)])
    other = np.array([sum(flow[l_, p, j] for j in range(T) if j not in env_pos) / flow[l_].sum() for l_ in range(L)])
    return {"aggregate_share": agg, "gather_share": gather, "env_to_pred": env_to_pred, "other_to_pred": other}


def test_saliency_shares_match_the_edge_by_edge_definitions_in_a_padded_batch():
    model = tiny()
    batch = saliency_shares(model, CONTEXTS, TARGETS, ENV_POS)
    for b, (c, t, e) in enumerate(zip(CONTEXTS, TARGETS, ENV_POS)):
        expected = shares_by_loops(model, c, t, e)
        for metric, value in expected.items():
            np.testing.assert_allclose(batch[metric][b].numpy(), value, rtol=1e-4, atol=1e-6, err_msg=metric)
    assert no_hooks(model)


def test_saliency_rows_average_contexts_and_mark_layer_rows():
    model = tiny()
    rows = saliency_rows(model, CONTEXTS, TARGETS, ENV_POS, batch_size=2)
    assert len(rows) == 2 * L * H + 2 * L
    assert set(rows.loc[rows["head"] == -1, "metric"]) == {"env_to_pred", "other_to_pred"}
    one = saliency_shares(model, CONTEXTS, TARGETS, ENV_POS)["aggregate_share"].mean(0)
    got = rows[rows["metric"] == "aggregate_share"].sort_values(["layer", "head"])["value"].to_numpy()
    np.testing.assert_allclose(got, one.flatten().numpy(), rtol=1e-5)
    assert rows["value"].between(0, 1).all()


def test_heads_pass_the_threshold_by_kind():
    sal = pd.DataFrame(
        {
            "model": "t",
            "seed": 0,
            "step": 10,
            "layer": [0, 0, 1, 1, 1],
            "head": [0, 1, 0, 1, -1],
            "metric": ["aggregate_share", "aggregate_share", "aggregate_share", "gather_share", "env_to_pred"],
            "value": [0.29, 0.30, 0.8, 0.5, 0.9],
        }
    )
    heads = find_heads(sal, 0.3)
    assert heads[["layer", "head", "kind"]].values.tolist() == [
        [0, 1, "aggregate"],
        [1, 0, "aggregate"],
        [1, 1, "gather"],
    ]
    summary = head_summary(heads).set_index("kind")
    assert summary.loc["aggregate", "count"] == 2 and summary.loc["aggregate", "mean_layer"] == 0.5


def test_control_heads_match_layer_counts_and_avoid_the_chosen():
    rng = np.random.default_rng(0)
    chosen = [(0, 1), (2, 0), (2, 2)]
    for _ in range(20):
        drawn = control_heads(chosen, 4, rng)
        assert sorted(layer for layer, _ in drawn) == [0, 2, 2]
        assert not set(drawn) & set(chosen)
    assert control_heads([(1, 0), (1, 1)], 3, rng) == [(1, 2)]  # only one other head in the layer


def test_ablation_zeroes_exactly_the_chosen_heads():
    model = tiny()
    heads = [(0, 1), (1, 2)]
    rows = ablation_rows(model, CONTEXTS, TARGETS, heads, n_draws=3, seed=0)
    np.testing.assert_allclose(rows["original"], target_surprisal(model, CONTEXTS, TARGETS), rtol=1e-6)
    with model.hooks([ablation_hook(0, [1], "zero", None), ablation_hook(1, [2], "zero", None)]):
        by_hand = target_surprisal(model, CONTEXTS, TARGETS)
    np.testing.assert_allclose(rows["intervention"], by_hand, rtol=1e-6)
    assert not np.allclose(rows["intervention"], rows["original"])
    assert (rows["n_heads"] == 2).all() and (rows["n_control_heads"] == 2).all()
    assert no_hooks(model)
    none = ablation_rows(model, CONTEXTS, TARGETS, [], n_draws=3, seed=0)
    assert none["intervention"].isna().all() and none["control"].isna().all()
    every = ablation_rows(model, CONTEXTS, TARGETS, [(0, h) for h in range(H)], n_draws=3, seed=0)
    assert every["intervention"].notna().all() and every["control"].isna().all()  # no head left to draw
    assert (every["n_control_heads"] == 0).all()


def test_ablation_rows_control_is_the_mean_over_seeded_draws_by_hand():
    model, heads = tiny(), [(0, 1), (1, 2)]
    rows = ablation_rows(model, CONTEXTS, TARGETS, heads, n_draws=3, seed=4)
    assert list(rows.columns) == ["context", "original", "intervention", "control", "n_heads", "n_control_heads"]
    assert rows["context"].tolist() == list(range(len(CONTEXTS)))
    rng = np.random.default_rng(4)
    per_draw = []
    for _ in range(3):  # the same draws from the same seed, each ablated alone
        drawn = control_heads(heads, H, rng)
        by_layer = {layer: [h for l2, h in drawn if l2 == layer] for layer, _ in drawn}
        with model.hooks([ablation_hook(layer, hs, "zero", None) for layer, hs in by_layer.items()]):
            per_draw.append(target_surprisal(model, CONTEXTS, TARGETS))
    np.testing.assert_allclose(rows["control"], np.mean(per_draw, axis=0), rtol=1e-6)
    assert rows["control"].nunique() > 1  # one value per context, not one over all
    one = ablation_rows(model, CONTEXTS[:1], TARGETS[:1], heads, n_draws=2, seed=0)  # a single context
    assert one["control"].notna().all() and one["n_control_heads"].tolist() == [2]
    assert ablation_rows(model, CONTEXTS, TARGETS, [], n_draws=2, seed=0)["n_control_heads"].eq(0).all()


def test_control_heads_in_a_full_layer_draw_none_and_never_repeat():
    rng = np.random.default_rng(1)
    assert control_heads([(0, h) for h in range(3)] + [(1, 0)], 3, rng) in ([(1, 1)], [(1, 2)])  # layer 0: none left
    for _ in range(20):  # two of three others: always two different heads
        drawn = control_heads([(0, 0), (0, 1)], 4, rng)
        assert len(set(drawn)) == 2


TURNS = pd.DataFrame(
    {
        "tokens": [
            ["<MOT>", "ball<ENV>", "ball<LAN>"],
            ["<MOT>", "ball<ENV>", "the<LAN>"],
            ["<MOT>", "cup<LAN>", "ball<LAN>"],
            ["<MOT>", "cup<ENV>", "cup<LAN>", "cup<LAN>"],
            ["<MOT>", "ball<ENV>", "ball<LAN>"],  # held out
        ]
    }
)


def test_cooccurrence_counts_training_turns_only():
    stats = cooccurrence_stats(TURNS, {4}, ["ball", "cup"]).set_index("word")
    assert stats.loc["ball", ["n_env", "n_lan", "turns_env", "turns_lan", "turns_both"]].tolist() == [2, 2, 2, 2, 1]
    assert stats.loc["cup", ["n_env", "n_lan", "turns_both"]].tolist() == [1, 3, 1]
    assert stats.loc["ball", "pmi"] == pytest.approx(np.log(1.5 * 4 / (2.5 * 2.5)))


def test_r_squared_is_one_on_a_line_and_low_on_noise():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 1))
    assert r_squared(2 * x[:, 0] + 1, x)[0] == pytest.approx(1.0)
    r2, adj = r_squared(rng.normal(size=30), x)
    assert r2 < 0.2 and adj < r2


def test_r2_table_one_row_per_checkpoint():
    stats = pd.DataFrame({"word": list("abcdef"), "log_cooc": np.arange(6.0), "pmi": [0, 1, 0, 1, 0, 1.0]})
    gains = pd.DataFrame(
        {
            "model": "t",
            "seed": 0,
            "step": np.repeat([1, 2], 6),
            "word": list("abcdef") * 2,
            "gain": np.r_[np.arange(6.0) * 3, np.array([5, -1, 2, 7, 0, 3.0])],
        }
    )
    table = r2_table(gains, stats, ["log_cooc"])
    assert table["step"].tolist() == [1, 2] and table.loc[0, "r2"] == pytest.approx(1.0)
    assert table.loc[1, "r2"] < 1 and (table["n_words"] == 6).all()
    with refuses("features: ", "['nope']", error=ValueError):
        r2_table(gains, stats, ["nope"])


def test_spread_checkpoints_are_log_spaced_and_keep_the_last():
    ckpts = [(s, Path(f"step{s}")) for s in (0, 1, 2, 4, 8, 16, 32, 64, 128, 150, 300, 450)]
    picked = [s for s, _ in spread_checkpoints(ckpts, 4)]
    assert picked[-1] == 450 and len(picked) == 4 and picked[0] == 0
    assert spread_checkpoints(ckpts, 50) == ckpts


def steps_of(ckpts: list) -> list[int]:
    return [s for s, _ in ckpts]


def test_spread_checkpoints_by_hand():
    """Targets 1, 10, 100, 1000 (log-even from the first step, 0 read as 1, to the last), each the nearest
    step in log; a tie goes to the earlier step."""
    dense = [(s, Path(f"step{s}")) for s in (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)]
    assert steps_of(spread_checkpoints(dense, 4)) == [0, 10, 100, 1000]
    from_one = [(s, Path(f"step{s}")) for s in (1, 3, 10, 30, 100, 300, 1000)]
    assert steps_of(spread_checkpoints(from_one, 4)) == [1, 10, 100, 1000]
    uneven = [(s, Path(f"step{s}")) for s in (0, 1, 2, 3, 1000)]
    assert spread_checkpoints(uneven, 5) == uneven  # as many as asked for: all of them, not a log-spaced few


def test_model_entries_name_the_bad_key():
    models = {"t4": {"arch": "transformer", "n_layers": 4}, "bad": {"n_layers": 2}}
    assert model_entry(models, "t4") == ("transformer", {"n_layers": 4})
    with pytest.raises(PipelineError, match=r"grounding_models\.bad\.arch"):
        model_entry(models, "bad")
    with refuses("grounding_models.t12: ", "['bad', 't4']"):  # the models there are
        model_entry(models, "t12")
    with refuses("grounding_models.t_4: ", "'t_4'", "lower-case"):
        model_entry({"t_4": {"arch": "lstm"}}, "t_4")


def test_report_tables_pool_seeds_and_count_missing_heads_as_zero():
    rng = np.random.default_rng(0)
    n = 12
    with_heads = pd.DataFrame(
        {
            "model": "t",
            "seed": np.repeat([0, 1], n),
            "step": 5,
            "kind": "aggregate",
            "context": np.tile(np.arange(n), 2),
            "original": 2.0,
            "intervention": 3.0 + rng.normal(0, 0.1, 2 * n),
            "control": 2.0 + rng.normal(0, 0.1, 2 * n),
            "n_heads": 2,
            "n_control_heads": 2,
        }
    )
    none = with_heads.assign(kind="gather", intervention=np.nan, control=np.nan, n_heads=0, n_control_heads=0)
    table = ablation_table(pd.concat([with_heads, none])).set_index("kind")
    assert table.loc["aggregate", "p (intervention > control)"] < 0.01
    assert table.loc["aggregate", "runs with heads"] == 2 and table.loc["aggregate", "original"] == 2.0
    assert np.isnan(table.loc["gather", "intervention"]) and table.loc["gather", "original"] == 2.0
    uncontrolled = ablation_table(with_heads.assign(control=np.nan, n_control_heads=0)).iloc[0]
    assert uncontrolled["intervention"] > 2.9 and np.isnan(uncontrolled["control"])
    assert np.isnan(uncontrolled["p (intervention > control)"])
    saliency = pd.DataFrame({"model": "t", "seed": [0, 1], "step": 5})
    heads = pd.DataFrame(
        {"model": "t", "seed": [0, 0], "step": 5, "layer": [1, 2], "head": [0, 1], "kind": "aggregate", "share": 0.5}
    )
    counts = heads_table(heads, saliency)
    assert counts[("heads (mean over seeds)", "aggregate")].item() == 1.0  # 2 heads in seed 0, none in seed 1
    assert counts[("heads (mean over seeds)", "gather")].item() == 0.0
    assert counts[("mean layer", "aggregate")].item() == 1.5

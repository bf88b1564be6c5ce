"""Attention-head ablation on tiny random models."""

import copy

import numpy as np
import pandas as pd
import pytest
import torch
from refusals import refuses, refuses_key
from tiny_models import N_LAYERS, TOK, digit_reader, no_hooks, tiny_model

from emergence.core.config import from_dict
from emergence.interp.ablation import ablate_heads, mean_head_activations
from emergence.studies.binding.ablation import ablation_table, heads_by_hop, rank_routing_heads
from emergence.studies.binding.ablation_params import BindingAblationParams
from emergence.studies.binding.batches import encode_programs
from emergence.studies.binding.patching import answer_digits
from emergence.studies.binding.programs import ProgramConfig
from emergence.studies.binding.sets import generate_table

pytestmark = pytest.mark.usefixtures("one_thread")

N_HEADS, D_HEAD = 2, 16
Z_NAMES = [f"blocks.{layer}.attn.hook_z" for layer in range(N_LAYERS)]
COLUMNS = ["seed", "step", "layer", "head", "mode", "hops", "metric", "value", "n"]


@pytest.fixture(scope="module")
def programs() -> pd.DataFrame:
    return generate_table(np.random.default_rng(0), ProgramConfig(n_lines=6, max_hops=3), 48, set_name="test")


def idx_of(programs, n) -> torch.Tensor:
    return torch.from_numpy(TOK.encode_batch(programs["program"][:n].tolist()))


@torch.no_grad()
def test_mean_over_one_program_is_its_own_activation(programs):
    model, idx = tiny_model(), idx_of(programs, 1)
    plain, cache = model.run_with_cache(idx, Z_NAMES)  # caching hook_pattern would change the path
    mean_z = mean_head_activations(model, idx)
    for layer in range(N_LAYERS):
        assert torch.equal(mean_z[layer], cache[Z_NAMES[layer]][0])
        for head in range(N_HEADS):
            assert torch.equal(ablate_heads(model, idx, layer, head, "mean", mean_z), plain)
    assert no_hooks(model)


@torch.no_grad()
@pytest.mark.parametrize("batch_size", [2, 3, 256])
def test_the_mean_counts_each_program_once_in_batches_that_do_not_divide_them(programs, batch_size):
    model, idx = tiny_model(), idx_of(programs, 5)
    _, cache = model.run_with_cache(idx, Z_NAMES)  # all five in one pass: the oracle
    mean_z = mean_head_activations(model, idx, batch_size=batch_size)
    for layer in range(N_LAYERS):
        torch.testing.assert_close(mean_z[layer], cache[Z_NAMES[layer]].mean(0))


@torch.no_grad()
def test_mean_skips_padding():
    model = tiny_model()
    texts = ["a=1\nb=a\n#b:", "a=1\nb=a\nc=b\n#c:"]
    idx = torch.from_numpy(TOK.encode_batch(texts))  # (2, 15): the first is padded after 11
    _, cache = model.run_with_cache(idx, Z_NAMES)
    mean_z = mean_head_activations(model, idx, torch.tensor([len(t) for t in texts]), batch_size=1)
    z = cache[Z_NAMES[1]]
    torch.testing.assert_close(mean_z[1][:11], z[:, :11].mean(0))
    torch.testing.assert_close(mean_z[1][11:], z[1, 11:])


@torch.no_grad()
def test_every_single_head_ablation_changes_the_output(programs):
    model, idx = tiny_model(), idx_of(programs, 8)
    plain, _ = model(idx)
    mean_z = mean_head_activations(model, idx)
    for layer in range(N_LAYERS):
        for head in range(N_HEADS):
            for mode in ("zero", "mean"):
                assert not torch.equal(ablate_heads(model, idx, layer, head, mode, mean_z), plain)
    assert no_hooks(model)


@torch.no_grad()
def test_zero_ablation_equals_cutting_the_heads_output_weights(programs):
    model, idx = tiny_model(), idx_of(programs, 8)
    for layer, heads in ((0, 1), (1, [0, 1])):
        cut = copy.deepcopy(model)
        for h in [heads] if isinstance(heads, int) else heads:
            cut.blocks[layer].attn.out.weight[:, h * D_HEAD : (h + 1) * D_HEAD] = 0.0
        torch.testing.assert_close(ablate_heads(model, idx, layer, heads, "zero"), cut(idx)[0])


def test_bad_mode_or_missing_mean_is_rejected(programs):
    model, idx = tiny_model(), idx_of(programs, 2)
    with refuses("zero, mean", "'resample'", error=ValueError):
        ablate_heads(model, idx, 0, 0, "resample")
    with refuses("mean_z", "mean_head_activations", error=ValueError):  # and what computes it
        ablate_heads(model, idx, 0, 0, "mean")
    assert no_hooks(model)


@torch.no_grad()
def test_ablation_table_rows_agree_with_direct_ablation(programs):
    model = digit_reader()
    enc = encode_programs(programs["program"].tolist(), [0] * len(programs), TOK)
    own = answer_digits(model(enc.idx)[0], enc.answer_pos, TOK)  # the model is 'right' on every program
    assert (own >= 0).all()
    data = encode_programs(programs["program"].tolist(), own, TOK)
    hops = programs["hops"].to_numpy()
    table = ablation_table(model, data, hops, TOK, seed=1, step=9, batch_size=20)
    assert list(table.columns) == COLUMNS and no_hooks(model)
    assert (table["seed"] == 1).all() and (table["step"] == 9).all()

    base = table[table["mode"] == "none"]
    classes = [-1, *sorted(set(hops))]
    assert base["hops"].tolist() == classes and (base["metric"] == "accuracy").all()
    assert (base["value"] == 1.0).all() and base["n"].tolist() == [len(hops), *np.bincount(hops)[classes[1:]]]
    ablated = table[table["mode"] != "none"]
    assert len(ablated) == N_LAYERS * N_HEADS * 2 * len(classes) * 2
    wide = ablated.pivot_table(index=["layer", "head", "mode", "hops"], columns="metric", values="value")
    np.testing.assert_allclose(wide["accuracy_drop"], 1.0 - wide["accuracy"])

    mean_z = mean_head_activations(model, data.idx)  # all programs have one length
    for mode in ("zero", "mean"):
        logits = ablate_heads(model, data.idx, 1, 0, mode, mean_z)
        right = answer_digits(logits, data.answer_pos, TOK) == own
        for k in classes:
            mask = np.ones_like(right) if k == -1 else hops == k
            assert wide.loc[(1, 0, mode, k), "accuracy"] == pytest.approx(right[mask].mean())
    assert wide["accuracy_drop"].max() > 0


def test_rank_routing_heads_orders_by_the_deepest_hop_drop():
    drops = {  # (layer, head): {hops: drop}, same in both modes except (0, 1)
        (0, 0): {-1: 0.10, 1: 0.0, 3: 0.20},
        (0, 1): {-1: 0.30, 1: 0.5, 3: 0.05},
        (1, 0): {-1: 0.05, 1: 0.0, 3: 0.40},
        (1, 1): {-1: 0.20, 1: 0.1, 3: 0.20},
    }
    rows = [
        dict(
            seed=0,
            step=5,
            layer=l,
            head=h,
            mode=m,
            hops=k,
            metric="accuracy_drop",
            value=v + (0.1 if (l, h, m) == (0, 1, "mean") else 0.0),
            n=10,
        )
        for (l, h), by_hops in drops.items()
        for m in ("zero", "mean")
        for k, v in by_hops.items()
    ]
    rows.append(dict(seed=0, step=5, layer=-1, head=-1, mode="none", hops=3, metric="accuracy", value=0.9, n=10))
    ranked = rank_routing_heads(pd.DataFrame(rows))
    assert list(ranked.columns) == ["seed", "step", "layer", "head", "drop_all", "drop_deep", "rank"]
    assert list(zip(ranked["layer"], ranked["head"])) == [(1, 0), (1, 1), (0, 0), (0, 1)]
    assert ranked["rank"].tolist() == [1, 2, 3, 4]
    assert ranked["drop_deep"].tolist() == pytest.approx([0.40, 0.20, 0.20, 0.10])
    by_one = rank_routing_heads(pd.DataFrame(rows), deepest_hops=1)
    assert (by_one.iloc[0]["layer"], by_one.iloc[0]["head"]) == (0, 1)
    with pytest.raises(ValueError, match="hops=7"):
        rank_routing_heads(pd.DataFrame(rows), deepest_hops=7)


def test_rank_routing_heads_per_seed_and_step_ties_by_layer_then_head():
    """Two seeds, two steps; only accuracy_drop rows of heads count (the ablated accuracy itself and the
    unablated row are left out); a tie on both drops goes to the lower layer, then the lower head."""
    rows = []
    for seed in (1, 0):  # not in order
        for step in (20, 10):
            for layer, head, deep, every in ((1, 1, 0.2, 0.1), (1, 0, 0.2, 0.1), (0, 1, 0.2, 0.1), (0, 0, 0.1, 0.3)):
                base = dict(seed=seed, step=step, layer=layer, head=head, mode="zero", n=10)
                rows.append(base | dict(hops=2, metric="accuracy_drop", value=deep + seed))
                rows.append(base | dict(hops=1, metric="accuracy_drop", value=0.9))  # a shallower class
                rows.append(base | dict(hops=-1, metric="accuracy_drop", value=every))
                rows.append(base | dict(hops=2, metric="accuracy", value=0.5 - deep))  # not a drop
            rows.append(dict(seed=seed, step=step, layer=-1, head=-1, mode="none", hops=-1, metric="accuracy_drop",
                             value=5.0, n=10))  # fmt: skip
    ranked = rank_routing_heads(pd.DataFrame(rows))
    assert ranked[["seed", "step"]].drop_duplicates().values.tolist() == [[0, 10], [0, 20], [1, 10], [1, 20]]
    first = ranked[(ranked["seed"] == 0) & (ranked["step"] == 10)]
    assert list(zip(first["layer"], first["head"], first["rank"])) == [(0, 1, 1), (1, 0, 2), (1, 1, 3), (0, 0, 4)]
    assert first["drop_deep"].tolist() == pytest.approx([0.2, 0.2, 0.2, 0.1])
    assert first["drop_all"].tolist() == pytest.approx([0.1, 0.1, 0.1, 0.3])
    assert ranked.loc[ranked["seed"] == 1, "drop_deep"].max() == pytest.approx(1.2)


def test_heads_by_hop_ranks_each_hop_on_its_own_drops():
    rows = []
    # (seed, layer, head, mode, hops, drop): head (0, 1) matters for 1 hop, (1, 0) for 2 hops
    for seed in (0, 1):
        for mode in ("zero", "mean"):
            for layer, head, d1, d2 in ((0, 0, 0.0, 0.1), (0, 1, 0.5, 0.2), (1, 0, 0.1, 0.6), (1, 1, 0.05, 0.0)):
                bump = 0.2 if (seed, mode) == (1, "zero") else 0.0  # averaged away: seed 1's mean is +0.1
                for hops, drop in ((-1, 0.9), (1, d1 + bump), (2, d2)):
                    rows.append(
                        dict(
                            seed=seed,
                            step=9,
                            layer=layer,
                            head=head,
                            mode=mode,
                            hops=hops,
                            n=4,
                            metric="accuracy_drop",
                            value=drop,
                        )
                    )
    rows.append(dict(seed=0, step=9, layer=-1, head=-1, mode="none", hops=1, n=4, metric="accuracy", value=0.9))
    got = heads_by_hop(pd.DataFrame(rows), top=2)
    assert got[["hops", "rank", "layer", "head"]].values.tolist() == [
        [1, 1, 0, 1],
        [1, 2, 1, 0],
        [2, 1, 1, 0],
        [2, 2, 0, 1],
    ]  # the all-programs row (hops -1) never ranks
    # hop 1, head (0, 1): seed 0 drops 0.5, seed 1 drops (0.7 + 0.5) / 2 = 0.6 -> mean 0.55
    assert got.loc[0, "drop"] == pytest.approx(0.55) and got.loc[0, "n_seeds"] == 2


@torch.no_grad()
def test_accuracy_drop_is_baseline_minus_ablated_when_the_baseline_is_not_one(programs):
    """Labels the model gets right on only part of each hop class, so the unablated accuracy
    is below 1 and differs by class: a drop taken from 1 (or from another class) shows."""
    model = digit_reader()
    model.blocks[0].attn.out.weight.zero_()  # layer 0's heads reach nothing: ablating them costs 0
    enc = encode_programs(programs["program"].tolist(), [0] * len(programs), TOK)
    own = answer_digits(model(enc.idx)[0], enc.answer_pos, TOK)
    assert (own >= 0).all()
    hops = programs["hops"].to_numpy()
    assert np.bincount(hops).tolist() == [0, 5, 20, 23]  # the fixture's classes, used below
    # Right label on the first 5 of hop 1, 10 of hop 2, 3 of hop 3; a wrong digit elsewhere.
    rank = pd.Series(hops).groupby(hops).cumcount().to_numpy()
    right = rank < np.array([0, 5, 10, 3])[hops]
    data = encode_programs(programs["program"].tolist(), np.where(right, own, (own + 1) % 10), TOK)
    baseline = {-1: 18 / 48, 1: 1.0, 2: 0.5, 3: 3 / 23}  # by hand from the counts above

    table = ablation_table(model, data, hops, TOK, seed=0, step=0, batch_size=20)
    base = table[table["mode"] == "none"].set_index("hops")["value"]
    assert base.to_dict() == pytest.approx(baseline)
    wide = table[table["mode"] != "none"].pivot_table(
        index=["layer", "head", "mode", "hops"], columns="metric", values="value"
    )
    # Dead heads: ablated accuracy is the baseline, so the drop is exactly 0 (1 - ablated would not be).
    for head in range(N_HEADS):
        for mode in ("zero", "mean"):
            for k, acc in baseline.items():
                assert wide.loc[(0, head, mode, k), "accuracy"] == pytest.approx(acc)
                assert wide.loc[(0, head, mode, k), "accuracy_drop"] == pytest.approx(0.0, abs=1e-12)
    # Live heads: the drop is this class's baseline minus the ablated accuracy found directly.
    mean_z = mean_head_activations(model, data.idx)  # all programs have one length
    labels = data.answers.numpy()
    for head in range(N_HEADS):
        for mode in ("zero", "mean"):
            ablated = answer_digits(ablate_heads(model, data.idx, 1, head, mode, mean_z), data.answer_pos, TOK)
            for k, acc in baseline.items():
                mask = np.ones(len(hops), bool) if k == -1 else hops == k
                right_now = (ablated == labels)[mask].mean()
                assert wide.loc[(1, head, mode, k), "accuracy_drop"] == pytest.approx(acc - right_now)


def test_heads_by_hop_averages_over_three_seeds():
    # one head, one mode: drops 0.0, 0.0 and 0.9 over three seeds average to 0.3 (their median is 0)
    rows = [
        dict(seed=seed, step=9, layer=0, head=0, mode="zero", hops=1, n=4, metric="accuracy_drop", value=drop)
        for seed, drop in ((0, 0.0), (1, 0.0), (2, 0.9))
    ]
    got = heads_by_hop(pd.DataFrame(rows), top=1)
    assert got[["drop", "n_seeds"]].values.tolist() == [[pytest.approx(0.3), 3]]


def test_heads_by_hop_breaks_ties_by_layer_then_head():
    # three heads cost exactly the same: the earlier layer ranks first, then the lower head
    rows = [
        dict(seed=0, step=9, layer=layer, head=head, mode="zero", hops=1, n=4, metric="accuracy_drop", value=0.25)
        for layer, head in ((1, 1), (1, 0), (0, 1))
    ]
    got = heads_by_hop(pd.DataFrame(rows), top=3)
    assert got[["rank", "layer", "head"]].values.tolist() == [[1, 0, 1], [2, 1, 0], [3, 1, 1]]


@pytest.mark.parametrize(
    "values",
    [{"n_programs": 1}, {"modes": ["zero"]}, {"modes": ["mean"]}, {"modes": ["mean", "zero"]}],
)
def test_ablation_params_edges_that_pass(values):
    assert from_dict(BindingAblationParams, values, "binding_ablation") == BindingAblationParams(**values)


@pytest.mark.parametrize(
    "values, key, value, rule",
    [
        ({"n_programs": True}, "n_programs", True, "integer"),  # a bool is no count
        ({"modes": []}, "modes", [], "['zero', 'mean']"),
        ({"modes": ["zero", "resample"]}, "modes", ["zero", "resample"], "['zero', 'mean']"),
    ],
)
def test_ablation_params_errors_name_the_key(values, key, value, rule):
    with refuses_key(f"binding_ablation.{key}", value, rule):
        from_dict(BindingAblationParams, values, "binding_ablation")


def test_ablation_params_need_one_program():
    with refuses_key("binding_ablation.n_programs", 0):
        from_dict(BindingAblationParams, {"n_programs": 0}, "binding_ablation")

"""Residual-stream interchange interventions on tiny random models."""

import numpy as np
import pandas as pd
import pytest
import torch
from refusals import assert_refused, refuses, refuses_key
from tiny_models import N_LAYERS, TOK, digit_reader, no_hooks, tiny_model

from emergence.core.config import from_dict
from emergence.core.io import PipelineError
from emergence.studies.binding.batches import encode_programs, parse_program
from emergence.studies.binding.patching import (
    answer_digits,
    chain_depths,
    head_step_table,
    make_counterfactual_pairs,
    patch_residual,
    patching_table,
    position_classes,
)
from emergence.studies.binding.patching_params import PatchingParams
from emergence.studies.binding.programs import ProgramConfig, trace
from emergence.studies.binding.sets import generate_table

pytestmark = pytest.mark.usefixtures("one_thread")
COLUMNS = ["seed", "step", "layer", "head", "position", "position_class", "chain_depth", "metric", "value", "n"]


@pytest.fixture(scope="module")
def programs() -> pd.DataFrame:
    return generate_table(np.random.default_rng(0), ProgramConfig(n_lines=6, max_hops=3), 96, set_name="test")


@pytest.fixture(scope="module")
def pairs(programs) -> pd.DataFrame:
    return make_counterfactual_pairs(programs, np.random.default_rng(1), 64)


def encode(texts) -> torch.Tensor:
    return torch.from_numpy(TOK.encode_batch(list(texts)))


def test_pairs_differ_in_one_token_that_changes_the_answer(programs, pairs):
    assert len(pairs) == 64 and pairs["base"].is_unique
    base, cf = encode(pairs["base"]), encode(pairs["cf"])
    assert base.shape == cf.shape
    rows, cols = torch.nonzero(base != cf, as_tuple=True)
    assert rows.tolist() == list(range(len(pairs)))  # exactly one differing token per pair
    assert cols.tolist() == [4 * r + 2 for r in pairs["root_line"]] == pairs["changed_pos"].tolist()
    assert (pairs["root_line"] == pairs["chain_lines"].map(lambda c: c[-1])).all()
    for text, answer in zip(pairs["cf"], pairs["cf_answer"]):
        assert trace(*parse_program(text))[0] == answer
    assert (pairs["cf_answer"] != pairs["base_answer"]).all()
    assert set(pairs["base"]) <= set(programs["program"])
    assert list(pairs.columns) == [
        "base", "cf", "base_answer", "cf_answer", "hops", "chain_lines", "n_lines", "root_line", "changed_pos",
    ]  # fmt: skip
    source = programs.set_index("program").loc[pairs["base"]]
    assert pairs["hops"].tolist() == source["hops"].tolist() and pairs["n_lines"].tolist() == [6] * 64
    assert pairs["base_answer"].tolist() == source["answer"].tolist()
    shifts = {(int(c[p]) - int(b[p])) % 10 for b, c, p in zip(pairs["base"], pairs["cf"], pairs["changed_pos"])}
    assert shifts == set(range(1, 10))  # every other digit is drawn, the next one (+1) included
    again = make_counterfactual_pairs(programs, np.random.default_rng(1), 64)
    pd.testing.assert_frame_equal(pairs, again)


def test_pairs_need_one_program_length(programs):
    shorter = generate_table(np.random.default_rng(2), ProgramConfig(n_lines=4, max_hops=2), 8, set_name="test")
    mixed = pd.concat([programs, shorter], ignore_index=True)
    with pytest.raises(PipelineError, match="n_lines"):
        make_counterfactual_pairs(mixed, np.random.default_rng(0), 4)
    picked = make_counterfactual_pairs(mixed, np.random.default_rng(0), 100, n_lines=4)
    assert len(picked) == 8 and (picked["n_lines"] == 4).all()


def test_pairs_columns_and_every_other_digit_drawn(pairs):
    assert list(pairs.columns) == [
        "base", "cf", "base_answer", "cf_answer", "hops", "chain_lines", "n_lines", "root_line", "changed_pos",
    ]  # fmt: skip
    old = [int(b[p]) for b, p in zip(pairs["base"], pairs["changed_pos"])]
    new = [int(c[p]) for c, p in zip(pairs["cf"], pairs["changed_pos"])]
    assert {(n - o) % 10 for o, n in zip(old, new)} == set(range(1, 10))  # each of the 9 other digits occurs


def test_pairs_follow_the_documented_draws(programs, pairs):
    """The rows, then one shift in 1..9 per pair, drawn from the generator in that order; the new digit is
    old + shift (mod 10), as the docstring says."""
    rng = np.random.default_rng(1)
    rows = programs.iloc[rng.choice(len(programs), size=64, replace=False)]
    shifts = rng.integers(1, 10, size=64)
    assert pairs["base"].tolist() == rows["program"].tolist()
    for base, cf, pos, shift in zip(pairs["base"], pairs["cf"], pairs["changed_pos"], shifts):
        assert int(cf[pos]) == (int(base[pos]) + shift) % 10


def test_pairs_carry_their_base_programs_answer_and_hops(programs, pairs):
    by_program = programs.set_index("program")
    assert pairs["base_answer"].tolist() == by_program.loc[pairs["base"], "answer"].tolist()
    assert pairs["hops"].tolist() == by_program.loc[pairs["base"], "hops"].tolist()
    assert pairs["hops"].nunique() > 1  # the fixture's pairs span hop counts


def test_pairs_refuse_an_empty_length_and_a_chain_that_misses_its_constant():
    one = pd.DataFrame(
        {"program": ["a=1\nb=2\n#b:"], "answer": [2], "hops": [0], "chain_lines": [[0]], "n_lines": [2]}
    )  # the chain names line 0, but b's value comes from line 1
    with refuses("programs table", "n_lines=3"):
        make_counterfactual_pairs(one, np.random.default_rng(0), 1, n_lines=3)
    with refuses("programs table", "chain_lines [0]", "constant", repr("a=1\nb=2\n#b:")):
        make_counterfactual_pairs(one, np.random.default_rng(0), 1)


def test_position_classes_of_a_hand_written_program():
    text = "a=1\nb=a\nc=3\n#b:"
    assert trace(*parse_program(text)) == (1, (1, 0))
    expected = [
        "chain_lhs",
        "other",
        "chain_root",
        "chain_newline",
        "chain_lhs",
        "other",
        "chain_rhs",
        "chain_newline",
        "other",
        "other",
        "other",
        "other",
        "query",
        "query",
        "query",
    ]
    assert position_classes(text, [1, 0]) == expected


@pytest.mark.parametrize("layer", range(N_LAYERS + 1))
def test_identity_patch_changes_nothing(pairs, layer):
    model, idx = tiny_model(), encode(pairs["base"][:8])
    plain, _ = model(idx)
    T = idx.shape[1]
    for positions in (range(T), [0, T - 1], [5]):
        assert torch.equal(patch_residual(model, idx, idx, layer, positions), plain)
    assert no_hooks(model)


@pytest.mark.parametrize("layer", range(N_LAYERS + 1))
def test_patching_every_position_gives_the_counterfactual_run(pairs, layer):
    model = tiny_model()
    base, cf = encode(pairs["base"][:8]), encode(pairs["cf"][:8])
    cf_logits, _ = model(cf)
    patched = patch_residual(model, base, cf, layer, range(base.shape[1]))
    assert torch.equal(patched, cf_logits)
    assert not torch.equal(model(base)[0], cf_logits)  # so the test could fail
    assert no_hooks(model)


def test_chain_depth_counts_copies_from_the_root_by_hand():
    text = "a=1\nd=5\nb=a\nc=b\n#c:"  # chain c <- b <- a: lines 3, 2, 0 (query line first)
    on_chain = [(i, d) for i, d in enumerate(chain_depths(text, (3, 2, 0))) if d >= 0]
    assert on_chain == [(2, 0), (3, 0), (10, 1), (11, 1), (14, 2), (15, 2)]  # each line's rhs and newline


def test_layer_out_of_range_is_rejected(pairs):
    idx = encode(pairs["base"][:2])
    with pytest.raises(ValueError, match="layer 3"):
        patch_residual(tiny_model(), idx, idx, N_LAYERS + 1, [0])


def self_labelled(model, pairs) -> pd.DataFrame:
    """The pairs whose base and cf answers differ under `model`, relabelled with its answers,
    so the model is 'correct' on all of them and every pair counts in the table."""
    preds = []
    for col in ("base", "cf"):
        enc = encode_programs(pairs[col].tolist(), [0] * len(pairs), TOK)
        preds.append(answer_digits(model(enc.idx)[0], enc.answer_pos, TOK))
    keep = preds[0] != preds[1]
    return pairs.assign(base_answer=preds[0], cf_answer=preds[1])[keep].reset_index(drop=True)


def brute_force(model, pairs, layer, pos) -> tuple[np.ndarray, np.ndarray]:
    enc = encode_programs(pairs["base"].tolist(), pairs["base_answer"].tolist(), TOK)
    logits = patch_residual(model, enc.idx, encode(pairs["cf"]), layer, [pos])
    pred = answer_digits(logits, enc.answer_pos, TOK)
    return pred == pairs["cf_answer"].to_numpy(), pred == pairs["base_answer"].to_numpy()


@torch.no_grad()
def test_patching_table_matches_one_patch_at_a_time(pairs):
    model = digit_reader()
    kept = self_labelled(model, pairs)
    assert len(kept) >= 16
    table = patching_table(model, kept, TOK, seed=3, step=7, batch_size=12)
    assert list(table.columns) == COLUMNS and no_hooks(model)
    assert (table["seed"] == 3).all() and (table["step"] == 7).all() and (table["head"] == -1).all()
    summary = table[table["metric"] == "pairs_correct"]
    assert summary[["layer", "position", "value", "n"]].values.tolist() == [[-1, -1, 1.0, len(kept)]]

    cells = table[table["metric"] != "pairs_correct"]
    T = len(kept["base"].iloc[0])
    assert set(cells["layer"]) == set(range(N_LAYERS + 1)) and set(cells["position"]) == set(range(T))
    # Each (layer, position, metric) splits the pairs among the position's classes.
    assert (cells.groupby(["layer", "position", "metric"])["n"].sum() == len(kept)).all()
    hits = (cells["value"] * cells["n"]).round().astype(int)
    totals = hits.groupby([cells["metric"], cells["layer"], cells["position"]]).sum()
    for layer in range(N_LAYERS + 1):
        for pos in range(T):
            to_cf, to_base = brute_force(model, kept, layer, pos)
            assert totals["patch_success", layer, pos] == to_cf.sum()
            assert totals["base_kept", layer, pos] == to_base.sum()

    # Chain depth: 0 exactly at the root constant, 1.. on the other chain right-hand sides, 0.. on every chain
    # line's newline (the root line's is 0), -1 elsewhere.
    depth_of = cells.groupby("position_class")["chain_depth"].agg(["min", "max"])
    assert depth_of.loc["chain_root"].tolist() == [0, 0]
    assert depth_of.loc["chain_rhs", "min"] == 1 and depth_of.loc["chain_rhs", "max"] <= kept["hops"].max()
    assert depth_of.loc["chain_newline"].tolist() == [0, depth_of.loc["chain_rhs", "max"]]
    assert (depth_of.drop(["chain_root", "chain_rhs", "chain_newline"]) == -1).all().all()

    # Sanity of the intervention itself: at the embeddings only the root constant differs,
    # and after the last block only the answer position feeds the answer.
    first = cells[cells["layer"] == 0].pivot_table(index="position_class", columns="metric", values="value")
    assert first.loc["chain_root", "patch_success"] == 1.0
    assert (first.drop("chain_root")["base_kept"] == 1.0).all()
    last = cells[cells["layer"] == N_LAYERS]
    at_answer = last["position"] == T - 1
    assert (last[at_answer & (last["metric"] == "patch_success")]["value"] == 1.0).all()
    assert (last[~at_answer & (last["metric"] == "base_kept")]["value"] == 1.0).all()


@torch.no_grad()
def test_patching_table_counts_only_pairs_the_model_gets_right(pairs):
    model = tiny_model()  # untrained: (almost) never right on both runs
    table = patching_table(model, pairs, TOK, seed=0, step=0)
    enc_b = encode_programs(pairs["base"].tolist(), pairs["base_answer"].tolist(), TOK)
    enc_c = encode_programs(pairs["cf"].tolist(), pairs["cf_answer"].tolist(), TOK)
    right = (answer_digits(model(enc_b.idx)[0], enc_b.answer_pos, TOK) == pairs["base_answer"].to_numpy()) & (
        answer_digits(model(enc_c.idx)[0], enc_c.answer_pos, TOK) == pairs["cf_answer"].to_numpy()
    )
    summary = table[table["metric"] == "pairs_correct"].iloc[0]
    assert summary["value"] == right.mean() and summary["n"] == len(pairs)
    cells = table[table["metric"] != "pairs_correct"]
    assert (cells.groupby(["layer", "position", "metric"])["n"].sum() == right.sum()).all()
    assert list(table.columns) == COLUMNS and no_hooks(model)


@torch.no_grad()
def test_patching_table_counts_the_right_pairs_and_skips_the_wrong_ones(pairs):
    """digit_reader's own answers as labels, then 6 labels made wrong: 3 on the base run, 3 on
    the cf run. Only pairs right on both runs may count, in the summary and in every cell."""
    model = digit_reader()
    kept = self_labelled(model, pairs)
    assert len(kept) >= 16
    wrong_base, wrong_cf = [0, 1, 5], [2, 3, 9]  # batches of 4: the first is all wrong, then mixed
    labels = kept.copy()
    labels.loc[wrong_base, "base_answer"] = (labels.loc[wrong_base, "base_answer"] + 1) % 10
    labels.loc[wrong_cf, "cf_answer"] = (labels.loc[wrong_cf, "cf_answer"] + 1) % 10
    right = np.ones(len(kept), bool)
    right[wrong_base + wrong_cf] = False

    table = patching_table(model, labels, TOK, seed=0, step=0, batch_size=4)
    summary = table[table["metric"] == "pairs_correct"].iloc[0]
    assert summary["n"] == len(kept) and summary["value"] == pytest.approx((len(kept) - 6) / len(kept))
    cells = table[table["metric"] != "pairs_correct"]
    assert (cells.groupby(["layer", "position", "metric"])["n"].sum() == len(kept) - 6).all()
    # The hits are those of the right pairs alone, patched one (layer, position) at a time.
    hits = (cells["value"] * cells["n"]).round().astype(int)
    totals = hits.groupby([cells["metric"], cells["layer"], cells["position"]]).sum()
    counted = kept[right].reset_index(drop=True)
    for layer in range(N_LAYERS + 1):
        for pos in range(len(kept["base"].iloc[0])):
            to_cf, to_base = brute_force(model, counted, layer, pos)
            assert totals["patch_success", layer, pos] == to_cf.sum()
            assert totals["base_kept", layer, pos] == to_base.sum()


def test_answer_digits_reads_the_answer_row_and_marks_a_non_digit_minus_one():
    # Each row's top token at its own answer position, built by hand: a digit reads as its value,
    # anything else (a letter, '=') as -1, never as a digit (1 or 0 would be read as an answer).
    vocab, t = len(TOK), 5
    logits = torch.zeros(4, t, vocab)
    answer_pos = torch.tensor([4, 2, 0, 3])
    tops = [TOK.digit_ids[7], TOK.encode("a")[0], TOK.encode("=")[0], TOK.digit_ids[0]]
    for row, (pos, top) in enumerate(zip(answer_pos.tolist(), tops)):
        logits[row, pos, top] = 3.0
        logits[row, (pos + 1) % t, TOK.digit_ids[9]] = 5.0  # a larger digit elsewhere is not read
    got = answer_digits(logits, answer_pos, TOK)
    assert got.dtype == np.int64
    assert got.tolist() == [7, -1, -1, 0]


def one_head_by_hand(model, pair, layer: int, head: int, k: int) -> bool:
    """One pair, one head, one step, through plain forward hooks on the attention module's hook_z:
    the cf run's output of `head` at line k's rhs and newline put into the base run."""
    line = list(reversed(pair["chain_lines"]))[k]
    positions = [4 * line + 2, 4 * line + 3]
    point = model.hook_points()[f"blocks.{layer}.attn.hook_z"]
    seen = {}
    grab = point.register_forward_hook(lambda m, i, out: seen.__setitem__("z", out.clone()))
    model(encode([pair["cf"]]))
    grab.remove()

    def put(m, i, out):
        out = out.clone()
        out[0, positions, head] = seen["z"][0, positions, head]
        return out

    swap = point.register_forward_hook(put)
    base = encode_programs([pair["base"]], [pair["base_answer"]], TOK)
    logits, _ = model(base.idx)
    swap.remove()
    return int(answer_digits(logits, base.answer_pos, TOK)[0]) == pair["cf_answer"]


@torch.no_grad()
def test_head_steps_match_one_head_patched_by_hand(pairs):
    model = digit_reader()
    kept = self_labelled(model, pairs)
    table = head_step_table(model, kept, TOK, seed=2, step=5, batch_size=7)  # batches split the pairs unevenly
    assert list(table.columns) == COLUMNS and no_hooks(model)
    assert set(table["metric"]) == {"head_step_success"} and (table["position"] == -1).all()
    for k in range(1, int(kept["hops"].max()) + 1):
        deep = kept[kept["hops"] >= k]  # a step exists only on chains at least k long
        for layer in range(N_LAYERS):
            for head in range(2):
                expected = [one_head_by_hand(model, row, layer, head, k) for _, row in deep.iterrows()]
                cell = table[(table["layer"] == layer) & (table["head"] == head) & (table["chain_depth"] == k)]
                assert cell["n"].tolist() == [len(deep)]
                assert cell["value"].iloc[0] == pytest.approx(np.mean(expected))
    assert table["value"].max() > 0  # some head's output moves the answer: the test could fail
    assert set(table["chain_depth"]) == set(range(1, int(kept["hops"].max()) + 1))  # no step 0: the constant


def test_patching_params_need_one_pair():
    # one pair is the least a patching run can average over; none is refused with the key named
    assert from_dict(PatchingParams, {"n_pairs": 1}, "binding_patching") == PatchingParams(n_pairs=1)
    with refuses_key("binding_patching.n_pairs", 0):
        from_dict(PatchingParams, {"n_pairs": 0}, "binding_patching")
    with pytest.raises(PipelineError) as e:  # a bool is no count
        from_dict(PatchingParams, {"n_pairs": True}, "binding_patching")
    assert_refused([str(e.value)], "binding_patching.n_pairs", True, rule="integer")

"""The default's aids taken away: the variants' params, their rows, the side-by-side table and metrics."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
from refusals import refuses
from test_binding_report import all_cells, drawn  # noqa: F401 (drawn: a fixture)
from test_grounding_report import paras

from emergence.check import aid_seeds_are_default_seeds
from emergence.core.config import from_dict, read_params
from emergence.core.declared import DeclaredParams, StageReads
from emergence.core.report import html as H
from emergence.studies.binding import aid_table
from emergence.studies.binding.aid_table import aid_rows, aids_metrics, aids_section, aids_table
from emergence.studies.binding.aids import AIDS, AidParams, without_aid
from emergence.studies.binding.train_config import model_params, train_params

SHIPPED = read_params("params.yaml")


@pytest.mark.parametrize("aid", list(AIDS))
def test_a_variant_changes_exactly_its_keys_and_leaves_params_as_they_were(aid):
    before = copy.deepcopy(SHIPPED)
    changed = without_aid(SHIPPED, aid)
    assert SHIPPED == before  # the stage's own params are not edited
    for name in SHIPPED:
        expected = {**SHIPPED[name], **AIDS[aid].get(name, {})} if isinstance(SHIPPED[name], dict) else SHIPPED[name]
        assert changed[name] == expected, name


def test_the_variants_reach_the_model_and_the_training_format():
    """What each aid is, read back through the functions the training stage uses."""

    def run_of(aid: str) -> tuple[dict, str]:
        params = without_aid(SHIPPED, aid)
        return model_params(params, 10, 40)[1], train_params(params, 1, "cpu")[0]

    assert SHIPPED["binding_model"]["conv_kernel"] == 4 and SHIPPED["binding_train"]["format"] == "line_values"
    (model, fmt) = run_of("no_conv")
    assert model["conv_kernel"] == 0 and model["pos"] == "rope" and fmt == "line_values"
    (model, fmt) = run_of("no_line_values")
    assert model["conv_kernel"] == 4 and fmt == "answer_only"
    (model, fmt) = run_of("plain")  # the paper profile's GPT-2 choices
    assert (model["conv_kernel"], model["pos"], model["act"], model["tie_embeddings"], fmt) == (
        0,
        "learned",
        "gelu_tanh",
        True,
        "answer_only",
    )
    paper = SHIPPED | {  # the paper profile's run: neither aid
        "binding_model": {**SHIPPED["binding_model"], "conv_kernel": 0},
        "binding_train": {**SHIPPED["binding_train"], "format": "answer_only"},
    }
    with_aids = without_aid(paper, "with_aids")
    assert model_params(with_aids, 10, 40)[1]["conv_kernel"] == 4
    assert train_params(with_aids, 1, "cpu")[0] == "line_values"


def test_a_variant_of_declared_params_is_still_held_to_the_declaration():
    declared = DeclaredParams(SHIPPED, StageReads("binding_aid_train", frozenset({"binding_model"}), frozenset()))
    changed = without_aid(declared, "no_conv")
    assert type(changed) is DeclaredParams and changed["binding_model"]["conv_kernel"] == 0
    with refuses("pipeline.yaml", "binding_aid_train", "'report'", "params:"):
        changed["report"]
    with refuses("pipeline.yaml", "binding_aid_train", "'binding_train'"):  # overridden by no variant here
        without_aid(declared, "no_line_values")


def test_an_unknown_variant_is_one_line_naming_the_known_ones():
    with refuses("binding_aids", "'no_gpu'", "no_conv, no_line_values, plain"):
        without_aid(SHIPPED, "no_gpu")


@pytest.mark.parametrize(
    "values, named",
    [
        # the known one (no_conv) is not named among the unknown; the variants are AIDS' keys, in order
        (
            {"aids": ["no_conv", "fast", "slow"], "seeds": [1]},
            ["binding_aids.aids: ", "['fast', 'slow']", "no_conv, no_line_values, plain, with_aids"],
        ),
        ({"aids": ["plain"], "seeds": []}, ["binding_aids.seeds", "at least one", "[]"]),
        ({"aids": ["plain", "plain"], "seeds": [1]}, ["binding_aids: ", "twice", "['plain', 'plain'], [1]"]),
        ({"aids": ["plain"], "seeds": [1, 1]}, ["binding_aids: ", "twice", "['plain'], [1, 1]"]),
    ],
)
def test_bad_aid_params_are_refused(values, named):
    with refuses(*named):
        from_dict(AidParams, values, "binding_aids")


def test_no_variant_is_accepted_and_trains_nothing():
    """The default: the aid variants are opt-in (profiles/full.yaml)."""
    assert from_dict(AidParams, {"aids": [], "seeds": [0]}, "binding_aids").aids == []


def test_every_variant_once_with_distinct_seeds_is_accepted():
    values = {"aids": ["no_conv", "no_line_values", "plain", "with_aids"], "seeds": [0, 1, 2]}
    assert from_dict(AidParams, values, "binding_aids") == AidParams(**values)


def test_llc_runs_must_be_grounding_runs():
    from emergence.check import llc_runs_are_grounding_runs

    assert llc_runs_are_grounding_runs(SHIPPED) == []
    bad = SHIPPED | {"grounding_llc": {"models": ["transformer4", "gru9"], "seeds": [0, 5]}}
    assert llc_runs_are_grounding_runs(bad) == [
        "grounding_llc.models: ['gru9'] not in grounding_runs.models ['transformer4', 'mamba4', 'lstm4'] (no such run)",
        "grounding_llc.seeds: [5] not in grounding_runs.seeds [0, 1] (no such run)",
    ]


def test_aid_seeds_must_be_seeds_of_the_default_runs():
    assert aid_seeds_are_default_seeds(SHIPPED) == []
    bad = SHIPPED | {"base": {"seeds": [0, 1]}, "binding_aids": {"aids": ["plain"], "seeds": [1, 3]}}
    assert aid_seeds_are_default_seeds(bad) == [
        "binding_aids.seeds: [3] not in base.seeds [0, 1] (no default run to compare with)"
    ]


def test_llc_seeds_must_be_binding_runs():
    from emergence.check import llc_seeds_are_binding_runs

    assert llc_seeds_are_binding_runs(SHIPPED) == []
    assert llc_seeds_are_binding_runs(SHIPPED | {"base": {"seeds": [0, 2]}, "binding_llc": {"seeds": [2, 0]}}) == []
    bad = SHIPPED | {"base": {"seeds": [0, 2]}, "binding_llc": {"seeds": [1, 2, 3]}}
    assert llc_seeds_are_binding_runs(bad) == ["binding_llc.seeds: [1, 3] not in base.seeds [0, 2] (no such run)"]


# ---- one run's rows, by hand --------------------------------------------------------------------


def trajectory(final: float = 0.9) -> pd.DataFrame:
    rows = []
    for step, scale in ((0, 0.1), (500, 0.5), (1000, 1.0)):
        rows.append((step, "accuracy", -1, final * scale))
        rows += [(step, "accuracy", h, scale * (1 - 0.1 * h)) for h in (0, 1, 3)]  # 3: the deepest class
        rows.append((step, "train_loss", -1, 9.0))  # logged, not an accuracy
    rows.append((1500, "val_accuracy", -1, 0.99))  # a later logged step is no checkpoint
    df = pd.DataFrame(rows, columns=["step", "metric", "hops", "value"])
    return df.assign(seed=1, layer=-1, head=-1, n=10)


def phases(heuristic: int = 500, traversal: int = -1) -> pd.DataFrame:
    return pd.DataFrame({"seed": 1, "phase": [1, 2, 3], "start_step": [0, heuristic, traversal]})


def patching(kept: float = 0.75) -> pd.DataFrame:
    """Two layers; depth 1 best at layer 1 (0.8), depth 2 best at layer 0 (0.6); depth 0 is the control;
    the newline has depth 1 only; a chain_lhs cell (not a patched position) and non-success rows too;
    `kept` of 8 pairs answered correctly in both runs (pairs_correct)."""
    cells = [
        (0, "chain_root", 0, 1.0),
        (1, "chain_root", 0, 0.2),
        (0, "chain_rhs", 1, 0.3),
        (1, "chain_rhs", 1, 0.8),
        (0, "chain_rhs", 2, 0.6),
        (1, "chain_rhs", 2, 0.5),
        (0, "chain_newline", 1, 0.05),
        (1, "chain_newline", 1, 0.1),
        (1, "chain_lhs", 2, 0.99),
    ]
    rows = [
        dict(layer=la, position_class=c, chain_depth=d, metric="patch_success", value=v, n=4) for la, c, d, v in cells
    ]
    rows.append(dict(layer=1, position_class="chain_rhs", chain_depth=2, metric="base_kept", value=0.97, n=4))
    rows.append(dict(layer=-1, position_class="all", chain_depth=-1, metric="pairs_correct", value=kept, n=8))
    return pd.DataFrame(rows).assign(seed=1, step=1000, position=0, head=-1)


def test_aid_rows_by_hand():
    rows = aid_rows("no_conv", 1, trajectory(), phases(), patching())
    assert set(rows["aid"]) == {"no_conv"} and set(rows["seed"]) == {1}
    got = {(r.measure, r.step, r.depth, r.position): r.value for r in rows.itertuples()}
    assert got == pytest.approx(
        {
            ("accuracy", 1000, -1, ""): 0.9,  # all hops, last checkpoint
            ("deep_accuracy", 0, 3, ""): 0.1 * 0.7,
            ("deep_accuracy", 500, 3, ""): 0.5 * 0.7,
            ("deep_accuracy", 1000, 3, ""): 0.7,
            ("phase_start", -1, 1, ""): 0,
            ("phase_start", -1, 2, ""): 500,
            ("phase_start", -1, 3, ""): -1,
            ("patch", -1, 1, "rhs"): 0.8,
            ("patch", -1, 2, "rhs"): 0.6,
            ("patch", -1, 1, "newline"): 0.1,
            ("patch_pairs", -1, -1, ""): 6,  # 0.75 of 8 pairs
        }
    )
    assert len(rows) == len(got)


def test_aid_rows_give_the_deep_curve_in_step_order_and_no_patch_where_no_pair_was_measured():
    # the trajectory read out of step order; depth 2 at the rhs measured over no pair (n = 0) at either layer
    shuffled = trajectory().sample(frac=1.0, random_state=3)
    cells = patching()
    cells.loc[(cells["position_class"] == "chain_rhs") & (cells["chain_depth"] == 2), "n"] = 0
    rows = aid_rows("no_conv", 1, shuffled, phases(), cells)
    deep = rows[rows["measure"] == "deep_accuracy"]
    assert deep["step"].tolist() == [0, 500, 1000]
    assert deep["value"].tolist() == pytest.approx([0.1 * 0.7, 0.5 * 0.7, 0.7])
    patch = rows[rows["measure"] == "patch"]
    assert sorted(zip(patch["position"], patch["depth"])) == [("newline", 1), ("rhs", 1)]


def test_aid_rows_without_accuracy_is_one_line():
    traj = trajectory()
    with refuses("plain", "seed 1", "no accuracy rows"):
        aid_rows("plain", 1, traj[traj["metric"] != "accuracy"], phases(), patching())


def test_aid_rows_need_the_one_count_of_pairs_patched():
    pat = patching()
    with refuses("plain", "seed 1", "0 pairs_correct rows", "not 1"):
        aid_rows("plain", 1, trajectory(), phases(), pat[pat["metric"] != "pairs_correct"])
    with refuses("plain", "seed 1", "2 pairs_correct rows"):  # two seeds' tables passed as one
        aid_rows("plain", 1, trajectory(), phases(), pd.concat([pat, pat.assign(seed=2)]))


def flat(value: float, kept: float) -> pd.DataFrame:
    """patching(kept) with every patch success (and base_kept) `value`."""
    pat = patching(kept)
    return pat.assign(value=pat["value"].where(pat["metric"] == "pairs_correct", value))


def side_by_side() -> pd.DataFrame:
    return pd.concat(
        [
            aid_rows("plain", 1, trajectory(0.4), phases(500, -1), flat(0.5, 0.25)),
            aid_rows("default", 1, trajectory(0.95), phases(500, 1000), patching(1.0)),
            aid_rows("no_conv", 1, trajectory(0.7), phases(0, 1000), flat(0.2, 0.5)),
        ],
        ignore_index=True,
    )


def test_the_table_has_a_line_per_run_default_first():
    table = aids_table(side_by_side())
    assert list(table["aid"]) == ["default", "no_conv", "plain"]  # the default, then AIDS order
    assert list(table.columns) == [
        "aid",
        "seed",
        "steps",
        "accuracy",
        "deepest hop",
        "heuristic from",
        "traversal from",
        "patch pairs",
        "rhs d1",
        "rhs d2",
        "newline d1",
    ]
    default = table.iloc[0]
    assert (default["steps"], default["accuracy"], default["deepest hop"]) == (1000, 0.95, 0.7)
    assert (default["heuristic from"], default["traversal from"]) == (500, 1000)
    assert (default["rhs d1"], default["rhs d2"], default["newline d1"]) == (0.8, 0.6, 0.1)
    assert table.iloc[2]["traversal from"] == -1 and table.iloc[1]["heuristic from"] == 0
    assert list(table["patch pairs"]) == [8, 4, 2]  # all 8, half, a quarter: each run's own count


def test_metrics_give_the_weakest_depth_per_position():
    m = aids_metrics(side_by_side())
    assert m["default"]["seed1"] == {
        "accuracy": 0.95,
        "traversal_from": 1000,
        "patch_weakest_depth_rhs": 0.6,
        "patch_weakest_depth_newline": 0.1,
    }
    assert m["plain"]["seed1"]["traversal_from"] == -1 and m["plain"]["seed1"]["patch_weakest_depth_rhs"] == 0.5
    assert list(m) == ["default", "no_conv", "plain"]


def test_metrics_give_none_where_a_run_has_no_value():
    rows = side_by_side()
    plain = rows["aid"] == "plain"
    no_traversal = plain & (rows["measure"] == "phase_start") & (rows["depth"] == 3)
    no_newline = plain & (rows["measure"] == "patch") & (rows["position"] == "newline")
    m = aids_metrics(rows[~(no_traversal | no_newline)])
    assert m["plain"]["seed1"]["traversal_from"] is None and m["plain"]["seed1"]["patch_weakest_depth_newline"] is None
    assert m["plain"]["seed1"]["patch_weakest_depth_rhs"] == 0.5 and m["no_conv"]["seed1"]["traversal_from"] == 1000


def test_metrics_follow_the_tables_order_not_the_alphabet(monkeypatch):
    # AIDS happens to be alphabetical, default first: reversed, the order shows whose it is
    monkeypatch.setattr(aid_table, "AIDS", dict(reversed(AIDS.items())))
    assert list(aids_table(side_by_side())["aid"]) == ["default", "plain", "no_conv"]
    assert list(aids_metrics(side_by_side())) == ["default", "plain", "no_conv"]


def test_the_section_names_each_variants_changes_and_shows_the_table():
    html = aids_section(side_by_side())
    assert "no_conv: conv_kernel 0" in html
    assert "plain: conv_kernel 0, pos learned, act gelu_tanh, tie_embeddings True, format answer_only" in html
    assert "default:" not in html and html.count("<img") == 1 and "<table" in html
    assert "make repro PROFILE=full" in aids_section(side_by_side().iloc[0:0])
    assert aids_metrics(side_by_side().iloc[0:0]) == {}  # binding.json "aids" of the default: none run


def test_the_section_in_full(drawn):  # noqa: F811
    assert aids_section(side_by_side().iloc[0:0]) == H.opt_in("Aid variants", "binding_aids.aids")
    part = aids_section(side_by_side())
    assert paras(part) == [
        "The default trains with aids the paper's plain GPT-2 does not have: a causal convolution (Canon layer) "
        "and a target at every line's value. Each variant below trains on the same distribution, seed and number "
        "of steps without them (no_conv: conv_kernel 0; plain: conv_kernel 0, pos learned, act gelu_tanh, "
        "tie_embeddings True, format answer_only). Accuracy: held-out test programs at the last checkpoint; phases "
        "as detected above (-1: never reached); patching: the best layer's success at each chain depth, at the "
        "right-hand side (rhs) and the newline, over the counterfactual pairs the run answers correctly with and "
        "without the change (patch pairs)."
    ]
    ((caption, _),) = all_cells(part)
    assert caption == "Each aid taken away: accuracy, phases and patching by chain depth"
    ((plot, (_, ylabel, legend), kwargs, alt),) = drawn
    assert (plot, ylabel, legend, kwargs) == ("lines_by_class", "deepest hop accuracy", "variant", {})
    assert alt == "deepest hop accuracy over training, per variant"
    # each variant's deepest-hop curve scaled its own way, so a curve under another's name shows
    scale = {"default": 1.0, "no_conv": 0.5, "plain": 0.25}
    rows = side_by_side()
    deep = rows["measure"] == "deep_accuracy"
    rows.loc[deep, "value"] = rows.loc[deep, "value"] * rows.loc[deep, "aid"].map(scale)
    drawn.clear()
    aids_section(rows)
    ((_, (df, _, _), _, _),) = drawn
    got = sorted((c, s, round(v, 6)) for c, s, v in df[["cls", "step", "value"]].itertuples(index=False))
    steps = ((0, 0.07), (500, 0.35), (1000, 0.7))
    assert got == sorted((f"{aid} seed1", s, round(v * k, 6)) for aid, k in scale.items() for s, v in steps)
    lines = part.split("\n")  # paragraph, table, png, twin: whole elements, one per line
    assert [line.split(" ")[0].split(">")[0] for line in lines] == ["<p", "<table", "<img", "<div"]
    assert all(line.endswith(">") for line in lines)


def test_the_rendered_table_seed_by_seed_with_phases_and_pairs_missing():
    rows = side_by_side()
    seed0 = rows.assign(seed=0, value=rows["value"].where(rows["measure"] != "accuracy", 0.5))
    head = ["aid", "seed", "steps", "accuracy", "deepest hop", "heuristic from", "traversal from", "patch pairs"]
    head += ["rhs d1", "rhs d2", "newline d1"]

    def line(aid: str, seed: int, acc: str, heur: str, trav: str, pairs: str, patch: str) -> list[str]:
        return [aid, str(seed), "1000", acc, "0.700", heur, trav, pairs, *patch.split()]

    patch = {"default": "0.800 0.600 0.100", "no_conv": "0.200 0.200 0.200", "plain": "0.500 0.500 0.500"}
    # seeds in order (seed 1's rows come first), the default first within each; starts and pairs as integers
    ((_, got),) = all_cells(aids_section(pd.concat([rows, seed0], ignore_index=True)))
    assert got == [
        head,
        line("default", 0, "0.500", "500", "1000", "8", patch["default"]),
        line("no_conv", 0, "0.500", "0", "1000", "4", patch["no_conv"]),
        line("plain", 0, "0.500", "500", "-1", "2", patch["plain"]),
        line("default", 1, "0.950", "500", "1000", "8", patch["default"]),
        line("no_conv", 1, "0.700", "0", "1000", "4", patch["no_conv"]),
        line("plain", 1, "0.400", "500", "-1", "2", patch["plain"]),
    ]
    # no phase rows at all, and one run without its count of pairs: dashes, the rest still integers
    bare = rows[(rows["measure"] != "phase_start") & ~((rows["aid"] == "plain") & (rows["measure"] == "patch_pairs"))]
    ((_, got),) = all_cells(aids_section(bare))
    assert got[1:] == [
        line("default", 1, "0.950", "–", "–", "8", patch["default"]),
        line("no_conv", 1, "0.700", "–", "–", "4", patch["no_conv"]),
        line("plain", 1, "0.400", "–", "–", "–", patch["plain"]),
    ]

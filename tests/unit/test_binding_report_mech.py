"""The binding page's mechanism sections (patching by position and by chain depth, head ablation, heads
per hop and per dereference step) and binding.json's mechanism block, by value. Seeds differ (seed 1 is
higher by a fixed amount and carries more pairs), so a pooled number differs from a plain mean or one
seed's."""

from __future__ import annotations

import pandas as pd
import pytest
from test_binding_report import all_cells, drawn  # noqa: F401 (drawn: a fixture)
from test_grounding_report import paras

from emergence.studies.binding import report_mechanisms as M

# ---- patching and ablation tables whose seeds differ

CLASSES = ["chain_root", "chain_lhs", "chain_rhs", "other", "query", "other"]  # positions 0..5


def patching_frame(pairs: bool = True) -> pd.DataFrame:
    """patch_success = 0.1 * (layer + position) + 0.2 * seed (mean over seeds: + 0.1); seed 0 has 10
    pairs per cell, seed 1 30; root (position 0) is chain depth 0, the rhs (position 2) depth 1."""
    rows = [
        (
            s,
            layer,
            pos,
            "query" if (s, pos) == (1, 5) else cls,
            "patch_success",
            0.1 * (layer + pos) + 0.2 * s,
            10 + 20 * s,
        )
        for s in (1, 0)
        for layer in (1, 0)
        for pos, cls in enumerate(CLASSES)
    ]  # position 5: "other" in seed 0, "query" in seed 1, a tie: the first class by name, "other"
    rows += [
        (s, layer, pos, cls, "base_kept", 5.0, 10) for s in (0, 1) for layer in (0, 1) for pos, cls in [(0, "other")]
    ]
    if pairs:
        rows += [(0, -1, -1, "other", "pairs_correct", 0.9, 10), (1, -1, -1, "other", "pairs_correct", 0.7, 30)]
    df = pd.DataFrame(rows, columns=["seed", "layer", "position", "position_class", "metric", "value", "n"])
    depth = df["position_class"].map({"chain_root": 0, "chain_rhs": 1}).fillna(-1).astype(int)
    return df.assign(step=1000, head=-1, chain_depth=depth.where(df["metric"] == "patch_success", -1))


MODE = {"zero": 0.0, "mean": 0.5}
HOPS = {-1: 0.0, 0: 0.003, 1: 0.001, 2: 0.002}


def drop(layer: int, head: int, mode: str, hops: int, seed: int) -> float:
    return 0.1 * layer + 0.2 * head + MODE[mode] + HOPS[hops] + 0.04 * seed


def ablation_frame() -> pd.DataFrame:
    rows = [(0, -1, -1, "none", -1, "accuracy", 0.6), (1, -1, -1, "none", -1, "accuracy", 0.8)]
    rows += [(0, -1, -1, "none", 2, "accuracy", 0.4), (1, -1, -1, "none", 2, "accuracy", 0.5)]
    rows += [(0, -1, -1, "zero", -1, "accuracy_drop", 9.0)]  # not a head: left out
    rows += [
        (s, layer, head, mode, hops, "accuracy_drop", drop(layer, head, mode, hops, s))
        for s in (1, 0)
        for layer in (1, 0)
        for head in (0, 1)
        for mode in ("zero", "mean")
        for hops in (2, -1, 1, 0)
    ]
    rows += [(s, 0, 0, "zero", -1, "accuracy", 7.0) for s in (0, 1)]  # ablated accuracy: not a drop
    df = pd.DataFrame(rows, columns=["seed", "layer", "head", "mode", "hops", "metric", "value"])
    return df.assign(step=1000, n=10)


def routing_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "layer": [0, 1],
            "head": [1, 1],
            "drop_all": [0.1, 0.25],
            "drop_deep": [0.15, 0.3],
            "rank": [2, 1],
            "x": [9, 9],
        }
    )


def panel(mode_s: tuple[str, ...], hops: int) -> dict:
    """Expected layer x head matrix (dict of columns) averaged over modes and the two seeds."""
    return {
        head: {
            layer: pytest.approx(sum(drop(layer, head, m, hops, s) for m in mode_s for s in (0, 1)) / (2 * len(mode_s)))
            for layer in (0, 1)
        }
        for head in (0, 1)
    }


# ---- activation patching by position


def test_patching_section_heat_map_summary_and_pairs_correct(drawn):  # noqa: F811
    part = M.patching_section(patching_frame())
    assert paras(part) == [
        "Residual-stream patching: the activation at (layer, position) from a program with a different "
        "answer is patched into the base run; patch success is the fraction of pairs whose output "
        "switches to the source answer (mean over seeds). The strip marks each position's class.",
        "Fraction of patching pairs the model answered correctly (pairs_correct): 0.800, mean over seeds.",
    ]
    ((plot, (mat, classes), kwargs, alt),) = drawn
    assert (plot, kwargs, alt) == ("patching", {}, "patching heat map, layer by position")
    assert mat.index.tolist() == [0, 1] and mat.columns.tolist() == [0, 1, 2, 3, 4, 5]
    assert mat.round(6).values.tolist() == [[round(0.1 * (layer + p + 1), 6) for p in range(6)] for layer in (0, 1)]
    assert classes.to_dict() == dict(enumerate(CLASSES))
    # per layer and class: mean and max over the class's positions (other = positions 3 and 5)
    ((caption, got),) = all_cells(part)
    assert caption == "Patch success per layer and position class (mean / max over positions)"
    assert got == [
        ["layer"]
        + [f"{c} ({s})" for c in ["chain_lhs", "chain_rhs", "chain_root", "other", "query"] for s in ["mean", "max"]],
        ["0", "0.200", "0.200", "0.300", "0.300", "0.100", "0.100", "0.500", "0.600", "0.500", "0.500"],
        ["1", "0.300", "0.300", "0.400", "0.400", "0.200", "0.200", "0.600", "0.700", "0.600", "0.600"],
    ]


def test_patching_section_without_pairs_or_results(drawn):  # noqa: F811
    part = M.patching_section(patching_frame(pairs=False))
    assert len(paras(part)) == 1 and "pairs_correct" not in part
    none = patching_frame()[lambda d: d["metric"] != "patch_success"]
    assert M.patching_section(none) == '<p class="note">No patching results.</p>'


# ---- patching by chain depth, at the right-hand side and at the newline


def test_depth_patching_pools_pairs_over_seeds():
    mat = M.depth_patching(patching_frame())
    # depth 0 (position 0): (10 * 0.1L + 30 * (0.1L + 0.2)) / 40 = 0.1L + 0.15; depth 1 (position 2): + 0.2
    assert mat.index.tolist() == [0, 1] and mat.columns.tolist() == [0, 1]
    assert mat.round(6).values.tolist() == [[0.15, 0.35], [0.25, 0.45]]


def test_depth_section_pooled_and_per_seed_tables(drawn):  # noqa: F811
    part = M.depth_section(patching_frame())  # no newline cells: the right-hand side only
    assert paras(part) == [
        "Patch success along the query chain, by layer and chain depth of the patched token (0 = the root "
        "constant's line, k = the line k copies below it), pooled over positions, pairs and seeds, at two "
        "positions of each chain line: its right-hand side (the paper's RHS tokens) and its newline (the "
        "value the line assigns can only be there once the line is read). Depth 0's right-hand side is the "
        "token the pair changes, so its layer-0 success is 1 by construction (a control). The paper reports "
        "> 80% success at RHS tokens along the query chain.",
        "The claim reads the right-hand side: of the two, it is where this model's weakest depth (>= 1, best "
        "layer) patches best (right-hand side 0.45, newline not measured).",
    ]
    head = ["layer", "depth 0", "depth 1"]
    assert all_cells(part) == [
        (
            "At the right-hand side: patch success by layer and chain depth, seeds pooled",
            [head, ["0", "0.150", "0.350"], ["1", "0.250", "0.450"]],
        ),
        (
            "Seed 0, at the right-hand side: patch success by layer and chain depth",
            [head, ["0", "0.000", "0.200"], ["1", "0.100", "0.300"]],
        ),
        (
            "Seed 1, at the right-hand side: patch success by layer and chain depth",
            [head, ["0", "0.200", "0.400"], ["1", "0.300", "0.500"]],
        ),
    ]
    ((plot, (mat, title), kwargs, alt),) = drawn
    assert (plot, title, kwargs, alt) == (
        "heatmap",
        "patch success by chain depth, right-hand side",
        {},
        "patch success at the right-hand side, layer by chain depth",
    )
    pd.testing.assert_frame_equal(mat, M.depth_patching(patching_frame()))


def test_depth_section_without_chain_cells():
    off = patching_frame().assign(chain_depth=-1)
    assert M.depth_section(off) == (
        '<p class="note">No patching pairs on the chain (pairs_correct is 0 or the chains are empty).</p>'
    )


def with_newline(success: float) -> pd.DataFrame:
    """patching_frame() plus the chain's newlines: depth 0 at position 6, depth 1 at position 7, every
    layer and seed at `success` with 10 pairs."""
    pat = patching_frame()
    rows = [
        (s, layer, pos, "chain_newline", "patch_success", success, 10, 1000, -1, depth)
        for s in (0, 1)
        for layer in (0, 1)
        for pos, depth in ((6, 0), (7, 1))
    ]
    return pd.concat([pat, pd.DataFrame(rows, columns=list(pat.columns))], ignore_index=True)


def test_the_claim_reads_the_newline_where_the_model_keeps_values_there(drawn):  # noqa: F811
    # right-hand side: depth 1's best layer 0.45; newline 0.9 everywhere: the newline wins
    pat = with_newline(0.9)
    m = M.mechanism_metrics(pat, ablation_frame())
    assert m["patching_position"] == "newline"
    assert (
        m["patching_by_depth"]
        == m["patching_by_depth_newline"]
        == {
            "0": {"best_layer": 0, "success": 0.9},
            "1": {"best_layer": 0, "success": 0.9},
        }
    )
    assert m["patching_by_depth_rhs"]["1"] == {"best_layer": 1, "success": 0.45}  # unchanged by the newline cells
    assert m["per_seed"]["1"]["patching_by_depth"]["1"]["success"] == 0.9  # per seed: the pooled choice
    part = M.depth_section(pat)
    assert (
        "The claim reads the newline: of the two, it is where this model's weakest depth (>= 1, best layer) "
        "patches best (right-hand side 0.45, newline 0.90)." in paras(part)
    )
    captions = [caption for caption, _ in all_cells(part)]
    assert captions[3] == "At the newline: patch success by layer and chain depth, seeds pooled"
    # a tie goes to the right-hand side, the paper's position
    assert M.patching_position(with_newline(0.45)) == "rhs"
    assert M.patching_position(with_newline(0.44)) == "rhs" and M.patching_position(with_newline(0.46)) == "newline"


def test_depth_section_with_newline_cells_only_and_a_weakest_depth_of_zero(drawn):  # noqa: F811
    # no right-hand side on the chain (skipped, the newline still drawn); the newline patches nowhere:
    # its weakest depth is 0.00, a measurement, not "not measured"
    pat = with_newline(0.0)
    pat = pat.assign(chain_depth=pat["chain_depth"].where(pat["position_class"] == "chain_newline", -1))
    part = M.depth_section(pat)
    assert paras(part)[1] == (
        "The claim reads the newline: of the two, it is where this model's weakest depth (>= 1, best layer) "
        "patches best (right-hand side not measured, newline 0.00)."
    )
    rows = [["layer", "depth 0", "depth 1"], ["0", "0.000", "0.000"], ["1", "0.000", "0.000"]]
    assert all_cells(part) == [
        ("At the newline: patch success by layer and chain depth, seeds pooled", rows),
        ("Seed 0, at the newline: patch success by layer and chain depth", rows),
        ("Seed 1, at the newline: patch success by layer and chain depth", rows),
    ]
    assert [call[1][1] for call in drawn] == ["patch success by chain depth, newline"]


def test_a_tie_goes_to_the_right_hand_side_whichever_position_comes_first(monkeypatch):
    monkeypatch.setattr(M, "PATCH_AT", dict(reversed(M.PATCH_AT.items())))
    assert list(M.PATCH_AT) == ["newline", "rhs"]
    assert M.patching_position(with_newline(0.45)) == "rhs"
    assert M.patching_position(with_newline(0.46)) == "newline"


# ---- head ablation and heads per hop


def test_ablation_section_panels_baseline_and_routing_table(drawn):  # noqa: F811
    part = M.ablation_section(ablation_frame(), routing_frame())
    assert paras(part) == [
        "Accuracy drop when one attention head is ablated (zeroed, or replaced by its mean output), "
        "mean over seeds; red = the head matters. Unablated accuracy: all: 0.700, 2 hops: 0.450.",
        "Candidate routing heads as ranked by the ablation analysis (rank 1 = most important); "
        "drop_all / drop_deep: accuracy drop on all programs / on the deepest hop class.",
    ]
    assert all_cells(part) == [
        (
            None,
            [
                ["rank", "layer", "head", "drop_all", "drop_deep"],
                ["1", "1", "1", "0.250", "0.300"],
                ["2", "0", "1", "0.100", "0.150"],
            ],
        )
    ]
    ((plot, (panels,), kwargs, alt),) = drawn
    assert (plot, kwargs, alt) == ("heatmap_grid", {}, "head ablation accuracy drop")
    assert list(panels) == [
        ("mean ablation", "all hops"),
        ("mean ablation", "2 hops"),
        ("zero ablation", "all hops"),
        ("zero ablation", "2 hops"),
    ]
    for (mode, label), mat in panels.items():
        hops = -1 if label == "all hops" else 2
        assert mat.index.tolist() == [0, 1] and mat.columns.tolist() == [0, 1]
        assert mat.to_dict() == panel((mode.split()[0],), hops), (mode, label)


def test_ablation_section_without_baseline_or_heads(drawn):  # noqa: F811
    no_base = ablation_frame()[lambda d: d["mode"] != "none"]
    assert "Unablated accuracy: n/a." in paras(M.ablation_section(no_base, routing_frame()))[0]
    heads_only_base = ablation_frame()[lambda d: d["layer"] < 0]
    assert M.ablation_section(heads_only_base, routing_frame()) == '<p class="note">No ablation results.</p>'
    assert M.hop_heads_section(heads_only_base) == '<p class="note">No ablation results.</p>'


def test_hop_heads_section_tables_per_seed_and_panels(drawn):  # noqa: F811
    part = M.hop_heads_section(ablation_frame())
    assert paras(part) == [
        "For each hop class, the heads whose ablation costs most accuracy (mean over zero and mean "
        "ablation and over seeds). The paper names heads 6.5 / 7.7 for the first hop, 7.2 / 8.3 / 9.4 for "
        "the second and third, and 11.2 / 11.3 / 11.7 carrying the value to the output (12 layers; ours "
        "are smaller, so compare roles, not numbers)."
    ]
    head = ["hops", "rank", "layer", "head", "drop", "n_seeds"]

    def top(hops: int, seeds: tuple[int, ...]) -> list[list[str]]:
        out = []
        for rank, (layer, h) in enumerate([(1, 1), (0, 1), (1, 0)], 1):
            d = sum(drop(layer, h, m, hops, s) for m in MODE for s in seeds) / (2 * len(seeds))
            out.append([str(hops), str(rank), str(layer), str(h), f"{d:.3f}", str(len(seeds))])
        return out

    assert all_cells(part) == [
        (
            "Top heads per hop class (layer.head), mean over seeds",
            [head, *top(0, (0, 1)), *top(1, (0, 1)), *top(2, (0, 1))],
        ),
        ("Seed 0: top heads per hop class", [head, *top(0, (0,)), *top(1, (0,)), *top(2, (0,))]),
        ("Seed 1: top heads per hop class", [head, *top(0, (1,)), *top(1, (1,)), *top(2, (1,))]),
    ]
    ((plot, (panels,), kwargs, alt),) = drawn
    assert (plot, kwargs, alt) == ("heatmap_grid", {}, "accuracy drop per head, by hop class")
    assert list(panels) == [("accuracy drop", "0 hops"), ("accuracy drop", "1 hops"), ("accuracy drop", "2 hops")]
    for hops, mat in zip((0, 1, 2), panels.values()):
        assert mat.to_dict() == panel(("zero", "mean"), hops)


# ---- heads per dereference step


def step_frame() -> pd.DataFrame:
    """head_step_success rows: step 1, heads 0.0, 0.1, 1.0, 1.1; seed 0 (10 pairs) favours 1.1 (0.9), seed 1
    (30 pairs) 0.1 (0.8); pooled 0.1 = (1 + 24) / 40, 1.1 = (9 + 6) / 40. Step 2: one head, seed 0 only."""
    value = {
        0: {(0, 0): 0.0, (0, 1): 0.1, (1, 0): 0.5, (1, 1): 0.9},
        1: {(0, 0): 0.0, (0, 1): 0.8, (1, 0): 0.1, (1, 1): 0.2},
    }
    rows = [(s, layer, head, 1, v, 10 + 20 * s) for s, heads in value.items() for (layer, head), v in heads.items()]
    rows.append((0, 1, 1, 2, 0.4, 10))
    df = pd.DataFrame(rows, columns=["seed", "layer", "head", "chain_depth", "value", "n"])
    return df.assign(step=1000, position=-1, position_class="chain_line", metric="head_step_success")


def test_heads_by_step_pool_pairs_over_seeds_and_rank():
    t = M.heads_by_step(step_frame())
    assert t[["step", "rank", "layer", "head"]].values.tolist() == [
        [1, 1, 0, 1],
        [1, 2, 1, 1],
        [1, 3, 1, 0],
        [2, 1, 1, 1],
    ]
    assert t["success"].round(6).tolist() == [0.625, 0.375, 0.2, 0.4] and t["n"].tolist() == [40, 40, 40, 10]
    seed0 = M.heads_by_step(step_frame()[lambda d: d["seed"] == 0], top=1)
    assert seed0[["step", "layer", "head"]].values.tolist() == [[1, 1, 1], [2, 1, 1]]
    assert M.heads_by_step(patching_frame()).empty  # no head rows: an empty table, not an error
    # ties go to the lower layer, then the lower head: four heads at 0.5, rows given highest first
    tied = step_frame()[lambda d: (d["seed"] == 0) & (d["chain_depth"] == 1)].assign(value=0.5).iloc[::-1]
    assert M.heads_by_step(tied)[["layer", "head"]].values.tolist() == [[0, 0], [0, 1], [1, 0]]


def test_step_heads_section_and_metrics():
    pat = pd.concat([patching_frame(), step_frame()], ignore_index=True)
    part = M.step_heads_section(pat)
    captions = [caption for caption, _ in all_cells(part)]
    assert captions == [
        "Top heads per dereference step (layer.head), seeds pooled",
        "Seed 0: top heads per dereference step",
        "Seed 1: top heads per dereference step",
    ]
    # (layer, head, success) per row: pooled over the seeds' pairs (head 0.1: (0.1 * 10 + 0.8 * 30) / 40),
    # then each seed alone; three decimals
    assert [[(r[2], r[3], r[4]) for r in rows[1:]] for _, rows in all_cells(part)] == [
        [("0", "1", "0.625"), ("1", "1", "0.375"), ("1", "0", "0.200"), ("1", "1", "0.400")],
        [("1", "1", "0.900"), ("1", "0", "0.500"), ("0", "1", "0.100"), ("1", "1", "0.400")],
        [("0", "1", "0.800"), ("1", "1", "0.200"), ("1", "0", "0.100")],
    ]
    assert M.step_heads_section(patching_frame()) == '<p class="note">No head-per-step patching results.</p>'
    lines = part.split("\n")  # the paragraph, then one table per line
    assert len(lines) == 4 and all(x.startswith("<table><caption>") for x in lines[1:])
    assert lines[0] == (
        "<p>Heads per dereference step: at step k the value moves one link, into the chain line k copies below "
        "the root. Each head&#x27;s output at that line&#x27;s right-hand side and newline is taken from the "
        "counterfactual run alone; success is the fraction of pairs (both runs correct, chains of at least k "
        "links) whose answer follows it. The head with the highest success at step k is the one that moves the "
        "value at that step. The paper names heads per hop (12 layers; compare roles).</p>"
    )
    m = M.mechanism_metrics(pat, ablation_frame())
    assert m["heads_by_step"] == {"1": ["0.1 (0.625)", "1.1 (0.375)", "1.0 (0.200)"], "2": ["1.1 (0.400)"]}
    assert m["per_seed"]["1"]["heads_by_step"] == {"1": ["0.1 (0.800)", "1.1 (0.200)", "1.0 (0.100)"]}
    assert m["patching_by_depth"] == M.mechanism_metrics(patching_frame(), ablation_frame())["patching_by_depth"]


# ---- metrics


def test_mechanism_metrics_pooled_and_per_seed():
    m = M.mechanism_metrics(patching_frame(), ablation_frame())
    assert (
        m["patching_by_depth"]
        == m["patching_by_depth_rhs"]
        == {
            "0": {"best_layer": 1, "success": 0.25},
            "1": {"best_layer": 1, "success": 0.45},
        }
    )
    assert m["patching_position"] == "rhs" and m["patching_by_depth_newline"] == {}
    assert m["per_seed"]["0"]["patching_by_depth"] == {
        "0": {"best_layer": 1, "success": 0.1},
        "1": {"best_layer": 1, "success": 0.3},
    }
    assert m["per_seed"]["1"]["patching_by_depth"]["1"] == {"best_layer": 1, "success": 0.5}
    assert m["heads_by_hop"]["1"] == ["1.1 (0.571)", "0.1 (0.471)", "1.0 (0.371)"]
    assert m["per_seed"]["0"]["heads_by_hop"]["2"] == ["1.1 (0.552)", "0.1 (0.452)", "1.0 (0.352)"]
    keys = ["patching_by_depth", "heads_by_step", "patching_by_depth_rhs", "patching_by_depth_newline", "heads_by_hop"]
    assert list(m) == ["patching_position", *keys, "per_seed"] and list(m["per_seed"]) == ["0", "1"]


def test_mechanism_metrics_without_ablation_and_a_depth_without_pairs():
    pat = patching_frame()
    pat.loc[pat["chain_depth"] == 1, "n"] = 0  # no pairs at depth 1: 0 / 0, left out
    abl = ablation_frame().iloc[0:0]
    m = M.mechanism_metrics(pat, abl)

    def entry(success: float) -> dict:
        at = {"0": {"best_layer": 1, "success": success}}
        return {
            "patching_by_depth": at,
            "heads_by_step": {},
            "patching_by_depth_rhs": at,
            "patching_by_depth_newline": {},
            "heads_by_hop": {},
        }

    assert m == {"patching_position": "rhs", **entry(0.25), "per_seed": {"0": entry(0.1), "1": entry(0.3)}}
    # seeds only in the ablation table still get their own entry
    abl = ablation_frame().assign(seed=lambda d: d["seed"] + 5)
    assert list(M.mechanism_metrics(pat, abl)["per_seed"]) == ["0", "1", "5", "6"]


def test_mechanism_metrics_without_an_ablation_table_and_rounding():
    pat = patching_frame().assign(value=lambda d: d["value"].where(d["chain_depth"] != 0, 1 / 3))
    m = M.mechanism_metrics(pat, ablation_frame().iloc[0:0])
    assert m["patching_by_depth"]["0"] == {"best_layer": 0, "success": 0.333333}  # every layer 1/3: the first
    # no ablation stage output at all (not even columns), no patching rows
    empty = M.mechanism_metrics(patching_frame().iloc[0:0], pd.DataFrame())
    assert empty == {
        "patching_position": "rhs",
        "patching_by_depth": {},
        "heads_by_step": {},
        "patching_by_depth_rhs": {},
        "patching_by_depth_newline": {},
        "heads_by_hop": {},
        "per_seed": {},
    }


# ---- layout


def test_mechanism_sections_are_their_parts_one_per_line(drawn):  # noqa: F811
    def tags(part: str) -> list[str]:
        return [line.split(" ")[0].split(">")[0] for line in part.split("\n")]

    assert tags(M.patching_section(patching_frame())) == ["<p", "<img", "<table", "<p"]
    assert tags(M.depth_section(patching_frame())) == ["<p", "<p", "<table", "<img", "<table", "<table"]
    assert tags(M.ablation_section(ablation_frame(), routing_frame())) == ["<p", "<img", "<p", "<table"]
    assert tags(M.hop_heads_section(ablation_frame())) == ["<p", "<table", "<table", "<table", "<img"]

"""The binding page's stress sections and binding.json's `stress` block by value, from the hand-made
stress table of test_report.py: seed 0 scored at steps 500 and 1000 (named), seed 1 at 1000 only."""

from __future__ import annotations

import pandas as pd
import pytest
from test_binding_report import all_cells, cells, drawn  # noqa: F401 (drawn: a fixture)
from test_grounding_report import paras
from test_report import _stress

from emergence.studies.binding import report_stress as S

PAPER = "paper (generator, unpinned)"


# ---- the frontier: the weakest stress set per seed and step


def test_frontier_weakest_stress_set_and_each_generator_per_seed_and_step():
    got = S.frontier(_stress())
    # seed 0 at 500: few_vars 0/4, many_vars 1/2 -> 0.0; at 1000: few 5/10, many 2/2 -> 0.5, ref_paper 1/4;
    # seed 1 at 1000: few 5/8, many 0/2 -> 0.0; the `gen` rows are neither
    want = pd.DataFrame(
        [
            (0, 1000, f"seed 0: {PAPER}", 0.25),
            (0, 500, "seed 0: weakest stress set", 0.0),
            (0, 1000, "seed 0: weakest stress set", 0.5),
            (1, 1000, "seed 1: weakest stress set", 0.0),
        ],
        columns=["seed", "step", "cls", "value"],
    )
    pd.testing.assert_frame_equal(got, want)


def test_label_names_generators_and_strips_the_stress_prefix():
    assert S._label("stress_few_vars") == "few_vars"
    assert S._label("ref_balanced") == "balanced (generator, unpinned)"
    assert S._label("few_vars") == "few_vars"
    assert S._label("xref_paper") == "xref_paper"


# ---- metrics


def test_stress_metrics_without_curve_reference_or_stress_sets():
    named = _stress()[lambda d: d["named"]]
    m = S.stress_metrics(named)  # one scored step: no curve
    assert set(m) == {"few_vars", "many_vars", "weakest", "reference"}
    assert m["weakest"] == {"set": "many_vars", "min_seed_accuracy": 0.0}
    no_ref = named[~named["set"].str.startswith("ref_")]
    assert set(S.stress_metrics(no_ref)) == {"few_vars", "many_vars", "weakest"}
    only_ref = _stress()[lambda d: d["set"] == "ref_paper"]
    assert S.stress_metrics(only_ref) == {
        "reference": {"paper": {"per_seed": {"0": 0.25}, "by_hops": {"0": {"0": 0.25}}}}
    }
    # the weakest set is the one whose lowest seed is lowest, not the lowest mean
    t = pd.DataFrame(
        [(0, "stress_few_vars", 0, 10, 9), (1, "stress_few_vars", 0, 10, 1), (0, "stress_many_vars", 0, 10, 3)],
        columns=["seed", "set", "hops", "n", "correct"],
    ).assign(step=7, named=True)
    m = S.stress_metrics(t)
    assert m["weakest"] == {"set": "few_vars", "min_seed_accuracy": 0.1}
    assert m["few_vars"] == {"per_seed": {"0": 0.9, "1": 0.1}, "by_hops": {"0": {"0": 0.9, "1": 0.1}}}


def test_stress_metrics_curve_only_from_the_weakest_stress_set():
    m = S.stress_metrics(_stress())
    assert m["curve"] == {"0": {"500": 0.0, "1000": 0.5}, "1": {"1000": 0.0}}
    assert m["many_vars"] == {"per_seed": {"0": 1.0, "1": 0.0}, "by_hops": {"0": {"0": 1.0, "1": 0.0}}}


def test_stress_metrics_round_to_six_decimals():
    t = pd.DataFrame(
        [
            (0, "stress_few_vars", 1, 3, 1, 9, True),  # 1/3
            (0, "stress_few_vars", 1, 3, 2, 5, False),  # 2/3, an earlier step for the curve
            (0, "ref_paper", 0, 7, 1, 9, True),  # 1/7
        ],
        columns=["seed", "set", "hops", "n", "correct", "step", "named"],
    )
    m = S.stress_metrics(t)
    assert m["few_vars"] == {"per_seed": {"0": 0.333333}, "by_hops": {"1": {"0": 0.333333}}}
    assert m["reference"] == {"paper": {"per_seed": {"0": 0.142857}, "by_hops": {"0": {"0": 0.142857}}}}
    assert m["curve"] == {"0": {"5": 0.666667, "9": 0.333333}}


# ---- sections


def test_stress_section_tables_and_heat_map(drawn):  # noqa: F811
    part = S.stress_section(_stress())
    assert paras(part) == [
        "Each stress distribution is the paper distribution with one property pushed beyond what "
        "training shows (docs/binding.md lists them); the last rows are each generator with nothing "
        "pinned (paper, balanced), whichever one trained. Hops uniform, labels from the independent "
        "interpreter. Accuracy of the checkpoint binding_stress.checkpoint names, mean over seeds per "
        "hop count; `all` pools the hop classes, `worst seed` is the lowest seed's.",
        "The same per seed.",
    ]
    # mean over seeds per hop; `all` = mean of the seeds' pooled accuracies; stress sets in STRESS order
    assert all_cells(part)[0][1] == [
        ["distribution", "0 hops", "1 hops", "all", "worst seed"],
        ["many_vars", "0.500", "–", "0.500", "0.000"],
        ["few_vars", "0.750", "0.458", "0.562", "0.500"],
        [PAPER, "0.250", "–", "0.250", "0.250"],
    ]
    ((plot, args, kwargs, alt),) = drawn
    assert (plot, kwargs, alt) == ("heatmap", {}, "stress heat map")
    mat, title = args
    assert title == "stress accuracy"
    assert mat.to_dict("split") == {
        "index": ["many_vars", "few_vars", PAPER],
        "columns": ["0 hops", "1 hops"],
        "data": [
            [0.5, pytest.approx(float("nan"), nan_ok=True)],
            [0.75, pytest.approx(11 / 24)],
            [0.25, pytest.approx(float("nan"), nan_ok=True)],
        ],
    }


def test_stress_section_all_is_the_mean_over_three_seeds_of_each_seeds_pooled_accuracy(drawn):  # noqa: F811
    cells = [(0, 0, 5, 5), (0, 1, 5, 5), (1, 0, 5, 5), (1, 1, 5, 4), (2, 0, 5, 1), (2, 1, 5, 1)]  # seed, hops, n, ok
    rows = pd.DataFrame(cells, columns=["seed", "hops", "n", "correct"])
    stress = rows.assign(set="stress_few_vars", step=1000, named=True, n_lines=16, accuracy=rows["correct"] / rows["n"])
    # pooled per seed: 10/10, 9/10, 2/10 -> mean 0.7 (the median, 0.9, would hide the weak seed), worst 0.2
    assert all_cells(S.stress_section(stress))[0][1] == [
        ["distribution", "0 hops", "1 hops", "all", "worst seed"],
        ["few_vars", f"{(1 + 1 + 0.2) / 3:.3f}", f"{(1 + 0.8 + 0.2) / 3:.3f}", "0.700", "0.200"],
    ]


def test_stress_per_seed_table_every_cell(drawn):  # noqa: F811
    part = S.stress_section(_stress())
    assert len(all_cells(part)) == 2
    assert all_cells(part)[1] == (
        None,
        [
            ["distribution", "seed", "0 hops", "1 hops", "all"],
            ["many_vars", "0", "1.000", "–", "1.000"],
            ["many_vars", "1", "0.000", "–", "0.000"],
            ["few_vars", "0", "1.000", "0.167", "0.500"],
            ["few_vars", "1", "0.500", "0.750", "0.625"],
            [PAPER, "0", "0.250", "–", "0.250"],
        ],
    )


def test_stress_section_without_named_stress_rows():
    note = '<p class="note">No stress-suite programs (binding_data.stress_per_hop is 0).</p>'
    assert S.stress_section(_stress()[lambda d: d["set"] == "gen"]) == note
    assert S.stress_section(_stress()[lambda d: ~d["named"]]) == note


def test_frontier_section_curve_and_table(drawn):  # noqa: F811
    part = S.frontier_section(_stress())
    assert paras(part) == [
        "The stress suite scored at every checkpoint binding_stress.curve_every names: per seed, the "
        "weakest stress set and each generator unpinned (docs/binding.md gives the minutes per step)."
    ]
    assert cells(part) == [
        ["step", f"seed 0: {PAPER}", "seed 0: weakest stress set", "seed 1: weakest stress set"],
        ["500", "–", "0.000", "–"],
        ["1000", "0.250", "0.500", "0.000"],
    ]
    ((plot, args, kwargs, alt),) = drawn
    assert (plot, kwargs, alt) == ("lines_by_class", {}, "stress accuracy against training")
    curve, ylabel, legend = args
    pd.testing.assert_frame_equal(curve, S.frontier(_stress()))
    assert (ylabel, legend) == ("accuracy", "seed: set")


def test_frontier_section_one_checkpoint_is_a_note():
    one = _stress()[lambda d: d["named"]]
    assert S.frontier_section(one) == (
        '<p class="note">Only one checkpoint was scored (binding_stress.curve_every is 0).</p>'
    )


def test_sections_are_their_parts_one_per_line(drawn):  # noqa: F811
    def tags(part: str) -> list[str]:
        return [line.split(" ")[0].split(">")[0] for line in part.split("\n")]

    assert tags(S.stress_section(_stress())) == ["<p", "<table", "<img", "<p", "<table"]
    assert tags(S.frontier_section(_stress())) == ["<p", "<img", "<div", "<table"]

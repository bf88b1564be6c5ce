"""The binding_data and binding_programs sections as the stages load them."""

from __future__ import annotations

import pytest
from refusals import assert_refused, refuses_key

from emergence.core.io import PipelineError
from emergence.studies.binding.programs import ProgramConfig
from emergence.studies.binding.sets import DataParams, load_data_params, load_program_config

PARAMS = {
    "binding_data": {
        "n_programs": 50,
        "split": [0.8, 0.1, 0.1],
        "gen_per_cell": 3,
        "gen_lines": [2, 6],
        "gen_hops": [1, 4],
        "stress_per_hop": 7,
        "seed": 11,
    },
    "binding_programs": {"distribution": "paper", "n_lines": 9, "min_hops": 1, "max_hops": 3, "reject": ["one_value"]},
}


def test_load_data_params_reads_both_sections():
    data, cfg = load_data_params(PARAMS)
    assert data == DataParams(
        n_programs=50,
        split=(0.8, 0.1, 0.1),
        gen_per_cell=3,
        gen_lines=(2, 6),
        gen_hops=(1, 4),
        stress_per_hop=7,
        seed=11,
    )
    assert cfg == ProgramConfig(distribution="paper", n_lines=9, min_hops=1, max_hops=3, reject=("one_value",))
    assert load_program_config(PARAMS) == cfg


def test_load_program_config_reads_only_binding_programs():
    cfg = load_program_config({"binding_programs": {"n_lines": 5, "max_hops": 2}})
    assert cfg == ProgramConfig(n_lines=5, max_hops=2)


@pytest.mark.parametrize(
    "params, key, value, rule",
    [
        ({"binding_programs": {}}, "binding_data", None, "missing"),
        ({"binding_data": {"n_programs": 1000}}, "binding_programs", None, "missing"),
        ({**PARAMS, "binding_data": {}}, "binding_data.n_programs", None, "required"),
        (
            {**PARAMS, "binding_programs": {"n_lines": 3, "max_hops": 3}},
            "binding_programs.max_hops",
            "3 hops",
            "4 lines",
        ),
        ({**PARAMS, "binding_programs": {"n_line": 3}}, "binding_programs.n_line", None, "n_lines"),  # did you mean
    ],
)
def test_errors_name_the_section_and_key(params, key, value, rule):
    with refuses_key(key, value, rule):
        load_data_params(params)


def programs(**over) -> ProgramConfig:
    """binding_programs as a stage loads it, with `over` on top of the defaults."""
    return load_program_config({"binding_programs": over})


def program_error(**over) -> str:
    with pytest.raises(PipelineError) as e:
        programs(**over)
    return str(e.value)


P_KEYS = ("p_const", "p_fresh", "p_dead", "p_chain_copy", "p_extend")
# every shortcut the paper generator may reject, in the order the message lists them (heuristics.SHORTCUTS)
KNOWN = (
    "one_value, last_constant, first_constant, most_frequent_digit, query_first_assignment,"
    " most_common_final_value, query_first_value"
)


@pytest.mark.parametrize(
    "over",
    [
        dict(n_lines=1, max_hops=0),  # the smallest program: one constant line, queried
        dict(min_hops=0, max_hops=0),  # a chain of no copies
        dict(min_hops=2, max_hops=2),  # one hop count only
        dict(n_lines=5, max_hops=4),  # 4 hops need exactly 5 lines
        dict(n_lines=40, max_hops=25),  # 25 hops need 26 variables: every letter once
        dict(heuristic_target=0.01),
        dict(heuristic_target=0.99),
        *(dict([(key, p)]) for key in P_KEYS for p in (0.0, 1.0)),  # both ends of [0, 1] for each knob
        dict(hop_weight_power=0.0),  # uniform prior
        dict(hop_weight_power=20.0),
        dict(reject=[]),
        dict(reject=["one_value", "query_first_value"]),
        dict(distribution="paper", links="mixed"),
        dict(max_tries=1),
    ],
)
def test_program_config_edges_that_pass(over):
    # the section loads, and what it loads is the defaults with exactly these keys changed
    expected = {**over, "reject": tuple(over["reject"])} if "reject" in over else over
    assert programs(**over) == ProgramConfig(**expected)


@pytest.mark.parametrize(
    "over, key, value",
    [
        (dict(n_lines=0, max_hops=0), "n_lines", 0),
        (dict(min_hops=-1), "min_hops", -1),
        (dict(n_lines=40, max_hops=26), "max_hops", 26),  # 27 variables for the chain: only 26 letters exist
        (dict(heuristic_target=0.0), "heuristic_target", 0.0),
        (dict(heuristic_target=1.0), "heuristic_target", 1.0),
        (dict(hop_weight_power=-0.5), "hop_weight_power", -0.5),
        (dict(hop_weight_power=20.5), "hop_weight_power", 20.5),
        (dict(hop_weight_power=float("nan")), "hop_weight_power", float("nan")),
        (dict(max_tries=0), "max_tries", 0),
    ],
)
def test_program_config_bounds_name_the_key_and_value(over, key, value):
    assert_refused(program_error(**over).splitlines(), f"binding_programs.{key}", value)


@pytest.mark.parametrize(
    "over, key, value, rule",
    [
        (dict(n_lines=True, max_hops=0), "n_lines", True, "integer"),  # a bool is no count
        (dict(min_hops=3, max_hops=2), "min_hops", 3, "max_hops 2"),
        (dict(n_lines=4, max_hops=4), "max_hops", "4 hops", "5 lines"),
        # unknown names come sorted, the known one among them is not named
        (dict(reject=["zz", "one_value", "aa"]), "reject", ["aa", "zz"], KNOWN),
        (dict(links="mixed"), "links", "'mixed'", "distribution: paper"),
    ],
)
def test_program_config_errors(over, key, value, rule):
    assert_refused(program_error(**over).splitlines(), f"binding_programs.{key}", value, rule)


@pytest.mark.parametrize("key", P_KEYS)
@pytest.mark.parametrize("p", [-0.1, 1.1])
def test_each_probability_knob_is_checked_under_its_own_name(key, p):
    assert_refused(program_error(**{key: p}).splitlines(), f"binding_programs.{key}", p)


def test_program_config_validate_names_binding_programs_by_default():
    # validate() called without a section name (as the generators do) still names the section
    with refuses_key("binding_programs.n_lines", 0):
        ProgramConfig(n_lines=0).validate()


def data(**over) -> DataParams:
    """binding_data as a stage loads it: PARAMS' section with `over` on top."""
    return load_data_params({**PARAMS, "binding_data": {**PARAMS["binding_data"], **over}})[0]


@pytest.mark.parametrize(
    "over, expected",
    [
        # 3 programs split 0.4/0.3/0.3: round(1.2) = 1, round(0.9) = 1, and the last gets 3 - 2 = 1
        (dict(n_programs=3, split=[0.4, 0.3, 0.3]), dict(n_programs=3, split=(0.4, 0.3, 0.3))),
        # 10 programs 0.8/0.1/0.1: 8, 1, 1
        (dict(n_programs=10, split=[0.8, 0.1, 0.1]), dict(n_programs=10, split=(0.8, 0.1, 0.1))),
        # the sum may miss 1 by well under 1e-9
        (dict(split=[0.8, 0.1, 0.1 + 1e-12]), dict(split=(0.8, 0.1, 0.1 + 1e-12))),
        (dict(gen_hops=[0, 25]), dict(gen_hops=(0, 25))),  # 0 hops, and 25: one letter per link
        (dict(gen_lines=[3, 3], gen_hops=[2, 2]), dict(gen_lines=(3, 3), gen_hops=(2, 2))),  # one-cell ranges
        (dict(stress_per_hop=0, gen_per_cell=0), dict(stress_per_hop=0, gen_per_cell=0)),  # sets left empty
    ],
)
def test_data_params_edges_that_pass(over, expected):
    base = dict(n_programs=50, split=(0.8, 0.1, 0.1), gen_per_cell=3, gen_lines=(2, 6), gen_hops=(1, 4))
    assert data(**over) == DataParams(**{**base, "stress_per_hop": 7, "seed": 11, **expected})


@pytest.mark.parametrize(
    "over, key, value",
    [
        (dict(n_programs=2), "n_programs", 2),  # a split would be empty
        (dict(stress_per_hop=-1), "stress_per_hop", -1),
        (dict(gen_per_cell=-1), "gen_per_cell", -1),
    ],
)
def test_data_params_bounds_name_the_key_and_value(over, key, value):
    with refuses_key(f"binding_data.{key}", value):
        data(**over)


@pytest.mark.parametrize(
    "over, key, value, rule",
    [
        (dict(n_programs=True), "n_programs", True, "integer"),  # a bool is no count
        (dict(split=[-0.1, 0.6, 0.5]), "split", [-0.1, 0.6, 0.5], "non-negative"),  # sums to 1, but one is negative
        (
            dict(split=[0.5, 0.5, 0.5]),
            "split",
            [0.5, 0.5, 0.5],
            "summing to 1",
        ),  # 1.5: off by far more than the tolerance
        (dict(split=[0.8, 0.1, 0.1000001]), "split", [0.8, 0.1, 0.1000001], "summing to 1"),  # off by 1e-7 > 1e-9
        (dict(split=[0.7, 0.1, 0.1]), "split", [0.7, 0.1, 0.1], "summing to 1"),  # short of 1
        # a zero fraction is allowed as a fraction, but leaves its split empty
        (dict(split=[0.5, 0.5, 0.0]), "split", "50 programs", ">= 1"),
        # 10 programs 0.9/0.04/0.06: 9, round(0.4) = 0, 1
        (dict(n_programs=10, split=[0.9, 0.04, 0.06]), "split", "10 programs", ">= 1"),
        (dict(gen_hops=[-1, 3]), "gen_hops", [-1, 3], "[0, 25]"),
        (dict(gen_hops=[1, 26]), "gen_hops", [1, 26], "[0, 25]"),
        (dict(gen_lines=[5, 4]), "gen_lines", [5, 4], "empty"),
        (dict(gen_hops=[5, 4]), "gen_hops", [5, 4], "empty"),
    ],
)
def test_data_params_errors(over, key, value, rule):
    with refuses_key(f"binding_data.{key}", value, rule):
        data(**over)

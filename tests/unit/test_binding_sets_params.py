"""The binding_data and binding_programs sections as the stages load them."""

from __future__ import annotations

import pytest

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
    "params, message",
    [
        ({"binding_programs": {}}, "binding_data: section missing from params"),
        ({"binding_data": {"n_programs": 1000}}, "binding_programs: section missing from params"),
        ({**PARAMS, "binding_data": {"n_programs": 2}}, "binding_data.n_programs: need at least 3 programs, got 2"),
        ({**PARAMS, "binding_data": {}}, "binding_data.n_programs: required key missing"),
        (
            {**PARAMS, "binding_programs": {"n_lines": 3, "max_hops": 3}},
            "binding_programs.max_hops: a chain of 3 hops needs 4 lines but n_lines is 3",
        ),
        ({**PARAMS, "binding_programs": {"n_line": 3}}, "binding_programs.n_line: unknown key (did you mean n_lines?"),
    ],
)
def test_errors_name_the_section_and_key(params, message):
    with pytest.raises(PipelineError) as e:
        load_data_params(params)
    assert str(e.value).startswith(message)

"""The exact wording of one message of each family a user meets when something is refused. Every other test
checks what a refusal names (the key, the value, the file, `line N`; see tests/refusals.py); these few pin the
sentences, so that a rewording is one deliberate change here."""

from __future__ import annotations

import dataclasses

import pytest
from test_binding_batches import programs_table

from emergence.core.config import from_dict
from emergence.core.declared import DeclaredParams, StageReads
from emergence.core.io import PipelineError, write_parquet
from emergence.studies.assoc.theory import load_basis
from emergence.studies.binding.program_io import load_programs
from emergence.studies.binding.train_config import train_params
from emergence.studies.grounding.childes import validate_chat

HEADER = "@UTF8\n@Begin\n@Languages:\teng\n@Participants:\tCHI Target_Child\n"


def message(call) -> str:
    with pytest.raises(PipelineError) as e:
        call()
    return str(e.value)


def test_a_declared_bound():
    train = {"steps": 7, "batch_size": 3, "lr": -1.0}
    assert message(lambda: train_params({"binding_train": train}, 0, "cpu")) == (
        "binding_train.lr: must be a number > 0, got -1.0"
    )


@dataclasses.dataclass
class Section:
    steps: int = 1
    lr: float = 0.1


def test_an_unknown_key_with_the_one_it_may_mean():
    assert message(lambda: from_dict(Section, {"stepz": 3}, "sec")) == (
        "sec.stepz: unknown key (did you mean steps? known: steps, lr)"
    )


def test_an_input_file_with_its_line(tmp_path):
    path = tmp_path / "latin1.cha"
    path.write_bytes(HEADER.encode() + "*CHI:\tcaf\xe9 .\n@End\n".encode("latin-1"))
    assert message(lambda: validate_chat(path)) == f"{path}: line 5: not UTF-8 (byte 0xe9)"


def test_a_missing_input_with_the_stage_to_run_first(tmp_path):
    path = tmp_path / "basis.safetensors"
    assert message(lambda: load_basis(path)) == f"{path}: basis file not found (run assoc_basis first)"


def test_a_table_of_the_wrong_schema(tmp_path):
    path = tmp_path / "programs.parquet"
    write_parquet(programs_table().drop(columns="chain_lines"), path)
    assert message(lambda: load_programs(path)) == f"{path}: wrong schema, missing column 'chain_lines'"


def test_a_params_section_a_stage_does_not_declare():
    params = DeclaredParams({"s": {}, "other": {}}, StageReads("s", frozenset({"s"}), frozenset()))
    assert message(lambda: params["other"]) == (
        "pipeline.yaml: stage s reads params section 'other' but does not declare it under params:"
    )

"""bench/binding_line_depth.py: a line's chain depth on hand-worked programs, and the printed line-value
accuracy by depth of checkpoints whose every newline prediction is known (tests/unit/binding_oracle.py),
worked out again from the programs they were given: fresh draws of the training stream's distribution as
a params file of the test's own sets it: the stream's hop prior (8 hops all but always), planted
distractor and mixed links, which the fixed sets' do not have."""

from __future__ import annotations

import re

import numpy as np
import pytest
import yaml
from binding_oracle import SEEN, lines_of, oracle_checkpoint, scored, trace
from conftest import help_text, summary_line

from bench import binding_line_depth as line_depth
from emergence.studies.binding.programs import ProgramConfig
from emergence.studies.binding.sets import sample_program

PARAMS = {
    "binding_programs": {"distribution": "paper", "n_lines": 16, "max_hops": 8, "hop_weight_power": 0},
    "binding_train": {
        "steps": 10,
        "batch_size": 4,
        "lr": 0.01,
        "stream": True,
        "stream_hop_weight_power": 20,  # the stream's chains all but always 8 hops; the fixed sets' uniform
        "stream_distractor": "planted",
        "stream_links": "mixed",
    },
}
STREAM = ProgramConfig(distribution="paper", max_hops=8, hop_weight_power=20, distractor="planted", links="mixed")
WRONG = ("aeiou", "bcdfghjklm")  # the two checkpoints' wrong variables


def test_a_constant_line_has_depth_0_and_a_copy_one_more_than_its_sources_last_assignment():
    text = "a=5\nb=a\nc=b\na=c\nd=a\nb=7\ne=b\nf=d\n#e:"
    assert line_depth.line_depths(text) == [0, 1, 2, 3, 4, 0, 1, 5]  # e copies b's second write, of depth 0
    assert line_depth.line_depths("x=1\n#x:") == [0]


@pytest.fixture
def params_file(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(PARAMS))
    return path


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    d = tmp_path_factory.mktemp("line_depth")
    return [oracle_checkpoint(d, step, wrong) for step, wrong in zip((3, 8), WRONG)]


def depths(text: str) -> list[int]:
    """Each line's depth as the hops of its variable's chain right after it (the second interpreter)."""
    lines, _ = lines_of(text)
    return [len(trace(lines, lhs, i + 1)[1]) - 1 for i, (lhs, _) in enumerate(lines)]


def expected_line(ckpt, texts: list[str], wrong: str) -> str:
    right: dict[int, list[bool]] = {}
    for text in texts:
        for (lhs, _), d in zip(lines_of(text)[0], depths(text)):
            right.setdefault(min(d, 5), []).append(lhs not in wrong)
    cells = [f"{'5+' if d == 5 else d}: {np.mean(v):.2f} (n {len(v)})" for d, v in sorted(right.items())]
    return f"{ckpt}  line-value accuracy by depth  {', '.join(cells)}"


def test_main_prints_each_checkpoints_accuracy_by_depth(checkpoints, params_file, capsys, threads):
    SEEN.clear()
    line_depth.main([*map(str, checkpoints), "--programs", "30", "--seed", "5", "--params", str(params_file)])
    out = capsys.readouterr().out.splitlines()
    assert threads == [1]
    assert len(SEEN) == 2 and SEEN[0] == SEEN[1] and len(SEEN[0]) == 30  # one pass a checkpoint, the same programs
    texts = SEEN[0]
    rng = np.random.default_rng(5)
    assert texts == [sample_program(rng, STREAM).text for _ in range(30)]  # the stream's distribution, seed 5
    assert out == [expected_line(c, texts, w) for c, w in zip(checkpoints, WRONG)]
    found = {int(d) for d in re.findall(r"(\d)\+?: ", out[0])}
    assert found == set(range(6)) and "5+:" in out[0]  # every depth class, deeper lines pooled
    assert max(max(depths(t)) for t in texts) > 5
    SEEN.clear()


def test_main_draws_600_programs_from_seed_99_of_params_yaml_by_default(
    checkpoints, params_file, monkeypatch, capsys, threads
):
    SEEN.clear()
    monkeypatch.chdir(params_file.parent)
    line_depth.main([str(checkpoints[0])])
    default = scored()
    line_depth.main([str(checkpoints[0]), "--seed", "98", "--programs", "600"])
    other = scored()
    assert len(default) == 600 and len(other) == 600 and default != other
    rng = np.random.default_rng(99)
    assert default[:5] == [sample_program(rng, STREAM).text for _ in range(5)]
    out = capsys.readouterr().out.splitlines()
    assert out[0] == expected_line(checkpoints[0], default, WRONG[0])


def test_help_names_the_checkpoints_and_every_flag(capsys):
    out = help_text(lambda: line_depth.main(["--help"]), capsys)
    assert summary_line(line_depth) in out
    assert "checkpoints step{N} directories of binding runs" in out
    assert "--programs PROGRAMS" in out and "--seed SEED" in out and "--params PARAMS" in out

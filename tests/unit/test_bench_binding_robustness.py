"""bench/binding_robustness.py: which programs it scores (each stress set and both generators unpinned,
the paper distribution and the balanced generator, each from its own seed and at its own size) and the
printed accuracy by set and hop count, pooled and counted, of a checkpoint whose every answer is known
(tests/unit/binding_oracle.py), worked out again from the programs it was given."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from binding_oracle import SEEN, lines_of, oracle_checkpoint, trace
from conftest import help_text, summary_line

from bench import binding_robustness as robustness
from emergence.studies.binding.programs import ProgramConfig
from emergence.studies.binding.sets import generate_table
from emergence.studies.binding.stress import stress_accuracy, stress_table

WRONG = "aeiouwxyz"
PAPER = ProgramConfig(distribution="paper")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return oracle_checkpoint(tmp_path_factory.mktemp("robustness"), 4, WRONG)


@pytest.fixture
def scored_programs(monkeypatch) -> list:
    """stress_accuracy as it is, the programs it was handed kept."""
    handed = []

    def spy(model, programs, seed, step):
        handed.append(programs)
        return stress_accuracy(model, programs, seed=seed, step=step)

    monkeypatch.setattr(robustness, "stress_accuracy", spy)
    return handed


def table(out: str) -> tuple[list[str], dict[str, list[float]]]:
    head, index, *rows = out.splitlines()
    assert index.split() == ["set"]
    return head.split()[1:], {row.split()[0]: [float(x) for x in row.split()[1:]] for row in rows}


def same(got: list[float], want: list[float]) -> bool:
    return len(got) == len(want) and all(
        (math.isnan(g) and math.isnan(w)) or g == pytest.approx(w, abs=1e-9) for g, w in zip(got, want)
    )


def texts(df: pd.DataFrame, name: str) -> list[str]:
    return df.loc[df["set"] == name, "program"].tolist()


def test_main_scores_every_set_by_hop_count(checkpoint, scored_programs, capsys, threads):
    SEEN.clear()
    robustness.main([str(checkpoint), "--per-hop", "2", "--paper", "7", "--balanced", "5", "--seed", "3"])
    columns, rows = table(capsys.readouterr().out)
    assert threads == [1]
    (programs,) = scored_programs
    stress = stress_table(np.random.default_rng(3), PAPER, 2)
    paper = generate_table(np.random.default_rng(4), PAPER, 7, set_name="paper")
    balanced = generate_table(np.random.default_rng(5), ProgramConfig(), 5, set_name="balanced")
    for name in stress["set"].unique():
        assert texts(programs, name) == texts(stress, name)
    assert texts(programs, "paper") == texts(paper, "paper")
    assert texts(programs, "balanced") == texts(balanced, "balanced")
    names = sorted([*stress["set"].unique(), "paper", "balanced"])
    assert len(names) == 13 and list(rows) == names and columns == ["0", "1", "2", "3", "4", "all", "n"]
    assert [t for batch in SEEN for t in batch] == programs["program"].tolist()  # the checkpoint scored them all
    for name, got in rows.items():
        hits: dict[int, list[bool]] = {h: [] for h in range(5)}
        for text in texts(programs, name):
            lines, query = lines_of(text)
            hits[len(trace(lines, query)[1]) - 1].append(query not in WRONG)
        flat = [x for v in hits.values() for x in v]
        want = [round(sum(v) / len(v), 3) if v else math.nan for v in hits.values()]
        assert same(got, [*want, round(sum(flat) / len(flat), 3), len(flat)]), name
    assert rows["paper"][-1] == 7 and rows["balanced"][-1] == 5 and rows["ref_paper"][-1] == 10
    assert any(0 < x < 1 for row in rows.values() for x in row[:5])  # right and wrong answers both
    SEEN.clear()


def test_main_draws_60_per_hop_600_paper_and_300_balanced_from_seeds_11_12_13_by_default(
    checkpoint, monkeypatch, capsys, threads
):
    calls = []

    def fake_stress(rng, cfg, n_per_hop):
        calls.append(("stress", rng.bit_generator.state, cfg, n_per_hop))
        return stress_table(rng, cfg, 1)

    def fake_generate(rng, cfg, n, *, set_name):
        calls.append((set_name, rng.bit_generator.state, cfg, n))
        return generate_table(rng, cfg, 3, set_name=set_name)

    monkeypatch.setattr(robustness, "stress_table", fake_stress)
    monkeypatch.setattr(robustness, "generate_table", fake_generate)
    robustness.main([str(checkpoint), "--threads", "2"])
    state = {seed: np.random.default_rng(seed).bit_generator.state for seed in (11, 12, 13)}
    assert calls == [
        ("stress", state[11], PAPER, 60),
        ("paper", state[12], PAPER, 600),
        ("balanced", state[13], ProgramConfig(), 300),
    ]
    assert threads == [2]
    _, rows = table(capsys.readouterr().out)
    assert rows["paper"][-1] == 3 and rows["ref_balanced"][-1] == 5
    SEEN.clear()


def test_help_names_the_checkpoint_and_every_flag(capsys):
    out = help_text(lambda: robustness.main(["--help"]), capsys)
    assert summary_line(robustness) in out
    assert "checkpoint a step{N} directory of a binding run" in out
    assert "--per-hop PER_HOP stress programs per (distribution, hop count)" in out
    assert "--paper PAPER programs of the paper distribution" in out
    assert "--balanced BALANCED programs of the balanced generator" in out
    assert "--seed SEED" in out and "--threads THREADS" in out

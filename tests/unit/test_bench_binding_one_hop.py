"""bench/binding_one_hop.py: a 1-hop chain's layout on hand-worked programs, and what it prints: the
accuracy of a checkpoint whose every answer is known (tests/unit/binding_oracle.py) on the second
generator's first 1-hop programs from the seed, split by layout, and the layout means of 1-hop chains in
the training stream (set by a params file of the test's own) beside the second generator's, all worked
out again from the programs by a second interpreter."""

from __future__ import annotations

import functools
import random
import re

import numpy as np
import pytest
import yaml
from binding_oracle import SEEN, lines_of, oracle_checkpoint, scored, trace
from conftest import help_text, summary_line

from bench import binding_one_hop as one_hop
from emergence.studies.binding.programs import ProgramConfig
from emergence.studies.binding.sets import sample_program

PARAMS = {
    "binding_programs": {"distribution": "paper", "n_lines": 16, "max_hops": 4, "hop_weight_power": 3},
    "binding_train": {
        "steps": 10,
        "batch_size": 4,
        "lr": 0.01,
        "stream": True,
        "stream_hop_weight_power": 0,  # the stream's hop classes uniform: 1 hop five times as often as the sets'
        "stream_distractor": "planted",
        "stream_links": "mixed",
    },
}
spec = one_hop.spec  # the sibling script as the bench imports it
STREAM = ProgramConfig(distribution="paper", hop_weight_power=0, distractor="planted", links="mixed")
WRONG = ("aeiouwxyz", "bcdfg")


# --- layout ----------------------------------------------------------------


def test_layout_of_a_1_hop_chain_distance_rewrite_and_constant_on_line_1():
    assert one_hop.layout("a=5\nc=2\nb=a\na=3\n#b:") == {
        "distance": 2,
        "source_rewritten": True,  # `a` written again right after the copy
        "const_line1": True,
    }
    assert one_hop.layout("c=1\na=5\nb=a\nc=a\nd=b\n#b:") == {
        "distance": 1,
        "source_rewritten": False,  # `c=a` reads the source, writes another
        "const_line1": False,
    }
    assert one_hop.layout("a=1\nb=4\na=5\nb=a\nd=2\na=3\n#b:")["source_rewritten"] is True  # two lines on
    assert one_hop.layout("a=1\na=5\nb=a\nd=2\n#b:") == {"distance": 1, "source_rewritten": False, "const_line1": False}
    self_copy = one_hop.layout("a=5\na=a\n#a:")  # the copy line itself is no rewrite
    assert self_copy == {"distance": 1, "source_rewritten": False, "const_line1": True}


def test_layout_is_none_unless_the_query_is_1_hop():
    assert one_hop.layout("a=5\nb=a\n#a:") is None  # 0 hops
    assert one_hop.layout("a=5\nb=a\nc=b\n#c:") is None  # 2 hops
    assert one_hop.layout("a=5\nb=a\nb=4\n#b:") is None  # rewritten by a constant: 0 hops


def test_help_names_the_checkpoint_and_every_flag(capsys):
    out = help_text(lambda: one_hop.main(["--help"]), capsys)
    assert summary_line(one_hop) in out
    assert "checkpoint a step{N} directory of a binding run" in out
    assert "--programs PROGRAMS 1-hop programs of the second generator" in out
    assert "--params PARAMS whose binding_programs / binding_train give the stream" in out
    assert "--seed SEED" in out


# --- main ------------------------------------------------------------------


def layout(text: str) -> dict | None:
    """The second interpreter's layout of a 1-hop chain (None for other hop counts)."""
    lines, query = lines_of(text)
    _, chain = trace(lines, query)
    if len(chain) != 2:
        return None
    source = lines[chain[1]][1]
    later = [lhs for lhs, _ in lines[chain[1] + 1 :]]
    return {"distance": chain[1] - chain[0], "source_rewritten": source in later, "const_line1": chain[0] == 0}


def first_one_hop(seed: int, n: int) -> list[str]:
    """The second generator's first n 1-hop programs from `seed`."""
    r, out = random.Random(seed), []
    while len(out) < n:
        p = spec.random_program(r)
        if p and layout(p["program"]):
            out.append(p["program"])
    return out


def blocks(out: str) -> tuple[str, list[tuple[str, dict]], list[str], list[str], dict[str, list[float]]]:
    """(accuracy line, the three split tables as (index name, label -> [mean, size]), the layout title,
    its column names, its rows)."""
    first, *rest = out.splitlines()
    chunks, chunk = [], []
    for line in [*rest, ""]:
        if line.strip():
            chunk.append(line)
        elif chunk:
            chunks, chunk = [*chunks, chunk], []
    assert len(chunks) == 4
    tables = []
    for head, index, *rows in chunks[:3]:
        assert head.split() == ["mean", "size"]
        tables.append((index.strip(), {row.split()[0]: [float(x) for x in row.split()[1:]] for row in rows}))
    title, head, *rows = chunks[3]
    return first, tables, title, head.split(), {row.split()[0]: [float(x) for x in row.split()[1:]] for row in rows}


def split(rows: list[dict], key, correct: list[bool]) -> dict[str, list[float]]:
    groups: dict = {}
    for row, ok in zip(rows, correct):
        groups.setdefault(key(row), []).append(ok)
    return {str(k): [round(float(np.mean(v)), 3), len(v)] for k, v in sorted(groups.items())}


def means(rows: list[dict]) -> list[float]:
    return [round(float(np.mean([r[k] for r in rows])), 3) for k in ("distance", "source_rewritten", "const_line1")]


def check_output(out: str, ckpt, seed: int, n: int, wrong: str, texts: list[str]) -> None:
    assert texts == first_one_hop(seed, n)  # the second generator's 1-hop programs, in draw order
    rows = [layout(t) for t in texts]
    correct = [lines_of(t)[1] not in wrong for t in texts]
    first, tables, title, head, stream = blocks(out)
    assert first == f"{ckpt}: {n} 1-hop programs of the second generator, accuracy {np.mean(correct):.3f}"
    assert tables == [
        ("source_rewritten", split(rows, lambda r: r["source_rewritten"], correct)),
        ("const_line1", split(rows, lambda r: r["const_line1"], correct)),
        ("distance", split(rows, lambda r: min(r["distance"], 4), correct)),  # 4 stands for 4 and more
    ]
    assert max(r["distance"] for r in rows) > 4 and len(tables[2][1]) == 4
    rng = np.random.default_rng(seed)
    ours = [x for x in (layout(sample_program(rng, STREAM).text) for _ in range(5000)) if x]
    r = random.Random(seed)
    theirs = [x for x in (layout(p["program"]) for p in (spec.random_program(r) for _ in range(20000)) if p) if x]
    assert title == f"1-hop chain layout, means ({len(ours)} / {len(theirs)} 1-hop programs):"
    assert head == ["training", "stream", "second", "generator"]
    keys = ("distance", "source_rewritten", "const_line1")
    assert stream == {k: [a, b] for k, a, b in zip(keys, means(ours), means(theirs))}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    d = tmp_path_factory.mktemp("one_hop")
    return [oracle_checkpoint(d, step, wrong) for step, wrong in zip((2, 9), WRONG)]


@pytest.fixture
def params_file(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(PARAMS))
    return path


def test_main_scores_the_programs_of_its_seed_and_size_with_the_stream_of_its_params(
    checkpoints, params_file, monkeypatch, capsys, threads
):
    SEEN.clear()
    # at most 6000 draws: the first 60 1-hop programs come long before (the bench's own bound, 100,000 draws,
    # is reached every time, since the other hop counts never fill)
    monkeypatch.setattr(spec, "draw", functools.partial(spec.draw, max_draws=6000))
    one_hop.main([str(checkpoints[1]), "--programs", "60", "--seed", "2", "--params", str(params_file)])
    out = capsys.readouterr().out
    check_output(out, checkpoints[1], 2, 60, WRONG[1], scored())
    assert re.search(r"accuracy 0\.\d\d\d$", out.splitlines()[0])


def test_main_scores_400_programs_from_seed_5_of_params_yaml_by_default(
    checkpoints, params_file, monkeypatch, capsys, threads
):
    SEEN.clear()
    monkeypatch.chdir(params_file.parent)
    one_hop.main([str(checkpoints[0])])
    check_output(capsys.readouterr().out, checkpoints[0], 5, 400, WRONG[0], scored())
    assert threads == [1]

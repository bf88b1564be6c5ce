"""The shortcut heuristics' guesses, their match patterns and training match rates, checked against a
second implementation written here (exec-based semantics, plain loops) on programs where the cases differ:
ties between digits, the digit 0 as a guess, copies after the last constant, no guess at all."""

from __future__ import annotations

import random
from collections import Counter

import pandas as pd
import pytest
from refusals import refuses

from emergence.studies.binding.heuristics import CONTROLLED, HEURISTICS, evaluate, match_pattern, one_value
from emergence.studies.binding.programs import Program
from emergence.studies.binding.sets import heuristic_table

HEUR = list(HEURISTICS)


# ---- a second implementation of the heuristics


def program(text: str, answer: int = 0) -> Program:
    *body, query = text.split("\n")
    return Program(tuple(tuple(line.split("=")) for line in body), query[1], answer, hops=0, chain_lines=())


def run(lines) -> dict[str, int]:
    env: dict = {}
    exec("\n".join(f"{lhs}={rhs}" for lhs, rhs in lines), {}, env)
    return env


def mode(values) -> int:
    counts = Counter(values)
    return min(counts, key=lambda d: (-counts[d], d)) if counts else -1


def reference(p: Program) -> dict[str, int]:
    """The six heuristics as the docstrings define them, by a different route."""
    consts = [int(rhs) for _, rhs in p.lines if rhs.isdigit()]
    first_q = [i for i, (lhs, _) in enumerate(p.lines) if lhs == p.query][0]
    q_rhs = p.lines[first_q][1]
    return {
        "last_constant": consts[-1] if consts else -1,
        "first_constant": consts[0] if consts else -1,
        "most_frequent_digit": mode(consts),
        "query_first_assignment": int(q_rhs) if q_rhs.isdigit() else -1,
        "most_common_final_value": mode(run(p.lines).values()),
        "query_first_value": run(p.lines[: first_q + 1])[p.query],
    }


def random_program(r: random.Random) -> Program:
    lines, defined = [], []
    for _ in range(r.randrange(1, 9)):
        lhs = r.choice("abcd")
        rhs = r.choice(defined) if defined and r.random() < 0.5 else str(r.randrange(4))  # few digits: ties
        lines.append((lhs, rhs))
        defined = sorted(set(defined) | {lhs})
    return Program(tuple(lines), r.choice(defined), answer=0, hops=0, chain_lines=())


def test_heuristics_match_a_second_implementation_on_random_programs():
    r = random.Random(7)
    for _ in range(400):
        p = random_program(r)
        assert {name: h(p) for name, h in HEURISTICS.items()} == reference(p), p.text


# ---- guesses at their boundaries


@pytest.mark.parametrize(
    "text, name, want",
    [
        ("a=7\nb=2\nc=7\nd=2\n#a:", "most_frequent_digit", 2),  # tie 7/2, 7 seen first: smallest wins
        ("a=0\nb=0\nc=5\n#c:", "most_frequent_digit", 0),  # the digit 0 counts
        ("a=9\nb=1\nc=b\na=b\n#a:", "most_common_final_value", 1),  # a=1, b=1, c=1
        ("a=9\nb=3\n#a:", "most_common_final_value", 3),  # tie 9/3 -> 3
        ("a=4\nb=6\nc=a\nd=c\n#d:", "last_constant", 6),  # copies after the last constant
        ("a=5\nb=a\nb=8\n#b:", "first_constant", 5),
        ("a=5\nb=a\na=2\nb=3\n#b:", "query_first_value", 5),  # b's first write copies a=5
        ("a=5\nb=a\na=2\nb=3\n#b:", "query_first_assignment", -1),  # ... which is no constant
        ("b=0\nb=4\n#b:", "query_first_assignment", 0),
        # no guess at all is -1, never a digit: a program text with no constant, a query never assigned
        ("a=b\nc=a\n#c:", "last_constant", -1),
        ("a=b\nc=a\n#c:", "first_constant", -1),
        ("a=b\nc=a\n#c:", "most_frequent_digit", -1),
        ("a=4\n#c:", "query_first_assignment", -1),
    ],
)
def test_heuristic_boundaries_by_hand(text, name, want):
    assert HEURISTICS[name](program(text)) == want


def test_a_copy_of_an_unassigned_variable_is_named_with_its_line():
    with refuses("line 1 'b=c'", "undefined", "'c'"):
        evaluate([("a", "1"), ("b", "c")])


# ---- match patterns and match rates


def test_one_value_and_match_pattern_by_hand():
    assert one_value(program("a=3\nb=a\nc=3\n#c:")) == 3
    assert one_value(program("a=3\nb=0\n#b:")) == -1
    # a=2 b=a c=7 a=c, query a (answer 7): last 7, first 2, mode 2 (tie 2/7), query_first 2,
    # final values a=7 b=2 c=7 -> 7.
    p = program("a=2\nb=a\nc=7\na=c\n#a:", answer=7)
    bits = {name: i for i, name in enumerate(CONTROLLED)}
    assert match_pattern(p, 7) == (1 << bits["last_constant"]) | (1 << bits["most_common_final_value"])
    want_2 = sum(1 << bits[n] for n in ("first_constant", "most_frequent_digit", "query_first_assignment"))
    assert match_pattern(p, 2) == want_2
    assert match_pattern(p, 5) == 0


def test_heuristic_table_rates_by_hand():
    df = pd.DataFrame({"answer": [0, 3, 3, 9, 0]})
    for i, name in enumerate(HEUR):
        # three guess patterns: -1 never matches, a 0 matches only where the answer is 0
        df[f"heur_{name}"] = [[0, 3, -1, 9, -1], [-1, -1, -1, -1, 0], [0, 0, 0, 0, 0]][i % 3]
    table = heuristic_table(df).set_index("heuristic")
    want = {0: 3 / 5, 1: 1 / 5, 2: 2 / 5}
    for i, name in enumerate(HEUR):
        assert table.loc[name, "match_rate"] == pytest.approx(want[i % 3])
    assert (table["n"] == 5).all()

"""The balanced generator's draws, read with scripted random numbers (exact positions and picks)
and checked against the independent readers (programs.trace, interpreter.run_program, heuristics)."""

import random

import pytest
from scripted import Scripted

from emergence.studies.binding import balanced as b
from emergence.studies.binding.heuristics import match_pattern
from emergence.studies.binding.interpreter import run_program
from emergence.studies.binding.programs import ProgramConfig, trace


class Zero(random.Random):
    def random(self):
        return 0.0


def test_pick_take_and_other_digit_scale_the_draw():
    assert b._pick(Scripted([0.5]), "abcd") == "c"
    pool = list("abcd")
    assert b._take(Scripted([0.75]), pool) == "d" and pool == list("abc")
    # (answer + 1 + floor(9u)) % 10: u = 0 -> answer + 1, u -> 1 -> answer + 9, never the answer.
    for answer in range(10):
        assert b._other_digit(Scripted([0.0]), answer) == (answer + 1) % 10
        assert b._other_digit(Scripted([0.5]), answer) == (answer + 5) % 10
        assert b._other_digit(Scripted([0.999]), answer) == (answer + 9) % 10


@pytest.mark.parametrize(
    ("n", "hops", "draws", "expected"),
    [
        # end = 2 + floor(.99*6) = 7, start = 1 + floor(.5*6) = 4; after from [5, 6] -> 5;
        # the query's pre-assignment from [1, 2, 3, 6] (line 0 only when nothing else) -> 3.
        (8, 1, [0.99, 0.5, 0.0, 0.5], ([4, 7], 5, 3)),
        # end = 3 + floor(.99*5) = 7, start = 1, middle link from [2..6] -> 4; after from [2, 3, 5, 6] -> 6;
        # pre-assignment from lines before 7 but not 1, 4, 6: [2, 3, 5] -> 5.
        (8, 2, [0.99, 0.0, 0.5, 0.99, 0.99], ([1, 4, 7], 6, 5)),
        # n = hops + 3 still has room: end = 3, start = 1, link 2; after 4; only line 0 left for the query.
        (5, 2, [0.0, 0.0, 0.0, 0.0, 0.0], ([1, 2, 3], 4, 0)),
        # no hop: the chain is its one line, end = 1 + floor(.99*3) = 3 (start drawn, unused); nothing after it;
        # the pre-assignment from [1, 2] -> 1.
        (4, 0, [0.99, 0.0, 0.0, 0.0], ([3], -1, 1)),
        # cramped (n < hops + 3): a random subset, nothing left for a distractor or a pre-assignment.
        (2, 1, [0.0, 0.0, 0.3, 0.3], ([0, 1], -1, -1)),
        (1, 0, [0.0, 0.3, 0.3], ([0], -1, -1)),
        (4, 2, [0.99, 0.0, 0.0, 0.0, 0.0], ([0, 1, 3], 2, -1)),
    ],
)
def test_layout_places_the_chain_its_distractor_and_the_query_pre_assignment(n, hops, draws, expected):
    r = Scripted(draws)
    assert b._layout(r, n, hops) == expected
    assert r.draws == []  # every draw used, none extra


def test_layout_line_zero_is_free_whenever_there_is_room():
    """With n >= hops + 3 the chain starts at line 1 or later and ends uniformly on hops+1 .. n-1."""
    for hops in range(4):
        n = hops + 3
        ends = set()
        for seed in range(60):
            chain, after, qpre = b._layout(random.Random(seed), n, hops)
            assert len(chain) == hops + 1 and chain[0] >= 1 and chain == sorted(set(chain))
            assert after == -1 or (after > chain[0] and after not in chain)
            ends.add(chain[-1])
        assert ends == {hops + 1, hops + 2}


CVARS = ["a", "b", "q"]


@pytest.mark.parametrize(
    ("lhs", "defined", "knobs", "draws", "expected"),
    [
        # chain copy on a draw below p_chain_copy: chained [a, b] -> b
        ("z", "axbyw", {"p_chain_copy": 0.25}, [0.05, 0.5], "b"),
        # exactly p_chain_copy is not below it, nor p_extend: a uniform distractor [x, y, w] -> x
        ("z", "axbyw", {"p_chain_copy": 0.25, "p_extend": 0.5}, [0.25, 0.5, 0.0], "x"),
        # below p_extend: the newest distractor variable
        ("z", "axbyw", {"p_chain_copy": 0.25, "p_extend": 0.5}, [0.9, 0.1], "w"),
        # no distractor variable: a chain variable without a p_chain_copy draw; never the lhs itself
        ("z", "ab", {}, [0.5], "b"),
        ("a", "ab", {}, [0.0], "b"),
        # the lhs is left out of the distractors: [x, w] -> w
        ("y", "axbyw", {"p_chain_copy": 0.0, "p_extend": 0.0}, [0.5, 0.5, 0.5], "w"),
        # no chain variable defined: no p_chain_copy draw, the p_extend one decides
        ("z", "x", {"p_extend": 0.5}, [0.1], "x"),
        ("z", "xy", {"p_extend": 0.5}, [0.5, 0.0], "x"),
        # nothing to copy: None, without a draw
        ("z", "", {}, [], None),
        ("x", "x", {}, [], None),
    ],
)
def test_copy_source(lhs, defined, knobs, draws, expected):
    r = Scripted(draws)
    got = b._copy_source(r, ProgramConfig(**knobs), lhs, {v: i for i, v in enumerate(defined)}, CVARS)
    assert got == expected and r.draws == []


def _lhs(draws, *, pre_query=False, live="a", pending=("b", "e"), dead=(), defined="", pool="mn", **knobs):
    r, dead, pool = Scripted(draws), list(dead), list(pool)
    got = b._distractor_lhs(
        r, ProgramConfig(**knobs), pre_query, "q", live, list(pending), dead, dict.fromkeys(defined, 0), pool
    )
    assert r.draws == []
    return got, dead, pool


def test_distractor_lhs():
    assert _lhs([], pre_query=True, dead="cd", defined="acx") == ("q", ["c", "d"], ["m", "n"])
    # a dead chain variable on a draw below p_dead, removed from the dead list
    assert _lhs([0.25, 0.99], dead="cd", defined="acxq", p_dead=0.5) == ("d", ["c"], ["m", "n"])
    # exactly p_dead is not below it; exactly p_fresh reuses one of [c, x] (never the live one nor the query)
    assert _lhs([0.5, 0.5, 0.0], dead="cd", defined="acxq", p_dead=0.5, p_fresh=0.5) == ("c", ["c", "d"], ["m", "n"])
    assert _lhs([0.5, 0.5, 0.5], dead="cd", defined="acxq", p_dead=0.5, p_fresh=0.5)[0] == "x"
    # nothing to reuse: a pending chain variable or (the None slot) a fresh letter from the pool
    assert _lhs([0.99, 0.5], defined="aq", p_dead=0.5) == ("n", [], ["m"])
    assert _lhs([0.0], defined="aq", p_dead=0.5) == ("b", [], ["m", "n"])
    # below p_fresh: fresh even with something to reuse; a pending variable already defined is not fresh
    assert _lhs([0.25, 0.0], live=None, pending="be", defined="e", p_fresh=0.5) == ("b", [], ["m", "n"])
    assert _lhs([0.25, 0.5, 0.5], live=None, pending="eb", defined="e", p_fresh=0.5) == ("n", [], ["m"])
    # an empty pool forces a reuse, without a p_fresh draw
    assert _lhs([0.0], defined="acx", pool="", p_fresh=1.0) == ("c", [], [])


def _draws(answer: int, target: int) -> list[float]:
    """The six draws sample_balanced reads first (docs: answer = floor(10u), bit i set iff its draw is below
    heuristic_target), written down for an answer and a target pattern, at a heuristic_target of 0.5."""
    return [(answer + 0.5) / 10, *(0.0 if target >> i & 1 else 0.9 for i in range(5))]


@pytest.mark.parametrize(("n", "hops"), [(16, 0), (16, 1), (16, 4), (6, 3), (5, 2), (4, 3), (3, 1), (1, 0)])
def test_sample_balanced_programs_are_valid_and_hit_their_target(n, hops):
    cfg = ProgramConfig(max_hops=max(hops, 0) if n <= 4 else 4, heuristic_target=0.5)
    for seed in range(40):
        answer, target = seed % 10, seed % 32
        p = b.sample_balanced(Scripted(_draws(answer, target), random.Random(seed)), cfg, n, hops)
        assert (len(p.lines), p.hops, p.answer) == (n, hops, answer)
        assert trace(p.lines, p.query) == (answer, p.chain_lines)
        assert run_program(p.text) == (answer, hops)
        assert all(rhs.isdigit() or rhs in dict(p.lines[:i]) for i, (_, rhs) in enumerate(p.lines))
        if n >= 16:  # room for every pattern: the program matches the heuristics the target names, no other
            assert match_pattern(p, answer) == target


@pytest.mark.parametrize(("max_tries", "hit_at", "kept"), [(5, 3, 3), (5, 1, 1), (5, None, 5), (1, None, 1)])
def test_sample_balanced_keeps_the_first_proposal_on_target_or_else_its_last(monkeypatch, max_tries, hit_at, kept):
    """Up to max_tries proposals for the answer and target drawn first; the first whose pattern is the
    target is kept, and when none is, the last one."""
    proposals = []

    def propose(r, cfg, n, hops, answer, target):
        proposals.append((answer, target))
        return len(proposals)  # the proposal's number stands for the program

    monkeypatch.setattr(b, "_propose", propose)
    monkeypatch.setattr(b, "match_pattern", lambda prog, answer: 0b00110 if prog == hit_at else 0b01000)
    cfg = ProgramConfig(max_tries=max_tries, heuristic_target=0.5)
    assert b.sample_balanced(Scripted(_draws(7, 0b00110)), cfg, 16, 2) == kept
    assert proposals == [(7, 0b00110)] * kept


def test_answer_and_target_draws_at_their_edges():
    """answer = floor(10u); bit i set iff its draw is below heuristic_target (a draw equal to it is not)."""
    cfg = ProgramConfig(heuristic_target=0.5)
    tail = random.Random(3)
    for first, bits, answer, target in [(0.95, [0.5] * 5, 9, 0), (0.0, [0.4, 0.5, 0.4, 0.5, 0.4], 0, 0b10101)]:
        r = Scripted([first, *bits], tail)
        p = b.sample_balanced(r, cfg, 16, 1)
        assert p.answer == answer and trace(p.lines, p.query)[0] == answer
        assert match_pattern(p, answer) == target


def _src(lines):
    """Each variable's source (the constant line its final value comes from), most recently written last."""
    filled = [(lhs, rhs or "0") for lhs, rhs in lines]
    last = {lhs: i for i, (lhs, _) in enumerate(filled)}
    return {v: trace(filled, v)[1][-1] for v in sorted(last, key=last.get)}


def test_structure_with_every_draw_zero():
    """u = 0 everywhere: chain on lines 1-2 (a=7, b=a), the query b pre-assigned on line 0, the dead a
    overwritten on the distractor line 3, then fresh letters copying a chain variable (p_const 0: every
    line that may copy does)."""
    lines, query, chain, qpre, src = b._structure(Zero(), ProgramConfig(p_const=0.0), 8, 1, 7)
    assert lines == [["b", None], ["a", "7"], ["b", "a"], ["a", None], ["c", "a"], ["d", "a"], ["e", "a"], ["f", "a"]]
    assert (query, chain, qpre) == ("b", [1, 2], 0)
    assert list(src.items()) == [("b", 1), ("a", 3), ("c", 3), ("d", 3), ("e", 3), ("f", 3)]


@pytest.mark.parametrize("p_const", [0.0, 0.6, 1.0])
def test_structure_chain_sources_and_constants(p_const):
    cfg = ProgramConfig(p_const=p_const)
    for seed in range(40):
        n, hops = 16, seed % 5
        lines, query, chain, qpre, src = b._structure(random.Random(seed), cfg, n, hops, 7)
        filled = [(lhs, rhs or "3") for lhs, rhs in lines]
        assert trace(filled, query) == (7, tuple(reversed(chain)))
        assert src == _src(lines) and list(src) == list(_src(lines))
        assert all(lhs != rhs for lhs, rhs in lines)
        if qpre != -1:
            assert lines[qpre] == [query, None] and qpre < chain[-1]
        # Distractor lines that could copy something (a variable other than their own is written before them):
        # p_const 1 -> none copies; p_const 0 -> all do but the query's pre-assignment and the one distractor
        # constant placed after the chain's constant.
        could = [i for i in range(n) if i not in chain and {lhs for lhs, _ in lines[:i]} - {lines[i][0]}]
        constants = [i for i in could if lines[i][1] is None and i != qpre]
        if p_const == 1.0:
            assert len(constants) == len(could) - (qpre in could)
        elif p_const == 0.0:
            assert len(constants) <= 1 and all(i > chain[0] for i in constants)
        else:
            assert 0 < len(constants) < len(could) - 1


@pytest.mark.parametrize(
    ("free_lines", "weights", "answer", "target", "draws", "expected"),
    [
        # Lines 1-3 free, drawn 0; decoy 6; order by (weight 1, draw) -> [3, 2, 1]. Both modes wanted on 5:
        # the final-value pass recolours 1 then 2 (heaviest first, ties -> line order reversed), then 5 leads
        # both tallies and nothing else moves.
        (3, [1, 1, 1, 1, 1], 5, 0b10100, [0.0, 0.0, 0.0, 0.0, 0.3, 0.2, 0.1], ["1", "5", "5", "0", "2"]),
        # Line 1 holds three final values, line 2 none: one recolour of line 1 makes 5 the final-value
        # mode while 0 stays the digit mode, as the target wants.
        (4, [1, 3, 0, 1, 1, 1], 5, 0b10000, [0.0] * 5 + [0.1, 0.2, 0.3, 0.4], ["1", "5", "0", "0", "0", "2"]),
        # Answer 0 leads both tallies; the final-value mode must leave it: the heavy line 3 (9) turns to the
        # decoy 1, after which 1 leads the values (3 vs 2) and 0 still leads the counts (ties -> smallest).
        (3, [1, 1, 1, 2, 1], 0, 0b00100, [0.0, 0.0, 0.9, 0.0, 0.5, 0.6, 0.1], ["1", "0", "0", "1", "2"]),
        # Nothing to steer (target 0, modes 1 and 1): the drawn digits 3 and 7 stay.
        (2, [1, 1, 1, 1], 5, 0, [0.35, 0.75, 0.0, 0.1, 0.2], ["1", "3", "7", "2"]),
        # 0, 3, 7 drawn; the value pass turns 7 then 3 to 5; the count pass (5 leads, unwanted) may only turn
        # the still-free line 1 to the decoy 6, not the lines already recoloured.
        (3, [1, 1, 1, 1, 1], 5, 0b10000, [0.0, 0.35, 0.75, 0.0, 0.1, 0.2, 0.3], ["1", "6", "5", "5", "2"]),
        # Weightless free lines all 0 (the answer): only the count pass moves, 5:1 -> 4:2 -> 3:3 (tie -> 0
        # still leads) -> 2:4, three recolours to the decoy 1.
        (5, [1, 0, 0, 0, 0, 0, 1], 0, 0, [0.0] * 6 + [0.1, 0.2, 0.3, 0.4, 0.5], ["1", "1", "1", "1", "0", "0", "2"]),
        # Two rounds and no more: 0 8 2 0 drawn (weights 2 1 2 1), decoy 8, order [4, 2, 3, 1]. Round 1: values
        # fine (0 and 2 tie at 3 -> 0); counts tie 0/2 -> 0, so line 4 -> 8. Round 2: values lead 2, so line 3
        # -> 0 (line 1 already 0 is skipped); counts tie 0/8 -> 0, so line 1 -> 8, leaving 8 the value mode:
        # off target, for the caller to redraw (a third round would turn line 2 to 0).
        (
            4,
            [0, 2, 1, 2, 1, 1],
            0,
            0b10000,
            [0.0, 0.8, 0.2, 0.0, 0.8, 0.9, 0.2, 0.1, 0.0],
            ["1", "8", "8", "0", "8", "2"],
        ),
    ],
)
def test_assign_digits_recolours_free_lines_until_the_modes_match(free_lines, weights, answer, target, draws, expected):
    """Lines 0 and last are fixed constants 1 and 2, the free ones between (no pre-assignment): only
    the two frequency passes move digits."""
    lines = [["p", "1"], *([f"v{i}", None] for i in range(free_lines)), ["q", "2"]]
    src = {f"w{line}_{k}": line for line, w in enumerate(weights) for k in range(w)}
    r = Scripted(draws)
    b._assign_digits(r, lines, src, -1, answer, target)
    assert [rhs for _, rhs in lines] == expected and r.draws == []

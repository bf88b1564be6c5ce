"""The paper distribution, the stress suite and the independent interpreter that labels them.

Properties are measured here from the program text with the test's own parsing,
never from what the generator reports about itself.
"""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from refusals import assert_names, assert_refused, refuses

from emergence.core.io import PipelineError
from emergence.studies.binding.heuristics import evaluate
from emergence.studies.binding.interpreter import run_program
from emergence.studies.binding.paper import Shape, sample_shaped
from emergence.studies.binding.programs import ProgramConfig, trace
from emergence.studies.binding.sets import generalisation_table, generate_table
from emergence.studies.binding.stress import STRESS, curve_steps, stress_shapes, stress_table


def parse(text: str) -> tuple[list[tuple[str, str]], str]:
    *body, query = text.split("\n")
    return [tuple(line.split("=")) for line in body], query[1]


def chain_of(lines: list[tuple[str, str]], query: str) -> list[int]:
    """Line numbers from the constant to the query's final write, by a plain backward search."""
    out, var, before = [], query, len(lines)
    while True:
        i = max(j for j in range(before) if lines[j][0] == var)
        out.append(i)
        if lines[i][1].isdigit():
            return out[::-1]
        var, before = lines[i][1], i


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a=3\n#a:", (3, 0)),
        ("a=1\nb=a\na=2\nc=b\n#c:", (1, 2)),  # c <- b <- a's first value; the later a=2 is irrelevant
        ("a=1\nb=a\nb=5\n#b:", (5, 0)),  # reassigned: the constant wins
        ("a=1\nb=a\na=2\n#b:", (1, 1)),  # a copy reads the value at its line
        ("a=7\na=a\na=a\n#a:", (7, 2)),  # self-copies count as hops
    ],
)
def test_interpreter_by_hand(text, expected):
    assert run_program(text) == expected


@pytest.mark.parametrize(
    "text, named",
    [
        ("a=b\n#a:", ["line 1 'a=b'", "'b'", "before"]),
        ("a=1\nab=2\n#a:", ["line 2 'ab=2'", "assignment"]),
        ("a=1\n#b:", ["'#b:'", "'b'", "never"]),
        ("a=1\na", ["last line 'a'", "query"]),
    ],
)
def test_interpreter_refuses_what_is_not_a_program(text, named):
    with refuses(*named):
        run_program(text)


@pytest.fixture(scope="module")
def paper_train() -> pd.DataFrame:
    return generate_table(np.random.default_rng(0), ProgramConfig(distribution="paper"), 4000, set_name="t")


def test_interpreter_agrees_with_trace_and_evaluate_on_10000_programs():
    paper = ProgramConfig(distribution="paper")
    tables = [
        generate_table(np.random.default_rng(1), paper, 5000, set_name="paper"),
        generate_table(np.random.default_rng(2), ProgramConfig(), 2000, set_name="balanced"),
        stress_table(np.random.default_rng(3), paper, 60),  # (9 + 2) sets x 5 hops x 60
        generalisation_table(np.random.default_rng(4), paper, 2, (2, 25), (1, 13)),
    ]
    texts = pd.concat(tables)["program"].tolist()
    assert len(texts) >= 10_000
    for text in texts:
        lines, query = parse(text)
        answer, hops = run_program(text)
        assert trace(lines, query)[0] == answer == evaluate(lines)[query], text
        assert len(chain_of(lines, query)) == hops + 1, text


def test_paper_hops_follow_the_cubic_prior(paper_train):
    weights = np.array([(h + 1) ** 3 for h in range(5)], dtype=float)
    share = paper_train["hops"].value_counts(normalize=True).reindex(range(5), fill_value=0).to_numpy()
    assert np.abs(share - weights / weights.sum()).max() < 0.03


def test_paper_draws_every_structural_property_over_its_range(paper_train):
    rows = []
    for text in paper_train["program"]:
        lines, query = parse(text)
        chain = chain_of(lines, query)
        rows.append(
            {
                "const_line1": chain[0] == 0,
                "query_writes": sum(lhs == query for lhs, _ in lines),
                "n_vars": len({lhs for lhs, _ in lines}),
                "gap": np.diff(chain).mean() if len(chain) > 1 else np.nan,
                "digits": len({rhs for _, rhs in lines if rhs.isdigit()}),
            }
        )
    df = pd.DataFrame(rows)
    assert df["const_line1"].mean() > 0.15  # the constant may sit on line 1
    assert (df["query_writes"] == 1).mean() > 0.3 and (df["query_writes"] >= 3).mean() > 0.05
    assert df["n_vars"].min() <= 4 and df["n_vars"].max() == 16
    assert 2.8 < df["gap"].mean() < 4.0  # uniform placement: ~3.2 lines apart, not packed
    assert (df["digits"] >= 2).all()  # `one_value` programs are redrawn


def test_paper_heuristics_keep_their_natural_rates(paper_train):
    first = (paper_train["heur_first_constant"] == paper_train["answer"]).mean()
    assert first > 0.25  # the line-1 heuristic is right often, as the paper's phase 2 needs


def _pinned(name: str, lines: list[tuple[str, str]], query: str, hops: int) -> bool:
    chain, n = chain_of(lines, query), len(lines)
    writes = sum(lhs == query for lhs, _ in lines)
    n_vars = len({lhs for lhs, _ in lines})
    if name == "links_spread":
        return hops == 0 or set(np.diff(chain)) == {(n - 1) // hops}
    if name == "links_adjacent":
        return chain == list(range(chain[0], chain[0] + hops + 1))
    if name == "const_line1":
        return chain[0] == 0
    if name == "const_late":
        return chain == list(range(n - hops - 1, n))
    if name == "query_once":
        return writes == 1
    if name == "query_thrice":
        return writes >= 3
    if name == "many_vars":
        return n_vars >= 14
    if name == "few_vars":
        return n_vars <= 5
    if name == "twin_chain":  # another value as many copies deep, and the answer digit off the chain
        depth: dict[str, tuple[str, int]] = {}
        twins = 0
        for i, (lhs, rhs) in enumerate(lines):
            depth[lhs] = (rhs, 0) if rhs.isdigit() else (depth[rhs][0], depth[rhs][1] + 1)
            twins += i not in chain and depth[lhs][1] == hops and depth[lhs][0] != lines[chain[0]][1]
        elsewhere = any(rhs == lines[chain[0]][1] for i, (_, rhs) in enumerate(lines) if i != chain[0])
        return twins >= 1 and elsewhere
    raise KeyError(name)


def test_every_stress_program_has_its_pinned_property():
    df = stress_table(np.random.default_rng(5), ProgramConfig(distribution="paper"), 40)
    assert set(df["set"]) == {f"stress_{name}" for name in STRESS} | {"ref_paper", "ref_balanced"}
    assert list(stress_shapes(16)) == list(STRESS) and len(STRESS) >= 8
    df = df[df["set"].str.startswith("stress_")]
    for row in df.itertuples():
        lines, query = parse(row.program)
        assert _pinned(row.set.removeprefix("stress_"), lines, query, row.hops), (row.set, row.program)
    assert (df.groupby("set")["hops"].value_counts() == 40).all()  # every hop class alike


def test_rejected_shortcuts_never_answer():
    cfg = ProgramConfig(distribution="paper", reject=("one_value", "first_constant"))
    df = generate_table(np.random.default_rng(6), cfg, 500, set_name="t")
    assert (df["heur_first_constant"] != df["answer"]).all()


def test_cramped_programs_keep_their_only_constant():
    # 3 lines, 2 hops: every line is a chain line, so one digit is all a program can hold
    program = sample_shaped(random.Random(0), 3, 2)
    assert [rhs.isdigit() for _, rhs in program.lines] == [True, False, False]


@pytest.mark.parametrize(
    "kwargs, key, value",
    [(dict(reject=("one_value", "psychic")), "binding_programs.reject", ["psychic"])],  # only the unknown one
)
def test_config_errors_name_the_key(kwargs, key, value):
    with pytest.raises(PipelineError) as e:
        ProgramConfig(distribution="paper", **kwargs).validate()
    assert_refused([str(e.value)], key, value)


def test_impossible_shapes_are_refused():
    with refuses("6 lines", "3 hops", Shape(distractor="twin")):
        sample_shaped(random.Random(0), 6, 3, Shape(distractor="twin"))
    with refuses("6 lines", "2 hops", Shape(query_writes=(9, 9))):
        sample_shaped(random.Random(0), 6, 2, Shape(query_writes=(9, 9)))


def _deepest_other_value(lines: list[tuple[str, str]], answer: int) -> int:
    """Copies behind the deepest value in the program that is not the answer (-1: none)."""
    value, depth, best = {}, {}, -1
    for lhs, rhs in lines:
        value[lhs], depth[lhs] = (int(rhs), 0) if rhs.isdigit() else (value[rhs], depth[rhs] + 1)
        if value[lhs] != answer:
            best = max(best, depth[lhs])
    return best


def test_a_planted_distractor_chain_makes_deep_wrong_chains_common():
    # natural copies rarely grow a chain of another value as deep as a 4-hop query's (measured ~9 %
    # reach 3 copies); the planted chain, 0..4 copies long, does in ~40 %
    share = {}
    for distractor in ("natural", "planted"):
        r = random.Random(1)
        programs = [sample_shaped(r, 16, 4, Shape(distractor=distractor)) for _ in range(600)]
        deep = [_deepest_other_value(list(p.lines), p.answer) for p in programs]
        share[distractor] = np.mean(np.array(deep) >= 3)
    assert share["natural"] < 0.15 and share["planted"] > 0.3, share


def test_stress_cells_no_program_can_fill_are_left_out_not_fatal(capsys):
    # 16 lines, hops 0-8: a twin of 8 hops needs 18 lines; <= 5 variables cannot hold a 5-hop chain
    cfg = ProgramConfig(distribution="paper", max_hops=8, reject=("one_value", "first_constant", "last_constant"))
    df = stress_table(np.random.default_rng(7), cfg, 2)
    cells = set(zip(df["set"], df["hops"]))
    assert ("stress_twin_chain", 8) not in cells and ("stress_twin_chain", 7) in cells
    assert ("stress_few_vars", 5) not in cells and ("stress_few_vars", 4) in cells
    assert ("stress_const_line1", 8) in cells  # the training distribution's `reject` does not apply here
    assert "stress set twin_chain: no program of 16 lines has 8 hops" in capsys.readouterr().out
    grid = generalisation_table(np.random.default_rng(8), cfg, 1, (2, 12), (1, 9))
    assert len(grid) == sum(1 for n in range(2, 13) for h in range(1, 10) if h + 1 <= n)


@pytest.mark.parametrize("power", [float("nan"), -1.0, 500.0])
def test_hop_weighting_out_of_range_is_one_line(power):
    with pytest.raises(PipelineError) as e:
        ProgramConfig(distribution="paper", hop_weight_power=power).validate()
    lines = str(e.value).splitlines()
    assert len(lines) == 1
    assert_refused(lines, "binding_programs.hop_weight_power", power)


def test_the_curve_scores_the_named_checkpoint_and_each_multiple():
    steps = [0, 1, 2, 13, 500, 1000, 1500, 2000]
    assert curve_steps(steps, 2000, 0) == [2000]
    assert curve_steps(steps, 2000, 1000) == [0, 1000, 2000]
    assert curve_steps(steps, 13, 1000) == [0, 13, 1000, 2000]
    assert curve_steps(steps, 13, 1) == steps  # every checkpoint


def _one_hop_gap(lines: list[tuple[str, str]], query: str) -> int:
    """Lines between a 1-hop query's copy and the constant it copies, read off the text by hand."""
    copy = max(i for i, (lhs, _) in enumerate(lines) if lhs == query)
    source = lines[copy][1]
    return copy - max(i for i, (lhs, _) in enumerate(lines[:copy]) if lhs == source)


def test_chain_spacing_of_each_layout_matches_its_closed_form():
    # 1 hop over 16 lines. any: two uniform lines, P(gap = d) = (16 - d) / 120, mean 17 / 3 = 5.67.
    # near: gap = 1 + Geometric(1/2), mean 2, P(gap = 1) = 1/2. mixed: half each, mean 3.83.
    expected = {"any": (17 / 3, 15 / 120), "near": (2.0, 0.5), "mixed": ((17 / 3 + 2) / 2, (15 / 120 + 0.5) / 2)}
    for links, (mean, p_adjacent) in expected.items():
        r = random.Random(7)
        gaps = np.array(
            [
                _one_hop_gap(list(p.lines), p.query)
                for p in (sample_shaped(r, 16, 1, Shape(links=links)) for _ in range(3000))
            ]
        )
        assert abs(gaps.mean() - mean) < 0.2, (links, gaps.mean())
        assert abs(np.mean(gaps == 1) - p_adjacent) < 0.03, (links, np.mean(gaps == 1))


def test_the_stream_lays_chains_out_as_binding_train_says():
    from emergence.studies.binding.sets import sample_program
    from emergence.studies.binding.train_config import Stream, stream_programs

    base = ProgramConfig(distribution="paper", min_hops=1, max_hops=1)
    for links, mean in (("any", 17 / 3), ("mixed", (17 / 3 + 2) / 2)):
        cfg = stream_programs(base, Stream(on=True, links=links))
        rng = np.random.default_rng(3)
        programs = [sample_program(rng, cfg) for _ in range(3000)]
        gaps = [_one_hop_gap(list(p.lines), p.query) for p in programs]
        assert abs(np.mean(gaps) - mean) < 0.2, (links, np.mean(gaps))


def test_chain_lines_at_the_tightest_fits_and_every_first_line():
    from emergence.studies.binding.paper import chain_lines

    for seed in range(200):
        r = random.Random(seed)
        # near: three links in three lines is the only fit (gaps of 1 summing to n - 1); at four lines
        # the chain stays inside the program, ascending, one line or more apart
        assert chain_lines(r, 3, 2, "near") == [0, 1, 2]
        near = chain_lines(r, 4, 2, "near")
        assert 0 <= near[0] and near[-1] <= 3 and all(b - a >= 1 for a, b in zip(near, near[1:]))
        assert chain_lines(r, 2, 1, "const_first") == [0, 1]
        assert chain_lines(r, 5, 0, "spread") in ([0], [1], [2], [3], [4])
    # const_first reaches every later line, line 1 among them
    seen = {tuple(chain_lines(random.Random(s), 4, 1, "const_first")) for s in range(100)}
    assert seen == {(0, 1), (0, 2), (0, 3)}
    # adjacent: the chain's lines in a row, starting wherever it fits, so it may end on the last line;
    # a chain as long as the program is the whole program
    seen = {tuple(chain_lines(random.Random(s), 4, 1, "adjacent")) for s in range(100)}
    assert seen == {(0, 1), (1, 2), (2, 3)}
    assert chain_lines(random.Random(0), 3, 2, "adjacent") == [0, 1, 2]
    with refuses("links", "'diagonal'"):
        chain_lines(random.Random(0), 5, 1, "diagonal")


def _text_of(p) -> str:
    return "\n".join(f"{lhs}={rhs}" for lhs, rhs in p.lines) + f"\n#{p.query}:"


def test_fits_at_the_query_writes_bound_by_hand():
    from emergence.studies.binding.paper import fits

    # 6 lines, 2 hops: at most 6 - 2 - 1 = 3 lines before the query's final write, so up to 4 writes
    assert fits(Shape(query_writes=(4, 4)), 6, 2) and fits(Shape(query_writes=(4, 9)), 6, 2)
    assert not fits(Shape(query_writes=(5, 5)), 6, 2)
    assert fits(Shape(query_writes=(1, 1)), 3, 2) and not fits(Shape(query_writes=(2, 2)), 3, 2)
    # and the bound is reached: four writes of the query in six lines
    program = sample_shaped(random.Random(0), 6, 2, Shape(query_writes=(4, 4)))
    assert sum(lhs == program.query for lhs, _ in program.lines) == 4
    assert run_program(_text_of(program)) == (program.answer, 2)


def test_pinned_query_writes_fall_anywhere_before_its_final_write():
    # 8 lines, 2 hops, the query assigned 3 times: its 2 earlier writes sit on free lines before its final
    # write, between the chain's lines as well as before the constant
    before_constant = between = 0
    for seed in range(200):
        p = sample_shaped(random.Random(seed), 8, 2, Shape(query_writes=(3, 3)))
        lines, query = parse(_text_of(p))
        chain = chain_of(lines, query)
        earlier = [i for i, (lhs, _) in enumerate(lines) if lhs == query and i != chain[-1]]
        assert len(earlier) == 2 and max(earlier) < chain[-1], lines
        before_constant += sum(i < chain[0] for i in earlier)
        between += sum(chain[0] < i for i in earlier)
    assert before_constant > 50 and between > 50, (before_constant, between)


def test_more_variables_asked_than_letters_gives_all_26():
    # 30 lines, at least 26 variables asked, up to 40: only 26 letters exist
    for seed in range(30):
        p = sample_shaped(random.Random(seed), 30, 1, Shape(n_vars=(26, 40)))
        assert len({lhs for lhs, _ in p.lines}) == 26
        assert run_program(_text_of(p)) == (p.answer, 1)


def test_a_planted_chain_that_does_not_fit_falls_back_and_depth_zero_is_drawn():
    from emergence.studies.binding.paper import _draw

    # 4 lines, 1 hop, exactly 3 variables: a planted chain of one copy needs 4 variables, so it is
    # dropped (the draw goes on as natural), never a failed draw
    for seed in range(200):
        p = _draw(random.Random(seed), 4, 1, Shape(n_vars=(3, 3), distractor="planted"))
        assert p is not None and len({lhs for lhs, _ in p.lines}) == 3
        assert run_program(_text_of(p)) == (p.answer, 1)
    # 0 hops: the planted chain is a constant of depth 0
    for seed in range(50):
        p = sample_shaped(random.Random(seed), 5, 0, Shape(distractor="planted"))
        assert run_program(_text_of(p)) == (p.answer, 0)


class _Lowest(random.Random):
    """A generator whose integer ranges (randint) always give their lowest value."""

    def randint(self, a, b):
        return a


def test_the_lowest_planted_depth_is_a_lone_constant():
    from emergence.studies.binding.paper import _draw

    # a planted chain is 0..hops copies deep: at the lowest draw, 0, it is one constant on a variable of its
    # own, which fits the one line a 3-line 1-hop program leaves off its chain
    for seed in range(20):
        p = _draw(_Lowest(seed), 3, 1, Shape(distractor="planted"))
        chain = set(p.chain_lines)
        (free,) = [i for i in range(3) if i not in chain]
        lhs, rhs = p.lines[free]
        assert rhs.isdigit() and lhs not in {p.lines[i][0] for i in chain}, p.lines


def test_a_twin_that_cannot_fit_is_no_program():
    from emergence.studies.binding.paper import _draw

    # 30 lines, 13 hops: two chains of 14 lines fit in 30 lines but need 28 letters of 26
    shape = Shape(distractor="twin")
    assert all(_draw(random.Random(seed), 30, 13, shape) is None for seed in range(20))
    with refuses("30 lines", "13 hops", shape, "200 draws"):
        sample_shaped(random.Random(0), 30, 13, shape)


def _two_digits(p) -> int:
    """The one digit line off the query's chain in a program of exactly two digit lines."""
    digits = [int(rhs) for i, (_, rhs) in enumerate(p.lines) if rhs.isdigit() and i != p.chain_lines[-1]]
    assert len(digits) == 1 and sum(rhs.isdigit() for _, rhs in p.lines) == 2
    return digits[0]


def test_twin_digit_is_never_the_answer_and_every_other_offset_is_drawn():
    # 2 * (hops + 1) lines: the two chains fill the program, so its only digits are the two constants
    offsets = set()
    for seed in range(300):
        p = sample_shaped(random.Random(seed), 6, 2, Shape(distractor="twin"), reject=())
        assert run_program(_text_of(p)) == (p.answer, 2)
        offsets.add((_two_digits(p) - p.answer) % 10)
    assert offsets == set(range(1, 10))


class _Plus3(random.Random):
    """A generator whose draw of the twin's offset (randrange(1, 10)) is always 3."""

    def randrange(self, start, stop=None, step=1):
        return 3 if (start, stop) == (1, 10) else super().randrange(start, stop, step)


def test_twin_digit_is_the_answer_plus_the_drawn_offset():
    for seed in range(20):
        p = sample_shaped(_Plus3(seed), 6, 2, Shape(distractor="twin"), reject=())
        assert _two_digits(p) == (p.answer + 3) % 10


def test_planted_digits_are_single_digits_and_every_digit_is_drawn():
    seen = set()
    for seed in range(300):
        p = sample_shaped(random.Random(seed), 6, 1, Shape(distractor="planted"), reject=())
        assert run_program(_text_of(p)) == (p.answer, 1)
        rhs_digits = [rhs for _, rhs in p.lines if rhs.isdigit()]
        assert all(len(d) == 1 for d in rhs_digits), p.lines
        seen.update(rhs_digits)
    assert seen == set("0123456789")


def test_off_chain_lines_copy_other_variables_and_the_query_is_rewritten():
    copies, rewritten = 0, 0
    for seed in range(300):
        p = sample_shaped(random.Random(seed), 8, 1)
        chain = set(p.chain_lines)
        copies += any(i not in chain and not rhs.isdigit() and rhs != lhs for i, (lhs, rhs) in enumerate(p.lines))
        rewritten += sum(lhs == p.query for lhs, _ in p.lines) >= 2
    assert copies > 100 and rewritten > 20, (copies, rewritten)


def test_no_line_copies_its_own_variable():
    # a copy reads another variable defined above it, never its own left-hand side (x=x would change
    # no value, yet the interpreter counts it as a hop)
    for seed in range(300):
        p = sample_shaped(random.Random(seed), 8, 1)
        assert all(lhs != rhs for lhs, rhs in p.lines), p.lines


def test_one_free_line_still_rejects_one_value():
    # 3 lines, 1 hop: one line off the chain, so a program whose every digit is the answer can be redrawn
    for seed in range(200):
        p = sample_shaped(random.Random(seed), 3, 1)
        assert {int(rhs) for _, rhs in p.lines if rhs.isdigit()} != {p.answer}, p.lines


def test_the_self_check_names_a_broken_chain(monkeypatch):
    from emergence.studies.binding import paper

    real = paper.trace

    def short_path(lines, query):
        got, path = real(lines, query)
        return got, path[:-1]

    monkeypatch.setattr(paper, "trace", short_path)
    with pytest.raises(AssertionError) as e:
        paper._draw(random.Random(0), 4, 1, Shape())
    monkeypatch.setattr(paper, "trace", real)
    p = paper._draw(random.Random(0), 4, 1, Shape())  # the same draw, checked by the real trace
    assert_names(str(e.value), "chain", list(p.lines), f"#{p.query}")


class _Half(random.Random):
    """A generator whose share of digits (uniform) and every coin (random) are exactly 0.5; its integer
    draws (sample, choice, shuffle) stay random."""

    _randbelow = random.Random._randbelow_with_getrandbits

    def random(self):
        return 0.5

    def uniform(self, a, b):
        return 0.5


def test_a_coin_at_exactly_p_const_copies():
    from emergence.studies.binding.paper import _draw

    # a right-hand side is a digit with probability p_const: a coin at p_const itself is a copy, so with
    # every coin at 0.5 = p_const each off-chain line with another variable defined above it copies one
    for seed in range(20):
        p = _draw(_Half(seed), 8, 1, Shape())
        chain = set(p.chain_lines)
        off = [rhs for i, (lhs, rhs) in enumerate(p.lines) if i not in chain and {v for v, _ in p.lines[:i]} - {lhs}]
        assert off and not any(rhs.isdigit() for rhs in off), p.lines

import itertools
import math
import random

import numpy as np
import pandas as pd
import pytest
from refusals import assert_refused, refuses

from emergence.core.io import PipelineError
from emergence.studies.binding.heuristics import CONTROLLED, HEURISTICS, evaluate
from emergence.studies.binding.programs import Program, ProgramConfig, trace
from emergence.studies.binding.sets import generalisation_table, generate_table, heuristic_table, sample_program


def parse(text: str) -> tuple[tuple[tuple[str, str], ...], str]:
    *body, query = text.split("\n")
    assert query[0] == "#" and query[-1] == ":" and len(query) == 3
    return tuple(tuple(line.split("=")) for line in body), query[1]


def exec_env(lines) -> dict[str, int]:
    env: dict = {}
    exec("\n".join(f"{lhs}={rhs}" for lhs, rhs in lines), {}, env)
    return env


def random_lines(r: random.Random, n: int) -> list[tuple[str, str]]:
    """Unsteered random programs over few variables: many reassignments and self-copies."""
    lines, defined = [], []
    for _ in range(n):
        lhs = r.choice("abcde")
        rhs = r.choice(defined) if defined and r.random() < 0.6 else str(r.randrange(10))
        lines.append((lhs, rhs))
        defined = sorted(set(defined) | {lhs})
    return lines


def assert_valid(p: Program) -> None:
    lines = p.lines
    chain = p.chain_lines
    assert len(chain) == p.hops + 1
    # The query's effective line is its last assignment.
    assert chain[0] == max(i for i, (lhs, _) in enumerate(lines) if lhs == p.query)
    assert lines[chain[0]][0] == p.query
    for later, earlier in zip(chain, chain[1:]):
        var = lines[earlier][0]
        assert earlier < later and lines[later][1] == var  # copies the previous link...
        assert all(lhs != var for lhs, _ in lines[earlier + 1 : later])  # ...not overwritten since
    assert lines[chain[-1]][1] == str(p.answer)
    assert evaluate(lines)[p.query] == p.answer == exec_env(lines)[p.query]
    assert trace(lines, p.query) == (p.answer, chain)
    assert parse(p.text) == (lines, p.query)


def test_evaluate_matches_python_exec():
    r = random.Random(0)
    for _ in range(300):
        lines = random_lines(r, r.randrange(1, 20))
        assert evaluate(lines) == exec_env(lines)
    df = generate_table(np.random.default_rng(1), ProgramConfig(), 300, set_name="t")
    for text, query, answer in zip(df["program"], df["query"], df["answer"]):
        lines, q = parse(text)
        assert q == query and evaluate(lines) == exec_env(lines)
        assert exec_env(lines)[q] == answer


def test_copy_reads_value_at_its_line():
    lines, q = parse("a=1\nb=a\na=2\n#b:")
    assert evaluate(lines) == {"a": 2, "b": 1}
    assert trace(lines, q) == (1, (1, 0))
    lines, q = parse("a=1\na=4\nb=a\na=b\n#a:")
    assert evaluate(lines) == {"a": 4, "b": 4}
    assert trace(lines, q) == (4, (3, 2, 1))
    with pytest.raises(PipelineError, match="'c'"):
        evaluate([("a", "1"), ("b", "c")])


def test_hops_and_chain_lines_hand_built():
    assert trace(*parse("a=1\nb=a\n#b:")) == (1, (1, 0))
    assert trace(*parse("a=1\nb=2\nc=b\na=c\nc=3\n#a:")) == (2, (3, 2, 1))
    assert trace(*parse("a=7\n#a:")) == (7, (0,))


def test_heuristics_hand_built():
    lines, q = parse("a=3\nb=a\nc=5\nd=c\nb=7\ne=9\ne=d\n#d:")
    p = Program(lines, q, answer=5, hops=1, chain_lines=(3, 2))
    got = {name: h(p) for name, h in HEURISTICS.items()}
    assert got == {
        "last_constant": 9,
        "first_constant": 3,
        "most_frequent_digit": 3,
        "query_first_assignment": -1,
        "most_common_final_value": 5,
        "query_first_value": 5,  # d's first write d=c, c=5 then
    }
    p = Program(*parse("d=4\nc=2\nd=2\n#d:"), answer=2, hops=0, chain_lines=(2,))
    assert HEURISTICS["query_first_assignment"](p) == 4
    assert HEURISTICS["query_first_value"](p) == 4
    assert HEURISTICS["most_frequent_digit"](p) == 2
    p = Program(*parse("a=6\nq=a\na=1\nq=a\n#q:"), answer=1, hops=1, chain_lines=(3, 2))
    assert HEURISTICS["query_first_value"](p) == 6 and HEURISTICS["query_first_assignment"](p) == -1


def test_generated_programs_are_valid():
    rng = np.random.default_rng(2)
    cfg = ProgramConfig()
    for _ in range(200):
        p = sample_program(rng, cfg)
        assert len(p.lines) == 16 and 0 <= p.hops <= 4
        assert_valid(p)
    for n, hops in [(2, 1), (3, 2), (5, 1), (25, 13), (14, 13), (25, 1)]:
        p = sample_program(rng, cfg, n_lines=n, hops=hops)
        assert (len(p.lines), p.hops) == (n, hops)
        assert_valid(p)


def test_sampled_programs_draw_hops_from_the_cubic_prior():
    rng, cfg = np.random.default_rng(4), ProgramConfig()
    hops = np.bincount([sample_program(rng, cfg).hops for _ in range(3000)], minlength=5) / 3000
    weights = np.arange(1, 6) ** 3.0  # P(hops) ~ (hops + 1)^3: 0.004 .. 0.556; uniform would be 0.2 each
    assert np.abs(hops - weights / weights.sum()).max() < 0.03, hops


def test_heuristics_at_chance_answers_uniform_hops_cubic():
    df = generate_table(np.random.default_rng(3), ProgramConfig(), 5000, set_name="train")
    table = heuristic_table(df)
    assert table["heuristic"].tolist() == list(HEURISTICS)
    assert (table["n"] == 5000).all()
    rates = dict(zip(table["heuristic"], table["match_rate"]))
    assert all(0.07 <= rate <= 0.13 for rate in rates.values()), rates
    answers = np.bincount(df["answer"], minlength=10) / len(df)
    assert answers.min() > 0.08 and answers.max() < 0.12, answers
    weights = np.arange(1, 6) ** 3.0
    hops = np.bincount(df["hops"], minlength=5) / len(df)
    assert np.abs(hops - weights / weights.sum()).max() < 0.02, hops
    for text, chain in zip(df["program"][:500], df["chain_lines"][:500]):
        lines, q = parse(text)
        assert trace(lines, q)[1] == tuple(chain)


def test_balanced_heuristics_match_the_answer_independently():
    """Each controlled heuristic's match is its own Bernoulli(0.1) draw per program. With one
    draw shared by all five, the marginals stay at 0.1 (the test above passes) but the five
    match together: any two both match on ~0.1 of programs instead of 0.1 x 0.1 = 0.01, and
    no program has exactly one match instead of 5 x 0.1 x 0.9^4 = 0.328."""
    n = 4000  # ~0.3 s
    df = generate_table(np.random.default_rng(11), ProgramConfig(), n, set_name="train")
    match = np.stack([(df[f"heur_{name}"] == df["answer"]).to_numpy() for name in CONTROLLED], axis=1)
    # Tolerances: 4.5 binomial sds, so all 11 checks together fail by chance < 1e-4 of the time.
    # Both rates are far outside the other hypothesis' band (0.1 vs 0.01 +- 0.007; 0 vs 0.328 +- 0.033).
    sd_pair = math.sqrt(0.01 * 0.99 / n)  # 0.0016
    for i, j in itertools.combinations(range(len(CONTROLLED)), 2):
        both = (match[:, i] & match[:, j]).mean()
        assert abs(both - 0.01) < 4.5 * sd_pair, (CONTROLLED[i], CONTROLLED[j], both)
    p_one = 5 * 0.1 * 0.9**4
    one = (match.sum(axis=1) == 1).mean()
    assert abs(one - p_one) < 4.5 * math.sqrt(p_one * (1 - p_one) / n), one


def test_table_schema():
    df = generate_table(np.random.default_rng(4), ProgramConfig(), 20, set_name="val")
    expected = [
        "program",
        "query",
        "answer",
        "hops",
        "chain_lines",
        "n_lines",
        "set",
        *(f"heur_{name}" for name in HEURISTICS),
    ]
    assert list(df.columns) == expected
    for col in ["answer", "hops", "n_lines", *expected[7:]]:
        assert df[col].dtype == np.int64, col
    assert (df["set"] == "val").all() and (df["n_lines"] == 16).all()
    assert all(isinstance(c, list) and len(c) == h + 1 for c, h in zip(df["chain_lines"], df["hops"]))


@pytest.mark.parametrize(
    "kwargs, key",
    [
        (dict(max_hops=16), "binding_programs.max_hops"),
        (dict(min_hops=3, max_hops=2), "binding_programs.min_hops"),
        (dict(n_lines=0, max_hops=0), "binding_programs.n_lines"),
        (dict(n_lines=40, max_hops=26), "binding_programs.max_hops"),
        (dict(heuristic_target=0.0), "binding_programs.heuristic_target"),
        (dict(p_const=1.5), "binding_programs.p_const"),
    ],
)
def test_config_validation_names_key(kwargs, key):
    with pytest.raises(PipelineError, match=key.replace(".", r"\.") + ":"):
        ProgramConfig(**kwargs).validate()
    with pytest.raises(PipelineError, match=key.split(".")[1]):
        generate_table(np.random.default_rng(0), ProgramConfig(**kwargs), 1, set_name="t")
    ProgramConfig().validate()


def test_generalisation_table_validates_ranges():
    rng = np.random.default_rng(0)
    with pytest.raises(PipelineError, match=r"binding_data\.gen_hops:"):
        generalisation_table(rng, ProgramConfig(), 1, lines_range=(2, 40), hops_range=(1, 30))
    with pytest.raises(PipelineError, match=r"binding_data\.gen_lines:"):
        generalisation_table(rng, ProgramConfig(), 1, lines_range=(2, 3), hops_range=(5, 6))


def test_deterministic_given_seed():
    cfg = ProgramConfig()
    a = generate_table(np.random.default_rng(7), cfg, 200, set_name="t")
    b = generate_table(np.random.default_rng(7), cfg, 200, set_name="t")
    c = generate_table(np.random.default_rng(8), cfg, 200, set_name="t")
    pd.testing.assert_frame_equal(a, b)
    assert not a["program"].equals(c["program"])
    assert sample_program(np.random.default_rng(5), cfg) == sample_program(np.random.default_rng(5), cfg)


def test_generalisation_table_covers_ranges():
    df = generalisation_table(np.random.default_rng(6), ProgramConfig(), 2, lines_range=(2, 6), hops_range=(1, 4))
    cells = set(zip(df["n_lines"], df["hops"]))
    assert cells == {(n, h) for n in range(2, 7) for h in range(1, 5) if h + 1 <= n}
    assert len(df) == 2 * len(cells) and (df["set"] == "gen").all()
    full = generalisation_table(np.random.default_rng(6), ProgramConfig(), 1)
    assert (full["n_lines"].min(), full["n_lines"].max()) == (2, 25)
    assert (full["hops"].min(), full["hops"].max()) == (1, 13)
    assert len(full) == sum(min(13, n - 1) for n in range(2, 26))
    for text, answer, hops, chain in zip(full["program"], full["answer"], full["hops"], full["chain_lines"]):
        lines, q = parse(text)
        assert_valid(Program(lines, q, int(answer), int(hops), tuple(chain)))


def test_generalisation_table_hop_bounds_and_first_line_count_exactly():
    rng = np.random.default_rng(0)
    # hops 0 and 25 (26 letters: one variable per chain link) are the extremes allowed; -1 and 26 are not
    zero = generalisation_table(rng, ProgramConfig(), 1, lines_range=(1, 1), hops_range=(0, 25))
    assert list(zip(zero["n_lines"], zero["hops"])) == [(1, 0)]
    for hops in [(-1, 3), (0, 26)]:
        with pytest.raises(PipelineError) as e:
            generalisation_table(rng, ProgramConfig(), 1, lines_range=(2, 4), hops_range=hops)
        assert_refused([str(e.value)], "binding_data.gen_hops", list(hops), rule="[0, 25]")
    # the grid starts at lines_range[0]: 3 and 4 lines, never 2 (where one hop would also fit)
    df = generalisation_table(rng, ProgramConfig(), 1, lines_range=(3, 4), hops_range=(1, 1))
    assert sorted(df["n_lines"]) == [3, 4]


def test_generalisation_table_bar_counts_every_program_and_is_off_by_default(monkeypatch):
    import emergence.studies.binding.sets as sets

    bars = []

    class Bar:
        def __init__(self, **kw):
            bars.append({**kw, "updates": []})

        def update(self, k):
            bars[-1]["updates"].append(k)

        def close(self):
            bars[-1]["closed"] = True

    monkeypatch.setattr(sets, "tqdm", Bar)
    generalisation_table(np.random.default_rng(0), ProgramConfig(), 3, lines_range=(2, 3), hops_range=(1, 2))
    generalisation_table(
        np.random.default_rng(0), ProgramConfig(), 3, lines_range=(2, 3), hops_range=(1, 2), progress=True
    )
    # cells (2, 1), (3, 1), (3, 2): 3 programs each
    assert bars == [
        {"total": 9, "desc": "programs[gen]", "disable": True, "updates": [3, 3, 3], "closed": True},
        {"total": 9, "desc": "programs[gen]", "disable": False, "updates": [3, 3, 3], "closed": True},
    ]


def test_trace_refuses_a_variable_read_before_its_assignment():
    # b is read on line 0 but assigned only on line 1: the search goes back from line 0, never wraps around
    with refuses("'b'", "line 0"):
        trace([("a", "b"), ("b", "1")], "a")
    assert trace([("b", "1"), ("a", "b")], "a") == (1, (1, 0))


def test_program_table_refuses_a_program_its_interpreter_reads_otherwise():
    from emergence.studies.binding.sets import program_table

    good = Program((("a", "3"), ("b", "a")), "b", 3, 1, (0, 1))
    bad = Program((("a", "3"), ("b", "a")), "b", 4, 1, (0, 1))
    assert program_table([good], "t")[["answer", "hops"]].values.tolist() == [[3, 1]]
    with refuses("programs[t]", "generated as answer 4", "read as answer 3", repr(bad.text)):
        program_table([good, bad], "t")


def test_generate_table_bar_is_named_by_set_and_off_by_default(monkeypatch):
    import emergence.studies.binding.sets as sets

    bars = []

    def bar(iterable, **kw):
        bars.append(kw)
        return iterable

    monkeypatch.setattr(sets, "tqdm", bar)
    generate_table(np.random.default_rng(0), ProgramConfig(), 2, set_name="train")
    generate_table(np.random.default_rng(0), ProgramConfig(), 2, set_name="val", progress=True)
    assert bars == [{"desc": "programs[train]", "disable": True}, {"desc": "programs[val]", "disable": False}]


def test_run_program_reads_lines_not_words():
    from emergence.studies.binding.interpreter import run_program

    with refuses("line 1 'a = 5'", "'x=5'"):  # and the form it must take
        run_program("a = 5\n#a:")
    with refuses("line 2 ''", "'x=5'"):
        run_program("a=5\n\n#a:")  # an empty line is a line, and not an assignment

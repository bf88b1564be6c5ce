"""bench/binding_spec_check.py, the second program generator written from the spec alone: its interpreter
on hand-worked programs; every generated program read again by a second interpreter (answer, hops, chain,
query writes, variables) and the generator's stated distribution checked on a few thousand draws; the
rejection sampler on scripted draws; and the printed table, scored by a checkpoint whose every answer is
known (tests/unit/binding_oracle.py), against the programs it was given."""

from __future__ import annotations

import random
import string

import pytest
from binding_oracle import SEEN, lines_of, oracle_checkpoint, scored, trace
from conftest import help_text, summary_line

from bench import binding_spec_check as spec

WRONG = "aeiouwxyz"  # the oracle's wrong answers: queries of these variables


# --- run -------------------------------------------------------------------


def test_run_gives_each_variables_last_value_and_its_chain_from_the_constant():
    lines = [("a", "5"), ("b", "a"), ("a", "7"), ("c", "b"), ("b", "3"), ("d", "c"), ("e", "9")]
    assert spec.run(lines) == {
        "a": (7, (2,)),  # reassigned: the chain starts again at its constant
        "b": (3, (4,)),
        "c": (5, (0, 1, 3)),  # read b before b was reassigned
        "d": (5, (0, 1, 3, 5)),
        "e": (9, (6,)),
    }
    assert spec.run([]) == {}


# --- random_program --------------------------------------------------------


def draws(seed: int, n: int) -> tuple[list[dict], int]:
    r = random.Random(seed)
    out = [spec.random_program(r) for _ in range(n)]
    return [p for p in out if p is not None], sum(p is None for p in out)


@pytest.fixture(scope="module")
def sample():
    return draws(3, 3000)


def sources_before(lines, i):
    """The variables line i may copy, most recently written last (its own variable left out)."""
    order = []
    for lhs, _ in lines[:i]:
        order = [v for v in order if v != lhs] + [lhs]
    return [v for v in order if v != lines[i][0]]


def test_every_program_is_16_lines_then_a_query_and_its_fields_are_what_the_text_says(sample):
    programs, _ = sample
    for p in programs:
        lines, query = lines_of(p["program"])
        assert p["program"] == "\n".join(f"{a}={b}" for a, b in lines) + f"\n#{query}:"
        assert len(lines) == 16 and lines[0][1] in string.digits
        for i, (lhs, rhs) in enumerate(lines):
            assert lhs in string.ascii_lowercase
            assert rhs in string.digits or rhs in sources_before(lines, i)  # a variable already written, not itself
        value, chain = trace(lines, query)
        assert (p["answer"], p["hops"], p["chain"]) == (value, len(chain) - 1, tuple(chain))
        assert p["q_writes"] == sum(lhs == query for lhs, _ in lines) >= 1
        assert p["n_vars"] == len({lhs for lhs, _ in lines})
        assert len({rhs for _, rhs in lines if rhs.isdigit()}) >= 2  # one digit: answerable without binding


def test_programs_with_one_digit_are_dropped_and_two_are_kept(sample):
    programs, dropped = sample
    assert 0 < dropped < 300
    assert any(len({rhs for _, rhs in lines_of(p["program"])[0] if rhs.isdigit()}) == 2 for p in programs)


def test_hop_counts_reach_past_the_table_and_line_2_may_copy_line_1(sample):
    programs, _ = sample
    hops = [p["hops"] for p in programs]
    assert set(range(5)) <= set(hops) and max(hops) > 5
    assert sum(p["program"][6] == p["program"][0] for p in programs) > 100  # `b=a` on line 2


def test_a_line_is_a_constant_with_the_programs_probability_uniform_in_015_07(sample):
    """Over many programs the share of constants among the lines that could copy is the mean of
    U(0.15, 0.7): 0.425 (one program's 15 lines say little; 3,000 programs pin it to +-0.02)."""
    programs, _ = sample
    const = copy = 0
    for p in programs:
        lines, _ = lines_of(p["program"])
        for i in range(1, 16):
            if sources_before(lines, i):
                const += lines[i][1].isdigit()
                copy += not lines[i][1].isdigit()
    assert const / (const + copy) == pytest.approx(0.425, abs=0.02)


def test_a_copy_reads_one_of_the_3_most_recent_variables_half_the_time(sample):
    """P(the source is among the 3 most recent of k) = 0.5 + 0.5 * min(3, k) / k; P(the 4th most recent)
    = 0.5 / k. Expected counts summed over every copy line, against what the programs show."""
    programs, _ = sample
    recent = fourth = expect_recent = expect_fourth = var_recent = var_fourth = 0.0
    for p in programs:
        lines, _ = lines_of(p["program"])
        for i, (_, rhs) in enumerate(lines):
            if rhs.isdigit():
                continue
            sources = sources_before(lines, i)
            k, rank = len(sources), len(sources) - sources.index(rhs)  # rank 1: the most recent
            p_recent, p_fourth = 0.5 + 0.5 * min(3, k) / k, (0.5 / k if k >= 4 else 0.0)
            recent, fourth = recent + (rank <= 3), fourth + (rank == 4)
            expect_recent, expect_fourth = expect_recent + p_recent, expect_fourth + p_fourth
            var_recent, var_fourth = var_recent + p_recent * (1 - p_recent), var_fourth + p_fourth * (1 - p_fourth)
    assert abs(recent - expect_recent) < 4 * var_recent**0.5
    assert abs(fourth - expect_fourth) < 4 * var_fourth**0.5


def test_the_variable_pool_holds_2_to_26_letters(sample):
    """A pool of 2 (1 draw in 25) all but always writes both; a pool of 3 or more writes only two
    letters in under 0.5 % of programs. So about 4 % of programs have exactly 2 variables."""
    programs, _ = sample
    two = sum(p["n_vars"] == 2 for p in programs) / len(programs)
    assert 0.025 < two < 0.06
    assert min(p["n_vars"] for p in programs) == 2 and max(p["n_vars"] for p in programs) >= 14
    queries = {lines_of(p["program"])[1] for p in programs}
    assert queries == set(string.ascii_lowercase)  # the whole alphabet is drawn from


# --- draw ------------------------------------------------------------------


class Script:
    """random_program replaced by a list of scripted draws (dicts, or None for a dropped program)."""

    def __init__(self, draws, r):
        self.draws, self.r, self.calls = list(draws), r, 0

    def __call__(self, r):
        assert r is self.r  # the caller's generator, so the draws are one stream
        self.calls += 1
        return self.draws.pop(0) if self.draws else {"hops": 9, "id": -1}


def scripted(monkeypatch, hops_and_skips, r):
    draws = [None if h is None else {"hops": h, "id": i, "skip": s} for i, (h, s) in enumerate(hops_and_skips)]
    script = Script(draws, r)
    monkeypatch.setattr(spec, "random_program", script)
    return script


def test_draw_fills_each_hop_count_to_per_hop_in_draw_order_and_stops_when_full(monkeypatch):
    r = random.Random(0)
    plan = [(0, 0), (None, 0), (5, 0), (1, 0), (0, 0), (0, 0), (2, 1), (1, 0), (2, 0), (4, 0), (3, 0), (1, 0)]
    plan += [(4, 0), (2, 0), (3, 0), (9, 0), (4, 0)]  # the last two are never drawn: every count is full
    script = scripted(monkeypatch, plan, r)
    got = spec.draw(r, lambda p: not p["skip"], per_hop=2)
    want = [(0, 0), (0, 4), (1, 3), (1, 7), (2, 8), (2, 13), (3, 10), (3, 14), (4, 9), (4, 12)]
    assert [(p["hops"], p["id"]) for p in got] == want
    assert script.calls == 15


def test_draw_stops_after_max_draws_and_leaves_a_rare_cell_short(monkeypatch):
    r = random.Random(0)
    script = scripted(monkeypatch, [(h % 4, 0) for h in range(40)], r)  # never 4 hops
    got = spec.draw(r, lambda p: True, per_hop=3, max_draws=30)
    assert script.calls == 30
    assert [p["hops"] for p in got] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    script = scripted(monkeypatch, [], r)
    assert spec.draw(r, lambda p: False, per_hop=1) == [] and script.calls == 100_000  # the default bound


# --- VARIANTS --------------------------------------------------------------


def test_each_variant_pins_its_property_boundaries_included():
    v = spec.VARIANTS
    p = {"chain": (2, 3, 4), "q_writes": 3, "n_vars": 5}
    assert v["mix"](p) and v["adjacent"](p) and v["query_thrice"](p) and v["few_vars"](p)
    assert not v["many_vars"](p) and not v["const_line1"](p)
    assert v["adjacent"]({"chain": (7,)})  # a 0-hop chain is one line
    assert not v["adjacent"]({"chain": (1, 2, 4)})
    assert not v["query_thrice"]({"q_writes": 2}) and not v["few_vars"]({"n_vars": 6})
    assert v["many_vars"]({"n_vars": 14}) and not v["many_vars"]({"n_vars": 13})
    assert v["const_line1"]({"chain": (0, 5)}) and not v["const_line1"]({"chain": (1, 5)})


# --- main ------------------------------------------------------------------


def table(out: str) -> tuple[list[str], dict[str, list[float]]]:
    """(column names, variant -> its numbers) of the printed table."""
    head, index, *rows = out.splitlines()
    assert index.split() == ["variant"]
    return head.split()[1:], {row.split()[0]: [float(x) for x in row.split()[1:]] for row in rows}


def holds(variant: str, text: str) -> bool:
    """The variant's pinned property, read from the text by the second interpreter."""
    lines, query = lines_of(text)
    _, chain = trace(lines, query)
    n_vars = len({lhs for lhs, _ in lines})
    return {
        "mix": True,
        "adjacent": all(b - a == 1 for a, b in zip(chain, chain[1:])),
        "query_thrice": sum(lhs == query for lhs, _ in lines) >= 3,
        "few_vars": n_vars <= 5,
        "many_vars": n_vars >= 14,
        "const_line1": chain[0] == 0,
    }[variant]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return oracle_checkpoint(tmp_path_factory.mktemp("spec_check"), 5, WRONG)


def test_main_prints_each_variants_accuracy_by_hop_count_all_and_n(checkpoint, capsys, threads):
    SEEN.clear()
    spec.main([str(checkpoint), "--per-hop", "3", "--seed", "7", "--threads", "3"])
    columns, rows = table(capsys.readouterr().out)
    assert threads == [3]
    assert columns == ["0", "1", "2", "3", "4", "all", "n"]
    assert list(rows) == list(spec.VARIANTS)  # the variants in their own order
    assert len(SEEN) == len(spec.VARIANTS)  # one scoring pass a variant, in that order
    for (variant, got), texts in zip(rows.items(), SEEN):
        assert len(texts) == 15 and all(holds(variant, t) for t in texts)
        by_hop = {h: [] for h in range(5)}
        for t in texts:
            lines, query = lines_of(t)
            by_hop[len(trace(lines, query)[1]) - 1].append(query not in WRONG)
        assert all(len(v) == 3 for v in by_hop.values())
        want = [sum(v) / 3 for v in by_hop.values()] + [sum(map(sum, by_hop.values())) / 15, 15]
        assert got == pytest.approx([round(x, 3) for x in want], abs=1e-9)
    assert any(0 < x < 1 for row in rows.values() for x in row[:5])  # the fixture tells right from wrong
    SEEN.clear()


def test_main_draws_from_its_seed_the_default_seed_being_0(checkpoint, capsys, threads):
    SEEN.clear()
    runs = {}
    for name, extra in (("default", []), ("0", ["--seed", "0"]), ("1", ["--seed", "1"])):
        spec.main([str(checkpoint), "--per-hop", "1", *extra])
        runs[name] = (capsys.readouterr().out, scored())
    assert runs["default"] == runs["0"]
    assert runs["1"][1] != runs["0"][1]
    assert threads == [1, 1, 1]  # one thread by default


def test_main_asks_each_variant_for_100_programs_per_hop_count_by_default(checkpoint, monkeypatch, capsys, threads):
    programs = [spec.random_program(random.Random(s)) for s in range(40)]
    programs = [p for p in programs if p][:7]
    calls = []

    def fake_draw(r, keep, per_hop):
        calls.append((r.getstate(), keep, per_hop))
        return programs

    monkeypatch.setattr(spec, "draw", fake_draw)
    spec.main([str(checkpoint)])
    assert [keep for _, keep, _ in calls] == list(spec.VARIANTS.values())
    assert {per_hop for _, _, per_hop in calls} == {100}
    assert calls[0][0] == random.Random(0).getstate()
    _, rows = table(capsys.readouterr().out)
    assert rows["mix"][-1] == 7 and rows["mix"][-2] == pytest.approx(
        round(sum(lines_of(p["program"])[1] not in WRONG for p in programs) / 7, 3)
    )
    SEEN.clear()


def test_help_names_the_checkpoint_and_every_flag(capsys):
    out = help_text(lambda: spec.main(["--help"]), capsys)
    assert summary_line(spec) in out
    assert "checkpoint a step{N} directory of a binding run" in out
    assert "--per-hop PER_HOP programs per (variant, hop count)" in out
    assert "--seed SEED" in out and "--threads THREADS" in out

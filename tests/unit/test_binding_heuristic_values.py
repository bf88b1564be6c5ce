"""Heuristic guesses, their per-checkpoint counts and the phase boundaries, checked against
second implementations written here (exec-based semantics, plain loops) on fixtures where the
cases differ: ties between digits, the digit 0 as a guess, copies after the last constant,
rates exactly at the thresholds, a first checkpoint that is not step 0."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from refusals import refuses

from emergence.studies.binding.heuristics import CONTROLLED, HEURISTICS, evaluate, match_pattern, one_value
from emergence.studies.binding.programs import Program
from emergence.studies.binding.sets import heuristic_table
from emergence.studies.binding.trajectory import PhaseParams, checkpoint_rows, detect_phases

HEUR = list(HEURISTICS)


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


def reference_rows(preds, programs) -> dict[tuple[str, int], tuple[float, int]]:
    """(metric, hops) -> (value, n) by plain loops over the programs."""
    out = {}
    ans, hops = list(programs["answer"]), list(programs["hops"])
    right = [p == a for p, a in zip(preds, ans)]
    out[("accuracy", -1)] = (sum(right) / len(right), len(right))
    for h in sorted(set(hops)):
        idx = [i for i, x in enumerate(hops) if x == h]
        out[("accuracy", h)] = (sum(right[i] for i in idx) / len(idx), len(idx))
    for name in HEUR:
        g = list(programs[f"heur_{name}"])
        agree = [p == x for p, x in zip(preds, g)]
        out[(f"agree_{name}", -1)] = (sum(agree) / len(agree), len(agree))
        wrong = [i for i in range(len(g)) if g[i] != -1 and g[i] != ans[i]]
        if wrong:
            out[(f"follow_{name}", -1)] = (sum(agree[i] for i in wrong) / len(wrong), len(wrong))
    return out


def test_checkpoint_rows_match_loops_with_zero_guesses():
    rng = np.random.default_rng(5)
    n = 60
    programs = pd.DataFrame({"answer": rng.integers(0, 3, n), "hops": rng.choice([0, 1, 4], n)})
    for name in HEUR:  # small digit range: many 0 guesses, many right, many -1
        programs[f"heur_{name}"] = rng.integers(-1, 3, n)
    preds = rng.integers(0, 3, n)
    rows = pd.DataFrame(checkpoint_rows(preds, programs, seed=3, step=7))
    got = {(m, h): (v, k) for m, h, v, k in rows[["metric", "hops", "value", "n"]].itertuples(index=False)}
    want = reference_rows(preds, programs)
    assert got.keys() == want.keys()
    for key, (v, k) in want.items():
        assert got[key][0] == pytest.approx(v) and got[key][1] == k, key


def test_follow_counts_a_wrong_guess_of_zero():
    # The heuristic guesses 0 on every program; the answer is 0 on the first only. So it is
    # wrong on 3 programs, and the model gives 0 on two of them.
    programs = pd.DataFrame({"answer": [0, 1, 2, 3], "hops": [1, 1, 1, 1]})
    for name in HEUR:
        programs[f"heur_{name}"] = [0, 0, 0, 0] if name == HEUR[0] else [-1, -1, -1, -1]
    rows = pd.DataFrame(checkpoint_rows(np.array([0, 0, 0, 3]), programs, seed=0, step=0))
    follow = rows[rows["metric"] == f"follow_{HEUR[0]}"].iloc[0]
    assert (follow["value"], follow["n"]) == (pytest.approx(2 / 3), 3)
    assert not rows["metric"].eq(f"follow_{HEUR[1]}").any()  # -1 everywhere: never wrong


def trajectory(steps, deep, follow, shallow=None) -> pd.DataFrame:
    """Deepest class 3 at `deep`; class 1 at `shallow` (default 1 - deep); HEUR[1] followed at `follow`."""
    shallow = shallow or [1 - d for d in deep]
    rows = []
    for s, d, f, sh in zip(steps, deep, follow, shallow):
        base = dict(seed=4, step=s, layer=-1, head=-1, n=10)
        rows += [dict(base, metric="accuracy", hops=h, value=v) for h, v in ((-1, 0.5), (1, sh), (3, d))]
        rows += [dict(base, metric=f"follow_{n}", hops=-1, value=f if n == HEUR[1] else 0.1) for n in HEUR]
    return pd.DataFrame(rows)


def spans(traj, **kw) -> dict[str, list[int]]:
    ph = detect_phases(traj, PhaseParams(**kw)).set_index("name")
    return {n: ph.loc[n, ["start_step", "end_step"]].tolist() for n in ph.index}


def test_phase_thresholds_are_inclusive():
    # Step 200: following exactly chance + margin (0.25) starts phase 2; step 300: deep accuracy
    # exactly traversal_accuracy (0.8), above following, starts phase 3. First checkpoint 100.
    traj = trajectory([100, 200, 300], deep=[0.1, 0.1, 0.8], follow=[0.24, 0.25, 0.1])
    assert spans(traj) == {"random": [0, 200], "heuristic": [200, 300], "traversal": [300, -1]}


def test_phase_thresholds_just_below_are_not_reached():
    traj = trajectory([100, 200, 300], deep=[0.1, 0.1, 0.79], follow=[0.1, 0.249, 0.1])
    assert spans(traj) == {"random": [0, -1], "heuristic": [-1, -1], "traversal": [-1, -1]}


def test_traversal_needs_deep_strictly_above_following():
    # Step 20: deep 0.9 equals the best following rate: not traversal (and following 0.9 makes it
    # heuristic); step 30 deep 0.9 > 0.5.
    traj = trajectory([10, 20, 30], deep=[0.1, 0.9, 0.9], follow=[0.1, 0.9, 0.5])
    assert spans(traj) == {"random": [0, 20], "heuristic": [20, 30], "traversal": [30, -1]}


def test_heuristic_following_after_traversal_starts_no_phase_two():
    # Following reaches 0.3 only at and after the traversal step: phase 2 never starts, phase 1
    # ends where phase 3 starts. The deepest class is read (class 1 is high early, not deep).
    traj = trajectory([0, 5, 9], deep=[0.1, 0.85, 0.95], follow=[0.1, 0.3, 0.6], shallow=[0.9, 0.9, 0.9])
    assert spans(traj) == {"random": [0, 5], "heuristic": [-1, -1], "traversal": [5, -1]}


def test_heuristic_detail_quotes_the_peak_inside_phase_two():
    # Peak following 0.7 at step 3 lies inside phase 2 (steps 2..4, 4 excluded); 0.85 at step 4
    # (deep 0.9 beats it: traversal starts) and 0.95 at step 6 must not be quoted.
    traj = trajectory([1, 2, 3, 4, 6], deep=[0.1, 0.1, 0.2, 0.9, 0.99], follow=[0.1, 0.4, 0.7, 0.85, 0.95])
    ph = detect_phases(traj, PhaseParams()).set_index("name")
    assert ph.loc["heuristic", ["start_step", "end_step"]].tolist() == [2, 4]
    assert ph.loc["heuristic", "detail"] == f"{HEUR[1]} followed at 0.700 where it is wrong (peak, step 3)"
    assert ph.loc["traversal", "detail"] == "deepest hop class (3 hops) accuracy 0.990 at the last checkpoint"


def test_final_agreement_and_phase_bands_use_each_seeds_own_last_step():
    from emergence.studies.binding.report import _final_agreement, phase_bands

    rows = []
    for seed, steps in ((0, [0, 10, 30]), (1, [0, 20])):
        for s in steps:
            for name in HEUR[:2]:
                value = seed + s / 100 + (0.5 if name == HEUR[1] else 0.0)
                rows.append(dict(seed=seed, step=s, metric=f"agree_{name}", hops=-1, value=value))
                rows.append(dict(seed=seed, step=s, metric=f"follow_{name}", hops=-1, value=value / 10))
    traj = pd.DataFrame(rows)
    got = _final_agreement(traj).set_index(["seed", "heuristic"])["value"].to_dict()
    assert got == pytest.approx(
        {(0, HEUR[0]): 0.3, (0, HEUR[1]): 0.8, (1, HEUR[0]): 1.2, (1, HEUR[1]): 1.7}
    )  # seed 0 at step 30, seed 1 at step 20
    follow = _final_agreement(traj, "follow").set_index(["seed", "heuristic"])["value"].to_dict()
    assert follow == pytest.approx({(0, HEUR[0]): 0.03, (0, HEUR[1]): 0.08, (1, HEUR[0]): 0.12, (1, HEUR[1]): 0.17})
    phases = pd.DataFrame(
        [
            dict(seed=0, name="random", start_step=0, end_step=10, detail="r"),
            dict(seed=0, name="heuristic", start_step=10, end_step=-1, detail="h"),
            dict(seed=0, name="traversal", start_step=-1, end_step=-1, detail="not reached"),
            dict(seed=1, name="random", start_step=0, end_step=-1, detail="r1"),
        ]
    )
    bands = phase_bands(phases, traj).set_index(["seed", "name"])
    assert bands.loc[(0, "heuristic"), ["start", "end"]].tolist() == [10, 30]  # -1: to seed 0's last step
    assert bands.loc[(1, "random"), ["start", "end"]].tolist() == [0, 20]  # seed 1's own last step
    assert not bands.loc[(0, "traversal"), "reached"] and np.isnan(bands.loc[(0, "traversal"), "start"])
    assert not bands.loc[(1, "heuristic"), "reached"] and bands.loc[(1, "heuristic"), "detail"] == ""

"""The stress suite's exact shapes, the cells stress_table draws, its progress bar and its errors.

Small tables only (one or two programs per cell); what the programs look like is checked in
test_binding_paper.py.
"""

from __future__ import annotations

import re
from dataclasses import fields

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from refusals import refuses, refuses_key

from emergence.core.config import from_dict
from emergence.core.io import PipelineError
from emergence.studies.binding import stress as S
from emergence.studies.binding.paper import Shape
from emergence.studies.binding.programs import ProgramConfig
from emergence.studies.binding.stress_params import StressParams

SETS = [f"stress_{name}" for name in S.STRESS] + ["ref_paper", "ref_balanced"]


def pinned(shape: Shape) -> dict:
    """The fields of `shape` that differ from the paper distribution's (Shape(): nothing pinned)."""
    return {f.name: getattr(shape, f.name) for f in fields(Shape) if getattr(shape, f.name) != getattr(Shape(), f.name)}


def test_the_stress_sets_are_the_documented_ones_in_the_documented_order():
    doc = (ROOT / "docs" / "binding.md").read_text()
    documented = re.findall(
        r"^\| `(\w+)` \|", doc.split("| distribution | pinned property |")[1].split("\n\n")[0], re.M
    )
    assert documented == list(S.STRESS)
    for n_lines in (8, 16, 25):
        assert list(S.stress_shapes(n_lines)) == list(S.STRESS)


def test_each_stress_set_pins_what_the_docs_say_at_16_lines():
    # docs/binding.md: "the paper distribution with one property pinned"; at 16 lines by hand: three or more
    # writes of the query (up to one per line), >= 14 distinct variables (7/8 of 16) up to all 26 letters
    assert {name: pinned(shape) for name, shape in S.stress_shapes(16).items()} == {
        "links_spread": {"links": "spread"},
        "links_adjacent": {"links": "adjacent"},
        "const_line1": {"links": "const_first"},
        "const_late": {"links": "const_last"},
        "query_once": {"query_writes": (1, 1)},
        "query_thrice": {"query_writes": (3, 16)},
        "many_vars": {"n_vars": (14, 26)},
        "few_vars": {"n_vars": (1, 5)},
        "twin_chain": {"distractor": "twin"},
    }


@pytest.mark.parametrize(
    "n_lines, least",
    [
        (3, 3),  # 7/8 of 3 = 2.625: at least 3, every line a new variable
        (8, 7),  # 7/8 of 8 = 7
        (9, 8),  # 7.875, rounded up
        (12, 11),  # 10.5, rounded up
        (16, 14),  # 14: where 7/8 of the lines and the cap of 14 meet
        (17, 14),  # 14.875, capped at 14
        (24, 14),  # 21, capped at 14
    ],
)
def test_many_vars_asks_for_7_8_of_the_lines_at_most_14(n_lines, least):
    assert S.stress_shapes(n_lines)["many_vars"] == Shape(n_vars=(least, 26))


@pytest.mark.parametrize("n_lines", range(3, 26))
def test_only_query_thrice_and_many_vars_follow_the_program_length(n_lines):
    shapes = S.stress_shapes(n_lines)
    assert all(len(pinned(shape)) == 1 for shape in shapes.values())  # one property each
    # query_thrice: three writes up to one per line, so no count a program of n_lines lines can have is cut
    assert shapes["query_thrice"] == Shape(query_writes=(3, n_lines))
    # many_vars: an inclusive range a program can meet (no more variables than lines), its floor the
    # smallest count >= 7/8 of the lines unless that passes 14
    low, high = shapes["many_vars"].n_vars
    assert low <= min(n_lines, 14) and high == 26
    assert low == 14 or low - 1 < 7 * n_lines / 8 <= low
    fixed = {name: shape for name, shape in S.stress_shapes(16).items() if name not in ("query_thrice", "many_vars")}
    assert {name: shapes[name] for name in fixed} == fixed


def _table(monkeypatch, cfg: ProgramConfig, n_per_hop: int, **kwargs) -> tuple[pd.DataFrame, list[dict]]:
    """stress_table with its tqdm replaced by a recorder: (table, [each bar's kwargs and updates])."""
    bars: list[dict] = []

    class Bar:
        def __init__(self, **kw):
            self.rec = {**kw, "updates": [], "closed": False}
            bars.append(self.rec)

        def update(self, k):
            self.rec["updates"].append(k)

        def close(self):
            self.rec["closed"] = True

    monkeypatch.setattr(S, "tqdm", Bar)
    return S.stress_table(np.random.default_rng(0), cfg, n_per_hop, **kwargs), bars


def test_every_set_gets_each_configured_hop_count_and_no_other(monkeypatch):
    cfg = ProgramConfig(distribution="paper", n_lines=12, min_hops=2, max_hops=3)
    df, _ = _table(monkeypatch, cfg, 2)
    cells = df.groupby(["set", "hops"], sort=False).size()
    assert cells.to_dict() == {(s, h): 2 for s in SETS for h in (2, 3)}
    assert list(dict.fromkeys(df["set"])) == SETS  # stress sets in STRESS order, then the references
    assert (df["n_lines"] == 12).all()
    # one table: the index runs 0..n-1 across the sets
    assert df.index.equals(pd.RangeIndex(len(SETS) * 2 * 2))


def test_ref_balanced_draws_from_the_balanced_generator(monkeypatch):
    calls = []

    def spy(r, cfg, n, hops):
        calls.append((cfg, n, hops))
        return real(r, cfg, n, hops)

    real = S.sample_balanced
    monkeypatch.setattr(S, "sample_balanced", spy)
    cfg = ProgramConfig(distribution="paper", n_lines=10, min_hops=1, max_hops=2)
    df, _ = _table(monkeypatch, cfg, 1)
    assert [(n, h) for _, n, h in calls] == [(10, 1), (10, 2)]
    assert df[df["set"] == "ref_balanced"]["hops"].tolist() == [1, 2]


@pytest.mark.parametrize("n_per_hop", [1, 2])
def test_the_bar_counts_every_program_of_every_cell(monkeypatch, n_per_hop):
    cfg = ProgramConfig(distribution="paper", n_lines=10, min_hops=0, max_hops=2)
    df, bars = _table(monkeypatch, cfg, n_per_hop, progress=True)
    total = 11 * 3 * n_per_hop  # (9 stress + 2 reference sets) x 3 hop counts x n_per_hop
    assert len(df) == total
    assert bars == [
        {"total": total, "desc": "programs[stress]", "disable": False, "updates": [n_per_hop] * 33, "closed": True}
    ]


def test_the_bar_is_off_unless_asked(monkeypatch):
    cfg = ProgramConfig(distribution="paper", n_lines=8, min_hops=1, max_hops=1)
    _, bars = _table(monkeypatch, cfg, 1)
    assert [(b["total"], b["desc"], b["disable"]) for b in bars] == [(11, "programs[stress]", True)]


def test_the_bar_writes_to_stderr_only_when_asked(capsys):
    cfg = ProgramConfig(distribution="paper", n_lines=8, min_hops=1, max_hops=1)
    S.stress_table(np.random.default_rng(0), cfg, 1)
    assert capsys.readouterr().err == ""
    S.stress_table(np.random.default_rng(0), cfg, 2, progress=True)
    err = capsys.readouterr().err
    assert err.startswith("\rprograms[stress]:   0%|") and "| 22/22 [" in err, err


def test_each_hop_count_no_program_can_fill_is_named_and_the_rest_drawn(monkeypatch, capsys):
    # 10 lines: a twin chain of h hops needs 2(h+1) <= 10 lines, so hops 5 and 6 are left out,
    # each printed; few_vars (<= 5 variables) cannot hold a 5- or 6-hop chain either
    cfg = ProgramConfig(distribution="paper", n_lines=10, min_hops=3, max_hops=6)
    df, bars = _table(monkeypatch, cfg, 1)
    assert capsys.readouterr().out.splitlines() == [
        "stress set few_vars: no program of 10 lines has 5 hops and this shape; left out",
        "stress set few_vars: no program of 10 lines has 6 hops and this shape; left out",
        "stress set twin_chain: no program of 10 lines has 5 hops and this shape; left out",
        "stress set twin_chain: no program of 10 lines has 6 hops and this shape; left out",
    ]
    hops = df.groupby("set", sort=False)["hops"].apply(list).to_dict()
    assert hops == {s: [3, 4] if s in ("stress_few_vars", "stress_twin_chain") else [3, 4, 5, 6] for s in SETS}
    assert bars[0]["total"] == 11 * 4 and bars[0]["updates"] == [1] * (11 * 4 - 4)


def test_a_failed_draw_names_the_stress_set(monkeypatch):
    def fail(r, n, h, shape):
        raise PipelineError(f"no program of {n} lines, {h} hops")

    monkeypatch.setattr(S, "sample_shaped", fail)
    cfg = ProgramConfig(distribution="paper", n_lines=8, min_hops=2, max_hops=2)
    with refuses("binding_programs", "links_spread", "no program of 8 lines, 2 hops") as info:  # and the cause's words
        S.stress_table(np.random.default_rng(0), cfg, 1)
    assert isinstance(info.value.__cause__, PipelineError)


@pytest.mark.parametrize("every", [0, 1, 500])
def test_stress_params_accept_every_n_from_zero(every):
    assert from_dict(StressParams, {"curve_every": every}, "binding_stress") == StressParams(curve_every=every)


@pytest.mark.parametrize("every", [-1, True, False])
def test_stress_params_refuse_negatives_and_booleans(every):
    with refuses_key("binding_stress.curve_every", every):
        from_dict(StressParams, {"curve_every": every}, "binding_stress")

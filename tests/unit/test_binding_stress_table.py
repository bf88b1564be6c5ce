"""The stress suite's exact shapes, the cells stress_table draws, its progress bar and its errors.

Small tables only (one or two programs per cell); what the programs look like is checked in
test_binding_paper.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from refusals import assert_refused, refuses

from emergence.core.config import from_dict
from emergence.core.io import PipelineError
from emergence.studies.binding import stress as S
from emergence.studies.binding.paper import Shape
from emergence.studies.binding.programs import ProgramConfig

SETS = [f"stress_{name}" for name in S.STRESS] + ["ref_paper", "ref_balanced"]


def _shapes(query_writes_max: int, many_vars_min: int) -> dict[str, Shape]:
    return {
        "links_spread": Shape(links="spread"),
        "links_adjacent": Shape(links="adjacent"),
        "const_line1": Shape(links="const_first"),
        "const_late": Shape(links="const_last"),
        "query_once": Shape(query_writes=(1, 1)),
        "query_thrice": Shape(query_writes=(3, query_writes_max)),
        "many_vars": Shape(n_vars=(many_vars_min, 26)),
        "few_vars": Shape(n_vars=(1, 5)),
        "twin_chain": Shape(distractor="twin"),
    }


@pytest.mark.parametrize(
    "n_lines, many_vars_min",
    [
        (8, 7),  # 8 - 8 // 8: 7/8 of the lines
        (9, 8),  # 9 - 9 // 8
        (16, 14),  # 16 - 16 // 8 = 14: the cap and 7/8 agree
        (17, 14),  # 17 - 2 = 15, capped at 14
        (24, 14),  # 24 - 3 = 21, capped at 14
    ],
)
def test_stress_shapes_pin_exact_bounds(n_lines, many_vars_min):
    # query_thrice: three writes up to one per line; many_vars: min(14, 7/8 of the lines) up to all 26
    # letters; few_vars: 1 to 5 distinct variables
    assert S.stress_shapes(n_lines) == _shapes(n_lines, many_vars_min)
    assert list(S.stress_shapes(n_lines)) == list(S.STRESS)


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
    assert from_dict(S.StressParams, {"curve_every": every}, "binding_stress") == S.StressParams(curve_every=every)


@pytest.mark.parametrize("every", [-1, True, False])
def test_stress_params_refuse_negatives_and_booleans(every):
    with pytest.raises(PipelineError) as info:
        from_dict(S.StressParams, {"curve_every": every}, "binding_stress")
    assert_refused(str(info.value).splitlines(), "binding_stress.curve_every", every)

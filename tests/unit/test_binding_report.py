"""reports/binding.html and binding.json by value (the report module's own code): each section's
sentences, table cells and the data each figure is drawn from, traced back to the small hand-made
tables of test_report.py (2 seeds whose numbers differ). The `drawn` fixture and the table readers
here serve the binding page's other tests too (test_binding_report_mech.py, test_binding_report_stress.py,
test_binding_aids.py)."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import pytest
from refusals import refuses_key
from test_grounding_report import paras, sections, table, tables
from test_interactive import traces
from test_report import (
    PROVENANCE,
    _ablation,
    _aids,
    _llc,
    _patching,
    _routing,
    _stress,
)

from emergence.core.config import from_dict
from emergence.core.report import html as H
from emergence.core.report import plots
from emergence.studies.binding import report as R
from emergence.studies.binding.aid_table import aids_section
from emergence.studies.binding.heuristics import HEURISTICS
from emergence.studies.binding.report_llc import llc_section
from emergence.studies.binding.report_params import ReportParams

# ---- the page read back: the plots it asks for, its table cells

PLOTS = ("trajectory", "lines_by_class", "bars", "heatmap", "heatmap_grid", "patching")


@pytest.fixture
def drawn(monkeypatch) -> list:
    """Each plot the code under test asks for: [plot function, args, kwargs, alt text of its embedding]."""
    calls = []
    for name in PLOTS:

        def spy(*args, _name=name, **kwargs):
            calls.append([_name, args, kwargs, None])
            return len(calls) - 1

        monkeypatch.setattr(plots, name, spy)

    def keep(fig, alt, dpi=100):
        calls[fig][3] = alt
        return f'<img alt="{H.esc(alt)}" src="data:image/png;base64,">'

    monkeypatch.setattr(H, "figure", keep)
    return calls


def cells(fragment: str, caption: str | None = None) -> list[list[str]]:
    """Header and rows of the one table with this caption, as the reader sees them."""
    t = table(fragment, caption)
    return [list(t.columns), *t.values.tolist()]


def all_cells(fragment: str) -> list[tuple[str | None, list[list[str]]]]:
    """Every table in order: (caption, [header, *rows])."""
    return [(c, [h, *r]) for c, h, r in tables(fragment)]


# ---- fixtures: seeds whose last steps, accuracies and phases differ

HEURS = ("last_constant", "first_constant")
HEUR = list(HEURISTICS)  # every heuristic, in the table's order
STEPS = {0: (0, 10, 100, 1000), 1: (0, 10, 100)}  # seed 1 stops at step 100
AGREE = {(0, "last_constant"): 0.2, (0, "first_constant"): 0.1, (1, "last_constant"): 0.4, (1, "first_constant"): 0.3}
FOLLOW = {
    (0, "last_constant"): 0.05,
    (0, "first_constant"): 0.15,
    (1, "last_constant"): 0.25,
    (1, "first_constant"): 0.35,
}


def acc_value(seed: int, step: int, hops: int) -> float:
    return round(0.1 * (hops + 2) + step / 10000 + 0.01 * seed, 6)


def traj() -> pd.DataFrame:
    """Final agreement / following differ per seed and heuristic (0.9 / 0.6 before the last step);
    per-hop agreement rows (hops 2) are not the overall ones; seed 1 diverged at step 37."""
    rows = []
    for s, steps in STEPS.items():
        for step in steps:
            last = step == steps[-1]
            for hops in (-1, 0, 2):
                rows.append((s, step, "accuracy", hops, acc_value(s, step, hops)))
            for h in HEURS:
                rows.append((s, step, f"agree_{h}", -1, AGREE[(s, h)] if last else 0.9))
                rows.append((s, step, f"follow_{h}", -1, FOLLOW[(s, h)] if last else 0.6))
                rows.append((s, step, f"agree_{h}", 2, 0.77))
                rows.append((s, step, f"follow_{h}", 2, 0.66))
            rows.append((s, step, "train_loss", -1, 2.0 / (step + 1)))
    rows.append((1, 37, "diverged_at", -1, 1.0))
    df = pd.DataFrame(rows, columns=["seed", "step", "metric", "hops", "value"])
    return df.assign(layer=-1, head=-1, n=100)


def phases() -> pd.DataFrame:
    rows = [
        (0, 1, "random", 0, 10, ""),
        (0, 2, "heuristic", 10, 100, "last_constant"),
        (0, 3, "traversal", 100, -1, ""),
        (1, 1, "random", 0, 10, ""),
        (1, 2, "heuristic", 10, -1, "first_constant"),  # ends at seed 1's last step, 100
        (5, 1, "random", 0, 3, ""),  # a seed without a trajectory: not shown
    ]  # seed 1's traversal: no row at all
    return pd.DataFrame(rows, columns=["seed", "phase", "name", "start_step", "end_step", "detail"])


TEST = {  # seed -> [(program_id, hops, correct)] on the main test split
    0: [(0, 0, True), (1, 0, False), (2, 2, True), (3, 2, False), (4, 0, False)],  # 2/5; hops 0: 1/3, 2: 1/2
    1: [(0, 0, True), (1, 0, True), (2, 2, False)],  # 2/3; hops 0: 1, 2: 0
}


def preds() -> pd.DataFrame:
    rows = []
    for s in (1, 0):  # seed 1 first: the examples still come from seed 0
        rows += [(s, "main", "test", 4 + hops, hops, pid, ok) for pid, hops, ok in TEST[s]]
        rows.append((s, "main", "train", 8, 4, 10, False))  # not held out
        rows += [(s, "gen", "test", n, h, pid, ok) for pid, n, h, ok in [(20, 5, 3, True), (21, 6, 3 + s, bool(s))]]
    df = pd.DataFrame(rows, columns=["seed", "set", "split", "n_lines", "hops", "program_id", "correct"])
    df["answer"] = df["program_id"] % 7 + 2
    df["pred"] = df["answer"].where(df["correct"], 1)
    df["program"] = [f"p{pid}=<{s}>\n#p{pid}:" for s, pid in zip(df["seed"], df["program_id"])]
    return df.assign(step=1000)


def progs() -> pd.DataFrame:
    rows = [  # (set, split, hops, answer, heur_last_constant, heur_first_constant, n_lines)
        ("main", "train", 0, 1, 1, 2, 4),
        ("main", "train", 0, 2, 2, 2, 4),
        ("main", "train", 0, 3, 0, 0, 4),
        ("main", "train", 2, 4, 4, 4, 6),
        ("main", "train", 2, 9, 9, 9, 6),
        ("main", "train", 3, 9, 9, 9, 7),  # no test program has 3 hops: a 0 cell
        ("main", "test", 0, 5, 5, 1, 4),
        ("main", "test", 0, 6, 0, 6, 4),
        ("main", "test", 0, 7, 7, 7, 4),
        ("main", "test", 2, 8, 8, 0, 6),  # test: last_constant 3/4, first_constant 2/4
        ("gen", "test", 1, 1, 1, 0, 3),
        ("gen", "test", 4, 2, 2, 0, 7),
    ]
    cols = ["set", "split", "hops", "answer", "heur_last_constant", "heur_first_constant", "n_lines"]
    return pd.DataFrame(rows, columns=cols).assign(program="a=1\n#a:", query="a")


def heurs() -> pd.DataFrame:
    return pd.DataFrame({"heuristic": list(HEURS), "match_rate": [0.12, 0.09], "n": [100, 80]})


def stats(a: float, b: float) -> dict:
    """Two seeds: mean, sample sd |a - b| / sqrt(2) and the per-seed values, by hand."""
    return {
        "mean": round((a + b) / 2, 6),
        "sd": round(abs(a - b) / 2**0.5, 6),
        "per_seed": {"0": round(a, 6), "1": round(b, 6)},
    }


def metrics() -> dict:
    return R.binding_metrics(traj(), preds(), heurs(), phases(), _stress())


# ---- small pieces


def test_report_params_accept_zero_examples_and_reject_negative():
    assert from_dict(ReportParams, {"n_examples": 0}, "report") == ReportParams(n_examples=0)
    with refuses_key("report.n_examples", -1):
        from_dict(ReportParams, {"n_examples": -1}, "report")


def test_stats_of_no_one_and_three_seeds():
    assert R._stats(pd.Series([], dtype=float)) == {"mean": None, "sd": None, "per_seed": {}}
    assert R._stats(pd.Series({3: 0.25})) == {"mean": 0.25, "sd": None, "per_seed": {"3": 0.25}}
    got = R._stats(pd.Series({2: 0.5, 0: 0.0, 1: 1.0}))
    assert got == {"mean": 0.5, "sd": 0.5, "per_seed": {"0": 0.0, "1": 1.0, "2": 0.5}}
    assert list(got["per_seed"]) == ["0", "1", "2"]


def test_clean_sorts_keys_as_text_rounds_and_maps_nan_to_none():
    import numpy as np

    got = R._clean({10: np.int64(3), 2: {"b": np.float64("nan"), "a": 0.12345678}, 1: [1.23456789], 0: "x"})
    assert got == {"0": "x", "1": [1.23456789], "10": 3, "2": {"a": 0.123457, "b": None}}
    assert list(got) == ["0", "1", "10", "2"] and list(got["2"]) == ["a", "b"]
    assert type(got["10"]) is int and R._clean(np.float32(0.5)) == 0.5 and R._clean(float("nan")) is None


def test_fmt_mean_and_sd():
    assert R._fmt({"mean": None, "sd": None}) == "n/a"
    assert R._fmt({"mean": 0.5, "sd": None}) == "0.500"
    assert R._fmt({"mean": 0.12345, "sd": 0.0456}) == "0.123 ± 0.046"


def test_phase_bands_resolve_open_ends_per_seed_and_mark_missing_phases():
    got = R.phase_bands(phases(), traj())
    want = pd.DataFrame(
        {
            "seed": [0, 0, 0, 1, 1, 1],
            "name": ["random", "heuristic", "traversal"] * 2,
            "start": [0.0, 10.0, 100.0, 0.0, 10.0, float("nan")],
            "end": [10.0, 100.0, 1000.0, 10.0, 100.0, float("nan")],
            "detail": ["", "last_constant", "", "", "first_constant", ""],
            "reached": [True, True, True, True, True, False],
        }
    )
    pd.testing.assert_frame_equal(got, want)
    # start_step -1: not reached either
    flagged = phases().assign(start_step=lambda d: d["start_step"].where(d["name"] != "random", -1))
    assert R.phase_bands(flagged, traj())["reached"].tolist() == [False, True, True, False, True, False]


def test_best_heuristic_ties_go_to_the_first_name():
    h = pd.DataFrame({"heuristic": ["zeta", "alpha", "mid"], "match_rate": [0.3, 0.3, 0.2], "n": [1, 1, 1]})
    m = R.binding_metrics(traj(), preds(), h, phases(), _stress())
    assert m["best_heuristic"] == {"name": "alpha", "match_rate": 0.3}


# ---- metrics JSON


def test_binding_metrics_every_value():
    from emergence.studies.binding.report_stress import stress_metrics

    m = metrics()
    assert m == {
        "accuracy": stats(0.4, 2 / 3),
        "accuracy_by_hops": {"0": stats(1 / 3, 1.0), "2": stats(0.5, 0.0)},
        "accuracy_deepest": {"hops": 2, **stats(0.5, 0.0)},
        "generalisation_accuracy": stats(0.5, 1.0),
        "stress": stress_metrics(_stress()),
        "heuristic_agreement": {"first_constant": stats(0.1, 0.3), "last_constant": stats(0.2, 0.4)},
        "best_heuristic": {"name": "last_constant", "match_rate": 0.12},
        "final_step": {"0": 1000, "1": 100},
        "diverged_at": {"1": 37},
        "n_test_programs": 5,
        "phases": {
            "0": {
                "heuristic": {"reached": True, "start_step": 10, "end_step": 100},
                "random": {"reached": True, "start_step": 0, "end_step": 10},
                "traversal": {"reached": True, "start_step": 100, "end_step": 1000},
            },
            "1": {
                "heuristic": {"reached": True, "start_step": 10, "end_step": 100},
                "random": {"reached": True, "start_step": 0, "end_step": 10},
                "traversal": {"reached": False, "start_step": None, "end_step": None},
            },
        },
    }
    assert m["stress"]["weakest"] == {"set": "many_vars", "min_seed_accuracy": 0.0}


def test_final_agreement_and_following_at_each_seeds_last_step():
    got = R._final_agreement(traj(), "follow").sort_values(["seed", "heuristic"])
    assert got.values.tolist() == [
        [0, "first_constant", 0.15],
        [0, "last_constant", 0.05],
        [1, "first_constant", 0.35],
        [1, "last_constant", 0.25],
    ]
    assert R._final_agreement(traj()).sort_values(["seed", "heuristic"])["value"].tolist() == [0.1, 0.2, 0.3, 0.4]


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


# ---- page sections


def test_headline_states_divergence_test_programs_best_heuristic_and_seeds():
    part = R._headline(metrics())
    assert paras(part) == [
        "Seed 1: training diverged at step 37 (the loss was nan or inf and training went on, "
        "binding_train.on_nonfinite: continue); its numbers describe a broken model.",
        "Final-checkpoint accuracy of the model on 5 held-out test programs per seed, against the best "
        "shortcut heuristic: last_constant matches the answer on 0.120 of training programs (chance 0.10).",
    ]
    assert cells(part) == [
        ["quantity", "mean ± sd over seeds", "per seed"],
        ["held-out test accuracy (all hops)", "0.533 ± 0.189", "0: 0.400, 1: 0.667"],
        ["held-out test accuracy, deepest class (2 hops)", "0.250 ± 0.354", "0: 0.500, 1: 0.000"],
        ["generalisation-set accuracy", "0.750 ± 0.354", "0: 0.500, 1: 1.000"],
        ["best heuristic (last_constant), training match rate", "0.120", ""],
    ]


def test_data_section_counts_per_split_and_hops_and_the_generalisation_set():
    part = R._data_section(progs())
    assert paras(part) == [
        "Main-distribution programs per split and hop count (hops = copies between the constant "
        "and the query). The generalisation set spans other lengths and depths.",
        "Generalisation set: 2 programs, 3-7 lines, 1-4 hops.",
    ]
    assert cells(part) == [
        ["split", "0 hops", "2 hops", "3 hops"],
        ["test", "3", "1", "0"],
        ["train", "3", "2", "1"],
    ]
    main_only = R._data_section(progs()[lambda d: d["set"] == "main"])
    assert paras(main_only)[1] == "No generalisation set."


def test_trajectory_section_plots_overall_accuracy_following_and_reached_bands(drawn):
    part = R._trajectory_section(traj(), phases())
    assert paras(part) == [
        "Held-out accuracy (black) and how often the model gives each heuristic's guess where that "
        "guess is wrong (dashed: the heuristic is followed), per seed. Shaded bands are the detected "
        "phases: random (near chance), heuristic (a shortcut is followed) and traversal (deep chains "
        "solved). Dotted line: chance. The paper's phases (summary we have): random 0-800, heuristic "
        "1,200-14,000 (~56 % accuracy), traversal 34,000-105,400 steps (99.9 %).",
        "Seed 1: the traversal phase was not reached within 100 steps.",
    ]
    assert '<p class="note">Seed 1: the traversal phase' in part
    assert cells(part, "Phases (step ranges), beside the paper's (steps, accuracy)") == [
        ["seed", "name", "start", "end", "detail", "paper"],
        ["0", "random", "0", "10", "", "0-800 (12 %)"],
        ["0", "heuristic", "10", "100", "last_constant", "1,200-14,000 (56 %)"],
        ["0", "traversal", "100", "1000", "", "34,000-105,400 (99.9 %)"],
        ["1", "random", "0", "10", "", "0-800 (12 %)"],
        ["1", "heuristic", "10", "100", "first_constant", "1,200-14,000 (56 %)"],
        ["1", "traversal", "–", "–", "", "34,000-105,400 (99.9 %)"],
    ]
    ((plot, (acc, agree, bands), kwargs, alt),) = drawn
    assert (plot, kwargs, alt) == ("trajectory", {}, "accuracy and heuristic agreement over training")
    assert acc[["seed", "step", "metric", "hops", "value"]].values.tolist() == [
        [s, step, "accuracy", -1, acc_value(s, step, -1)] for s, steps in STEPS.items() for step in steps
    ]
    assert agree[["seed", "step", "hops", "heuristic", "value"]].values.tolist() == [
        [s, step, -1, h, FOLLOW[(s, h)] if step == steps[-1] else 0.6]
        for s, steps in STEPS.items()
        for step in steps
        for h in HEURS
    ]
    full = R.phase_bands(phases(), traj())
    pd.testing.assert_frame_equal(bands, full[full["reached"]])


def test_hops_section_curve_per_class_and_final_bars(drawn):
    part = R._hops_section(traj(), preds())
    assert paras(part) == [
        "Accuracy per hop class over training (mean over seeds): binding by traversal predicts "
        "shallow chains are solved first. Below: the final checkpoint on the test split, mean ± sd over seeds."
    ]
    (p1, (curve, ylabel, legend), kw1, alt1), (p2, (final, xlabel, ylabel2, chance), kw2, alt2) = drawn
    assert (p1, ylabel, legend, kw1, alt1) == (
        "lines_by_class",
        "accuracy",
        "hops",
        {},
        "accuracy per hop class over training",
    )
    # mean over the seeds that reached the step (step 1000: seed 0 alone)
    assert curve.round(6).values.tolist() == [
        [0, 0, 0.205],
        [0, 2, 0.405],
        [10, 0, 0.206],
        [10, 2, 0.406],
        [100, 0, 0.215],
        [100, 2, 0.415],
        [1000, 0, 0.3],
        [1000, 2, 0.5],
    ]
    assert list(curve.columns) == ["step", "cls", "value"]
    assert (p2, xlabel, ylabel2, chance, kw2, alt2) == (
        "bars",
        "hops",
        "test accuracy",
        0.1,
        {},
        "final accuracy per hop class",
    )
    assert list(final.columns) == ["label", "mean", "sd"]
    assert final.round(6).values.tolist() == [[0, 0.666667, 0.471405], [2, 0.25, 0.353553]]


def test_generalisation_section_heat_map_pooled_over_seeds(drawn):
    part = R._generalisation_section(preds())
    assert paras(part) == [
        "Accuracy on the generalisation set by program length and chain depth, pooled over seeds; "
        "cells outside the training range test length and depth generalisation. Blank: no programs."
    ]
    ((plot, (mat, title), kwargs, alt),) = drawn
    assert (plot, title, kwargs, alt) == ("heatmap", "generalisation accuracy", {}, "generalisation accuracy heat map")
    assert mat.index.tolist() == [5, 6] and mat.columns.tolist() == [3, 4]
    assert mat.fillna(-1).values.tolist() == [[1.0, -1], [0.0, 1.0]]
    assert R._generalisation_section(preds()[lambda d: d["set"] == "main"]) == (
        '<p class="note">No generalisation-set predictions.</p>'
    )


def test_heuristic_section_rates_agreement_and_following():
    part = R._heuristic_section(progs(), heurs(), traj())
    assert paras(part) == [
        "Cheap shortcuts that guess the answer from surface features. The balanced generator keeps "
        "each at chance on the training distribution; the paper generator leaves them at their natural "
        "rates (`first_constant` is the line-1 heuristic). 'Final agreement' is how often the final "
        "model's answer equals the heuristic's; 'final following' is the same on the programs where the "
        "heuristic is wrong, which a model that binds keeps near 0 (means over seeds)."
    ]
    assert cells(part) == [
        [
            "heuristic",
            "train match rate",
            "n",
            "chance",
            "test match rate",
            "final agreement with model",
            "final following",
        ],
        ["last_constant", "0.120", "100", "0.100", "0.750", "0.300", "0.150"],
        ["first_constant", "0.090", "80", "0.100", "0.500", "0.200", "0.250"],
    ]


def card(pid: int, hops: int, answer: int, pred: int, ok: bool) -> str:
    mark = '<span class="ok">✓ correct</span>' if ok else '<span class="bad">✗ wrong</span>'
    return (
        f"<figure><pre>p{pid}=&lt;0&gt;\n#p{pid}:</pre><figcaption>{hops} hops · answer {answer} · "
        f"predicted {pred} {mark}</figcaption></figure>"
    )


def test_examples_alternate_wrong_and_right_over_hop_classes_of_the_first_seed():
    head = "<p>Test programs with the final model&#x27;s prediction (seed 0).</p>"
    # seed 0, in pick order: the first wrong of each class (1, 3), the first right (0, 2), the second wrong (4)
    assert R._examples_section(preds(), 3) == (
        head
        + '<div class="examples">'
        + card(0, 0, 2, 2, True)
        + card(1, 0, 3, 1, False)
        + card(3, 2, 5, 1, False)
        + "</div>"
    )
    five = R._examples_section(preds(), 5)
    assert five.count("<figure>") == 5 and card(4, 0, 6, 1, False) in five and card(2, 2, 4, 4, True) in five
    one = R._examples_section(preds(), 1)
    assert one == head + '<div class="examples">' + card(1, 0, 3, 1, False) + "</div>"
    note = '<p class="note">No examples.</p>'
    assert R._examples_section(preds(), 0) == note
    assert R._examples_section(preds()[lambda d: d["set"] == "gen"], 3) == note
    # the first seed with a single test program: the heading names it (read from that one row)
    lone = preds()[lambda d: (d["seed"] == 1) | (d["program_id"] == 1) | (d["split"] != "test")]
    assert R._examples_section(lone, 3) == head + '<div class="examples">' + card(1, 0, 3, 1, False) + "</div>"


def test_binding_page_sections_in_order_each_from_its_tables(drawn):
    from emergence.studies.binding import report_mechanisms as M
    from emergence.studies.binding import report_stress as S

    pat, abl, rout, stress = _patching(), _ablation(), _routing(), _stress()
    aids, llc = _aids(), _llc()
    page = R.binding_page(
        progs(), heurs(), traj(), phases(), preds(), pat, abl, rout, stress, aids, llc, PROVENANCE, n_examples=3
    )
    assert "<title>Variable binding</title>" in page and "<h1>Variable binding</h1>" in page
    assert paras(page)[0] == (
        "A small GPT-style model learns to resolve chains of variable assignments "
        "(Wu, Geiger & Milliere, arXiv 2505.20896). This page is generated by the binding_report stage."
    )
    assert list(sections(page).items()) == [
        ("Headline numbers", R._headline(metrics())),
        ("Data", R._data_section(progs())),
        ("Training trajectory and phases", R._trajectory_section(traj(), phases())),
        ("Local learning coefficient", llc_section(llc, phases())),
        ("Accuracy by hop count", R._hops_section(traj(), preds())),
        ("Generalisation", R._generalisation_section(preds())),
        ("Stress suite", S.stress_section(stress)),
        ("Stress accuracy against training", S.frontier_section(stress)),
        ("Shortcut heuristics", R._heuristic_section(progs(), heurs(), traj())),
        ("Activation patching", M.patching_section(pat)),
        ("Patching by chain depth", M.depth_section(pat)),
        ("Head ablation and routing heads", M.ablation_section(abl, rout)),
        ("Heads per hop", M.hop_heads_section(abl)),
        ("Heads per dereference step", M.step_heads_section(pat)),
        ("Training aids taken away", aids_section(aids)),
        ("Example programs", R._examples_section(preds(), 3)),
        ("Provenance", H.provenance_block(PROVENANCE)),
    ]
    default = R.binding_page(progs(), heurs(), traj(), phases(), preds(), pat, abl, rout, stress, aids, llc, PROVENANCE)
    assert sections(default)["Example programs"] == R._examples_section(preds(), 8)


def test_sections_are_their_parts_one_per_line(drawn):
    def tags(part: str) -> list[str]:
        return [line.split(" ")[0].split(">")[0] for line in part.split("\n")]

    assert tags(R._headline(metrics())) == ["<p", "<p", "<table"]
    assert tags(R._data_section(progs())) == ["<p", "<table", "<p"]
    assert tags(R._trajectory_section(traj(), phases())) == ["<p", "<img", "<table", "<p"]
    assert tags(R._hops_section(traj(), preds())) == ["<p", "<img", "<div", "<img"]
    assert tags(R._generalisation_section(preds())) == ["<p", "<img"]
    assert tags(R._heuristic_section(progs(), heurs(), traj())) == ["<p", "<table"]


def test_the_llc_beside_the_phases_by_hand():
    from emergence.studies.binding.report_llc import llc_metrics, llc_phases

    side = llc_phases(_llc(), phases())
    # phases(): seed 0 heuristic from 10, traversal from 100; seed 1 heuristic from 10, no traversal row
    assert side.to_dict("records") == [
        dict(seed=0, heuristic_from=10, traversal_from=100, llc_rise_from=10, llc_rise_to=100),
        dict(seed=1, heuristic_from=10, traversal_from=-1, llc_rise_from=100, llc_rise_to=1000),
    ]
    # seed 1 with neither phase row and one checkpoint (no rise): every column says "never" (-1)
    one = _llc()[lambda t: (t["seed"] == 0) | (t["step"] == 0)]
    bare = llc_phases(one, phases()[lambda t: t["seed"] == 0])
    assert bare.to_dict("records")[1] == dict(
        seed=1, heuristic_from=-1, traversal_from=-1, llc_rise_from=-1, llc_rise_to=-1
    )
    assert llc_section(_llc().iloc[:0], phases()) == H.opt_in("Local learning coefficient", "binding_llc.seeds")
    assert llc_metrics(_llc().iloc[:0], phases()) == {}
    m = llc_metrics(_llc(), phases())
    assert m["seed0"]["steps"] == [0, 1, 10, 100, 1000]
    assert m["seed0"]["llc"] == pytest.approx([0.05, 0.15, 0.35, 2.05, 2.25])  # mean over the two chains
    assert all(type(s) is int for s in m["seed0"]["steps"])  # binding.json writes 10, not 10.0
    thirds = llc_metrics(_llc().assign(llc=lambda t: t["llc"] / 3), phases())  # to 6 decimals, as the curves'
    assert thirds["seed0"]["llc"] == [0.016667, 0.05, 0.116667, 0.683333, 0.75]
    assert m["seed1"]["llc_rise_to"] == 1000
    # only seed 1's last checkpoint drifts (1.0 > 10 % of its LLC, 3.05); seed 0's first has LLC 0.05, drift 0
    section = html.unescape(llc_section(_llc(), phases()))
    assert "At 1 of 10 checkpoints the chains' loss had not levelled off" in section


def test_the_llc_section_says_its_chains_and_draws_one_curve_per_seed(drawn):
    lines = llc_section(_llc(), phases()).split("\n")
    assert lines[0] == (
        "<p>Local learning coefficient (LLC) of the saved checkpoints, by devinterp&#x27;s SGLD estimator (params "
        "llc; 2 chains per checkpoint, mean shown, sd over chains in the table): how many effective directions the "
        "loss rises along around the weights. Below it, where it rises most, beside the phases detected from the "
        "accuracy.</p>"
    )
    ((name, (df, ylabel, legend), _, alt),) = drawn
    assert (name, ylabel, legend, alt) == ("lines_by_class", "LLC", "seed", "local learning coefficient over training")
    seed0 = df[df["cls"] == "seed 0"].sort_values("step")
    assert sorted(set(df["cls"])) == ["seed 0", "seed 1"]
    assert seed0["value"].tolist() == pytest.approx([0.05, 0.15, 0.35, 2.05, 2.25])  # mean over the two chains
    twin = traces(lines[2])  # the interactive twin: the same curves, its hover naming seed and LLC
    assert [t["name"] for t in twin] == ["seed 0", "seed 1"] and twin[0]["y"] == pytest.approx(seed0["value"])
    assert twin[1]["hovertemplate"] == "seed seed 1<br>step %{x}<br>LLC %{y:.4g}<extra></extra>"
    side, every = all_cells("\n".join(lines[3:]))
    assert side == (
        "The LLC's largest rise (between two checkpoints) beside the phase starts, per seed (-1: never reached)",
        [
            ["seed", "heuristic_from", "traversal_from", "llc_rise_from", "llc_rise_to"],
            ["0", "10", "100", "10", "100"],
            ["1", "10", "-1", "100", "1000"],
        ],
    )
    # every checkpoint, folded away, to 4 decimals: chains 0.1 apart (sd 0.1 / sqrt 2), seed 1's last drifting
    means = {0: [0.05, 0.15, 0.35, 2.05, 2.25], 1: [0.05, 0.15, 0.25, 0.45, 3.05]}
    assert every == (
        "LLC per checkpoint: mean and sd over chains",
        [["seed", "step", "llc", "llc_sd", "drift", "n_chains"]]
        + [
            [str(s), str(step), f"{llc:.4f}", "0.0707", "1.0000" if (s, step) == (1, 1000) else "0.0000", "2"]
            for s, row in means.items()
            for step, llc in zip((0, 1, 10, 100, 1000), row)
        ],
    )
    assert lines[5].startswith("<details><summary>Every checkpoint</summary><table><caption>")
    assert lines[5].endswith("</table></details>") and len(lines) == 6

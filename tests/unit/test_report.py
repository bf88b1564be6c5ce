"""Report library: tiny hand-made tables (2 seeds, 5 steps) with hand-computed expectations."""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest

from emergence.core.report import html as H
from emergence.core.report import interactive
from emergence.studies.binding import report as binding
from emergence.studies.binding.aid_table import aid_rows
from emergence.studies.binding.report import binding_metrics, binding_page, binding_plot_table, phase_bands
from emergence.studies.binding.report_mechanisms import depth_patching

SEEDS, STEPS = (0, 1), (0, 1, 10, 100, 1000)  # > 2 decades: symlog step axis
HEURS = ("last_constant", "first_constant")
EVIL = "a=1\nb=a\n#b:<script>x</script>"


def _programs() -> pd.DataFrame:
    rows = []
    for split, hops, ans, last, first in [
        ("train", 0, 1, 1, 2),
        ("train", 2, 3, 4, 3),
        ("test", 0, 5, 5, 5),
        ("test", 2, 7, 1, 2),
    ]:
        rows.append(
            dict(
                program=f"a={ans}\n#a:",
                query="a",
                answer=ans,
                hops=hops,
                chain_lines=[0],
                n_lines=hops + 2,
                split=split,
                set="main",
                heur_last_constant=last,
                heur_first_constant=first,
                heur_most_frequent_digit=-1,
                heur_query_first_assignment=-1,
                heur_most_common_final_value=-1,
            )
        )
    rows.append({**rows[0], "set": "gen", "split": "test", "n_lines": 3, "hops": 1})
    return pd.DataFrame(rows)


def _trajectory() -> pd.DataFrame:
    rows = []
    final_acc = {0: 0.75, 1: 0.25}
    final_agree = {
        (0, "last_constant"): 0.2,
        (1, "last_constant"): 0.4,
        (0, "first_constant"): 0.1,
        (1, "first_constant"): 0.1,
    }
    for s in SEEDS:
        for step in STEPS:
            last = step == STEPS[-1]
            for hops in (-1, 0, 2):
                rows.append((s, step, "accuracy", hops, final_acc[s] if last else 0.1 * (hops + 2) * step / 1000))
            for h in HEURS:
                rows.append((s, step, f"agree_{h}", -1, final_agree[(s, h)] if last else 0.9))
            rows.append((s, step, "train_loss", -1, 2.0 / (step + 1)))
    df = pd.DataFrame(rows, columns=["seed", "step", "metric", "hops", "value"])
    return df.assign(layer=-1, head=-1, n=100)


def _phases() -> pd.DataFrame:
    rows = [
        (0, 1, "random", 0, 10, ""),
        (0, 2, "heuristic", 10, 100, "last_constant"),
        (0, 3, "traversal", 100, -1, ""),
        (1, 1, "random", 0, 100, ""),
        (1, 2, "heuristic", 100, -1, "first_constant"),
        (1, 3, "traversal", -1, -1, ""),
    ]
    return pd.DataFrame(rows, columns=["seed", "phase", "name", "start_step", "end_step", "detail"])


def _predictions() -> pd.DataFrame:
    rows = []
    outcomes = {0: [True, True, True, False], 1: [True, False, False, False]}
    for s in SEEDS:
        for pid, (hops, ok) in enumerate(zip((0, 0, 2, 2), outcomes[s])):
            rows.append((s, "main", "test", hops + 2, hops, pid, ok))
        rows.append((s, "main", "train", 4, 2, 10, False))  # not held out: must not count
        for pid, ok in zip((20, 21), [(True, False), (True, True)][s]):
            rows.append((s, "gen", "test", 5, 3, pid, ok))
    df = pd.DataFrame(rows, columns=["seed", "set", "split", "n_lines", "hops", "program_id", "correct"])
    df["step"] = 1000
    df["answer"] = 7
    df["pred"] = df["answer"].where(df["correct"], 3)
    df["program"] = "a=7\nb=a\n#b:"
    df.loc[(df["seed"] == 0) & (df["program_id"] == 0), "program"] = EVIL
    return df


def _patching() -> pd.DataFrame:
    classes = ["chain_root", "chain_lhs", "chain_rhs", "other", "query", "other"]
    rows = [
        (s, layer, pos, cls, "patch_success", 0.1 * layer + 0.1 * pos)
        for s in SEEDS
        for layer in (0, 1)
        for pos, cls in enumerate(classes)
    ]
    rows += [
        (s, layer, pos, cls, "base_kept", 0.5) for s in SEEDS for layer in (0, 1) for pos, cls in enumerate(classes)
    ]
    rows += [(s, -1, -1, "other", "pairs_correct", 0.9) for s in SEEDS]
    df = pd.DataFrame(rows, columns=["seed", "layer", "position", "position_class", "metric", "value"])
    depth = df["position_class"].map({"chain_root": 0, "chain_rhs": 1}).fillna(-1).astype(int)
    return df.assign(step=1000, head=-1, n=20, chain_depth=depth)


def _ablation() -> pd.DataFrame:
    rows = [(s, -1, -1, "none", hops, "accuracy", 0.5) for s in SEEDS for hops in (-1, 2)]
    rows += [
        (s, layer, head, mode, hops, metric, 0.1 * (layer + head))
        for s in SEEDS
        for layer in (0, 1)
        for head in (0, 1)
        for mode in ("zero", "mean")
        for hops in (-1, 2)
        for metric in ("accuracy", "accuracy_drop")
    ]
    df = pd.DataFrame(rows, columns=["seed", "layer", "head", "mode", "hops", "metric", "value"])
    return df.assign(step=1000, n=10)


def _routing() -> pd.DataFrame:
    return pd.DataFrame(
        {"layer": [1, 0], "head": [1, 1], "drop_all": [0.2, 0.1], "drop_deep": [0.2, 0.1], "rank": [1, 2]}
    )


def _stress() -> pd.DataFrame:
    cells = [  # (seed, set, hops, n, correct)
        (0, "stress_few_vars", 0, 4, 4),
        (0, "stress_few_vars", 1, 6, 1),
        (1, "stress_few_vars", 0, 4, 2),
        (1, "stress_few_vars", 1, 4, 3),
        (0, "stress_many_vars", 0, 2, 2),
        (1, "stress_many_vars", 0, 2, 0),
        (0, "gen", 1, 5, 0),  # the generalisation grid: not a stress set
        (0, "ref_paper", 0, 4, 1),  # a generator unpinned: shown, but not a stress set
    ]
    curve = [  # seed 0 at an earlier checkpoint, scored for the curve only
        (0, "stress_few_vars", 0, 4, 0),
        (0, "stress_many_vars", 0, 2, 1),
    ]
    df = pd.concat(
        [
            pd.DataFrame(cells, columns=["seed", "set", "hops", "n", "correct"]).assign(step=1000, named=True),
            pd.DataFrame(curve, columns=["seed", "set", "hops", "n", "correct"]).assign(step=500, named=False),
        ],
        ignore_index=True,
    )
    return df.assign(n_lines=16, accuracy=df["correct"] / df["n"])


def _heuristics() -> pd.DataFrame:
    return pd.DataFrame({"heuristic": list(HEURS), "match_rate": [0.12, 0.09], "n": [100, 100]})


PROVENANCE = {
    "params": {"report": {"n_examples": 8}, "note": "x<y"},
    "git_revision": "abc123",
    "seeds": [0, 1],
    "data_hashes": {"data/binding/programs.parquet": "deadbeef"},
}


def _aids() -> pd.DataFrame:
    """The default of seed 1 beside one variant (its patching halved)."""
    traj, pat = _trajectory(), _patching()
    return pd.concat(
        [
            aid_rows(aid, 1, traj[traj["seed"] == 1], _phases().loc[lambda d: d["seed"] == 1], pat[pat["seed"] == 1])
            for aid in ("default", "no_conv")
        ],
        ignore_index=True,
    )


def _llc() -> pd.DataFrame:
    """Two chains per checkpoint; seed 0 rises most from step 10 to 100, seed 1 from 100 to 1000. Only
    seed 1's last checkpoint had not levelled off (drift 1.0 against an LLC of 3.05)."""
    rise = {0: {0: 0.0, 1: 0.1, 10: 0.3, 100: 2.0, 1000: 2.2}, 1: {0: 0.0, 1: 0.1, 10: 0.2, 100: 0.4, 1000: 3.0}}
    rows = [
        (s, step, c, rise[s][step] + 0.1 * c, float(s == 1 and step == 1000), 1.0)
        for s in SEEDS
        for step in STEPS
        for c in (0, 1)
    ]
    return pd.DataFrame(rows, columns=["seed", "step", "chain", "llc", "drift", "init_loss"])


def _page(phases: pd.DataFrame | None = None) -> str:
    return binding_page(
        _programs(),
        _heuristics(),
        _trajectory(),
        _phases() if phases is None else phases,
        _predictions(),
        _patching(),
        _ablation(),
        _routing(),
        _stress(),
        _aids(),
        _llc(),
        PROVENANCE,
        n_examples=4,
    )


@pytest.fixture(scope="module")
def page() -> str:
    return _page()


def test_page_has_sections_embedded_images_and_no_links_out(page):
    for heading in [
        "Headline numbers",
        "Data",
        "Training trajectory and phases",
        "Local learning coefficient",
        "Accuracy by hop count",
        "Generalisation",
        "Stress suite",
        "Stress accuracy against training",
        "Shortcut heuristics",
        "Activation patching",
        "Head ablation and routing heads",
        "Heads per hop",
        "Patching by chain depth",
        "Training aids taken away",
        "Example programs",
        "Provenance",
    ]:
        assert f"<h2>{heading}</h2>" in page
    # trajectory, hops x2, gen, stress, stress curve, patching, patching by depth, ablation, heads per hop, aids
    # curves also interactive (LLC, hops, stress against training, aids); plotly.js loaded once, in the head,
    # from the copy beside the page (the only file the page names besides itself)
    head = page[: page.index("</head>")]
    assert re.findall(r"<script [^>]*\bsrc=[^>]*>", page) == ['<script src="plotly.min.js">']
    assert head.count("<script") == 1
    assert page.count('src="data:image/png;base64,') == 12
    assert page.count(interactive.MARK) == 4
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"<link\b", page)
    assert len(page.encode()) < 1_000_000  # 5.2 MB with plotly.js inline; 0.36 MB at plotly 7.1


def test_stress_table_lists_the_generators_after_the_stress_sets(page):
    section = page[page.index("<h2>Stress suite</h2>") :]
    assert section.index("many_vars") < section.index("paper (generator, unpinned)")


def test_stress_per_seed_rows_pool_each_seeds_hop_classes(page):
    section = page[page.index("The same per seed.") :]
    section = section[: section.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", section)
    cells = [c for r in rows if (c := re.findall(r"<td[^>]*>(.*?)</td>", r))]
    # few_vars seed 0: 0 hops 4/4, 1 hop 1/6, all 5/10; seed 1: 2/4, 3/4, all 5/8; the curve rows (step 500) left out
    assert ["few_vars", "0", "1.000", "0.167", "0.500"] in cells
    assert ["few_vars", "1", "0.500", "0.750", "0.625"] in cells
    # in the suite's order (STRESS lists many_vars before few_vars), the generators last
    assert [c[0] for c in cells] == ["many_vars", "many_vars", "few_vars", "few_vars", "paper (generator, unpinned)"]


def test_page_escapes_text(page):
    assert "#b:&lt;script&gt;x&lt;/script&gt;" in page
    assert "<script>x</script>" not in page
    assert "x&lt;y" in page  # params dump is escaped too


def test_page_states_unreached_phase(page):
    assert "Seed 1: the traversal phase was not reached within 1000 steps." in page
    assert "Seed 0: the traversal phase was not reached" not in page


def test_trajectory_section_survives_missing_phase_table():
    empty = _phases().iloc[0:0]
    bands = phase_bands(empty, _trajectory())
    assert len(bands) == 6 and not bands["reached"].any()
    html = binding._trajectory_section(_trajectory(), empty)
    assert html.count("phase was not reached") == 6


def test_page_is_deterministic(page):
    assert _page() == page


def test_metrics_values_by_hand():
    m = binding_metrics(_trajectory(), _predictions(), _heuristics(), _phases(), _stress())
    sd = math.sqrt(2 * 0.25**2)  # sample sd of (0.75, 0.25)
    assert m["accuracy"] == {"mean": 0.5, "sd": round(sd, 6), "per_seed": {"0": 0.75, "1": 0.25}}
    assert m["accuracy_by_hops"]["0"]["per_seed"] == {"0": 1.0, "1": 0.5}
    assert m["accuracy_deepest"] == {"hops": 2, "mean": 0.25, "sd": round(sd, 6), "per_seed": {"0": 0.5, "1": 0.0}}
    assert m["generalisation_accuracy"]["per_seed"] == {"0": 0.5, "1": 1.0}
    assert m["generalisation_accuracy"]["mean"] == 0.75
    assert m["heuristic_agreement"]["last_constant"]["mean"] == 0.3
    assert m["heuristic_agreement"]["first_constant"]["per_seed"] == {"0": 0.1, "1": 0.1}
    assert m["best_heuristic"] == {"name": "last_constant", "match_rate": 0.12}
    assert m["final_step"] == {"0": 1000, "1": 1000}
    assert m["n_test_programs"] == 4
    assert m["phases"]["0"]["traversal"] == {"reached": True, "start_step": 100, "end_step": 1000}
    assert m["phases"]["1"]["heuristic"] == {"reached": True, "start_step": 100, "end_step": 1000}
    assert m["phases"]["1"]["traversal"] == {"reached": False, "start_step": None, "end_step": None}
    # stress: pooled correct / n per seed (not a mean of the hop cells), by hop, and the weakest set
    assert m["stress"]["few_vars"]["per_seed"] == {"0": 0.5, "1": 0.625}  # 5/10 (cell mean would be 0.583)
    assert m["stress"]["few_vars"]["by_hops"] == {"0": {"0": 1.0, "1": 0.5}, "1": {"0": 0.166667, "1": 0.75}}
    assert m["stress"]["many_vars"]["per_seed"] == {"0": 1.0, "1": 0.0}
    assert m["stress"]["weakest"] == {"set": "many_vars", "min_seed_accuracy": 0.0}
    assert set(m["stress"]) == {"few_vars", "many_vars", "weakest", "reference", "curve"}
    # the curve: weakest stress set per scored step; seed 0 at 500: few_vars 0/4, many_vars 1/2
    assert m["stress"]["curve"] == {"0": {"500": 0.0, "1000": 0.5}, "1": {"1000": 0.0}}
    assert m["stress"]["reference"] == {"paper": {"per_seed": {"0": 0.25}, "by_hops": {"0": {"0": 0.25}}}}


def _predictions_three_classes() -> pd.DataFrame:
    """Held-out programs in hop classes 0 / 1 / 3 (sizes 2 / 3 / 4), interleaved, with accuracies
    that differ by class, by seed and from the overall ones; deeper hops only off the test split."""
    hops = [3, 0, 1, 3, 1, 3, 0, 1, 3]
    outcomes = {  # per program, in the order of `hops`
        0: [1, 1, 1, 0, 0, 0, 1, 0, 0],  # hop 0: 2/2, hop 1: 1/3, hop 3: 1/4; all 4/9
        1: [1, 0, 1, 1, 1, 0, 0, 1, 0],  # hop 0: 0/2, hop 1: 3/3, hop 3: 2/4; all 5/9
    }
    rows = [(s, "main", "test", h, pid, bool(ok)) for s in SEEDS for pid, (h, ok) in enumerate(zip(hops, outcomes[s]))]
    rows += [(s, "main", "train", 4, 50, True) for s in SEEDS]  # not held out: neither a class nor the deepest
    rows += [(s, "gen", "test", 5, 60, True) for s in SEEDS]  # generalisation set: likewise
    df = pd.DataFrame(rows, columns=["seed", "set", "split", "hops", "program_id", "correct"])
    return df.assign(n_lines=6, step=1000, answer=7, pred=df["correct"].map({True: 7, False: 3}), program="a=7\n#a:")


def test_metrics_accuracy_by_hop_class_and_deepest_class_by_hand():
    m = binding_metrics(_trajectory(), _predictions_three_classes(), _heuristics(), _phases(), _stress())

    def stats(a: float, b: float) -> dict:  # two seeds: mean and sample sd |a - b| / sqrt(2), by hand
        return {
            "mean": round((a + b) / 2, 6),
            "sd": round(abs(a - b) / math.sqrt(2), 6),
            "per_seed": {"0": round(a, 6), "1": round(b, 6)},
        }

    assert m["accuracy"] == stats(4 / 9, 5 / 9)
    assert m["accuracy_by_hops"] == {"0": stats(1.0, 0.0), "1": stats(1 / 3, 1.0), "3": stats(0.25, 0.5)}
    # The deepest held-out class is 3 (train hops 4 and gen hops 5 do not count), and its accuracy
    # is that class's (0.25, 0.5), not the overall (4/9, 5/9).
    assert m["accuracy_deepest"] == {"hops": 3, **stats(0.25, 0.5)}
    assert m["n_test_programs"] == 9


def test_patching_by_depth_pools_hits_over_positions_and_seeds():
    table = pd.DataFrame(
        [  # (seed, layer, position, chain_depth, value, n)
            (0, 2, 6, 1, 1.0, 10),
            (0, 2, 10, 1, 0.0, 30),  # the same depth at another position: pooled, 10 / 40
            (1, 2, 6, 1, 0.5, 20),  # seed 1 adds 10 / 20 -> 20 / 60
            (0, 2, 2, 0, 0.25, 8),
            (0, 2, 3, -1, 1.0, 99),  # off the chain: not a depth
        ],
        columns=["seed", "layer", "position", "chain_depth", "value", "n"],
    ).assign(metric="patch_success", position_class="chain_rhs")
    mat = depth_patching(table)
    assert list(mat.columns) == [0, 1]
    assert mat.loc[2, 1] == pytest.approx(20 / 60) and mat.loc[2, 0] == 0.25


def test_metrics_json_ready_with_sorted_keys():
    m = binding_metrics(_trajectory(), _predictions(), _heuristics(), _phases(), _stress())
    assert json.loads(json.dumps(m, allow_nan=False)) == m

    def check(d):
        assert list(d) == sorted(d)
        for v in d.values():
            if isinstance(v, dict):
                check(v)

    check(m)


def test_plot_table():
    t = binding_plot_table(_trajectory())
    assert list(t.columns) == [
        "step",
        "accuracy",
        "accuracy_hops0",
        "accuracy_hops2",
        "accuracy_seed0",
        "accuracy_seed1",
    ]
    assert t["step"].tolist() == list(STEPS)
    last = t.iloc[-1]
    assert last["accuracy"] == 0.5 and last["accuracy_seed0"] == 0.75 and last["accuracy_seed1"] == 0.25
    assert t.set_index("step").loc[10, "accuracy_hops2"] == pytest.approx(0.004)  # 0.1 * 4 * 10 / 1000, same both seeds
    # a seed's column is its overall accuracy (hops -1: 0.1 * 1 * 10 / 1000), not a mean over hop classes
    assert t.set_index("step").loc[10, "accuracy_seed0"] == pytest.approx(0.001)


def test_plot_table_rounds_to_six_decimals_and_averages_seeds():
    rows = [(0, 5, "accuracy", -1, 0.1234567), (1, 5, "accuracy", -1, 0.5), (0, 5, "accuracy", 1, 0.3)]
    t = binding_plot_table(pd.DataFrame(rows, columns=["seed", "step", "metric", "hops", "value"]))
    assert t.to_dict("records") == [
        {"step": 5, "accuracy": 0.311728, "accuracy_hops1": 0.3, "accuracy_seed0": 0.123457, "accuracy_seed1": 0.5}
    ]


def test_table_escapes_and_marks_missing():
    df = pd.DataFrame({"name": ["<b>"], "x": [float("nan")], "y": [0.5], "k": pd.array([pd.NA], "Int64")})
    out = H.table(df, caption="a&b")
    assert "&lt;b&gt;" in out and "<b>" not in out and "a&amp;b" in out
    assert out.count("&ndash;") == 2 and "0.500" in out and "NA" not in out


def test_every_patching_position_class_has_a_colour():
    from emergence.core.report.plots import CLASS_COLOURS
    from emergence.studies.binding.patching import POSITION_CLASSES

    assert set(CLASS_COLOURS) == set(POSITION_CLASSES)


def test_mechanism_metrics_per_seed_differ_from_pooled():
    from emergence.studies.binding.report_mechanisms import mechanism_metrics

    patching = pd.DataFrame(
        [  # (seed, layer, position, chain_depth, value, n): seed 0 carries depth 1 at layer 2, seed 1 at layer 1
            (0, 1, 6, 1, 0.0, 10),
            (0, 2, 6, 1, 0.9, 10),
            (1, 1, 6, 1, 0.8, 30),
            (1, 2, 6, 1, 0.1, 30),
        ],
        columns=["seed", "layer", "position", "chain_depth", "value", "n"],
    ).assign(metric="patch_success", position_class="chain_rhs")
    ablation = pd.DataFrame(
        [  # (seed, layer, head, hops, value): seed 0 needs head 0.1, seed 1 head 1.0; pooled 0.1 = 0.35, 1.0 = 0.3
            (0, 0, 1, 2, 0.6),
            (0, 1, 0, 2, 0.1),
            (1, 0, 1, 2, 0.1),
            (1, 1, 0, 2, 0.5),
        ],
        columns=["seed", "layer", "head", "hops", "value"],
    ).assign(metric="accuracy_drop", mode="zero")
    m = mechanism_metrics(patching, ablation)
    # pooled: layer 1 = (0 + 24) / 40 = 0.6, layer 2 = (9 + 3) / 40 = 0.3
    assert m["patching_by_depth"] == {"1": {"best_layer": 1, "success": 0.6}}
    assert m["per_seed"]["0"]["patching_by_depth"] == {"1": {"best_layer": 2, "success": 0.9}}
    assert m["per_seed"]["1"]["patching_by_depth"] == {"1": {"best_layer": 1, "success": 0.8}}
    assert m["heads_by_hop"]["2"][0] == "0.1 (0.350)"
    assert m["per_seed"]["0"]["heads_by_hop"]["2"][0] == "0.1 (0.600)"
    assert m["per_seed"]["1"]["heads_by_hop"]["2"][0] == "1.0 (0.500)"

"""reports/associations.html, its metrics JSON and plots CSV, at values written down by hand.

Three runs (1 layer seed 0, 1 layer seed 3, 2 layers seed 0) whose cosines differ at every
checkpoint, so a wrong run, layer, step or aggregation changes a number below. Steps 1-4 are
epoch ends inside the window (2 steps per epoch); step 6 lies after it, with cosines that would
be the minimum if the window were ignored. Every expected value is read off the COS table by
eye (comments say how), not computed by the code under test. Both figures are also described in
full (tests/figures.py): the legend layout and the colours past ten lines; and each section of the
page is its own builder's output.
"""

from __future__ import annotations

import html
import math
import re

import numpy as np
import pandas as pd
import pytest
from figures import describe
from test_interactive import traces

from emergence.core.report import html as H
from emergence.studies.assoc import report as R
from emergence.studies.assoc.report import (
    _causal_section,
    _corpus_section,
    _cosine_section,
    _departure_table,
    _layer_label,
    _order_section,
    _words_section,
    assoc_metrics,
    associations_page,
    cosine_figure,
    order_figure,
    plot_table,
    table1,
)

# ---- the runs' cosines, and what the window makes of them

N = float("nan")
STEPS = (1, 2, 3, 4, 6)
FIRST = {"W_O": 1, "V": 2, "W": 3, "P": 3}  # theory.first_nonzero_step: NaN cosine before it
COS = {
    (1, 0): {
        ("W_O", -1): (0.9999, 0.9995, 0.9989, 0.9992, 0.2),
        ("W", 0): (N, N, 0.9999, 0.999, 0.9995),  # min exactly at the bar: meets it, never below
        ("V", 0): (N, 0.9998, 0.9997, 0.9996, 0.998),
        ("P", 0): (N, N, 0.995, 0.993, 0.985),  # under W's bar, above P's own
    },
    (1, 3): {
        ("W_O", -1): (0.9998, 0.9997, 0.9996, 0.9994, 0.9993),
        ("W", 0): (N, N, 0.9985, 0.9991, 0.9),
        ("V", 0): (N, 0.9999, 0.99984449, 0.9999, 0.9999),  # 6 decimals in the metrics: 0.999844
        ("P", 0): (N, N, 0.989, 0.992, 0.991),
    },
    (2, 0): {
        ("W_O", -1): (0.99999, 0.99995, 0.9999, 0.99993, 0.9999),
        ("W", 0): (N, N, 0.9997, 0.9998, 0.9996),
        ("W", 1): (N, N, 0.9993, 0.9991, 0.9989),
        ("V", 0): (N, 0.9999, 0.9999, 0.9999, 0.9995),
        ("V", 1): (N, 0.9996, 0.9988, 0.999, 0.998),
        ("P", 0): (N, N, 0.997, 0.996, 0.98),
        ("P", 1): (N, N, 0.998, 0.9989, 0.999),
    },
}
LOSS0 = {(1, 0): 4.0, (1, 3): 5.0, (2, 0): 6.0}  # corpus loss at a step: LOSS0 - step / 100


def cosines_frame() -> pd.DataFrame:
    rows = []
    for (n_layers, seed), weights in COS.items():
        for (weight, layer), values in weights.items():
            for step, c in zip(STEPS, values):
                rows.append(
                    dict(
                        n_layers=n_layers,
                        seed=seed,
                        step=step,
                        layer=layer,
                        weight=weight,
                        cosine=c,
                        epoch=step / 2,
                        in_window=step <= 4 and step >= FIRST[weight],
                        corpus_loss=LOSS0[(n_layers, seed)] - step / 100,
                    )
                )
    return pd.DataFrame(rows)


# Per (n_layers, seed, layer label, weight): min cosine over steps 1-4, its step, checkpoints
# counted, and whether it meets the bar (0.999; P 0.99).
TABLE1 = [
    (1, 0, "-", "W_O", 0.9989, 3, 4, "NO"),
    (1, 0, "0", "P", 0.993, 4, 2, "yes"),
    (1, 0, "0", "V", 0.9996, 4, 3, "yes"),
    (1, 0, "0", "W", 0.999, 4, 2, "yes"),
    (1, 3, "-", "W_O", 0.9994, 4, 4, "yes"),
    (1, 3, "0", "P", 0.989, 3, 2, "NO"),
    (1, 3, "0", "V", 0.99984449, 3, 3, "yes"),
    (1, 3, "0", "W", 0.9985, 3, 2, "NO"),
    (2, 0, "-", "W_O", 0.9999, 3, 4, "yes"),
    (2, 0, "0", "P", 0.996, 4, 2, "yes"),
    (2, 0, "0", "V", 0.9999, 2, 3, "yes"),
    (2, 0, "0", "W", 0.9997, 3, 2, "yes"),
    (2, 0, "1", "P", 0.998, 3, 2, "yes"),
    (2, 0, "1", "V", 0.9988, 3, 3, "NO"),
    (2, 0, "1", "W", 0.9991, 4, 2, "yes"),
]
BAR = {"W": 0.999, "V": 0.999, "W_O": 0.999, "P": 0.99}
PAPER = {"W": 0.999914, "V": 0.9988, "W_O": 0.997891, "P": N}  # Im et al. Table 2 (BPE)

# First step (over all checkpoints, the window or not) whose cosine is strictly below the bar:
# (n_layers, seed, layer label, weight) -> (step, epoch, corpus loss there); absent: never.
DEPARTED = {
    (1, 0, "-", "W_O"): (3, 1.5, 3.97),
    (1, 0, "0", "P"): (6, 3.0, 3.94),  # 0.985 < 0.99 only after the window
    (1, 0, "0", "V"): (6, 3.0, 3.94),
    (1, 3, "0", "P"): (3, 1.5, 4.97),
    (1, 3, "0", "W"): (3, 1.5, 4.97),
    (2, 0, "0", "P"): (6, 3.0, 5.94),
    (2, 0, "1", "V"): (3, 1.5, 5.97),
    (2, 0, "1", "W"): (6, 3.0, 5.94),
}


def four_layer_cosines() -> pd.DataFrame:
    """Run (4 layers, seed 1): W_O and W, V, P in layers 0-3, 13 lines, each cosine its own; steps 1 and 500
    (over two decades: symlog). Run (1 layer, seed 0): W_O only, steps 1 and 2."""
    rows = []
    series = [("W_O", -1)] + [(w, layer) for layer in range(4) for w in ("W", "V", "P")]
    for k, (w, layer) in enumerate(series):
        for step, base in ((1, 0.9), (500, 0.5)):
            rows.append(dict(n_layers=4, seed=1, step=step, layer=layer, weight=w, cosine=base + k / 100))
    for step in (1, 2):
        rows.append(dict(n_layers=1, seed=0, step=step, layer=-1, weight="W_O", cosine=0.99 + step / 1000))
    return pd.DataFrame(rows)


# ---- order, causal and probe-word tables


def order_frame() -> pd.DataFrame:
    """rel_error = eta^a step^b exactly, so the log-log slope against eta at the last step is a.
    W_O is exact after one step (0); V and W are undefined (NaN) before their first step."""
    shape = {("W_O", -1): (0.5, 1.0), ("V", 0): (1.23456, 0.8), ("W", 1): (0.987654, 1.1)}
    rows = []
    for eta in (0.01, 0.02, 0.04):
        for step in range(1, 6):
            for (weight, layer), (a, b) in shape.items():
                err = eta**a * step**b
                if step == 1 and weight == "W_O":
                    err = 0.0
                if step < FIRST[weight]:
                    err = N
                rows.append(dict(n_layers=2, eta=eta, step=step, layer=layer, weight=weight, rel_error=err))
    return pd.DataFrame(rows)


def causal_frame() -> pd.DataFrame:
    rows = [
        (1, 0, 4, -1, "none", 4.123449, N),
        (1, 0, 4, 0, "W", 4.20001, 0.9),
        (1, 0, 4, 0, "V", 4.5, 0.8),
        (1, 0, 4, 0, "P", 4.12, 0.7),
        (1, 0, 4, -1, "W_O", 4.98761, 0.6),
        (1, 3, 4, -1, "none", 5.111149, N),
        (1, 3, 4, -1, "W_O", 5.5, 0.5),
        (2, 0, 6, -1, "none", 6.0, N),
        (2, 0, 6, 1, "W", 6.25, 0.4),
        (2, 0, 6, 0, "V", 6.3, 0.3),
    ]
    return pd.DataFrame(rows, columns=["n_layers", "seed", "step", "layer", "weight", "loss", "cosine"])


def words_frame() -> pd.DataFrame:
    rows = [
        ("the", "W_O (learned)", 1, "park", 0.011454),
        ("the", "W_O (learned)", 2, "garden", 0.0049444),
        ("the", "B", 1, "she", 0.123456),
        ("the", "B", 2, "mia", -0.000264),
        (".", "W_O (learned)", 1, "she", 1.5),
        (".", "W_O (learned)", 2, "one", 2e-5),
        (".", "B", 1, "park", 10.0),
        (".", "B", 2, "the", 0.0),
    ]
    return pd.DataFrame(rows, columns=["probe", "matrix", "rank", "token", "score"])


PROVENANCE = {"git_revision": "abc123", "seeds": [0, 3], "data_hashes": {"a.parquet": "f00d"}, "params": {"k": 1}}


# ---- reading the HTML back


def tables(text: str) -> list[tuple[str | None, list[str], list[list[str]]]]:
    """(caption, header, rows of cell texts) of every <table> in an HTML fragment."""
    out = []
    for body in re.findall(r"<table>(.*?)</table>", text, re.S):
        cap = re.search(r"<caption>(.*?)</caption>", body)
        head = [html.unescape(h) for h in re.findall(r"<th(?: [^>]*)?>(.*?)</th>", body.split("<tbody>")[0])]
        rows = [
            [html.unescape(c) for c in re.findall(r"<td(?: [^>]*)?>(.*?)</td>", tr)]
            for tr in re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>")[1])
        ]
        out.append((html.unescape(cap.group(1)) if cap else None, head, rows))
    return out


def records(df: pd.DataFrame, cols: list[str]) -> list[tuple]:
    return [tuple(r) for r in df[cols].itertuples(index=False)]


def paragraphs(text: str) -> list[str]:
    return [html.unescape(p) for p in re.findall(r"<p>(.*?)</p>", text, re.S)]


# ---- Table 1: the window minimum per run, layer and weight


def test_layer_label_dashes_only_the_model_wide_weight():
    assert [_layer_label(x) for x in (-1, 0, 1, 2)] == ["-", "0", "1", "2"]


def test_table1_takes_the_window_minimum_per_run_layer_and_weight():
    t = table1(cosines_frame(), "word")
    assert "paper" not in t.columns  # no number for word-level runs in our text of the paper
    got = records(t, ["n_layers", "seed", "layer", "weight", "min_cosine", "step_of_min", "n_checkpoints", "meets_bar"])
    assert got == TABLE1
    assert t["bar"].tolist() == [BAR[w] for w in t["weight"]]


def test_table1_quotes_the_paper_for_bpe_runs_only():
    t = table1(cosines_frame(), "bpe")
    np.testing.assert_array_equal(t["paper"].to_numpy(), [PAPER[row[3]] for row in TABLE1])
    assert records(t, ["meets_bar"]) == [(row[-1],) for row in TABLE1]  # the paper does not set the verdict


def test_table1_paper_column_nan_for_a_weight_the_paper_lacks():
    t = R.table1(cosines_frame(), "bpe")
    p = t.set_index(["n_layers", "seed", "layer", "weight"])["paper"]
    assert p.loc[(1, 0, "-", "W_O")] == 0.997891 and p.loc[(1, 0, "0", "W")] == 0.999914
    assert pd.isna(p.loc[(1, 0, "0", "P")])
    assert list(t.columns)[-3:] == ["paper", "bar", "meets_bar"]


def test_paper_numbers_are_the_quoted_ones():
    # Im et al. (ICLR 2026) Table 2, BPE: W 0.999914, V 0.998800, W_O 0.997891; causal 5.349 / 5.350 / 5.352.
    assert R.PAPER_MIN_COSINE == {"bpe": {"W": 0.999914, "V": 0.9988, "W_O": 0.997891}}
    assert R.PAPER_CAUSAL["none"] == "5.349" and R.PAPER_CAUSAL["W"] == "5.350 (layer 0), 5.352 (layer 1)"
    assert R.THRESHOLD == BAR


# ---- departures: the first step below each bar


def test_departure_table_first_step_below_each_bar():
    t = _departure_table(cosines_frame())
    assert len(t) == len(TABLE1)
    for r in t.itertuples():
        key = (r.n_layers, r.seed, r.layer, r.weight)
        assert r.bar == BAR[r.weight]
        if key in DEPARTED:
            step, epoch, loss = DEPARTED[key]
            assert (r.first_step_below, r.epoch) == (step, epoch), key
            assert r.corpus_loss == pytest.approx(loss, abs=1e-12), key
        else:
            assert r.first_step_below is pd.NA and math.isnan(r.epoch) and math.isnan(r.corpus_loss), key


def test_departure_table_columns_and_labels():
    t = R._departure_table(cosines_frame())
    assert list(t.columns) == ["n_layers", "seed", "layer", "weight", "bar", "first_step_below", "epoch", "corpus_loss"]
    assert str(t["first_step_below"].dtype) == "Int64"
    assert t["layer"].tolist()[:4] == ["-", "0", "0", "0"]
    assert t["first_step_below"].tolist()[:4] == [3, 6, 6, pd.NA]


def test_departure_steps_print_as_whole_numbers():
    (_, _, rows) = tables(_cosine_section(cosines_frame(), "word"))[1]
    assert rows[0][5] == "3"


# ---- plots CSV and metrics JSON


def test_plot_table_worst_layer_per_step_of_the_deepest_run():
    t = plot_table(cosines_frame())
    assert list(t.columns) == ["step", "W", "V", "W_O", "P"]
    # 2-layer run only: min over layers 0 and 1 at each step (NaN before a weight exists).
    expected = [
        (1, N, N, 0.99999, N),
        (2, N, 0.9996, 0.99995, N),
        (3, 0.9993, 0.9988, 0.9999, 0.997),
        (4, 0.9991, 0.999, 0.99993, 0.996),
        (6, 0.9989, 0.998, 0.9999, 0.98),
    ]
    np.testing.assert_array_equal(t.to_numpy(float), np.array(expected, dtype=float))


def test_plot_table_worst_cosine_is_the_minimum_over_layers_not_another_aggregate():
    cos = pd.DataFrame(
        [
            dict(n_layers=3, seed=0, step=1, layer=0, weight="W", cosine=0.9),
            dict(n_layers=3, seed=0, step=1, layer=1, weight="W", cosine=0.2),
            dict(n_layers=3, seed=0, step=1, layer=2, weight="W", cosine=0.7),
            dict(n_layers=3, seed=0, step=1, layer=-1, weight="W_O", cosine=0.4),
            dict(n_layers=1, seed=0, step=1, layer=0, weight="W", cosine=0.0),
        ]
    )
    got = R.plot_table(cos)
    assert list(got.columns) == ["step", "W", "V", "W_O", "P"]
    assert got["step"].tolist() == [1]
    assert got["W"].tolist() == [0.2] and got["W_O"].tolist() == [0.4]
    assert got[["V", "P"]].isna().all().all()


def test_assoc_metrics_keys_and_rounding():
    m = assoc_metrics(cosines_frame(), order_frame(), causal_frame())
    assert m["min_cosine"] == {
        "L1_seed0": {"W_O": 0.9989, "P0": 0.993, "V0": 0.9996, "W0": 0.999},
        "L1_seed3": {"W_O": 0.9994, "P0": 0.989, "V0": 0.999844, "W0": 0.9985},
        "L2_seed0": {"W_O": 0.9999, "P0": 0.996, "V0": 0.9999, "W0": 0.9997, "P1": 0.998, "V1": 0.9988, "W1": 0.9991},
    }
    assert m["order_slope_vs_eta"] == {"W_O": 0.5, "V0": 1.235, "W1": 0.988}
    assert m["causal_loss"] == {
        "L1_seed0/none": 4.1234,
        "L1_seed0/W0": 4.2,
        "L1_seed0/V0": 4.5,
        "L1_seed0/P0": 4.12,
        "L1_seed0/W_O": 4.9876,
        "L1_seed3/none": 5.1111,
        "L1_seed3/W_O": 5.5,
        "L2_seed0/none": 6.0,
        "L2_seed0/W1": 6.25,
        "L2_seed0/V0": 6.3,
    }
    assert list(m) == ["min_cosine", "order_slope_vs_eta", "causal_loss"]


# ---- cosine figure and its interactive twin

TAB10 = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
TAB20 = ["#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c"]


def test_cosine_figure_one_panel_per_run_one_line_per_weight():
    fig = cosine_figure(cosines_frame())
    assert [ax.get_title() for ax in fig.axes] == ["1 layer(s), seed 0", "1 layer(s), seed 3", "2 layer(s), seed 0"]
    assert [line.get_label() for line in fig.axes[0].get_lines()] == [
        "P (layer 0)",
        "V (layer 0)",
        "W (layer 0)",
        "W_O",
    ]
    assert [line.get_label() for line in fig.axes[2].get_lines()][:2] == ["P (layer 0)", "P (layer 1)"]
    for ax, run in zip(fig.axes, [(1, 0), (1, 3), (2, 0)]):
        for line, key in zip(ax.get_lines(), sorted(COS[run])):
            np.testing.assert_array_equal(line.get_xdata(), STEPS)
            np.testing.assert_array_equal(line.get_ydata(), COS[run][key])
        colours = [line.get_color() for line in ax.get_lines()]
        assert len(set(colours)) == len(colours)  # one colour per weight and layer
        assert ax.get_ylabel() == "cosine with theory"


def test_cosine_figure_described_in_full_with_a_colour_per_line_past_ten():
    fig = R.cosine_figure(four_layer_cosines())
    series = [("W_O", -1)] + [(w, layer) for layer in range(4) for w in ("W", "V", "P")]
    order = sorted(series)  # groupby: P (0..3), V (0..3), W (0..3), W_O
    lines = []
    for i, (w, layer) in enumerate(order):
        k = series.index((w, layer))
        lines.append(
            {
                "label": w if layer < 0 else f"{w} (layer {layer})",
                "x": [1, 500],
                "y": [round(0.9 + k / 100, 6), round(0.5 + k / 100, 6)],
                "colour": TAB10[i % 10],  # the 11th line takes the first colour again
                "width": 1.5,
                "style": "-",
                "marker": ".",
            }
        )
    common = {"xlabel": "training step", "ylabel": "cosine with theory", "yscale": "linear", "bands": []}
    assert describe(fig) == {
        "size": (8.0, 5.2),
        "axes": [
            {
                "title": "1 layer(s), seed 0",
                "xscale": "symlog",  # x shared with the run below, whose steps span over two decades
                **common,
                "lines": [
                    {"label": "W_O", "x": [1, 2], "y": [0.991, 0.992], "colour": TAB10[0], "width": 1.5, "style": "-",
                     "marker": "."}
                ],
                "legend": ["W_O"],
            },
            {
                "title": "4 layer(s), seed 1",
                "xscale": "symlog",
                **common,
                "lines": lines,
                "legend": [line["label"] for line in lines],
            },
        ],
    }  # fmt: skip
    assert lines[10]["label"] == "W (layer 2)" and lines[10]["colour"] == TAB10[0]
    for ax in fig.axes:
        legend = ax.get_legend()
        assert (legend._ncols, legend._loc) == (4, 3)  # 3: lower left
        assert {line.get_markersize() for line in ax.get_lines()} == {3}
    assert fig.axes[0].get_shared_x_axes().joined(fig.axes[0], fig.axes[1])


def test_cosine_figure_selects_each_runs_own_rows():
    cos = four_layer_cosines()
    # a third run sharing the seed of one run and the depth of the other
    extra = pd.DataFrame([dict(n_layers=1, seed=1, step=s, layer=-1, weight="W_O", cosine=0.5) for s in (1, 2)])
    fig = R.cosine_figure(pd.concat([cos, extra], ignore_index=True))
    assert [ax.get_title() for ax in fig.axes] == ["1 layer(s), seed 0", "1 layer(s), seed 1", "4 layer(s), seed 1"]
    assert [len(ax.get_lines()) for ax in fig.axes] == [1, 1, 13]
    assert fig.axes[1].get_lines()[0].get_ydata().tolist() == [0.5, 0.5]
    assert fig.axes[0].get_lines()[0].get_ydata().tolist() == [0.991, 0.992]


def test_cosine_lines_label_each_curve_by_run_weight_and_layer():
    cos = pd.DataFrame(
        {"n_layers": [2, 2, 2], "seed": [3, 3, 3], "step": [1, 2, 2], "layer": [-1, 0, 1],
         "weight": ["W_O", "W", "V"], "cosine": [0.5, 0.25, 0.125]}
    )  # fmt: skip
    got = R.cosine_lines(cos)
    assert list(got.columns) == ["step", "cls", "value"]
    assert got["cls"].tolist() == ["L2 s3 W_O", "L2 s3 W (layer 0)", "L2 s3 V (layer 1)"]  # W_O has no layer
    assert got["step"].tolist() == [1, 2, 2] and got["value"].tolist() == [0.5, 0.25, 0.125]


def test_cosine_section_interactive_twin_has_every_curve_and_names_its_axes(figures):
    part = R._cosine_section(cosines_frame(), "word")
    plot = part.split("\n")[1]
    assert 'id="plot-cosines-over-training"' in plot
    data = {t["name"]: t for t in traces(plot)}
    assert len(data) == 4 + 4 + 7  # one curve per run, weight and layer
    assert data["L1 s0 W_O"]["y"] == [0.9999, 0.9995, 0.9989, 0.9992, 0.2]
    assert data["L2 s0 P (layer 1)"]["y"][2:] == [0.998, 0.9989, 0.999]
    hover = "run, weight L1 s0 P (layer 0)<br>step %{x}<br>cosine with theory %{y:.4g}<extra></extra>"
    assert data["L1 s0 P (layer 0)"]["hovertemplate"] == hover


# ---- order figure


def test_order_figure_plots_the_last_step_and_the_smallest_eta():
    fig = order_figure(order_frame())
    by_eta, by_step = fig.axes
    assert by_eta.get_title() == "at step 5" and by_step.get_title() == "at eta = 0.01"
    assert [line.get_label() for line in by_eta.get_lines()] == ["V (0)", "W (1)", "W_O"]
    shape = [(1.23456, 0.8), (0.987654, 1.1), (0.5, 1.0)]
    for line, (a, b) in zip(by_eta.get_lines(), shape):
        np.testing.assert_array_equal(line.get_xdata(), [0.01, 0.02, 0.04])
        np.testing.assert_allclose(line.get_ydata(), [eta**a * 5**b for eta in (0.01, 0.02, 0.04)], rtol=1e-12)
    # only positive errors on the log axis: V from step 2, W from 3, W_O from 2 (exact at step 1)
    for line, (a, b), first in zip(by_step.get_lines(), shape, (2, 3, 2)):
        steps = list(range(first, 6))
        np.testing.assert_array_equal(line.get_xdata(), steps)
        np.testing.assert_allclose(line.get_ydata(), [0.01**a * s**b for s in steps], rtol=1e-12)
    assert [line.get_color() for line in by_eta.get_lines()] == [line.get_color() for line in by_step.get_lines()]


def test_order_figure_described_in_full():
    fig = R.order_figure(order_frame())

    def line(label, x, y, colour):
        return {"label": label, "x": x, "y": y, "colour": colour, "width": 1.5, "style": "-", "marker": "o"}

    # rel_error = eta^a step^b: V (a 1.23456, b 0.8), W (0.987654, 1.1), W_O (0.5, 1)
    by_eta = [
        line("V (0)", [0.01, 0.02, 0.04], [0.012304, 0.028953, 0.068129], TAB20[0]),
        line("W (1)", [0.01, 0.02, 0.04], [0.062167, 0.123274, 0.244448], TAB20[1]),
        line("W_O", [0.01, 0.02, 0.04], [0.5, 0.707107, 1.0], TAB20[2]),
    ]
    by_step = [
        line("V (0)", [2, 3, 4, 5], [0.005912, 0.008177, 0.010293, 0.012304], TAB20[0]),
        line("W (1)", [3, 4, 5], [0.035443, 0.048636, 0.062167], TAB20[1]),
        line("W_O", [2, 3, 4, 5], [0.2, 0.3, 0.4, 0.5], TAB20[2]),
    ]
    common = {"ylabel": "relative error of leading term", "xscale": "log", "yscale": "log", "bands": []}
    assert describe(fig) == {
        "size": (8.0, 3.0),
        "axes": [
            {"title": "at step 5", "xlabel": "learning rate eta", **common, "lines": by_eta, "legend": []},
            {"title": "at eta = 0.01", "xlabel": "steps", **common, "lines": by_step,
             "legend": ["V (0)", "W (1)", "W_O"]},
        ],
    }  # fmt: skip
    assert fig.axes[1].get_legend()._ncols == 2


def test_order_figure_titles_name_the_last_step_and_smallest_eta():
    order = order_frame()
    order = order.assign(eta=order["eta"] / 3000, step=order["step"] * 7)  # smallest eta 3.3333...e-06
    fig = R.order_figure(order)
    assert [ax.get_title() for ax in fig.axes] == ["at step 35", "at eta = 3.33333e-06"]  # 6 significant digits
    assert [line.get_xdata().tolist() for line in fig.axes[1].get_lines()] == [
        [14, 21, 28, 35],
        [21, 28, 35],
        [14, 21, 28, 35],
    ]


def order_rows(n_layers: int) -> pd.DataFrame:
    """Order errors of every weight of an n-layer model at two etas and two steps."""
    return pd.DataFrame(
        dict(n_layers=n_layers, eta=eta, step=step, layer=layer, weight=w, rel_error=eta * step)
        for eta in (0.01, 0.02)
        for step in (4, 5)
        for layer, w in [(-1, "W_O")] + [(layer, w) for layer in range(n_layers) for w in ("W", "V", "P")]
    )


def test_order_figure_draws_every_weight_of_a_four_layer_model():
    by_eta, _ = order_figure(order_rows(4)).axes
    assert len(by_eta.get_lines()) == 13


def test_order_figure_colours_cycle_past_twenty_series():
    by_eta, by_step = R.order_figure(order_rows(8)).axes
    colours = [line.get_color() for line in by_eta.get_lines()]
    assert len(colours) == 25
    assert colours[20:] == colours[:5] and len(set(colours[:20])) == 20
    assert colours == [line.get_color() for line in by_step.get_lines()]


def test_figures_axes_and_layout():
    fig = cosine_figure(cosines_frame())
    assert tuple(fig.get_size_inches()) == (8.0, 2.6 * 3)
    first, *rest = fig.axes
    assert all(first.get_shared_x_axes().joined(first, ax) for ax in rest)
    line = first.get_lines()[0]
    assert (line.get_marker(), line.get_markersize()) == (".", 3)
    assert all(ax.get_xlabel() == "training step" for ax in fig.axes)
    assert all(ax.get_legend() is not None for ax in fig.axes)
    fig = order_figure(order_frame())
    assert tuple(fig.get_size_inches()) == (8.0, 3.0)
    by_eta, by_step = fig.axes
    assert (by_eta.get_xscale(), by_eta.get_yscale(), by_step.get_xscale()) == ("log", "log", "log")
    assert (by_eta.get_xlabel(), by_step.get_xlabel()) == ("learning rate eta", "steps")
    assert by_eta.get_ylabel() == by_step.get_ylabel() == "relative error of leading term"
    assert by_step.get_legend() is not None and by_eta.get_legend() is None
    assert (by_eta.get_lines()[0].get_marker(), by_eta.get_lines()[0].get_linestyle()) == ("o", "-")


# ---- sections


def test_corpus_section_states_the_rule_and_the_count():
    summary = {"sequences": "windows", "min_count": 7, "vocab_size": 64, "coverage": 0.82}
    text = _corpus_section(summary)
    assert "Types seen fewer than 7 times" in text
    assert "every non-overlapping window of T + 1 tokens" in text and "one sequence per document" not in text
    ((caption, head, rows),) = tables(text)
    assert head == ["quantity", "value"]
    assert rows == [["coverage", "0.82"], ["min_count", "7"], ["sequences", "windows"], ["vocab_size", "64"]]
    stories = _corpus_section({**summary, "sequences": "stories"})
    assert "one sequence per document of at least T + 1 tokens" in stories and "non-overlapping" not in stories


def test_corpus_section_table_cells_are_text():
    summary = {"sequences": "stories", "min_count": 3, "coverage": 0.5, "n": 1000000}
    ((caption, head, rows),) = tables(R._corpus_section(summary))
    assert caption == "Corpus the theory and the models share"
    assert rows == [["coverage", "0.5"], ["min_count", "3"], ["n", "1000000"], ["sequences", "stories"]]
    assert "Types seen fewer than 3 times are left out" in R._corpus_section(summary)


def test_cosine_section_tables_show_the_minimum_and_the_departures():
    text = _cosine_section(cosines_frame(), "bpe")
    (cap1, head1, rows1), (cap2, head2, rows2) = tables(text)
    assert "Minimum cosine over the window" in cap1
    assert head1 == [
        "n_layers", "seed", "layer", "weight", "min_cosine", "step_of_min", "n_checkpoints", "paper", "bar", "meets_bar"
    ]  # fmt: skip
    assert rows1[0] == ["1", "0", "-", "W_O", "0.998900", "3", "4", "0.997891", "0.999000", "NO"]
    assert rows1[1] == ["1", "0", "0", "P", "0.993000", "4", "2", "–", "0.990000", "yes"]
    assert rows1[6][4] == "0.999844"
    assert head2 == ["n_layers", "seed", "layer", "weight", "bar", "first_step_below", "epoch", "corpus_loss"]
    assert rows2[0][:4] == ["1", "0", "-", "W_O"] and rows2[0][6:] == ["1.5000", "3.9700"]
    assert rows2[3][2:4] == ["0", "W"] and rows2[3][5:] == ["–", "–", "–"]  # never below its bar
    assert text.count("<img ") == 1


def test_order_section_lists_slopes_with_layer_labels():
    text = _order_section(order_frame())
    ((caption, head, rows),) = tables(text)
    assert caption == "Log-log slopes (predicted: 1)"
    assert head == ["layer", "weight", "slope_vs_eta", "slope_vs_steps"]
    # slope against steps at eta 0.01 is b, over steps >= first non-zero step + 1
    assert rows == [["-", "W_O", "0.500", "1.000"], ["0", "V", "1.235", "0.800"], ["1", "W", "0.988", "1.100"]]
    assert text.count("<img ") == 1


def test_causal_section_names_the_removed_weight_and_the_paper_number():
    ((caption, head, rows),) = tables(_causal_section(causal_frame()))
    assert head == ["n_layers", "seed", "step", "removed", "layer", "cosine", "loss", "paper"]
    assert rows[0] == ["1", "0", "4", "nothing (original)", "-", "–", "4.1234", "5.349"]
    assert rows[1] == ["1", "0", "4", "attention W", "0", "0.9000", "4.2000", "5.350 (layer 0), 5.352 (layer 1)"]
    assert rows[2][3:] == ["value V", "0", "0.8000", "4.5000", "not in our text"]
    assert rows[3][3:] == ["position bias P", "0", "0.7000", "4.1200", "not in our text"]
    assert rows[4][3:] == ["output W_O", "-", "0.6000", "4.9876", "not in our text"]
    assert rows[8][:5] == ["2", "0", "6", "attention W", "1"]


def test_words_section_one_table_per_probe_in_the_order_given():
    got = tables(_words_section(words_frame()))
    assert [cap for cap, _, _ in got] == ["probe 'the': top tokens of its row", "probe '.': top tokens of its row"]
    assert all(head == ["rank", "W_O (learned)", "B"] for _, head, _ in got)
    assert got[0][2] == [["1", "park (0.0115)", "she (0.123)"], ["2", "garden (0.00494)", "mia (-0.000264)"]]
    assert got[1][2] == [["1", "she (1.5)", "park (10)"], ["2", "one (2e-05)", "the (0)"]]


def test_words_section_keeps_probes_in_given_order_and_formats_scores():
    words = pd.DataFrame(
        [("z", "B", 1, "a", 123456.0), ("z", "A", 1, "b", 0.5), ("a", "B", 1, "c", -1.25e-7), ("a", "A", 1, "d", 3.0)],
        columns=["probe", "matrix", "rank", "token", "score"],
    )
    got = tables(R._words_section(words))
    assert [cap for cap, _, _ in got] == ["probe 'z': top tokens of its row", "probe 'a': top tokens of its row"]
    assert got[0][1:] == (["rank", "B", "A"], [["1", "a (1.23e+05)", "b (0.5)"]])
    assert got[1][1:] == (["rank", "B", "A"], [["1", "c (-1.25e-07)", "d (3)"]])


def test_section_prose_states_the_rules_the_code_applies():
    # the zero-weight steps the cosine paragraph names are theory.first_nonzero_step's
    zero = ", ".join([f"W_O before step {FIRST['W_O']}", f"V before step {FIRST['V']}"])
    zero += f", W and P before step {FIRST['W']}"
    assert paragraphs(_cosine_section(cosines_frame(), "word")) == [
        "Cosine = Frobenius inner product over norms, between each learned matrix and its closed form "
        f"(W ~ Q, V ~ (B Phi)^T, W_O ~ B, P ~ Delta). Undefined while a weight is still exactly zero ({zero}).",
        "How early is early: the first checkpoint at which each weight's cosine falls below its bar, and the "
        "full-corpus loss there (a dash: never within the run). The initial loss is ln |V|.",
    ]
    assert paragraphs(_order_section(order_frame())) == [
        "Relative error ||learned - c(s, eta) T|| / ||c(s, eta) T|| of the leading-order prediction, float64 "
        "full-batch runs. The next order predicts slope 1 against eta (fixed steps) and about 1 against steps "
        "(fixed eta)."
    ]
    assert paragraphs(_causal_section(causal_frame())) == [
        "Training loss after replacing one weight W by W - <W,T>/<T,T> T (its component along the theoretical "
        "direction T removed). Paper column: TinyStories with its own vocabulary, so its losses are on a "
        "different scale from this corpus; only the rows our text of the paper shows are quoted."
    ]
    tail = (
        ". Types seen fewer than 5 times are left out of the vocabulary, and a sequence is kept only if every "
        "token is in the vocabulary."
    )
    assert paragraphs(_corpus_section({"sequences": "stories", "min_count": 5})) == [
        "Sequences: one sequence per document of at least T + 1 tokens, its first T + 1 (the paper's rule: 65,536 "
        "samples of at least 201 tokens, truncated to 201)" + tail
    ]
    assert paragraphs(_corpus_section({"sequences": "windows", "min_count": 5})) == [
        "Sequences: every non-overlapping window of T + 1 tokens of every document (ours; the paper takes one "
        "sequence per sample of at least 201 tokens, truncated to 201)" + tail
    ]
    ((caption, _, _),) = tables(_corpus_section({"sequences": "windows", "min_count": 5}))
    assert caption == "Corpus the theory and the models share"
    cosine_captions = [cap for cap, _, _ in tables(_cosine_section(cosines_frame(), "word"))]
    assert cosine_captions == [
        "Minimum cosine over the window (epoch ends); paper column: its Table 2 (TinyStories, BPE, 3 layers, "
        "minimum over all epochs), shown for BPE runs only (the word-level table is not in our text)",
        None,
    ]


def test_sections_are_joined_by_newlines_in_order(figures):
    part = R._order_section(order_frame())
    lines = part.split("\n")
    assert [x[:8] for x in lines] == ["<p>Relat", "<img alt", "<table><"]
    part = R._cosine_section(cosines_frame(), "word")
    assert [x[:8] for x in part.split("\n")] == ["<img alt", "<div sty", "<p>Cosin", "<table><", "<p>How e", "<table><"]
    assert [x[:8] for x in R._causal_section(causal_frame()).split("\n")] == ["<p>Train", "<table><"]
    assert [x[:8] for x in R._corpus_section({"sequences": "stories", "min_count": 5}).split("\n")] == [
        "<p>Seque",
        "<table><",
    ]
    words = R._words_section(words_frame()).split("\n")
    assert len(words) == 2 and all(w.startswith("<table>") and w.endswith("</table>") for w in words)
    assert [alt for _, alt in figures] == [
        "leading-order error against eta and steps",
        "cosine between learned weights and theory over training",
    ]
    # the figures drawn are the ones of the frames given
    assert figures[0][0].axes[0].get_title() == "at step 5"
    assert figures[1][0].axes[2].get_title() == "2 layer(s), seed 0"


def test_a_diverged_loss_prints_as_inf(figures):
    causal = causal_frame()
    causal.loc[2, "loss"] = float("inf")
    ((_, _, rows),) = tables(R._causal_section(causal))
    assert rows[2][3:] == ["value V", "0", "0.8000", "inf", "not in our text"]
    cos = cosines_frame()
    cos.loc[(cos["n_layers"] == 1) & (cos["seed"] == 0), "corpus_loss"] = float("inf")
    (_, _, departed) = tables(R._cosine_section(cos, "word"))[1]
    assert departed[0][4:] == ["0.9990", "3", "1.5000", "inf"]


# ---- the page


@pytest.mark.parametrize("tokenizer", [None, "bpe"])
def test_associations_page_sections_and_tokenizer(tokenizer):
    summary = {"sequences": "stories", "min_count": 5}
    if tokenizer:
        summary["tokenizer"] = tokenizer
    page = associations_page(summary, cosines_frame(), order_frame(), causal_frame(), words_frame(), PROVENANCE)
    assert re.findall(r"<h2>(.*?)</h2>", page) == [
        "Corpus",
        "Learned weights against theory",
        "Order of the approximation",
        "Causal check",
        "Associations of probe words",
        "Provenance",
    ]
    assert "<title>Token associations: gradient leading terms</title>" in page
    cosine_tables = [t for t in tables(page) if t[0] and t[0].startswith("Minimum cosine")]
    assert len(cosine_tables) == 1
    assert ("paper" in cosine_tables[0][1]) == (tokenizer == "bpe")  # absent tokenizer: word level
    assert "Git revision: abc123" in page and "Seeds: 0, 3" in page
    assert "Types seen fewer than 5 times" in page
    assert any(t[0] == "Loss with each theoretical component removed" for t in tables(page))
    assert any(t[0] == "probe '.': top tokens of its row" for t in tables(page))


def test_page_intro_and_figure_alt_texts():
    page = associations_page(
        {"sequences": "stories", "min_count": 5},
        cosines_frame(),
        order_frame(),
        causal_frame(),
        words_frame(),
        PROVENANCE,
    )
    assert paragraphs(page)[0] == (
        "Early in training, every weight of an attention-only model trained from zero by SGD equals a closed form "
        "built from corpus statistics (Im et al., arXiv 2601.19208)."
    )
    assert re.findall(r'<img alt="(.*?)"', page) == [
        "cosine between learned weights and theory over training",
        "leading-order error against eta and steps",
    ]


def test_associations_page_sections_are_the_section_builders(figures):
    summary = {"sequences": "windows", "min_count": 4, "tokenizer": "bpe"}
    page = R.associations_page(summary, cosines_frame(), order_frame(), causal_frame(), words_frame(), PROVENANCE)
    body = {t: b for t, b in re.findall(r'<section id="[^"]*">\n<h2>(.*?)</h2>\n(.*?)\n</section>', page, re.S)}
    assert list(body) == [
        "Corpus",
        "Learned weights against theory",
        "Order of the approximation",
        "Causal check",
        "Associations of probe words",
        "Provenance",
    ]
    assert body["Corpus"] == R._corpus_section(summary)
    assert body["Learned weights against theory"] == R._cosine_section(cosines_frame(), "bpe")
    assert body["Order of the approximation"] == R._order_section(order_frame())
    assert body["Causal check"] == R._causal_section(causal_frame())
    assert body["Associations of probe words"] == R._words_section(words_frame())
    assert body["Provenance"] == H.provenance_block(PROVENANCE)
    assert "<h1>Token associations: gradient leading terms</h1>" in page
    # the other basis, when given, reaches the cosine section (its "Both bases" comparison)
    lead, other = cosines_frame().assign(basis="corpus"), cosines_frame().assign(basis="first_batch")
    both = R.associations_page(summary, lead, order_frame(), causal_frame(), words_frame(), PROVENANCE, other)
    cosine_part = R._cosine_section(lead, "bpe", other)
    assert "<p>Both bases." in cosine_part and f"<h2>Learned weights against theory</h2>\n{cosine_part}\n" in both
    assert (
        page.count(
            "<p>Early in training, every weight of an attention-only model trained from zero by SGD equals a closed "
            "form built from corpus statistics (Im et al., arXiv 2601.19208).</p>"
        )
        == 1
    )

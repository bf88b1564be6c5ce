"""reports/associations.html, more by value: both figures described in full (tests/figures.py), the
legend layout, colours past ten lines, and each section of the page equal to its own builder."""

from __future__ import annotations

import re

import pandas as pd
from figures import describe
from test_assoc_report_values import (
    PROVENANCE,
    causal_frame,
    cosines_frame,
    order_frame,
    tables,
    words_frame,
)
from test_interactive import traces

from emergence.core.report import html as H
from emergence.studies.assoc import report as R

TAB10 = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
TAB20 = ["#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c"]


# --- cosine figure ----------------------------------------------------------------------------------


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


# --- order figure -----------------------------------------------------------------------------------


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


def test_order_figure_colours_cycle_past_twenty_series():
    rows = [
        dict(n_layers=8, eta=eta, step=step, layer=layer, weight=w, rel_error=eta * step)
        for eta in (0.01, 0.02)
        for step in (4, 5)
        for layer, w in [(-1, "W_O")] + [(layer, w) for layer in range(8) for w in ("W", "V", "P")]
    ]
    by_eta, by_step = R.order_figure(pd.DataFrame(rows)).axes
    colours = [line.get_color() for line in by_eta.get_lines()]
    assert len(colours) == 25
    assert colours[20:] == colours[:5] and len(set(colours[:20])) == 20
    assert colours == [line.get_color() for line in by_step.get_lines()]


# --- sections and page ------------------------------------------------------------------------------


def test_corpus_section_table_cells_are_text():
    summary = {"sequences": "stories", "min_count": 3, "coverage": 0.5, "n": 1000000}
    ((caption, head, rows),) = tables(R._corpus_section(summary))
    assert caption == "Corpus the theory and the models share"
    assert rows == [["coverage", "0.5"], ["min_count", "3"], ["n", "1000000"], ["sequences", "stories"]]
    assert "Types seen fewer than 3 times are left out" in R._corpus_section(summary)


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


def test_words_section_keeps_probes_in_given_order_and_formats_scores():
    words = pd.DataFrame(
        [("z", "B", 1, "a", 123456.0), ("z", "A", 1, "b", 0.5), ("a", "B", 1, "c", -1.25e-7), ("a", "A", 1, "d", 3.0)],
        columns=["probe", "matrix", "rank", "token", "score"],
    )
    got = tables(R._words_section(words))
    assert [cap for cap, _, _ in got] == ["probe 'z': top tokens of its row", "probe 'a': top tokens of its row"]
    assert got[0][1:] == (["rank", "B", "A"], [["1", "a (1.23e+05)", "b (0.5)"]])
    assert got[1][1:] == (["rank", "B", "A"], [["1", "c (-1.25e-07)", "d (3)"]])


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


def test_departure_table_columns_and_labels():
    t = R._departure_table(cosines_frame())
    assert list(t.columns) == ["n_layers", "seed", "layer", "weight", "bar", "first_step_below", "epoch", "corpus_loss"]
    assert str(t["first_step_below"].dtype) == "Int64"
    assert t["layer"].tolist()[:4] == ["-", "0", "0", "0"]
    assert t["first_step_below"].tolist()[:4] == [3, 6, 6, pd.NA]


def test_table1_paper_column_nan_for_a_weight_the_paper_lacks():
    t = R.table1(cosines_frame(), "bpe")
    p = t.set_index(["n_layers", "seed", "layer", "weight"])["paper"]
    assert p.loc[(1, 0, "-", "W_O")] == 0.997891 and p.loc[(1, 0, "0", "W")] == 0.999914
    assert pd.isna(p.loc[(1, 0, "0", "P")])
    assert list(t.columns)[-3:] == ["paper", "bar", "meets_bar"]


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


def test_a_diverged_loss_prints_as_inf(figures):
    causal = causal_frame()
    causal.loc[2, "loss"] = float("inf")
    ((_, _, rows),) = tables(R._causal_section(causal))
    assert rows[2][3:] == ["value V", "0", "0.8000", "inf", "not in our text"]
    cos = cosines_frame()
    cos.loc[(cos["n_layers"] == 1) & (cos["seed"] == 0), "corpus_loss"] = float("inf")
    (_, _, departed) = tables(R._cosine_section(cos, "word"))[1]
    assert departed[0][4:] == ["0.9990", "3", "1.5000", "inf"]


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

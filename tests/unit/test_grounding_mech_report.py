"""reports/grounding.html's mechanistic sections and the metrics JSON, by value: co-occurrence R² and
tuned-lens curves pooled over seeds; the saliency-flow, heads and ablation sections (their sentences,
tables, figures and block layout); Table 2 at the checkpoints nearest 1/4, 1/2 and the end; the local
learning coefficient. Each number is traced to hand-built per-run frames whose models, seeds, checkpoints,
layers and kinds differ.

The saliency, heads and ablation frames and `layout` here serve test_visual_report.py too."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from figures import describe
from matplotlib.colors import to_hex
from test_grounding_report import details, paras, table

from emergence.studies.grounding import report_mech as M
from emergence.studies.grounding.gain import sign_flip_test

# ---- reading a section's layout

VIRIDIS = {0.0: "#440154", 0.5: "#21918c", 1.0: "#fde725"}  # viridis at 0, 1/2 and 1


def layout(part: str) -> list[str]:
    """The fragment's blocks, one per line: each line's first and last tag ('<p>…</p>'); a line that is
    no single tagged block (an <img>, or text outside the tags) stays whole."""
    return [re.sub(r"^(<\w+)[^>]*>.*(</\w+>)$", r"\1>…\2", line, flags=re.S) for line in part.split("\n")]


IMG = '<img alt="{}" src="data:image/png;base64,">'  # what the `figures` fixture embeds


# ---- colours


def test_colours_spread_viridis_from_first_to_last():
    def hexes(colours):
        return [to_hex(c) for c in colours]

    assert hexes(M._colours(3)) == [VIRIDIS[0.0], VIRIDIS[0.5], VIRIDIS[1.0]]
    assert hexes(M._colours(2)) == [VIRIDIS[0.0], VIRIDIS[1.0]]
    assert hexes(M._colours(1)) == [VIRIDIS[0.0]]  # one checkpoint: the first colour, no division by zero
    assert M._colours(0) == []


# ---- co-occurrence


def cooc_frame() -> pd.DataFrame:
    rows = [  # (model, seed, step, r2, adj_r2, n_words)
        ("tf", 0, 10, 0.1, 0.1, 5),
        ("tf", 1, 10, 0.6, 0.3, 5),
        ("tf", 2, 10, 0.5, 0.2, 5),  # mean 0.4, median 0.5
        ("tf", 0, 0, 0.05, -0.1, 5),
        ("tf", 1, 0, 0.15, 0.0, 5),
        ("lstm", 0, 10, 0.9, 0.8, 4),
    ]
    return pd.DataFrame(rows, columns=["model", "seed", "step", "r2", "adj_r2", "n_words"])


def test_r2_curve_mean_and_range_over_seeds():
    got = M.r2_curve(cooc_frame())
    assert list(got.columns) == ["model", "step", "r2", "r2_min", "r2_max", "adj_r2", "n_words"]
    by = got.set_index(["model", "step"])
    assert by.loc[("tf", 10)].to_dict() == pytest.approx(
        {"r2": 0.4, "r2_min": 0.1, "r2_max": 0.6, "adj_r2": 0.2, "n_words": 5}
    )
    assert by.loc[("tf", 0)].to_dict() == pytest.approx(
        {"r2": 0.1, "r2_min": 0.05, "r2_max": 0.15, "adj_r2": -0.05, "n_words": 5}
    )
    assert by.loc[("lstm", 10)].to_dict() == pytest.approx(
        {"r2": 0.9, "r2_min": 0.9, "r2_max": 0.9, "adj_r2": 0.8, "n_words": 4}
    )


def test_cooc_section_names_features_plots_seed_means_and_tables(figures):  # noqa: F811
    words = pd.DataFrame({"word": ["dog", "cat"], "pmi": [1.25, -0.5]})
    part = M.cooc_section(cooc_frame(), words, ["log count", "pmi"])
    assert "regressed (least squares, intercept) on log count, pmi of (v<ENV>, v<LAN>)" in paras(part)[0]
    ((fig, alt),) = figures
    assert alt == "R squared of grounding gain on co-occurrence over training"
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert sorted(lines) == ["lstm", "tf"]
    np.testing.assert_allclose(lines["tf"].get_xdata(), [0, 10])
    np.testing.assert_allclose(lines["tf"].get_ydata(), [0.1, 0.4])
    band = ax.collections[1].get_paths()[0].vertices  # tf's seed range, drawn second (models sorted)
    at10 = band[np.isclose(band[:, 0], 10), 1]
    assert at10.min() == pytest.approx(0.1) and at10.max() == pytest.approx(0.6)
    assert ax.get_ylim() == (0, 1)
    # each model's band and line share one tab10 colour, in model order; the band is a light fill, no edge
    line = {"marker": "None", "style": "-", "width": 1.5}
    assert describe(fig) == {
        "size": (6.0, 3.0),
        "axes": [
            {
                "title": "",
                "xlabel": "training step",
                "ylabel": "R² of G(v) on co-occurrence",
                "xscale": "linear",
                "yscale": "linear",
                "lines": [
                    {"label": "lstm", "x": [10], "y": [0.9], "colour": "#1f77b4", **line},
                    {"label": "tf", "x": [0, 10], "y": [0.1, 0.4], "colour": "#ff7f0e", **line},
                ],
                "bands": [
                    {"colour": "#1f77b4", "alpha": 0.2, "edge_width": 0.0},
                    {"colour": "#ff7f0e", "alpha": 0.2, "edge_width": 0.0},
                ],
                "legend": ["lstm", "tf"],
            }
        ],
    }
    r2 = table(details(part, "R² per checkpoint"), None)
    assert r2.values.tolist() == [
        ["lstm", "10", "0.9000", "0.9000", "0.9000", "0.8000", "4"],
        ["tf", "0", "0.1000", "0.0500", "0.1500", "-0.0500", "5"],
        ["tf", "10", "0.4000", "0.1000", "0.6000", "0.2000", "5"],
    ]
    per_word = table(details(part, "Co-occurrence statistics per word"), None)
    assert per_word.values.tolist() == [["dog", "1.250"], ["cat", "-0.500"]]


def test_cooc_section_sentence_and_blocks(figures):  # noqa: F811
    cooc = pd.DataFrame(
        [("t4", 0, 10, 0.5, 0.25, 6), ("t4", 1, 10, 0.75, 0.5, 6)],
        columns=["model", "seed", "step", "r2", "adj_r2", "n_words"],
    )
    words = pd.DataFrame({"word": ["dog"], "pmi": [0.5]})
    part = M.cooc_section(cooc, words, ["pmi"])
    alt = "R squared of grounding gain on co-occurrence over training"
    assert layout(part) == ["<p>…</p>", IMG.format(alt), "<details>…</details>", "<details>…</details>"]
    assert paras(part) == [
        "Per checkpoint, G(v) of each target word is regressed (least squares, intercept) on pmi of (v<ENV>, "
        "v<LAN>) in the training turns; lines are means over seeds, bands the seed range. The paper finds R² "
        "rising and then falling: learning beyond co-occurrence."
    ]
    assert table(details(part, "R² per checkpoint"), None).values.tolist() == [
        ["t4", "10", "0.6250", "0.5000", "0.7500", "0.3750", "6"]
    ]


# ---- tuned lens


def tf_lstm_lens_frame() -> pd.DataFrame:
    """tf: steps 0 and 20 (seeds 0 and 1), lstm: its last step is 5 with one seed; lens rows differ."""
    rows = []
    for seed in (0, 1):
        for step in (0, 20):
            for lens in ("tuned", "logit"):
                for layer in (0, 1):
                    g = step / 10 + layer + (0.5 if lens == "tuned" else 0.0) + seed  # seed mean: + 0.5
                    kl = 0.1 * layer + (0.02 if lens == "tuned" else 0.3) + 0.01 * seed + step / 1000
                    rows.append(("tf", seed, step, lens, layer, 3.0 + seed, 4.0 + seed, g, kl))
    for step in (1, 5):
        for lens in ("tuned", "logit"):
            rows.append(("lstm", 0, step, lens, 0, 2.0, 2.5, step * 1.0, 0.7 if lens == "tuned" else 0.9 + step))
    return pd.DataFrame(
        rows, columns=["model", "seed", "step", "lens", "layer", "s_matched", "s_mismatched", "gain", "kl"]
    )


def test_lens_curve_means_over_seeds_per_lens_and_layer():
    got = M.lens_curve(tf_lstm_lens_frame())
    assert list(got.columns) == ["model", "step", "lens", "layer", "s_matched", "s_mismatched", "gain", "kl"]
    assert len(got) == 8 + 4
    by = got.set_index(["model", "step", "lens", "layer"])
    assert by.loc[("tf", 20, "tuned", 1)].to_dict() == pytest.approx(
        {"s_matched": 3.5, "s_mismatched": 4.5, "gain": 2 + 1 + 0.5 + 0.5, "kl": 0.1 + 0.02 + 0.005 + 0.02}
    )
    assert by.loc[("tf", 0, "logit", 0), "gain"] == pytest.approx(0.5)
    assert by.loc[("lstm", 5, "logit", 0), "kl"] == pytest.approx(5.9)


def test_lens_section_plots_each_checkpoint_and_tabulates_last_checkpoint_kl(figures):  # noqa: F811
    part = M.lens_section(tf_lstm_lens_frame())
    ((fig, alt),) = figures
    assert alt == "grounding gain per layer through the tuned lens"
    lstm, tf = fig.axes  # one panel per model, sorted
    assert tf.get_title().startswith("tf:") and lstm.get_title().startswith("lstm:")
    lines = tf.get_lines()[:-1]  # the last: the zero line
    assert [(line.get_label(), line.get_linestyle(), line.get_marker()) for line in lines] == [
        ("step 0", "-", "o"), ("_child1", ":", "None"), ("step 20", "-", "o"), ("_child3", ":", "None")
    ]  # fmt: skip
    np.testing.assert_allclose(lines[0].get_xdata(), [0, 1])
    np.testing.assert_allclose(lines[0].get_ydata(), [1.0, 2.0])  # tuned, step 0: 0.5 + layer + 0.5
    np.testing.assert_allclose(lines[1].get_ydata(), [0.5, 1.5])  # logit, step 0
    np.testing.assert_allclose(lines[2].get_ydata(), [3.0, 4.0])  # tuned, step 20
    assert lines[0].get_color() != lines[2].get_color() and lines[0].get_color() == lines[1].get_color()
    kl = table(part, "Lens quality at the last checkpoint: KL(final || lens) per layer, mean over seeds")
    assert list(kl.columns) == ["model", "layer", "logit", "tuned"]
    assert kl.values.tolist() == [
        ["lstm", "0", "5.9000", "0.7000"],  # lstm's own last step, 5
        ["tf", "0", "0.3250", "0.0450"],
        ["tf", "1", "0.4250", "0.1450"],
    ]
    every = table(details(part, "Every lens checkpoint"), None)
    first = ["lstm", "1", "logit", "0", "2.0000", "2.5000", "1.0000", "1.9000"]
    assert len(every) == 12 and every.iloc[0].tolist() == first


def lens_frame() -> pd.DataFrame:
    """t4: checkpoints 40, 0, 20 (out of order), seeds 0 and 1, layers 0 and 1; a2: one checkpoint (5), one
    seed, one layer, and a logit lens that puts no mass where the model does (KL inf).

    t4's seed mean: gain = step / 20 + layer + 0.5 (tuned) or - 0.25 (logit);
    kl = layer / 2 + 0.25 (tuned) or 1.125 (logit) + step / 400; s_matched 3.5, s_mismatched 5."""
    rows = []
    for seed in (0, 1):
        for step in (40, 0, 20):
            for lens in ("logit", "tuned"):
                for layer in (0, 1):
                    tuned = lens == "tuned"
                    gain = step / 20 + layer + (0.25 if tuned else -0.5) + 0.5 * seed
                    kl = 0.5 * layer + (0.125 if tuned else 1.0) + 0.25 * seed + step / 400
                    rows.append(("t4", seed, step, lens, layer, 3.0 + seed, 4.0 + 2 * seed, gain, kl))
    rows.append(("a2", 0, 5, "tuned", 0, 2.0, 2.5, 0.75, 0.0625))
    rows.append(("a2", 0, 5, "logit", 0, 2.0, 2.5, -0.25, np.inf))
    return pd.DataFrame(
        rows, columns=["model", "seed", "step", "lens", "layer", "s_matched", "s_mismatched", "gain", "kl"]
    )


def t4_lens(step: int, lens: str, layer: int) -> tuple[float, float]:
    """t4's seed-mean gain and kl at (step, lens, layer), from lens_frame's formulas."""
    tuned = lens == "tuned"
    return step / 20 + layer + (0.5 if tuned else -0.25), layer / 2 + (0.25 if tuned else 1.125) + step / 400


def test_lens_curve_one_row_per_model_step_lens_and_layer_mean_over_seeds():
    got = M.lens_curve(lens_frame())
    assert list(got.columns) == ["model", "step", "lens", "layer", "s_matched", "s_mismatched", "gain", "kl"]
    expected = [["a2", 5, "logit", 0, 2.0, 2.5, -0.25, np.inf], ["a2", 5, "tuned", 0, 2.0, 2.5, 0.75, 0.0625]]
    for step in (0, 20, 40):
        for lens in ("logit", "tuned"):
            for layer in (0, 1):
                expected.append(["t4", step, lens, layer, 3.5, 5.0, *t4_lens(step, lens, layer)])
    assert got[["model", "lens"]].values.tolist() == [[r[0], r[2]] for r in expected]
    assert got[["step", "layer"]].values.tolist() == [[r[1], r[3]] for r in expected]
    np.testing.assert_allclose(got[["s_matched", "s_mismatched", "gain", "kl"]].to_numpy(), [r[4:] for r in expected])


def test_lens_section_text_figure_and_tables(figures):  # noqa: F811
    part = M.lens_section(lens_frame())
    alt = "grounding gain per layer through the tuned lens"
    kl_caption = "Lens quality at the last checkpoint: KL(final || lens) per layer, mean over seeds"
    assert layout(part) == ["<p>…</p>", IMG.format(alt), "<table>…</table>", "<details>…</details>"]
    assert paras(part) == [
        "An affine translator per layer (zero-initialised, residual) is trained to match the final next-token "
        "distribution (KL), then the grounding gain is read out at every layer."
    ]
    ((fig, fig_alt),) = figures
    assert fig_alt == alt

    def lines(step, colour, tuned, logit, n):
        common = {"x": [0, 1][: len(tuned)], "colour": colour, "width": 1.5}
        return [
            {"label": f"step {step}", "y": tuned, "style": "-", "marker": "o", **common},
            {"label": f"_child{n}", "y": logit, "style": ":", "marker": "None", **common},
        ]

    def zero(n):
        return {"label": f"_child{n}", "x": [0, 1], "y": [0, 0], "colour": "#555555", "width": 0.8, "style": "-",
                "marker": "None"}  # fmt: skip

    def panel(model, lines_, legend):
        return {
            "title": f"{model}: tuned lens (solid), logit lens (dotted)",
            "xlabel": "layer read (last = model output)",
            "ylabel": "G read through the lens (nats)",
            "xscale": "linear",
            "yscale": "linear",
            "lines": lines_,
            "bands": [],
            "legend": legend,
        }

    t4 = [
        *lines(0, VIRIDIS[0.0], [0.5, 1.5], [-0.25, 0.75], 1),
        *lines(20, VIRIDIS[0.5], [1.5, 2.5], [0.75, 1.75], 3),
        *lines(40, VIRIDIS[1.0], [2.5, 3.5], [1.75, 2.75], 5),
        zero(6),
    ]
    assert describe(fig) == {
        "size": (8.4, 3.0),
        "axes": [
            panel("a2", [*lines(5, VIRIDIS[0.0], [0.75], [-0.25], 1), zero(2)], ["step 5"]),
            panel("t4", t4, ["step 0", "step 20", "step 40"]),
        ],
    }
    a2_ax, t4_ax = fig.axes
    assert [line.get_markersize() for line in t4_ax.get_lines()] == [3.0] * 6 + [6.0]  # the zero line: default
    assert [line.get_markersize() for line in a2_ax.get_lines()] == [3.0, 3.0, 6.0]
    kl = table(part, kl_caption)
    assert list(kl.columns) == ["model", "layer", "logit", "tuned"]
    assert kl.values.tolist() == [  # each model's own last checkpoint: a2 at 5, t4 at 40
        ["a2", "0", "inf", "0.0625"],
        ["t4", "0", "1.2250", "0.3500"],
        ["t4", "1", "1.7250", "0.8500"],
    ]
    every = table(details(part, "Every lens checkpoint"), None)
    assert list(every.columns) == ["model", "step", "lens", "layer", "s_matched", "s_mismatched", "gain", "kl"]
    expected = [
        ["a2", "5", "logit", "0", "2.0000", "2.5000", "-0.2500", "inf"],
        ["a2", "5", "tuned", "0", "2.0000", "2.5000", "0.7500", "0.0625"],
    ]
    for step in (0, 20, 40):
        for lens in ("logit", "tuned"):
            for layer in (0, 1):
                g, k = t4_lens(step, lens, layer)
                expected.append(["t4", str(step), lens, str(layer), "3.5000", "5.0000", f"{g:.4f}", f"{k:.4f}"])
    assert every.values.tolist() == expected


# ---- saliency flow


def saliency_frame() -> pd.DataFrame:
    """Per-run saliency rows: t4 (seeds 0 and 1, checkpoints 2000, 0, 10 out of order, layers 0-2) and a2
    (seed 0, checkpoints 5 and 0, layer 0). Layer rows (head -1) carry env_to_pred / other_to_pred; head
    rows (heads 0 and 1) carry shares that are no layer flow. t4's seed mean of env_to_pred:
    layer / 10 + step / 10000 + 0.1."""
    rows = []
    for seed in (0, 1):
        for step in (2000, 0, 10):
            for layer in (0, 1, 2):
                env = 0.1 * layer + step / 10000 + 0.2 * seed
                rows.append(("t4", seed, step, layer, -1, "env_to_pred", env))
                rows.append(("t4", seed, step, layer, -1, "other_to_pred", 0.5 - env / 2))
                rows.append(("t4", seed, step, layer, 1, "aggregate_share", 0.9))
                rows.append(("t4", seed, step, layer, 0, "gather_share", 0.8))
    for step, env in ((5, 0.625), (0, 0.25)):
        rows.append(("a2", 0, step, 0, -1, "env_to_pred", env))
        rows.append(("a2", 0, step, 0, -1, "other_to_pred", 0.125))
        rows.append(("a2", 0, step, 0, 1, "aggregate_share", 0.75))
    return pd.DataFrame(rows, columns=["model", "seed", "step", "layer", "head", "metric", "value"])


def t4_flow(step: int, layer: int) -> tuple[float, float]:
    env = layer / 10 + step / 10000 + 0.1
    return env, 0.5 - env / 2


def test_flow_curve_layer_rows_pivoted_by_metric_mean_over_seeds():
    got = M.flow_curve(saliency_frame())
    assert list(got.columns) == ["model", "step", "layer", "env_to_pred", "other_to_pred"]
    keys = [("a2", 0, 0), ("a2", 5, 0)] + [("t4", s, layer) for s in (0, 10, 2000) for layer in (0, 1, 2)]
    assert [tuple(r) for r in got[["model", "step", "layer"]].values.tolist()] == keys
    expected = [[0.25, 0.125], [0.625, 0.125]] + [list(t4_flow(s, layer)) for _, s, layer in keys[2:]]
    np.testing.assert_allclose(got[["env_to_pred", "other_to_pred"]].to_numpy(), expected)


def saliency_text(env: str) -> str:
    return (
        "I_l = |Σ_h A_{h,l} ⊙ ∂L/∂A_{h,l}| at the prediction of v<LAN> (matched held-out contexts, one backward "
        f"pass for all layers and heads); plotted: the share of I_l on the edges {env} → prediction position, mean "
        "over contexts and seeds. other_to_pred: the share on all other edges into the prediction position."
    )


def test_saliency_section_text_figure_and_table(figures):  # noqa: F811
    part = M.saliency_section(saliency_frame())  # the default name of the environment positions: v<ENV>
    alt = "saliency flow from v<ENV> to the prediction by layer over training"
    assert layout(part) == ["<p>…</p>", IMG.format("saliency flow from v&lt;ENV&gt; to the prediction by layer "
                                                   "over training"), "<details>…</details>"]  # fmt: skip
    assert paras(part) == [saliency_text("v<ENV>")]
    ((fig, fig_alt),) = figures
    assert fig_alt == alt

    def line(layer, colour, steps, y):
        return {"label": f"layer {layer}", "x": steps, "y": y, "colour": colour, "width": 1.5, "style": "-",
                "marker": "None"}  # fmt: skip

    def panel(model, xscale, lines):
        return {
            "title": f"{model}: saliency flow by layer",
            "xlabel": "training step",
            "ylabel": "v<ENV> → prediction share",
            "xscale": xscale,
            "yscale": "linear",
            "lines": lines,
            "bands": [],
            "legend": [ln["label"] for ln in lines],
        }

    steps = [0, 10, 2000]
    t4 = [
        line(layer, colour, steps, [round(t4_flow(s, layer)[0], 6) for s in steps])
        for layer, colour in zip((0, 1, 2), VIRIDIS.values())
    ]
    assert describe(fig) == {
        "size": (8.4, 3.0),
        "axes": [
            panel("a2", "linear", [line(0, VIRIDIS[0.0], [0, 5], [0.25, 0.625])]),
            panel("t4", "symlog", t4),  # checkpoints spanning more than two decades
        ],
    }
    flow = table(details(part, "Layer flow per checkpoint"), None)
    assert list(flow.columns) == ["model", "step", "layer", "env_to_pred", "other_to_pred"]
    expected = [["a2", "0", "0", "0.2500", "0.1250"], ["a2", "5", "0", "0.6250", "0.1250"]]
    for s in steps:
        for layer in (0, 1, 2):
            env, other = t4_flow(s, layer)
            expected.append(["t4", str(s), str(layer), f"{env:.4f}", f"{other:.4f}"])
    assert flow.values.tolist() == expected


def test_saliency_section_names_the_environment_positions(figures):  # noqa: F811
    part = M.saliency_section(saliency_frame(), "ENV")
    assert paras(part) == [saliency_text("ENV")]
    ((fig, alt),) = figures
    assert alt == "saliency flow from ENV to the prediction by layer over training"
    assert [ax.get_ylabel() for ax in fig.axes] == ["ENV → prediction share"] * 2


# ---- heads


def heads_inputs() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Runs (from the saliency rows, several per run): t4 seeds 0 and 1 at checkpoints 0 and 100, a2 seed 0
    at 0 and 7. Heads found:
      t4 @ 100: aggregate: seed 0 layers 1 and 2, seed 1 layer 3 -> 1.5 heads, mean layer (1.5 + 3) / 2;
                gather: seed 1 layer 0 -> 0.5 heads, mean layer 0;
      t4 @ 0: none -> 0 heads, no mean layer;
      a2 @ 7: gather: three heads in layer 1 -> 3 heads, mean layer 1; a2 @ 0: aggregate layer 4."""
    saliency = pd.DataFrame(
        [(m, s, t, h) for m, s, t in [("t4", 0, 0), ("t4", 0, 100), ("t4", 1, 0), ("t4", 1, 100), ("a2", 0, 0),
                                      ("a2", 0, 7)] for h in (-1, 0, 1)],
        columns=["model", "seed", "step", "head"],
    )  # fmt: skip
    heads = pd.DataFrame(
        [
            ("t4", 0, 100, 1, 0, "aggregate"),
            ("t4", 0, 100, 2, 1, "aggregate"),
            ("t4", 1, 100, 3, 0, "aggregate"),
            ("t4", 1, 100, 0, 1, "gather"),
            ("a2", 0, 7, 1, 0, "gather"),
            ("a2", 0, 7, 1, 1, "gather"),
            ("a2", 0, 7, 1, 2, "gather"),
            ("a2", 0, 0, 4, 2, "aggregate"),
        ],
        columns=["model", "seed", "step", "layer", "head", "kind"],
    ).assign(share=0.5)
    return heads, saliency


HEADS_COLUMNS = [
    "model", "step", "heads (mean over seeds) aggregate", "heads (mean over seeds) gather", "mean layer aggregate",
    "mean layer gather",
]  # fmt: skip


def test_heads_table_counts_missing_heads_as_zero_and_averages_layers_over_seeds_with_heads():
    heads, saliency = heads_inputs()
    got = M.heads_table(heads, saliency)
    assert list(got.columns) == [
        ("model", ""),
        ("step", ""),
        ("heads (mean over seeds)", "aggregate"),
        ("heads (mean over seeds)", "gather"),
        ("mean layer", "aggregate"),
        ("mean layer", "gather"),
    ]
    assert got[["model", "step"]].values.tolist() == [["a2", 0], ["a2", 7], ["t4", 0], ["t4", 100]]
    np.testing.assert_array_equal(
        got.iloc[:, 2:].to_numpy(dtype=float),
        [[1.0, 0.0, 4.0, np.nan], [0.0, 3.0, np.nan, 1.0], [0.0, 0.0, np.nan, np.nan], [1.5, 0.5, 2.25, 0.0]],
    )


def heads_text(env: str) -> str:
    return (
        f"Aggregate heads: >= 25% of a head's |saliency| on the edges {env} → prediction position; gather heads: "
        f">= 25% on edges into {env} positions from earlier ones (the paper's Table 2 criterion)."
    )


def test_heads_section_states_the_threshold_and_tabulates_heads_to_two_places():
    heads, saliency = heads_inputs()
    part = M.heads_section(heads, saliency, 0.25)
    assert layout(part) == ["<p>…</p>", "<table>…</table>"]
    assert paras(part) == [heads_text("v<ENV>")]
    found = table(part, "Heads found per checkpoint")
    assert list(found.columns) == HEADS_COLUMNS
    assert found.values.tolist() == [
        ["a2", "0", "1.00", "0.00", "4.00", "–"],
        ["a2", "7", "0.00", "3.00", "–", "1.00"],
        ["t4", "0", "0.00", "0.00", "–", "–"],
        ["t4", "100", "1.50", "0.50", "2.25", "0.00"],
    ]
    assert paras(M.heads_section(heads, saliency, 0.25, "ENV")) == [heads_text("ENV")]


def test_heads_section_says_which_kind_no_head_reaches():
    heads, saliency = heads_inputs()
    gather_only = M.heads_section(heads[heads["kind"] == "gather"], saliency, 0.25)
    assert layout(gather_only) == ["<p>…</p>", "<table>…</table>", "<p>…</p>"]
    assert paras(gather_only)[1:] == ["No aggregate head reaches the threshold at any checkpoint."]
    found = table(gather_only, "Heads found per checkpoint")
    assert found["heads (mean over seeds) aggregate"].tolist() == ["0.00"] * 4
    aggregate_only = M.heads_section(heads[heads["kind"] == "aggregate"], saliency, 0.25)
    assert paras(aggregate_only)[1:] == ["No gather head reaches the threshold at any checkpoint."]


# ---- ablation

ABLATION_COLUMNS = [
    "model", "step", "kind", "runs with heads", "heads (mean)", "control heads (mean)", "original", "intervention",
    "control", "p (intervention > control)",
]  # fmt: skip


def ablation_frame() -> pd.DataFrame:
    """Per (seed, context) rows. t4 at 300 (aggregate): seed 0 has 3 heads (2 control heads), seed 1 has 1 head
    (1 control head); seed 0's context 2 has no control left (intervention without control). t4 at 300 (gather):
    no seed has heads. t4 at 100 (aggregate): only seed 1 has heads. a2 (one seed) at 50 and 20."""
    cols = "model seed step kind context n_heads n_control_heads original intervention control".split()
    nan = np.nan
    rows = [
        ("t4", 0, 300, "aggregate", 0, 3, 2, 2.0, 3.0, 2.5),
        ("t4", 0, 300, "aggregate", 1, 3, 2, 2.5, 2.25, 2.75),
        ("t4", 0, 300, "aggregate", 2, 3, 2, 3.0, 4.5, nan),
        ("t4", 1, 300, "aggregate", 0, 1, 1, 1.0, 2.0, 1.0),
        ("t4", 1, 300, "aggregate", 1, 1, 1, 1.5, 1.75, 1.5),
        ("t4", 0, 300, "gather", 0, 0, 0, 2.0, nan, nan),
        ("t4", 1, 300, "gather", 0, 0, 0, 1.25, nan, nan),
        ("t4", 0, 100, "aggregate", 0, 0, 0, 7.0, nan, nan),
        ("t4", 1, 100, "aggregate", 0, 2, 2, 5.0, 6.0, 5.5),
        ("t4", 1, 100, "aggregate", 1, 2, 2, 5.5, 6.5, 5.25),
        ("a2", 0, 50, "aggregate", 0, 1, 1, 4.0, 5.0, 4.5),
        ("a2", 0, 20, "aggregate", 0, 2, 1, 3.0, np.inf, 3.5),
    ]
    return pd.DataFrame(rows, columns=cols)


P300 = sign_flip_test(np.array([0.5, -0.5, 1.0, 0.25]))  # t4 at 300: intervention - control where both exist
P100 = sign_flip_test(np.array([0.5, 1.25]))
P50, P20 = sign_flip_test(np.array([0.5])), sign_flip_test(np.array([np.inf]))


def test_ablation_table_by_hand():
    got = M.ablation_table(ablation_frame())
    assert list(got.columns) == ABLATION_COLUMNS
    assert got[["model", "step", "kind", "runs with heads"]].values.tolist() == [
        ["a2", 20, "aggregate", 1],
        ["a2", 50, "aggregate", 1],
        ["t4", 100, "aggregate", 1],
        ["t4", 300, "aggregate", 2],
        ["t4", 300, "gather", 0],
    ]
    values = got[ABLATION_COLUMNS[4:]].to_numpy(dtype=float)
    np.testing.assert_array_equal(
        values,
        [
            [2.0, 1.0, 3.0, np.inf, 3.5, P20],  # a target the ablated model gives no mass
            [1.0, 1.0, 4.0, 5.0, 4.5, P50],
            # original over the runs with heads only (seed 1: 5.25), not seed 0's 7
            [1.0, 1.0, 5.25, 6.25, 5.375, P100],
            # heads: (3 + 1) / 2, control heads (2 + 1) / 2; intervention over all 5 rows, control over 4
            [2.0, 1.5, 2.0, 2.7, 1.9375, P300],
            # no heads: original over every run, no intervention, control or p
            [0.0, 0.0, 1.625, np.nan, np.nan, np.nan],
        ],
    )
    assert got["step"].map(type).tolist() == [int] * 5


def test_ablation_section_last_checkpoint_of_each_model_and_the_paper(figures):  # noqa: F811
    part = M.ablation_section(ablation_frame())
    assert layout(part) == ["<p>…</p>", "<table>…</table>", "<table>…</table>", "<details>…</details>"]
    assert paras(part) == [
        "Matched surprisal of v<LAN> with the heads zero-ablated (intervention), with as many random heads from "
        "the same layers (control, mean over draws) and with none (original). Means over the runs that have such "
        "heads at that checkpoint; p pools (seed, context) pairs."
    ]
    last = table(part, "Last checkpoint")
    assert list(last.columns) == ABLATION_COLUMNS
    unbounded = ablation_frame().replace({"intervention": {5.0: np.inf}})  # a2 at 50: no finite surprisal either
    assert table(M.ablation_section(unbounded), "Last checkpoint").values.tolist()[0] == [
        "a2", "50", "aggregate", "1", "1.0000", "1.0000", "4.0000", "inf", "4.5000", f"{P20:.4f}"
    ]  # fmt: skip
    assert last.values.tolist() == [
        ["a2", "50", "aggregate", "1", "1.0000", "1.0000", "4.0000", "5.0000", "4.5000", f"{P50:.4f}"],
        ["t4", "300", "aggregate", "2", "2.0000", "1.5000", "2.0000", "2.7000", "1.9375", f"{P300:.4f}"],
        ["t4", "300", "gather", "0", "0.0000", "0.0000", "1.6250", "–", "–", "–"],
    ]
    paper = table(part, "Paper (Wu et al., Table 2), aggregate heads, Transformer on CHILDES, for comparison")
    assert list(paper.columns) == ["step", "intervention", "control", "original"]
    assert paper.values.tolist() == [
        ["5000", "6.51", "6.39", "6.38"],
        ["10000", "5.86", "5.29", "5.30"],
        ["20000", "5.62", "4.76", "4.77"],
    ]
    every = table(details(part, "Every checkpoint"), None)
    assert list(every.columns) == ABLATION_COLUMNS
    assert every.values.tolist()[:3] == [
        ["a2", "20", "aggregate", "1", "2.0000", "1.0000", "3.0000", "inf", "3.5000", f"{P20:.4f}"],
        last.values.tolist()[0],
        ["t4", "100", "aggregate", "1", "1.0000", "1.0000", "5.2500", "6.2500", "5.3750", f"{P100:.4f}"],
    ]
    assert every.values.tolist()[3:] == last.values.tolist()[1:]
    without = M.ablation_section(ablation_frame(), paper=False)
    assert layout(without) == ["<p>…</p>", "<table>…</table>", "<details>…</details>"]
    assert without == part.replace("\n" + re.findall(r"<table><caption>Paper.*?</table>", part)[0], "")


def test_ablation_metrics_each_models_last_checkpoint_rounded_to_five_places():
    assert M.ablation_metrics(ablation_frame()) == {
        "a2_aggregate": {
            "heads (mean)": 1.0,
            "original": 4.0,
            "intervention": 5.0,
            "control": 4.5,
            "p (intervention > control)": round(P50, 5),
        },
        "t4_aggregate": {
            "heads (mean)": 2.0,
            "original": 2.0,
            "intervention": 2.7,
            "control": 1.9375,
            "p (intervention > control)": round(P300, 5),
        },
        "t4_gather": {
            "heads (mean)": 0.0,
            "original": 1.625,
            "intervention": None,
            "control": None,
            "p (intervention > control)": None,
        },
    }
    thirds = ablation_frame().assign(original=lambda d: d["original"] + 1 / 3)
    assert M.ablation_metrics(thirds)["t4_aggregate"]["original"] == 2.33333  # 2 + 1/3, five places


# ---- Table 2


def tf_tiny_table2_inputs() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """tf: steps 0, 300, 500, 1000 (1/4 -> 300, 1/2 -> 500); tiny: steps 0 and 7 (1/4 and 1/2 -> 0)."""
    tf_steps, tiny_steps = [0, 300, 500, 1000], [0, 7]
    saliency = pd.DataFrame(
        [("tf", s, t) for s in (0, 1) for t in tf_steps] + [("tiny", 0, t) for t in tiny_steps],
        columns=["model", "seed", "step"],
    )
    heads = pd.DataFrame(
        [
            ("tf", 0, 300, 1, 0, "aggregate"),
            ("tf", 0, 300, 2, 1, "aggregate"),  # seed 0: 2 heads, mean layer 1.5
            ("tf", 1, 300, 3, 0, "aggregate"),  # seed 1: 1 head, layer 3 -> 1.5 heads, mean layer 2.25
            ("tf", 1, 300, 0, 2, "gather"),
            ("tf", 0, 1000, 0, 1, "aggregate"),  # seed 1 none at 1000: 0.5 heads, mean layer 0
            ("tf", 1, 1000, 5, 1, "gather"),
            ("tiny", 0, 7, 1, 1, "aggregate"),
            ("tiny", 0, 0, 4, 1, "gather"),
        ],
        columns=["model", "seed", "step", "layer", "head", "kind"],
    )
    rows = []
    for seed in (0, 1):
        for step in tf_steps:
            for ctx in (0, 1):
                if step == 300:
                    iv, ct = 3.1234567 + 0.5 * seed + 0.25 * ctx, 2.1111111 + 0.1 * ctx
                elif step == 1000 and seed == 0:
                    iv, ct = 4.5555555, 4.0
                else:
                    iv, ct = np.nan, np.nan
                has, original = int(not np.isnan(iv)), 1.9876543 + seed * (1 + step / 1000)
                rows.append(("tf", seed, step, "aggregate", ctx, has, has, original, iv, ct))
                rows.append(("tf", seed, step, "gather", ctx, 1, 1, 50.0, 99.0, 0.0))
    for step in tiny_steps:
        rows.append(("tiny", 0, step, "aggregate", 0, 1, 1, 1.0 + step, 2.0 + step, 1.5 + step))
    rows.append(("tiny", 0, 20, "gather", 0, 1, 1, 0.0, 0.0, 0.0))  # Table 2's checkpoints: aggregate rows only
    ablation = pd.DataFrame(
        rows,
        columns="model seed step kind context n_heads n_control_heads original intervention control".split(),
    )
    return heads, saliency, ablation


def test_table2_metrics_by_hand():
    heads, saliency, ablation = tf_tiny_table2_inputs()
    got = M.table2_metrics(heads, saliency, ablation)
    assert sorted(got) == ["tf", "tiny"] and list(got["tf"]) == ["0.25", "0.5", "1.0"]
    p300 = sign_flip_test(
        np.array([3.1234567 + 0.5 * s + 0.25 * c - 2.1111111 - 0.1 * c for s in (0, 1) for c in (0, 1)])
    )
    assert got["tf"]["0.25"] == {
        "step": 300.0,
        "aggregate heads": 1.5,
        "mean layer": 2.25,
        "intervention": 3.49846,  # 3.1234567 + 0.25 + 0.125
        "control": 2.16111,
        "original": round(1.9876543 + (1 + 0.3) / 2, 5),  # both seeds have heads
        "p (intervention > control)": round(p300, 5),
    }
    assert got["tf"]["0.5"] == {
        "step": 500.0,
        "aggregate heads": 0.0,
        "mean layer": None,
        "intervention": None,
        "control": None,
        "original": 2.73765,  # no heads: over every run, (1.9876543 + 3.4876543) / 2
        "p (intervention > control)": None,
    }
    assert got["tf"]["1.0"] == {
        "step": 1000.0,
        "aggregate heads": 0.5,
        "mean layer": 0.0,
        "intervention": 4.55556,
        "control": 4.0,
        "original": 1.98765,  # only seed 0 has heads at 1000
        "p (intervention > control)": round(sign_flip_test(np.array([0.5555555, 0.5555555])), 5),
    }
    # few checkpoints: 1/4 and 1/2 share step 0, where tiny has a gather head only
    assert got["tiny"]["0.25"] == got["tiny"]["0.5"]
    assert got["tiny"]["0.25"]["step"] == 0.0 and got["tiny"]["0.25"]["aggregate heads"] == 0.0
    assert got["tiny"]["0.25"]["intervention"] == 2.0 and got["tiny"]["1.0"]["mean layer"] == 1.0
    assert got["tiny"]["1.0"]["original"] == 8.0


def test_table2_section_ours_with_layers_and_the_papers_numbers():
    heads, saliency, ablation = tf_tiny_table2_inputs()
    part = M.table2_section(heads, saliency, ablation, {"tf": 6, "tiny": 2})
    assert "its model has 12 layers" in paras(part)[0]
    ours = table(part, "Ours")
    assert list(ours.columns) == [
        "model", "fraction", "step", "aggregate heads", "mean layer", "intervention", "control", "original",
        "p (intervention > control)", "layers",
    ]  # fmt: skip
    assert ours.iloc[0, :-2].tolist() == ["tf", "0.250", "300", "1.500", "2.250", "3.498", "2.161", "2.638"]
    assert ours.iloc[1, :5].tolist() == ["tf", "0.500", "500", "0.000", "–"]
    assert ours["layers"].tolist() == ["6", "6", "6", "2", "2", "2"]
    assert ours["step"].tolist() == ["300", "500", "1000", "0", "0", "7"]
    paper = table(part, "Paper (Wu et al., Table 2), Transformer on CHILDES")
    assert paper.values.tolist() == [
        ["5000", "2.28", "7.38", "6.51", "6.39", "6.38"],
        ["10000", "5.09", "7.28", "5.86", "5.29", "5.30"],
        ["20000", "6.71", "7.52", "5.62", "4.76", "4.77"],
    ]
    assert list(paper.columns) == ["step", "aggregate heads", "mean layer", "intervention", "control", "original"]


# ---- Table 2: a checkpoint without saliency rows, a surprisal without bound, the section's text


def table2_inputs() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """t4, seeds 0 and 1. Saliency (and so heads) read at checkpoints 0, 100 and 200; ablation at 0, 100, 200
    and 400 (1/4 -> 100, 1/2 -> 200, all -> 400, which has no saliency rows: no heads counted there).
      100: aggregate heads in layer 2 (seed 0) and 3 (seed 1) -> 1 head, mean layer 2.5; seed 0's intervention
           has no bound (inf);
      200: seed 0 has aggregate heads in layers 1 and 2, seed 1 a gather head only -> 1 head, mean layer 1.5,
           surprisals over seed 0 only."""
    saliency = pd.DataFrame([("t4", s, t) for s in (0, 1) for t in (0, 100, 200)], columns=["model", "seed", "step"])
    heads = pd.DataFrame(
        [
            ("t4", 0, 100, 2, 0, "aggregate"),
            ("t4", 1, 100, 3, 1, "aggregate"),
            ("t4", 0, 200, 1, 0, "aggregate"),
            ("t4", 0, 200, 2, 1, "aggregate"),
            ("t4", 1, 200, 0, 1, "gather"),
        ],
        columns=["model", "seed", "step", "layer", "head", "kind"],
    )
    nan = np.nan
    rows = [  # (seed, step, n_heads, original, intervention, control)
        (0, 0, 0, 2.0, nan, nan),
        (1, 0, 0, 3.0, nan, nan),
        (0, 100, 1, 3.0, np.inf, 3.5),
        (1, 100, 1, 3.5, 4.0, 3.25),
        (0, 200, 2, 2.5, 3.125, 2.75),
        (1, 200, 0, 9.0, nan, nan),
        (0, 400, 1, 1.0, 2.0, 1.5),
        (1, 400, 1, 1.5, 2.5, 1.25),
    ]
    ablation = pd.DataFrame(
        [("t4", s, t, "aggregate", 0, n, n, o, i, c) for s, t, n, o, i, c in rows]
        + [("t4", 0, 400, "gather", 0, 1, 1, 50.0, 60.0, 55.0)],
        columns="model seed step kind context n_heads n_control_heads original intervention control".split(),
    )
    return heads, saliency, ablation


def test_table2_section_text_and_our_table_by_hand():
    heads, saliency, ablation = table2_inputs()
    part = M.table2_section(heads, saliency, ablation, {"t4": 4})
    assert layout(part) == ["<p>…</p>", "<table>…</table>", "<table>…</table>"]
    assert paras(part) == [
        "The paper's Table 2 at CPU scale: per Transformer, the checkpoints nearest 1/4, 1/2 and all of training "
        "(the paper's 5k / 10k / 20k of 20,000 steps). Aggregate heads: mean count over seeds; mean layer counts "
        "from 0 (the paper's base is not stated; its model has 12 layers). Surprisal in nats, mean over the seeds "
        "that have aggregate heads."
    ]
    p100 = sign_flip_test(np.array([np.inf, 0.75]))
    p200, p400 = sign_flip_test(np.array([0.375])), sign_flip_test(np.array([0.5, 1.25]))
    assert table(part, "Ours").values.tolist() == [
        ["t4", "0.250", "100", "1.000", "2.500", "inf", "3.375", "3.250", f"{p100:.3f}", "4"],
        ["t4", "0.500", "200", "1.000", "1.500", "3.125", "2.750", "2.500", f"{p200:.3f}", "4"],
        ["t4", "1.000", "400", "0.000", "–", "2.250", "1.375", "1.250", f"{p400:.3f}", "4"],
    ]
    assert table(part, "Paper (Wu et al., Table 2), Transformer on CHILDES")["intervention"].tolist() == [
        "6.51", "5.86", "5.62"
    ]  # fmt: skip


def test_table2_metrics_where_no_saliency_was_read():
    heads, saliency, ablation = table2_inputs()
    got = M.table2_metrics(heads, saliency, ablation)["t4"]
    assert list(got) == ["0.25", "0.5", "1.0"]
    assert got["1.0"] == {
        "step": 400.0,
        "aggregate heads": 0.0,
        "mean layer": None,
        "intervention": 2.25,
        "control": 1.375,
        "original": 1.25,
        "p (intervention > control)": round(sign_flip_test(np.array([0.5, 1.25])), 5),
    }
    assert (got["0.5"]["aggregate heads"], got["0.5"]["mean layer"], got["0.5"]["original"]) == (1.0, 1.5, 2.5)


# ---- local learning coefficient


def llc_frame(spread: float = 1 / 3) -> pd.DataFrame:
    """grounding_llc rows: t4 seed 0 with three chains per checkpoint, t4 seed 1 and a2 seed 0 with two;
    checkpoints out of order. Chain c adds c * spread to the run's base LLC, so the mean over chains is the
    base plus spread (three chains) or spread / 2 (two): at 1/3, 1/3 and 1/6 round differently at 6 and at 7
    places. Only a2's last checkpoint had not levelled off (drift 5 against an LLC near 1)."""
    base = {
        ("t4", 0): {20: 2.0, 0: 0.5, 5: 1.25},
        ("t4", 1): {5: 0.75, 0: 0.25, 20: 3.0},
        ("a2", 0): {7: 0.875, 0: 0.125},
    }
    rows = [
        (model, seed, step, c, llc + c * spread, 5.0 if (model, step) == ("a2", 7) else 0.0, 4.0)
        for (model, seed), steps in base.items()
        for step, llc in steps.items()
        for c in range(3 if (model, seed) == ("t4", 0) else 2)
    ]
    return pd.DataFrame(rows, columns=["model", "seed", "step", "chain", "llc", "drift", "init_loss"])


def llc_by_hand() -> pd.DataFrame:
    """llc_frame(0.25)'s checkpoints (means exact in binary), sorted by model, seed and step: mean and sd
    over chains."""
    sd3, sd2 = 0.25, np.sqrt(0.25**2 / 2)  # sd of (0, 1/4, 1/2) and of (0, 1/4)
    rows = [
        ("a2", 0, 0, 0.125 + 0.125, sd2, 0.0, 2),
        ("a2", 0, 7, 0.875 + 0.125, sd2, 5.0, 2),
        ("t4", 0, 0, 0.5 + 0.25, sd3, 0.0, 3),
        ("t4", 0, 5, 1.25 + 0.25, sd3, 0.0, 3),
        ("t4", 0, 20, 2.0 + 0.25, sd3, 0.0, 3),
        ("t4", 1, 0, 0.25 + 0.125, sd2, 0.0, 2),
        ("t4", 1, 5, 0.75 + 0.125, sd2, 0.0, 2),
        ("t4", 1, 20, 3.0 + 0.125, sd2, 0.0, 2),
    ]
    return pd.DataFrame(rows, columns=["model", "seed", "step", "llc", "llc_sd", "drift", "n_chains"])


def test_llc_metrics_per_run_mean_over_chains_rounded_to_six_places():
    got = M.llc_metrics(llc_frame())
    assert list(got) == ["a2_seed0", "t4_seed0", "t4_seed1"]
    assert got["a2_seed0"] == {"steps": [0, 7], "llc": [0.291667, 1.041667]}
    assert got["t4_seed0"] == {"steps": [0, 5, 20], "llc": [0.833333, 1.583333, 2.333333]}
    assert got["t4_seed1"] == {"steps": [0, 5, 20], "llc": [0.416667, 0.916667, 3.166667]}
    assert all(type(s) is int for run in got.values() for s in run["steps"])  # JSON numbers, not numpy's


def test_llc_section_by_hand(figures):  # noqa: F811
    from emergence.core.report import html as H

    part = M.llc_section(llc_frame(0.25))
    curve = llc_by_hand()
    drawn = curve.assign(cls=curve["model"] + " seed " + curve["seed"].astype(str), value=curve["llc"])
    text = (
        "Local learning coefficient (LLC) of the saved checkpoints of the runs grounding_llc names, by devinterp's "
        "SGLD estimator on the run's own next-token loss (params llc; 2 chains per checkpoint, mean shown): read "
        "it beside the gain curves above, where grounding appears."
    )
    assert paras(part) == [
        text,
        "At 1 of 8 checkpoints the chains' loss had not levelled off (|drift| > 10% of |LLC|, drift in the table): "
        "read those LLCs as rough; more llc.num_draws settles them.",
    ]
    figures.clear()
    expected = "\n".join(
        [
            H.para(text),
            H.curves(drawn, "LLC", "run", "grounding local learning coefficient"),
            H.para(paras(part)[1]),
            "<details><summary>Every checkpoint</summary>"
            + H.table(curve, caption="LLC per checkpoint: mean and sd over chains", float_format="{:.4f}")
            + "</details>",
        ]
    )
    assert part == expected
    every = table(details(part, "Every checkpoint"), "LLC per checkpoint: mean and sd over chains")
    assert every.values.tolist()[1] == ["a2", "0", "7", "1.0000", "0.1768", "5.0000", "2"]
    assert M.llc_section(llc_frame().iloc[:0]) == H.opt_in("Local learning coefficient", "grounding_llc.models")
    assert M.llc_metrics(llc_frame().iloc[:0]) == {}

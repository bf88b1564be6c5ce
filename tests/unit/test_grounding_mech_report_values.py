"""reports/grounding.html's mechanistic sections and the metrics' table2, by value: co-occurrence R²
and tuned-lens curves pooled over seeds, Table 2 at the checkpoints nearest 1/4, 1/2 and the end,
each number traced to hand-built per-run frames whose seeds, checkpoints and kinds differ."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from figures import describe
from test_grounding_report_values import details, paras, table

from emergence.studies.grounding import report_mech as M
from emergence.studies.grounding.gain import sign_flip_test

# --- co-occurrence -----------------------------------------------------------------------------


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


# --- tuned lens ---------------------------------------------------------------------------------


def lens_frame() -> pd.DataFrame:
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
    got = M.lens_curve(lens_frame())
    assert list(got.columns) == ["model", "step", "lens", "layer", "s_matched", "s_mismatched", "gain", "kl"]
    assert len(got) == 8 + 4
    by = got.set_index(["model", "step", "lens", "layer"])
    assert by.loc[("tf", 20, "tuned", 1)].to_dict() == pytest.approx(
        {"s_matched": 3.5, "s_mismatched": 4.5, "gain": 2 + 1 + 0.5 + 0.5, "kl": 0.1 + 0.02 + 0.005 + 0.02}
    )
    assert by.loc[("tf", 0, "logit", 0), "gain"] == pytest.approx(0.5)
    assert by.loc[("lstm", 5, "logit", 0), "kl"] == pytest.approx(5.9)


def test_lens_section_plots_each_checkpoint_and_tabulates_last_checkpoint_kl(figures):  # noqa: F811
    part = M.lens_section(lens_frame())
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


# --- Table 2 --------------------------------------------------------------------------------------


def table2_inputs() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
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
    heads, saliency, ablation = table2_inputs()
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
    heads, saliency, ablation = table2_inputs()
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

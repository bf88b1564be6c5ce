"""reports/grounding.html and its metrics JSON, by value: every number the page or the JSON states is
traced back to a hand-built curve / gain table whose rows differ, so a wrong row, checkpoint, seed,
column, aggregation or rounding shows as a wrong number. Also the bootstrap band and per-checkpoint gains
from hand-built gain rows, the curves figure as data (tests/figures.py), and every sentence, caption and
default the page states.

The page readers here (tables, table, details, paras, sections) and the hand-built curve, candidates and
gain rows serve the other report tests too."""

from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd
import pytest
from figures import describe
from test_interactive import traces

from emergence.core.report import html as H
from emergence.studies.grounding import report as R
from emergence.studies.grounding.gain import sign_flip_test

# ---- reading the HTML back

TABLE = re.compile(r"<table>(?:<caption>(.*?)</caption>)?<thead><tr>(.*?)</tr></thead><tbody>(.*?)</tbody></table>")
CELL = re.compile(r"<t[hd][^>]*>(.*?)</t[hd]>")


def tables(fragment: str) -> list[tuple[str | None, list[str], list[list[str]]]]:
    """(caption, header, rows) of every table in the fragment, text unescaped."""
    out = []
    for caption, head, body in TABLE.findall(fragment):
        rows = [[html.unescape(c) for c in CELL.findall(r)] for r in re.findall(r"<tr>(.*?)</tr>", body)]
        out.append((html.unescape(caption) or None, [html.unescape(c) for c in CELL.findall(head)], rows))
    return out


def table(fragment: str, caption: str | None) -> pd.DataFrame:
    """The one table with this caption (None: without one), as strings."""
    found = [(h, r) for c, h, r in tables(fragment) if c == caption]
    assert len(found) == 1, (caption, [c for c, _, _ in tables(fragment)])
    head, rows = found[0]
    return pd.DataFrame(rows, columns=head)


def details(fragment: str, summary: str) -> str:
    """The body of the one <details> block with this summary."""
    found = re.findall(f"<details><summary>{re.escape(H.esc(summary))}</summary>(.*?)</details>", fragment, re.S)
    assert len(found) == 1, summary
    return found[0]


def paras(fragment: str) -> list[str]:
    return [html.unescape(p) for p in re.findall(r"<p[^>]*>(.*?)</p>", fragment)]


def sections(page: str) -> dict[str, str]:
    return {
        html.unescape(t): b
        for t, b in re.findall(r'<section id="[^"]*">\n<h2>(.*?)</h2>\n(.*?)\n</section>', page, re.S)
    }


# ---- hand-built inputs: curves, target candidates, evaluation contexts, templates, gain rows

CURVE_COLUMNS = [
    "model", "step", "n_seeds", "n_words", "s_matched", "s_mismatched", "G",
    "G_seed_min", "G_seed_max", "G_ci_low", "G_ci_high", "p_value",
]  # fmt: skip


def curve_frame() -> pd.DataFrame:
    """Two models, steps out of order; the last checkpoint is neither the first row nor the largest G.
    tf's last: G > 0 and p < 0.01 (grounded); lstm's last: p exactly 0.01 (not grounded)."""
    rows = [
        ("tf", 100, 2, 3, 3.1111111, 3.2222222, 0.1111111, 0.05, 0.15, 0.02, 0.21, 0.2),
        ("tf", 200, 2, 3, 2.1234567, 2.6543216, 0.5308649, 0.4123, 0.6456, 0.4567, 0.6012, 0.0099949),
        ("tf", 0, 2, 3, 4.0, 4.0, 0.0, -0.01, 0.01, -0.02, 0.02, 0.5),
        ("lstm", 0, 2, 3, 5.5, 5.4, -0.1, -0.2, 0.0, -0.3, 0.1, 0.9),
        ("lstm", 300, 2, 3, 3.9876543, 4.0000001, 0.0123456, 0.001, 0.02, 0.002, 0.03, 0.01),
        ("lstm", 150, 2, 3, 3.0, 3.9, 0.9, 0.8, 1.0, 0.85, 0.95, 0.001),
    ]
    return pd.DataFrame(rows, columns=CURVE_COLUMNS)


def candidates() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "word": ["dog", "cat", "ball", "cup", "hat"],
            "n_env": [120, 80, 300, 5, 40],
            "n_lan": [130, 90, 20, 500, 45],
            "passes": [True, True, True, False, True],
            "target": [True, True, False, False, False],
        }
    )


def eval_frame() -> pd.DataFrame:
    """Seven words (one more than the examples show), dog twice: its first context is the example."""
    words = ["dog", "dog", "cat", "ball", "cup", "hat", "shoe", "book"]
    contexts = [[w + "<ENV>", "see", f"n{i}"] for i, w in enumerate(words)]
    return pd.DataFrame({"word": words, "context": contexts})


def templates_frame() -> pd.DataFrame:
    """Two templates, each read with two targets; rows out of order so 'first' is the first listed."""
    return pd.DataFrame(
        {
            "template": ["t2", "t1", "t2", "t1"],
            "word": ["dog", "dog", "cat", "cat"],
            "context": [["look", "dog<ENV>"], ["a", "<unk>", "dog<ENV>"], ["look", "cat<ENV>"], ["a", "<unk>", "c"]],
            "n_unk": [0, 1, 0, 2],
            "source": ["paper", "ours", "paper", "ours"],
        }
    )


def gain_rows(values: dict) -> pd.DataFrame:
    """Per-context gain rows from {(model, seed, step): {word: [gain per context]}}; s_matched = 1."""
    rows = [
        dict(model=m, seed=s, step=t, word=w, s_matched=1.0, s_mismatched=1.0 + g, gain=g)
        for (m, s, t), words in values.items()
        for w, gains in words.items()
        for g in gains
    ]
    return pd.DataFrame(rows)


# ---- gain per checkpoint and its bootstrap band


def test_word_band_is_the_2_5_and_97_5_percentiles_of_1000_resampled_means():
    gains = np.array([0.3, -1.2, 2.5, 0.0, 4.75, -0.6, 1.1])
    low, high = R.word_band(gains)
    rng = np.random.default_rng(0)
    means = gains[rng.integers(0, 7, size=(1000, 7))].mean(axis=1)
    assert (low, high) == (float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5)))
    # percentile 2.5 over 1000 sorted means lies between the 25th and 26th (numpy's linear rule: 24.975)
    s = np.sort(means)
    assert low == pytest.approx(s[24] + 0.975 * (s[25] - s[24]), abs=1e-12)
    assert high == pytest.approx(s[974] + 0.025 * (s[975] - s[974]), abs=1e-12)
    assert low < gains.mean() < high
    assert isinstance(low, float) and isinstance(high, float)


def test_word_band_seed_picks_the_resamples():
    gains = np.array([0.3, -1.2, 2.5, 0.0, 4.75, -0.6, 1.1])
    rng = np.random.default_rng(5)
    means = gains[rng.integers(0, 7, size=(1000, 7))].mean(axis=1)
    assert R.word_band(gains, seed=5) == (float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5)))
    assert R.word_band(gains, seed=5) != R.word_band(gains)
    assert R.word_band(np.array([0.7, 0.7, 0.7])) == pytest.approx((0.7, 0.7))


def checkpoint_rows() -> pd.DataFrame:
    """Per-context rows: tf at steps 5 and 0 (two seeds, three words; word c has two contexts in seed 0),
    lstm at step 5 (one seed, two words). s_matched and s_mismatched differ per row."""
    rows = []

    def add(model, seed, step, word, s_m, gain):
        rows.append(
            dict(model=model, seed=seed, step=step, word=word, s_matched=s_m, s_mismatched=s_m + gain, gain=gain)
        )

    add("tf", 0, 5, "a", 2.0, 1.0)
    add("tf", 0, 5, "b", 3.0, -0.5)
    add("tf", 0, 5, "c", 4.0, 2.0)
    add("tf", 0, 5, "c", 6.0, 4.0)  # seed 0: words 1, -0.5, (2 + 4) / 2 = 3: mean 3.5 / 3 (1.625 over rows)
    add("tf", 1, 5, "a", 1.0, 3.0)
    add("tf", 1, 5, "b", 2.0, 0.5)
    add("tf", 1, 5, "c", 5.0, 1.0)  # seed 1: (3 + 0.5 + 1) / 3 = 1.5
    add("tf", 0, 0, "a", 7.0, 0.25)
    add("tf", 0, 0, "b", 8.0, -0.25)
    add("lstm", 3, 5, "a", 9.0, -2.0)
    add("lstm", 3, 5, "b", 10.0, 1.0)
    return pd.DataFrame(rows)


def test_gain_by_checkpoint_means_over_words_seed_spread_band_and_p():
    got = R.gain_by_checkpoint(checkpoint_rows())
    assert list(got.columns) == [
        "model", "step", "n_seeds", "n_words", "s_matched", "s_mismatched", "G",
        "G_seed_min", "G_seed_max", "G_ci_low", "G_ci_high", "p_value",
    ]  # fmt: skip
    assert [(m, s) for m, s in zip(got["model"], got["step"])] == [("lstm", 5), ("tf", 0), ("tf", 5)]
    assert got["step"].map(type).tolist() == [int, int, int]
    tf5 = got.iloc[2]
    # G(v) per word, seeds averaged (word c in seed 0: (2 + 4) / 2 = 3): a (1 + 3) / 2 = 2, b 0, c (3 + 1) / 2 = 2
    per_word = np.array([2.0, 0.0, 2.0])
    assert (tf5["n_seeds"], tf5["n_words"]) == (2, 3)
    assert tf5["G"] == pytest.approx(4.0 / 3)
    # s_matched per word: a (2 + 1) / 2 = 1.5, b 2.5, c ((4 + 6) / 2 + 5) / 2 = 5: mean 3
    assert tf5["s_matched"] == pytest.approx(3.0)
    assert tf5["s_mismatched"] == pytest.approx(3.0 + 4.0 / 3)
    assert (tf5["G_seed_min"], tf5["G_seed_max"]) == pytest.approx((3.5 / 3, 1.5))
    assert (tf5["G_ci_low"], tf5["G_ci_high"]) == R.word_band(per_word)
    assert tf5["p_value"] == sign_flip_test(per_word)
    tf0 = got.iloc[1]
    assert (tf0["n_seeds"], tf0["n_words"], tf0["G"], tf0["s_matched"]) == (1, 2, 0.0, 7.5)
    assert (tf0["G_seed_min"], tf0["G_seed_max"]) == (0.0, 0.0)
    lstm = got.iloc[0]
    assert (lstm["n_seeds"], lstm["n_words"], lstm["G"], lstm["s_mismatched"]) == (1, 2, -0.5, 9.0)
    assert lstm["p_value"] == sign_flip_test(np.array([-2.0, 1.0]))
    assert (lstm["G_ci_low"], lstm["G_ci_high"]) == R.word_band(np.array([-2.0, 1.0]))


# ---- final table, metrics JSON and plots CSV


def test_grounding_metrics_last_checkpoint_per_model_rounded():
    assert R.grounding_metrics(curve_frame()) == {
        "tf": {"step": 200, "G": 0.53086, "p_value": 0.00999, "s_matched": 2.1235, "s_mismatched": 2.6543},
        "lstm": {"step": 300, "G": 0.01235, "p_value": 0.01, "s_matched": 3.9877, "s_mismatched": 4.0},
    }


def test_grounding_metrics_one_checkpoint():
    one = curve_frame().iloc[[2]]
    assert R.grounding_metrics(one) == {
        "tf": {"step": 0, "G": 0.0, "p_value": 0.5, "s_matched": 4.0, "s_mismatched": 4.0}
    }


def test_grounding_metrics_round_to_five_and_four_places():
    curve = pd.DataFrame(
        {
            "model": ["m"],
            "step": [7],
            "G": [0.123456789],
            "p_value": [0.000123456],
            "s_matched": [1.23456789],
            "s_mismatched": [9.87654321],
        }
    )
    got = R.grounding_metrics(curve)
    assert got == {"m": {"step": 7, "G": 0.12346, "p_value": 0.00012, "s_matched": 1.2346, "s_mismatched": 9.8765}}
    assert list(got["m"]) == ["step", "G", "p_value", "s_matched", "s_mismatched"]
    assert type(got["m"]["step"]) is int and type(got["m"]["G"]) is float


def test_final_table_grounded_needs_positive_gain_and_p_below_one_percent():
    curve = curve_frame()
    final = R.final_table(curve).set_index("model")["grounded (G > 0, p < 0.01)"]
    assert final.to_dict() == {"tf": "yes", "lstm": "no"}  # lstm: p = 0.01 exactly
    zero = curve.assign(G=np.where(curve["step"] == 200, 0.0, curve["G"]))
    assert R.final_table(zero).set_index("model").loc["tf", "grounded (G > 0, p < 0.01)"] == "no"


def test_final_table_index_restarts_and_keeps_every_curve_column():
    final = R.final_table(curve_frame())
    assert final.index.tolist() == [0, 1]
    assert list(final.columns) == [*curve_frame().columns, "grounded (G > 0, p < 0.01)"]
    assert final["step"].tolist() == [300, 200]
    # G exactly 0 with a tiny p, and G > 0 with p just above 0.01: neither is grounded; a G of 0.5 is
    curve = pd.DataFrame(
        {"model": ["a", "b", "c"], "step": [1, 1, 1], "G": [0.0, 0.5, 0.5], "p_value": [0.001, 0.0101, 0.5]}
    )
    assert R.final_table(curve)["grounded (G > 0, p < 0.01)"].tolist() == ["no", "no", "no"]
    curve = curve.assign(G=[0.5, 0.9, -0.2], p_value=[0.009, 0.0, 0.0])
    assert R.final_table(curve)["grounded (G > 0, p < 0.01)"].tolist() == ["yes", "yes", "no"]


def test_plot_table_one_g_column_per_model_by_step():
    got = R.plot_table(curve_frame())
    assert list(got.columns) == ["step", "lstm", "tf"]
    assert got["step"].tolist() == [0, 100, 150, 200, 300]
    g = got.set_index("step")
    assert g.loc[200, "tf"] == 0.5308649 and g.loc[150, "lstm"] == 0.9 and g.loc[0, "lstm"] == -0.1
    assert np.isnan(g.loc[100, "lstm"]) and np.isnan(g.loc[300, "tf"])


def test_plot_table_values_are_g_not_another_column():
    got = R.plot_table(curve_frame())
    assert got.columns.name == "model"
    assert got.to_dict("list") == {
        "step": [0, 100, 150, 200, 300],
        "lstm": pytest.approx([-0.1, np.nan, 0.9, np.nan, 0.0123456], nan_ok=True),
        "tf": pytest.approx([0.0, 0.1111111, np.nan, 0.5308649, np.nan], nan_ok=True),
    }


# ---- the curves figure


def test_curves_figure_plots_each_models_columns_in_step_order():
    fig = R.curves_figure(curve_frame())
    axes = np.array(fig.axes).reshape(2, 2)
    for row, model in zip(axes, ["lstm", "tf"]):  # one row per model, sorted
        c = curve_frame().query("model == @model").sort_values("step")
        steps = c["step"].to_numpy()
        assert row[0].get_title().startswith(f"{model}:") and row[1].get_title().startswith(f"{model}:")
        matched, mismatched = row[0].get_lines()
        np.testing.assert_array_equal(matched.get_xdata(), steps)
        np.testing.assert_array_equal(matched.get_ydata(), c["s_matched"])
        np.testing.assert_array_equal(mismatched.get_ydata(), c["s_mismatched"])
        assert matched.get_label() == "matched v<ENV>"
        seed_min, seed_max, gain, zero = row[1].get_lines()
        np.testing.assert_array_equal(seed_min.get_ydata(), c["G_seed_min"])
        np.testing.assert_array_equal(seed_max.get_ydata(), c["G_seed_max"])
        np.testing.assert_array_equal(gain.get_xdata(), steps)
        np.testing.assert_array_equal(gain.get_ydata(), c["G"])
        assert list(zero.get_ydata()) == [0, 0]
        band = row[1].collections[0].get_paths()[0].vertices
        # the band's outline runs along the lower bound and back along the upper one
        for step, low, high in zip(steps, c["G_ci_low"], c["G_ci_high"]):
            ys = band[np.isclose(band[:, 0], step), 1]
            assert np.isclose(ys, low).any() and np.isclose(ys, high).any()
            assert ys.min() == pytest.approx(low) and ys.max() == pytest.approx(high)


TAB0 = "#1f77b4"


def model_axes(model: str, steps, s_m, s_mm, seed_min, seed_max, g, xscale: str = "linear") -> list[dict]:
    def line(label, y, colour, width=1.5, style="-"):
        return {"label": label, "x": steps, "y": y, "colour": colour, "width": width, "style": style, "marker": "None"}

    common = {"xlabel": "training step", "xscale": xscale, "yscale": "linear"}
    return [
        {
            "title": f"{model}: surprisal (mean over words and seeds)",
            "ylabel": "surprisal of v<LAN> (nats)",
            **common,
            "lines": [line("matched v<ENV>", s_m, "#1a7f37"), line("mismatched u<ENV>", s_mm, "#c0392b")],
            "bands": [],
            "legend": ["matched v<ENV>", "mismatched u<ENV>"],
        },
        {
            "title": f"{model}: G over training",
            "ylabel": "grounding gain G (nats)",
            **common,
            "lines": [
                line("seed min / max", seed_min, "#777777", 0.8, ":"),
                line("_child2", seed_max, "#777777", 0.8, ":"),
                line("G (mean over seeds)", g, TAB0),
                {
                    "label": "_child4",
                    "x": [0, 1],
                    "y": [0, 0],
                    "colour": "#555555",
                    "width": 0.8,
                    "style": "-",
                    "marker": "None",
                },
            ],  # fmt: skip
            "bands": [{"colour": TAB0, "alpha": 0.25, "edge_width": 0.0}],
            "legend": ["95 % band over words", "seed min / max", "G (mean over seeds)"],
        },
    ]


def test_curves_figure_described_in_full():
    fig = R.curves_figure(curve_frame())
    assert describe(fig) == {
        "size": (9.0, 5.2),  # 2.6 inches per model
        "axes": [
            *model_axes(
                "lstm", [0, 150, 300], [5.5, 3.0, 3.987654], [5.4, 3.9, 4.0], [-0.2, 0.8, 0.001], [0.0, 1.0, 0.02],
                [-0.1, 0.9, 0.012346],
            ),
            *model_axes(
                "tf", [0, 100, 200], [4.0, 3.111111, 2.123457], [4.0, 3.222222, 2.654322], [-0.01, 0.05, 0.4123],
                [0.01, 0.15, 0.6456], [0.0, 0.111111, 0.530865],
            ),
        ],
    }  # fmt: skip


def test_curves_figure_one_model_with_steps_over_two_decades_is_symlog():
    curve = curve_frame().query("model == 'tf'").assign(step=[10, 5000, 0])
    fig = R.curves_figure(curve)
    d = describe(fig)
    assert d["size"] == (9.0, 2.6)
    assert [(ax["xscale"], ax["lines"][0]["x"]) for ax in d["axes"]] == [
        ("symlog", [0, 10, 5000]),
        ("symlog", [0, 10, 5000]),
    ]
    assert [ax.get_xlim() for ax in fig.axes] == [pytest.approx((0, 5500.0))] * 2
    band = fig.axes[1].collections[0].get_paths()[0].vertices
    # band from the lower to the upper bound, in step order: (0: -0.02..0.02, 10: 0.02..0.21, 5000: 0.4567..0.6012)
    for step, low, high in [(0, -0.02, 0.02), (10, 0.02, 0.21), (5000, 0.4567, 0.6012)]:
        ys = band[np.isclose(band[:, 0], step), 1]
        assert ys.min() == pytest.approx(low) and ys.max() == pytest.approx(high)


# ---- data section


def test_targets_part_counts_passing_and_chosen_and_lists_the_targets():
    part = R.targets_part(candidates(), "transcripts")
    assert paras(part)[0].startswith(
        "Targets: 4 of the 5 candidate nouns have both forms at least min_count times in the transcripts; "
        "the 2 whose rarer form"
    )
    t = table(part, "Target nouns: occurrences of each form in the transcripts")
    assert t.values.tolist() == [["dog", "120", "130"], ["cat", "80", "90"]]
    assert list(t.columns) == ["word", "n_env", "n_lan"]


def test_targets_part_full_sentence_and_caption_name_the_source():
    part = R.targets_part(candidates(), "corpus")
    assert paras(part) == [
        "Targets: 4 of the 5 candidate nouns have both forms at least min_count times in the corpus; the 2 whose "
        "rarer form is most frequent are the targets (the paper: 100 CDI nouns with at least 100 of each form)."
    ]
    assert table(part, "Target nouns: occurrences of each form in the corpus").values.tolist() == [
        ["dog", "120", "130"], ["cat", "80", "90"]
    ]  # fmt: skip
    assert part.index("<p>") < part.index("<table>")


def test_data_section_summary_examples_and_counts():
    counts = {"turns": 1234, "files": 7, "files_without_child": 0, "child_turns": 99}
    part = R._data_section(counts, candidates(), eval_frame())
    assert not any(p.startswith("Warning") for p in paras(part))
    assert table(part, "Extracted transcripts").values.tolist() == [
        ["child_turns", "99"], ["files", "7"], ["files_without_child", "0"], ["turns", "1234"]
    ]  # fmt: skip
    examples = table(part, "Example contexts (matched)")
    assert examples.values.tolist() == [
        ["dog", "dog<ENV> see n0", "dog<LAN>"],
        ["cat", "cat<ENV> see n2", "cat<LAN>"],
        ["ball", "ball<ENV> see n3", "ball<LAN>"],
        ["cup", "cup<ENV> see n4", "cup<LAN>"],
        ["hat", "hat<ENV> see n5", "hat<LAN>"],
        ["shoe", "shoe<ENV> see n6", "shoe<LAN>"],
    ]
    assert any(p.startswith("8 held-out evaluation contexts") for p in paras(part))
    assert "Targets: 4 of the 5 candidate nouns" in paras(part)[0] + paras(part)[1]


def test_data_section_every_sentence_and_table_in_order():
    counts = {"turns": 12, "files": 4}  # no files_without_child: no warning
    part = R._data_section(counts, candidates(), eval_frame())
    assert paras(part) == [
        "Targets: 4 of the 5 candidate nouns have both forms at least min_count times in the transcripts; the 2 "
        "whose rarer form is most frequent are the targets (the paper: 100 CDI nouns with at least 100 of each form).",
        "8 held-out evaluation contexts (turns where v<ENV> precedes v<LAN>); they are removed from training. "
        "Mismatched contexts swap v<ENV> for another target's u<ENV>.",
    ]
    summary = table(part, "Extracted transcripts")
    assert list(summary.columns) == ["quantity", "value"]
    assert summary.values.tolist() == [["files", "4"], ["turns", "12"]]
    examples = table(part, "Example contexts (matched)")
    assert list(examples.columns) == ["word", "context", "target"]
    assert examples.iloc[0].tolist() == ["dog", "dog<ENV> see n0", "dog<LAN>"]
    assert table(part, "Target nouns: occurrences of each form in the transcripts").shape == (2, 3)
    order = [
        part.index("Extracted transcripts"),
        part.index("Targets: 4"),
        part.index("8 held-out"),
        part.index("Example contexts"),
    ]
    assert order == sorted(order)
    assert part.count("\n<table>") + part.startswith("<table>") == 3 and "\n<p>Targets" in part


def test_data_section_warns_from_one_transcript_without_child_speech():
    counts = {"files": 7, "files_without_child": 1}
    warning = paras(R._data_section(counts, candidates(), eval_frame()))[0]
    assert warning.startswith("Warning: 1 of the 7 transcripts have no child speech")
    assert '<p class="bad">Warning: 1 of the 7' in R._data_section(counts, candidates(), eval_frame())


def test_data_section_warning_sentence_in_full_and_first():
    counts = {"files": 9, "files_without_child": 2}
    part = R._data_section(counts, candidates(), eval_frame())
    assert part.startswith('<p class="bad">')
    assert paras(part)[0] == (
        "Warning: 2 of the 9 transcripts have no child speech (no *CHI: line): check that they are the "
        "transcripts meant, and that the child is coded CHI."
    )
    assert len(paras(part)) == 3


# ---- gain sections: natural turns, templates, the word rule


def test_seed_table_mean_over_words_at_each_seeds_own_last_checkpoint():
    natural = gain_rows(
        {
            ("tf", 0, 10): {"a": [9.0], "b": [9.0]},
            ("tf", 0, 20): {"a": [1.0, 2.0, 3.0], "b": [6.0]},  # G(a) = 2, G(b) = 6: mean over words 4
            ("tf", 1, 10): {"a": [0.5], "b": [1.5]},  # seed 1 stopped at 10: 1
            ("lstm", 0, 5): {"a": [7.0], "b": [-1.0]},  # 3
            ("lstm", 0, 1): {"a": [100.0], "b": [100.0]},
        }
    )
    template = gain_rows(
        {
            ("tf", 0, 20): {"a": [0.25], "b": [0.75]},  # 0.5
            ("tf", 1, 10): {"a": [2.0, 4.0], "b": [0.0]},  # G(a) = 3, G(b) = 0: 1.5 (not 2 over rows)
            ("lstm", 0, 5): {"a": [-2.0], "b": [1.0]},  # -0.5
        }
    )
    got = R.seed_table(natural, template)
    assert list(got.columns) == ["model", "seed", "template G", "natural G"]
    by = got.set_index(["model", "seed"])
    assert by.to_dict("index") == {
        ("lstm", 0): {"template G": -0.5, "natural G": 3.0},
        ("tf", 0): {"template G": 0.5, "natural G": 4.0},
        ("tf", 1): {"template G": 1.5, "natural G": 1.0},
    }


def test_seed_table_keeps_each_models_seeds_apart():
    def rows(values):
        return pd.DataFrame(
            [
                dict(model=m, seed=s, step=t, word=w, s_matched=1.0, s_mismatched=1.0 + g, gain=g)
                for (m, s, t, w), g in values.items()
            ]
        )

    # seed 0 of tf stops at step 9, seed 0 of lstm at step 3: the last step is per (model, seed)
    natural = rows(
        {("tf", 0, 9, "a"): 2.0, ("tf", 0, 3, "a"): 50.0, ("lstm", 0, 3, "a"): 1.0, ("lstm", 0, 1, "a"): 7.0}
    )
    # lstm's template G over three words 8, 6 and 7.5: mean 7.1666... (the median would be 7.5)
    template = rows(
        {("tf", 0, 9, "a"): 4.0, ("lstm", 0, 3, "a"): 8.0, ("lstm", 0, 3, "b"): 6.0, ("lstm", 0, 3, "c"): 7.5}
    )
    got = R.seed_table(natural, template)
    assert got.to_dict("list") == {
        "model": ["lstm", "tf"],
        "seed": [0, 0],
        "template G": [pytest.approx(21.5 / 3), 4.0],
        "natural G": [1.0, 2.0],
    }
    assert got.index.tolist() == [0, 1]


def test_gain_section_states_rule_and_shows_final_and_every_checkpoint(figures):
    part = R.gain_section(curve_frame(), rule="G(v) = my rule", by="setting")
    assert paras(part)[0] == (
        "G(v) = my rule; p: one-sided sign-flip test over words of G(v) > 0, G(v) averaged over seeds."
    )
    ((fig, alt),) = figures
    assert alt == "surprisal and grounding gain over training per setting"
    assert len(fig.axes) == 4
    final = table(part, "Final checkpoint")
    assert list(final.columns) == R.FINAL_COLUMNS
    assert final.values.tolist() == [
        ["lstm", "300", "2", "3", "3.9877", "4.0000", "0.0123", "0.0010", "0.0200", "0.0100", "no"],
        ["tf", "200", "2", "3", "2.1235", "2.6543", "0.5309", "0.4123", "0.6456", "0.0100", "yes"],
    ]
    every = table(details(part, "Every checkpoint"), None)
    assert list(every.columns) == [c for c in CURVE_COLUMNS if c not in ("n_seeds", "n_words")]
    assert len(every) == 6
    assert every.iloc[1].tolist() == [
        "tf", "200", "2.1235", "2.6543", "0.5309", "0.4123", "0.6456", "0.4567", "0.6012", "0.0100"
    ]  # fmt: skip
    assert "Every checkpoint" in part


def test_gain_section_defaults_natural_rule_by_architecture(figures):
    part = R.gain_section(curve_frame(), columns=["model", "G"])
    assert paras(part)[0].startswith(R.TEXT_GAIN + "; p:")
    assert figures[0][1].endswith("per architecture")
    assert table(part, "Final checkpoint").values.tolist() == [["lstm", "0.0123"], ["tf", "0.5309"]]


def test_gain_section_parts_joined_by_newlines_in_order(figures):
    part = R.gain_section(curve_frame())
    lines = part.split("\n")
    assert len(lines) == 5
    assert lines[0].startswith("<p>G(v) = mean over contexts") and lines[1].startswith("<img alt=")
    assert 'id="plot-natural-turn-gain-per-architecture"' in lines[2]  # G's interactive twin
    # one series of G per model, over its steps in order; hover names the grouping and G's unit
    assert [(t["name"], t["x"], t["y"]) for t in traces(lines[2])] == [
        ("lstm", [0, 150, 300], [-0.1, 0.9, 0.0123456]),
        ("tf", [0, 100, 200], [0.0, 0.1111111, 0.5308649]),
    ]
    hover = "architecture lstm<br>step %{x}<br>grounding gain G (nats) %{y:.4g}<extra></extra>"
    assert traces(lines[2])[0]["hovertemplate"] == hover
    assert lines[3].startswith("<table><caption>Final checkpoint</caption>")
    assert lines[4].startswith("<details><summary>Every checkpoint</summary><table><thead>")
    assert lines[4].endswith("</table></details>")
    assert paras(part)[0] == (
        "G(v) = mean over contexts and mismatches of s(v<LAN> | u<ENV>) - s(v<LAN> | v<ENV>); p: one-sided "
        "sign-flip test over words of G(v) > 0, G(v) averaged over seeds."
    )
    ((fig, alt),) = figures
    assert alt == "surprisal and grounding gain over training per architecture"
    assert [ax.get_title() for ax in fig.axes][::2] == [
        "lstm: surprisal (mean over words and seeds)",
        "tf: surprisal (mean over words and seeds)",
    ]


def test_template_section_counts_templates_and_shows_seed_table(figures):
    seeds = pd.DataFrame(
        {"model": ["tf", "tf"], "seed": [0, 1], "template G": [0.123456, 2.0], "natural G": [1.0, -0.5]}
    )
    part = R.template_section(templates_frame(), curve_frame(), seeds)
    assert paras(part)[0].startswith("2 carrier templates, held out of training")
    assert paras(part)[1].startswith(R.TEMPLATE_GAIN + "; p:")
    assert [alt for _, alt in figures] == ["surprisal and grounding gain over training per architecture"]
    assert table(part, "G per architecture and seed, last checkpoint").values.tolist() == [
        ["tf", "0", "0.1235", "1.0000"], ["tf", "1", "2.0000", "-0.5000"]
    ]  # fmt: skip
    assert table(details(part, "Templates"), None).values.tolist() == [
        ["t1", "a <unk> dog<ENV>", "1", "ours"], ["t2", "look dog<ENV>", "0", "paper"]
    ]  # fmt: skip
    assert table(part, "Final checkpoint").iloc[1, 6] == "0.5309"


def test_template_section_sentences_and_order(figures):
    seeds = pd.DataFrame({"model": ["tf"], "seed": [0], "template G": [0.5], "natural G": [0.25]})
    part = R.template_section(templates_frame(), curve_frame(), seeds)
    assert paras(part) == [
        "2 carrier templates, held out of training (the templates stage refuses one whose context occurs in the "
        "training turns), each read with every target in its environment slot; the model predicts v<LAN> right "
        "after the speech frame.",
        "G(v) = mean over templates and over every other target u != v of s(v<LAN> | u<ENV>) - s(v<LAN> | v<ENV>), "
        "the paper's definition on held-out carrier templates; p: one-sided sign-flip test over words of G(v) > 0, "
        "G(v) averaged over seeds.",
    ]
    shown = table(details(part, "Templates"), None)
    assert list(shown.columns) == ["template", "context (first target)", "<unk> tokens", "source"]
    lines = part.split("\n")
    assert lines[0].startswith("<p>2 carrier") and lines[1].startswith("<p>G(v) = mean over templates")
    assert lines[-2].startswith("<table><caption>G per architecture and seed, last checkpoint</caption>")
    assert lines[-1].startswith("<details><summary>Templates</summary><table>") and lines[-1].endswith("</details>")
    assert [alt for _, alt in figures] == ["surprisal and grounding gain over training per architecture"]
    # its interactive plot's id differs from the natural-turn section's on the same page
    assert part.count('id="plot-template-gain-per-architecture"') == 1


def test_template_section_counts_three_templates():
    t = pd.concat([templates_frame(), templates_frame().assign(template="t0")], ignore_index=True)
    seeds = pd.DataFrame({"model": ["tf"], "seed": [0], "template G": [0.5], "natural G": [0.25]})
    part = R.template_section(t, curve_frame().query("model == 'tf'"), seeds)
    assert paras(part)[0].startswith("3 carrier templates, held out of training")
    assert table(details(part, "Templates"), None)["template"].tolist() == ["t0", "t1", "t2"]


def test_rule_section_names_the_run_and_shows_g_to_four_places():
    rules = pd.DataFrame({"measure": ["template", "natural"], "rule": ["targets only", "all"], "G": [0.123456, -1.5]})
    part = R.rule_section(rules, "tf seed 3")
    assert paras(part)[0].startswith("tf seed 3, trained twice with the same targets")
    assert table(part, "G under each word rule").values.tolist() == [
        ["template", "targets only", "0.1235"], ["natural", "all", "-1.5000"]
    ]  # fmt: skip


def test_rule_section_sentence_in_full():
    rules = pd.DataFrame({"measure": ["natural"], "G": [0.25]})
    part = R.rule_section(rules, "tf seed 1")
    assert paras(part) == [
        "tf seed 1, trained twice with the same targets, held-out turns, templates and settings: under the paper's "
        "rule (only the target nouns have <ENV>/<LAN> forms) and with every environment-tier word marked w<ENV> and "
        "every spoken word w<LAN> (env_marking: all, the rule this project used before). Mean G(v) over words at "
        "the last checkpoint."
    ]
    assert part.split("\n")[1] == table_html(rules)


def table_html(rules: pd.DataFrame) -> str:
    return H.table(rules, caption="G under each word rule", float_format="{:.4f}")


def test_an_infinite_surprisal_prints_as_inf_in_every_table(figures):
    # a target of probability 0 in float32 has surprisal inf: the tables print it as "inf", in lower case
    curve = curve_frame()
    curve.loc[curve["step"] == 300, ["s_mismatched", "G"]] = np.inf
    part = R.gain_section(curve)
    assert table(part, "Final checkpoint").iloc[0].tolist()[4:7] == ["3.9877", "inf", "inf"]
    every = table(details(part, "Every checkpoint"), None)
    assert every.iloc[4].tolist()[:5] == ["lstm", "300", "3.9877", "inf", "inf"]
    seeds = pd.DataFrame({"model": ["tf"], "seed": [0], "template G": [np.inf], "natural G": [-np.inf]})
    shown = table(
        R.template_section(templates_frame(), curve_frame(), seeds), "G per architecture and seed, last checkpoint"
    )
    assert shown.values.tolist() == [["tf", "0", "inf", "-inf"]]
    rules = pd.DataFrame({"measure": ["natural"], "G": [np.inf]})
    assert table(R.rule_section(rules, "x"), "G under each word rule").values.tolist() == [["natural", "inf"]]


# ---- the page


def page_inputs() -> dict:
    natural = curve_frame()
    template = curve_frame().assign(G=curve_frame()["G"] + 10.0)  # every template G differs from the natural one
    return dict(
        counts={"files": 3, "files_without_child": 0, "turns": 42},
        targets=candidates(),
        eval_set=eval_frame(),
        curve=natural,
        mechanisms=[("Mechanism one", "<p>first mech</p>"), ("Mechanism two", "<p>second mech</p>")],
        provenance={"git_revision": "abc123", "seeds": [0, 1], "data_hashes": {"x.parquet": "ff"}, "params": {"a": 1}},
        env_marking="targets",
        templates=templates_frame(),
        template_curve=template,
        seed_gains=pd.DataFrame({"model": ["tf"], "seed": [0], "template G": [7.25], "natural G": [0.5]}),
        rules=(pd.DataFrame({"measure": ["natural"], "rule": ["all"], "G": [0.25]}), "lstm seed 9"),
    )


def test_grounding_page_sections_in_order_with_their_own_curves(figures):
    page = R.grounding_page(**page_inputs())
    s = sections(page)
    assert list(s) == [
        "Data",
        "Template grounding: every mismatch",
        "Natural-turn grounding",
        "Word rule: target nouns only, or every word (ablation)",
        "Mechanism one",
        "Mechanism two",
        "Provenance",
    ]
    assert table(s["Data"], "Extracted transcripts").values.tolist() == [
        ["files", "3"], ["files_without_child", "0"], ["turns", "42"]
    ]  # fmt: skip
    assert table(s["Template grounding: every mismatch"], "Final checkpoint")["G"].tolist() == ["10.0123", "10.5309"]
    assert table(s["Natural-turn grounding"], "Final checkpoint")["G"].tolist() == ["0.0123", "0.5309"]
    assert paras(s["Natural-turn grounding"])[0].startswith(R.TEXT_GAIN)
    assert "7.2500" in s["Template grounding: every mismatch"]
    assert paras(s["Word rule: target nouns only, or every word (ablation)"])[0].startswith("lstm seed 9,")
    assert s["Mechanism two"] == "<p>second mech</p>"
    assert "Git revision: abc123" in s["Provenance"]
    intro = paras(page.split("<nav>")[0])[0]
    assert intro.startswith("Target nouns appear as environment tokens")
    assert intro.endswith("(Wu et al., arXiv 2510.13796).")
    assert "(env_marking: targets). A model is grounded when" in intro


def test_grounding_page_title_intro_and_section_bodies(figures):
    inputs = page_inputs()
    page = R.grounding_page(**inputs)
    assert "<title>Symbol grounding from child-directed speech</title>" in page
    assert "<h1>Symbol grounding from child-directed speech</h1>" in page
    intro = paras(page.split("<nav>")[0])[0]
    assert intro == (
        "Target nouns appear as environment tokens (v<ENV>, from %act/%sit/%gpx tiers) and as speech tokens "
        "(v<LAN>); every other word is one plain token shared by both channels, as in the paper's example "
        "(env_marking: targets). A model is grounded when v<ENV> in the context makes v<LAN> less surprising than "
        "another word's u<ENV> does (Wu et al., arXiv 2510.13796)."
    )
    s = sections(page)
    assert s["Data"] == R._data_section(inputs["counts"], inputs["targets"], inputs["eval_set"])
    n = len(figures)
    assert s["Template grounding: every mismatch"] == R.template_section(
        inputs["templates"], inputs["template_curve"], inputs["seed_gains"]
    )
    assert s["Natural-turn grounding"] == R.gain_section(inputs["curve"])
    assert s["Word rule: target nouns only, or every word (ablation)"] == R.rule_section(*inputs["rules"])
    assert "Data hash" in s["Provenance"] or "x.parquet" in s["Provenance"]
    assert len(figures) == n + 2
    # the template figure is drawn from the template curve, the natural one from the natural curve
    template_fig, natural_fig = figures[0][0], figures[1][0]
    assert template_fig.axes[3].get_lines()[2].get_ydata().tolist() == pytest.approx([10.0, 10.1111111, 10.5308649])
    assert natural_fig.axes[3].get_lines()[2].get_ydata().tolist() == pytest.approx([0.0, 0.1111111, 0.5308649])


def test_grounding_page_intro_under_every_word_marking(figures):
    page = R.grounding_page(**{**page_inputs(), "env_marking": "all"})
    intro = paras(page.split("<nav>")[0])[0]
    assert intro.startswith("Every word of an environment tier is an environment token (w<ENV>)")
    assert "the paper marks only the target nouns. A model is grounded" in intro


def test_grounding_page_intro_every_word_in_full(figures):
    page = R.grounding_page(**{**page_inputs(), "env_marking": "all"})
    intro = paras(page.split("<nav>")[0])[0]
    assert intro == (
        "Every word of an environment tier is an environment token (w<ENV>) and every spoken word a speech token "
        "(w<LAN>): env_marking: all, our ablation; the paper marks only the target nouns. A model is grounded when "
        "v<ENV> in the context makes v<LAN> less surprising than another word's u<ENV> does (Wu et al., "
        "arXiv 2510.13796)."
    )

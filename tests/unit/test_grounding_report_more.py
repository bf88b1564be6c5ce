"""reports/grounding.html, more by value: the bootstrap band and per-checkpoint gains from hand-built gain
rows, the curves figure as data (describe), and every sentence / caption / default the page states."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from figures import describe
from test_grounding_report_values import (
    candidates,
    curve_frame,
    details,
    eval_frame,
    page_inputs,
    paras,
    sections,
    table,
    templates_frame,
)
from test_interactive import traces

from emergence.core.report import html as H
from emergence.studies.grounding import report as R
from emergence.studies.grounding.gain import sign_flip_test

# --- the bootstrap band -----------------------------------------------------------------------------


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


# --- gain per checkpoint ----------------------------------------------------------------------------


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


# --- final table and metrics ------------------------------------------------------------------------


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


def test_plot_table_values_are_g_not_another_column():
    got = R.plot_table(curve_frame())
    assert got.columns.name == "model"
    assert got.to_dict("list") == {
        "step": [0, 100, 150, 200, 300],
        "lstm": pytest.approx([-0.1, np.nan, 0.9, np.nan, 0.0123456], nan_ok=True),
        "tf": pytest.approx([0.0, 0.1111111, np.nan, 0.5308649, np.nan], nan_ok=True),
    }


# --- the curves figure as data ----------------------------------------------------------------------

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


# --- sections ---------------------------------------------------------------------------------------


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


def test_data_section_warning_sentence_in_full_and_first():
    counts = {"files": 9, "files_without_child": 2}
    part = R._data_section(counts, candidates(), eval_frame())
    assert part.startswith('<p class="bad">')
    assert paras(part)[0] == (
        "Warning: 2 of the 9 transcripts have no child speech (no *CHI: line): check that they are the "
        "transcripts meant, and that the child is coded CHI."
    )
    assert len(paras(part)) == 3


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


def test_grounding_page_intro_every_word_in_full(figures):
    page = R.grounding_page(**{**page_inputs(), "env_marking": "all"})
    intro = paras(page.split("<nav>")[0])[0]
    assert intro == (
        "Every word of an environment tier is an environment token (w<ENV>) and every spoken word a speech token "
        "(w<LAN>): env_marking: all, our ablation; the paper marks only the target nouns. A model is grounded when "
        "v<ENV> in the context makes v<LAN> less surprising than another word's u<ENV> does (Wu et al., "
        "arXiv 2510.13796)."
    )


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

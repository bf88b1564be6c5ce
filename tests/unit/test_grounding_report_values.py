"""reports/grounding.html and its metrics JSON, by value: every number the page or the JSON states is
traced back to a hand-built curve / gain table whose rows differ, so a wrong row, checkpoint, seed,
column, aggregation or rounding shows as a wrong number."""

from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd
import pytest

from emergence.core.report import html as H
from emergence.studies.grounding import report as R

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


# --- reading the HTML back -----------------------------------------------------------------------

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


# --- metrics JSON and plots CSV -------------------------------------------------------------------


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


def test_final_table_grounded_needs_positive_gain_and_p_below_one_percent():
    curve = curve_frame()
    final = R.final_table(curve).set_index("model")["grounded (G > 0, p < 0.01)"]
    assert final.to_dict() == {"tf": "yes", "lstm": "no"}  # lstm: p = 0.01 exactly
    zero = curve.assign(G=np.where(curve["step"] == 200, 0.0, curve["G"]))
    assert R.final_table(zero).set_index("model").loc["tf", "grounded (G > 0, p < 0.01)"] == "no"


def test_plot_table_one_g_column_per_model_by_step():
    got = R.plot_table(curve_frame())
    assert list(got.columns) == ["step", "lstm", "tf"]
    assert got["step"].tolist() == [0, 100, 150, 200, 300]
    g = got.set_index("step")
    assert g.loc[200, "tf"] == 0.5308649 and g.loc[150, "lstm"] == 0.9 and g.loc[0, "lstm"] == -0.1
    assert np.isnan(g.loc[100, "lstm"]) and np.isnan(g.loc[300, "tf"])


# --- figure data ------------------------------------------------------------------------------------


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


# --- sections -------------------------------------------------------------------------------------


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


def test_targets_part_counts_passing_and_chosen_and_lists_the_targets():
    part = R.targets_part(candidates(), "transcripts")
    assert paras(part)[0].startswith(
        "Targets: 4 of the 5 candidate nouns have both forms at least min_count times in the transcripts; "
        "the 2 whose rarer form"
    )
    t = table(part, "Target nouns: occurrences of each form in the transcripts")
    assert t.values.tolist() == [["dog", "120", "130"], ["cat", "80", "90"]]
    assert list(t.columns) == ["word", "n_env", "n_lan"]


def eval_frame() -> pd.DataFrame:
    """Seven words (one more than the examples show), dog twice: its first context is the example."""
    words = ["dog", "dog", "cat", "ball", "cup", "hat", "shoe", "book"]
    contexts = [[w + "<ENV>", "see", f"n{i}"] for i, w in enumerate(words)]
    return pd.DataFrame({"word": words, "context": contexts})


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


def test_data_section_warns_from_one_transcript_without_child_speech():
    counts = {"files": 7, "files_without_child": 1}
    warning = paras(R._data_section(counts, candidates(), eval_frame()))[0]
    assert warning.startswith("Warning: 1 of the 7 transcripts have no child speech")
    assert '<p class="bad">Warning: 1 of the 7' in R._data_section(counts, candidates(), eval_frame())


def gain_rows(values: dict) -> pd.DataFrame:
    """Per-context gain rows from {(model, seed, step): {word: [gain per context]}}; s_matched = 1."""
    rows = [
        dict(model=m, seed=s, step=t, word=w, s_matched=1.0, s_mismatched=1.0 + g, gain=g)
        for (m, s, t), words in values.items()
        for w, gains in words.items()
        for g in gains
    ]
    return pd.DataFrame(rows)


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


def test_rule_section_names_the_run_and_shows_g_to_four_places():
    rules = pd.DataFrame({"measure": ["template", "natural"], "rule": ["targets only", "all"], "G": [0.123456, -1.5]})
    part = R.rule_section(rules, "tf seed 3")
    assert paras(part)[0].startswith("tf seed 3, trained twice with the same targets")
    assert table(part, "G under each word rule").values.tolist() == [
        ["template", "targets only", "0.1235"], ["natural", "all", "-1.5000"]
    ]  # fmt: skip


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


def test_grounding_page_intro_under_every_word_marking(figures):
    page = R.grounding_page(**{**page_inputs(), "env_marking": "all"})
    intro = paras(page.split("<nav>")[0])[0]
    assert intro.startswith("Every word of an environment tier is an environment token (w<ENV>)")
    assert "the paper marks only the target nouns. A model is grounded" in intro

"""The association page, its metrics JSON and plots CSV at values written down by hand.

Three runs (1 layer seed 0, 1 layer seed 3, 2 layers seed 0) whose cosines differ at every
checkpoint, so a wrong run, layer, step or aggregation changes a number below. Steps 1-4 are
epoch ends inside the window (2 steps per epoch); step 6 lies after it, with cosines that would
be the minimum if the window were ignored. Every expected value is read off the COS table by
eye (comments say how), not computed by the code under test.
"""

from __future__ import annotations

import html
import math
import re

import numpy as np
import pandas as pd
import pytest

from emergence.studies.assoc import report
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


def test_words_section_one_table_per_probe_in_the_order_given():
    got = tables(_words_section(words_frame()))
    assert [cap for cap, _, _ in got] == ["probe 'the': top tokens of its row", "probe '.': top tokens of its row"]
    assert all(head == ["rank", "W_O (learned)", "B"] for _, head, _ in got)
    assert got[0][2] == [["1", "park (0.0115)", "she (0.123)"], ["2", "garden (0.00494)", "mia (-0.000264)"]]
    assert got[1][2] == [["1", "she (1.5)", "park (10)"], ["2", "one (2e-05)", "the (0)"]]


PROVENANCE = {"git_revision": "abc123", "seeds": [0, 3], "data_hashes": {"a.parquet": "f00d"}, "params": {"k": 1}}


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


def test_paper_numbers_are_the_quoted_ones():
    # Im et al. (ICLR 2026) Table 2, BPE: W 0.999914, V 0.998800, W_O 0.997891; causal 5.349 / 5.350 / 5.352.
    assert report.PAPER_MIN_COSINE == {"bpe": {"W": 0.999914, "V": 0.9988, "W_O": 0.997891}}
    assert report.PAPER_CAUSAL["none"] == "5.349" and report.PAPER_CAUSAL["W"] == "5.350 (layer 0), 5.352 (layer 1)"
    assert report.THRESHOLD == BAR


def paragraphs(text: str) -> list[str]:
    return [html.unescape(p) for p in re.findall(r"<p>(.*?)</p>", text, re.S)]


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


def test_departure_steps_print_as_whole_numbers():
    (_, _, rows) = tables(_cosine_section(cosines_frame(), "word"))[1]
    assert rows[0][5] == "3"


def test_order_figure_draws_every_weight_of_a_four_layer_model():
    rows = [
        dict(n_layers=4, eta=eta, step=step, layer=layer, weight=w, rel_error=eta * step)
        for eta in (0.01, 0.02)
        for step in (4, 5)
        for layer, w in [(-1, "W_O")] + [(layer, w) for layer in range(4) for w in ("W", "V", "P")]
    ]
    by_eta, _ = order_figure(pd.DataFrame(rows)).axes
    assert len(by_eta.get_lines()) == 13

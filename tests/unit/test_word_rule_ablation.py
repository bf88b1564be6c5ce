"""The word-rule ablation (studies/grounding/marking.py) against values worked out by hand."""

from __future__ import annotations

import pandas as pd
import pytest
from refusals import refuses
from test_grounding_gain_definition import LN2, WORDS, model  # BITS there: -log2 p(v<LAN> | last env u)
from tiny_models import LastEnvLookup

from emergence.studies.grounding.marking import all_marked_inputs, default_word_gains, final_word_gains, rule_table
from emergence.studies.grounding.templates import Template


def test_all_marked_inputs_keep_targets_turns_and_context_positions():
    raw = pd.DataFrame(
        {"tokens": [["<MOT>", "holds<ENV>", "ball<ENV>", "a<LAN>", "ball<LAN>"], ["<CHI>", "cup<ENV>", "no<LAN>"]]},
        index=[5, 9],
    )
    eval_set = pd.DataFrame({"turn": [5], "word": ["ball"], "context": [["<MOT>", "holds", "ball<ENV>", "a"]]})
    table, vocab, eval_all = all_marked_inputs(raw, ["ball"], eval_set, min_token_count=1)
    assert table["tokens"].tolist() == raw["tokens"].tolist()  # extraction is all-marked already
    # the context is the same 4-token prefix of turn 5, now with every word marked
    assert eval_all["context"].tolist() == [["<MOT>", "holds<ENV>", "ball<ENV>", "a<LAN>"]]
    assert eval_set["context"].tolist() == [["<MOT>", "holds", "ball<ENV>", "a"]]  # the input is left alone
    assert {"holds<ENV>", "a<LAN>", "cup<ENV>", "no<LAN>"} <= set(vocab) and "holds" not in vocab


def test_final_word_gains_natural_and_template_by_hand():
    vocab = ["<unk>", "<MOT>", "<CHI>", "gives<ENV>", "the<ENV>", "look<LAN>"]
    vocab += [f"{w}{m}" for w in WORDS for m in ("<ENV>", "<LAN>")]
    index = {t: i for i, t in enumerate(vocab)}
    eval_set = pd.DataFrame(
        {
            "word": ["cup"],
            "context": [["<MOT>", "cup<ENV>", "look<LAN>"]],
            "others": [["ball", "dog"]],
        }
    )
    # the slot is the env frame's last target token, so template G(v) = mean_u BITS[u][v] - BITS[v][v]:
    #   ball (3 + 5) / 2 - 1 = 3; cup (4 + 3) / 2 - 3 = 0.5; dog (3 + 5) / 2 - 1 = 3 (bits)
    templates = [Template("t1", "MOT", "gives the {n}", "look", "test"), Template("t2", "CHI", "the {n}", "look", "x")]
    gains = final_word_gains(model(index), eval_set, templates, [], WORDS, index)
    template = gains[gains["measure"] == "template"].set_index("word")["gain"]
    assert template.to_dict() == pytest.approx({"ball": 3 * LN2, "cup": 0.5 * LN2, "dog": 3 * LN2}, abs=1e-6)
    natural = gains[gains["measure"] == "natural"].set_index("word")["gain"]
    assert natural.to_dict() == pytest.approx({"cup": 0.5 * LN2}, abs=1e-6)  # (4 + 3) / 2 - 3 bits


def test_template_gain_is_the_mean_over_templates():
    vocab = ["<unk>", "<MOT>", "gives<ENV>", "the<ENV>", "look<LAN>"]
    vocab += [f"{w}{m}" for w in WORDS for m in ("<ENV>", "<LAN>")]
    index = {t: i for i, t in enumerate(vocab)}
    lookup = model(index)
    # the<ENV> also counts as an environment token: in "{n} the" it comes last, so that template reads
    # the same row whatever u is in the slot and its gain is 0 for every word
    lookup = LastEnvLookup(lookup.table.detach().clone(), [*lookup.env_ids.tolist(), index["the<ENV>"]])
    eval_set = pd.DataFrame({"word": ["cup"], "context": [["<MOT>", "cup<ENV>", "look<LAN>"]], "others": [["dog"]]})
    templates = [
        Template("t1", "MOT", "gives the {n}", "look", "test"),
        Template("t2", "MOT", "the {n}", "look", "test"),
        Template("t3", "MOT", "{n} the", "look", "test"),
    ]
    gains = final_word_gains(lookup, eval_set, templates, [], WORDS, index)
    template = gains[gains["measure"] == "template"].set_index("word")["gain"]
    # per template (bits): t1 and t2 give ball 3, cup 0.5, dog 3 (as above), t3 gives 0: the mean of the three
    expected = {w: (g + g + 0.0) / 3 * LN2 for w, g in {"ball": 3.0, "cup": 0.5, "dog": 3.0}.items()}
    assert template.to_dict() == pytest.approx(expected, abs=1e-6)


def test_default_gains_are_the_runs_last_checkpoint_and_the_table_pairs_the_rules():
    natural = pd.DataFrame(
        {
            "model": ["t", "t", "t", "m"],
            "seed": [0, 0, 0, 0],
            "step": [10, 20, 20, 20],
            "word": ["ball", "ball", "cup", "ball"],
            "s_matched": [1.0, 1.0, 1.0, 1.0],
            "s_mismatched": [9.0, 2.0, 4.0, 7.0],
            "gain": [8.0, 1.0, 3.0, 6.0],
        }
    )
    template = natural.assign(gain=natural["gain"] * 10)
    default = default_word_gains(natural, template, "t", 0)
    # step 20 of t seed 0 only: ball 1, cup 3 (natural); 10, 30 (template)
    assert default.set_index(["measure", "word"])["gain"].to_dict() == {
        ("natural", "ball"): 1.0,
        ("natural", "cup"): 3.0,
        ("template", "ball"): 10.0,
        ("template", "cup"): 30.0,
    }
    # the columns final_word_gains gives the ablation run: the two rules are compared like with like
    assert sorted(default.columns) == sorted(["measure", "word", "s_matched", "s_mismatched", "gain"])
    ablation = pd.DataFrame({"measure": ["natural", "template"], "word": ["ball", "ball"], "gain": [0.5, 4.0]})
    table = rule_table(default, ablation)
    assert table.to_dict("records") == [
        {"measure": "natural", "rule": "targets (default)", "G": 2.0, "n_words": 2},
        {"measure": "template", "rule": "targets (default)", "G": 20.0, "n_words": 2},
        {"measure": "natural", "rule": "all (ablation)", "G": 0.5, "n_words": 1},
        {"measure": "template", "rule": "all (ablation)", "G": 4.0, "n_words": 1},
    ]
    with refuses("grounding_marking", "default run t seed 3"):
        default_word_gains(natural, template, "t", 3)

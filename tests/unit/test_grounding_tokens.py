"""Study G's token data, value by value: the word rule, target choice and vocabulary from a hand-counted
turn table, the held-out evaluation set and its mismatched targets, the parameter checks and vocabulary
file errors with their full messages."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from refusals import assert_refused, key_of, refuses, refuses_key

from emergence.core.config import from_dict
from emergence.studies.grounding.tokens import (
    EvalParams,
    GroundingRuns,
    VocabParams,
    build_vocab,
    encode,
    env,
    evaluation_set,
    evaluation_turns,
    lan,
    mark,
    marked_table,
    model_entry,
    read_vocab,
    select_targets,
    target_vocabulary,
    token_counts,
)

# ---- the word rule and the targets

# dog<ENV> x3, dog<LAN> x2; cup<ENV> x2, cup<LAN> x4; ball<ENV> x1, ball<LAN> x5; run<ENV> x2, run<LAN> x1
TURNS = pd.DataFrame(
    {
        "file": ["a", "a", "b"],
        "tokens": [
            ["<MOT>", "dog<ENV>", "cup<ENV>", "run<ENV>", "look<LAN>", "dog<LAN>", "cup<LAN>", "ball<LAN>"],
            ["<CHI>", "dog<ENV>", "ball<ENV>", "run<ENV>", "dog<LAN>", "cup<LAN>", "ball<LAN>", "run<LAN>"],
            ["<MOT>", "dog<ENV>", "cup<ENV>", "cup<LAN>", "cup<LAN>", "ball<LAN>", "ball<LAN>", "ball<LAN>"],
        ],
    },
    index=[4, 7, 9],
)


def test_word_forms_and_counts():
    assert env("dog") == "dog<ENV>" and lan("dog") == "dog<LAN>"
    assert token_counts([["a", "b"], [], ["b", "b"]]) == Counter({"b": 3, "a": 1})
    assert token_counts([]) == Counter()


def test_encode_reads_unknown_tokens_as_unk():
    assert encode(["b", "zz", "a", "<unk>"], {"<unk>": 0, "a": 1, "b": 2}) == [2, 0, 1, 0]
    assert encode([], {"a": 1}) == []


def test_mark_keeps_only_the_targets_two_forms():
    tokens = ["<MOT>", "dog<ENV>", "run<ENV>", "look<LAN>", "dog<LAN>", "plain", "ENV", "<ENV>"]
    assert mark(tokens, {"dog"}, "targets") == ["<MOT>", "dog<ENV>", "run", "look", "dog<LAN>", "plain", "ENV", ""]
    assert mark(tokens, set(), "targets") == ["<MOT>", "dog", "run", "look", "dog", "plain", "ENV", ""]
    assert mark(tokens, {"dog"}, "all") == tokens and mark(tokens, {"dog"}, "all") is not tokens
    with refuses("env_marking: ", "'some'", "['targets', 'all']"):
        mark(tokens, {"dog"}, "some")


def test_marked_table_applies_the_rule_to_each_row():
    table = marked_table(TURNS, ["dog"], "targets")
    assert table["tokens"].tolist()[0] == ["<MOT>", "dog<ENV>", "cup", "run", "look", "dog<LAN>", "cup", "ball"]
    assert table["tokens"].tolist()[2] == ["<MOT>", "dog<ENV>", "cup", "cup", "cup", "ball", "ball", "ball"]
    assert table.index.tolist() == [4, 7, 9] and table["file"].tolist() == ["a", "a", "b"]
    assert marked_table(TURNS, ["dog"], "all")["tokens"].tolist() == TURNS["tokens"].tolist()


def test_select_targets_rank_by_the_rarer_form_then_spelling():
    counts = token_counts(TURNS["tokens"])
    # rarer forms: dog min(3, 2) = 2, cup min(2, 4) = 2, ball min(1, 5) = 1, run min(2, 1) = 1
    assert select_targets(counts, ["run", "dog", "ball", "cup", "dog"], 4, 1) == ["cup", "dog", "ball", "run"]
    assert select_targets(counts, ["run", "dog", "ball", "cup"], 2, 2) == ["cup", "dog"]  # exactly min_count
    assert select_targets(counts, ["ball", "run", "dog"], 1, 1) == ["dog"]
    # how many passed of how many candidates, the bound, and how many n_words asks for
    with refuses("grounding_vocab.n_words: ", "2 of the 4", "min_count=2", "3 requested"):
        select_targets(counts, ["run", "dog", "ball", "cup", "dog"], 3, 2)
    with refuses("0 of the 1", "min_count=3") as err:
        select_targets(counts, ["dog"], 1, 3, "vocab")
    assert key_of(str(err.value)) == "vocab.n_words"


# ---- vocabulary


def test_vocab_orders_by_count_then_spelling_and_keeps_target_forms():
    counts = Counter({"b": 3, "a": 3, "c": 2, "d": 1, "x<ENV>": 1})
    assert build_vocab(counts, ["x"], 2) == ["<unk>", "a", "b", "c", "x<ENV>", "x<LAN>"]
    assert build_vocab(counts, [], 1) == ["<unk>", "a", "b", "c", "d", "x<ENV>"]
    assert build_vocab(counts, [], 3) == ["<unk>", "a", "b"]


def test_target_vocabulary_counts_candidates_and_marks_the_rest():
    p = VocabParams(n_words=2, min_count=2, min_token_count=2, env_marking="targets")
    targets, vocab, stats = target_vocabulary(TURNS, ["run", "dog", "ball", "cup", "dog"], p, "vocab")
    assert targets == ["cup", "dog"]
    # after the rule: ball x6, cup<LAN> x4, dog<ENV> x3, run x3, <MOT> x2, cup<ENV> x2, dog<LAN> x2; once: <CHI>, look
    assert vocab == ["<unk>", "ball", "cup<LAN>", "dog<ENV>", "run", "<MOT>", "cup<ENV>", "dog<LAN>"]
    expected = pd.DataFrame(
        {
            "word": ["run", "dog", "ball", "cup"],
            "n_env": np.array([2, 3, 1, 2], dtype=np.int64),
            "n_lan": np.array([1, 2, 5, 4], dtype=np.int64),
            "passes": [False, True, False, True],
            "target": [False, True, False, True],
        }
    )
    pd.testing.assert_frame_equal(stats, expected)
    all_marked = VocabParams(n_words=1, min_count=1, min_token_count=3, env_marking="all")
    targets, vocab, _ = target_vocabulary(TURNS, ["ball", "run"], all_marked, "vocab")
    assert targets == ["ball"] and vocab == ["<unk>", "ball<LAN>", "cup<LAN>", "dog<ENV>", "ball<ENV>"]
    with refuses("0 of the 2") as err:
        target_vocabulary(TURNS, ["ball", "run"], VocabParams(n_words=2, min_count=2), "vocab")
    assert key_of(str(err.value)) == "vocab.n_words"


def test_read_vocab_errors_name_the_file(tmp_path):
    path = tmp_path / "vocab.json"
    path.write_text(json.dumps({"targets": ["dog"], "vocab": ["<unk>", "dog<ENV>"], "env_marking": "all"}))
    assert read_vocab(path) == (["dog"], ["<unk>", "dog<ENV>"], "all")
    path.write_text(json.dumps({"targets": ["dog"], "vocab": ["<unk>"], "env_marking": "some"}))
    with refuses(f"{path}: ", "env_marking", "'some'", "['targets', 'all']"):
        read_vocab(path)
    with refuses(f"{tmp_path / 'missing.json'}: ", "not found", "grounding_vocab"):  # and the stage to run
        read_vocab(tmp_path / "missing.json")
    path.write_text(json.dumps({"targets": ["dog"]}))
    with refuses(f"{path}: ", "KeyError: 'vocab'"):
        read_vocab(path)


# ---- the evaluation set


def eval_turns() -> pd.DataFrame:
    rows = [
        ["ball<ENV>", "x", "ball<LAN>"],
        ["cup<ENV>", "x", "x", "cup<LAN>"],
        ["hat<ENV>", "hat<LAN>"],
        ["cup<ENV>", "cup<LAN>"],
    ]
    return pd.DataFrame({"file": "a", "tokens": rows}, index=[10, 11, 12, 13])


def test_evaluation_set_draws_other_targets_for_each_context():
    targets = ["ball", "cup", "hat"]
    table = evaluation_set(eval_turns(), targets, EvalParams(max_per_word=5, n_mismatched=2), "e", "src")
    assert table["turn"].tolist() == [10, 11, 13, 12] and table["word"].tolist() == ["ball", "cup", "cup", "hat"]
    assert [list(c) for c in table["context"]] == [
        ["ball<ENV>", "x"],
        ["cup<ENV>", "x", "x"],
        ["cup<ENV>"],
        ["hat<ENV>"],
    ]
    assert table["others"].tolist() == [["cup", "hat"], ["ball", "hat"], ["ball", "hat"], ["ball", "cup"]]
    for seed in range(8):  # one seed alone would match an unseeded draw 1 time in 16
        one = evaluation_set(eval_turns(), targets, EvalParams(max_per_word=5, n_mismatched=1, seed=seed), "e", "src")
        rng = np.random.default_rng(seed)
        assert one["others"].tolist() == [[str(rng.choice([u for u in targets if u != w]))] for w in one["word"]]


def test_evaluation_set_keeps_max_per_word_contexts_drawn_by_its_seed():
    turns = pd.DataFrame({"file": "a", "tokens": [["cup<ENV>", "cup<LAN>"]] * 6 + [["hat<ENV>", "hat<LAN>"]]})
    picked = {}
    for seed in range(4):
        table = evaluation_set(turns, ["cup", "hat"], EvalParams(max_per_word=2, n_mismatched=1, seed=seed), "e", "s")
        assert table["word"].tolist() == ["cup", "cup", "hat"]  # 2 of cup's 6 contexts, hat's one
        assert table["turn"].tolist() == evaluation_turns(turns, ["cup", "hat"], 2, seed)["turn"].tolist()
        picked[seed] = tuple(table["turn"])
    assert len(set(picked.values())) > 1  # the seed decides which of cup's contexts


def test_evaluation_set_bounds():
    targets = ["ball", "cup", "hat"]
    with refuses("e.n_mismatched: ") as e:
        evaluation_set(eval_turns(), targets, EvalParams(n_mismatched=3), "e", "src")
    assert_refused([str(e.value)], "e.n_mismatched", 3, rule="at most 2")  # the other targets there are
    with refuses("'dog'", "1 targets") as e:  # the first target without a context, and how many lack one
        evaluation_set(eval_turns(), [*targets, "dog"], EvalParams(n_mismatched=1), "e", "src")
    assert key_of(str(e.value)) == "src"
    # max_len: the ball context's v<LAN> sits at position 2, eligible at max_len 2 and not at 1
    two, one = (2, "t.seq_len"), (1, "t.seq_len")
    assert len(evaluation_set(eval_turns(), ["ball", "hat"], EvalParams(n_mismatched=1), "e", "s", max_len=two)) == 2
    with refuses("t.seq_len: 1", "'ball'", "raise") as e:  # a longer context exists: the key to raise, not the table
        evaluation_set(eval_turns(), ["ball", "hat"], EvalParams(n_mismatched=1), "e", "s", max_len=one)
    assert key_of(str(e.value)) == "t.seq_len"


# ---- params


@pytest.mark.parametrize("key", ["n_words", "min_count", "min_token_count"])
def test_vocab_params_need_counts_of_at_least_one(key):
    assert getattr(from_dict(VocabParams, {key: 1}, "grounding_vocab"), key) == 1
    with refuses_key(f"grounding_vocab.{key}", 0):
        from_dict(VocabParams, {key: 0}, "grounding_vocab")


def test_vocab_params_need_a_known_marking():
    assert from_dict(VocabParams, {"env_marking": "all"}, "v").env_marking == "all"
    with refuses_key("v.env_marking", "some"):
        from_dict(VocabParams, {"env_marking": "some"}, "v")


@pytest.mark.parametrize("key", ["max_per_word", "n_mismatched"])
def test_eval_params_need_counts_of_at_least_one(key):
    assert getattr(from_dict(EvalParams, {key: 1}, "grounding_eval"), key) == 1
    with refuses_key(f"grounding_eval.{key}", 0):
        from_dict(EvalParams, {key: 0}, "grounding_eval")


def test_runs_need_distinct_models_and_seeds():
    runs = from_dict(GroundingRuns, {"models": ["a", "b"], "seeds": [0, 1]}, "runs")
    assert runs.names() == ["a_seed0", "a_seed1", "b_seed0", "b_seed1"]
    for models, seeds, key, value in [
        ([], [0], "runs.models", []),
        (["a", "a"], [0], "runs.models", ["a", "a"]),
        (["a"], [], "runs.seeds", []),
        (["a"], [1, 1], "runs.seeds", [1, 1]),
    ]:
        with refuses(f"{key}: ") as err:
            from_dict(GroundingRuns, {"models": models, "seeds": seeds}, "runs")
        assert_refused([str(err.value)], key, value, rule="distinct")


def test_model_entry_reads_the_arch_and_refuses_unknown_names():
    models = {"tf": {"arch": "transformer", "n_layers": 2}, "odd": ["x"], "bare": {"n_layers": 1}}
    assert model_entry(models, "tf") == ("transformer", {"n_layers": 2})
    assert models["tf"] == {"arch": "transformer", "n_layers": 2}  # the section itself is left whole
    have = "['bare', 'odd', 'tf']"  # the models there are
    for name, key, named in [
        ("t_f", "grounding_models.t_f", ["'t_f'", "lower-case"]),
        ("lstm", "grounding_models.lstm", [have]),
        ("odd", "grounding_models.odd", ["mapping", "['x']"]),  # there, but no model
        ("bare", "grounding_models.bare.arch", ["None", "['transformer', 'mamba2', 'lstm']"]),
    ]:
        with refuses(*named) as err:
            model_entry(models, name)
        assert key_of(str(err.value)) == key
    with refuses("'Tf'", "lower-case") as err:
        model_entry(models, "Tf", "zoo")
    assert key_of(str(err.value)) == "zoo.Tf"

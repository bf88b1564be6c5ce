"""Template grounding: the shipped carrier file, the word rule in templates, held-out checks, and G over
every mismatch checked against a slow loop and against values worked out by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from refusals import refuses

from emergence.core.models.registry import build_model
from emergence.studies.grounding.gain import last_log_probs, target_surprisal
from emergence.studies.grounding.nouns import read_nouns
from emergence.studies.grounding.templates import (
    Template,
    read_templates,
    template_contexts,
    template_gain_table,
    template_surprisals,
)
from emergence.studies.grounding.tokens import encode

CDI_NOUNS = read_nouns(Path(__file__).parents[2] / "resources" / "grounding" / "nouns.tsv")  # the shipped list

pytestmark = pytest.mark.usefixtures("one_thread")

SHIPPED = Path(__file__).parents[2] / "resources" / "grounding" / "templates.tsv"
HEADER = "id\tspeaker\tenv\tspeech\tsource\n"


def test_shipped_templates_are_many_and_sourced_and_name_no_candidate_noun():
    templates = read_templates(SHIPPED)
    assert len(templates) >= 20 and len({t.id for t in templates}) == len(templates)
    assert all(t.source for t in templates)
    # a carrier word that is a target stops the templates stage: no candidate noun may be one
    carriers = {w for t in templates for w in (t.env + " " + t.speech).lower().split()}
    assert not carriers & set(CDI_NOUNS)


@pytest.mark.parametrize(
    "body, line, named",
    [
        ("t1\tMOT\tholds the ball\tlook\tx\n", 3, ["{n}", "'holds the ball'"]),
        ("t1\tMOT\tholds {n} {n}\tlook\tx\n", 3, ["{n}", "'holds {n} {n}'"]),
        ("t1\tmother\tholds {n}\tlook\tx\n", 3, ["speaker", "'mother'"]),
        ("t1\tMOT\tholds {n}\tlook\n", 3, ["5", "fields"]),
        ("t1\tMOT\tholds {n}\tlook\tx\nt1\tCHI\tdrops {n}\toh\ty\n", 4, ["duplicate", "'t1'"]),
        ("t1\tMOT\tholds {n}\tlook<LAN>\tx\n", 3, ["plain words"]),
    ],
)
def test_malformed_templates_name_file_and_line(tmp_path, body, line, named):
    path = tmp_path / "t.tsv"
    path.write_text("# comment\n" + HEADER + body)
    with refuses(*named) as err:
        read_templates(path)
    assert str(err.value).startswith(f"{path}:{line}: ")
    path.write_text("id,speaker,env,speech,source\n")
    with refuses(f"{path}:1: ", "header"):
        read_templates(path)


def test_template_tokens_follow_the_word_rule():
    t = Template("t1", "CHI", "asked for a new {n}", "I love this", "paper")
    assert t.tokens("book", ["book", "ball"], "targets") == [
        "<CHI>", "asked", "for", "a", "new", "book<ENV>", "i", "love", "this",
    ]  # fmt: skip
    assert t.tokens("ball", ["book", "ball"], "all") == [
        "<CHI>", "asked<ENV>", "for<ENV>", "a<ENV>", "new<ENV>", "ball<ENV>", "i<LAN>", "love<LAN>", "this<LAN>",
    ]  # fmt: skip


def test_template_contexts_are_held_out_and_hold_one_target():
    t = Template("t1", "MOT", "holds the {n}", "look", "x")
    table = template_contexts([t], ["ball", "cup"], "targets", training=[["<MOT>", "the", "ball<LAN>"]])
    assert table["word"].tolist() == ["ball", "cup"]
    assert table["context"][1] == ["<MOT>", "holds", "the", "cup<ENV>", "look"]
    with refuses("template t1", "'cup'", "training turns"):
        template_contexts(
            [t], ["ball", "cup"], "targets", training=[["<MOT>", "holds", "the", "cup<ENV>", "look", "x"]]
        )
    # whole tokens only: a training turn with "looks" after the context's "look" is no match
    template_contexts([t], ["ball", "cup"], "targets", training=[["<MOT>", "holds", "the", "cup<ENV>", "looks"]])
    with refuses("template t2", "'box'", "target"):
        template_contexts([Template("t2", "MOT", "puts {n} in the box", "oh", "x")], ["ball", "box"], "targets", [])


def test_template_contexts_more_refusals_and_no_template():
    t = Template("t1", "MOT", "holds the {n}", "look", "x")
    # a context that ends a training turn is in the training turns too
    with refuses("template t1", "'cup'", "training turns"):
        template_contexts([t], ["ball", "cup"], "targets", training=[["<MOT>", "holds", "the", "cup<ENV>", "look"]])
    # a carrier word in the speech, whatever its case, is a target too
    with refuses("template t3", "'box'", "target"):
        template_contexts([Template("t3", "MOT", "holds {n}", "Box look", "x")], ["ball", "box"], "targets", [])
    none = template_contexts([], ["ball", "cup"], "targets", [])
    assert none.empty and list(none.columns) == ["template", "word", "context"]


def test_template_surprisals_refuse_rows_out_of_vocabulary_order():
    contexts = pd.DataFrame({"word": ["cup", "ball"]})
    with refuses("template contexts", "vocabulary order"):
        template_surprisals(np.zeros((2, 3)), contexts, ["ball", "cup"], {"ball<LAN>": 1, "cup<LAN>": 2})


def test_gain_table_by_hand():
    # one template, K = 3 targets (a, b, c); s[u, v] = surprisal of v<LAN> after u<ENV>
    s = np.array([[[1.0, 4.0, 6.0], [2.0, 3.0, 9.0], [5.0, 8.0, 0.5]]])
    table = template_gain_table(s, ["t"], ["a", "b", "c"])
    # v = a: matched 1, mismatched (2 + 5) / 2 = 3.5; v = b: 3, (4 + 8) / 2 = 6; v = c: 0.5, (6 + 9) / 2 = 7.5
    assert table["s_matched"].tolist() == [1.0, 3.0, 0.5]
    assert table["s_mismatched"].tolist() == [3.5, 6.0, 7.5]
    assert table["gain"].tolist() == [2.5, 3.0, 7.0]


def test_template_gain_uses_every_mismatch_like_a_slow_loop():
    targets = ["ball", "cup", "dog", "hat"]
    vocab = ["<unk>", "<MOT>", "<CHI>", "holds", "the", "look", "oh", "a"]
    vocab += [f"{w}<ENV>" for w in targets] + [f"{w}<LAN>" for w in targets]
    index = {t: i for i, t in enumerate(vocab)}
    templates = [Template("t1", "MOT", "holds the {n}", "look", "x"), Template("t2", "CHI", "{n}", "oh a", "x")]
    torch.manual_seed(0)
    model = build_model(
        "transformer", dict(n_layers=1, d_model=16, n_heads=2, d_head=8, d_mlp=32, n_ctx=8, d_vocab=len(vocab))
    ).eval()
    contexts = template_contexts(templates, targets, "targets", training=[])
    encoded = [encode(c, index) for c in contexts["context"]]
    s = template_surprisals(last_log_probs(model, encoded), contexts, targets, index)
    fast = template_gain_table(s, ["t1", "t2"], targets)

    def surprisal(t: Template, u: str, v: str) -> float:  # the definition: one context, one target, one pass
        return target_surprisal(model, [encode(t.tokens(u, targets, "targets"), index)], [index[f"{v}<LAN>"]])[0]

    for row in fast.itertuples():
        t = templates[int(row.template[1]) - 1]
        mismatched = [surprisal(t, u, row.word) for u in targets if u != row.word]
        assert len(mismatched) == 3
        assert row.s_matched == pytest.approx(surprisal(t, row.word, row.word), abs=1e-5)
        assert row.s_mismatched == pytest.approx(np.mean(mismatched), abs=1e-5)
    assert fast["gain"].abs().max() > 1e-3  # the random model's surprisals differ by context


def test_rows_must_cover_every_target_in_order():
    templates = [Template("t1", "MOT", "holds {n}", "look", "x"), Template("t2", "MOT", "drops {n}", "oh", "x")]
    contexts = template_contexts(templates, ["a", "b"], "targets", training=[])
    index = {"a<LAN>": 1, "b<LAN>": 2}
    assert template_surprisals(np.zeros((4, 5)), contexts, ["a", "b"], index).shape == (2, 2, 2)
    with refuses("template contexts", "vocabulary order"):
        template_surprisals(np.zeros((4, 5)), contexts, ["b", "a"], index)
    swapped = contexts.copy()
    swapped.loc[[2, 3], "word"] = ["b", "a"]  # the second template's rows out of order
    with refuses("template contexts", "vocabulary order"):
        template_surprisals(np.zeros((4, 5)), swapped, ["a", "b"], index)


@pytest.mark.parametrize(
    "row, named",
    [
        ("t2\tMOT\tholds{n}\tlook\tx", ["{n}", "got 'holds{n}'"]),
        ("t2\tMOT\t{n} and x{n}\tlook\tx", ["{n}", "got '{n} and x{n}'"]),
        ("t2\tMOT\tholds {n} now<LAN>\tlook\tx", ["plain words"]),
        ("t2\tMOT\tholds {n} ball<ENV>\tlook\tx", ["plain words"]),
        ("t2\tMOT\tholds {n}\tlook at {n}\tx", ["plain words"]),
        ("t2\tMOT\tholds {n} {it}\tlook\tx", ["plain words"]),
        ("t2\tMo\tholds {n}\tlook\tx", ["speaker", "MOT", "got 'Mo'"]),
        ("t1\tCHI\tdrops {n}\toh\ty", ["duplicate", "'t1'"]),
    ],
)
def test_a_malformed_row_is_named_by_file_and_line_and_what_is_wrong(tmp_path, row, named):
    path = tmp_path / "t.tsv"
    path.write_text("# templates\n" + HEADER + "t1\tMOT\tholds the {n}\tlook\tx\n# another comment\n\n" + row + "\n")
    with refuses(*named) as err:
        read_templates(path)
    assert str(err.value).startswith(f"{path}:6: ")  # file and line first: comment and blank lines count


def test_template_file_errors_name_the_template_file(tmp_path):
    with refuses(tmp_path / "none.tsv", "not found"):
        read_templates(tmp_path / "none.tsv")
    path = tmp_path / "t.tsv"
    path.write_text("# only the header\n" + HEADER)
    with refuses(path, "no template rows"):
        read_templates(path)
    path.write_text(HEADER + "t1\tMOT\tholds the {n}\tlook\tx\nt2\tCHI\t{n} here\tsee it\tpaper\n")
    assert read_templates(path) == [
        Template("t1", "MOT", "holds the {n}", "look", "x"),
        Template("t2", "CHI", "{n} here", "see it", "paper"),
    ]

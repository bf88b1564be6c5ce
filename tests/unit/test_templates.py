"""Template grounding: the shipped carrier file, the word rule in templates, held-out checks, and G over
every mismatch checked against a slow loop and against values worked out by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from emergence.core.io import PipelineError
from emergence.core.models import build_model
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
    "body, message",
    [
        ("t1\tMOT\tholds the ball\tlook\tx\n", "exactly one {n}"),
        ("t1\tMOT\tholds {n} {n}\tlook\tx\n", "exactly one {n}"),
        ("t1\tmother\tholds {n}\tlook\tx\n", "speaker must be a CHAT code"),
        ("t1\tMOT\tholds {n}\tlook\n", "5 non-empty tab-separated fields"),
        ("t1\tMOT\tholds {n}\tlook\tx\nt1\tCHI\tdrops {n}\toh\ty\n", "duplicate template id 't1'"),
        ("t1\tMOT\tholds {n}\tlook<LAN>\tx\n", "plain words"),
    ],
)
def test_malformed_templates_name_file_and_line(tmp_path, body, message):
    path = tmp_path / "t.tsv"
    path.write_text("# comment\n" + HEADER + body)
    with pytest.raises(PipelineError, match=message) as err:
        read_templates(path)
    assert str(err.value).startswith(f"{path}:")
    path.write_text("id,speaker,env,speech,source\n")
    with pytest.raises(PipelineError, match=f"{path}:1: the header"):
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
    with pytest.raises(PipelineError, match="template t1: its context with 'cup' occurs in the training turns"):
        template_contexts(
            [t], ["ball", "cup"], "targets", training=[["<MOT>", "holds", "the", "cup<ENV>", "look", "x"]]
        )
    # whole tokens only: a training turn with "looks" after the context's "look" is no match
    template_contexts([t], ["ball", "cup"], "targets", training=[["<MOT>", "holds", "the", "cup<ENV>", "looks"]])
    with pytest.raises(PipelineError, match="carrier word 'box' is a target noun"):
        template_contexts([Template("t2", "MOT", "puts {n} in the box", "oh", "x")], ["ball", "box"], "targets", [])


def test_template_contexts_more_refusals_and_no_template():
    t = Template("t1", "MOT", "holds the {n}", "look", "x")
    # a context that ends a training turn is in the training turns too
    with pytest.raises(PipelineError, match="template t1: its context with 'cup' occurs in the training turns"):
        template_contexts([t], ["ball", "cup"], "targets", training=[["<MOT>", "holds", "the", "cup<ENV>", "look"]])
    # a carrier word in the speech, whatever its case, is a target too
    with pytest.raises(PipelineError, match="template t3: carrier word 'box' is a target noun"):
        template_contexts([Template("t3", "MOT", "holds {n}", "Box look", "x")], ["ball", "box"], "targets", [])
    none = template_contexts([], ["ball", "cup"], "targets", [])
    assert none.empty and list(none.columns) == ["template", "word", "context"]


def test_template_surprisals_refuse_rows_out_of_vocabulary_order():
    contexts = pd.DataFrame({"word": ["cup", "ball"]})
    with pytest.raises(PipelineError) as e:
        template_surprisals(np.zeros((2, 3)), contexts, ["ball", "cup"], {"ball<LAN>": 1, "cup<LAN>": 2})
    assert str(e.value) == "template contexts: rows must run over every target, in vocabulary order"


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
    with pytest.raises(PipelineError, match="every target"):
        template_surprisals(np.zeros((4, 5)), contexts, ["b", "a"], index)
    swapped = contexts.copy()
    swapped.loc[[2, 3], "word"] = ["b", "a"]  # the second template's rows out of order
    with pytest.raises(PipelineError, match="every target"):
        template_surprisals(np.zeros((4, 5)), swapped, ["a", "b"], index)


@pytest.mark.parametrize(
    "row, message",
    [
        ("t2\tMOT\tholds{n}\tlook\tx", "the env frame needs exactly one {n} as a word, got 'holds{n}'"),
        ("t2\tMOT\t{n} and x{n}\tlook\tx", "the env frame needs exactly one {n} as a word, got '{n} and x{n}'"),
        ("t2\tMOT\tholds {n} now<LAN>\tlook\tx", "frames hold plain words (no <ENV>/<LAN>, one {n})"),
        ("t2\tMOT\tholds {n} ball<ENV>\tlook\tx", "frames hold plain words (no <ENV>/<LAN>, one {n})"),
        ("t2\tMOT\tholds {n}\tlook at {n}\tx", "frames hold plain words (no <ENV>/<LAN>, one {n})"),
        ("t2\tMOT\tholds {n} {it}\tlook\tx", "frames hold plain words (no <ENV>/<LAN>, one {n})"),
        ("t2\tMo\tholds {n}\tlook\tx", "speaker must be a CHAT code such as MOT or CHI, got 'Mo'"),
        ("t1\tCHI\tdrops {n}\toh\ty", "duplicate template id 't1'"),
    ],
)
def test_a_malformed_row_is_named_by_file_and_line_with_the_whole_message(tmp_path, row, message):
    path = tmp_path / "t.tsv"
    path.write_text("# templates\n" + HEADER + "t1\tMOT\tholds the {n}\tlook\tx\n# another comment\n\n" + row + "\n")
    with pytest.raises(PipelineError) as err:
        read_templates(path)
    assert str(err.value) == f"{path}:6: {message}"


def test_template_file_errors_name_the_template_file(tmp_path):
    with pytest.raises(PipelineError) as err:
        read_templates(tmp_path / "none.tsv")
    assert str(err.value) == f"{tmp_path / 'none.tsv'}: template file not found"
    path = tmp_path / "t.tsv"
    path.write_text("# only the header\n" + HEADER)
    with pytest.raises(PipelineError) as err:
        read_templates(path)
    assert str(err.value) == f"{path}: no template rows"
    path.write_text(HEADER + "t1\tMOT\tholds the {n}\tlook\tx\nt2\tCHI\t{n} here\tsee it\tpaper\n")
    assert read_templates(path) == [
        Template("t1", "MOT", "holds the {n}", "look", "x"),
        Template("t2", "CHI", "{n} here", "see it", "paper"),
    ]

"""The word rule (grounding_vocab.env_marking) checked token for token on a corpus written by hand."""

from __future__ import annotations

import pandas as pd
import pytest
from refusals import refuses, refuses_key

from emergence.core.config import from_dict
from emergence.studies.grounding.childes import extract_turns
from emergence.studies.grounding.tokens import VocabParams, mark, marked_table, target_vocabulary
from emergence.studies.grounding.visual_data import dialog_sequences, without_env

# The paper's example (review of arXiv 2510.13796), as two CHAT turns: "<CHI> takes book<ENV> from
# mother <CHI> what's that <MOT> a book<LAN> in it".
CHAT = """@UTF8
@Begin
@Languages:\teng
@Participants:\tCHI Target_Child, MOT Mother
@ID:\teng|x|CHI|1;06.00|female|||Target_Child|||
@ID:\teng|x|MOT||female|||Mother|||
*CHI:\twhat's that ?
%act:\ttakes book from mother
*MOT:\ta book in it .
*MOT:\tthe ball !
%act:\tgives ball to book
@End
"""


@pytest.fixture
def turns(tmp_path):
    path = tmp_path / "example.cha"
    path.write_text(CHAT)
    return extract_turns(path)


def test_only_target_nouns_carry_env_and_lan(turns):
    marked = marked_table(turns, ["book"], "targets")["tokens"].tolist()
    assert marked == [
        ["<CHI>", "takes", "book<ENV>", "from", "mother", "what's", "that"],
        ["<MOT>", "a", "book<LAN>", "in", "it"],
        ["<MOT>", "gives", "ball", "to", "book<ENV>", "the", "ball"],  # ball is no target: one token
    ]
    # the ablation keeps the extracted rule: every env word marked, every spoken word marked
    assert marked_table(turns, ["book"], "all")["tokens"].tolist() == turns["tokens"].tolist()
    assert turns["tokens"][1] == ["<MOT>", "a<LAN>", "book<LAN>", "in<LAN>", "it<LAN>"]


def test_vocabulary_follows_the_rule(turns):
    # book: 2 <ENV> (takes book, to book), 1 <LAN>; ball: 1 <ENV>, 1 <LAN>; the rarer form counts
    with refuses("v.n_words", "only 0", "of the 2", "min_count=2"):
        target_vocabulary(turns, ["ball", "book"], VocabParams(n_words=1, min_count=2), "v")
    targets, vocab, stats = target_vocabulary(turns, ["book"], VocabParams(n_words=1, min_count=1), "v")
    assert targets == ["book"]
    assert stats.to_dict("records") == [{"word": "book", "n_env": 2, "n_lan": 1, "passes": True, "target": True}]
    # every candidate gets a row, in list order: cup never occurs, ball passes min_count 1 but book is
    # more frequent (rarer forms: ball 1, book 1; tie broken by spelling)
    _, _, stats = target_vocabulary(turns, ["cup", "book", "ball"], VocabParams(n_words=1, min_count=1), "v")
    assert stats.to_dict("records") == [
        {"word": "cup", "n_env": 0, "n_lan": 0, "passes": False, "target": False},
        {"word": "book", "n_env": 2, "n_lan": 1, "passes": True, "target": False},
        {"word": "ball", "n_env": 1, "n_lan": 1, "passes": True, "target": True},
    ]
    assert {"book<ENV>", "book<LAN>", "ball", "takes", "a", "it"} <= set(vocab)
    assert not [t for t in vocab if t.endswith(("<ENV>", "<LAN>")) and not t.startswith("book")]
    _, vocab_all, _ = target_vocabulary(turns, ["book"], VocabParams(n_words=1, min_count=1, env_marking="all"), "v")
    assert {"takes<ENV>", "a<LAN>", "ball<LAN>", "ball<ENV>"} <= set(vocab_all) and "takes" not in vocab_all


def test_unknown_marking_is_refused():
    with refuses_key("grounding_vocab.env_marking", "some"):
        from_dict(VocabParams, {"env_marking": "some"}, "grounding_vocab")
    with refuses("env_marking", "'none'"):
        mark(["a<ENV>"], ["a"], "none")


def test_image_setting_drops_the_caption_by_position_under_either_rule():
    extracted = pd.DataFrame(
        {
            "image_id": [10],
            "env": [["a<ENV>", "dog<ENV>", "on<ENV>", "grass<ENV>"]],
            "tokens": [["a<ENV>", "dog<ENV>", "on<ENV>", "grass<ENV>", "<Q>", "is<LAN>", "a<LAN>", "dog<LAN>"]],
        }
    )
    dialogs = marked_table(extracted, ["dog"], "targets")
    assert dialogs["tokens"][0] == ["a", "dog<ENV>", "on", "grass", "<Q>", "is", "a", "dog<LAN>"]
    assert without_env(dialogs["tokens"][0], 4) == ["<Q>", "is", "a", "dog<LAN>"]  # the caption's plain words go too
    index = {t: i for i, t in enumerate(["<unk>", "<Q>", "is", "a", "dog<LAN>", "dog<ENV>", "on", "grass"])}
    ids, _ = dialog_sequences(dialogs, set(), index, seq_len=5)
    assert ids[0].tolist() == [1, 2, 3, 4, -1, -1]

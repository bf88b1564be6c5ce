import shutil

import pytest
from refusals import refuses

from emergence.core.chat import cha_files, read_chat_file, speech_documents, speech_words

EVE = "childes/Brown-Eve-010600a.cha"
HEADER = """@UTF8
@Begin
@Languages:\teng
@Participants:\tCHI Target_Child, MOT Mother
@ID:\teng|x|CHI|1;06.00|female|||Target_Child|||
@ID:\teng|x|MOT||female|||Mother|||
"""


@pytest.fixture(scope="module")
def eve_lines(shared_data):
    docs = speech_documents(shared_data / EVE)
    assert len(docs) == 1
    return docs[0].split("\n")


def test_eve_has_one_line_per_real_utterance(shared_data, eve_lines):
    assert len(read_chat_file(shared_data / EVE).utterances()) == 1589  # incl. one header change
    assert len(eve_lines) == 1588
    assert eve_lines[0] == "more cookie ."  # the [+ IMP] postcode is gone


def test_eve_words_hold_no_chat_codes(eve_lines):
    words = {w for line in eve_lines for w in line.split(" ")}
    assert "" not in words
    for w in words:
        assert not w.startswith(("+", "&", "[")), w
        assert not {"‡", "„", "_", ":", "(", ")"} & set(w), w
        assert w.lower() not in {"xxx", "yyy", "www"}
    assert {".", "?", "!"} <= words
    assert "how about another graham cracker ?" in eve_lines  # how_about, graham_cracker split
    assert "mhm ." in eve_lines  # m:hm [?] .


def test_speech_words_filters_codes_and_splits_compounds(tmp_path):
    cha = tmp_path / "t.cha"
    cha.write_text(
        HEADER + "*CHI:\tmi:lk doggie@c ice+cream &-um yyy &+fr ‡ go(ing) he [/] he ran !\n"
        "*MOT:\tcall Grandma and talk +...\n@End\n"
    )
    chi, mot = read_chat_file(cha).utterances()
    assert speech_words(chi) == ["milk", "doggie", "ice", "cream", "going", "he", "ran", "!"]
    assert speech_words(mot) == ["call", "Grandma", "and", "talk"]


def test_directory_is_read_recursively_in_order(shared_data, tmp_path):
    (tmp_path / "b").mkdir()
    shutil.copy(shared_data / EVE, tmp_path / "b" / "eve.cha")
    (tmp_path / "a.cha").write_text(HEADER + "*MOT:\thello Eve .\n@End\n")
    (tmp_path / "notes.txt").write_text("ignored")
    docs = speech_documents(tmp_path)
    assert len(docs) == 2
    assert docs[0] == "hello Eve ."
    assert docs[1] == speech_documents(shared_data / EVE)[0]


def test_bad_inputs_name_the_file(tmp_path):
    with refuses(tmp_path / "missing.cha", "not found"):
        speech_documents(tmp_path / "missing.cha")
    (tmp_path / "empty").mkdir()
    with refuses(tmp_path / "empty", ".cha"):
        speech_documents(tmp_path / "empty")
    (tmp_path / "prose.cha").write_text("just some text\n")
    with refuses(tmp_path / "prose.cha", "no utterances"):
        speech_documents(tmp_path / "prose.cha")
    (tmp_path / "latin1.cha").write_bytes(HEADER.encode() + "*MOT:\tcaf\xe9 .\n@End\n".encode("latin-1"))
    with refuses(tmp_path / "latin1.cha", "CHAT"):
        read_chat_file(tmp_path / "latin1.cha")


@pytest.mark.parametrize("links", [{"self.cha": "self.cha"}, {"a.cha": "b.cha", "b.cha": "a.cha"}])
def test_a_symbolic_link_loop_is_named_in_a_folder_or_as_the_source(tmp_path, links):
    """Path.resolve raises RuntimeError on a loop (Python 3.11): one line naming the link instead."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "good.cha").write_text(HEADER + "*MOT:\thello .\n@End\n")
    for name, target in links.items():
        (corpus / name).symlink_to(target)
    first = sorted(links)[0]
    with refuses(corpus / first, "loop"):
        cha_files(corpus)
    with refuses(corpus / first, "loop"):
        cha_files(corpus / first)


def test_a_dangling_link_is_named_before_it_is_read(tmp_path):
    (tmp_path / "gone.cha").symlink_to(tmp_path / "deleted.cha")
    with refuses(tmp_path / "gone.cha", "No such file or directory"):
        cha_files(tmp_path)

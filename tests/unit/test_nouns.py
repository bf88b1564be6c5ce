"""The candidate noun list as data: its reader, and how many of it pass the frequency rule on real CHAT."""

import re
from pathlib import Path

import pytest
from refusals import refuses

from emergence.studies.grounding.childes import extract_turns
from emergence.studies.grounding.nouns import read_nouns
from emergence.studies.grounding.tokens import VocabParams, target_vocabulary

SHIPPED = Path(__file__).parents[2] / "resources" / "grounding" / "nouns.tsv"
HEADER = "# a comment\nnoun\tcategory\n"


def test_the_shipped_list_reads_in_file_order_with_its_provenance():
    nouns = read_nouns(SHIPPED)
    assert len(nouns) == 256 and nouns[:3] == ("bear", "bee", "bird") and "teddy_bear" in nouns
    assert "Provenance" in SHIPPED.read_text().split("\nnoun\tcategory\n")[0]


@pytest.mark.parametrize(
    "body, line, named",
    [
        ("noun\tkind\nball\ttoys\n", ":1", ["header", "noun, category"]),
        ("# a list\nnoun category\nball\ttoys\n", ":2", ["header", "noun, category"]),
        (HEADER + "ball\ttoys\ncup\n", ":4", ["2 non-empty"]),
        (HEADER + "ball\ttoys\nBall\ttoys\n", ":4", ["'Ball'"]),
        (HEADER + "ball\ttoys\nice cream\tfood\n", ":4", ["'ice cream'"]),
        (HEADER + "ball\ttoys\ncup\thousehold\nball\ttoys\n", ":5", ["'ball'", "line 3"]),
        (HEADER, "", ["no noun list rows"]),
        (b"noun\tcategory\n\xff\tx\n", "", ["UnicodeDecodeError"]),
    ],
)
def test_a_malformed_list_names_file_and_line(tmp_path, body, line, named):
    path = tmp_path / "t.tsv"
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    with refuses(*named) as err:
        read_nouns(path)
    assert str(err.value).startswith(f"{path}{line}: ")


def test_a_missing_list_is_one_line(tmp_path):
    with refuses(tmp_path / "nope.tsv", "not found"):
        read_nouns(tmp_path / "nope.tsv")


def _brute_force_both_forms(cha: Path, nouns) -> set[str]:
    """Nouns written both in an environment tier (%act, %sit, %gpx) and in a main tier, by plain regex."""
    logical: list[str] = []
    for line in cha.read_text(encoding="utf-8").splitlines():
        if line.startswith("\t") and logical:  # a continuation line
            logical[-1] += " " + line.strip()
        else:
            logical.append(line)
    words = {"env": set(), "lan": set()}
    for line in logical:
        kind = "env" if line.startswith(("%act:", "%sit:", "%gpx:")) else "lan" if line.startswith("*") else None
        if kind:
            words[kind] |= set(re.findall(r"[a-z_]+", line.split(":", 1)[1].lower()))
    return set(nouns) & words["env"] & words["lan"]


def test_on_the_eve_sample_few_nouns_have_both_forms_and_the_paper_rule_refuses(shared_data):
    cha = shared_data / "childes" / "Brown-Eve-010600a.cha"
    nouns = read_nouns(SHIPPED)
    turns = extract_turns(cha)
    _, _, table = target_vocabulary(turns, nouns, VocabParams(n_words=1, min_count=1), "grounding_vocab")
    assert set(table.loc[table["passes"], "word"]) == _brute_force_both_forms(cha, nouns)
    assert set(table.loc[table["passes"], "word"]) == {"box", "head", "pencil", "telephone", "toy"}
    # the paper's rule: 100 nouns with >= 100 of each form; one session of Eve has none
    paper = VocabParams(n_words=100, min_count=100)
    with refuses("grounding_vocab.n_words", "only 0", "256", "min_count=100"):
        target_vocabulary(turns, nouns, paper, "grounding_vocab")

import re
from dataclasses import replace
from pathlib import Path

import pylangacq
import pytest

from emergence.core.io import PipelineError
from emergence.studies.grounding.childes import extract_turns, turn_counts, validate_chat
from emergence.studies.grounding.childes_synth import SynthConfig, noun_inventory, write_sessions
from emergence.studies.grounding.nouns import read_nouns

CDI_NOUNS = read_nouns(Path(__file__).parents[2] / "resources" / "grounding" / "nouns.tsv")  # the shipped list

SMALL = SynthConfig(n_files=2, turns_per_file=300, n_nouns=20, seed=3)


def test_cdi_nouns_are_a_clean_inventory():
    assert 150 <= len(CDI_NOUNS) <= 300
    assert len(set(CDI_NOUNS)) == len(CDI_NOUNS)
    for noun in CDI_NOUNS:
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", noun), noun
    assert {"ball", "dog", "cup", "teddy_bear", "shoe", "nose"} <= set(CDI_NOUNS)


def test_more_nouns_than_the_list_holds_is_one_line(tmp_path):
    with pytest.raises(PipelineError, match=r"^childes_synth\.n_nouns: the noun list has 3 nouns, got 4$"):
        write_sessions(replace(SMALL, n_nouns=4), ("ball", "cup", "dog"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "change, key",
    [
        ({"n_files": 0}, "n_files"),
        ({"turns_per_file": 0}, "turns_per_file"),
        ({"p_act": 1.5}, "p_act"),
        ({"p_scoped": -0.1}, "p_scoped"),
        ({"p_mention_present": 0.7, "p_mention_absent": 0.4}, "p_mention_absent"),
    ],
)
def test_bad_config_names_the_key_and_writes_nothing(tmp_path, change, key):
    with pytest.raises(PipelineError, match=rf"^corpus_g\.{key}: "):
        replace(SMALL, **change).validate("corpus_g")
    with pytest.raises(PipelineError, match=rf"\.{key}: "):
        write_sessions(replace(SMALL, **change), CDI_NOUNS, tmp_path / "out")
    assert not list(tmp_path.iterdir())


def test_sessions_are_deterministic_and_replace_the_directory(tmp_path):
    a = write_sessions(SMALL, CDI_NOUNS, tmp_path / "a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "stale.cha").write_text("old")
    b = write_sessions(SMALL, CDI_NOUNS, tmp_path / "b")
    assert [p.name for p in a] == ["session001.cha", "session002.cha"]
    assert sorted((tmp_path / "b").iterdir()) == b  # stale file gone with the old directory
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    c = write_sessions(replace(SMALL, seed=4), CDI_NOUNS, tmp_path / "c")
    assert a[0].read_bytes() != c[0].read_bytes()
    assert (
        noun_inventory(SMALL, CDI_NOUNS)
        == noun_inventory(SMALL, CDI_NOUNS)
        != noun_inventory(replace(SMALL, seed=4), CDI_NOUNS)
    )
    assert len(set(noun_inventory(SMALL, CDI_NOUNS))) == SMALL.n_nouns


def test_sessions_are_valid_chat(tmp_path):
    files = write_sessions(SMALL, CDI_NOUNS, tmp_path / "s")
    for f in files:
        validate_chat(f)
        text = f.read_text()
        assert text.startswith("@UTF8\n@Begin\n@Languages:\teng\n@Participants:\tCHI Target_Child, MOT Mother\n")
        assert text.endswith("@End\n") and "@ID:\teng|synth|CHI|" in text and "@Date:\t" in text
        for line in text.split("\n"):
            if line.startswith(("*", "%")):
                assert re.match(r"[*%][A-Za-z]+:\t\S", line), line
            if line.startswith("*"):  # a terminator ends the utterance, before any postcode
                assert re.search(r" [.?!]( \[\+ IMP\])?$", line), line
    chat = pylangacq.read_chat(str(tmp_path / "s"), strict=True)  # the strict parser accepts them too
    assert len(chat.utterances()) == SMALL.n_files * SMALL.turns_per_file
    assert {p.code for p in chat.participants()} == {"CHI", "MOT"}
    counts = turn_counts(tmp_path / "s")
    assert counts["utterances"] == 600 and counts["gpx"] == 0
    assert 0.2 < counts["act"] / 600 < 0.4  # p_act = 0.3
    assert counts["sit"] >= SMALL.n_files  # every session starts with an object entering


def test_extractor_sees_nouns_in_speech_and_environment(tmp_path):
    df = extract_turns(write_sessions(SMALL, CDI_NOUNS, tmp_path / "s")[0].parent)
    env = {w for ws in df["env"] for w in ws}
    lan = {w for ws in df["lan"] for w in ws}
    nouns = noun_inventory(SMALL, CDI_NOUNS)
    assert sum(n in env and n in lan for n in nouns) >= 0.9 * len(nouns)
    assert not {"xxx", "imp", "laughs", "0"} & (env | lan)  # the sprinkled codes are gone
    assert all(t.endswith(("<ENV>", "<LAN>")) for ts in df["tokens"] for t in ts[1:])


def test_compounds_are_one_word_on_both_tiers(tmp_path):
    cfg = SynthConfig(n_files=1, turns_per_file=400, n_nouns=len(CDI_NOUNS), p_act=0.8, seed=1)
    out = write_sessions(cfg, CDI_NOUNS, tmp_path / "s")[0]
    assert re.search(r"^%(act|sit):\t.*\b[a-z]+\+[a-z]+", out.read_text(), re.M)  # teddy+bear in %act
    df = extract_turns(out)
    compounds = {n for n in CDI_NOUNS if "_" in n}
    env = {w for ws in df["env"] for w in ws}
    lan = {w for ws in df["lan"] for w in ws}
    assert compounds & env and compounds & lan
    orphans = {part for n in compounds for part in n.split("_")} - set(CDI_NOUNS)  # teddy, ice, ...
    assert not orphans & env
    assert not orphans - {"play"} & lan  # "let's play ." is small talk, not half of play_dough


def test_mention_probabilities_steer_speech(tmp_path):
    never = replace(SMALL, p_mention_present=0.0, p_mention_absent=0.0)
    df = extract_turns(write_sessions(never, CDI_NOUNS, tmp_path / "never")[0].parent)
    assert not set(noun_inventory(never, CDI_NOUNS)) & {w for ws in df["lan"] for w in ws}
    always = replace(SMALL, p_mention_present=1.0, p_mention_absent=0.0, n_files=1)
    df = extract_turns(write_sessions(always, CDI_NOUNS, tmp_path / "always")[0])
    nouns, seen = set(noun_inventory(always, CDI_NOUNS)), set()
    for env, lan in zip(df["env"], df["lan"]):
        seen |= nouns & set(env)
        mentioned = nouns & set(lan)
        assert len(mentioned) == 1 and mentioned <= seen  # named only after it entered the scene

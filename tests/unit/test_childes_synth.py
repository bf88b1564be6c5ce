import calendar
import re
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pylangacq
import pytest
from refusals import assert_names, assert_refused, refuses

from emergence.core.io import PipelineError
from emergence.studies.grounding import childes_synth as synth
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
    with refuses("childes_synth.n_nouns") as e:  # in one line
        write_sessions(replace(SMALL, n_nouns=4), ("ball", "cup", "dog"), tmp_path / "out")
    assert_refused([str(e.value)], "childes_synth.n_nouns", 4, rule="3 nouns")
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


# --- the sessions read line by line ------------------------------------------------------------------
# A small inventory with vowel- and consonant-initial nouns and compounds, so articles and the two
# compound spellings show; every test below draws all of it (n_nouns = len(TOYS)).
TOYS = ("apple", "ball", "egg", "teddy_bear", "ice_cream", "umbrella", "cup", "orange", "dog", "owl")
CODES = {"CHI": {"[/]", "xxx", "&=laughs"}, "MOT": {"[/]", "&-uh", "&=laughs"}}  # what _sprinkle may add
MAIN_NOUN, DEP_NOUN = r"[a-z]+(?:_[a-z]+)*", r"[a-z]+(?:\+[a-z]+)*"  # teddy_bear on *MOT, teddy+bear on %act


def _frames(frames, noun):
    """Full-line regexes of CHAT frames: {a} an article, {n} a noun, {other} a speaker code."""
    out = []
    for frame in frames:
        parts = re.split(r"(\{a\}|\{n\}|\{other\})", frame)
        fields = {"{a}": r"(?P<a>an?)", "{n}": rf"(?P<n>{noun})", "{other}": r"(?P<other>CHI|MOT)"}
        out.append(re.compile("".join(fields.get(p, re.escape(p)) for p in parts)))
    return out


def _match(frames, text):
    """The regex match of the one frame that spells `text`, or None."""
    hits = [m for m in (f.fullmatch(text) for f in frames) if m]
    assert len(hits) <= 1, text
    return hits[0] if hits else None


def _article_ok(m):
    """The frame's article agrees with its noun: 'an apple', 'a ball'."""
    return "a" not in m.groupdict() or m["a"] == ("an" if m["n"][0] in "aeiou" else "a")


ENTER_RE, ACT_RE, LEAVE_RE = (_frames(f, DEP_NOUN) for f in (synth.ENTER, synth.ACTS, synth.LEAVE))
MENTION_RE = {spk: _frames(frames, MAIN_NOUN) for spk, frames in synth.MENTION.items()}
IMPERATIVE_RE = _frames(synth.IMPERATIVE, MAIN_NOUN)


def _speech(speaker, line):
    """(code, kind, noun) of one main tier: the sprinkled code (or None) checked in place, the kind of
    utterance ('small', 'mention' or 'imp') and the noun it names (None for small talk)."""
    imp = line.endswith(" [+ IMP]")
    words = line.removesuffix(" [+ IMP]").split(" ")
    code = None
    if "[/]" in words:  # "the [/] the ball": the first word, the retracing, the word again
        assert words.index("[/]") == 1 and words[0] == words[2], line
        code, words = "[/]", words[2:]
    elif words[0] in CODES["CHI"] | CODES["MOT"]:  # xxx, &-uh, &=laughs lead the utterance
        code, words = words[0], words[1:]
    assert code is None or code in CODES[speaker], line
    assert not set(words) & (CODES["CHI"] | CODES["MOT"]), line  # one code at most
    base = " ".join(words)
    if base == "0 .":  # the action-only utterance carries no code
        assert code is None, line
    if imp:
        m = _match(IMPERATIVE_RE, base)
        assert speaker == "MOT" and m, line
        return code, "imp", m["n"]
    if base in synth.SMALL_TALK[speaker]:
        return code, "small", None
    m = _match(MENTION_RE[speaker], base)
    assert m and _article_ok(m), line
    return code, "mention", m["n"]


def _replay(text, inventory):
    """Walk one session: check every tier against the frames and the set of present objects, and
    return one record per turn (speaker, present objects at speech, code, kind, noun, sit, act)."""
    lines = text.split("\n")
    body = lines[lines.index("@Begin") + 8 : lines.index("@End")]  # after the 7 header lines
    turns = []
    for line in body:
        if line.startswith("*"):
            turns.append([line, []])
        else:
            turns[-1][1].append(line)
    present, records = [], []
    for main, deps in turns:
        speaker, said = re.fullmatch(r"\*(CHI|MOT):\t(.*)", main).groups()
        tiers = [d.split(":\t", 1) for d in deps]
        assert [t for t, _ in tiers] in ([], ["%sit"], ["%act"], ["%sit", "%act"]), deps
        sit = act = None
        for tier, value in tiers:
            if tier == "%sit":
                m = _match(ENTER_RE, value)
                assert m and _article_ok(m), value
                noun = m["n"].replace("+", "_")
                assert noun in inventory and noun not in present, (value, present)
                present.append(noun)
                sit = noun
        assert 1 <= len(present) <= min(synth.MAX_PRESENT, len(inventory)), present  # something to play with
        at_speech = list(present)
        code, kind, named = _speech(speaker, said)
        assert named is None or named in inventory, said
        for tier, value in tiers:
            if tier == "%act":
                scope, rest = re.fullmatch(r"(<bef> |<aft> )?(.*)", value).groups()
                m = _match(ACT_RE, rest) or _match(LEAVE_RE, rest)
                assert m, value
                noun = m["n"].replace("+", "_")
                assert noun in present, (value, present)
                other = m.groupdict().get("other")
                assert other in (None, {"MOT": "CHI", "CHI": "MOT"}[speaker]), value
                act = (scope, noun, bool(_match(LEAVE_RE, rest)), other)
        if act and act[2]:
            present.remove(act[1])
        records.append(
            {"speaker": speaker, "present": at_speech, "code": code, "kind": kind, "noun": named}
            | {"sit": sit, "act": act, "said": said}
        )
    return records


def _sessions(tmp_path, **change):
    cfg = replace(SynthConfig(n_nouns=len(TOYS), seed=7), **change)
    files = write_sessions(cfg, TOYS, tmp_path / f"s{len(list(tmp_path.iterdir()))}")
    inventory = noun_inventory(cfg, TOYS)
    return [_replay(f.read_text(encoding="utf-8"), inventory) for f in files]


def test_every_tier_follows_its_frames_and_the_objects_present(tmp_path):
    turns = [t for s in _sessions(tmp_path, n_files=2, turns_per_file=1500, p_act=0.5, p_scoped=0.4) for t in s]
    assert len(turns) == 3000
    mot = [t for t in turns if t["speaker"] == "MOT"]
    assert 0.55 < len(mot) / len(turns) < 0.65  # MOT speaks 60 % of turns
    # codes: about P_CODE of the utterances that may carry one, each speaker with all three of its own
    codable = [t for t in turns if t["said"] != "0 ."]
    assert 0.12 < sum(t["code"] is not None for t in codable) / len(codable) < 0.18
    for spk in ("CHI", "MOT"):
        assert {t["code"] for t in turns if t["speaker"] == spk} == CODES[spk] | {None}
        for kind in ("small", "mention"):  # xxx / &-uh follow the speaker on both kinds of speech
            assert {t["code"] for t in turns if t["speaker"] == spk and t["kind"] == kind} >= CODES[spk] - {"[/]"}
    assert any(t["said"] == "0 ." for t in turns)
    # imperatives: MOT only, about a quarter of her mentions, with their codes too
    named = [t for t in mot if t["kind"] in ("mention", "imp")]
    assert 0.2 < sum(t["kind"] == "imp" for t in named) / len(named) < 0.3
    assert {t["code"] for t in mot if t["kind"] == "imp"} == CODES["MOT"] | {None}
    # actions: p_act of the turns, scoped <bef>/<aft> at p_scoped, P_LEAVE of them put the object away
    acts = [t["act"] for t in turns if t["act"]]
    assert 0.46 < len(acts) / len(turns) < 0.54
    assert 0.35 < sum(a[0] is not None for a in acts) / len(acts) < 0.45
    assert {a[0] for a in acts} == {None, "<bef> ", "<aft> "}
    assert 0.16 < sum(a[2] for a in acts) / len(acts) < 0.24
    # speech names a present object 60 % of the time, an absent one 10 %
    assert 0.56 < sum(t["noun"] in t["present"] for t in turns) / len(turns) < 0.64
    assert 0.07 < sum(t["noun"] is not None and t["noun"] not in t["present"] for t in turns) / len(turns) < 0.13


def test_articles_and_compound_spellings_are_literal(tmp_path):
    cfg = SynthConfig(n_files=1, turns_per_file=1500, n_nouns=len(TOYS), p_act=0.6, seed=2)
    text = write_sessions(cfg, TOYS, tmp_path / "s")[0].read_text()
    sits = re.findall(r"^%sit:\t(.*)$", text, re.M)
    assert {"MOT brings out an apple", "MOT brings out a ball", "an egg is on the floor"} & set(sits)
    for s in sits:
        assert not re.search(r"\ba (apple|egg|ice\+cream|umbrella|orange|owl)\b", s), s
        assert not re.search(r"\ban (ball|teddy\+bear|cup|dog)\b", s), s
    mains = re.findall(r"^\*(?:CHI|MOT):\t(.*)$", text, re.M)
    assert {"that's a nice teddy_bear .", "that's a nice ice_cream ."} & set(mains)
    assert "teddy+bear" not in "\n".join(mains) and "ice+cream" not in "\n".join(mains)
    deps = "\n".join(re.findall(r"^%(?:sit|act):\t(.*)$", text, re.M))
    assert "teddy+bear" in deps and "ice+cream" in deps and "_" not in deps
    acts = re.findall(r"^%act:\t(?:<bef> |<aft> )?(.*)$", text, re.M)
    assert {"puts teddy+bear away", "gives ice+cream to CHI", "gives ice+cream to MOT"} & set(acts)
    assert all(not a.endswith((" to", " to None", " to ")) for a in acts)


def test_every_turn_acts_on_the_other_speaker_when_p_act_is_one(tmp_path):
    (session,) = _sessions(tmp_path, n_files=1, turns_per_file=600, p_act=1.0, p_scoped=0.0)
    acts = [t["act"] for t in session]
    assert all(acts) and {a[0] for a in acts} == {None}  # every turn, none scoped
    toward = {(t["speaker"], t["act"][3]) for t in session if t["act"][3]}  # "gives ball to CHI"
    assert toward == {("MOT", "CHI"), ("CHI", "MOT")}


def test_present_objects_are_capped_and_entries_stop_when_all_are_out(tmp_path):
    # no actions: nothing leaves, so the play space fills to MAX_PRESENT and stays there
    (session,) = _sessions(tmp_path, n_files=1, turns_per_file=400, p_act=0.0)
    assert sum(t["sit"] is not None for t in session) == synth.MAX_PRESENT == 5
    assert len(session[-1]["present"]) == 5 and session[0]["sit"] is not None
    # three objects only, and speech always about an absent one: once all three are out, small talk
    (session,) = _sessions(
        tmp_path, n_files=1, turns_per_file=200, n_nouns=3, p_act=0.0, p_mention_present=0.0, p_mention_absent=1.0
    )
    assert sum(t["sit"] is not None for t in session) == 3
    for t in session:
        if len(t["present"]) < 3:
            assert t["noun"] is not None and t["noun"] not in t["present"], t
        else:
            assert t["kind"] == "small", t
    assert any(len(t["present"]) < 3 for t in session) and session[-1]["kind"] == "small"


def test_absent_mentions_name_an_object_not_in_play(tmp_path):
    (session,) = _sessions(tmp_path, n_files=1, turns_per_file=400, p_mention_present=0.0, p_mention_absent=1.0)
    assert all(t["noun"] is not None and t["noun"] not in t["present"] for t in session)  # < len(TOYS) present
    (session,) = _sessions(tmp_path, n_files=1, turns_per_file=400, p_mention_present=1.0, p_mention_absent=0.0)
    assert all(t["noun"] in t["present"] for t in session)


def test_headers_count_sessions_ages_and_dates(tmp_path):
    cfg = SynthConfig(n_files=30, turns_per_file=1, n_nouns=2, seed=11)
    files = write_sessions(cfg, ("ball", "cup"), tmp_path / "s")
    assert [f.name for f in files] == [f"session{i:03d}.cha" for i in range(1, 31)]
    assert files[0].read_text().split("\n")[:9] == [
        "@UTF8",
        "@Begin",
        "@Languages:\teng",
        "@Participants:\tCHI Target_Child, MOT Mother",
        "@ID:\teng|synth|CHI|1;06.00|female|||Target_Child|||",
        "@ID:\teng|synth|MOT||female|||Mother|||",
        "@Date:\t01-JAN-2000",
        "@Situation:\ttoy play on the living room floor",
        "@Comment:\tsynthetic session 1 of 30, childes_synth seed 11",
    ]
    # a session a month from 1;06: 1;06 .. 2;11, then the ages start again at 1;06 (session 19)
    ages = [f"1;{m:02d}" for m in range(6, 12)] + [f"2;{m:02d}" for m in range(12)]
    ages = (ages + ages)[:30]
    # dates: day 1..28 then again, one month on per session from JAN-2000
    dates = [f"{1 + i % 28:02d}-{calendar.month_abbr[1 + i % 12].upper()}-{2000 + i // 12}" for i in range(30)]
    assert dates[11:14] + dates[26:30] == [
        "12-DEC-2000",
        "13-JAN-2001",
        "14-FEB-2001",
        "27-MAR-2002",
        "28-APR-2002",
        "01-MAY-2002",
        "02-JUN-2002",
    ]
    for i, f in enumerate(files):
        head = f.read_text().split("\n")[:9]
        assert head[4] == f"@ID:\teng|synth|CHI|{ages[i]}.00|female|||Target_Child|||"
        assert head[6] == f"@Date:\t{dates[i]}"
        assert head[8] == f"@Comment:\tsynthetic session {i + 1} of 30, childes_synth seed 11"
    # the same, read back by pylangacq: ages in months, dates as calendar dates, the comment
    chat = pylangacq.read_chat(str(tmp_path / "s"), strict=True)
    assert [a.in_months() for a in chat.ages()] == [18 + i % 18 for i in range(30)]
    assert [h.date for h in chat.headers()] == [datetime.strptime(d, "%d-%b-%Y").date() for d in dates]
    assert {h.situation for h in chat.headers()} == {"toy play on the living room floor"}
    assert chat.headers()[29].comments == ["synthetic session 30 of 30, childes_synth seed 11"]


def test_one_session_is_session_one_of_one(tmp_path):
    (f,) = write_sessions(SynthConfig(n_files=1, turns_per_file=1, n_nouns=1, seed=0), ("egg",), tmp_path / "s")
    text = f.read_text(encoding="utf-8")
    assert "@Comment:\tsynthetic session 1 of 1, childes_synth seed 0\n" in text
    lines = text.split("\n")
    assert lines[10] in {  # the first turn brings the one object in: "an egg"
        "%sit:\tMOT brings out an egg",
        "%sit:\tan egg is on the floor",
        "%sit:\tCHI finds an egg in the toy box",
        "%sit:\tMOT takes an egg out of the bag",
        "%sit:\tan egg is on the table",
    }
    assert lines[-2:] == ["@End", ""]


def refusals(cfg: SynthConfig, out: Path) -> list[tuple[str, str]]:
    """(the section named, the message) of each door a bad config meets: validate, noun_inventory under a
    caller's key, write_sessions."""
    doors = [
        ("childes_synth", cfg.validate),
        ("corpus_g", lambda: noun_inventory(cfg, CDI_NOUNS, where="corpus_g")),
        ("childes_synth", lambda: write_sessions(cfg, CDI_NOUNS, out)),
    ]
    found = []
    for where, door in doors:
        with pytest.raises(PipelineError) as e:
            door()
        found.append((where, str(e.value)))
    return found


@pytest.mark.parametrize(
    "change, key, value",
    [
        ({"n_files": 0}, "n_files", 0),
        ({"turns_per_file": -2}, "turns_per_file", -2),
        ({"n_nouns": 0}, "n_nouns", 0),
        ({"p_mention_present": -0.5}, "p_mention_present", -0.5),
        ({"p_mention_absent": 1.25}, "p_mention_absent", 1.25),
        ({"p_act": 1.5}, "p_act", 1.5),
        ({"p_scoped": -0.25}, "p_scoped", -0.25),
    ],
)
def test_a_value_outside_its_bound_is_refused_at_every_door(tmp_path, change, key, value):
    for where, message in refusals(replace(SMALL, **change), tmp_path / "out"):
        (line,) = message.splitlines()
        assert_refused([line], f"{where}.{key}", value)


def test_shares_of_mentions_over_one_are_refused_exactly_at_every_door(tmp_path):
    cfg = replace(SMALL, p_mention_present=0.75, p_mention_absent=0.5)
    for where, message in refusals(cfg, tmp_path / "out"):
        assert_names(message, "p_mention_present + p_mention_absent", "<= 1")  # the rule, of both keys
        assert_refused([message], f"{where}.p_mention_absent", 1.25)


@pytest.mark.parametrize(
    "change",
    [
        {"n_files": 1, "turns_per_file": 1, "n_nouns": 1},
        {"p_mention_present": 0.0, "p_mention_absent": 0.0, "p_act": 0.0, "p_scoped": 0.0},
        {"p_mention_present": 1.0, "p_mention_absent": 0.0, "p_act": 1.0, "p_scoped": 1.0},
        {"p_mention_present": 0.0, "p_mention_absent": 1.0},
        {"p_mention_present": 0.5, "p_mention_absent": 0.5},
    ],
)
def test_boundary_configs_are_valid(change):
    cfg = replace(SMALL, **change)
    cfg.validate()
    assert len(noun_inventory(cfg, CDI_NOUNS)) == cfg.n_nouns

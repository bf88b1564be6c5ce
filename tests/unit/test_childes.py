"""The CHILDES reader: turns extracted from a real transcript (Brown, Eve) and from hand-written ones, and
the reader's pieces at exact values: decoding, logical tiers, participants, main tiers, directories, zip
archives and their members' limits, the pylangacq parser's checks. Every refusal names the file and, where
there is one, the line."""

import io
import shutil
import stat
import tempfile
import types
import zipfile

import pandas as pd
import pytest
from refusals import refuses, refuses_key

from emergence.core.config import from_dict
from emergence.studies.grounding import childes
from emergence.studies.grounding.childes import ExtractParams, extract_turns, turn_counts, validate_chat, without_child

# ---- turns of Eve's transcript and of hand-written ones

EVE = "childes/Brown-Eve-010600a.cha"
HEADER = """@UTF8
@Begin
@Languages:\teng
@Participants:\tCHI Target_Child, MOT Mother
@ID:\teng|x|CHI|1;06.00|female|||Target_Child|||
@ID:\teng|x|MOT||female|||Mother|||
"""
# line 7: the first main tier after HEADER
TURNS = """*MOT:\tlook (.) at &=laughs the [/] the ice+cream &-uh ‡ xxx teddy_bear . [+ IMP]
%act:\tgives Eve the tape+recorder , [+ foo] and a teddy_bear
%sit:\tEve sits (on the floor)
%gpx:\t<bef> points at CHI's cup
*CHI:\tyes „ you &=0v do +...
%act:\t<aft> drops cup
@Comment:\ta header between turns
*CHI:\tmi:lk
\tplease !
@End
"""


def cha(tmp_path, body, name="t.cha"):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + body)
    return path


@pytest.fixture(scope="module")
def eve(shared_data):
    return extract_turns(shared_data / EVE)


def test_eve_counts_match_the_transcript(shared_data):
    assert turn_counts(shared_data / EVE) == {"utterances": 1588, "act": 18, "sit": 2, "gpx": 9}


def test_eve_rows_point_at_their_main_tiers(shared_data, eve):
    lines = (shared_data / EVE).read_text().split("\n")
    assert len(eve) == 1588 and eve["line"].dtype == "int64"
    assert set(eve["file"]) == {"Brown-Eve-010600a.cha"}
    for row in eve.itertuples():  # the None item at index 742 must not shift later lines
        assert lines[row.line - 1].startswith(f"*{row.speaker}:\t"), row.line
    first = eve.iloc[0]
    assert (first.line, first.speaker, first.lan, first.env) == (14, "CHI", ["more", "cookie"], [])
    assert first.tokens == ["<CHI>", "more<LAN>", "cookie<LAN>"]  # [+ IMP] and '.' gone


def test_eve_env_tokens_follow_the_scopes(eve):
    by_line = eve.set_index("line")["tokens"]
    # *MOT: want me to turn it ?  %act: <aft> winds box
    assert by_line[1138] == ["<MOT>", *(w + "<LAN>" for w in "want me to turn it".split()), "winds<ENV>", "box<ENV>"]
    # *MOT: that's your spoon .  %act: <bef> gives Eve more tapioca
    assert by_line[7592][:6] == ["<MOT>", "gives<ENV>", "eve<ENV>", "more<ENV>", "tapioca<ENV>", "that's<LAN>"]
    # *CHI: xxx do it .  %sit: <aft> doorbell rings
    assert by_line[4344] == ["<CHI>", "do<LAN>", "it<LAN>", "doorbell<ENV>", "rings<ENV>"]
    assert by_line[2685] == ["<CHI>", "pointed<ENV>", "at<ENV>", "tape_recorder<ENV>", "hot<LAN>"]
    words = {w for col in ("env", "lan") for ws in eve[col] for w in ws}
    for w in words:
        assert w == w.lower() and w[0].isalnum() and not set(w) & set("+&[]()‡„.?!,:<> "), w
    assert {"graham_cracker", "tape_recorder"} <= words and "xxx" not in words


def test_turn_order_and_cleaning(tmp_path):
    df = extract_turns(cha(tmp_path, TURNS))
    assert df["line"].tolist() == [7, 11, 14]  # a continuation line and a mid-file header in between
    assert df["speaker"].tolist() == ["MOT", "CHI", "CHI"]
    mot, chi, chi2 = df.to_dict("records")
    assert mot["lan"] == ["look", "at", "the", "ice_cream", "teddy_bear"]
    sit = ["eve", "sits", "on", "the", "floor"]
    bef = ["points", "at", "chi's", "cup"]  # %gpx <bef>
    act = ["gives", "eve", "the", "tape_recorder", "and", "a", "teddy_bear"]
    assert mot["env"] == sit + bef + act
    assert mot["tokens"] == (["<MOT>"] + [w + "<ENV>" for w in sit + bef + act] + [w + "<LAN>" for w in mot["lan"]])
    assert chi["tokens"] == ["<CHI>", "yes<LAN>", "you<LAN>", "do<LAN>", "drops<ENV>", "cup<ENV>"]
    assert chi2["lan"] == ["milk", "please"]


def test_two_tiers_in_one_slot_keep_both_in_tier_order(tmp_path):
    body = "*MOT:\tsee .\n%act:\t<bef> picks up ball\n%gpx:\t<bef> points\n%sit:\tat home\n@End\n"
    mot = extract_turns(cha(tmp_path, body)).iloc[0]
    # %act and %gpx both before the words: actions then gestures, after the situation
    assert mot.env == ["at", "home", "picks", "up", "ball", "points"]


def test_split_compounds_applies_to_every_tier(tmp_path):
    mot = extract_turns(cha(tmp_path, TURNS), split_compounds=True).iloc[0]
    assert mot.lan == ["look", "at", "the", "ice", "cream", "teddy", "bear"]
    assert mot.env[-6:] == ["tape", "recorder", "and", "a", "teddy", "bear"]


def test_extract_turns_columns_and_an_empty_transcript(tmp_path):
    df = extract_turns(cha(tmp_path, TURNS))
    assert list(df.columns) == ["file", "line", "speaker", "env", "lan", "tokens"] and df["line"].dtype == "int64"
    empty = cha(tmp_path, "@End\n", name="empty.cha")
    with refuses(empty, "no utterances"):
        extract_turns(empty)


def test_transcripts_where_the_child_never_speaks_are_listed(tmp_path):
    src = tmp_path / "corpus"
    cha(src, "*MOT:\tball ?\n*CHI:\tball .\n@End\n", "talks.cha")
    cha(src, "*MOT:\thello .\n*MOT:\tlook .\n@End\n", "mother_only.cha")
    # the child declared and even named on a dependent tier, but no *CHI: main tier
    cha(src, "*MOT:\tlook .\n%act:\tCHI points\n@End\n", "Eve/silent.cha")
    assert without_child(extract_turns(src)) == ["Eve/silent.cha", "mother_only.cha"]
    assert without_child(extract_turns(src / "talks.cha")) == []
    # listed in name order whatever order the turns come in
    turns = pd.DataFrame({"file": ["b.cha", "a.cha", "c.cha"], "speaker": ["MOT", "MOT", "CHI"]})
    assert without_child(turns) == ["a.cha", "b.cha"]


# ---- decoding

HEAD = ["@UTF8", "@Begin", "@Participants:\tCHI Target_Child, MOT Mother"]


@pytest.mark.parametrize(
    "data, line",
    [(b"\xe9abc\n@End", 1), (b"\n\xe9", 2), (b"@UTF8\n@Begin\ncaf\xe9\n", 3)],
    ids=["first_line", "second_line_after_a_lone_newline", "third_line"],
)
def test_a_bad_byte_names_its_own_line(data, line):
    with refuses(f"x.cha: line {line}: ", "UTF-8", "0xe9"):
        childes._decode(data, "x.cha")


def test_bad_encoding_names_the_line_of_the_first_bad_byte(tmp_path):
    path = tmp_path / "latin1.cha"
    path.write_bytes((HEADER + "*CHI:\thi .\n").encode() + "*MOT:\tcaf\xe9 .\n@End\n".encode("latin-1"))
    with refuses(path, "line 8", "UTF-8", "0xe9"):
        validate_chat(path)


def test_decode_drops_crlf_and_a_leading_bom_only():
    # the CR of a CRLF goes; other trailing blanks, a leading CR, an X before the CR and a BOM that is
    # not at the very start all stay
    data = "\ufeff@UTF8\r\nab \t\r\n\rcd\naX\r\nmid\ufeff\n".encode()
    assert childes._decode(data, "x.cha") == ["@UTF8", "ab \t", "\rcd", "aX", "mid\ufeff", ""]


def test_a_bom_at_the_end_is_kept():
    assert childes._decode("a\ufeff".encode(), "x.cha") == ["a\ufeff"]


# ---- logical tiers


def test_continuation_lines_with_a_tab_or_a_space_join_their_tier():
    lines = ["@Begin", "*CHI:\tmi:lk", "\tplease", "*MOT:\tlook  ", "  at it", "%act:\tgives  ", "@End"]
    assert list(childes._logical_tiers(lines)) == [
        (1, "@Begin"),
        (2, "*CHI:\tmi:lk please"),
        (4, "*MOT:\tlook at it"),
        (6, "%act:\tgives"),
        (7, "@End"),
    ]


def test_a_lone_blank_line_is_a_continuation_too():
    assert list(childes._logical_tiers(["*CHI:\thi", " ", "\t", "@End"])) == [(1, "*CHI:\thi  "), (4, "@End")]


# ---- participants


@pytest.mark.parametrize(
    "header, codes",
    [
        ("@Participants:\tCHI Eve Target_Child, MOT Mother", {"CHI", "MOT"}),
        ("@Participants:CHI Eve Target_Child, MOT Mother", {"CHI", "MOT"}),  # no blank after the colon
        ("@Participants:\tCHI Eve Target_Child, MOT Mother:Step, FAT Father", {"CHI", "MOT", "FAT"}),  # colon in a role
        ("@Participants:\tCHI Target_Child,, MOT Mother, ", {"CHI", "MOT"}),  # empty entries skipped
    ],
)
def test_participant_codes_are_the_first_word_of_each_entry(header, codes):
    assert childes._participant_codes(header) == codes


# ---- main tiers


def test_main_tiers_name_the_line_and_speaker():
    lines = HEAD + ["*CHI:\thi .", "%act:\truns", "*MOT:\tyes", "\tdear .", "*CHI:\tno .", "@End", ""]
    assert childes._main_tiers(lines, "x.cha") == [(4, "CHI"), (6, "MOT"), (8, "CHI")]


@pytest.mark.parametrize(
    "text, line, named",
    [
        (HEADER.replace("@Begin\n", "") + "*CHI:\thi .\n@End\n", 2, ["missing", "@Begin"]),
        (HEADER + "*CHI:\thi .\n%act:\truns\n", 8, ["missing", "@End"]),
        (HEADER + "%act:\truns\n*CHI:\thi .\n@End\n", 7, ["%act", "main tier"]),
        (HEADER + "*CHI:\thi .\n*FAT:\thello .\n@End\n", 8, ["FAT", "@Participants"]),
        (HEADER + "*CHI:\thi .\n@End\n*CHI:\tagain .\n", 9, ["after @End"]),
    ],
)
def test_malformed_chat_names_file_and_line(tmp_path, text, line, named):
    path = tmp_path / "bad.cha"
    path.write_text(text)
    with refuses(f"{path}: line {line}: ", *named):
        validate_chat(path)
    with refuses(f"{path}: line {line}: ", *named):
        extract_turns(tmp_path)  # the extractor checks before it parses


def _refused(lines, line: int, *named):
    """The tiers `lines` of x.cha are refused in one line naming the file, `line N` and `named`."""
    with refuses(f"x.cha: line {line}: ", *named):
        childes._main_tiers(lines, "x.cha")


def test_an_empty_file_misses_begin_on_line_1():
    _refused([""], 1, "missing", "@Begin")


def test_a_main_tier_before_any_participants_is_undeclared():
    _refused(["@Begin", "*CHI:\thi .", "@End"], 2, "CHI", "@Participants")


LONG = "*CH I:\t" + "abcdefghij" * 5  # 57 characters: the message shows exactly the first 40


def test_errors_quote_the_first_40_characters_of_the_tier():
    assert len(LONG[:41]) == 41  # a cut at 41 would show
    _refused(["@UTF8", LONG, "@Begin"], 2, "@Begin", repr(LONG[:40]))
    _refused(HEAD + [LONG, "@End"], 4, "main tier", repr(LONG[:40]))
    _refused(HEAD + ["*CHI :\thi", "@End"], 4, "main tier", repr("*CHI :\thi"))


# ---- inputs: a file, a directory or a zip archive


def test_directory_and_zip_give_the_same_rows(tmp_path):
    src = tmp_path / "corpus"
    cha(src, "*CHI:\tball .\n%act:\tthrows ball\n@End\n", "Eve/b.cha")
    cha(src, "*MOT:\thello .\n@End\n", "a.cha")
    (src / "notes.txt").write_text("not a transcript")
    from_dir = extract_turns(src)
    assert from_dir["file"].tolist() == ["Eve/b.cha", "a.cha"]  # sorted, recursive, only .cha
    assert from_dir["line"].tolist() == [7, 7]
    archive = tmp_path / "Corpus.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in ("Eve/b.cha", "a.cha", "notes.txt"):
            zf.write(src / f, f"Corpus/{f}")
    from_zip = extract_turns(archive)
    assert from_zip["file"].tolist() == ["Corpus/" + f for f in from_dir["file"]]
    assert from_zip.drop(columns="file").equals(from_dir.drop(columns="file"))
    assert turn_counts(archive) == {"utterances": 2, "act": 1, "sit": 0, "gpx": 0}


def test_eve_copy_in_a_directory_keeps_its_relative_name(shared_data, tmp_path):
    (tmp_path / "Brown" / "Eve").mkdir(parents=True)
    shutil.copy(shared_data / EVE, tmp_path / "Brown" / "Eve" / "010600a.cha")
    assert turn_counts(tmp_path)["utterances"] == 1588


def test_missing_inputs_are_named(tmp_path):
    with refuses(tmp_path / "nope.cha", "not found"):
        validate_chat(tmp_path / "nope.cha")
    with refuses(tmp_path / "nope", "not found"):
        extract_turns(tmp_path / "nope")
    (tmp_path / "fake.zip").write_text("not a zip")
    with refuses(tmp_path / "fake.zip", "zip"):
        extract_turns(tmp_path / "fake.zip")


def _symlink_member(name: str, target: str) -> tuple[zipfile.ZipInfo, str]:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, target


@pytest.mark.parametrize(
    "member, reason",
    [
        ("../evil.cha", "'..' component"),
        ("Corpus/../../evil.cha", "'..' component"),
        ("{tmp_path}/abs-evil.cha", "absolute path"),  # inside tmp_path, should the guard ever fail
        ("Corpus/link.cha", "symbolic link"),
    ],
)
def test_zip_members_escaping_the_target_are_refused(tmp_path, monkeypatch, member, reason):
    member = member.format(tmp_path=tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where extraction would happen
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    archive = work / "bad.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("Corpus/ok.cha", HEADER + "*CHI:\thi .\n@End\n")
        if reason == "symbolic link":
            zf.writestr(*_symlink_member(member, "/etc/passwd"))
        else:
            zf.writestr(member, HEADER + "*CHI:\tgotcha .\n@End\n")
    with refuses(archive, repr(member), reason):
        extract_turns(archive)
    assert not (tmp_path / "evil.cha").exists() and not (tmp_path / "a" / "evil.cha").exists()
    assert not (work / "evil.cha").exists()
    assert not list(scratch.iterdir())  # the temporary extraction directory is gone
    assert not (tmp_path / "abs-evil.cha").exists()


@pytest.mark.parametrize(
    "name, reason",
    [
        ("\\evil.cha", "absolute path"),
        ("/evil.cha", "absolute path"),
        ("c:/evil.cha", "absolute path"),
        ("C:evil.cha", "absolute path"),
        ("z:\\evil.cha", "absolute path"),
        ("..\\evil.cha", "'..' component"),
        ("Corpus\\..\\..\\evil.cha", "'..' component"),
        ("Corpus\\Eve\\a.cha", None),
        ("Corpus/c:a.cha", None),  # a drive letter only counts at the start
        ("1:/a.cha", None),
    ],
)
def test_unsafe_member_names(name, reason):
    assert childes._unsafe(zipfile.ZipInfo(name)) == reason


def test_zip_members_are_read_with_the_archive_named_for_errors(tmp_path, monkeypatch):
    archive = _zip(tmp_path / "corpus.zip", {"C/a.cha": HEADER + "*MOT:\tlook .\n@End\n"})
    seen = []
    real = childes._read_member
    monkeypatch.setattr(
        childes, "_read_member", lambda zf, info, where, limits: seen.append(where) or real(zf, info, where, limits)
    )
    assert len(extract_turns(archive)) == 1 and seen == [archive]


# ---- zip limits


def _zip(path, members: dict[str, str | bytes], compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        for name, body in members.items():
            zf.writestr(name, body)
    return path


OK_CHAT = HEADER + "*CHI:\thi .\n@End\n"
# 2 MB of valid CHAT: the same turn repeated deflates about 300-fold
BIG_CHAT = HEADER + "*MOT:\tlook at the ball .\n" * 95000 + "@End\n"


@pytest.mark.parametrize(
    "members, limits, named",
    [
        ({f"C/{i}.cha": OK_CHAT for i in range(4)}, dict(max_members=3), ["4 .cha members", "max_members (3)"]),
        (
            {"C/a.cha": BIG_CHAT},
            dict(max_member_mb=1, max_ratio=10**6),
            ["'C/a.cha'", "2 MB", "max_member_mb (1)"],
        ),
        (
            {"C/a.cha": BIG_CHAT, "C/b.cha": BIG_CHAT},
            dict(max_total_mb=4, max_ratio=10**6),
            ["5 MB", "max_total_mb (4)"],
        ),
        ({"C/a.cha": BIG_CHAT}, dict(), ["'C/a.cha'", "-fold", "max_ratio (100)"]),
    ],
    ids=["members", "member_size", "total_size", "ratio"],
)
def test_a_zip_over_a_limit_stops_before_inflating(tmp_path, monkeypatch, members, limits, named):
    archive = _zip(tmp_path / "bomb.zip", members)
    inflated = []
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda *a, **k: inflated.append(a) or pytest.fail("inflated"))
    with refuses(f"{archive}: ", "childes_extract.", *named):
        extract_turns(archive, limits=ExtractParams(**limits))
    assert not inflated


def test_a_member_whose_header_lies_is_refused(tmp_path):
    # the declared sizes pass every limit; reading stops at the cap, or zipfile finds the lie (CRC,
    # size) first: either way one line, never the whole member in memory
    archive = _zip(tmp_path / "liar.zip", {"C/a.cha": BIG_CHAT}, compression=zipfile.ZIP_STORED)
    data = bytearray(archive.read_bytes())
    size = len(BIG_CHAT.encode())
    # the central directory's uncompressed size (and the local header's) claim 1 KB
    for offset in [i for i in range(len(data) - 4) if int.from_bytes(data[i : i + 4], "little") == size]:
        data[offset : offset + 4] = (1024).to_bytes(4, "little")
    archive.write_bytes(bytes(data))
    with refuses(archive) as e:
        extract_turns(archive, limits=ExtractParams(max_member_mb=1))
    said = str(e.value)
    assert all(n in said for n in ("'C/a.cha'", "childes_extract.max_member_mb (1)")) or "zip" in said, said


def test_a_plain_transcript_over_the_member_cap_is_one_line(tmp_path):
    big = tmp_path / "big.cha"
    big.write_text(BIG_CHAT)
    with refuses(f"{big}: ", "childes_extract.max_member_mb (1)"):
        extract_turns(big, limits=ExtractParams(max_member_mb=1))


def test_a_plain_transcript_exactly_at_the_member_cap_is_read(tmp_path, monkeypatch):
    text = HEADER + "*MOT:\tlook .\n@End\n"
    at_cap = cha(tmp_path, text[len(HEADER) :], name="at.cha")
    monkeypatch.setattr(childes, "MB", at_cap.stat().st_size)  # max_member_mb 1 = exactly this file's size
    assert extract_turns(at_cap, limits=ExtractParams(max_member_mb=1))["speaker"].tolist() == ["MOT"]
    over = cha(tmp_path, text[len(HEADER) :] + "\n", name="over.cha")
    with refuses(f"{over}: ", "childes_extract.max_member_mb (1)"):
        extract_turns(over, limits=ExtractParams(max_member_mb=1))


@pytest.mark.parametrize("key", ["max_members", "max_member_mb", "max_total_mb", "max_ratio"])
def test_zip_limits_are_checked_as_params(key):
    # a limit of 1 (one member, one MB, ratio 1) still lets something through
    assert getattr(from_dict(ExtractParams, {key: 1}, "childes_extract"), key) == 1
    for where, value in (("childes_extract", 0), ("grounding_extract", -3)):  # under the key of the section read
        with refuses_key(f"{where}.{key}", value):
            from_dict(ExtractParams, {key: value}, where)


def _info(name, size, compressed):
    info = zipfile.ZipInfo(name)
    info.file_size, info.compress_size = size, compressed
    return info


def _checked(infos, **limits):
    zf = types.SimpleNamespace(infolist=lambda: infos)
    return childes._checked_members(zf, "A.zip", ExtractParams(**limits))


def _refused_zip(infos, *named, **limits):
    """The members `infos` of A.zip are refused in one line naming the archive and `named`."""
    with refuses("A.zip: ", *named):
        _checked(infos, **limits)


MB = childes.MB


def test_limits_hold_exactly_at_the_limit():
    three = [_info(f"C/{i}.cha", 10, 10) for i in range(3)]
    assert _checked(three + [_info("C/", 0, 0), _info("C/x.txt", 10, 10)], max_members=3) == three
    two = [_info("C/a.cha", MB, MB), _info("C/b.cha", MB, MB)]
    assert _checked(two, max_total_mb=2) == two
    one = [_info("C/a.cha", 2 * MB, 2 * MB)]
    assert _checked(one, max_member_mb=2) == one
    at_ratio = [_info("C/a.cha", 500, 5)]
    assert _checked(at_ratio, max_ratio=100) == at_ratio
    tiny = [_info("C/a.cha", 100, 1), _info("C/b.cha", 100, 0)]  # a size-0 member counts as 1 byte compressed
    assert _checked(tiny, max_ratio=100) == tiny


def test_one_over_each_limit_is_refused_with_the_numbers():
    _refused_zip([_info("C/e.txt", 1, 1)], "no .cha files")
    _refused_zip([_info(f"C/{i}.cha", 10, 10) for i in range(3)], "3 .cha members", "max_members (2)", max_members=2)
    infos = [_info("C/a.cha", MB, MB), _info("C/b.cha", MB + 1, MB)]
    _refused_zip(infos, "2 MB", "childes_extract.max_total_mb (2)", max_total_mb=2)
    infos = [_info("C/a.cha", 3 * MB + 1, 3 * MB)]
    _refused_zip(infos, "'C/a.cha'", "3 MB", "childes_extract.max_member_mb (3)", max_member_mb=3)
    infos = [_info("C/a.cha", 1000, 2)]
    _refused_zip(infos, "'C/a.cha'", "500-fold", "childes_extract.max_ratio (100)", max_ratio=100)
    for compressed in (0, 1):
        infos = [_info("C/a.cha", 101, compressed)]
        _refused_zip(infos, "'C/a.cha'", "101-fold", "childes_extract.max_ratio (100)", max_ratio=100)


# ---- reading a member in chunks


@pytest.mark.parametrize(("n_bytes", "refused"), [(20, False), (21, True), (35, True)])
def test_read_member_counts_every_chunk_against_the_cap(tmp_path, monkeypatch, n_bytes, refused):
    # The cap is on the running total, not on one chunk: read 10 bytes at a time against a 20-byte cap,
    # the third chunk is the one that passes it (whatever the header says: it is not consulted here).
    monkeypatch.setattr(childes, "MB", 10)
    body = bytes(range(65, 65 + n_bytes))
    archive = _zip(tmp_path / "c.zip", {"C/a.cha": body})
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo("C/a.cha")
        limits = ExtractParams(max_member_mb=2)
        if not refused:
            assert childes._read_member(zf, info, archive, limits) == body
            return
        with refuses(f"{archive}: ", "'C/a.cha'", "childes_extract.max_member_mb (2)"):
            childes._read_member(zf, info, archive, limits)


def _zip_member(body: bytes):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("C/a.cha", body)
    zf = zipfile.ZipFile(buf)
    return zf, zf.getinfo("C/a.cha")


def test_a_member_read_in_chunks_is_whole_up_to_the_cap(monkeypatch):
    monkeypatch.setattr(childes, "MB", 4)  # cap of max_member_mb=2: 8 bytes, read 4 at a time
    zf, info = _zip_member(b"abcdefgh")
    assert childes._read_member(zf, info, "A.zip", ExtractParams(max_member_mb=2)) == b"abcdefgh"
    zf, info = _zip_member(b"abcdefghi")
    with refuses("A.zip: ", "'C/a.cha'", "childes_extract.max_member_mb (2)"):
        childes._read_member(zf, info, "A.zip", ExtractParams(max_member_mb=2))
    zf, info = _zip_member(b"abcdefghijk")  # every chunk under the cap, their sum over it
    with refuses("A.zip: ", "'C/a.cha'", "childes_extract.max_member_mb (2)"):
        childes._read_member(zf, info, "A.zip", ExtractParams(max_member_mb=2))


def test_reading_asks_for_one_chunk_at_a_time_and_stops_past_the_cap(monkeypatch):
    monkeypatch.setattr(childes, "MB", 4)
    asked = []

    class Endless(io.RawIOBase):  # a member whose header lies: it never ends
        def read(self, n=-1):
            asked.append(n)
            return b"x" * (n if n is not None and n >= 0 else 1000)

    zf = types.SimpleNamespace(open=lambda info: Endless())
    with refuses("A.zip", "'C/a.cha'", "childes_extract.max_member_mb (2)"):
        childes._read_member(zf, zipfile.ZipInfo("C/a.cha"), "A.zip", ExtractParams(max_member_mb=2))
    assert asked == [4, 4, 4]


# ---- pylangacq

BODY = ("\n".join(HEAD + ["*CHI:\thi .", "*MOT:\tyes .", "@End", ""])).encode()


def test_a_parser_failure_is_one_line_naming_the_file(monkeypatch):
    def boom(*a, **k):
        raise ValueError("bad tier")

    monkeypatch.setattr(childes.pylangacq.CHAT, "from_strs", boom)
    with refuses("A.zip/C/a.cha: ", "CHAT", "ValueError: bad tier"):  # and the parser's own words
        list(childes._utterances(BODY, "A.zip/C/a.cha"))


def test_a_parser_that_loses_an_utterance_is_caught(monkeypatch):
    one = types.SimpleNamespace(participant="CHI", tiers={"CHI": "hi ."})
    header = types.SimpleNamespace(participant=None, tiers=None)
    fake = types.SimpleNamespace(utterances=lambda: [header, one])
    monkeypatch.setattr(childes.pylangacq.CHAT, "from_strs", lambda *a, **k: fake)
    with refuses("a.cha: ", "pylangacq", "1 utterances", "2 main tiers"):
        list(childes._utterances(BODY, "a.cha"))


def test_utterances_pair_each_main_tier_line_with_its_utterance():
    got = [(line, u.participant, [t.word for t in u.tokens]) for line, u in childes._utterances(BODY, "a.cha")]
    assert got == [(4, "CHI", ["hi", "."]), (5, "MOT", ["yes", "."])]

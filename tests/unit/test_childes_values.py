"""Exact values of the CHILDES reader's pieces: decoding, tiers, participants, zip guards and limits."""

import io
import types
import zipfile

import pytest
from refusals import refuses

from emergence.studies.grounding import childes
from emergence.studies.grounding.childes import ExtractParams

HEAD = ["@UTF8", "@Begin", "@Participants:\tCHI Target_Child, MOT Mother"]


# --- decoding ----------------------------------------------------------------


@pytest.mark.parametrize(
    "data, line",
    [(b"\xe9abc\n@End", 1), (b"\n\xe9", 2), (b"@UTF8\n@Begin\ncaf\xe9\n", 3)],
    ids=["first_line", "second_line_after_a_lone_newline", "third_line"],
)
def test_a_bad_byte_names_its_own_line(data, line):
    with refuses(f"x.cha: line {line}: ", "UTF-8", "0xe9"):
        childes._decode(data, "x.cha")


def test_decode_drops_crlf_and_a_leading_bom_only():
    # the CR of a CRLF goes; other trailing blanks, a leading CR, an X before the CR and a BOM that is
    # not at the very start all stay
    data = "\ufeff@UTF8\r\nab \t\r\n\rcd\naX\r\nmid\ufeff\n".encode()
    assert childes._decode(data, "x.cha") == ["@UTF8", "ab \t", "\rcd", "aX", "mid\ufeff", ""]


def test_a_bom_at_the_end_is_kept():
    assert childes._decode("a\ufeff".encode(), "x.cha") == ["a\ufeff"]


# --- logical tiers -------------------------------------------------------------


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


# --- participants ----------------------------------------------------------------


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


# --- main tiers --------------------------------------------------------------------


def test_main_tiers_name_the_line_and_speaker():
    lines = HEAD + ["*CHI:\thi .", "%act:\truns", "*MOT:\tyes", "\tdear .", "*CHI:\tno .", "@End", ""]
    assert childes._main_tiers(lines, "x.cha") == [(4, "CHI"), (6, "MOT"), (8, "CHI")]


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


# --- zip members ---------------------------------------------------------------------


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


# --- pylangacq -------------------------------------------------------------------------


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

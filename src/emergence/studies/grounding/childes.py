"""CHILDES transcripts as grounded turns (study G, Wu et al. arXiv 2510.13796).

Each utterance becomes one turn: the words spoken on the main tier are
linguistic tokens `w<LAN>`; the words of the %sit, %act and %gpx dependent
tiers (what the situation is, what people do, where they point) are
environmental tokens `w<ENV>`. A turn reads in the order things happen:

    <SPK>  situation  <bef>-events  events  utterance  <aft>-events

pylangacq parses the main tier (it already resolves retracings, omissions
and most codes); the dependent tiers are free text cleaned here. pylangacq
reports no line numbers, so a raw scan of each file finds the main tiers
and, on the way, rejects malformed CHAT with an error naming file and line.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Annotated

import pandas as pd
import pylangacq
from annotated_types import Ge

from emergence.core.chat import cha_files, word_parts
from emergence.core.io import PipelineError

ENV_TIERS = ("%sit", "%act", "%gpx")  # order within a slot: situation before actions before gestures
COLUMNS = ["file", "line", "speaker", "env", "lan", "tokens"]
_PRE_BEGIN = ("@UTF8", "@PID:", "@Font:", "@Window:", "@ColorWords")  # headers allowed above @Begin
_MAIN = re.compile(r"\*([A-Za-z0-9_]+):")
_SCOPE = re.compile(r"\s*<(bef|aft)>\s*")
_BRACKET_CODE = re.compile(r"\[[^\]]*\]")  # [+ IMP], [/], [: word], [=! cries]
_EDGE_PUNCT = '".,;:!?()<>'


# --- raw pre-check ---------------------------------------------------------


def _decode(data: bytes, name: str) -> list[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise PipelineError(f"{name}: line {line}: not UTF-8 (byte {data[e.start]:#04x})") from None
    # split on \n only: str.splitlines also breaks at \x0c, \u2028 ... and would shift line numbers
    return [line.rstrip("\r") for line in text.removeprefix("\ufeff").split("\n")]


def _logical_tiers(lines: list[str]) -> Iterator[tuple[int, str]]:
    """(first line number, text) of each tier, its TAB-indented continuation lines joined on."""
    start, text = 0, ""
    for no, line in enumerate(lines, 1):
        if line[:1] in (" ", "\t") and text:
            text += " " + line.strip()
            continue
        if text:
            yield start, text
        start, text = no, line.rstrip()
    if text:
        yield start, text


def _participant_codes(header: str) -> set[str]:
    # "@Participants:\tCHI Eve Target_Child, MOT Mother": the code leads each entry
    return {entry.split()[0] for entry in header.split(":", 1)[1].split(",") if entry.split()}


def _main_tiers(lines: list[str], name: str) -> list[tuple[int, str]]:
    """(line, speaker) of every main tier; PipelineError naming file and line on malformed CHAT."""
    mains: list[tuple[int, str]] = []
    speakers: set[str] = set()
    begun = ended = False
    last = 1
    for no, tier in _logical_tiers(lines):
        where, last = f"{name}: line {no}", no
        if ended:
            raise PipelineError(f"{where}: text after @End")
        if not begun:
            begun = tier == "@Begin"
            if not begun and not tier.startswith(_PRE_BEGIN):
                raise PipelineError(f"{where}: missing @Begin before {tier[:40]!r}")
        elif tier == "@End":
            ended = True
        elif tier.startswith("@Participants:"):
            speakers = _participant_codes(tier)
        elif tier.startswith("*"):
            match = _MAIN.match(tier)
            if match is None:
                raise PipelineError(f"{where}: malformed main tier {tier[:40]!r}")
            if match[1] not in speakers:
                raise PipelineError(f"{where}: speaker {match[1]} is not declared in @Participants")
            mains.append((no, match[1]))
        elif tier.startswith("%") and not mains:
            raise PipelineError(f"{where}: dependent tier {tier.split(':')[0]} before any main tier")
    if not begun:
        raise PipelineError(f"{name}: line {last}: missing @Begin")
    if not ended:
        raise PipelineError(f"{name}: line {last}: missing @End at the end of the file")
    return mains


def validate_chat(path: str | os.PathLike) -> None:
    """Reject malformed CHAT with a one-line PipelineError naming the file and line (1-based)."""
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path}: CHAT file not found")
    _main_tiers(_decode(path.read_bytes(), str(path)), str(path))


# --- word cleaning ---------------------------------------------------------


def _clean(tokens: list[str], split_compounds: bool) -> list[str]:
    """Lower-cased words of CHAT tokens; codes, pauses, terminators and punctuation dropped."""
    return [w for t in tokens for w in word_parts(t.lower().strip(_EDGE_PUNCT), split_compounds)]


def _scoped_words(text: str, split_compounds: bool) -> tuple[str | None, list[str]]:
    """A dependent tier's scope ('bef', 'aft' or None) and its words."""
    scope = _SCOPE.match(text)
    if scope:
        text = text[scope.end() :]
    words = _clean(_BRACKET_CODE.sub(" ", text).split(), split_compounds)
    return (scope[1] if scope else None), words


def _turn(utterance, split_compounds: bool) -> tuple[list[str], list[str], list[str]]:
    """(env words, lan words, model tokens) of one utterance."""
    slots: dict[str, list[str]] = {"sit": [], "bef": [], "during": [], "aft": []}  # turn order
    for tier in ENV_TIERS:
        if tier in utterance.tiers:
            scope, words = _scoped_words(utterance.tiers[tier], split_compounds)
            slots[scope or ("sit" if tier == "%sit" else "during")] += words
    lan = _clean([t.word for t in utterance.tokens], split_compounds)
    before = slots["sit"] + slots["bef"] + slots["during"]
    tokens = (
        [f"<{utterance.participant}>"]
        + [w + "<ENV>" for w in before]
        + [w + "<LAN>" for w in lan]
        + [w + "<ENV>" for w in slots["aft"]]
    )
    return before + slots["aft"], lan, tokens


# --- sources: file, directory or zip ---------------------------------------


def _unsafe(info: zipfile.ZipInfo) -> str | None:
    """Why extracting this member could write outside the target directory, if it could."""
    name = info.filename.replace("\\", "/")
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        return "absolute path"
    if ".." in PurePosixPath(name).parts:
        return "'..' component"
    if stat.S_ISLNK(info.external_attr >> 16):
        return "symbolic link"
    return None


MB = 1 << 20


def _checked_members(zf: zipfile.ZipFile, archive: Path, limits: ExtractParams) -> list[zipfile.ZipInfo]:
    """The .cha members, after checking every member's name and the archive's declared sizes against
    the limits: a zip bomb is refused before a byte of it is inflated."""
    members = zf.infolist()
    for info in members:
        reason = _unsafe(info)
        if reason:
            raise PipelineError(f"{archive}: refusing member {info.filename!r} ({reason})")
    chats = [m for m in members if not m.is_dir() and m.filename.lower().endswith(".cha")]
    if not chats:
        raise PipelineError(f"{archive}: zip holds no .cha files")
    if len(chats) > limits.max_members:
        raise PipelineError(
            f"{archive}: {len(chats)} .cha members, over childes_extract.max_members ({limits.max_members})"
        )
    total = sum(m.file_size for m in chats)
    if total > limits.max_total_mb * MB:
        raise PipelineError(
            f"{archive}: members expand to {total / MB:.0f} MB, over childes_extract.max_total_mb "
            f"({limits.max_total_mb})"
        )
    for m in chats:
        if m.file_size > limits.max_member_mb * MB:
            raise PipelineError(
                f"{archive}: member {m.filename!r} expands to {m.file_size / MB:.0f} MB, over "
                f"childes_extract.max_member_mb ({limits.max_member_mb})"
            )
        if m.file_size > limits.max_ratio * max(m.compress_size, 1):
            raise PipelineError(
                f"{archive}: member {m.filename!r} inflates {m.file_size / max(m.compress_size, 1):.0f}-fold, over "
                f"childes_extract.max_ratio ({limits.max_ratio})"
            )
    return chats


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, archive: Path, limits: ExtractParams) -> bytes:
    """A member's bytes, read in chunks and stopped at max_member_mb whatever its header claims."""
    cap, chunks, size = limits.max_member_mb * MB, [], 0
    with zf.open(info) as f:
        while chunk := f.read(MB):
            size += len(chunk)
            if size > cap:
                raise PipelineError(
                    f"{archive}: member {info.filename!r} expands past childes_extract.max_member_mb "
                    f"({limits.max_member_mb})"
                )
            chunks.append(chunk)
    return b"".join(chunks)


def _transcripts(path: Path, limits: ExtractParams) -> Iterator[tuple[str, str, bytes]]:
    """(name, label, bytes) of each transcript: name relative to the input root (a zip's member name),
    label what errors call it (the file's path, or archive.zip/member). A zip is read member by member
    in memory: nothing is extracted to disk, so nothing can be left behind."""
    if path.is_file() and path.suffix.lower() == ".zip":
        try:
            with zipfile.ZipFile(path) as zf:
                for info in _checked_members(zf, path, limits):
                    yield info.filename, f"{path}/{info.filename}", _read_member(zf, info, path, limits)
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as e:
            raise PipelineError(f"{path}: not a readable zip ({e.__class__.__name__}: {e})") from e
        return
    root = path if path.is_dir() else path.parent
    for f in cha_files(path):
        if f.stat().st_size > limits.max_member_mb * MB:
            raise PipelineError(f"{f}: over childes_extract.max_member_mb ({limits.max_member_mb})")
        yield f.relative_to(root).as_posix(), str(f), f.read_bytes()


def _utterances(data: bytes, label: str) -> Iterator[tuple[int, object]]:
    """(line of the main tier, pylangacq utterance) for every utterance of one transcript."""
    lines = _decode(data, label)
    mains = _main_tiers(lines, label)
    try:
        chat = pylangacq.CHAT.from_strs(["\n".join(lines)], parallel=False, strict=False)
    except Exception as e:  # the Rust parser raises ValueError and friends on malformed input
        raise PipelineError(f"{label}: not a readable CHAT file ({e.__class__.__name__}: {e})") from e
    # items without tiers are mid-file header changes (@Date ...), not utterances
    utterances = [u for u in chat.utterances() if u.tiers is not None]
    if [u.participant for u in utterances] != [speaker for _, speaker in mains]:
        raise PipelineError(
            f"{label}: pylangacq found {len(utterances)} utterances where the file has {len(mains)} main tiers"
        )
    for (line, _), u in zip(mains, utterances):
        yield line, u


def _all_utterances(path: str | os.PathLike, limits: ExtractParams) -> Iterator[tuple[str, int, object]]:
    for name, label, data in _transcripts(Path(path), limits):
        for line, u in _utterances(data, label):
            yield name, line, u


# --- public ----------------------------------------------------------------


def extract_turns(
    path: str | os.PathLike, split_compounds: bool = False, limits: ExtractParams | None = None
) -> pd.DataFrame:
    """One row per utterance of a .cha file, a directory of them or a CHILDES .zip.

    Columns: file, line (1-based line of the *SPK: main tier), speaker,
    env / lan (the environment and speech words, in turn order) and tokens
    (the model's view: `<SPK>`, then `w<ENV>` / `w<LAN>` in turn order).
    Compounds a_b / a+b stay one word `a_b` unless split_compounds.
    """
    rows = []
    for name, line, u in _all_utterances(path, limits or ExtractParams()):
        env, lan, tokens = _turn(u, split_compounds)
        rows.append((name, line, u.participant, env, lan, tokens))
    if not rows:
        raise PipelineError(f"{path}: no utterances, nothing to extract")
    df = pd.DataFrame(rows, columns=COLUMNS)
    df["line"] = df["line"].astype("int64")
    return df


def turn_counts(path: str | os.PathLike, limits: ExtractParams | None = None) -> dict[str, int]:
    """How many utterances there are, and how many carry each of the %act, %sit, %gpx tiers."""
    counts = {"utterances": 0, **{tier[1:]: 0 for tier in ENV_TIERS}}
    for _, _, u in _all_utterances(path, limits or ExtractParams()):
        counts["utterances"] += 1
        for tier in ENV_TIERS:
            counts[tier[1:]] += tier in u.tiers
    return counts


CHILD = "CHI"  # the CHAT code of the target child's main tier


def without_child(turns: pd.DataFrame) -> list[str]:
    """The transcripts (extract_turns' `file`) with no utterance of the child: a corpus of child-directed
    speech with the child never speaking is usually a wrong file or a speaker coded otherwise."""
    spoke = turns.groupby("file", sort=True)["speaker"].agg(lambda s: bool((s == CHILD).any()))
    return spoke.index[~spoke].tolist()


@dataclasses.dataclass
class ExtractParams:
    split_compounds: bool = False  # teddy_bear -> teddy, bear (else one word)
    max_members: Annotated[int, Ge(1)] = 50000  # .cha members of one zip
    max_member_mb: Annotated[int, Ge(1)] = 64  # one transcript, uncompressed
    max_total_mb: Annotated[int, Ge(1)] = 4096  # all .cha members of one zip, uncompressed
    max_ratio: Annotated[int, Ge(1)] = 100  # uncompressed / compressed size of one member (CHAT text: 5-10)

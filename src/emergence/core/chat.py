"""Reading CHILDES transcripts (CHAT format) as plain speech.

pylangacq parses the main tier into tokens and already drops most CHAT
annotation (retracings, [+ ...] postcodes, omitted 0words, unintelligible
xxx). What it leaves that is not speech -- pause/linker symbols, the +...
family of terminators, empty strings after contractions -- is filtered here,
and compounds (graham_cracker, ice+cream) become separate words.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pylangacq

from emergence.core.io import PipelineError, inside

TERMINATORS = frozenset(".?!")
UNINTELLIGIBLE = frozenset({"xxx", "yyy", "www"})
_COMPOUND = re.compile(r"[_+]")


def read_chat_file(path: str | os.PathLike) -> pylangacq.CHAT:
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path}: CHAT file not found")
    try:
        chat = pylangacq.read_chat(str(path), strict=False)  # strict=True rejects real CHILDES files
    except Exception as e:  # the parser raises OSError/ValueError on malformed input
        raise PipelineError(f"{path}: not a readable CHAT file ({e.__class__.__name__}: {e})") from e
    if not chat.utterances():  # a non-CHAT text file parses to nothing rather than failing
        raise PipelineError(f"{path}: no utterances, not a CHAT transcript")
    return chat


def _is_word(token: str) -> bool:
    """A spoken word: has a letter, is not a CHAT code (+..., &-um, xxx) or a linker (‡ „)."""
    return (
        any(ch.isalpha() for ch in token)
        and not token.startswith(("+", "&"))
        and not set(token) & {"‡", "„"}
        and token.lower() not in UNINTELLIGIBLE
    )


def word_parts(token: str, split_compounds: bool = True) -> list[str]:
    """One CHAT token as clean word(s): [] for a code, prolongation colons removed.

    Compounds (graham_cracker, ice+cream) become their parts, or one word
    joined by `_` when split_compounds is False, whichever mark they used.
    """
    if not _is_word(token):
        return []
    parts = [part for part in _COMPOUND.split(token.replace(":", "")) if part]  # mi:lk is milk
    return parts if split_compounds else ["_".join(parts)]


def speech_words(utterance) -> list[str]:
    """The words (and . ? ! terminators) spoken in one utterance, compounds split."""
    words = []
    for token in (t.word for t in utterance.tokens):
        if token in TERMINATORS:
            words.append(token)
        else:
            words.extend(word_parts(token))
    return words


def cha_files(path: Path) -> list[Path]:
    """The transcripts at `path`: the file itself, or a directory's .cha files (recursive, sorted)."""
    if path.is_dir():
        files = inside(path, sorted(path.rglob("*.cha")))
        if not files:
            raise PipelineError(f"{path}: directory holds no .cha files")
        return files
    if not path.exists():
        if path.is_symlink():  # a link loop or a dangling link: named as such by `inside`
            inside(path.parent, [path])
        raise PipelineError(f"{path}: CHAT file or directory not found")
    return [path]


def speech_documents(path: str | os.PathLike) -> list[str]:
    """One document per transcript: each utterance's speech on its own line.

    `path` is a .cha file or a directory searched recursively (sorted).
    Header changes mid-transcript (@Date ...) appear as items without tiers and
    are skipped, as are utterances with no words left.
    """
    documents = []
    for file in cha_files(Path(path)):
        lines = []
        for u in read_chat_file(file).utterances():
            if u.tiers is None or u.participant is None:
                continue
            words = speech_words(u)
            if words:
                lines.append(" ".join(words))
        documents.append("\n".join(lines))
    return documents

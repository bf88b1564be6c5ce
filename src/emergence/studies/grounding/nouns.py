"""The candidate noun list (paths.grounding_nouns) and the tab-separated data files of the study.

The shipped list, resources/grounding/nouns.tsv, is CDI-style: written for this
project after the categories of the MacArthur-Bates CDI Words & Sentences form,
not copied from it (its header says so). The paper takes "100 high-frequency
nouns of the CDI" with at least 100 occurrences of each form; the vocabulary
stage applies that filter (grounding_vocab.min_count) to whatever corpus it is
given and records how many of the list pass. The synthetic generators draw
their object inventory from the same list.
"""

from __future__ import annotations

import re
from pathlib import Path

from emergence.core.io import PipelineError

NOUN_COLUMNS = ("noun", "category")
NOUN = re.compile(r"[a-z][a-z'_-]*")  # a CHAT word, lower-case; compounds joined by `_` (teddy_bear)


def read_tsv(path: str | Path, columns: tuple[str, ...], what: str) -> list[tuple[int, list[str]]]:
    """(line number, fields) of each data row of a tab-separated file whose first non-comment line is
    the `columns` header ('#' starts a comment line); PipelineError naming file and line otherwise."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as e:
        raise PipelineError(f"{path}: {what} file not found") from e
    except (OSError, UnicodeDecodeError) as e:
        raise PipelineError(f"{path}: unreadable {what} file ({e.__class__.__name__}: {e})") from e
    rows = [(n, line) for n, line in enumerate(lines, 1) if line.strip() and not line.startswith("#")]
    if not rows or tuple(rows[0][1].split("\t")) != columns:
        where = f"{path}:{rows[0][0]}" if rows else str(path)
        raise PipelineError(f"{where}: the header must be the tab-separated columns {', '.join(columns)}")
    out = []
    for n, line in rows[1:]:
        fields = [f.strip() for f in line.split("\t")]
        if len(fields) != len(columns) or not all(fields):
            raise PipelineError(f"{path}:{n}: {len(columns)} non-empty tab-separated fields expected")
        out.append((n, fields))
    if not out:
        raise PipelineError(f"{path}: no {what} rows")
    return out


def read_nouns(path: str | Path) -> tuple[str, ...]:
    """The list's nouns in file order; PipelineError naming file and line for a malformed or repeated one."""
    nouns: dict[str, int] = {}
    for n, (noun, _category) in read_tsv(path, NOUN_COLUMNS, "noun list"):
        if not NOUN.fullmatch(noun):
            raise PipelineError(f"{path}:{n}: a noun is one lower-case word (compounds joined by _), got {noun!r}")
        if noun in nouns:
            raise PipelineError(f"{path}:{n}: noun {noun!r} repeats line {nouns[noun]}")
        nouns[noun] = n
    return tuple(nouns)

"""Atomic artifact I/O and the one error type stages turn into a one-line exit.

Every artifact is written to a temporary sibling and renamed into place only
when complete, so an interrupted stage never leaves a partial file behind.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


class PipelineError(Exception):
    """A user-facing failure: bad params, bad input file, bad checkpoint.

    The message must name the offending file or key; stages print it as one
    line and exit non-zero.
    """


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` on success.

    Works for files and directories. On any exception the temporary is removed
    and whatever was at `path` before is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{path.name}.*.tmp"):  # left by a process killed mid-write
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    target = tmp / path.name  # caller writes here (file or directory)
    try:
        yield target
        if not target.exists():
            raise PipelineError(f"{path}: nothing was written")
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        os.replace(target, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def inside(root: str | os.PathLike, files: list[Path]) -> list[Path]:
    """`files` found under the folder `root`, refusing a symbolic link that leads out of it (a corpus
    folder must not read, say, a system file through a link)."""
    base = Path(root).resolve()
    for f in files:
        try:
            target = f.resolve(strict=True)  # strict: a dangling link is named here, not read later
        except RuntimeError:  # how Python < 3.13 reports a link that leads back to itself
            raise PipelineError(f"{f}: symbolic link loop") from None
        except OSError as e:
            why = "symbolic link loop" if e.errno == errno.ELOOP else f"cannot follow it ({e.strerror})"
            raise PipelineError(f"{f}: {why}") from None
        if not target.is_relative_to(base):
            raise PipelineError(f"{f}: a symbolic link to {target}, outside {root}: refused")
    return files


def write_parquet(df: pd.DataFrame, path: str | os.PathLike) -> None:
    """Deterministic Parquet: same frame -> same bytes (no pandas index, no timestamps)."""
    table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata(None)  # pandas metadata can vary across runs
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", write_statistics=False)


def read_parquet(path: str | os.PathLike, required: dict[str, str] | None = None) -> pd.DataFrame:
    """Read a Parquet artifact, checking that `required` columns exist with the given kind.

    `required` maps column -> numpy kind letter(s) ('i' int, 'f' float, 'O'
    object/str, 'b' bool, 'U' string); 'any' skips the kind check.
    """
    path = Path(path)
    if not path.exists():
        raise PipelineError(f"{path}: file not found")
    try:
        df = pq.read_table(path).to_pandas()
    except (pa.ArrowException, OSError, ValueError) as e:  # ValueError: a damaged string column's UTF-8
        raise PipelineError(f"{path}: not a readable Parquet file ({e.__class__.__name__})") from e
    for col, kinds in (required or {}).items():
        if col not in df.columns:
            raise PipelineError(f"{path}: wrong schema, missing column '{col}'")
        kind = df[col].dtype.kind
        if kinds != "any" and kind not in kinds and not (kind in "OUT" and set(kinds) & set("OUT")):
            raise PipelineError(f"{path}: wrong schema, column '{col}' has dtype {df[col].dtype}")
    return df


def write_json(obj, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def write_text(text: str, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def file_sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

"""Atomic artifact I/O and the one error type stages turn into a one-line exit.

Every artifact is written to a temporary sibling and renamed into place only
when complete, so an interrupted stage never leaves a partial file behind.
Inside a stage run (`cli.stage_main`) the writers also hold the stage to its
declaration: they replace only its declared outputs, and keep what they replace
aside until the run ends, to put it back unless the run succeeds (`StageRun`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


class PipelineError(Exception):
    """A user-facing failure: bad params, bad input file, bad checkpoint.

    The message must name the offending file or key; stages print it as one
    line and exit non-zero.
    """


class Refused(PipelineError):
    """A write the stage may not make (not its output, or a folder it did not create): nothing was changed."""


class WriteFailed(PipelineError, OSError):
    """An output the system would not let us write or publish (a read-only mount, no permission, a full
    disk): nothing was changed. An OSError too, with the cause's errno and strerror, so a caller that says
    more (the bytes a checkpoint needs) still catches it."""

    def __str__(self) -> str:
        return self.args[0]  # the line, not OSError's "[Errno N] ..." built from the cause's fields


def cannot_write(path: Path, error: OSError) -> WriteFailed:
    """One line naming the output and the system's reason, and the file it names when not our temporary."""
    named = os.fsdecode(error.filename) if error.filename is not None else None
    ours = named is None or Path(named) == path or f"/.{path.name}." in f"/{named}"
    where = "" if ours else f" ({named})"
    failed = WriteFailed(f"{path}: cannot write it: {error.strerror or error}{where}; nothing was changed")
    failed.errno, failed.strerror, failed.filename = error.errno, error.strerror, error.filename
    return failed


_live: set[Path] = set()  # this process's temporaries in use (writes under way, versions kept aside): never stale


class StageRun:
    """The stage run in this process: what it may write, and what it has replaced so far.

    Once `declare`d (a stage of this checkout), a write outside the stage's outputs (pipeline.yaml outs
    and metrics of the running instance, meta.untracked scratch and caches) is refused. An output it
    replaces is moved aside, not deleted: the run ends by `commit` (success: the old versions go) or
    `undo` (failure, interruption, a failed end-of-run check: the old versions come back), so only a
    successful run publishes anything. Scratch and caches are written at once and never put back
    (resume state must survive an interrupted run)."""

    def __init__(self) -> None:
        self.stage: str | None = None  # None: no declaration to hold the writes to
        self.outs: dict[Path, str] = {}  # absolute path -> as pipeline.yaml names it
        self.untracked: list[Path] = []
        self.checkout = _absolute(".")
        self.foreign: dict[Path, str] = {}  # other stage instances' outputs -> their instance names
        self.kept: dict[Path, Path | None] = {}  # replaced output -> its earlier version set aside (None: none)
        self.made: list[Path] = []  # folders made to hold those outputs
        self.checks: list[Callable[[], None]] = []  # run before commit; one raising undoes the run

    def declare(self, stage: str, outs: dict[str, str], untracked: list[str], foreign: dict[str, str]) -> None:
        """`outs`: path -> as pipeline.yaml names it; `foreign`: other instances' outputs -> their names."""
        self.stage = stage
        self.outs = {_absolute(path): named for path, named in outs.items()}
        self.untracked = [_absolute(u) for u in untracked]
        self.foreign = {_absolute(o): name for o, name in foreign.items()}
        self.checkout = _absolute(".")  # where the stage runs: its outputs' paths are relative to it

    def held(self, path: Path) -> bool:
        """Whether a write to `path` is kept for undoing (a declared output); False for scratch, caches
        and an undeclared run. Refuses a path outside the stage's outputs."""
        if self.stage is None:
            return False
        where = _absolute(path)
        if any(_within(where, out) for out in self.outs):
            return True
        if any(_within(where, u) for u in self.untracked):
            return False
        if _within(where, _absolute(tempfile.gettempdir())) and not _within(where, self.checkout):
            return False  # a temporary directory (assoc_order trains in one): no artifact, never put back
        raise Refused(
            f"{path}: not an output of stage {self.stage} ({', '.join(map(os.path.relpath, self.outs))}); "
            "refusing to write it, nothing was changed"
        )

    def may_replace_folder(self, path: Path, new: Path) -> None:
        """Refuse to replace the folder `path` with a file, or with anything when it holds another stage's
        outputs: this stage did not create it (a `paths:` entry naming, say, reports/)."""
        where = _absolute(path)
        who = f"stage {self.stage} ({self.outs[where]})" if where in self.outs else "this stage"
        if not new.is_dir():
            raise Refused(
                f"{path}: a folder, but {who} writes a file there; "
                "refusing to replace a folder it did not create, nothing was changed"
            )
        if inner := sorted(out for out in self.foreign if _within(out, where)):
            raise Refused(
                f"{path}: holds {os.path.relpath(inner[0])}, an output of stage {self.foreign[inner[0]]}; "
                f"{who} refuses to replace a folder it did not create, nothing was changed"
            )

    def replace(self, new: Path, path: Path, made: list[Path]) -> None:
        """Move `new` onto the output `path`, setting aside the version there before this run."""
        key = _absolute(path)
        if key in self.kept:  # written earlier in this run: that version is no one's to keep
            _clear_folder(path)
        elif path.exists() or path.is_symlink():
            aside = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=key.parent))
            _live.add(aside)
            try:
                os.replace(path, aside / path.name)
            except OSError:
                _discard(aside)
                raise
            self.kept[key] = aside / path.name
        else:
            self.kept[key] = None
        self.made += map(_absolute, made)
        os.replace(new, path)

    def commit(self) -> None:
        for old in self.kept.values():
            if old is not None:
                _discard(old.parent)
        self.kept.clear()
        self.made.clear()

    def undo(self) -> None:
        for path, old in reversed(self.kept.items()):
            _remove(path)
            if old is not None:
                os.replace(old, path)
                _discard(old.parent)
        _remove_folders(self.made)
        self.kept.clear()
        self.made.clear()


_run: StageRun | None = None  # the stage run in this process (`stage_writes`), if any


def current_run() -> StageRun | None:
    return _run


@contextlib.contextmanager
def stage_writes() -> Iterator[StageRun]:
    """A stage run: its writes are committed when the body and every check succeed, else undone."""
    global _run
    previous, run = _run, StageRun()
    _run = run
    try:
        yield run
        for check in run.checks:
            check()
    except BaseException:
        with _signals_held():
            run.undo()
        raise
    else:
        with _signals_held():
            run.commit()
    finally:
        _run = previous


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM arriving in the body wait for its end, then reach their own handlers.

    A cancel halfway through putting outputs back, or through removing a folder, would leave them mixed.
    Held by swapping the Python handlers, not by masking: in a process with other threads (torch's) the
    kernel hands a signal the main thread masks to another thread, and Python still raises it in the main
    one. Python runs handlers only in the main thread, so elsewhere nothing can interrupt the body."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum)) for s in _HELD}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        if caught:
            signal.raise_signal(caught[0])  # now, to the handler it was meant for


_HELD = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` on success.

    Works for files and directories. On any exception the temporary (and any
    folder made for it) is removed and whatever was at `path` before is left
    untouched; an OSError on the way (a read-only mount, no permission, a full
    disk), in the caller's writes too, becomes one `WriteFailed` line naming
    `path`. A folder is never replaced by a file; inside a stage run see `StageRun`.
    """
    path = Path(path)
    nested = any(t in _absolute(path).parents for t in _live)  # inside another write's temporary: part of it
    run = _run if _run is not None and not nested else None
    held = run is not None and run.held(path)
    made = [p for p in path.parents if not p.exists()]
    try:
        tmp = _temporary_beside(path)
    except OSError as e:
        _remove_folders(made)
        raise cannot_write(path, e) from e
    target = tmp / path.name  # caller writes here (file or directory)
    try:
        yield target
        if not target.exists():
            raise PipelineError(f"{path}: nothing was written")
        if path.is_dir() and not path.is_symlink():
            (run or StageRun()).may_replace_folder(path, target)
        if held:
            run.replace(target, path, made)
        else:
            _swap_in(target, path, tmp)
    except BaseException as e:
        _discard(tmp)
        _remove_folders(made)  # what this write made for itself goes with it (a stage run's undo does the same)
        if isinstance(e, OSError) and not isinstance(e, PipelineError):  # the caller's write into `target` too
            raise cannot_write(path, e) from e
        raise
    _discard(tmp)


def _temporary_beside(path: Path) -> Path:
    """A new, live temporary folder beside `path` (its folder made if need be), stale ones cleared."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{path.name}.*.tmp"):  # left by a process killed mid-write
        if _absolute(stale) not in _live:
            remove_tree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    _live.add(_absolute(tmp))
    return tmp


def _swap_in(target: Path, path: Path, tmp: Path) -> None:
    """Rename `target` onto `path`, out and in with no interrupt between: the old version or the new, never
    none. A file replaces a file atomically; a folder is first moved aside into `tmp`, and back when the
    new one cannot go in (a read-only mount)."""
    with _signals_held():
        old = tmp / f"{path.name}.old" if path.is_dir() and not path.is_symlink() else None
        if old is not None:
            os.replace(path, old)
        try:
            os.replace(target, path)
        except OSError:
            if old is not None:
                os.replace(old, path)
            raise


def _absolute(path: str | os.PathLike) -> Path:
    return Path(os.path.abspath(path))  # without resolving links: the path as the stage names it


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def remove_tree(path: Path, ignore_errors: bool = False) -> None:
    """shutil.rmtree with Ctrl-C and SIGTERM held until the folder is gone: interrupted halfway, it would
    leave a half-removed folder, and CPython's rmtree, interrupted right after closing a folder, closes it
    again in a `finally` and raises EBADF in place of the interrupt."""
    with _signals_held():
        shutil.rmtree(path, ignore_errors=ignore_errors)


def _clear_folder(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        remove_tree(path)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        remove_tree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _remove_folders(folders: list[Path]) -> None:
    """Remove the folders a write made, deepest first, where still empty (else something else lives there)."""
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            folder.rmdir()


def _discard(tmp: Path) -> None:
    _live.discard(_absolute(tmp))
    remove_tree(tmp, ignore_errors=True)


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


EMPTY_KIND = {"i": "int64", "f": "float64", "b": "bool"}  # a required kind -> the dtype of its empty column


def read_parquets(paths: list[Path], required: dict[str, str]) -> pd.DataFrame:
    """The artifacts `paths` (each checked as read_parquet does) as one table; with no paths (an opt-in
    analysis the params leave out) an empty table of the required columns."""
    if not paths:
        return pd.DataFrame({c: pd.Series(dtype=EMPTY_KIND.get(k[0], "object")) for c, k in required.items()})
    return pd.concat([read_parquet(p, required) for p in paths], ignore_index=True)


def finite(values, path: str | os.PathLike, what: str):
    """`values` (a torch tensor or a numpy array) as given, refused when one of them is nan or inf.

    For the float artifacts where neither is ever legitimate (features, weights, a closed-form basis): read
    on, one would turn every later number nan, or stop a training run with advice far from the cause
    (`lower visual_train.lr`). Not for tables, whose nan says "not measured" or records a diverged run."""
    ok = values.isfinite() if hasattr(values, "isfinite") else np.isfinite(values)  # torch's own: bf16 too
    if bad := int((~ok).sum()):
        raise PipelineError(f"{path}: {what}: {bad:,} of {math.prod(ok.shape):,} values are non-finite (nan or inf)")
    return values


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

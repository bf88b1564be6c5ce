"""What a stage read, held against what it declares: a read DVC does not hash is a silently stale result.

While a stage runs as a program, an audit hook (`sys.addaudithook`, the "open" event) collects every
file it opens for reading under the working directory. pyarrow and safetensors open files in native
code, which raises no audit event, so their readers are wrapped to raise one (`watch_native_readers`).
At exit the reads are compared with the stage instance's entry in dvc.yaml, resolved under params.yaml:
a read is declared when it lies in one of its deps (data and user paths), the code its digest lists (and
the plumbing), its outs or meta.untracked folders, or is a declaration file. The stage record
(logs/stages/<key>.json) keeps the count and the undeclared ones; a successful stage that read
undeclared files says so in one warning line.

Not seen: reads outside the working directory (the Hugging Face cache, absolute user paths) and files
opened by native code other than those readers.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from emergence.core.code_digest import listed_files, plumbing_files
from emergence.core.declared import DECLARATION, DIGESTS_KEY, FAST_LOADER, digest_path, instances, interpolate
from emergence.core.io import PipelineError

PARAMS = "params.yaml"
GENERATED = "dvc.yaml"
CONTROL = (PARAMS, DECLARATION, GENERATED)  # what the stage machinery reads: DVC tracks them its own way
# Bytecode, version control and DVC's own state; logs/ holds provenance (stage records, engine logs), never
# a dep by design: the index page shows it and may lag it.
IGNORED_PARTS = ("__pycache__", ".git", ".dvc", "logs")
WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
# Readers that open files natively: (module, attribute). Project modules bind them by `from x import y`.
NATIVE_READERS = (("pyarrow.parquet", "read_table"), ("safetensors", "safe_open"), ("safetensors.torch", "load_file"))
PROJECT = ("emergence", "stages", "__main__")
TEMPORARY = re.compile(r"\.([^/]+)\.[^/]+\.tmp/\1(?=/|$)")  # io.atomic_path's `.name.XXXX.tmp/name`: name


class Reads:
    """Files opened for reading under `root` (relative POSIX paths) while active."""

    def __init__(self, root: Path | str = "."):
        self.root = os.path.abspath(root)
        prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}  # the interpreter, its venv (maybe a link)
        self.skip = [f(p) + os.sep for p in prefixes for f in (os.path.abspath, os.path.realpath)]
        self.paths: set[str] = set()
        self.active = True

    def hook(self, event: str, args: tuple) -> None:
        if event != "open" or not self.active:
            return
        try:
            path, _, flags = args
            if isinstance(path, int) or (flags or 0) & WRITING:
                return
            self.add(os.fsdecode(os.fspath(path)))
        except (TypeError, ValueError):  # a file object or an odd name: never let a read fail because of us
            return

    def add(self, path: str) -> None:
        full = os.path.abspath(path)
        if not full.startswith(self.root + os.sep) or any(full.startswith(s) for s in self.skip):
            return
        # Files only: a folder is opened to list or remove it (rmtree), and a relative name may be one
        # opened against a folder's descriptor (rmtree's dir_fd), which the event does not carry.
        if not os.path.isfile(full):
            return
        rel = TEMPORARY.sub(lambda m: m.group(1), Path(os.path.relpath(full, self.root)).as_posix())
        if not any(part in IGNORED_PARTS for part in rel.split("/")):
            self.paths.add(rel)


_recording: list[Reads] = []  # this process's recorder, once started


def start(root: Path | str = ".") -> Reads:
    """Begin recording this process's reads (an audit hook cannot be removed: call once per process)."""
    reads = Reads(root)
    sys.addaudithook(reads.hook)
    watch_native_readers()
    _recording.append(reads)
    return reads


@contextlib.contextmanager
def unrecorded() -> Iterator[None]:
    """Reads made for the stage machinery, not the stage: the params rules every stage runs at start
    (core/cli.py) load every study's schema modules, which are no stage's deps by design."""
    was = [r.active for r in _recording]
    for r in _recording:
        r.active = False
    try:
        yield
    finally:
        for r, active in zip(_recording, was):
            r.active = active


def watch_native_readers() -> None:
    """Make the native readers raise the "open" audit event, wherever the project has bound them."""
    for module_name, attr in NATIVE_READERS:
        module = sys.modules.get(module_name)
        original = getattr(module, attr, None)
        if original is None or getattr(original, "_audited", False):
            continue
        audited = _audited(original)
        for name, mod in list(sys.modules.items()):
            if mod is module or name.split(".")[0] in PROJECT:
                for key, value in list(vars(mod).items()):
                    if value is original:
                        setattr(mod, key, audited)


def _audited(reader: Any) -> Any:
    @functools.wraps(reader)
    def audited(path: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(path, str | bytes | os.PathLike):
            sys.audit("open", path, "r", os.O_RDONLY)
        return reader(path, *args, **kwargs)

    audited._audited = True
    return audited


# ---- reads against the declaration -----------------------------------------------------------------


def declared_paths(command: str, root: Path | str = ".") -> list[str] | None:
    """What the stage instance running `command` may read, from dvc.yaml and params.yaml under `root`:
    its deps, outs, metrics and meta.untracked paths. None: no instance of dvc.yaml runs `command`."""
    root = Path(root)
    try:
        stages = yaml.load((root / GENERATED).read_text(encoding="utf-8"), FAST_LOADER)["stages"]
        params = yaml.load((root / PARAMS).read_text(encoding="utf-8"), FAST_LOADER)
        argv = shlex.split(command)
        for name, stage in stages.items():
            for instance, item in instances(name, stage, params):
                context = {**params, "item": item}
                if shlex.split(interpolate(stage["cmd"], context, instance)) != argv:
                    continue
                scratch = [f"${{paths.{key}}}" for key in (stage.get("meta") or {}).get("untracked", [])]
                files = [*stage.get("deps", []), *stage.get("outs", []), *stage.get("metrics", []), *scratch]
                return [*map(str, interpolate(files, context, instance)), *_code(params, instance, root)]
    # ValueError: a file that is not UTF-8. This runs at every stage's exit, after the stage has said what is
    # wrong with its params in its one error line: a traceback here would bury that line.
    except (OSError, ValueError, yaml.YAMLError, PipelineError, KeyError, TypeError, AttributeError):
        return None  # no pipeline here, or one that does not resolve: nothing to hold the reads against
    return None


def _code(params: dict, instance: str, root: Path) -> list[str]:
    """The code files the instance's digest covers, and the plumbing (core/code_digest.py)."""
    folder = (params.get("paths") or {}).get(DIGESTS_KEY)
    digest = root / str(folder) / digest_path(instance)
    listed = listed_files(digest.read_text(encoding="utf-8")) if folder and digest.is_file() else []
    return [*listed, *map(str, plumbing_files(root))]


def undeclared(reads: set[str], allowed: list[str], root: Path | str = ".") -> list[str]:
    """The reads (relative to `root`) in none of the `allowed` files or folders, nor a control file."""
    base = os.path.abspath(root)
    folders = [os.path.normpath(os.path.join(base, p)) for p in [*allowed, *CONTROL]]
    return sorted(r for r in reads if not any(_within(os.path.normpath(os.path.join(base, r)), f) for f in folders))


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def summary(reads: Reads, command: str) -> dict[str, Any]:
    """The record's fields: how many files the stage read under the working directory, and which of
    them its declaration does not cover (None: no dvc.yaml instance runs this command, or dvc.yaml or
    params.yaml cannot be read)."""
    reads.active = False  # what follows reads dvc.yaml and params.yaml for us, not for the stage
    allowed = declared_paths(command, reads.root)
    return {
        "reads": len(reads.paths),
        "undeclared_reads": None if allowed is None else undeclared(reads.paths, allowed, reads.root),
    }


def warn_undeclared(module: str, found: list[str] | None) -> None:
    if found:
        more = f" and {len(found) - 1} more" if len(found) > 1 else ""
        print(
            f"warning: {module} read {found[0]}{more}, not among its deps in {DECLARATION}: "
            f"a change there will not rerun it (declare it, see logs/stages/)",
            file=sys.stderr,
        )

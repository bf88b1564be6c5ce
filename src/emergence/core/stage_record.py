"""One JSON record per stage run, `logs/stages/<key>.json`: what ran, for how long, how much memory,
and which of the files it read its declaration does not cover (core/reads.py).

Written when the stage process ends (success or error) by `cli.stage_main`; the bench reads wall time
and peak memory from it, the index page shows it as provenance. logs/ is git-ignored and never a DVC
dep or out, so a record can never make a stage look changed. A record that cannot be written is a
warning, never a failed stage: the artifacts are what the run is for.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import re
import resource
import shlex
import socket
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from emergence.core import reads
from emergence.core.io import atomic_path

RECORDS = Path("logs") / "stages"  # relative to the working directory, like the stage's artifacts
_NOTES: dict[str, object] = {}  # what the stage says ran (device, precision, kernels): note()
# Snakemake 9.27 (snakemake/shell.py) gives every shell job these six, all set to the job's thread
# count; it sets no variable of its own. DVC 3.67 (dvc/stage/run.py) sets DVC_ROOT and DVC_STAGE.
SNAKEMAKE_THREAD_VARS = (
    "OMP_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def engine_of(env: dict[str, str]) -> tuple[str, str | None]:
    """(engine, DVC stage name or None) of a process environment: dvc, snakemake or direct."""
    if "DVC_STAGE" in env:
        return "dvc", env["DVC_STAGE"]
    values = {env.get(name) for name in SNAKEMAKE_THREAD_VARS}
    if len(values) == 1 and None not in values:
        return "snakemake", None
    return "direct", None


def record_key(command: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@-]", "_", command)


def process_start() -> float:
    """Epoch seconds when this process started (Linux /proc; else now): wall time counts the imports.

    The age comes from /proc/uptime and the start tick (both 1/100 s); /proc/stat's btime is whole
    seconds, so boot time + start tick could put the start up to 1 s late or early."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.time()


def max_rss_mb() -> float:
    """Peak resident memory of this process plus that of its largest finished child, MiB (Linux: KiB)."""
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(kib / 1024, 1)


def note(key: str, value: object) -> None:
    """Put `key: value` (JSON) in this process's stage record: what ran, e.g. the training loop's
    device, precision, compiled or eager forward, and each fused kernel's path."""
    _NOTES[key] = value


def begin(module: str, argv: list[str], env: dict[str, str] | None = None) -> dict:
    """The record's fields known when the stage starts."""
    engine, stage = engine_of(dict(os.environ) if env is None else env)
    started = process_start()
    _NOTES.clear()
    return {
        "command": shlex.join(["python", "-m", module, *argv]),
        "stage": stage,
        "started": datetime.fromtimestamp(started, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "_start": started,
        "engine": engine,
        "host": socket.gethostname(),
    }


def finish(record: dict, exit_code: int, root: Path = RECORDS) -> Path | None:
    """Complete `record` with wall time, memory and exit code; write it atomically under `root`.
    Returns the path, or None (with a warning on stderr) when it could not be written."""
    start = record.pop("_start")
    record.update(_NOTES)
    record.update(wall_s=round(time.time() - start, 3), max_rss_mb=max_rss_mb(), exit=exit_code)
    path = Path(root) / f"{record_key(record['command'])}.json"
    try:
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n")
    except OSError as e:
        print(f"warning: stage record not written ({path}: {e.strerror or e})", file=sys.stderr)
        return None
    return path


def recorded(fn: Callable, main: Callable[[list[str] | None], int]) -> Callable[[list[str] | None], int]:
    """`main` (the wrapped stage body `fn`) writing a record at exit when the stage runs as the program
    (`python -m stages...`, as both engines run it); a test calling main() in process writes none."""

    @functools.wraps(main)
    def run(argv: list[str] | None = None) -> int:
        spec = sys.modules["__main__"].__spec__ if fn.__module__ == "__main__" else None
        if spec is None:
            return main(argv)
        record = begin(spec.name, sys.argv[1:] if argv is None else argv)
        read = reads.start()
        code = 1  # an exception escaping main is a failed run
        try:
            code = main(argv)
        except SystemExit as e:  # argparse: --help (0) or a bad flag (2); Python exits 0 for None, 1 for a message
            code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
            raise
        finally:
            record.update(reads.summary(read, record["command"]))
            if code == 0:  # a failed stage says one thing: its error
                reads.warn_undeclared(spec.name, record["undeclared_reads"])
            finish(record, code)
            # The process ends here: a last full collection of what exit frees anyway walks every object
            # torch and pandas made (~0.3 s of each stage run); frozen, the collector leaves them alone.
            gc.freeze()
        return code

    return run

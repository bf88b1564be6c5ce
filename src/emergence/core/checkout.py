"""One engine per checkout: a Snakemake run holds DVC's own repository lock from start to end.

`dvc repro` takes `.dvc/tmp/lock` (an OS file lock, `flock`) when it starts and keeps it between
stages; while a stage's command runs it lets the lock go but lists the stage in `.dvc/tmp/rwlock`
(pid and command), and it takes the lock back before it unlists the stage. So DVC is at work in a
checkout exactly when that lock is held or rwlock names a live process. Snakemake's onstart hook
(its top-level run only: job-level invocations and dry runs have no hooks) calls `hold_checkout`:
it refuses with one line while DVC is at work, and otherwise keeps the lock until the process ends
(the OS frees it, even after kill -9), so a `dvc repro` started meanwhile stops before it touches
any output ("Unable to acquire lock"; `.dvc/tmp/lock` then names the Snakemake run).
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from emergence.core.io import PipelineError

_held: list = []  # the open lock file: held for the life of the process


def hold_checkout(root: str | os.PathLike, engine: str) -> None:
    """Hold the checkout `root` for `engine` until this process exits, or raise the one line saying
    which DVC process has it. A folder without `.dvc/` has no DVC run to exclude."""
    tmp = Path(root) / ".dvc" / "tmp"
    if _held or not tmp.parent.is_dir():
        return
    tmp.mkdir(exist_ok=True)
    f = open(tmp / "lock", "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # DVC between stages (its lock file holds its pid), or another engine
        f.seek(0)
        holder = f.read().split()
        f.close()
        pid = int(holder[0]) if holder and holder[0].isdigit() else None
        raise PipelineError(_busy(root, pid, " ".join(holder[1:]) or _command_of(pid))) from None
    running = _dvc_stages(tmp / "rwlock")  # DVC running a stage's command, its lock let go meanwhile
    if running:
        f.close()
        pid, command = running[0]
        raise PipelineError(_busy(root, pid, command))
    f.seek(0)
    f.truncate()
    f.write(f" {os.getpid()} {engine}\n")  # DVC's own format (" <pid>"), then who holds it
    f.flush()
    _held.append(f)


def _busy(root: str | os.PathLike, pid: int | None, command: str) -> str:
    words = command.split()
    if words and Path(words[0]).name.startswith("python"):  # `python .../dvc repro` -> `dvc repro`
        words = words[1:]
    command = " ".join([Path(words[0]).name, *words[1:]]) if words else "dvc"
    who = f"`{command}` (pid {pid})" if pid else "another engine (pid unknown)"
    stop = f"stop it with `kill {pid}`" if pid else "stop it"
    return (
        f"{Path(root).resolve()}: this checkout is busy, {who} is running in it; one engine at a time: "
        f"wait for it to finish or {stop}, then run again"
    )


def _dvc_stages(rwlock: Path) -> list[tuple[int, str]]:
    """(pid, command) of each live process rwlock lists (DVC forgets a killed one's entries only at
    its next run: a dead pid does not hold the checkout)."""
    try:
        lock = json.loads(rwlock.read_text(encoding="utf-8"))
        infos = [*lock.get("write", {}).values(), *(i for v in lock.get("read", {}).values() for i in v)]
        entries = [(int(i["pid"]), str(i["cmd"])) for i in infos]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):  # none yet, or not DVC's format
        return []
    return [(pid, cmd) for pid, cmd in entries if pid != os.getpid() and _alive(pid)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _command_of(pid: int | None) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except (OSError, UnicodeDecodeError):
        return ""

"""What a fault case asserts (tests/pipeline/test_faults*.py): the outcome class, and that nothing
outside the stage's own outputs changed.

A case breaks one thing in a copy of the tiny run (a param, an input, the disk), runs one command
and checks:
- the outcome class: `error` (non-zero exit, one `error: ...` line naming the key, file or step,
  no traceback), `warning` (exit 0 and a `warning: ...` line), or `ok` (exit 0, nothing on stderr
  that looks like a traceback);
- every file under data/ and reports/ (and params.yaml, dvc.lock) hashed before and after: only
  the paths the case allows may differ.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import BIN, GIT_DATES, ROOT, copy_run

WATCHED = ("data", "reports")
FILES = ("params.yaml", "dvc.lock")
# this checkout's src first, even where the venv's editable install points at another checkout
ENV = {
    **os.environ,
    **GIT_DATES,
    "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
    "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
}


def fault_copy(tiny_run: Path, dest: Path) -> Path:
    """A copy of the tiny run to break, holding this checkout's code, declaration, resources and
    Makefile (`python -m stages.X` imports the copy's stages/, the working directory first on sys.path,
    and a run reused while developing, EMERGENCE_TINY_RUN, may come from older code), with this
    checkout's venv linked in for `make`."""
    copy_run(tiny_run, dest)
    for folder in ("src", "stages", "resources"):
        shutil.rmtree(dest / folder, ignore_errors=True)
        shutil.copytree(ROOT / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("Makefile", "pipeline.yaml", "dvc.yaml"):
        shutil.copy2(ROOT / name, dest / name)
    (dest / ".venv").symlink_to(BIN.parent)
    return dest


def set_params(root: Path, **changes) -> None:
    """`section__key=value` changes to the copy's params.yaml."""
    params = yaml.safe_load((root / "params.yaml").read_text())
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        params[section][key] = value
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under data/ and reports/, and of params.yaml and dvc.lock (relative path ->
    digest; a symbolic link is recorded by its target, never followed)."""
    found: dict[str, str] = {}
    paths = [p for top in WATCHED if (root / top).exists() for p in sorted((root / top).rglob("*"))]
    paths += [root / f for f in FILES if (root / f).exists()]
    for path in paths:
        rel = str(path.relative_to(root))
        if path.is_symlink():
            found[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    """Paths added, removed or rewritten between two snapshots."""
    return {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}


def run_command(root: Path, *cmd: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """`cmd` in `root` with the venv's tools on PATH; `python` is the tests' interpreter."""
    argv = [sys.executable if cmd[0] == "python" else cmd[0], *cmd[1:]]
    return subprocess.run(argv, cwd=root, env={**ENV, **(env or {})}, capture_output=True, text=True, timeout=timeout)


def assert_outcome(proc: subprocess.CompletedProcess, outcome: str, says: str = "") -> None:
    """`outcome` is error, warning or ok; `says`: a text the error or warning line must hold."""
    out = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, f"a traceback, not a message:\n{out}"
    if outcome == "error":
        lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert proc.returncode != 0, f"expected an error, exit 0:\n{out}"
        assert lines, f"no 'error: ...' line:\n{out}"
        assert any(says in line for line in lines), f"no error line says {says!r}:\n{out}"
    elif outcome == "warning":
        lines = [line for line in (proc.stderr + proc.stdout).splitlines() if "warning:" in line]
        assert proc.returncode == 0, f"expected a warning, exit {proc.returncode}:\n{out}"
        assert any(says in line for line in lines), f"no warning line says {says!r}:\n{out}"
    else:
        assert outcome == "ok", outcome
        assert proc.returncode == 0, f"expected success, exit {proc.returncode}:\n{out}"


def assert_only_changed(root: Path, before: dict[str, str], allowed: tuple[str, ...] = ()) -> None:
    """Nothing under data/, reports/ (or params.yaml, dvc.lock) changed but paths under `allowed`."""
    stray = sorted(
        p for p in changed(before, snapshot(root)) if not any(p == a or p.startswith(a + "/") for a in allowed)
    )
    assert not stray, f"changed outside {allowed}: {stray[:20]}"

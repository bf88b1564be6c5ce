"""One engine per checkout: `dvc repro` and `snakemake` started at once on one checkout, in either order.

The first engine is frozen (SIGSTOP to its process group) once it holds the checkout (DVC: inside a
stage's command, its repo lock let go; Snakemake: past its onstart hook), so the second one meets it
there however fast the machine is; the second must refuse, exit non-zero and write nothing; thawed,
the first one finishes as if alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from conftest import BIN, GIT_DATES, project_copy, run
from refusals import assert_names

TARGET = "data/binding/programs.parquet"  # binding_data: the first stage, a few seconds


def start(cmd: list[str], cwd: Path) -> subprocess.Popen:
    """`cmd` in its own process group (the engine and its stage processes freeze and thaw together)."""
    env = {**os.environ, **GIT_DATES, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def wait_for(condition: Callable[[], bool], engine: subprocess.Popen, what: str, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert engine.poll() is None, f"the first engine ended before {what}: {engine.communicate()}"
        assert time.monotonic() < end, f"timed out waiting until {what}"
        time.sleep(0.02)


def snapshot(root: Path) -> dict[str, str]:
    """Every artifact and record an engine writes: path -> sha256."""
    files = [root / "dvc.lock", *(p for d in ("data", "reports") for p in (root / d).rglob("*") if p.is_file())]
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.exists()}


def stage_started(root: Path) -> bool:
    """A stage process is past its start (it wrote its pid into its instance lock, .stage-locks/)."""
    return any(p.read_text().strip() for p in (root / ".stage-locks").glob("*.lock"))


def snakemake_holds(root: Path) -> bool:
    """Snakemake's onstart took DVC's lock (its content: ' <pid> snakemake')."""
    path = root / ".dvc" / "tmp" / "lock"
    return path.exists() and path.read_text().split()[1:] == ["snakemake"]


def lock_is_free(root: Path) -> bool:
    with open(root / ".dvc" / "tmp" / "lock", "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


@contextlib.contextmanager
def frozen(first: subprocess.Popen, root: Path):
    """`first` stopped meanwhile; nothing the block runs may write an artifact."""
    os.killpg(first.pid, signal.SIGSTOP)
    try:
        before = snapshot(root)
        yield
        assert snapshot(root) == before
    finally:
        os.killpg(first.pid, signal.SIGCONT)


def finishes(first: subprocess.Popen, root: Path) -> None:
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, out + err
    assert (root / TARGET).is_file() and lock_is_free(root)


def test_snakemake_refuses_while_dvc_runs(tmp_path):
    root = project_copy(tmp_path / "p")
    dvc = start(["dvc", "repro", "binding_data"], root)
    wait_for(lambda: stage_started(root), dvc, "DVC runs binding_data")  # its repo lock let go meanwhile
    with frozen(dvc, root):
        dry = run(["snakemake", "-n", TARGET], root, check=False)  # a dry run needs no lock
        refused = run(["snakemake", "--cores", "1", TARGET], root, check=False)
    finishes(dvc, root)
    assert dry.returncode == 0 and "binding_data" in dry.stdout, dry.stdout + dry.stderr
    assert refused.returncode == 1, refused.stdout + refused.stderr
    lines = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, refused.stderr
    # the checkout, what holds it (command and pid), and how to stop it
    assert lines[0].startswith(f"error: {root}: "), lines
    assert_names(lines[0], "busy", f"`dvc repro binding_data` (pid {dvc.pid})", f"`kill {dvc.pid}`")


def test_dvc_refuses_while_snakemake_runs(tmp_path):
    root = project_copy(tmp_path / "p")
    smk = start(["snakemake", "--cores", "1", TARGET], root)
    wait_for(lambda: snakemake_holds(root), smk, "Snakemake holds the checkout")
    with frozen(smk, root):
        refused = run(["dvc", "repro", "binding_data"], root, check=False)
    holder = (root / ".dvc" / "tmp" / "lock").read_text().split()  # what DVC's message points to
    finishes(smk, root)
    assert refused.returncode != 0, refused.stdout + refused.stderr
    assert "ERROR: Unable to acquire lock" in refused.stderr, refused.stderr
    assert holder == [str(smk.pid), "snakemake"]

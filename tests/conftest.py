"""Shared fixtures: the project root, the real data beside it, a tiny pipeline copy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
BIN = Path(sys.executable).parent  # the venv's dvc / snakemake / python


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data: a test that needs it fails (never skips) when it is missing."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"{SHARED_DATA} is missing: the real data samples must sit beside the project")
    return SHARED_DATA


# Fixed commit dates: two copies of the same tree get the same git revision,
# which the reports record as provenance.
GIT_DATES = {"GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


@pytest.fixture(scope="module")
def one_thread():
    """Tiny matmuls: a second thread only adds contention on the 2-core machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def run(cmd: list[str], cwd: Path, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    """`cmd` with the venv's tools first on PATH; `env` adds or overrides variables (e.g. HOME)."""
    env = {**os.environ, **GIT_DATES, **(env or {}), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def project_copy(dest: Path, profile: str | None = "tiny") -> Path:
    """A git repo holding the project's tracked and untracked-but-not-ignored files."""
    files = run(["git", "ls-files", "-co", "--exclude-standard"], ROOT).stdout.split("\n")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    run(["git", "init", "-q"], dest)
    run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A"], dest)
    run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "copy"], dest)
    if profile:
        run([sys.executable, "-m", "emergence.core.profile", profile], dest)
    return dest


def copy_run(src: Path, dest: Path) -> Path:
    """A copy of a finished run (git repo, DVC cache, artifacts, timestamps) that a test may edit."""
    shutil.copytree(src, dest, symlinks=True)
    return dest


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """One `dvc repro` of the tiny profile for the whole session (it trains every model, ~3 min).

    Read-only by convention: a test that edits params or reruns stages works on `copy_run(tiny_run, ...)`.
    """
    root = project_copy(tmp_path_factory.mktemp("tiny") / "run")
    run(["dvc", "repro"], root)
    return root


def pytest_collection_modifyitems(items):
    """tests/pipeline/ runs stages, engines or whole profiles: `pytest -m "not pipeline"` skips them."""
    for item in items:
        if "pipeline" in item.path.parent.name:
            item.add_marker(pytest.mark.pipeline)

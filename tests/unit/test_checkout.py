"""hold_checkout: DVC at work (its repo lock held, or a live process listed in rwlock) -> one line naming
it; otherwise the lock is taken for the life of the process. Each case in a child process, since a
taken lock stays with the process that took it."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from refusals import assert_names

HOLD = "from emergence.core.checkout import hold_checkout; hold_checkout('.', 'snakemake'); print('held')"


def hold(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-c", HOLD], cwd=root, env=env, capture_output=True, text=True)


@pytest.fixture
def checkout(tmp_path) -> Path:
    (tmp_path / ".dvc" / "tmp").mkdir(parents=True)
    return tmp_path


def rwlock(root: Path, pid: int) -> None:
    info = {"pid": pid, "cmd": "/venv/bin/dvc repro binding_data"}
    (root / ".dvc" / "tmp" / "rwlock").write_text(json.dumps({"read": {}, "write": {str(root / "x"): info}}))


def test_a_free_checkout_is_taken_and_marked(checkout):
    done = hold(checkout)
    assert done.stdout == "held\n", done.stderr
    assert (checkout / ".dvc" / "tmp" / "lock").read_text().split()[1:] == ["snakemake"]


def test_dvc_between_stages_is_named(checkout):
    with open(checkout / ".dvc" / "tmp" / "lock", "a+") as lock:  # as `dvc repro` takes it (zc.lockfile)
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write(f" {os.getpid()}\n")
        lock.flush()
        done = hold(checkout)
    assert done.returncode == 1 and done.stdout == ""
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"emergence.core.io.PipelineError: {checkout}: "), last
    assert_names(last, "busy", f"(pid {os.getpid()})", f"`kill {os.getpid()}`")


def test_dvc_inside_a_stage_is_named_and_a_dead_one_is_not(checkout):
    rwlock(checkout, os.getpid())  # a live process
    done = hold(checkout)
    assert done.returncode == 1
    assert_names(done.stderr.splitlines()[-1], checkout, f"`dvc repro binding_data` (pid {os.getpid()})")
    dead = subprocess.Popen(["true"])
    dead.wait()
    rwlock(checkout, dead.pid)  # killed -9 once: DVC left its entry behind
    assert hold(checkout).stdout == "held\n"


def test_without_dvc_there_is_nothing_to_hold(tmp_path):
    assert hold(tmp_path).stdout == "held\n"
    assert not (tmp_path / ".dvc").exists()

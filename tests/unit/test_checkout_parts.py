"""The checkout lock in-process: the busy message, the rwlock reader, liveness, and the lock itself
(test_checkout.py runs it in child processes; here each part is checked against values built by hand).

flock locks belong to an open file description, so a second open() of the lock file in this process
competes with the first one exactly as another process would."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from refusals import assert_names

from emergence.core import checkout
from emergence.core.io import PipelineError

DEAD_PID = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # beyond the largest pid: never alive


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    (tmp_path / ".dvc" / "tmp").mkdir(parents=True)
    held: list = []
    monkeypatch.setattr(checkout, "_held", held)  # this test's own holding, released below
    yield tmp_path
    for f in held:
        f.close()


def lock_path(root: Path) -> Path:
    return root / ".dvc" / "tmp" / "lock"


def free(root: Path, mode: int = fcntl.LOCK_SH) -> bool:
    """Can another open file description take the lock (shared by default)?"""
    with open(lock_path(root), "a+") as f:
        try:
            fcntl.flock(f, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
        return True


@pytest.mark.parametrize(
    "pid, command, who, stop",
    [
        (41, "/usr/bin/python3.12 /venv/bin/dvc repro binding_data", "`dvc repro binding_data` (pid 41)", "`kill 41`"),
        (42, "/venv/bin/snakemake --cores 2", "`snakemake --cores 2` (pid 42)", "`kill 42`"),
        (43, "python3 dvc.py", "`dvc.py` (pid 43)", "`kill 43`"),
        (44, "", "`dvc` (pid 44)", "`kill 44`"),
        (None, "", "another engine (pid unknown)", None),
    ],
)
def test_busy_message_by_hand(tmp_path, pid, command, who, stop):
    want = (
        f"{tmp_path.resolve()}: this checkout is busy, {who} is running in it; one engine at a time: "
        f"wait for it to finish or {'stop it with ' + stop if stop else 'stop it'}, then run again"
    )
    assert checkout._busy(tmp_path, pid, command) == want


def test_rwlock_lists_live_writers_then_readers_and_skips_dead_and_own(tmp_path):
    parent = os.getppid()  # alive for the whole test
    lock = {
        "write": {"/a": {"pid": parent, "cmd": "dvc repro w"}, "/b": {"pid": DEAD_PID, "cmd": "dead writer"}},
        "read": {
            "/c": [{"pid": os.getpid(), "cmd": "this process"}, {"pid": parent, "cmd": "dvc repro r1"}],
            "/d": [{"pid": str(parent), "cmd": "dvc repro r2"}],  # DVC writes numbers; a string pid is read too
        },
    }
    path = tmp_path / "rwlock"
    path.write_text(json.dumps(lock))
    assert checkout._dvc_stages(path) == [(parent, "dvc repro w"), (parent, "dvc repro r1"), (parent, "dvc repro r2")]


@pytest.mark.parametrize("text", [None, "", "not json", "[1, 2]", '{"write": {"/a": {"cmd": "x"}}}', '{"read": 3}'])
def test_rwlock_unreadable_or_foreign_means_no_stage(tmp_path, text):
    path = tmp_path / "rwlock"
    if text is not None:
        path.write_text(text)
    assert checkout._dvc_stages(path) == []


@pytest.mark.parametrize("only", ["write", "read"])
def test_rwlock_with_only_writers_or_only_readers(tmp_path, only):
    parent = os.getppid()
    entry = {"pid": parent, "cmd": f"dvc repro {only}"}
    lock = {"write": {"/a": entry}} if only == "write" else {"read": {"/a": [entry]}}  # DVC may leave one key out
    (tmp_path / "rwlock").write_text(json.dumps(lock))
    assert checkout._dvc_stages(tmp_path / "rwlock") == [(parent, f"dvc repro {only}")]


def test_alive_and_command_of():
    assert checkout._alive(os.getpid())
    assert not checkout._alive(DEAD_PID)
    done = subprocess.Popen(["true"])
    done.wait()
    assert not checkout._alive(done.pid)
    # a child whose command line we wrote (pytest-xdist retitles its own workers' command lines), read
    # once its exec is visible in /proc (Popen may return a moment before)
    with subprocess.Popen(["sleep", "30"]) as child:
        try:
            cmdline = Path(f"/proc/{child.pid}/cmdline")
            deadline = time.monotonic() + 5
            while not cmdline.read_bytes() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert checkout._command_of(child.pid) == "sleep 30"
        finally:
            child.kill()
    assert checkout._command_of(DEAD_PID) == "" and checkout._command_of(None) == ""


def test_another_users_process_is_alive(monkeypatch):
    def kill(pid, sig):
        assert (pid, sig) == (4244, 0)
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(checkout.os, "kill", kill)
    assert checkout._alive(4244)


def test_a_free_checkout_is_held_exclusively_and_marked(root):
    lock_path(root).write_text(" 999 old snakemake\n")  # a previous run's mark: replaced, not appended to
    checkout.hold_checkout(root, "snakemake")
    assert lock_path(root).read_text() == f" {os.getpid()} snakemake\n"
    assert not free(root) and not free(root, fcntl.LOCK_EX)  # not even a shared lock is possible
    checkout.hold_checkout(root, "other")  # already held by this process: nothing changes
    assert lock_path(root).read_text() == f" {os.getpid()} snakemake\n" and len(checkout._held) == 1


def refused_while_held(root: Path, text: str) -> pytest.ExceptionInfo:
    """hold_checkout's refusal while another process holds the lock file with `text` in it."""
    with open(lock_path(root), "a+") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        other.write(text)
        other.flush()
        with pytest.raises(PipelineError) as e:
            checkout.hold_checkout(root, "snakemake")
    return e


def test_a_held_lock_is_named_from_its_file(root):
    e = refused_while_held(root, " 4242 /usr/bin/python3 /venv/bin/dvc repro\n")
    assert str(e.value) == checkout._busy(root, 4242, "/usr/bin/python3 /venv/bin/dvc repro")
    assert_names(str(e.value), root.resolve(), "`dvc repro` (pid 4242)", "`kill 4242`")
    assert checkout._held == []


def test_a_held_lock_with_only_a_pid_is_named_by_its_command(root):
    e = refused_while_held(root, f" {os.getpid()}\n")  # zc.lockfile's format: the pid only
    # the command is read from /proc (this process's own command line: pytest, an xdist worker or a
    # mutation run), not left as a bare `dvc`
    command = Path(f"/proc/{os.getpid()}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    assert command and str(e.value) == checkout._busy(root, os.getpid(), command)


@pytest.mark.parametrize("text", ["", "snakemake\n"])
def test_a_held_lock_without_a_pid_is_another_engine(root, text):
    e = refused_while_held(root, text)  # a holder that wrote nothing yet, or no pid
    assert str(e.value) == checkout._busy(root, None, "")
    assert_names(str(e.value), root.resolve(), "pid unknown")


def test_a_stage_running_under_dvc_refuses_and_leaves_the_lock(root):
    parent = os.getppid()
    rw = {"write": {"/out": {"pid": parent, "cmd": "/venv/bin/dvc repro binding_data"}}, "read": {}}
    (root / ".dvc" / "tmp" / "rwlock").write_text(json.dumps(rw))
    lock_path(root).write_text(" 7 before\n")
    with pytest.raises(PipelineError) as e:
        checkout.hold_checkout(root, "snakemake")
    assert str(e.value) == checkout._busy(root, parent, "/venv/bin/dvc repro binding_data")
    assert lock_path(root).read_text() == " 7 before\n" and checkout._held == [] and free(root, fcntl.LOCK_EX)


def test_only_dead_stages_in_rwlock_do_not_hold_the_checkout(root):
    rw = {"write": {"/out": {"pid": DEAD_PID, "cmd": "dvc repro x"}}, "read": {}}
    (root / ".dvc" / "tmp" / "rwlock").write_text(json.dumps(rw))
    checkout.hold_checkout(root, "snakemake")
    assert len(checkout._held) == 1 and not free(root)


def test_no_dvc_folder_nothing_is_created(tmp_path, monkeypatch):
    monkeypatch.setattr(checkout, "_held", [])
    checkout.hold_checkout(tmp_path, "snakemake")
    assert list(tmp_path.iterdir()) == [] and checkout._held == []


def test_a_dvc_folder_without_its_tmp_folder_yet_is_held(tmp_path, monkeypatch):
    """`dvc init` makes .dvc/ but not .dvc/tmp/ (DVC's first run does): the checkout is DVC's all the same."""
    (tmp_path / ".dvc").mkdir()
    monkeypatch.setattr(checkout, "_held", [])
    checkout.hold_checkout(tmp_path, "snakemake")
    try:
        assert lock_path(tmp_path).read_text() == f" {os.getpid()} snakemake\n"
        assert len(checkout._held) == 1 and not free(tmp_path, fcntl.LOCK_EX)
    finally:
        for f in checkout._held:
            f.close()


def test_another_snakemake_run_is_named_by_its_mark(root):
    # The mark hold_checkout writes (" <pid> <engine>"), read back by a second run of the engine.
    e = refused_while_held(root, " 4243 snakemake\n")
    assert_names(str(e.value), root.resolve(), "`snakemake` (pid 4243)", "`kill 4243`")

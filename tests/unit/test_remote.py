"""`python -m emergence remote`: the default DVC remote checked before `make push` / `make pull`."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from conftest import ROOT, run
from refusals import assert_names, refuses
from tcp_server import tcp_server

from emergence.core import remote


@pytest.fixture
def repo(tmp_path) -> Path:
    """A fresh git + DVC repo whose committed config is the project's (remote `shared`, a sibling folder)."""
    root = tmp_path / "project"
    root.mkdir()
    run(["git", "init", "-q"], root)
    run(["dvc", "init", "-q"], root)
    (root / ".dvc" / "config").write_text((ROOT / ".dvc" / "config").read_text())
    return root


def check(root: Path, action: str) -> tuple[int, str, str]:
    proc = run([sys.executable, "-m", "emergence", "remote", "--for", action], root, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def one_line_error(root: Path, action: str) -> str:
    code, out, err = check(root, action)
    assert code == 1 and out == "", (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert_names(lines[0], "dvc remote modify --local shared url", "docs/sharing.md")  # what to run, where to read
    return lines[0]


def test_default_sibling_store_takes_a_push_but_cannot_serve_a_pull_until_it_exists(repo):
    store = repo.parent / "emergence-dvc-store"  # .dvc/config: ../../emergence-dvc-store from .dvc/
    assert_names(one_line_error(repo, "pull"), "DVC remote 'shared'", store, "does not exist", "pull")
    code, out, _ = check(repo, "push")  # DVC creates the store on the first push
    assert code == 0 and f"shared ({store})" in out
    store.mkdir()
    assert check(repo, "pull")[0] == 0


def test_warnings_from_asyncssh_modules_stay_off_the_one_line_and_no_others(monkeypatch, capsys):
    """cryptography 51 made asyncssh's import warn (DSA deprecated): ten lines above the check's one."""
    origins = ["asyncssh", "asyncssh.crypto.misc", "asyncssh_extra", "dvc_ssh", "emergence.core.remote"]

    def check_remote(root, action):
        for module in origins:
            warnings.warn_explicit(f"from {module}", UserWarning, f"{module}.py", 1, module=module)
        return "shared (/store)"

    monkeypatch.setattr(remote, "check_remote", check_remote)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert remote.main(["--for", "pull"]) == 0
        warnings.warn_explicit("after", UserWarning, "a.py", 1, module="asyncssh.crypto.misc")
    shown = ["from asyncssh_extra", "from dvc_ssh", "from emergence.core.remote", "after"]
    assert [str(w.message) for w in seen] == shown
    assert_names(capsys.readouterr().out, "shared (/store)", "pull")


def test_a_push_into_a_folder_whose_parent_is_missing_is_refused(repo, tmp_path):
    run(["dvc", "remote", "modify", "--local", "shared", "url", str(tmp_path / "no" / "store")], repo)
    assert_names(one_line_error(repo, "push"), tmp_path / "no", "does not exist", "push")  # the folder to push into


def test_no_default_remote_names_the_config_key(repo):
    run(["dvc", "remote", "default", "--unset"], repo)
    assert_names(one_line_error(repo, "pull"), ".dvc/config", "core.remote")


def test_s3_without_its_plugin_says_what_is_missing(repo):
    run(["dvc", "remote", "modify", "--local", "shared", "url", "s3://bucket/emergence"], repo)
    assert_names(one_line_error(repo, "push"), "'shared' (s3://bucket/emergence)", "'dvc-s3'")  # the missing plugin


def test_make_push_and_pull_check_the_remote_first():
    for action in ("push", "pull"):
        # -o: take the venv as installed, so the dry run prints only the target's own recipe;
        # --no-print-directory: under `make test` this make is nested and would print its directory
        dry = run(
            ["make", "--no-print-directory", "-n", action, "-o", ".venv/.installed", "BIN=bin"], ROOT
        ).stdout.splitlines()
        assert dry == [f"bin/python -m emergence remote --for {action}", f"bin/dvc {action}"]


def test_ssh_test_server_without_sshd_fails_naming_the_debian_package(monkeypatch, tmp_path):
    """The SSH remote test must fail, not skip, on a machine without the server, and say what to install."""
    import ssh_server as helper

    monkeypatch.setattr(helper, "SSHD", str(tmp_path / "no-sshd"))
    with refuses("sshd", "openssh-server", error=RuntimeError):
        with helper.ssh_server(tmp_path / "server"):
            pass


def test_an_ssh_server_that_never_answers_is_named_then_one_error_line(repo):
    """It accepts the connection and never greets: DVC alone would sit silent for its 120 s login timeout."""
    with tcp_server(None) as port:
        run(["dvc", "remote", "modify", "--local", "shared", "url", f"ssh://127.0.0.1:{port}/store"], repo)
        proc = subprocess.Popen(
            [sys.executable, "-m", "emergence", "remote", "--for", "pull"],
            cwd=repo,
            stderr=subprocess.PIPE,
            text=True,
        )
        first = proc.stderr.readline()  # the line saying what it waits for, before the error
        rest = proc.stderr.read()
        code = proc.wait(timeout=60)  # a hang guard only: DVC's own login timeout is 120 s
    where = f"DVC remote 'shared' (ssh://127.0.0.1:{port}/store)"
    assert_names(first, where, "waiting", f"127.0.0.1:{port}")
    assert code == 1 and rest.count("\n") == 1 and rest.startswith("error: "), rest
    assert_names(rest, where, f"127.0.0.1:{port}", "SSH greeting", "10 s")


def test_the_probe_passes_a_greeting_and_names_a_hang_up():
    with tcp_server(b"SSH-2.0-OpenSSH_9.2\r\n") as port:
        remote.ssh_answers(("127.0.0.1", port), "DVC remote 'shared'", "shared")
    with tcp_server(b"") as port, refuses("DVC remote 'shared'", f"127.0.0.1:{port}", "closed"):
        remote.ssh_answers(("127.0.0.1", port), "DVC remote 'shared'", "shared")


def test_the_probe_reads_host_and_port_through_the_ssh_config(tmp_path, monkeypatch):
    """A Host alias in ~/.ssh/config (what DVC's asyncssh connects to), or no probe behind a proxy."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text(
        "Host store\n  HostName 127.0.0.1\n  Port 2222\nHost hidden\n  ProxyJump gateway\n"
    )
    assert remote.ssh_address({"host": "store"}) == ("127.0.0.1", 2222)
    assert remote.ssh_address({"host": "store", "port": 2200}) == ("127.0.0.1", 2200)  # the URL's port wins
    assert remote.ssh_address({"host": "elsewhere.example.org"}) == ("elsewhere.example.org", 22)
    assert remote.ssh_address({"host": "hidden"}) is None


@pytest.mark.parametrize(
    "url, wrong",
    [
        ("ssh://store.example:99999/srv/x", "Port out of range"),
        ("ssh://store.example:port/srv/x", "'port'"),
        ("ssh:///srv/x", "no host"),
    ],
)
def test_a_malformed_url_is_one_line_naming_the_remote_the_url_and_the_fault(url, wrong, repo):
    run(["dvc", "remote", "modify", "--local", "shared", "url", url], repo)
    assert_names(one_line_error(repo, "push"), f"DVC remote 'shared' ({url})", wrong)


@pytest.mark.parametrize("url", ["", ".", "data/store", ".."])
def test_a_local_store_in_the_checkout_or_holding_it_is_refused(url, repo):
    """`url ''` stores `..` (from .dvc/): the checkout itself, which `dvc push` would fill with files/."""
    run(["dvc", "remote", "modify", "--local", "shared", "url", url], repo)
    (repo / "data").mkdir()
    store = (repo / url).resolve()  # `remote modify` run at the root: DVC stores the url relative to .dvc/
    for action in ("push", "pull"):
        assert_names(one_line_error(repo, action), "DVC remote 'shared'", f" {store}", repo)

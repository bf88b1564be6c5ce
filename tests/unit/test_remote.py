"""`python -m emergence remote`: the default DVC remote checked before `make push` / `make pull`."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest
from conftest import ROOT, run
from refusals import assert_names, refuses
from tcp_server import tcp_server

from emergence.core import remote


@pytest.fixture(scope="module")
def initialised(tmp_path_factory) -> Path:
    """`git init` + `dvc init`, once a module: `dvc init` takes a second."""
    root = tmp_path_factory.mktemp("template") / "project"
    root.mkdir()
    run(["git", "init", "-q"], root)
    run(["dvc", "init", "-q"], root)
    return root


@pytest.fixture
def repo(initialised, tmp_path) -> Path:
    """A fresh git + DVC repo whose committed config is the project's (remote `shared`, a sibling folder)."""
    root = tmp_path / "project"
    shutil.copytree(initialised, root, symlinks=True)
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


# check_remote, in this process: which remote it checks and what each refusal names

HOW = "dvc remote modify --local shared url"  # the command every refusal names, for the project's remote


def point(repo: Path, url: str, name: str = "shared") -> None:
    """What `dvc remote modify --local <name> url <url>` writes: .dvc/config.local, never committed."""
    (repo / ".dvc" / "config.local").write_text(f"['remote \"{name}\"']\n    url = {url}\n")


def test_the_remote_checked_is_the_one_core_remote_names(repo, tmp_path):
    """Two remotes, `shared` pointing nowhere; `core.remote = archive` picks the other, whose url is read."""
    archive = tmp_path / "archive"
    (repo / ".dvc" / "config").write_text(
        f"[core]\n    remote = archive\n['remote \"shared\"']\n    url = {tmp_path / 'nowhere'}\n"
        f"['remote \"archive\"']\n    url = {archive}\n"
    )
    assert remote.check_remote(repo, "push") == f"archive ({archive})"  # DVC creates the store on a push
    with refuses(f"DVC remote 'archive' ({archive})", archive, "pull", "dvc remote modify --local archive url"):
        remote.check_remote(repo, "pull")
    archive.mkdir()
    assert remote.check_remote(repo, "pull") == f"archive ({archive})"


def test_a_push_needs_the_stores_parent_and_a_pull_the_store(repo, tmp_path):
    store = tmp_path / "parent" / "store"
    point(repo, str(store))
    with refuses(f"DVC remote 'shared' ({store})", tmp_path / "parent", "does not exist", "push", HOW):
        remote.check_remote(repo, "push")
    store.parent.mkdir()
    assert remote.check_remote(repo, "push") == f"shared ({store})"
    with refuses(f"DVC remote 'shared' ({store})", store, "does not exist", "pull", HOW):
        remote.check_remote(repo, "pull")
    store.mkdir()
    assert remote.check_remote(repo, "pull") == f"shared ({store})"


@pytest.mark.parametrize(
    "config, named",
    [
        ("['remote \"shared\"']\n    url = /srv/store\n", "dvc remote modify --local shared url"),  # no core.remote
        ("[core]\n    remote = other\n", "dvc remote modify --local other url"),  # names a remote not defined
    ],
)
def test_no_usable_default_remote_names_the_config_key_and_the_remote_to_set(config, named, repo):
    (repo / ".dvc" / "config").write_text(config)
    for action in ("push", "pull"):
        with refuses(".dvc/config", "core.remote", named):
            remote.check_remote(repo, action)


@pytest.mark.parametrize(
    "url, fault",
    [
        ("s3://bucket/emergence", "'dvc-s3'"),  # the plugin DVC says is missing
        ("ssh://store.example:99999/srv/x", "Port out of range"),  # urllib's word on the URL
        ("ssh:///srv/x", "no host"),
    ],
)
def test_a_remote_dvc_cannot_open_is_one_line_naming_the_remote_its_url_and_the_fault(url, fault, repo):
    point(repo, url)
    with refuses(f"DVC remote 'shared' ({url})", fault, HOW):
        remote.check_remote(repo, "push")


def test_an_ssh_remote_is_probed_at_its_host_and_port_before_dvc_connects(repo, tmp_path, monkeypatch):
    """A server that hangs up at once: the probe's line, not asyncssh's, names it."""
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/config of the user's
    with tcp_server(b"") as port:
        url = f"ssh://127.0.0.1:{port}/store"
        point(repo, url)
        with refuses(f"DVC remote 'shared' ({url})", f"127.0.0.1:{port}", "SSH greeting", HOW):
            remote.check_remote(repo, "pull")


def test_a_local_store_inside_the_checkout_is_refused_before_any_push(repo):
    store = repo / "data" / "store"
    point(repo, str(store))
    for action in ("push", "pull"):
        with refuses(f"DVC remote 'shared' ({store})", store, "lies inside", repo, HOW):
            remote.check_remote(repo, action)
    assert not (repo / "data").exists()


@pytest.mark.parametrize(
    "error, reason",
    [
        (OSError("refused by the store\nthe rest of a traceback"), "refused by the store"),  # its first line
        (TimeoutError(), "TimeoutError"),  # no message: its type
    ],
)
def test_a_store_that_fails_to_answer_is_one_line_with_its_first_line_of_why(
    error, reason, repo, tmp_path, monkeypatch
):
    """Any transport's failure (refused, auth, DNS) when asked whether the store exists, here the local one's."""
    from dvc.data_cloud import DataCloud

    opened = DataCloud.get_remote

    def exists(path):
        raise error

    def failing(self, *args, **kwargs):
        found = opened(self, *args, **kwargs)
        monkeypatch.setattr(found.fs, "exists", exists)
        return found

    store = tmp_path / "store"
    store.mkdir()
    point(repo, str(store))
    monkeypatch.setattr(DataCloud, "get_remote", failing)
    with refuses(f"DVC remote 'shared' ({store})", "cannot reach it", reason, HOW):
        remote.check_remote(repo, "pull")


# inside_checkout: a local store must lie outside the checkout


@pytest.mark.parametrize(
    "store, how",
    [(".", "is"), ("data/store", "lies inside"), ("..", "holds")],
)
def test_a_store_that_is_lies_inside_or_holds_the_checkout_is_refused_naming_which(store, how, tmp_path):
    root = tmp_path / "project"
    (root / "data").mkdir(parents=True)
    resolved = (root / store).resolve()
    with refuses("DVC remote 'shared'", resolved, f"{how} the checkout {root}", HOW):
        remote.inside_checkout(root / store, root, "DVC remote 'shared'", "shared")


def test_a_store_beside_the_checkout_passes_even_with_its_name_as_prefix(tmp_path):
    root = tmp_path / "project"
    for store in (tmp_path / "project-store", tmp_path / "stores" / "project"):
        assert remote.inside_checkout(store, root, "DVC remote 'shared'", "shared") is None


# ssh_address: where asyncssh would connect, read through ~/.ssh/config as it reads it


@pytest.fixture
def ssh_home(tmp_path, monkeypatch) -> Path:
    """A HOME of the test's own; its ~/.ssh/config is what the test writes there, if anything."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    return tmp_path


def test_without_an_ssh_config_the_urls_host_and_port_22(ssh_home):
    assert remote.ssh_address({"host": "store.example"}) == ("store.example", 22)
    assert remote.ssh_address({"host": "store.example", "port": 2200}) == ("store.example", 2200)


def test_without_a_local_user_name_the_config_is_not_read_and_the_url_is_taken_as_is(ssh_home, monkeypatch):
    """asyncssh itself refuses to connect then; the probe still tries the URL's host and port."""

    def no_user():
        raise OSError("No username set in the environment")

    (ssh_home / ".ssh" / "config").write_text("Host store\n  HostName 127.0.0.1\n  Port 2222\n")
    monkeypatch.setattr(remote.getpass, "getuser", no_user)
    assert remote.ssh_address({"host": "store"}) == ("store", 22)
    assert remote.ssh_address({"host": "store", "port": 2200}) == ("store", 2200)


def test_a_proxy_command_hides_the_server_from_the_probe(ssh_home):
    (ssh_home / ".ssh" / "config").write_text("Host piped\n  ProxyCommand nc gateway 22\n")
    assert remote.ssh_address({"host": "piped"}) is None


def test_a_match_on_the_urls_user_applies_for_that_user_only(ssh_home):
    (ssh_home / ".ssh" / "config").write_text("Match user deploy-bot\n  Port 2201\n")
    assert remote.ssh_address({"host": "store", "username": "deploy-bot"}) == ("store", 2201)
    assert remote.ssh_address({"host": "store"}) == ("store", 22)  # the local user is someone else


def test_a_match_canonical_block_is_skipped_as_asyncssh_skips_it_without_canonicalization(ssh_home):
    (ssh_home / ".ssh" / "config").write_text("Match canonical\n  HostName 10.9.9.9\n  Port 2300\n")
    assert remote.ssh_address({"host": "store"}) == ("store", 22)


def test_a_match_final_block_applies_as_asyncssh_reads_it_again_for_it(ssh_home):
    (ssh_home / ".ssh" / "config").write_text("Host store\n  Port 2201\nMatch final\n  HostName 127.0.0.9\n")
    assert remote.ssh_address({"host": "store"}) == ("127.0.0.9", 2201)


def test_the_final_pass_starts_from_the_url_not_from_the_first_pass(ssh_home):
    """asyncssh reads the file again for `Match final` from the URL's values: the HostName the first pass
    found does not make an earlier `Match final host` block match."""
    (ssh_home / ".ssh" / "config").write_text("Match final host real\n  Port 2203\nHost store\n  HostName real\n")
    assert remote.ssh_address({"host": "store"}) == ("real", 22)


def test_the_final_pass_skips_match_canonical_and_matches_the_urls_user(ssh_home):
    config = "Host store\n  Port 2201\nMatch canonical\n  HostName 10.9.9.9\n"
    config += "Match final user deploy-bot\n  HostName 127.0.0.9\n"
    (ssh_home / ".ssh" / "config").write_text(config)
    assert remote.ssh_address({"host": "store", "username": "deploy-bot"}) == ("127.0.0.9", 2201)
    assert remote.ssh_address({"host": "store"}) == ("store", 2201)  # the local user is someone else


# ssh_answers: the probe's timeout covers the connection and the greeting together

WHERE = "DVC remote 'shared' (ssh://store/x)"


def probe(address: tuple[str, int], timeout: float) -> None:
    """`ssh_answers` in a thread, with a hang guard: a probe that ignores `timeout` fails the test, not blocks it."""
    outcome: list[BaseException | None] = []

    def answer() -> None:
        try:
            remote.ssh_answers(address, WHERE, "shared", timeout)
        except BaseException as e:  # handed to the test's thread
            outcome.append(e)
        else:
            outcome.append(None)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    thread.join(timeout + 10)
    assert outcome, f"the probe outlived its {timeout} s timeout"
    if outcome[0] is not None:
        raise outcome[0]


def test_a_server_that_never_greets_is_announced_then_named_with_the_step_it_missed(monkeypatch, capsys):
    monkeypatch.setattr(remote, "NOTICE_AFTER", 0.0)
    with tcp_server(None) as port, refuses(WHERE, f"127.0.0.1:{port}", "did not send its SSH greeting", HOW):
        probe(("127.0.0.1", port), 0.5)
    out, err = capsys.readouterr()
    assert out == ""
    assert_names(err, WHERE, "waiting", f"127.0.0.1:{port}")  # the notice, on stderr


def test_a_server_that_never_accepts_is_named_with_the_step_it_missed():
    """A full listen queue: the kernel drops the connection's SYN, as a firewall that drops packets would."""
    with socket.create_server(("127.0.0.1", 0), backlog=0) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):  # the one connection the queue holds
            with refuses(WHERE, f"127.0.0.1:{port}", "did not accept a connection", HOW):
                probe(("127.0.0.1", port), 0.3)


def test_a_closed_port_is_named_with_the_systems_reason():
    with socket.socket() as bound:  # bound, not listening: a connection is refused
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        with refuses(WHERE, f"127.0.0.1:{port}: Connection refused", HOW):
            remote.ssh_answers(("127.0.0.1", port), WHERE, "shared", 1.0)


def test_a_greeting_within_the_timeout_passes_and_one_after_it_does_not():
    with tcp_server(b"SSH-2.0-OpenSSH_9.2\r\n", delay=0.2) as port:
        probe(("127.0.0.1", port), 5.0)
    with tcp_server(b"SSH-2.0-OpenSSH_9.2\r\n", delay=0.6) as port:
        with refuses(WHERE, f"127.0.0.1:{port}", "did not send its SSH greeting", HOW):
            probe(("127.0.0.1", port), 0.2)


def test_no_address_behind_a_proxy_is_not_probed():
    assert remote.ssh_answers(None, WHERE, "shared", 0.1) is None


# main: the command line `make push` / `make pull` run


def test_main_prints_one_error_line_and_exits_1_when_the_remote_cannot_serve(repo, tmp_path, capsys):
    store = tmp_path / "store"
    point(repo, str(store))
    assert remote.main(["--root", str(repo), "--for", "pull"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: ")
    assert_names(err, f"DVC remote 'shared' ({store})", store, "does not exist", "pull", HOW)
    assert remote.main(["--root", str(repo), "--for", "push"]) == 0  # the parent exists
    out, err = capsys.readouterr()
    assert err == ""
    assert_names(out, f"shared ({store})", "push")


def test_main_checks_the_repo_it_runs_in_by_default(repo, tmp_path, monkeypatch, capsys):
    store = tmp_path / "store"
    point(repo, str(store))
    monkeypatch.chdir(repo)
    assert remote.main(["--for", "push"]) == 0
    assert_names(capsys.readouterr().out, f"shared ({store})", "push")


@pytest.mark.parametrize("argv", [["--for", "fetch"], [], ["--root", "."]])
def test_main_refuses_anything_but_for_push_or_pull_before_checking(argv, monkeypatch, capsys):
    monkeypatch.setattr(remote, "check_remote", lambda root, action: pytest.fail(f"checked for {action}"))
    with pytest.raises(SystemExit) as exit:
        remote.main(argv)
    assert exit.value.code == 2
    err = capsys.readouterr().err
    for named in ("usage: python -m emergence remote ", "--for", "push", "pull"):
        assert named in err, err


@pytest.mark.parametrize("action", ["push", "pull"])
def test_main_takes_each_action_it_offers(action, monkeypatch, capsys):
    monkeypatch.setattr(remote, "check_remote", lambda root, action: "shared (/store)")
    assert remote.main(["--for", action]) == 0
    assert_names(capsys.readouterr().out, "shared (/store)", action)


def test_main_help_says_what_it_checks_and_for_which_make_targets(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "200")  # one line each: no word wrapped away from its neighbour
    with pytest.raises(SystemExit) as exit:
        remote.main(["--help"])
    assert exit.value.code == 0
    out = capsys.readouterr().out
    told = ("usage: python -m emergence remote ", "the default DVC remote", "make push", "make pull", "--for", "--root")
    for named in told:
        assert named in out, out

"""Check the default DVC remote before `make push` / `make pull`: `python -m emergence remote --for pull`.

The remote is named in one place, `core.remote` in .dvc/config (committed, with a default URL);
a clone points it elsewhere with `dvc remote modify --local <name> url ...`, which goes to
.dvc/config.local (never committed). This check reads both through DVC itself, so it sees exactly
what `dvc push` / `dvc pull` would use, and turns a missing or unreachable remote into one line
saying how to set it, instead of DVC's traceback, a stall, or a new empty store created by a push.
A push needs the remote's parent folder (DVC creates the store itself); a pull needs the store.
"""

from __future__ import annotations

import argparse
import getpass
import os
import socket
import sys
import threading
import time
import warnings
from pathlib import Path

from emergence.core.io import PipelineError

DOC = "docs/sharing.md"
# An SSH server greets within a second of accepting; DVC's own login timeout is 120 s of silence.
SSH_TIMEOUT = 10.0  # seconds for the TCP connection and the server's greeting together
NOTICE_AFTER = 2.0  # seconds of silence before saying what it waits for


def how_to_set(name: str) -> str:
    return (
        f"set it for this clone with `dvc remote modify --local {name} url "
        f"<folder | ssh://host/path | s3://bucket/path>` (see {DOC})"
    )


def check_remote(root: Path, action: str) -> str:
    """`name (url)` of the default remote when it can serve `action`; else PipelineError, one line."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        name = repo.config["core"].get("remote")
        if not name or name not in repo.config["remote"]:
            raise PipelineError(f".dvc/config: no default DVC remote (core.remote); {how_to_set(name or 'shared')}")
        url = repo.config["remote"][name].get("url", "")
        where = f"DVC remote '{name}' ({url})"
        try:
            remote = repo.cloud.get_remote(name, action)
        except (DvcException, ImportError) as e:  # e.g. s3:// without dvc-s3 installed
            raise PipelineError(f"{where}: {str(e).splitlines()[0]}; {how_to_set(name)}") from e
        except ValueError as e:  # urllib parsing the URL: a port out of range or not a number
            raise PipelineError(f"{where}: not a valid URL ({e}); {how_to_set(name)}") from e
        if remote.fs.protocol == "ssh":
            if not remote.fs.config.get("host"):  # else fs_args raises KeyError
                raise PipelineError(f"{where}: no host in the URL (ssh://host/path); {how_to_set(name)}")
            ssh_answers(ssh_address(remote.fs.fs_args), where, name)
        if remote.fs.protocol == "local":
            inside_checkout(Path(remote.path), Path(repo.root_dir), where, name)
        path = remote.path if action == "pull" else remote.fs.parent(remote.path)
        try:
            found = remote.fs.exists(path)
        except Exception as e:  # any transport's failure (refused, auth, DNS) ends up as one line
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise PipelineError(f"{where}: cannot reach it ({reason}); {how_to_set(name)}") from e
        if not found:
            raise PipelineError(f"{where}: {path} does not exist, nothing to {action}; {how_to_set(name)}")
        return f"{name} ({url})"


def inside_checkout(store: Path, root: Path, where: str, name: str) -> None:
    """PipelineError, one line, for a local store that is the checkout, lies in it or holds it: `url ''`
    resolves to the checkout root, where `dvc push` would write files/ beside the code, and a store in
    the checkout's folders mixes DVC's copies with its artifacts."""
    store, root = store.resolve(), root.resolve()
    if store.is_relative_to(root) or root.is_relative_to(store):
        how = "is" if store == root else "lies inside" if store.is_relative_to(root) else "holds"
        raise PipelineError(
            f"{where}: resolves to {store}, which {how} the checkout {root}; "
            f"a store must be outside it: {how_to_set(name)}"
        )


def ssh_address(fs_args: dict) -> tuple[str, int] | None:
    """(host, port) an SSH remote connects to, read through ~/.ssh/config as asyncssh reads it (a Host
    alias, its HostName and Port); None behind a ProxyJump or ProxyCommand, which no direct probe sees."""
    from asyncssh.config import SSHClientConfig

    host, port, user = fs_args["host"], fs_args.get("port"), fs_args.get("username")
    user_config = Path("~", ".ssh", "config").expanduser()
    try:
        local_user = getpass.getuser()
    except (KeyError, OSError):  # no user name in the environment: asyncssh itself would refuse
        return host, int(port or 22)
    paths = [user_config] if os.access(user_config, os.R_OK) else []
    # load(last_config, paths, reload, canonical, final, local_user, user, host, port) as asyncssh.connect
    # calls it; () is its "not given", which lets the config's User and Port apply
    config = SSHClientConfig.load(None, paths, False, False, False, local_user, user or (), host, port or ())
    if config.has_match_final():  # asyncssh.connect then reads the file again, `Match final` blocks applying
        config = SSHClientConfig.load(config, paths, True, False, True, local_user, user or (), host, port or ())
    if config.get("ProxyJump") or config.get("ProxyCommand"):
        return None
    return config.get("Hostname") or host, int(port or config.get("Port") or 22)


def ssh_answers(address: tuple[str, int] | None, where: str, name: str, timeout: float = SSH_TIMEOUT) -> None:
    """PipelineError, one line, unless the SSH server at `address` greets within `timeout` seconds; after
    NOTICE_AFTER seconds of silence, one line says what it waits for. A server that accepts and never
    answers would otherwise hold `dvc pull` silent until its login timeout (121 s)."""
    if address is None:
        return
    host, port = address
    waiting = f"{where}: waiting for the SSH server at {host}:{port} (up to {timeout:.0f} s)"
    notice = threading.Timer(NOTICE_AFTER, lambda: print(waiting, file=sys.stderr, flush=True))
    notice.start()
    deadline, step = time.monotonic() + timeout, "accept a connection"
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            step = "send its SSH greeting"
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            greeting = sock.recv(256)
    except TimeoutError:
        raise PipelineError(
            f"{where}: {host}:{port} did not {step} within {timeout:.0f} s; {how_to_set(name)}"
        ) from None
    except OSError as e:  # refused, no route, unknown host
        raise PipelineError(
            f"{where}: cannot reach it ({host}:{port}: {e.strerror or e}); {how_to_set(name)}"
        ) from None
    finally:
        notice.cancel()
    if not greeting:
        raise PipelineError(f"{where}: {host}:{port} closed the connection without an SSH greeting; {how_to_set(name)}")


def quiet_transport_imports() -> None:
    """Ignore warnings raised inside asyncssh's modules (dvc-ssh imports it). Since cryptography 51 its
    import warns that DSA is deprecated, ten lines of source quotes on stderr above this check's one
    line; they concern asyncssh's authors, not a user setting a remote. Call inside catch_warnings."""
    warnings.filterwarnings("ignore", module=r"asyncssh(\.|$)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emergence remote", description=__doc__.splitlines()[0])
    parser.add_argument("--for", dest="action", choices=("push", "pull"), required=True)
    parser.add_argument("--root", type=Path, default=Path("."))
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings():
            quiet_transport_imports()
            described = check_remote(args.root, args.action)
    except PipelineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"DVC remote {described}: ready to {args.action}")
    return 0

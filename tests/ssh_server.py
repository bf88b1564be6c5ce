"""A throwaway OpenSSH server on 127.0.0.1, for the SSH remote test and bench/ssh_round_trip.py.

Debian's sshd (package openssh-server) runs in the foreground on a free port with everything
under one folder: its own host key, one client key pair made for the occasion (the only
authorized key), no password or keyboard-interactive login, and the in-process SFTP server
(`Subsystem sftp internal-sftp`: DVC's SSH remote speaks SFTP and fails with "Can't create any
SFTP connections" without it). Clients get a HOME of their own whose ~/.ssh/known_hosts holds
the host key, so host checking stays on and the user's own ~/.ssh is never read or written.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from daemons import stop_process

HOST = "127.0.0.1"
# program -> the Debian package that installs it
PROGRAMS = {"sshd": "openssh-server", "ssh-keygen": "openssh-client"}
SSHD = "/usr/sbin/sshd"  # sshd refuses to start unless run by its absolute path

CONFIG = """\
Port {port}
ListenAddress {host}
HostKey {root}/host_ed25519
PidFile {root}/sshd.pid
AuthorizedKeysFile {root}/authorized_keys
AllowUsers {user}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin prohibit-password
# the key files live under a temporary folder, which StrictModes rejects when /tmp is world-writable
StrictModes no
Subsystem sftp internal-sftp
"""


@dataclass
class SSHServer:
    port: int
    user: str
    key: Path  # the client's private key (its public half is the only authorized key)
    home: Path  # HOME for clients: .ssh/known_hosts trusts this server's host key

    def url(self, path: Path) -> str:
        return f"ssh://{HOST}:{self.port}{Path(path).resolve()}"

    def env(self) -> dict[str, str]:
        """What a client (dvc) runs with on top of the environment: its own HOME, no agent keys."""
        return {"HOME": str(self.home), "SSH_AUTH_SOCK": ""}


def missing_programs() -> list[str]:
    found = {"sshd": Path(SSHD).is_file(), "ssh-keygen": shutil.which("ssh-keygen") is not None}
    return [f"{name} (Debian package {PROGRAMS[name]})" for name, ok in found.items() if not ok]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def keygen(path: Path) -> str:
    """An ed25519 key pair without passphrase at `path`; returns the public key line."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


def wait_for_banner(port: int, proc: subprocess.Popen, log: Path, timeout: float = 20.0) -> None:
    """Until the server greets with `SSH-2.0`; raises with the log's tail if it died or never did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with socket.create_connection((HOST, port), timeout=1) as s:
                if s.recv(64).startswith(b"SSH-"):
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"sshd did not start on {HOST}:{port}: {log.read_text()[-1500:]}")


@contextmanager
def ssh_server(root: Path) -> Iterator[SSHServer]:
    """sshd serving `root`'s machine over SFTP, stopped on exit whatever happened inside."""
    missing = missing_programs()
    if missing:
        raise RuntimeError(f"cannot start an SSH server: missing {', '.join(missing)}")
    root.mkdir(parents=True, exist_ok=True)
    home = root / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    host_key = keygen(root / "host_ed25519")
    (root / "authorized_keys").write_text(keygen(root / "client_ed25519") + "\n")
    port, user = free_port(), getpass.getuser()
    (home / ".ssh" / "known_hosts").write_text(f"[{HOST}]:{port} {' '.join(host_key.split()[:2])}\n")
    (root / "sshd_config").write_text(CONFIG.format(port=port, host=HOST, root=root, user=user))
    if os.geteuid() == 0:
        # privilege separation folder that a root sshd needs; Debian's service creates it at boot
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    log = root / "sshd.log"
    with log.open("w") as err:
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(root / "sshd_config")], stderr=err)
    try:
        wait_for_banner(port, proc, log)
        yield SSHServer(port, user, root / "client_ed25519", home)
    finally:
        stop_process(proc, grace_s=10)

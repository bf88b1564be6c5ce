"""Share a built checkout through an SSH remote and check that fresh clones pull it clean.

    python tests/ssh_round_trip.py CHECKOUT [--clones 2] [--workdir DIR]

Starts a throwaway sshd on 127.0.0.1 (ssh_server.py), pushes CHECKOUT's DVC cache to a folder it
serves, then makes fresh `git clone`s of CHECKOUT and, in each, does what a teammate does: point the
default remote at the server with `dvc remote modify --local`, `python -m emergence remote --for
pull`, `dvc pull`; then `dvc status` must be clean, `dvc repro` must run nothing, and every artifact
must equal the checkout's. A clone gets what is committed: CHECKOUT's dvc.lock and params.yaml must be.

CHECKOUT itself is never edited: its push goes to a remote defined in the DVC global config of the
clients' private HOME. Prints one JSON object (seconds per step, files pushed, what differed);
exits 1 when a clone is not clean. tests/pipeline/test_ssh_remote.py runs it on the tiny profile.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from artifacts import digest, ran_stages
from conftest import run
from ssh_server import ssh_server

RUN_FILES = ["dvc.yaml", "dvc.lock", "params.yaml", ".dvcignore"]  # what a clone needs committed to match
PUSHED_FROM = "ssh-round-trip"  # the checkout's push target, in the private HOME's DVC global config


@dataclass
class Clone:
    path: str
    pull_s: float
    status: str  # `dvc status` output
    ran: list[str]  # stages a `dvc repro` ran
    repro_s: float
    differing: list[str]  # artifacts whose bytes differ from the checkout's, or that only one side has

    @property
    def clean(self) -> bool:
        return "up to date" in self.status and not self.ran and not self.differing


@dataclass
class RoundTrip:
    push_s: float
    pushed: int  # files `dvc push` sent
    clones: list[Clone] = field(default_factory=list)


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[str, float]:
    start = time.perf_counter()
    out = run(cmd, cwd, env=env).stdout
    return out, time.perf_counter() - start


def point_remote(cwd: Path, name: str, scope: str, settings: dict[str, str], env: dict[str, str]) -> None:
    for key, value in settings.items():
        run(["dvc", "remote", "modify", scope, name, key, value], cwd, env=env)


def round_trip(checkout: Path, workdir: Path, clones: int = 2) -> RoundTrip:
    """Push `checkout` over SSH and pull it into `clones` fresh clones under `workdir` (sshd stopped after)."""
    uncommitted = run(["git", "status", "--porcelain", *RUN_FILES], checkout).stdout.split()[1::2]
    if uncommitted:
        raise SystemExit(f"{checkout}: {', '.join(uncommitted)} not committed; a clone would not get them")
    baseline = digest(checkout)
    with ssh_server(workdir / "sshd") as server:
        env = server.env()
        settings = {"url": server.url(workdir / "store"), "keyfile": str(server.key), "user": server.user}
        run(["dvc", "remote", "add", "--global", PUSHED_FROM, settings["url"]], checkout, env=env)
        point_remote(checkout, PUSHED_FROM, "--global", settings, env)
        out, push_s = timed(["dvc", "push", "-r", PUSHED_FROM], checkout, env)
        pushed = re.search(r"(\d+) files? pushed", out)
        trip = RoundTrip(push_s, int(pushed.group(1)) if pushed else 0)
        for i in range(clones):
            clone = workdir / f"clone{i + 1}"
            run(["git", "clone", "-q", str(checkout.resolve()), str(clone)], workdir)
            name = run(["dvc", "remote", "default"], clone, env=env).stdout.strip()  # named once, in .dvc/config
            point_remote(clone, name, "--local", settings, env)
            run([sys.executable, "-m", "emergence", "remote", "--for", "pull"], clone, env=env)
            _, pull_s = timed(["dvc", "pull"], clone, env)
            status = run(["dvc", "status"], clone, env=env).stdout
            out, repro_s = timed(["dvc", "repro"], clone, env)
            theirs = digest(clone)
            differing = sorted(p for p in baseline.keys() | theirs.keys() if baseline.get(p) != theirs.get(p))
            trip.clones.append(Clone(str(clone), pull_s, status.strip(), ran_stages(out), repro_s, differing))
    return trip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a built checkout (git repo, DVC cache, dvc.lock committed)")
    parser.add_argument("--clones", type=int, default=2)
    parser.add_argument("--workdir", type=Path, help="for the server, store and clones (default: temp)")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ssh-round-trip-"))
    trip = round_trip(args.checkout, workdir, args.clones)
    print(json.dumps({**asdict(trip), "clean": [c.clean for c in trip.clones]}, indent=1))
    return 0 if all(c.clean for c in trip.clones) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""The shared cache over the network: a tiny run pushed to a real sshd, pulled into two fresh clones.

Needs Debian's openssh-server and openssh-client: without them the test fails (never skips),
naming the package. The server is stopped when the round trip ends, whatever happened.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from conftest import copy_run, project_copy, run
from refusals import assert_names, refuses
from ssh_round_trip import point_remote, round_trip
from ssh_server import ssh_server

from emergence.core.remote import check_remote


def test_push_over_ssh_then_two_fresh_clones_pull_clean(tiny_run, tmp_path):
    source = copy_run(tiny_run, tmp_path / "source")
    # the run's params and lock only: the .gitignore files DVC rewrote stay as the project had them,
    # so a clone's differ from the source's, which must not matter (they are git's, not artifacts)
    run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "run", "dvc.lock", "params.yaml"], source)
    trip = round_trip(source, tmp_path / "trip", clones=2)
    print(json.dumps(asdict(trip), indent=1))  # the seconds docs/sharing.md quotes (pytest -s)
    assert trip.pushed > 50, "the tiny run holds a few hundred files: the push sent almost none"
    assert len(trip.clones) == 2
    for clone in trip.clones:
        assert "up to date" in clone.status, f"{clone.path}: dvc status after a pull:\n{clone.status}"
        assert clone.ran == [], f"{clone.path}: dvc repro after a pull ran {clone.ran}"
        assert clone.differing == [], f"{clone.path}: artifacts differ from the pushed run: {clone.differing}"


def test_unreachable_or_absent_ssh_remote_is_one_line_saying_how_to_set_it(tmp_path):
    """Against a live sshd: an existing folder passes, a missing one and a closed port are one line each."""
    source = project_copy(tmp_path / "source", profile=None)
    (tmp_path / "store").mkdir()
    with ssh_server(tmp_path / "sshd") as server:
        env, login = server.env(), {"keyfile": str(server.key), "user": server.user}
        cases = {  # the reachable one last: it stays configured for the check after the server stops
            server.url(tmp_path / "absent"): [str(tmp_path / "absent"), "pull"],  # the folder, and for what
            server.url(tmp_path / "store").replace(f":{server.port}/", ":1/"): ["reach"],
            server.url(tmp_path / "store"): None,
        }
        for url, named in cases.items():
            point_remote(source, "shared", "--local", {"url": url, **login}, env)
            proc = run(["python", "-m", "emergence", "remote", "--for", "pull"], source, check=False, env=env)
            if named is None:
                assert proc.returncode == 0, proc.stderr
                continue
            assert proc.returncode == 1 and proc.stdout == ""
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1, proc.stderr
            # the remote by name and URL, what is wrong, and the command that sets it for this clone
            assert_names(lines[0], f"DVC remote 'shared' ({url}): ", *named, "dvc remote modify --local shared url")
    with refuses("DVC remote 'shared'", "reach"):
        check_remote(source, "pull")  # the same URL once the server has been stopped

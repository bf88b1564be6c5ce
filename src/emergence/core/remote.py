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
import sys
from pathlib import Path

from emergence.core.io import PipelineError

DOC = "docs/sharing.md"


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
        path = remote.path if action == "pull" else remote.fs.parent(remote.path)
        try:
            found = remote.fs.exists(path)
        except Exception as e:  # any transport's failure (refused, auth, DNS) ends up as one line
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise PipelineError(f"{where}: cannot reach it ({reason}); {how_to_set(name)}") from e
        if not found:
            raise PipelineError(f"{where}: {path} does not exist, nothing to {action}; {how_to_set(name)}")
        return f"{name} ({url})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emergence remote", description=__doc__.splitlines()[0])
    parser.add_argument("--for", dest="action", choices=("push", "pull"), required=True)
    parser.add_argument("--root", type=Path, default=Path("."))
    args = parser.parse_args(argv)
    try:
        described = check_remote(args.root, args.action)
    except PipelineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"DVC remote {described}: ready to {args.action}")
    return 0

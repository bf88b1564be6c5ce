"""What a report records about how it was made: git revision, params, input hashes."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path

from emergence.core.io import file_sha256


def git_revision() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    # DVC itself edits .gitignore files and dvc.lock while a pipeline runs: they say
    # nothing about the code or params a report was made with.
    dirty = [line for line in status if not line.rstrip().endswith((".gitignore", "dvc.lock"))]
    return rev + (" (uncommitted changes)" if dirty else "")


def study_params(params: dict, prefixes: tuple[str, ...]) -> dict:
    """The params a study's results depend on: its own sections and paths (by name prefix).

    A report records only these, so editing another study's params leaves its bytes alone
    (and DVC and Snakemake agree on which reports are up to date)."""
    own = {name: params[name] for name in params if name.startswith(prefixes)}  # reads declared sections
    paths = {key: value for key, value in params.get("paths", {}).items() if key.startswith(prefixes)}
    return {**own, "paths": paths}


def provenance(params: dict, seeds: list[int], inputs: Iterable[Path], prefixes: tuple[str, ...]) -> dict:
    """The dict `html.provenance_block` renders, for the study whose params start with `prefixes`."""
    return {
        "params": study_params(params, prefixes),
        "git_revision": git_revision(),
        "seeds": seeds,
        "data_hashes": {str(p): file_sha256(p) for p in inputs},
    }

"""What a report records about how it was made: git revision, params, input hashes."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterable

from emergence.io import file_sha256


def git_revision() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return rev + (" (uncommitted changes)" if dirty else "")


def provenance(params: dict, seeds: list[int], inputs: Iterable[Path]) -> dict:
    """The dict `html.provenance_block` renders."""
    return {"params": params, "git_revision": git_revision(), "seeds": seeds,
            "data_hashes": {str(p): file_sha256(p) for p in inputs}}

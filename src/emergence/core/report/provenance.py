"""What a report records about how it was made: git revision, params, input hashes."""

from __future__ import annotations

import json
import os
import platform
import socket
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


# ---- what only this run knows: machine and stage records (shown in a run-specific block) --------------

STAGE_RECORDS = Path("logs/stages")  # one JSON per stage run, written as the stage ends (docs/index_page.md)
RECORD_KEYS = ("stage", "command", "engine", "host", "started", "wall_s", "max_rss_mb", "exit")


def machine() -> str:
    """Where this page was built: architecture, cores, memory, OS, Python and torch."""
    import torch

    try:
        memory = f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB"
    except (ValueError, OSError, AttributeError):
        memory = "memory unknown"
    return (
        f"{socket.gethostname()}: {platform.machine()}, {os.cpu_count()} cores, {memory}, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}, torch {torch.__version__}"
    )


def stage_records(folder: Path = STAGE_RECORDS) -> list[dict]:
    """Every stage record under `folder`, sorted by stage then command; [] when there is none.

    A record that is not a JSON object is skipped with a note in its place: the records describe
    past runs, and one damaged by a killed writer must not stop the index."""
    records = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            record = None
        if not isinstance(record, dict):
            record = {"command": f"{path.name}: unreadable record"}
        records.append({key: record.get(key) for key in RECORD_KEYS})
    return sorted(records, key=lambda r: (str(r["stage"] or ""), str(r["command"] or "")))


def stage_times(records: list[dict], stages: list[str]) -> list[dict]:
    """Per declared stage: its instances recorded, engines, total and longest wall time, peak RSS.

    A stage without a record is "not recorded"; records of direct runs (stage null) are left to the
    full list."""
    rows = []
    for name in stages:
        mine = [r for r in records if str(r["stage"] or "").split("@")[0] == name]
        walls = [w for r in mine if isinstance(w := r["wall_s"], (int, float)) and not isinstance(w, bool)]
        rss = [m for r in mine if isinstance(m := r["max_rss_mb"], (int, float)) and not isinstance(m, bool)]
        rows.append(
            {
                "stage": name,
                "instances recorded": len(mine) if mine else "not recorded",
                "engine": ", ".join(sorted({str(r["engine"]) for r in mine})) or "not recorded",
                "wall s (sum)": round(sum(walls), 1) if walls else "not recorded",
                "wall s (longest)": round(max(walls), 1) if walls else "not recorded",
                "max RSS MB": round(max(rss), 1) if rss else "not recorded",
                "failed": sum(1 for r in mine if r["exit"] not in (0, None)),
            }
        )
    return rows

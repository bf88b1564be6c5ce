"""The rules of the `paths:` section that need the declaration (pipeline.yaml) and the checkout: which
keys exist, where the outputs may lie, and that no two stages write the same place.

`python -m emergence check` and the params_check stage run them on the whole section; a stage at its
start runs them too and keeps the lines naming the keys it uses (check.py `stage_problems`).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from emergence.core.config import did_you_mean
from emergence.core.declared import DECLARATION, PATH_KEY
from emergence.core.pipeline import read_declaration


def used_paths(root: Path) -> dict[str, set[str]]:
    """key -> the stages whose deps, outs, metrics or scratch name `${paths.key}`: the keys that exist."""
    used: dict[str, set[str]] = {}
    for name, stage in read_declaration(root)["stages"].items():
        files = [*stage.get("deps", []), *stage.get("outs", []), *stage.get("metrics", [])]
        keys = {k for f in files for k in PATH_KEY.findall(str(f))} | set(
            (stage.get("meta") or {}).get("untracked", [])
        )
        for key in keys:
            used.setdefault(key, set()).add(name)
    return used


def written_paths(root: Path) -> set[str]:
    """The `paths:` keys some stage writes: an out, a metric, its scratch."""
    written = set()
    for stage in read_declaration(root)["stages"].values():
        written |= {k for f in [*stage.get("outs", []), *stage.get("metrics", [])] for k in PATH_KEY.findall(str(f))}
        written |= set((stage.get("meta") or {}).get("untracked", []))
    return written


def tracked_files(root: Path) -> set[str]:
    """The files git tracks in the checkout (none outside a git checkout), but the .gitignore files DVC
    writes into its outputs' folders."""
    try:
        proc = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, text=True)
    except OSError:  # no git on PATH: nothing known to be tracked
        return set()
    files = proc.stdout.split("\0") if proc.returncode == 0 else []
    return {f for f in files if f and not f.endswith(".gitignore")}


def outputs_stay_in_the_checkout(params: dict, root: Path) -> list[str]:
    """A `paths:` key some stage writes must resolve inside the checkout (outside it DVC cannot track
    the output: `dvc status` then fails with "unexpected error"), outside .git and .dvc, and must not
    name a file git tracks or a folder holding one (params.yaml, README.md, the code): a stage replaces
    its outputs, and those are not its to replace. Inputs may lie anywhere."""
    paths, checkout = params["paths"], root.resolve()
    tracked, problems = tracked_files(root), []
    for key in sorted(written_paths(root)):
        value = paths.get(key)
        if not isinstance(value, str) or not value:
            continue  # check_paths names it
        where = (root / os.path.expanduser(value)).resolve()
        rel = where.relative_to(checkout).as_posix() if where.is_relative_to(checkout) else None
        if rel is None or rel == ".":
            why = f"outside the checkout {checkout}; DVC tracks only outputs inside it"
        elif rel.split("/")[0] in (".git", ".dvc"):
            why = f"inside {rel.split('/')[0]}/, which git or DVC keeps"
        elif rel in tracked or any(t.startswith(rel + "/") for t in tracked):
            why = "a file git tracks (or a folder holding them), which a stage writing it would replace"
        else:
            continue
        problems.append(f"paths.{key}: {value!r} resolves to {where}, {why}; a stage writes it")
    return problems


def keys_the_declaration_names(params: dict, root: Path) -> list[str]:
    """Every key the stages name must be there, and a key no stage names is a misspelling: the stage
    would read the default path in silence (`childes_sorce:` beside the real `childes_source:`)."""
    paths, used = params["paths"], used_paths(root)
    unknown = [
        f"paths.{key}: unknown key, no stage reads or writes it ({hint(key, used)})" for key in paths if key not in used
    ]
    missing = [
        f"paths.{key}: required key missing (stage {min(used[key])} uses it)"
        for key in sorted(used)
        if key not in paths
    ]
    return unknown + missing


def hint(key: str, known: dict) -> str:
    """`did you mean X?`, or the known keys when none is close (80 keys are too many to read otherwise)."""
    return did_you_mean(key, known).strip() or f"known: {', '.join(sorted(known))}"


def written_paths_apart(params: dict, root: Path) -> list[str]:
    """Two keys stages write must name different places, neither inside the other: a stage replaces its
    outputs and clears its scratch, so one written inside another's (a scratch folder that is the runs
    folder, a metrics file that is another stage's) is deleted or overwritten without a word."""
    paths, checkout, problems = params["paths"], root.resolve(), []
    where = {
        key: (root / os.path.expanduser(paths[key])).resolve()
        for key in sorted(written_paths(root))
        if isinstance(paths.get(key), str) and paths[key]
    }
    parts = {key: path.parts for key, path in where.items()}  # tuples: ~16,000 pairs at the default
    for key, path in parts.items():
        if not where[key].is_relative_to(checkout):
            continue
        for other, there in parts.items():
            if other == key:
                continue
            if path == there:
                problems.append(f"paths.{key}: {paths[key]!r} is also paths.{other}; stages write both")
            elif path[: len(there)] == there:
                problems.append(
                    f"paths.{key}: {paths[key]!r} lies inside paths.{other} ({paths[other]!r}); stages write both"
                )
            elif there[: len(path)] == path:
                problems.append(
                    f"paths.{key}: {paths[key]!r} holds paths.{other} ({paths[other]!r}); stages write both"
                )
    return problems


def path_problems(params: dict, root: Path) -> list[str]:
    """Every problem of the `paths:` section against the checkout `root` ([] outside one)."""
    if not isinstance(params.get("paths"), dict) or not (root / DECLARATION).is_file():
        return []
    return [
        *keys_the_declaration_names(params, root),
        *outputs_stay_in_the_checkout(params, root),
        *written_paths_apart(params, root),
    ]

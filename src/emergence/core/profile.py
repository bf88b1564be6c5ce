"""Apply a params profile: `python -m emergence.core.profile paper` (or `tiny`, or a path).

A profile (profiles/NAME.yaml) holds only the keys that differ from the
embedded default. Applying it deep-merges those keys into params.yaml in
place, keeping params.yaml's comments, so DVC and Snakemake both see one
params file. `git checkout params.yaml` returns to the embedded default.

The merged result is checked as `python -m emergence check` checks params.yaml
(schemas and cross-section checks: it runs that command on it), and written only
when it passes; otherwise every problem is printed (each key the profile names
that params.yaml lacks, with the profile's path, and each problem of the merged
result) and params.yaml is left as it was. The check runs in its own process
because it loads every study's schemas, which core may not import.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedSeq

from emergence.core.config import PARAMS_FILE, did_you_mean, read_params
from emergence.core.declared import DECLARATION
from emergence.core.io import PipelineError, write_text

PROFILES_DIR = Path("profiles")


def profile_path(name: str) -> Path:
    path = Path(name)
    if path.suffix not in (".yaml", ".yml"):
        path = PROFILES_DIR / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in PROFILES_DIR.glob("*.yaml") if p.is_file()))
        raise PipelineError(f"{path}: {'not a file' if path.exists() else 'profile not found'} (known: {known})")
    return path


def merge_into(base: dict, overlay: dict, where: str = "", as_list: Callable[[list], list] = list) -> list[str]:
    """Deep-merge `overlay` into `base`; every overlay key must already exist in base. Returns one line
    per key that does not (the others are merged, so the result's own problems can be listed too).
    A list is written as `as_list` makes it (`flow` for a file the round-trip writer keeps)."""
    unknown = []
    for key, value in overlay.items():
        name = f"{where}.{key}" if where else str(key)
        if key not in base:
            unknown.append(f"{name}: unknown key ({did_you_mean(key, base)}not in {PARAMS_FILE})")
        elif isinstance(value, dict) and isinstance(base[key], dict):
            unknown += merge_into(base[key], value, name, as_list)
        else:
            base[key] = as_list(value) if isinstance(value, list) else value
    return unknown


def flow(values: list) -> CommentedSeq:
    """A list written `[a, b]` on its key's line, as params.yaml writes its lists. A block list under a key
    that carries a comment is one that DVC's `-S` (ruamel 0.18) rewrites into broken YAML: setting
    `binding_llc.seeds=[]` joined the next two lines (`num_draws: 12 lr: 0.001`)."""
    seq = CommentedSeq(values)
    seq.fa.set_flow_style()
    return seq


def check_problems(text: str) -> list[str]:
    """The lines `python -m emergence check` prints for params `text` (relative paths in it are read
    from the working directory, as for params.yaml; so is pipeline.yaml, or where the working directory
    has none, a bare workspace, this package's checkout's); [] when it passes."""
    src = str(Path(__file__).resolve().parents[2])  # this emergence package, whatever sys.path says
    root = "." if Path(DECLARATION).is_file() else str(Path(src).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryDirectory() as tmp:
        merged = Path(tmp) / "params.yaml"
        merged.write_text(text, encoding="utf-8")
        proc = subprocess.run(
            [sys.executable, "-m", "emergence", "check", str(merged), "--root", root, "--estimate", "none"],
            capture_output=True,
            text=True,
            env=env,
        )
    if proc.returncode == 0:
        return []
    lines = [line.removeprefix("error: ") for line in proc.stderr.splitlines() if line.startswith("error: ")]
    return lines or [f"python -m emergence check failed on the merged params (exit {proc.returncode})"]


def apply_profile(name: str, params_file: str | Path = PARAMS_FILE) -> list[str]:
    """Merge profile `name` into `params_file` and write it if the result passes the check; else
    return its problems and leave the file untouched. A profile that cannot be read or merged raises."""
    yaml = YAML()  # round-trip mode keeps comments and key order
    yaml.width = 120
    read_params(params_file)  # a duplicate key, bad YAML or bytes: one line, before the round-trip loader
    params: Any = yaml.load(Path(params_file).read_text(encoding="utf-8"))
    path = profile_path(name)
    unknown = [f"{path}: {line}" for line in merge_into(params, read_params(path), as_list=flow)]
    out = io.StringIO()
    yaml.dump(params, out)
    if problems := unknown + check_problems(out.getvalue()):
        return problems
    write_text(out.getvalue(), params_file)
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", help="profile name in profiles/ (paper, tiny) or a YAML path")
    parser.add_argument("--params", default=PARAMS_FILE)
    args = parser.parse_args(argv)
    try:
        problems = apply_profile(args.profile, args.params)
    except PipelineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    if problems:
        print(
            f"{args.params}: profile {args.profile} not applied ({len(problems)} problem(s)), left as it was",
            file=sys.stderr,
        )
        return 1
    print(f"{args.params}: applied profile {args.profile}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Apply a params profile: `python -m emergence.core.profile paper` (or `tiny`, or a path).

A profile (profiles/NAME.yaml) holds only the keys that differ from the
embedded default. Applying it deep-merges those keys into params.yaml in
place, keeping params.yaml's comments, so DVC and Snakemake both see one
params file. `git checkout params.yaml` returns to the embedded default.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from emergence.core.config import PARAMS_FILE, did_you_mean, read_params
from emergence.core.io import PipelineError, write_text

PROFILES_DIR = Path("profiles")


def profile_path(name: str) -> Path:
    path = Path(name)
    if path.suffix not in (".yaml", ".yml"):
        path = PROFILES_DIR / f"{name}.yaml"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in PROFILES_DIR.glob("*.yaml")))
        raise PipelineError(f"{path}: profile not found (known: {known})")
    return path


def merge_into(base: dict, overlay: dict, where: str = "") -> None:
    """Deep-merge `overlay` into `base`; every overlay key must already exist in base."""
    for key, value in overlay.items():
        name = f"{where}.{key}" if where else str(key)
        if key not in base:
            raise PipelineError(f"{name}: unknown key ({did_you_mean(key, base)}not in {PARAMS_FILE})")
        if isinstance(value, dict) and isinstance(base[key], dict):
            merge_into(base[key], value, name)
        else:
            base[key] = value


def apply_profile(name: str, params_file: str | Path = PARAMS_FILE) -> None:
    yaml = YAML()  # round-trip mode keeps comments and key order
    yaml.width = 120
    read_params(params_file)  # a duplicate key, bad YAML or bytes: one line, before the round-trip loader
    params: Any = yaml.load(Path(params_file).read_text())
    overlay = read_params(profile_path(name))
    merge_into(params, overlay)
    out = io.StringIO()
    yaml.dump(params, out)
    write_text(out.getvalue(), params_file)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", help="profile name in profiles/ (paper, tiny) or a YAML path")
    parser.add_argument("--params", default=PARAMS_FILE)
    args = parser.parse_args(argv)
    try:
        apply_profile(args.profile, args.params)
    except PipelineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{args.params}: applied profile {args.profile}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

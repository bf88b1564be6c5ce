"""`python -m emergence <command>`: the project's own tools (stages run as `python -m stages.<study>.<name>`)."""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "check": ("emergence.check", "validate the whole params.yaml before anything runs"),
    "export": ("emergence.export", "a checkpoint as a Hugging Face folder (--to hf | transformer-lens)"),
    "pipeline": ("emergence.core.pipeline", "write dvc.yaml from pipeline.yaml (--check: fail if stale)"),
    "profile": ("emergence.core.profile", "apply a params profile (tiny, paper) to params.yaml"),
    "remote": ("emergence.core.remote", "check the default DVC remote before a push / pull (--for push|pull)"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print("usage: python -m emergence {" + ",".join(COMMANDS) + "} ...", file=sys.stderr)
        for name, (_, text) in COMMANDS.items():
            print(f"  {name:9} {text}", file=sys.stderr)
        return 2
    module, _ = COMMANDS[argv[0]]
    return importlib.import_module(module).main(argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())

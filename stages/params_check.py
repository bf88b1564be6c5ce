"""Check the whole params file (`python -m emergence check`), first in every `dvc repro` and `dvc exp run`.

Every other stage depends on this stage's output (core/declared.py `completed`), so DVC runs it before
anything else and stops on its error: a bad value set with `dvc exp run -S` is refused before DVC
removes any stage's last good outputs. The output's bytes never change, so a params edit that passes
reruns only the stages that read the edited keys.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from emergence.check import problems_of
from emergence.core.cli import changed_keys, project_root, stage_main, stage_parser, start_stage
from emergence.core.config import path_of, read_params
from emergence.core.io import PipelineError, write_text

PASSED = "params.yaml passed `python -m emergence check`\n"  # constant: downstream stages see no change


def left_by_experiment(params_file: str, env: dict[str, str]) -> str:
    """Under `dvc exp run -S`, one more line: DVC leaves the refused values in params.yaml (it does not
    restore the workspace of an experiment that failed), so name what differs from the experiment's
    baseline commit and how to put it back. '' outside an experiment or when git cannot tell."""
    baseline = env.get("DVC_EXP_BASELINE_REV")
    if not baseline:
        return ""
    shown = subprocess.run(["git", "show", f"{baseline}:{params_file}"], capture_output=True, text=True)
    try:
        before = yaml.safe_load(shown.stdout) if shown.returncode == 0 else None
        now = read_params(params_file)
    except (yaml.YAMLError, PipelineError):
        return ""
    if not isinstance(before, dict):
        return ""
    changed = [k for name in {**before, **now} for k in changed_keys(name, before.get(name), now.get(name))]
    return (
        f"\nerror: {params_file}: the experiment left {', '.join(changed)} as set with -S (DVC does not undo it, "
        "and may reformat the file; no output was removed): set them back, or "
        f"`git checkout {baseline[:7]} -- {params_file}` if you had no other edits there"
        if changed
        else ""
    )


@stage_main
def main(argv: list[str] | None = None) -> None:
    params_file = stage_parser(__doc__).parse_args(argv).params
    try:
        args, params = start_stage(__doc__, argv)  # the rules of every section (every stage's own start)
        if problems := problems_of(dict(params), root=project_root()):  # and each device job against the device
            raise PipelineError("\nerror: ".join(problems))
    except PipelineError as e:
        raise PipelineError(f"{e}{left_by_experiment(params_file, dict(os.environ))}") from None
    out = Path(path_of(params, "params_checked"))
    if not out.is_file() or out.read_text() != PASSED:  # left as it is: its time stamp is Snakemake's too
        write_text(PASSED, out)
    print(f"{args.params}: ok")


if __name__ == "__main__":
    raise SystemExit(main())

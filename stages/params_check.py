"""Check the whole params file (`python -m emergence check`), first in every `dvc repro` and `dvc exp run`.

Every other stage depends on this stage's output (core/declared.py `completed`), so DVC runs it before
anything else and stops on its error: a bad value set with `dvc exp run -S` is refused before DVC
removes any stage's last good outputs. The output's bytes never change, so a params edit that passes
reruns only the stages that read the edited keys.
"""

from __future__ import annotations

from pathlib import Path

from emergence.check import problems_of
from emergence.core.cli import project_root, stage_main, start_stage
from emergence.core.config import path_of
from emergence.core.io import PipelineError, write_text

PASSED = "params.yaml passed `python -m emergence check`\n"  # constant: downstream stages see no change


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv)  # the rules of every section (every stage's own start)
    if problems := problems_of(dict(params), root=project_root()):  # and every device job against the device
        raise PipelineError("\nerror: ".join(problems))
    out = Path(path_of(params, "params_checked"))
    if not out.is_file() or out.read_text() != PASSED:  # left as it is: its time stamp is Snakemake's too
        write_text(PASSED, out)
    print(f"{args.params}: ok")


if __name__ == "__main__":
    raise SystemExit(main())

"""Check the whole params file (`python -m emergence check`), first in every `dvc repro` and `dvc exp run`.

Every other stage depends on this stage's output (core/declared.py `completed`), so DVC runs it before
anything else and stops on its error: a bad value set with `dvc exp run -S` is refused before DVC
removes any stage's last good outputs, and params.yaml is put back as it was (core/experiment.py). The
output's bytes never change, so a params edit that passes reruns only the stages that read the edited
keys.
"""

from __future__ import annotations

import os
from pathlib import Path

from emergence.check import problems_of
from emergence.core.cli import project_root, stage_main, stage_parser, start_stage
from emergence.core.config import path_of, read_params
from emergence.core.experiment import after_refused, ancestors_argvs, restore
from emergence.core.io import PipelineError, write_text

PASSED = "params.yaml passed `python -m emergence check`\n"  # constant: downstream stages see no change


@stage_main
def main(argv: list[str] | None = None) -> None:
    params_file = stage_parser(__doc__).parse_args(argv).params
    try:
        args, params = start_stage(__doc__, argv)  # the rules of every section (every stage's own start)
        if problems := problems_of(dict(params), root=project_root()):  # and each device job against the device
            raise PipelineError("\nerror: ".join(problems))
    except PipelineError as e:
        put_back, line = after_refused(params_file, dict(os.environ), ancestors_argvs())
        restored = read_params(params_file) if put_back else None
        stamp_file = Path(path_of(restored, "params_checked")) if restored is not None else None
        if stamp_file and stamp_file.parent.is_dir() and not problems_of(dict(restored), root=project_root()):
            # DVC removed the stamp; the file it vouches for is back, so it is too (undoing DVC's step, like
            # params.yaml: not a write of this failing run, which the write guard would take back)
            restore(PASSED, stamp_file)
        raise PipelineError(f"{e}{line}") from None
    stamp(params)
    print(f"{args.params}: ok")


def stamp(params) -> None:
    out = Path(path_of(params, "params_checked"))
    if not out.is_file() or out.read_text() != PASSED:  # left as it is: its time stamp is Snakemake's too
        write_text(PASSED, out)


if __name__ == "__main__":
    raise SystemExit(main())

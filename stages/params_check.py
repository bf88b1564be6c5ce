"""Check the whole params file (`python -m emergence check`), first in every `dvc repro` and `dvc exp run`,
and write each stage instance's code digest (core/code_digest.py).

Every other stage depends on this stage's stamp (core/declared.py `completed`), so DVC runs it before
anything else and stops on its error: a bad value set with `dvc exp run -S` is refused before DVC
removes any stage's last good outputs, and params.yaml is put back as it was (core/experiment.py). The
output's bytes never change, so a params edit that passes reruns only the stages that read the edited
keys. Each other stage also depends on its own code digest: this stage depends on every code file, so
DVC reruns it after any code edit, and then exactly the stages whose digest the edit changed.
"""

from __future__ import annotations

import os
from pathlib import Path

from emergence.check import problems_of
from emergence.core.cli import project_root, stage_main, stage_parser, start_stage
from emergence.core.code_digest import digests
from emergence.core.config import path_of, read_params
from emergence.core.declared import DIGESTS_KEY, digest_path
from emergence.core.experiment import after_refused, ancestors_argvs, restore
from emergence.core.io import PipelineError, atomic_path, remove_tree, write_text
from emergence.core.pipeline import read_declaration

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
            write_digests(dict(restored), put_back=True)
        raise PipelineError(f"{e}{line}") from None
    stamp(params)
    write_digests(dict(params))
    print(f"{args.params}: ok")


def stamp(params) -> None:
    out = Path(path_of(params, "params_checked"))
    # left as it is when it already says so: its time stamp is Snakemake's too
    if not out.is_file() or out.read_text(encoding="utf-8") != PASSED:
        write_text(PASSED, out)


def write_digests(params: dict, put_back: bool = False) -> None:
    """The code digest of every stage instance the params give, as one folder (replaced whole). `put_back`:
    after a refused `dvc exp run -S`, the folder DVC removed, written back beside the stage's write guard
    (which takes a failed run's writes back), as the stamp is: this undoes DVC's step, not the stage's."""
    root, folder = project_root(), Path(path_of(params, DIGESTS_KEY))
    texts = digests(read_declaration(root), params, root)

    def fill(into: Path) -> None:
        for instance, text in texts.items():
            (into / digest_path(instance)).parent.mkdir(parents=True, exist_ok=True)
            (into / digest_path(instance)).write_text(text, encoding="utf-8")

    if not put_back:
        with atomic_path(folder) as into:
            fill(into)
    elif not folder.exists():
        tmp = folder.with_name(f".{folder.name}.put-back.tmp")
        remove_tree(tmp, ignore_errors=True)
        fill(tmp)
        os.replace(tmp, folder)


if __name__ == "__main__":
    raise SystemExit(main())

"""Put params.yaml back after `dvc exp run -S key=bad` is refused.

DVC writes the values given with -S into params.yaml (rewriting the whole file with its YAML dumper) and
leaves them there when the experiment fails. The params_check stage refuses such a value before any
output is removed; this module then restores the file the user had, where that can be told for sure:
DVC's own -S step, replayed on the experiment's baseline commit, must give the file's bytes exactly. Then
the user's file was the baseline (no other edit, not even a comment, is lost by writing it back).
Otherwise the keys are named and the file is left alone.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import psutil
import yaml

from emergence.core.cli import changed_keys


def set_params(argvs: list[list[str]]) -> dict[str, list[str]] | None:
    """{params file: its -S overrides} of the nearest `dvc exp run` among `argvs` (this process's
    ancestors' command lines, nearest first), read by DVC's own parser; None when none is one."""
    from dvc.cli import parse_args
    from dvc.utils.cli_parse import to_path_overrides

    for argv in argvs:
        at = next((i for i, word in enumerate(argv[:3]) if Path(word).name == "dvc"), None)
        if at is None or argv[at + 1 : at + 3] != ["exp", "run"]:
            continue
        try:
            return to_path_overrides(parse_args(argv[at + 1 :]).set_param)
        except (Exception, SystemExit):  # noqa: BLE001 - a command line DVC's parser refuses: nothing to replay
            return None
    return None


def ancestors_argvs() -> list[list[str]]:
    """The command lines of this process's ancestors, nearest first ([] where the OS will not say)."""
    try:
        return [p.cmdline() for p in psutil.Process().parents()]
    except psutil.Error:
        return []


def replayed(text_before: str, overrides: list[str]) -> str | None:
    """`text_before` as DVC's -S step writes it with `overrides` (dvc/utils/hydra.py), or None if it
    refuses them."""
    from dvc.utils.hydra import apply_overrides

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "params.yaml"
        path.write_text(text_before, encoding="utf-8")
        try:
            apply_overrides(path, overrides)
        except Exception:  # noqa: BLE001 - whatever DVC's step raises here, the file cannot be told for sure
            return None
        return path.read_text(encoding="utf-8")


def differing(before: dict, now: dict) -> list[str]:
    """The dotted keys whose values differ between two params mappings (added and removed ones too)."""
    return [k for name in {**before, **now} for k in changed_keys(name, before.get(name), now.get(name))]


def baseline_text(baseline: str, params_file: str) -> str | None:
    try:
        # the file as committed, decoded as UTF-8 whatever the locale (a C locale fails on a non-ASCII byte)
        shown = subprocess.run(["git", "show", f"{baseline}:{params_file}"], capture_output=True, encoding="utf-8")
    except OSError:  # no git on PATH
        return None
    return shown.stdout if shown.returncode == 0 else None


def restore(text: str, path: Path) -> None:
    """Write `text` over `path` at once (a temporary file beside it, then a rename). Not through the stage's
    write guard (core/io.py), which holds a stage to its declared outputs and takes a failed run's writes
    back: this undoes DVC's step, not the stage's."""
    tmp = path.with_name(f".{path.name}.put-back.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def after_refused(params_file: str, env: dict[str, str], argvs: list[list[str]]) -> tuple[bool, str]:
    """After params were refused: (whether `params_file` was put back, one more line for the error).
    Outside `dvc exp run` (no DVC_EXP_BASELINE_REV), or where nothing differs from the baseline commit:
    (False, ''). A run in a queue's or --temp's own copy (DVC_ROOT is not the working directory) leaves
    the user's workspace untouched anyway: it is only named."""
    baseline = env.get("DVC_EXP_BASELINE_REV")
    before = baseline_text(baseline, params_file) if baseline else None
    try:
        now = Path(params_file).read_text(encoding="utf-8")
        semantic_now, semantic_before = yaml.safe_load(now), yaml.safe_load(before or "")
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False, ""
    if before is None or not isinstance(semantic_now, dict) or not isinstance(semantic_before, dict):
        return False, ""
    if not (changed := differing(semantic_before, semantic_now)):
        return False, ""
    overrides = set_params(argvs)
    set_keys = {o.split("=", 1)[0].lstrip("+~") for o in (overrides or {}).get(params_file, [])}
    if overrides is not None and not set_keys & set(changed):
        return False, ""  # the user's own edits, not -S's: theirs to keep
    if Path(env.get("DVC_ROOT", "")).resolve() != Path.cwd().resolve():
        why = "this run is in DVC's own copy, not in your workspace"
    elif overrides is None:
        why = "the `dvc exp run` command line could not be read"
    elif replayed(before, overrides.get(params_file, [])) != now:
        why = "the file held edits besides the -S values"
    else:
        restore(before, Path(params_file))
        return True, (
            f"\nerror: {params_file}: put back as it was before the experiment (baseline {baseline[:7]}: "
            f"{', '.join(changed)} as before -S); no output was removed"
        )
    named = [k for k in changed if k in set_keys] or changed
    return False, (
        f"\nerror: {params_file}: {', '.join(named)} left as the experiment set them ({why}; DVC does not undo "
        f"it, and may have reformatted the file): set them back, or `git checkout {baseline[:7]} -- {params_file}` "
        "if you had no other edits there; no output was removed"
    )

"""What every stage's `main(argv=None)` shares: params loading and clean failure."""

from __future__ import annotations

import argparse
import copy
import fcntl
import functools
import importlib
import os
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import yaml
from tqdm import tqdm

from emergence.core import reads
from emergence.core.code_digest import instance_files, loaded_outside
from emergence.core.config import PARAMS_FILE, load_base, read_params, set_threads
from emergence.core.declared import (
    DIGESTS_KEY,
    DeclaredParams,
    Instance,
    declared_outputs,
    instance_of_module,
    known_sections,
    producer_of,
    unknown_section,
)
from emergence.core.io import PipelineError, Refused, WriteFailed, current_run, stage_writes
from emergence.core.pipeline import read_declaration
from emergence.core.stage_record import recorded


def stage_parser(
    description: str,
    per_seed: bool = False,
    per_layers: bool = False,
    per_model: bool = False,
    per_setting: bool = False,
    per_corpus: bool = False,
    per_aid: bool = False,
) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--params", default=PARAMS_FILE, help="params file (default: %(default)s)")
    if per_seed:
        parser.add_argument("--seed", type=int, required=True, help="training seed of this stage instance")
    if per_layers:
        parser.add_argument("--layers", type=int, required=True, help="layer count of this stage instance")
    if per_model:
        parser.add_argument("--model", required=True, help="model name (a params entry) of this stage instance")
    if per_setting:
        parser.add_argument("--setting", required=True, help="grounding setting: childes, caption, image")
    if per_corpus:
        parser.add_argument("--corpus", required=True, help="grounding corpus: childes, visdial")
    if per_aid:
        parser.add_argument("--aid", required=True, help="binding aid variant (binding_aids.aids) of this instance")
    return parser


def start_stage(
    description: str,
    argv: list[str] | None,
    per_seed: bool = False,
    per_layers: bool = False,
    per_model: bool = False,
    per_setting: bool = False,
    per_corpus: bool = False,
    per_aid: bool = False,
) -> tuple[argparse.Namespace, dict]:
    """Parse the CLI, read params.yaml and fix the thread count: the first lines of every stage."""
    args = stage_parser(description, per_seed, per_layers, per_model, per_setting, per_corpus, per_aid).parse_args(argv)
    params = read_params(args.params)
    known = known_sections(project_root())
    if known is not None and (unknown := [unknown_section(name, known) for name in params if name not in known]):
        raise PipelineError(f"{args.params}: " + "; ".join(unknown))
    given = sys.argv[1:] if argv is None else argv
    module = _caller_module()
    instance = instance_of_module(module, project_root(), given, params, args.params)
    if instance is not None:  # a stage of this checkout: hold it to its pipeline.yaml entry, one run at a time
        hold_stage_lock(Path.cwd(), module, given)  # where its artifacts are written
        refuse_bad_params(params, instance)
        hold_writes(instance, params, args.params)
        params = DeclaredParams(params, instance.reads)
    set_threads(load_base(params).threads)
    return args, params


GUARD = "emergence.check"  # the params rules of every entry point (check, profile, the Snakefile, stages)


def refuse_bad_params(params: dict, instance: Instance) -> None:
    """Every problem of the params sections and paths the stage reads, before it touches any output,
    however it was started. The rules are loaded by name: they can refuse a run but never change an
    artifact's bytes, so they are no stage's code dep (editing one must not rerun training), and they
    import every study's schemas, which core may not import."""
    with reads.unrecorded():  # dvc.lock too: read only to say what DVC removed
        problems = importlib.import_module(GUARD).stage_problems(
            params, project_root(), instance.reads.sections, instance.reads.paths
        )
        problems += removed_by_dvc(instance, dict(os.environ)) if problems else []
    if problems:
        raise PipelineError("\nerror: ".join(problems))


def removed_by_dvc(instance: Instance, env: dict[str, str]) -> list[str]:
    """Started by `dvc repro -s` (which skips the params_check stage), a stage refusing its params finds
    its outputs gone: DVC removes them before it starts a stage. Name them and how to put them back, when
    dvc.lock records them (DVC's cache then holds them)."""
    if env.get("DVC_STAGE") != instance.name:
        return []
    try:
        recorded = yaml.safe_load(Path("dvc.lock").read_text(encoding="utf-8"))["stages"][instance.name]["outs"]
    except (OSError, KeyError, TypeError, UnicodeDecodeError, yaml.YAMLError):
        return []
    gone = [str(out["path"]) for out in recorded if isinstance(out, dict) and not Path(str(out["path"])).exists()]
    return (
        [f"{', '.join(gone)}: removed by DVC before this stage ran; `dvc checkout {instance.name}` puts them back"]
        if gone
        else []
    )


def hold_writes(instance: Instance, params: dict, params_file: str) -> None:
    """Inside `stage_main`: let the stage's writers replace only its declared outputs, and publish them
    only if params.yaml still holds, when the stage ends, the values of the keys DVC records for it
    (DVC reads them when it saves dvc.lock: a lock naming params edited mid-run would vouch for an
    output they never built)."""
    run = current_run()
    if run is None:
        return
    foreign = {out: name for name, out in declared_outputs(project_root(), params) if name != instance.name}
    run.declare(instance.name, instance.outs, list(instance.untracked), foreign)
    ran_with = {key: copy.deepcopy(param_value(params, key)) for key in instance.params}  # the stage may edit its dicts
    run.checks.append(lambda: params_unchanged(instance.name, params_file, ran_with))
    started_with = set(sys.modules)  # the script's imports and the params rules' (every study's schemas)
    run.checks.append(lambda: code_in_digest(instance.name, params, started_with))


def code_in_digest(stage: str, params: dict, started_with: set[str]) -> None:
    """The project modules the stage body imported by name (the model registry's architectures) are in its
    code digest: one the digest's static walk could not see would change the outputs unhashed."""
    root = project_root()
    with reads.unrecorded():
        files = instance_files(read_declaration(root), params, root, only=stage)
    if stage not in files:  # the params check: no stage depends on its code
        return
    listed = [str(p) for p in files[stage]]
    modules = [module for name, module in list(sys.modules.items()) if name not in started_with]
    if outside := loaded_outside(modules, listed, root):
        raise PipelineError(
            f"{outside[0]}: loaded by stage {stage} but not in its code digest ({DIGESTS_KEY}); import it at "
            "module level, where core/code_digest.py sees it. Its outputs are not published"
        )


MISSING = object()


def param_value(params: dict, key: str):
    value = params
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return MISSING
        value = value[part]
    return value


def changed_keys(key: str, old, new) -> list[str]:
    """The dotted keys under `key` whose values differ between `old` and `new` (added and removed ones too)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            k
            for name in {**old, **new}
            for k in changed_keys(f"{key}.{name}", old.get(name, MISSING), new.get(name, MISSING))
        ]
    return [] if old == new else [key]  # as DVC compares them


def params_unchanged(stage: str, params_file: str, ran_with: dict) -> None:
    now = read_params(params_file)
    changed = [k for key, old in ran_with.items() for k in changed_keys(key, old, param_value(now, key))]
    if changed:
        raise PipelineError(
            f"{params_file}: {', '.join(changed)} changed while stage {stage} ran; its outputs were built with "
            "the old values and are not published (the earlier ones are kept): run it again"
        )


LOCKS = ".stage-locks"  # in the working directory: one lock file per stage instance running there (gitignored)
_held: dict[Path, object] = {}  # lock files this process holds: released when it exits, however it exits


def hold_stage_lock(root: Path, module: str, argv: list[str]) -> None:
    """Refuse to run a stage instance that is already running in this checkout (DVC and Snakemake
    started at once would both write its artifacts). An OS file lock: freed even by kill -9."""
    args = [a for i, a in enumerate(argv) if a != "--params" and (i == 0 or argv[i - 1] != "--params")]
    name = re.sub(r"[^\w.=-]+", "_", " ".join([module, *args]))
    path = root / LOCKS / f"{name}.lock"
    if path in _held:  # this process runs the stage again (a test calling main twice)
        return
    try:
        path.parent.mkdir(exist_ok=True)
    except FileExistsError:  # exist_ok covers a folder only: a file, or a link to nothing, is in the way
        raise PipelineError(
            f"{path.parent}: not a folder; the stage locks go in a folder of that name: remove the file and run again"
        ) from None
    f = open(path, "a+")  # held open for the life of the process
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "?"
        f.close()
        raise PipelineError(
            f"{module} {' '.join(args)}: already running in this checkout (pid {holder}); "
            "one engine at a time may run a stage"
        ) from None
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    _held[path] = f


def project_root() -> Path:
    """The checkout the stage scripts come from (pipeline.yaml sits beside `stages/`)."""
    import stages

    return Path(stages.__file__).resolve().parents[1]


def _caller_module() -> str:
    # The stage calling start_stage: its module name, or under `python -m` the name it was run as. It is
    # the first frame outside this module, not a fixed depth: mutmut's trampolines (`make mutation`) put
    # frames of their own between a mutated function and its caller.
    frame = sys._getframe(1)
    while frame.f_globals["__name__"] == __name__ or frame.f_globals["__name__"].startswith("mutmut."):
        frame = frame.f_back
    caller = frame.f_globals
    spec = caller.get("__spec__")
    return spec.name if caller["__name__"] == "__main__" and spec else caller["__name__"]


def stage_main(fn: Callable[[list[str] | None], None]) -> Callable[[list[str] | None], int]:
    """Wrap a stage body: a PipelineError becomes one line on stderr and exit 1 (naming the stage
    that wrote the artifact at fault, when it is one); SIGTERM (a scheduler's cancel) and Ctrl-C
    unwind like an exception, so no temporary file or folder is left behind."""

    @functools.wraps(fn)
    def main(argv: list[str] | None = None) -> int:
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            with stage_writes():  # its outputs are published when fn and the end-of-run checks succeed
                fn(argv)
        # A write this stage may not make, or one the system refused (a read-only mount): the path is an
        # output, not a damaged input, so naming the stage that writes it to re-run would mislead.
        except (Refused, WriteFailed) as e:
            _fail(f"error: {e}")
            return 1
        except PipelineError as e:
            _fail(f"error: {e}{_rerun_hint(str(e), sys.argv[1:] if argv is None else argv)}")
            return 1
        except KeyboardInterrupt:
            _fail("error: interrupted; no partial artifact was written")
            return 130
        finally:
            signal.signal(signal.SIGTERM, previous)
        return 0

    return recorded(fn, main)  # run as a program: logs/stages/<key>.json at exit


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _rerun_hint(message: str, argv: list[str]) -> str:
    """'; written by stage X: re-run it with ...' when the message starts with an artifact's path."""
    path = message.split(": ", 1)[0]
    params_file = argv[argv.index("--params") + 1] if "--params" in argv[:-1] else PARAMS_FILE
    try:
        stage = producer_of(path, project_root(), read_params(params_file))
    except PipelineError:
        return ""
    return f" (written by stage {stage}: re-run it with `dvc repro -f -s {stage}`)" if stage else ""


def _fail(message: str) -> None:
    # A progress bar left open by the exception (its frame lives on in the traceback)
    # would redraw after, and on the same line as, the error: close it first.
    for bar in list(getattr(tqdm, "_instances", ())):
        bar.close()
    print(message, file=sys.stderr)

"""A stage may read only what pipeline.yaml declares for it.

DVC and Snakemake rerun a stage when a declared params section or path
changes, and never otherwise, so a stage that reads an undeclared section
would go stale silently. `DeclaredParams` wraps params.yaml for one stage and
fails the moment the stage reads a section (or a `paths:` key) that its
pipeline.yaml entry does not name: the tiny pipeline run in the tests thus
checks every stage's declaration against what its code really reads.

Every stage reads `base.threads` (CPU threads change float reductions, so
artifact bytes): each may read it (`IMPLICIT`). Its value, and those of the
params a stage declares, are written into the stage's code digest
(core/code_digest.py), so a change reruns what reads it without a copy of the
values in each dvc.lock entry.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from emergence.core.config import PARAMS_FILE, did_you_mean
from emergence.core.io import PipelineError

# PyYAML's C parser where it has one: pipeline.yaml and dvc.yaml are read whole at every stage start and
# exit, ~10x faster than in Python. params.yaml keeps config's checking loader, whose hooks are Python.
FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

DECLARATION = "pipeline.yaml"
IMPLICIT = ("base.threads",)
PATH_KEY = re.compile(r"\$\{paths\.(\w+)\}")


@dataclass(frozen=True)
class StageReads:
    """What one stage's declaration allows it to read."""

    stage: str
    sections: frozenset[str]  # top-level params sections (from `x` or `x.key` entries)
    paths: frozenset[str]  # paths: keys among its deps, outs and metrics, or meta.untracked


def stage_reads(name: str, stage: dict[str, Any]) -> StageReads:
    params = [*IMPLICIT, *stage.get("params", [])]
    files = [*stage.get("deps", []), *stage.get("outs", []), *stage.get("metrics", [])]
    untracked = (stage.get("meta") or {}).get("untracked", [])
    return StageReads(
        name,
        frozenset(str(p).split(".")[0] for p in params),
        frozenset(k for f in files for k in PATH_KEY.findall(str(f))) | frozenset(untracked),
    )


ITEM = re.compile(r"\$\{item\.(\w+)\}")


TEMPLATE = re.compile(r"\$\{([\w.\-]+)\}")  # DVC's ${a.b}


def lookup(context: dict, key: str, where: str) -> Any:
    value: Any = context
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            raise PipelineError(f"{where}: ${{{key}}} is not defined in params.yaml")
        value = value[part]
    return value


def interpolate(value: Any, context: dict, where: str) -> Any:
    """DVC's `${a.b}` templating: a whole-string template keeps the value's type."""
    if isinstance(value, list):
        return [interpolate(v, context, where) for v in value]
    if not isinstance(value, str):
        return value
    whole = TEMPLATE.fullmatch(value)
    if whole:
        return lookup(context, whole.group(1), where)
    return TEMPLATE.sub(lambda m: str(lookup(context, m.group(1), where)), value)


def instances(name: str, stage: dict, params: dict) -> list[tuple[str, dict]]:
    """(DVC's instance name, item) for each element of a stage's matrix or foreach."""
    if "matrix" in stage:
        axes = {k: interpolate(v, params, f"stages.{name}.matrix.{k}") for k, v in stage["matrix"].items()}
        combos = itertools.product(*axes.values())
        return [(f"{name}@{'-'.join(map(str, combo))}", dict(zip(axes, combo))) for combo in combos]
    if "foreach" in stage:
        items = interpolate(stage["foreach"], params, f"stages.{name}.foreach")
        return [(f"{name}@{item}", item) for item in items]
    return [(name, {})]


def known_sections(root: Path) -> list[str] | None:
    """The params sections pipeline.yaml has a schema for (None: no declaration here)."""
    declared = root / DECLARATION
    if not declared.is_file():
        return None
    return list((yaml.load(declared.read_text(encoding="utf-8"), FAST_LOADER) or {}).get("schemas") or {})


def unknown_section(name: str, known: list[str]) -> str:
    """One line for a section no schema knows, with the closest known name when one is close."""
    return f"{name}: unknown section ({did_you_mean(name, known)}known: {', '.join(known)})"


def declared_outputs(root: Path, params: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(instance, out or metrics path) of every stage instance params.yaml resolves (`binding_train@0`)."""
    for name, stage in read_stages(root).items():
        try:
            for instance, item in instances(name, stage, params):
                for out in interpolate(outputs_of(stage), {**params, "item": item}, name):
                    yield instance, str(out)
        except PipelineError:  # a stage params.yaml cannot resolve: not this one
            continue


def producer_of(path: str | Path, root: Path, params: dict[str, Any]) -> str | None:
    """The stage instance (`binding_train@0`) whose declared out or metric is `path` or holds it, or
    None (an input, or no such stage)."""
    target = Path(path)
    for instance, out in declared_outputs(root, params):
        if target == Path(out) or Path(out) in target.parents:
            return instance
    return None


def read_stages(root: Path) -> dict[str, dict[str, Any]]:
    """pipeline.yaml's stages, completed ({} where there is no declaration)."""
    path = root / DECLARATION
    if not path.is_file():
        return {}
    return completed(yaml.load(path.read_text(encoding="utf-8"), FAST_LOADER) or {}).get("stages") or {}


GUARD = "params_check"  # the stage that checks the whole params file: every other stage depends on its output
DIGESTS_KEY = "code_digests"  # the paths: key of the folder of code digests the guard writes (core/code_digest.py)


def completed(decl: dict[str, Any]) -> dict[str, Any]:
    """pipeline.yaml as the engines run it: its `params_check` stage reads every section that has a
    schema, and every other stage depends on its own code digest, which that stage writes. `dvc repro`
    and `dvc exp run -S` thus run it first and refuse bad params there, before DVC removes any other
    stage's outputs. A digest changes only with the code it lists, so a params edit that passes reruns
    only what reads the edited keys, and a code edit only the stages whose digest it changes."""
    stages = decl.get("stages")
    if not isinstance(stages, dict) or GUARD not in stages:
        return decl
    # the file itself too: a section no schema names (a misspelt `reprot:`) changes no tracked params value,
    # and DVC would go on to the stages reading the file whole, removing their outputs before they refuse it
    guard = {**stages[GUARD], "params": list(decl.get("schemas") or {})}
    guard["deps"] = [PARAMS_FILE, *[d for d in guard.get("deps", []) if d != PARAMS_FILE]]
    stages = {
        name: guard if name == GUARD else {**stage, "deps": [digest_dep(name, stage), *stage.get("deps", [])]}
        for name, stage in stages.items()
    }
    return {**decl, "stages": stages}


def digest_path(instance: str) -> str:
    """binding_train@0 -> binding_train/0.txt, binding_data -> binding_data.txt: in the digests folder."""
    stage, _, item = instance.partition("@")
    return f"{stage}/{item}.txt" if item else f"{stage}.txt"


def digest_dep(name: str, stage: dict[str, Any]) -> str:
    """A stage's own code digest as a dep, its matrix item left for the engine to fill in."""
    item = "-".join(f"${{item.{axis}}}" for axis in stage.get("matrix") or {})
    return f"${{paths.{DIGESTS_KEY}}}/" + digest_path(f"{name}@{item}" if item else name)


def outputs_of(stage: dict[str, Any]) -> list[str]:
    return [*stage.get("outs", []), *stage.get("metrics", [])]


@dataclass(frozen=True)
class Instance:
    """The stage instance a `python -m <module> <argv>` runs: what it may read and write, and the params
    keys DVC records for it."""

    name: str  # DVC's instance name: binding_train@0
    reads: StageReads
    outs: dict[str, str]  # its outs and metrics -> as pipeline.yaml writes them (${paths.x}/...)
    untracked: tuple[str, ...]  # meta.untracked paths: scratch, caches
    params: tuple[str, ...]  # what it runs with: base.threads, binding_train, grounding_models.lstm4, ...


def instance_of_module(
    module: str, root: Path, argv: list[str], params: dict[str, Any], source: str = "params.yaml"
) -> Instance | None:
    """The instance of a stage of this checkout that `python -m <module> <argv>` runs, or None (no stage
    runs `module`). Refuses a matrix flag whose value params.yaml (`source`) does not list: that run
    would write an output no engine tracks."""
    found = _matching(module, root, argv, params, source)
    if not found:
        return None
    contexts = [(name, stage, {**params, "item": item}) for name, stage, item in found]
    return Instance(
        _instance_name(*found[0]),
        _union([stage_reads(name, stage) for name, stage, _ in found]),
        {
            str(path): out
            for name, stage, ctx in contexts
            for path, out in zip(interpolate(outputs_of(stage), ctx, name), outputs_of(stage))
        },
        tuple(
            str(lookup(params, f"paths.{key}", f"stages.{name}.meta.untracked"))
            for name, stage, _ in contexts
            for key in (stage.get("meta") or {}).get("untracked", [])
        ),
        tuple(dict.fromkeys(k for name, stage, ctx in contexts for k in interpolate(param_keys(stage), ctx, name))),
    )


def param_keys(stage: dict[str, Any]) -> list[str]:
    """The params keys a stage runs with: those it declares, and `IMPLICIT` (their values are in its code digest)."""
    return [*IMPLICIT, *(str(p) for p in stage.get("params", []))]


def _instance_name(name: str, stage: dict[str, Any], item: dict[str, Any]) -> str:
    axes = list(stage.get("matrix") or {})
    return f"{name}@{'-'.join(str(item.get(a)) for a in axes)}" if axes else name


def _flags(argv: list[str]) -> dict[str, str]:
    """`--flag value` and `--flag=value` pairs of a command line."""
    tokens = [part for a in argv for part in (a.split("=", 1) if a.startswith("--") and "=" in a else [a])]
    return dict(zip(tokens[::2], tokens[1::2]))


def _axis_values(
    name: str, stage: dict[str, Any], axis: str, params: dict[str, Any], source: str
) -> tuple[Any, str, str]:
    """A matrix axis's values and where they are written (`base.seeds`, `params.yaml`)."""
    values = (stage.get("matrix") or {}).get(axis)
    if isinstance(values, str) and (ref := TEMPLATE.fullmatch(values)):
        found: Any = params
        for part in ref.group(1).split("."):
            found = found.get(part) if isinstance(found, dict) else None
        return found, ref.group(1), source
    return values, f"stages.{name}.matrix.{axis}", DECLARATION


def _match(
    name: str, stage: dict[str, Any], given: dict[str, str], params: dict[str, Any], source: str
) -> tuple[dict[str, Any], list[str]] | None:
    """(matrix item, one line per matrix flag whose value is not listed) of the run `given` names: its
    fixed flags as written (`--setting childes`), its matrix flags among the matrix's values
    (`--setting ${item.setting}`); None when a fixed flag differs (not this stage)."""
    item: dict[str, Any] = {}
    unlisted: list[str] = []
    tokens = stage.get("cmd", "").split()[3:]  # after `python -m <module>`
    for flag, value in zip(tokens[::2], tokens[1::2]):
        axis = ITEM.fullmatch(value)
        if not axis:
            if given.get(flag) != value:
                return None
            continue
        if flag not in given:
            continue
        values, key, file = _axis_values(name, stage, axis.group(1), params, source)
        if not isinstance(values, list):  # nothing to hold it to (check.py reports a broken matrix)
            item[axis.group(1)] = given[flag]
        elif hits := [v for v in values if str(v) == given[flag]]:
            item[axis.group(1)] = hits[0]
        else:
            unlisted.append(
                f"{flag} {given[flag]}: not a value of {key} [{', '.join(map(str, values))}] in {file} "
                f"(stage {name} runs one instance per listed value; list it there to run it)"
            )
    return item, unlisted


def _matching(
    module: str, root: Path, argv: list[str] | None, params: dict[str, Any], source: str
) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(stage name, entry, matrix item) of each stage `python -m <module> <argv>` is an instance of;
    every stage running `module` when argv is None."""
    given = _flags(argv or [])
    found, refused = [], []
    for name, stage in read_stages(root).items():
        if not re.match(rf"python -m {re.escape(module)}(\s|$)", stage.get("cmd", "")):
            continue
        if argv is None:
            found.append((name, stage, {}))
        elif (match := _match(name, stage, given, params, source)) is not None:
            item, unlisted = match
            if unlisted:
                refused.append(unlisted)
            else:
                found.append((name, stage, item))
    if not found and refused:  # the stage whose fixed flags all match and fewest values are not listed
        raise PipelineError(min(refused, key=len)[0])
    return found


def _union(reads: list[StageReads]) -> StageReads:
    return StageReads(
        reads[0].stage, frozenset().union(*(r.sections for r in reads)), frozenset().union(*(r.paths for r in reads))
    )


def reads_of_module(
    module: str,
    root: Path,
    argv: list[str] | None = None,
    params: dict[str, Any] | None = None,
    source: str = "params.yaml",
) -> StageReads | None:
    """What the stage running `python -m <module> <argv>` may read (None: no such stage). Where one
    script serves several stages (one per grounding setting), `argv` picks the stage(s) it is an
    instance of; without it, the union of them all."""
    found = _matching(module, root, argv, params or {}, source)
    return _union([stage_reads(name, stage) for name, stage, _ in found]) if found else None


class DeclaredParams(dict):
    """params.yaml as a dict that refuses reads the stage did not declare."""

    def __init__(self, data: dict[str, Any], reads: StageReads):
        super().__init__(data)
        self.reads = reads

    def __getitem__(self, key: str) -> Any:
        return self._checked(key, super().__getitem__(key))

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def _checked(self, name: str, value: Any) -> Any:
        if name == "paths" and isinstance(value, dict):
            return DeclaredPaths(value, self.reads)
        if name not in self.reads.sections:
            raise PipelineError(
                f"{DECLARATION}: stage {self.reads.stage} reads params section '{name}' "
                f"but does not declare it under params:"
            )
        return value


class DeclaredPaths(DeclaredParams):
    """The `paths:` section: a stage may resolve only the paths among its deps and outs."""

    def _checked(self, key: str, value: Any) -> Any:
        if key not in self.reads.paths:
            raise PipelineError(
                f"{DECLARATION}: stage {self.reads.stage} uses paths.{key} but it is not among "
                f"its deps, outs or meta.untracked"
            )
        return value

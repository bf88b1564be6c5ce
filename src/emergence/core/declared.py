"""A stage may read only what pipeline.yaml declares for it.

DVC and Snakemake rerun a stage when a declared params section or path
changes, and never otherwise, so a stage that reads an undeclared section
would go stale silently. `DeclaredParams` wraps params.yaml for one stage and
fails the moment the stage reads a section (or a `paths:` key) that its
pipeline.yaml entry does not name: the tiny pipeline run in the tests thus
checks every stage's declaration against what its code really reads.

Every stage reads `base.threads` (CPU threads change float reductions, so
artifact bytes); the generator declares it for every stage (`IMPLICIT`).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from emergence.core.config import did_you_mean
from emergence.core.io import PipelineError

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
    return list((yaml.safe_load(declared.read_text()) or {}).get("schemas") or {})


def unknown_section(name: str, known: list[str]) -> str:
    """One line for a section no schema knows, with the closest known name when one is close."""
    return f"{name}: unknown section ({did_you_mean(name, known)}known: {', '.join(known)})"


def producer_of(path: str | Path, root: Path, params: dict[str, Any]) -> str | None:
    """The stage instance (`binding_train@0`) whose declared out or metric is `path` or holds it, or
    None (an input, or no such stage)."""
    declared = root / DECLARATION
    if not declared.is_file():
        return None
    target = Path(path)
    for name, stage in ((yaml.safe_load(declared.read_text()) or {}).get("stages") or {}).items():
        try:
            for instance, item in instances(name, stage, params):
                outs = interpolate([*stage.get("outs", []), *stage.get("metrics", [])], {**params, "item": item}, name)
                if any(target == Path(out) or Path(out) in target.parents for out in outs):
                    return instance
        except PipelineError:  # a stage params.yaml cannot resolve: not this one
            continue
    return None


def runs_instance(stage: dict[str, Any], argv: list[str], params: dict[str, Any]) -> bool:
    """Whether `argv` is one of this stage's instances: its fixed flags as written (`--setting childes`),
    its matrix flags among the matrix's values under `params` (`--setting ${item.setting}`)."""
    given = dict(zip(argv[::2], argv[1::2]))
    tokens = stage.get("cmd", "").split()[3:]  # after `python -m <module>`
    for flag, value in zip(tokens[::2], tokens[1::2]):
        axis = ITEM.fullmatch(value)
        if not axis:
            if given.get(flag) != value:
                return False
            continue
        values = (stage.get("matrix") or {}).get(axis.group(1))
        if isinstance(values, str) and (ref := TEMPLATE.fullmatch(values)):
            values = params
            for part in ref.group(1).split("."):
                values = values.get(part) if isinstance(values, dict) else None
        if isinstance(values, list) and flag in given and given[flag] not in map(str, values):
            return False
    return True


def reads_of_module(
    module: str, root: Path, argv: list[str] | None = None, params: dict[str, Any] | None = None
) -> StageReads | None:
    """What the stage running `python -m <module> <argv>` may read (None: no such stage). Where one
    script serves several stages (one per grounding setting), `argv` picks the stage(s) it is an
    instance of; without it, the union of them all."""
    path = root / DECLARATION
    if not path.is_file():
        return None
    stages = (yaml.safe_load(path.read_text()) or {}).get("stages", {})
    found = [
        stage_reads(name, st)
        for name, st in stages.items()
        if re.match(rf"python -m {re.escape(module)}(\s|$)", st.get("cmd", ""))
        and (argv is None or runs_instance(st, argv, params or {}))
    ]
    if not found:
        return None
    return StageReads(
        found[0].stage, frozenset().union(*(f.sections for f in found)), frozenset().union(*(f.paths for f in found))
    )


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

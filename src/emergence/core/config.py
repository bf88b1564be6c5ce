"""params.yaml -> typed, validated dataclasses.

Every stage starts by loading its sections through `load_section`, so an
unknown key, a wrong type or an impossible combination stops the stage with
one line naming the key (`binding_data.max_hops: ...`) before any work.
Sections are dataclasses; a dataclass may define `validate(where)` for
cross-field checks.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from annotated_types import Ge

from emergence.core.io import PipelineError
from emergence.core.rules import bound_problems

T = TypeVar("T")
PARAMS_FILE = "params.yaml"


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key written twice in one mapping (PyYAML keeps the last silently), and
    anchors and aliases: params need neither, and a few nested aliases (a "billion laughs") make DVC's
    own parser of params.yaml hang, so they are refused wherever params are read."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            kind = "alias *" if isinstance(event, yaml.AliasEvent) else "anchor &"
            raise yaml.composer.ComposerError(
                None, None, f"{kind}{event.anchor} (anchors and aliases are not allowed in params)", event.start_mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if not isinstance(key, (str, int, float, bool)) and key is not None:  # `? [a, b]`: a list as a key
                raise yaml.constructor.ConstructorError(
                    None, None, f"a {type(key).__name__} as a key (keys are names)", key_node.start_mark
                )
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first on line {seen[key]})", key_node.start_mark
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


# YAML 1.2 floats, as DVC reads params (ruamel): `1e-4` and `-1e-06` are numbers there, strings to PyYAML's
# YAML 1.1 resolver. DVC's -S writes small floats that way, and so do users: read them as DVC does.
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def read_params(path: str | Path = PARAMS_FILE) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise PipelineError(f"{path}: params file not found")
    if not path.is_file():
        raise PipelineError(f"{path}: not a file (a params file is YAML)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise PipelineError(f"{path}: not UTF-8 text (byte {e.start})") from e
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        problem = " ".join(str(getattr(e, "problem", e)).split())  # one line, whatever the YAML error says
        raise PipelineError(f"{path}{line}: invalid YAML ({problem})") from e
    if not isinstance(data, dict):
        raise PipelineError(f"{path}: top level must be a mapping of sections")
    return data


def section(params: dict[str, Any], name: str) -> dict[str, Any]:
    if name not in params:
        raise PipelineError(f"{name}: section missing from params")
    value = params[name]
    if not isinstance(value, dict):
        raise PipelineError(f"{name}: must be a mapping, got {type(value).__name__}")
    return value


def from_dict(cls: type[T], data: dict[str, Any], where: str) -> T:
    """Build dataclass `cls` from `data`, checking keys and types recursively."""
    if not isinstance(data, dict):
        raise PipelineError(f"{where}: must be a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    # every key's problem, one line each, so a user fixes a section in one pass
    problems = [
        f"{where}.{name}: unknown key ({did_you_mean(name, fields)}known: {', '.join(fields)})"
        for name in sorted(set(data) - set(fields), key=str)
    ]
    hints = typing.get_type_hints(cls, include_extras=True)
    kwargs = {}
    for name, f in fields.items():
        key = f"{where}.{name}"
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                problems.append(f"{key}: required key missing")
            continue
        try:
            kwargs[name] = _coerce(data[name], hints[name], key)
        except PipelineError as e:
            problems.append(str(e))
            continue
        problems += bound_problems(kwargs[name], hints[name], key)  # its declared bounds (core/rules.py)
    if problems:
        raise PipelineError("\n".join(problems))
    obj = cls(**kwargs)
    if hasattr(obj, "validate"):
        obj.validate(where)
    return obj


def load_beside(
    values: dict[str, Any], where: str, main: type[T], beside: type, fixed: dict[str, tuple[str, Any]]
) -> tuple[T, Any]:
    """(main, beside) built from one section holding both dataclasses' keys: binding_train is TrainConfig
    plus BindingTrainKeys. `fixed`: key -> (where it is set, its value here), keys the section may not set
    (seed from base.seeds). Every problem of both, one line each, not the second's after the first's fixed."""
    values = dict(values)
    own = {f.name: values.pop(f.name) for f in dataclasses.fields(beside) if f.name in values}
    problems = [
        f"{where}.{key}: set by {source}, remove it here" for key, (source, _) in fixed.items() if key in values
    ]
    built = []
    for schema, data in ((main, {**values, **{k: v for k, (_, v) in fixed.items()}}), (beside, own)):
        try:
            built.append(from_dict(schema, data, where))
        except PipelineError as e:
            problems.append(str(e))
    if problems:
        raise PipelineError("\n".join(problems))
    return built[0], built[1]


def spans(*sections: str) -> Callable[[T], T]:
    """Mark a check that spans sections with the ones it reads: a stage runs the checks touching a section
    it declares. No sections: the check reads each section alone, and runs on the stage's own."""

    def mark(check: T) -> T:
        check.sections = frozenset(sections)  # type: ignore[attr-defined]
        return check

    return mark


def did_you_mean(name: Any, known: Any) -> str:
    """'did you mean <closest>? ' when a known name is close to the misspelt `name`, else ''."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    return f"did you mean {close[0]}? " if close else ""


def to_dict(obj: Any) -> dict[str, Any]:
    return dataclasses.asdict(obj)


def _coerce(value: Any, hint: Any, key: str) -> Any:
    if typing.get_origin(hint) is typing.Annotated:  # bounds are checked on the built object
        return _coerce(value, typing.get_args(hint)[0], key)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, arg, key)
            except PipelineError as e:
                errors.append(str(e))
        raise PipelineError(errors[0])
    if origin is typing.Literal:  # the message is the rule's (core/rules.py), as for a config built in code
        if problems := bound_problems(value, hint, key):
            raise PipelineError(problems[0])
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise PipelineError(f"{key}: must be a list, got {type(value).__name__}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                raise PipelineError(f"{key}: must have {len(args)} items, got {len(value)}")
            return tuple(_coerce(v, a, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
        item = args[0] if args else Any
        out = [_coerce(v, item, f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(out) if origin is tuple else out
    if origin is dict:
        if not isinstance(value, dict):
            raise PipelineError(f"{key}: must be a mapping, got {type(value).__name__}")
        return dict(value)
    if dataclasses.is_dataclass(hint):
        return from_dict(hint, value, key)
    if hint is Any:
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise PipelineError(f"{key}: must be true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise PipelineError(f"{key}: must be an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PipelineError(f"{key}: must be a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise PipelineError(f"{key}: must be a string, got {value!r}")
        return value
    raise TypeError(f"{key}: unsupported type annotation {hint!r}")


OVERSUBSCRIBE = 4  # base.threads may ask for up to this many threads per usable CPU (a login node may be smaller)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: what Slurm or taskset grants), not the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclasses.dataclass
class BaseParams:
    """The `base:` section shared by every study."""

    seeds: list[int]
    device: typing.Literal["auto", "cpu", "cuda"] = "auto"
    threads: Annotated[int, Ge(1)] = 2
    precision: typing.Literal["fp32", "bf16"] = "fp32"  # bf16: autocast in training (TrainConfig.precision)
    compile: bool = False  # torch.compile the training forward
    # torch.compile's mode; reduce-overhead replays the compiled step as CUDA graphs
    compile_mode: typing.Literal["default", "reduce-overhead", "max-autotune-no-cudagraphs"] = "default"

    def train_keys(self) -> dict[str, Any]:
        """The TrainConfig keys every training stage takes from base."""
        keys = ("device", "precision", "compile", "compile_mode")
        return {k: getattr(self, k) for k in keys}

    def validate(self, where: str) -> None:
        if not self.seeds:
            raise PipelineError(f"{where}.seeds: at least one seed is needed")
        if len(set(self.seeds)) != len(self.seeds):
            raise PipelineError(f"{where}.seeds: duplicate seed in {self.seeds}")
        if self.threads > (most := OVERSUBSCRIBE * usable_cpus()):
            # thousands of threads on a few cores do not fail, they crawl: a 30-step run did not end in 300 s
            raise PipelineError(
                f"{where}.threads: must be <= {most} ({OVERSUBSCRIBE} x the {usable_cpus()} CPUs this process "
                f"may use), got {self.threads}"
            )


def load_base(params: dict[str, Any]) -> BaseParams:
    return from_dict(BaseParams, section(params, "base"), "base")


def path_of(params: dict[str, Any], key: str) -> Path:
    """A path from the `paths:` section, by key (the only place paths are written)."""
    paths = section(params, "paths")
    if key not in paths:
        raise PipelineError(f"paths.{key}: missing from params")
    if not isinstance(paths[key], str):
        raise PipelineError(f"paths.{key}: must be a string, got {paths[key]!r}")
    return Path(paths[key])


def set_threads(n: int) -> None:
    """Fix the CPU thread count: float reductions (and so artifact bytes) depend on it. Where torch is not
    loaded (the guard and the text stages never load it), it is told through OMP_NUM_THREADS, which torch
    reads when it is imported: importing it here cost each of those stage runs ~1.3 s."""
    torch = sys.modules.get("torch")
    if torch is None:
        os.environ["OMP_NUM_THREADS"] = str(n)
    else:
        torch.set_num_threads(n)

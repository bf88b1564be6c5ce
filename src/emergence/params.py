"""Every params.yaml section's schema, as pipeline.yaml's `schemas:` names it.

`python -m emergence check` runs each section's schema on the whole params.yaml
before anything trains. A schema is either a dataclass, checked with
`from_dict(Schema, section(params, name), name)` exactly as the stage itself
loads it (so the check and the stage cannot disagree), or a function
`(params, name)` for a section that is more than one dataclass (the checkers
below). Schemas live beside the code that uses them and stages import them
from there, never from this module: importing every schema would put every
study's modules in every stage's dependencies. A schema imports no torch
(`emergence check`, the guard stage and every Snakemake start load them all,
and compute nothing with it): where the code beside it needs torch, it sits in
a `<module>_params.py` of its own (binding/patching_params.py), and a model's
config in `core/models/<arch>_config.py`.

The registry itself is one `section: module:Name` line in pipeline.yaml, next
to the stage entries, so adding a stage with params of its own touches its
script, its pipeline.yaml entry and its params.yaml section, nothing else.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from emergence.core.config import from_dict, section
from emergence.core.declared import DECLARATION
from emergence.core.io import PipelineError
from emergence.core.models.registry import make_config
from emergence.core.pipeline import read_declaration, user_paths
from emergence.core.train.config import TrainConfig
from emergence.studies.assoc.corpus import CorpusParams
from emergence.studies.binding.train_config import BindingTrainKeys, model_params, train_params
from emergence.studies.grounding.inputs_params import WindowKeys, train_section
from emergence.studies.grounding.lens import GroundingLensParams
from emergence.studies.grounding.tokens import model_entry

Checker = Callable[[dict[str, Any]], Any]  # params -> anything; raises PipelineError, one line per problem


def loads(*schemas: type) -> Callable:
    """Name the dataclasses a function schema loads its section with (`.loads`): the tests try a value
    just outside each of their declared bounds (core/rules.py) at every entry point."""

    def mark(check: Callable) -> Callable:
        check.loads = schemas
        return check

    return mark


# ---- the sections that are more than one dataclass ----------------------------------------------


def check_paths(params: dict, name: str) -> None:
    bad = [
        f"{name}.{key}: must be a string, got {value!r}"
        for key, value in section(params, name).items()
        if not isinstance(value, str) or not value
    ]
    if bad:
        raise PipelineError("\n".join(bad))


def check_binding_model(params: dict, name: str) -> None:
    arch, values = model_params(params, n_tokens=0, d_vocab=2)
    try:
        make_config(arch, values, name)
    except TypeError as e:
        raise PipelineError(f"{name}: {e}") from e


@loads(TrainConfig, BindingTrainKeys)
def check_binding_train(params: dict, name: str) -> None:
    train_params(params, seed=0, device="cpu")


@loads(CorpusParams)
def check_assoc_corpus(params: dict, name: str) -> None:
    from_dict(CorpusParams, section(params, name), name)


@loads(TrainConfig, WindowKeys)
def check_train_section(params: dict, name: str) -> None:
    train_section(params, name)


def check_grounding_models(params: dict, name: str) -> None:
    """Each entry: a known architecture and its config, d_vocab and n_ctx left to the pipeline."""
    problems = []
    for model in section(params, name):
        where = f"{name}.{model}"
        try:
            arch, values = model_entry(section(params, name), model)
            for key in ("d_vocab", "n_ctx"):
                if key in values:
                    raise PipelineError(f"{where}.{key}: set from the vocabulary and seq_len, remove it")
            make_config(arch, {**values, "d_vocab": 2, "n_ctx": 2}, where)
        except (PipelineError, TypeError) as e:
            problems.append(str(e) if isinstance(e, PipelineError) else f"{where}: {e}")
    if problems:
        raise PipelineError("\n".join(problems))


@loads(GroundingLensParams)
def check_grounding_lens(params: dict, name: str) -> None:
    from_dict(GroundingLensParams, section(params, name), name)


# ---- the registry: pipeline.yaml's `schemas:` ---------------------------------------------------


def resolve_schema(name: str, ref: Any) -> Checker:
    """`module:Name` -> a checker of section `name` (a dataclass, or a function (params, name))."""
    where = f"{DECLARATION}: schemas.{name}"
    module, _, attr = ref.partition(":") if isinstance(ref, str) else ("", "", "")
    if not module or not attr:
        raise PipelineError(f"{where}: must be 'module:Name', got {ref!r}")
    try:
        target = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise PipelineError(f"{where}: cannot load {ref} ({e})") from e
    if dataclasses.is_dataclass(target) and isinstance(target, type):
        return lambda params: from_dict(target, section(params, name), name)
    if callable(target):
        return lambda params: target(params, name)
    raise PipelineError(f"{where}: {ref} is neither a dataclass nor a function")


def with_user_paths(check: Checker, keys: list[str]) -> Checker:
    """`check`, then each user path key of its section: a non-empty string (a dep DVC can hash; an
    empty dep crashes DVC)."""

    def checked(params: dict) -> Any:
        result = check(params)
        bad = []
        for key in keys:
            value = params
            for part in key.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            if not isinstance(value, str) or not value:
                bad.append(f"{key}: must name a file or folder (a dep of the stages reading it), got {value!r}")
        if bad:
            raise PipelineError("\n".join(bad))
        return result

    return checked


def load_schemas(root: Path) -> dict[str, Checker]:
    """Every params section and its checker, in pipeline.yaml's order; a section holding a user path
    (pipeline.yaml `user_paths:`) also checks that it names one."""
    decl = read_declaration(root)
    schemas = decl.get("schemas")
    if not isinstance(schemas, dict) or not schemas:
        raise PipelineError(f"{root / DECLARATION}: must hold a 'schemas:' mapping (params section: module:Name)")
    keys = user_paths(decl)
    return {
        name: with_user_paths(resolve_schema(name, ref), [k for k in keys if k.split(".")[0] == name])
        for name, ref in schemas.items()
    }

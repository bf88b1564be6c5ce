"""The shipped params.yaml, and copies of it with a few values changed (what a test of a rule starts from)."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import typing

import yaml
from conftest import ROOT

from emergence.core.pipeline import read_declaration
from emergence.core.rules import bounds_of, choices_of, just_outside, matches_of

SHIPPED = yaml.safe_load((ROOT / "params.yaml").read_text())


def edited(**changes) -> dict:
    """A deep copy of the shipped params with `section__key=value` changes."""
    params = copy.deepcopy(SHIPPED)
    for dotted, value in changes.items():
        name, key = dotted.split("__")
        params[name][key] = value
    return params


NOT_A_CHOICE = "no_such_choice"


def declared_rules(root=ROOT) -> list[tuple[str, str, object]]:
    """(section, field, a value just outside its rule) for every bound, choice (`Literal`) and form (`Matches`)
    declared on a field of a section's schema (core/rules.py): a new rule is tried by construction."""
    found = []
    for section, ref in read_declaration(root)["schemas"].items():
        module, _, name = ref.partition(":")
        target = getattr(importlib.import_module(module), name)
        for cls in getattr(target, "loads", (target,) if dataclasses.is_dataclass(target) else ()):
            hints = typing.get_type_hints(cls, include_extras=True)
            for f in dataclasses.fields(cls):
                base, bounds = bounds_of(hints[f.name])
                found += [(section, f.name, just_outside(base, bound)) for bound in bounds]
                found += (
                    [(section, f.name, NOT_A_CHOICE)] if choices_of(hints[f.name]) or matches_of(hints[f.name]) else []
                )
    return found


def batches_outside(bounds: list[tuple[str, str, object]]) -> list[dict[str, object]]:
    """The bounds packed into as few edits as can hold them ({section.key: value}, a key once per edit: a
    field bounded on both sides lands in two), so that a slow door is tried once per edit, not per bound."""
    edits: list[dict[str, object]] = []
    for section, key, value in bounds:
        edit = next((e for e in edits if f"{section}.{key}" not in e), None)
        if edit is None:
            edits.append(edit := {})
        edit[f"{section}.{key}"] = value
    return edits

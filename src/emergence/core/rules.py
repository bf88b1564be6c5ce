"""Bounds declared on a params field: `steps: Annotated[int, Ge(1)]`; choices: `Literal["stop", "continue"]`;
a string's form: `Annotated[str, Matches(...)]`.

The bound is written once, beside the field, in annotated-types' vocabulary (Ge, Gt, Le, Lt: the one
pydantic reads too). `from_dict` checks it wherever a section is loaded (every stage, `emergence
check`, the params_check stage), a dataclass built in code checks it in its `validate`, the message is
generated from it (`binding_train.lr: must be a number > 0, got -1.0`), and the tests enumerate every
declared bound to try a value just outside it at each entry point. Cross-field rules stay in
`validate`.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from typing import Any

from annotated_types import Ge, Gt, Le, Lt

BOUNDS = (Ge, Gt, Le, Lt)
Bound = Ge | Gt | Le | Lt


@dataclasses.dataclass(frozen=True)
class Matches:
    """A string field's form, with the words its message uses:
    `Annotated[str, Matches(r"final|step\\d+", "final or step<N>")]`."""

    pattern: str
    says: str


# a params key naming a checkpoint of a run (core/train/checkpoint.py find_checkpoint): its form is checked
# wherever the section loads, before DVC removes an output; whether that step exists, once the run is there
CheckpointName = typing.Annotated[str, Matches(r"final|step\d+", "final or step<N>")]


def matches_of(hint: Any) -> Matches | None:
    """The `Matches` declared on a field (inside `X | None` too), or None."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return next((m for arg in typing.get_args(hint) if (m := matches_of(arg)) is not None), None)
    if typing.get_origin(hint) is typing.Annotated:
        return next((m for m in typing.get_args(hint)[1:] if isinstance(m, Matches)), None)
    return None


def bounds_of(hint: Any) -> tuple[Any, list[Bound]]:
    """(the base type, its declared bounds) of a field's type hint; a bound inside `X | None` counts."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [bounds_of(arg) for arg in typing.get_args(hint) if arg is not type(None)]
        return next(((base, found) for base, found in inner if found), (hint, []))
    if typing.get_origin(hint) is typing.Annotated:
        base, *meta = typing.get_args(hint)
        return base, [m for m in meta if isinstance(m, BOUNDS)]
    return hint, []


def limit(bound: Bound) -> float:
    return next(getattr(bound, name) for name in ("ge", "gt", "le", "lt") if hasattr(bound, name))


def rule(base: Any, bounds: list[Bound]) -> str:
    """`an integer >= 1`, `a number > 0`, `a number in [0, 1)`: what the bounds allow, in words."""
    word = "an integer" if base is int else "a number"
    lower = next((b for b in bounds if isinstance(b, (Ge, Gt))), None)
    upper = next((b for b in bounds if isinstance(b, (Le, Lt))), None)
    if lower is not None and upper is not None:
        left, right = "[" if isinstance(lower, Ge) else "(", "]" if isinstance(upper, Le) else ")"
        return f"{word} in {left}{shown(limit(lower))}, {shown(limit(upper))}{right}"
    bound = lower or upper
    sign = {Ge: ">=", Gt: ">", Le: "<=", Lt: "<"}[type(bound)]
    return f"{word} {sign} {shown(limit(bound))}"


def shown(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def holds(value: Any, base: Any, bounds: list[Bound]) -> bool:
    """Whether `value` is a number within every bound (nan and inf never are: no bound admits them), and an
    int where `base` is int: a config built in code (a model's, from a plain dict) has no from_dict to
    refuse a count of 3.5."""
    kinds = int if base is int else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value):
        return False
    checks = {Ge: lambda b: value >= b.ge, Gt: lambda b: value > b.gt, Le: lambda b: value <= b.le}
    return all(checks.get(type(b), lambda b: value < b.lt)(b) for b in bounds)


def choices_of(hint: Any) -> tuple | None:
    """The values a `Literal[...]` field allows (inside `X | None` and `Annotated` too), or None."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [choices_of(arg) for arg in typing.get_args(hint) if arg is not type(None)]
        return next((c for c in inner if c is not None), None)
    if typing.get_origin(hint) is typing.Annotated:
        return choices_of(typing.get_args(hint)[0])
    return typing.get_args(hint) if typing.get_origin(hint) is typing.Literal else None


def bound_problems(value: Any, hint: Any, key: str) -> list[str]:
    """`key: must be <rule>, got <value>` when `value` lies outside the bounds or choices declared in `hint`."""
    if value is None and type(None) in typing.get_args(hint):  # `X | None` left at None
        return []
    if (choices := choices_of(hint)) is not None:
        return [] if value in choices else [f"{key}: must be one of {', '.join(map(str, choices))}, got {value!r}"]
    if (form := matches_of(hint)) is not None:
        return (
            []
            if isinstance(value, str) and re.fullmatch(form.pattern, value)
            else [f"{key}: must be {form.says}, got {value!r}"]
        )
    base, bounds = bounds_of(hint)
    return [f"{key}: must be {rule(base, bounds)}, got {value!r}"] if bounds and not holds(value, base, bounds) else []


def field_problems(obj: Any, where: str) -> list[str]:
    """One line per field of dataclass `obj` whose value lies outside its declared bounds."""
    hints = typing.get_type_hints(type(obj), include_extras=True)
    return [
        p
        for f in dataclasses.fields(obj)
        for p in bound_problems(getattr(obj, f.name), hints[f.name], f"{where}.{f.name}")
    ]


def just_outside(base: Any, bound: Bound) -> float:
    """A value the bound refuses, as near it as the type allows (the tests' table of every bound)."""
    step = 1 if base is int else 1e-6 * max(1.0, abs(limit(bound)))
    return {Ge: limit(bound) - step, Gt: limit(bound), Le: limit(bound) + step, Lt: limit(bound)}[type(bound)]

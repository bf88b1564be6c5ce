"""Cheap shortcut heuristics for variable-binding programs.

Each heuristic guesses the answer digit from surface features, returning -1
when it has nothing to say. The balanced generator holds the five CONTROLLED
ones at chance (~10%); the paper generator leaves them all at their natural rates,
which the data stage reports. `first_constant` is the line-1 heuristic (line 1
can only hold a constant). `evaluate` (the programs' Python semantics) lives
here because the final-value heuristic needs it.

Programs are duck-typed: anything with `.lines` ((lhs, rhs) pairs) and `.query`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from emergence.core.io import PipelineError


class _ProgramLike(Protocol):
    lines: tuple[tuple[str, str], ...]
    query: str


def evaluate(lines: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Final value of every assigned variable under Python semantics.

    A copy `x=y` reads y's value at that line, so later reassigning y leaves x alone.
    """
    env: dict[str, int] = {}
    for i, (lhs, rhs) in enumerate(lines):
        if rhs.isdigit():
            env[lhs] = int(rhs)
        elif rhs in env:
            env[lhs] = env[rhs]
        else:
            raise PipelineError(f"line {i} '{lhs}={rhs}': copies undefined variable '{rhs}'")
    return env


def _mode(digits: Iterable[int]) -> int:
    """Most frequent digit, ties -> smallest; -1 for none."""
    counts = [0] * 10
    for d in digits:
        counts[d] += 1
    best = max(counts)
    return counts.index(best) if best else -1


def last_constant(p: _ProgramLike) -> int:
    return next((int(rhs) for _, rhs in reversed(p.lines) if rhs.isdigit()), -1)


def first_constant(p: _ProgramLike) -> int:
    return next((int(rhs) for _, rhs in p.lines if rhs.isdigit()), -1)


def most_frequent_digit(p: _ProgramLike) -> int:
    # Constants are the only digits in the program text.
    return _mode(int(rhs) for _, rhs in p.lines if rhs.isdigit())


def query_first_assignment(p: _ProgramLike) -> int:
    rhs = next((rhs for lhs, rhs in p.lines if lhs == p.query), "")
    return int(rhs) if rhs.isdigit() else -1


def most_common_final_value(p: _ProgramLike) -> int:
    return _mode(evaluate(p.lines).values())


def query_first_value(p: _ProgramLike) -> int:
    """The value the query variable holds right after its first assignment: an early-assignment
    heuristic (the query's later writes, its real chain, are ignored)."""
    first = next(i for i, (lhs, _) in enumerate(p.lines) if lhs == p.query)
    return evaluate(p.lines[: first + 1])[p.query]


HEURISTICS: dict[str, Callable[[_ProgramLike], int]] = {
    "last_constant": last_constant,
    "first_constant": first_constant,
    "most_frequent_digit": most_frequent_digit,
    "query_first_assignment": query_first_assignment,
    "most_common_final_value": most_common_final_value,
    "query_first_value": query_first_value,
}
# The five the balanced generator holds at chance, in the order of its match-pattern bits.
CONTROLLED = (
    "last_constant",
    "first_constant",
    "most_frequent_digit",
    "query_first_assignment",
    "most_common_final_value",
)


def one_value(p: _ProgramLike) -> int:
    """The digit every constant of the program holds, -1 if they differ: no binding needed."""
    digits = {rhs for _, rhs in p.lines if rhs.isdigit()}
    return int(digits.pop()) if len(digits) == 1 else -1


# What the paper generator may reject (binding_programs.reject): the heuristics and `one_value`.
SHORTCUTS: dict[str, Callable[[_ProgramLike], int]] = {"one_value": one_value, **HEURISTICS}


def match_pattern(p: _ProgramLike, answer: int) -> int:
    """Bit i set iff heuristic CONTROLLED[i] guesses `answer`."""
    return sum(1 << i for i, name in enumerate(CONTROLLED) if HEURISTICS[name](p) == answer)

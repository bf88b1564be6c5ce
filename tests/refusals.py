"""How a test says that something was refused: by what the refusal names (the key, the rule, the value;
the file, `line N`, the column), never by a message's prose. The wording lives in one place, the code
that writes it; tests/unit/test_wording.py holds the few golden lines of exact wording."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from emergence.core.io import PipelineError


def key_of(line: str) -> str:
    """The dotted key a problem line names first, after the file it may start with
    (`profiles/x.yaml: binding_train.steps: ...` -> binding_train.steps)."""
    parts = re.split(r":\s", line.removeprefix("error: "))
    return next((p for p in parts if not re.search(r"/|\.ya?ml$", p)), parts[0])


def keys_of(lines: list[str]) -> list[str]:
    return [key_of(line) for line in lines]


def assert_refused(lines: list[str], key: str, value: Any = None, rule: str | None = None) -> None:
    """One of `lines` names `key` (key first, after a file name) and, when given, the offending `value` and
    the `rule` it breaks (the rule's own words as the schema generates them: `>= 1`, `one of`)."""
    named = [line for line in lines if key_of(line) == key]
    assert named, f"no problem names {key}: {lines}"
    for part in (p for p in (value, rule) if p is not None):
        assert any(str(part) in line for line in named), f"{key}: {part!r} is not named: {named}"


def assert_not_refused(lines: list[str], key: str) -> None:
    assert key not in keys_of(lines), f"{key} refused: {lines}"


def assert_names(message: str, *named: Any) -> None:
    """`message` is one line naming each of `named` (a file, `line 3`, a key, a value), in any order."""
    assert len(message.strip().splitlines()) == 1, f"not one line: {message!r}"
    missing = [part for part in named if str(part) not in message]
    assert not missing, f"{missing} not named in {message!r}"


@contextmanager
def refuses(*named: Any, error: type[BaseException] = PipelineError) -> Iterator[pytest.ExceptionInfo]:
    """The block raises `error` in one line naming each of `named` (see `assert_names`)."""
    with pytest.raises(error) as caught:
        yield caught
    assert_names(str(caught.value), *named)


@contextmanager
def refuses_key(key: str, value: Any = None, rule: str | None = None) -> Iterator[pytest.ExceptionInfo]:
    """The block raises a PipelineError, one of whose lines names `key` (and `value`, `rule`: see
    `assert_refused`)."""
    with pytest.raises(PipelineError) as caught:
        yield caught
    assert_refused(str(caught.value).splitlines(), key, value, rule)

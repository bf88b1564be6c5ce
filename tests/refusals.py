"""How a test says that params were refused: by the key and the value, never by a message's prose
(the wording lives in one place, the rule that writes it; tests/unit/test_check.py holds a few golden
lines of exact wording)."""

from __future__ import annotations

import re
from typing import Any


def key_of(line: str) -> str:
    """The dotted key a problem line names first, after the file it may start with
    (`profiles/x.yaml: binding_train.steps: ...` -> binding_train.steps)."""
    parts = re.split(r":\s", line.removeprefix("error: "))
    return next((p for p in parts if not re.search(r"/|\.ya?ml$", p)), parts[0])


def keys_of(lines: list[str]) -> list[str]:
    return [key_of(line) for line in lines]


def assert_refused(lines: list[str], key: str, value: Any = None) -> None:
    """One of `lines` names `key` (key first, after a file name) and, when given, the offending `value`."""
    named = [line for line in lines if key_of(line) == key]
    assert named, f"no problem names {key}: {lines}"
    if value is not None:
        assert any(str(value) in line for line in named), f"{key}: the value {value!r} is not named: {named}"


def assert_not_refused(lines: list[str], key: str) -> None:
    assert key not in keys_of(lines), f"{key} refused: {lines}"

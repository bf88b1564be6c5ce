"""Acceptance claims and headline figures: how a number read from a study's metrics JSON is judged.

A `Claim` says where its number comes from (a metrics file, named by its `paths:` key, and a
reader), the rule it must meet (`op` and `threshold`) and where the rule comes from. `verdict`
gives pass or fail, or "not measured" when the number is absent: a missing metric never passes.
A `Figure` is a headline number set beside what the paper reports (its text, quoted).
The study-specific tables of both live in `emergence.claims`.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

Reader = Callable[[dict], "float | None"]  # metrics JSON -> the number, or None when it is not there

OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
PASS, FAIL, NOT_MEASURED = "pass", "FAIL", "not measured"


def number(value: object) -> float | None:
    """A finite number as float; None for anything else (missing, null, text, bool, NaN, inf)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def get(metrics: object, *keys: str) -> object:
    """metrics[k1][k2]...; None as soon as a key is missing or a level is not a mapping."""
    for key in keys:
        if not isinstance(metrics, dict) or key not in metrics:
            return None
        metrics = metrics[key]
    return metrics


def at(*keys: str) -> Reader:
    """Reader of the number at metrics[k1][k2]..."""
    return lambda metrics: number(get(metrics, *keys))


@dataclass(frozen=True)
class Claim:
    study: str  # key of the study (its metrics file and page are named in the index stage)
    text: str  # the claim, in words
    where: str  # where the number is read, for the reader of the page: "accuracy.mean"
    read: Reader
    op: str  # one of OPS
    threshold: float
    rule: str  # where the rule and its threshold come from (the paper's words, quoted, or ours)
    section: str  # heading of the study page's section that shows the number (its anchor)

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"claim {self.text!r}: op must be one of {list(OPS)}, got {self.op!r}")


def headline_key(claim: Claim) -> str:
    """The claim's number as a metrics key, from where it is read: `min_cosine.<deepest run>.W<layer>
    (minimum)` -> `min_cosine.W` (placeholders and the words after the path dropped)."""
    path = re.sub(r"<[^>]*>", "", claim.where).replace("./", ".").replace("/", ".")
    return re.split(r"[\s\[(]", path, maxsplit=1)[0].strip(".").replace("..", ".")


def headlines(claims: list[Claim], metrics: dict[str, dict | None]) -> dict[str, dict[str, float | None]]:
    """Per study, each claim's number (None: not measured) under its headline_key: the metrics file DVC
    shows in `dvc exp show` and `dvc metrics diff`, a dozen columns instead of every leaf."""
    out: dict[str, dict[str, float | None]] = {}
    for claim in claims:
        value = verdict(claim, metrics.get(claim.study)).value
        out.setdefault(claim.study, {})[headline_key(claim)] = None if value is None else round(float(value), 6)
    return out


class Verdict(NamedTuple):
    status: str  # PASS, FAIL or NOT_MEASURED
    value: float | None


def verdict(claim: Claim, metrics: dict | None) -> Verdict:
    """Pass when the number meets `op threshold`; "not measured" when there is no metrics file or
    no finite number where the claim reads it."""
    value = None if metrics is None else claim.read(metrics)
    if value is None:
        return Verdict(NOT_MEASURED, None)
    return Verdict(PASS if OPS[claim.op](value, claim.threshold) else FAIL, value)


@dataclass(frozen=True)
class Figure:
    study: str
    label: str
    where: str
    read: Reader
    paper: str  # what the paper reports, quoted from the texts we have, or why nothing compares
    section: str
    digits: int = 3

    def ours(self, metrics: dict | None) -> str:
        """The number, `digits` after the point; a reader's text (steps side by side) as it is."""
        value = None if metrics is None else self.read(metrics)
        if value is None:
            return NOT_MEASURED
        return value if isinstance(value, str) else f"{value:.{self.digits}f}"

"""The benchmark table: rows as docs/interfaces describe them, checked, printed and written once.

A row compares one measurement (`value`) with a reference measured side by side in the same run
(`reference_value`); `ratio` is value / reference_value unless the row gives its own, and `met`
follows from `target`: ">= 1.5x" compares the ratio, "< 2 s" the value. A row that could not be
measured has value null and says why in `bound`.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from emergence.core.io import PipelineError, atomic_path

KEYS = ("benchmark", "value", "unit", "reference", "reference_value", "ratio", "target", "met", "bound")
NUMBERS, TEXTS = ("value", "reference_value", "ratio"), ("benchmark", "unit", "reference", "target", "bound")
TARGET = re.compile(r"^(>=|<=|<|>) ?([0-9]+(?:\.[0-9]+)?) ?(x|s|MiB)$")  # x: on the ratio; a unit: on the value
COMPARE = {">=": float.__ge__, "<=": float.__le__, "<": float.__lt__, ">": float.__gt__}


def row(
    benchmark: str,
    value: float | None,
    unit: str,
    reference: str | None = None,
    reference_value: float | None = None,
    target: str | None = None,
    bound: str | None = None,
    ratio: float | None = None,
) -> dict:
    """One table row; ratio defaults to value / reference_value, met is derived from the target."""
    if ratio is None and value is not None and reference_value:
        ratio = value / reference_value
    met = None
    if target is not None and value is not None:
        op, limit, on = TARGET.match(target).groups()  # a bad target is a bug in a benchmark module
        measured = ratio if on == "x" else value
        met = None if measured is None else COMPARE[op](float(measured), float(limit))
    return {
        "benchmark": benchmark,
        "value": value,
        "unit": unit,
        "reference": reference,
        "reference_value": reference_value,
        "ratio": ratio,
        "target": target,
        "met": met,
        "bound": bound,
    }


def not_measured(benchmark: str, unit: str, why: str, target: str | None = None) -> dict:
    return row(benchmark, None, unit, target=target, bound=f"not measured: {why}")


def validate(rows: list[dict]) -> None:
    """Refuse a malformed table with one line naming the row and key."""
    for i, r in enumerate(rows):
        where = f"row {i} ({r.get('benchmark', '?')!s})"
        if list(r) != list(KEYS):
            raise PipelineError(f"{where}: keys must be {', '.join(KEYS)}, got {', '.join(r)}")
        for key in NUMBERS:
            v = r[key]
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
                raise PipelineError(f"{where}.{key}: must be a finite number or null, got {v!r}")
        for key in TEXTS:
            if r[key] is not None and not isinstance(r[key], str):
                raise PipelineError(f"{where}.{key}: must be text or null, got {r[key]!r}")
        if not isinstance(r["benchmark"], str) or not isinstance(r["unit"], str):
            raise PipelineError(f"{where}: benchmark and unit must be text")
        if r["met"] not in (True, False, None):
            raise PipelineError(f"{where}.met: must be true, false or null, got {r['met']!r}")
        if r["value"] is None and not (r["bound"] or "").startswith("not measured"):
            raise PipelineError(f"{where}.value: null only for a row whose bound says 'not measured: why'")


def write(rows: list[dict], measured: str, machine: str, path: str | Path) -> None:
    validate(rows)
    text = json.dumps({"measured": measured, "machine": machine, "rows": rows}, indent=2, allow_nan=False)
    with atomic_path(path) as tmp:
        tmp.write_text(text + "\n")


def _cell(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


def render(rows: list[dict]) -> str:
    """A plain-text table: benchmark, value, reference, ratio, target, met; then each bound below it."""
    head = ("benchmark", "value", "unit", "reference", "ratio", "target", "met")
    body = [
        (r["benchmark"], _cell(r["value"]), r["unit"], _cell(r["reference_value"]), _cell(r["ratio"]))
        + (_cell(r["target"]), _cell(r["met"]))
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [f"  {r['benchmark']}: {r['bound']}" for r in rows if r["bound"]]
    return "\n".join(lines + (["", "bounds / notes:", *notes] if notes else []))


def print_comparison(setting: str, row: dict, ours: str, reference: str) -> None:
    """A single benchmark's own report: its setting, both rates, the ratio."""
    width = max(len(ours), len(reference)) + 1
    print(setting)
    print(f"{ours + ':':{width}} {row['value']:8.1f} {row['unit']}")
    print(f"{reference + ':':{width}} {row['reference_value']:8.1f} {row['unit']}")
    print(f"speed-up: {row['ratio']:.2f}x")

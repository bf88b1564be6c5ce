"""reports/bench.json (written by `make bench`, committed): read, checked, and shown on the index.

Format (docs/index_page.md): {"measured": str | null, "machine": str | null, "rows": [row, ...]},
each row {"benchmark": str, "value": number | null, "unit": str, "reference": str | null,
"reference_value": number | null, "ratio": number | null, "target": str | null,
"met": bool | null, "bound": str | null}. Numbers are finite. A malformed file is refused with one
line naming the row and key.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from emergence.core.io import PipelineError
from emergence.core.report import html as H

TEXT, NUMBER, FLAG = "a string", "a finite number", "true or false"
ROW_KEYS = {  # key -> (kind, may be null)
    "benchmark": (TEXT, False),
    "value": (NUMBER, True),  # null: not measured (the row's bound says why)
    "unit": (TEXT, False),
    "reference": (TEXT, True),
    "reference_value": (NUMBER, True),
    "ratio": (NUMBER, True),
    "target": (TEXT, True),
    "met": (FLAG, True),
    "bound": (TEXT, True),
}
TOP_KEYS = {"measured": (TEXT, True), "machine": (TEXT, True)}


def _fits(value: object, kind: str) -> bool:
    if kind == TEXT:
        return isinstance(value, str)
    if kind == FLAG:
        return isinstance(value, bool)
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check(obj: dict, spec: dict, where: str) -> None:
    for key in obj:
        if key not in spec:
            raise PipelineError(f"{where}.{key}: unknown key (known: {', '.join(spec)})")
    for key, (kind, nullable) in spec.items():
        if key not in obj:
            if nullable:
                continue
            raise PipelineError(f"{where}.{key}: missing, expected {kind}")
        value = obj[key]
        if not (value is None and nullable) and not _fits(value, kind):
            raise PipelineError(f"{where}.{key}: expected {kind}{' or null' if nullable else ''}, got {value!r}")


def check_bench(table: object, path: Path) -> dict:
    """The table if it has the documented shape; else one line naming the row and key."""
    if not isinstance(table, dict):
        raise PipelineError(f"{path}: expected a JSON object with 'rows', got {type(table).__name__}")
    rows = table.get("rows")
    if not isinstance(rows, list):
        raise PipelineError(f"{path}: rows: expected a list, got {rows!r}")
    _check({k: v for k, v in table.items() if k != "rows"}, TOP_KEYS, str(path))
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise PipelineError(f"{path}: rows[{i}]: expected an object, got {row!r}")
        _check(row, ROW_KEYS, f"{path}: rows[{i}]")
    return table


def read_bench(path: Path) -> dict | None:
    """The checked table, or None when the file does not exist (nothing measured yet)."""
    if not path.exists():
        return None
    try:
        table = json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise PipelineError(f"{path}: not readable JSON ({e})") from e
    return check_bench(table, path)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


def bench_section(table: dict | None, source: str) -> str:
    """The Benchmarks section: the table as measured, or a line saying nothing is measured yet."""
    if table is None:
        return H.para(f"Not measured yet: {source} does not exist (`make bench` writes it).", "note")
    if not table["rows"]:
        return H.para(f"Not measured yet: {source} holds no rows (`make bench` writes them).", "note")
    rows = pd.DataFrame([{key: row.get(key) for key in ROW_KEYS} for row in table["rows"]], columns=list(ROW_KEYS))
    rows["met"] = rows["met"].map({True: "yes", False: "no"})  # null stays empty
    when = table.get("measured") or "at an unrecorded time"
    where = table.get("machine") or "an unrecorded machine"
    return "\n".join(
        [H.para(f"Measured {when} on {where}."), H.table(rows, caption=f"From {source}", float_format="{:.6g}")]
    )

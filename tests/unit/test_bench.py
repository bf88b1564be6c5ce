"""The benchmark table: ratios, targets, validation, the written file, and the pipeline rows' grouping."""

from __future__ import annotations

import json

import pytest
from refusals import refuses

from bench.pipeline import default_rows, per_study, study_of
from bench.table import KEYS, not_measured, render, row, validate, write
from emergence.core.io import PipelineError


def test_ratio_and_target_on_the_ratio():
    r = row("training", 12000.0, "tokens/s", "HF", 8000.0, ">= 1.5x")
    assert list(r) == list(KEYS)
    assert r["ratio"] == 1.5 and r["met"] is True  # 12000 / 8000, exactly at the target
    assert row("training", 11999.0, "tokens/s", "HF", 8000.0, ">= 1.5x")["met"] is False
    # a ratio target with no reference measured (or a reference of 0): no ratio, so neither met nor missed
    assert row("training", 12000.0, "tokens/s", "HF", None, ">= 1.5x")["met"] is None
    assert row("training", 12000.0, "tokens/s", "HF", 0.0, ">= 1.5x")["met"] is None


def test_target_on_the_value_and_a_given_ratio():
    assert row("no-op", 1.9, "s", target="< 2 s")["met"] is True
    assert row("no-op", 2.0, "s", target="< 2 s")["met"] is False  # strict
    r = row("basis", 0.5, "s", "Jacobian", 15.0, ">= 10x", ratio=15.0 / 0.5)  # a speed-up: reference over ours
    assert r["ratio"] == 30.0 and r["met"] is True
    assert row("peak", 300.0, "MiB")["ratio"] is None and row("peak", 300.0, "MiB")["met"] is None


@pytest.mark.parametrize(
    "target, below, at, above",
    [(">= 2 MiB", False, True, True), ("> 2 MiB", False, False, True), ("<= 2 MiB", True, True, False),
     ("< 2 MiB", True, False, False), ("> 1.5x", False, False, True)],
)  # fmt: skip
def test_each_target_operator_decides_met_at_and_around_its_limit(target, below, at, above):
    # the value 2 MiB (or the ratio 1.5 = 3 / 2) exactly at the limit, and 1/8 below and above it
    limit, reference = (1.5, 2.0) if target.endswith("x") else (2.0, None)
    scale = reference or 1.0
    met = [row("m", (limit + d) * scale, "MiB", "r", reference, target)["met"] for d in (-0.125, 0.0, 0.125)]
    assert met == [below, at, above]


def test_not_measured_row_is_valid_and_says_why():
    r = not_measured("end-to-end binding", "min", "no --default-run given")
    validate([r])
    assert r["value"] is None and r["met"] is None and r["bound"] == "not measured: no --default-run given"


@pytest.mark.parametrize(
    "edit, key, named",
    [
        ({"value": float("nan")}, "row 0 (x).value", ["finite", "nan"]),
        ({"ratio": float("inf")}, "row 0 (x).ratio", ["finite", "inf"]),
        ({"reference_value": True}, "row 0 (x).reference_value", ["finite", "True"]),
        ({"target": 2}, "row 0 (x).target", ["text", "2"]),
        ({"met": "yes"}, "row 0 (x).met", ["true, false or null", "'yes'"]),
        ({"value": None}, "row 0 (x).value", ["null", "'not measured: why'"]),  # and the bound that allows it
    ],
)
def test_validate_names_row_and_key(edit, key, named):
    with refuses(f"{key}: ", *named):
        validate([row("x", 1.0, "s", "ref", 2.0) | edit])


def test_validate_refuses_missing_key():
    r = row("x", 1.0, "s")
    del r["bound"]
    with refuses("row 0 (x)", "benchmark, value, unit, reference, reference_value, ratio, target, met, bound"):
        validate([r])


def test_write_is_the_interface_file(tmp_path):
    rows = [row("training", 3.0, "tokens/s", "HF", 2.0, ">= 1.5x"), not_measured("e2e", "min", "no run")]
    write(rows, "2026-11-26T08:00:00Z", "x86_64, 2 cores", tmp_path / "bench.json")
    saved = json.loads((tmp_path / "bench.json").read_text())
    assert saved == {"measured": "2026-11-26T08:00:00Z", "machine": "x86_64, 2 cores", "rows": rows}
    assert saved["rows"][0]["ratio"] == 1.5 and saved["rows"][0]["met"] is True
    with pytest.raises(PipelineError):
        write([row("bad", float("nan"), "s")], "t", "m", tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists()  # nothing half-written


def test_render_one_line_per_row_and_the_bounds():
    rows = [row("training", 12345.0, "tokens/s", "HF", 9000.0, ">= 1.5x", bound="matmul-bound")]
    lines = render(rows).splitlines()
    assert lines[0].split() == ["benchmark", "value", "unit", "reference", "ratio", "target", "met"]
    assert lines[2].split() == ["training", "12,345", "tokens/s", "9,000", "1.37", ">=", "1.5x", "NO"]
    assert lines[-1] == "  training: matmul-bound"


def test_render_exact_layout():
    """Columns left-aligned to their widest cell, two spaces apart, a dash rule, no trailing blanks; the
    notes block only when a row has a bound."""
    rows = [
        row("training", 12345.0, "tokens/s", "HF", 9000.0, ">= 1.5x", bound="matmul-bound"),
        row("no-op", 1.5, "s", target="< 2 s"),
        not_measured("e2e", "min", "no run"),
    ]
    assert render(rows).split("\n") == [
        "benchmark  value   unit      reference  ratio  target   met",
        "---------  ------  --------  ---------  -----  -------  ---",
        "training   12,345  tokens/s  9,000      1.37   >= 1.5x  NO",
        "no-op      1.5     s         -          -      < 2 s    yes",
        "e2e        -       min       -          -      -        -",
        "",
        "bounds / notes:",
        "  training: matmul-bound",
        "  e2e: not measured: no run",
    ]
    assert render(rows[1:2]).split("\n")[-1] == "no-op      1.5    s     -          -      < 2 s   yes"  # no notes


def test_not_measured_keeps_its_target():
    r = not_measured("e2e", "min", "no run", target="< 2 s")
    assert r["target"] == "< 2 s" and r["met"] is None  # the target is shown; nothing to compare yet


@pytest.mark.parametrize(
    "edit, where",
    [({"unit": None}, "row 0 (x)"), ({"benchmark": None}, "row 0 (None)")],
)
def test_validate_benchmark_and_unit_are_text(edit, where):
    with refuses(where, "benchmark", "unit", "text"):
        validate([row("x", 1.0, "s") | edit])


def test_validate_names_a_row_without_a_name_and_its_keys():
    r = row("x", 1.0, "s")
    del r["benchmark"]
    with refuses("row 1 (?)", "got value, unit, reference, reference_value, ratio, target, met, bound"):
        validate([row("ok", 1.0, "s"), r])


def test_validate_accepts_a_target_missed():
    validate([row("x", 3.0, "s", target="< 2 s")])  # met: false is a valid outcome, not a malformed row


def test_write_text_is_indented_json(tmp_path):
    rows = [row("x", 1.0, "s")]
    write(rows, "t", "m", tmp_path / "bench.json")
    assert (tmp_path / "bench.json").read_text() == json.dumps(
        {"measured": "t", "machine": "m", "rows": rows}, indent=2
    ) + "\n"


def test_study_grouping_of_stage_records():
    records = [
        {"command": "python -m stages.binding.train --seed 0", "stage": "binding_train@0", "exit": 0, "wall_s": 60.0},
        {"command": "python -m stages.binding.train --seed 1", "stage": "binding_train@1", "exit": 0, "wall_s": 90.0},
        {"command": "python -m stages.binding.data", "stage": None, "exit": 0, "wall_s": 30.0},
        {"command": "python -m stages.binding.report", "stage": None, "exit": 1, "wall_s": 999.0},  # failed
        {"command": "python -m stages.index_report", "stage": None, "exit": 0, "wall_s": 6.0},
        {"command": "python -m stages.binding.llc --help", "stage": None, "exit": 0, "wall_s": 4.0},  # ran nothing
        {"command": "python -m stages.binding.llc -h", "stage": None, "exit": 0, "wall_s": 4.0},
    ]
    assert study_of(records[0]["command"]) == "binding" and study_of(records[4]["command"]) == "index"
    summed = per_study(records, "wall_s", sum)
    assert summed == {"binding": (180.0, "binding_train@1"), "index": (6.0, "python -m stages.index_report")}
    assert per_study(records, "wall_s", max)["binding"] == (90.0, "binding_train@1")


def test_default_minutes_from_records(tmp_path):
    folder = tmp_path / "logs/stages"
    folder.mkdir(parents=True)
    for i, wall in enumerate((600.0, 300.0)):
        record = {"command": f"python -m stages.assoc.train --seed {i}", "stage": None, "exit": 0, "wall_s": wall}
        (folder / f"{i}.json").write_text(json.dumps(record))
    rows = {r["benchmark"].split(",")[0]: r for r in default_rows(tmp_path)}
    assert rows["end-to-end assoc"]["value"] == 15.0  # (600 + 300) s / 60
    assert rows["end-to-end binding"]["value"] is None
    assert rows["end-to-end binding"]["bound"] == f"not measured: no stage record of this study in {tmp_path}"
    assert all(r["value"] is None for r in default_rows(None))

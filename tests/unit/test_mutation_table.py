"""tests/mutation_table.py: mutmut's exit codes -> killed / survived / no tests / equivalent, per module."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import ROOT
from refusals import refuses

sys.path.insert(0, str(ROOT / "tests"))
from mutation_table import equivalents, score, survivors, table, tally, write_into  # noqa: E402


def meta(root: Path, rel: str, codes: dict[str, int | None]) -> None:
    path = root / f"{rel}.meta"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"exit_code_by_key": codes}))


def test_exit_codes_are_classed_per_module_and_equivalents_leave_the_score(tmp_path):
    codes = {1: 1, 2: 0, 3: 36, 4: 33, 5: 0}
    meta(tmp_path, "src/a.py", {f"a.x_f__mutmut_{n}": code for n, code in codes.items()})
    meta(tmp_path, "bench/b.py", {"b.x_g__mutmut_1": 3, "b.x_g__mutmut_2": None})
    meta(tmp_path, "src/empty.py", {})
    rows = tally(tmp_path, {"a.x_f__mutmut_5": "same function"})
    assert set(rows) == {"src/a.py", "bench/b.py"}
    a = rows["src/a.py"]
    # 1 (a test failed) and 36 (timeout) are kills; 0 survived; 33 no tests; _5 equivalent
    assert (a["killed"], a["survived"], a["no tests"], a["equivalent"]) == (2, 1, 1, 1)
    assert score(a) == 2 / 4  # equivalent out of the denominator, no tests in it
    b = rows["bench/b.py"]
    assert (b["killed"], b["unchecked"]) == (1, 1) and score(b) == 1.0
    text = table(rows, {"a.x_f__mutmut_5": "same function"}, "now")
    assert "| `src/a.py` | 5 | 2 | 1 | 1 | 1 | 0 | 50.0 % (below 85 %) |" in text
    assert "| `bench/b.py` | 2 | 1 | 0 | 0 | 0 | 1 | 100.0 % |" in text
    assert "| **all** | 7 | 3 | 1 | 1 | 1 | 1 | 60.0 % |" in text
    assert "1 mutants were not checked" in text and "- `a.x_f__mutmut_5`: same function" in text
    # what is left: a.x_f__mutmut_2 survived and _4 has no test; _5 is equivalent, b's are killed or unchecked
    left = survivors(tmp_path, {"a.x_f__mutmut_5": "same function"})
    assert left == {"a.x_f": 2}
    assert "- `a.x_f`: 2" in table(rows, {}, "now", left)


def test_an_equivalent_without_a_reason_is_refused(tmp_path):
    tsv = tmp_path / "eq.tsv"
    tsv.write_text("mutant\treason\nm.x_f__mutmut_1\tsame\nm.x_f__mutmut_2\t \n")
    with refuses(f"{tsv}:3: ", "m.x_f__mutmut_2", error=SystemExit):
        equivalents(tsv)
    tsv.write_text("mutant\treason\nm.x_f__mutmut_1\tsame\n")
    assert equivalents(tsv) == {"m.x_f__mutmut_1": "same"}


def test_the_table_replaces_only_what_lies_between_the_markers(tmp_path):
    doc = tmp_path / "testing.md"
    doc.write_text("head\n<!-- mutation table: begin -->\nold\n<!-- mutation table: end -->\ntail\n")
    write_into(doc, "new")
    assert doc.read_text() == "head\n<!-- mutation table: begin -->\nnew\n<!-- mutation table: end -->\ntail\n"
    doc.write_text("no markers")
    with refuses(doc, "mutation table: begin", error=SystemExit):  # the marker it looks for
        write_into(doc, "new")

"""tests/mutation_table.py: mutmut's exit codes -> killed / survived / no tests / equivalent, per module; the
equivalent mutants keyed by the line they change, not by mutmut's number."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

from conftest import ROOT
from refusals import refuses

sys.path.insert(0, str(ROOT / "tests"))
from mutation_table import (  # noqa: E402
    EQUIVALENT,
    Key,
    equivalents,
    main,
    mutant_keys,
    score,
    stale,
    survivors,
    table,
    tally,
    write_into,
)

# What mutmut 3 writes into mutants/src/a.py for `f`: the original as x_f__mutmut_orig, each mutant as
# x_f__mutmut_N (the trampoline that picks one is left out: the table never reads it).
A = """
def x_f__mutmut_orig(a, b=1):
    c = a + b
    c = a + b
    return c * 2

def x_f__mutmut_1(a, b=1):
    c = a - b
    c = a + b
    return c * 2

def x_f__mutmut_2(a, b=1):
    c = a + b
    c = a - b
    return c * 2

def x_f__mutmut_3(a, b=1):
    c = a + b
    c = a + b
    return c / 2

def x_f__mutmut_4(a, b=2):
    c = a + b
    c = a + b
    return c * 2

def x_f__mutmut_5(a, b=1):
    c = a + b
    c = a + b
    return c * 3
"""
RETURN_3 = Key("a.f", 1, "return c * 2", "return c * 3")  # x_f__mutmut_5


def meta(root: Path, rel: str, codes: dict[str, int | None], mutated: str = "") -> None:
    path = root / f"{rel}.meta"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"exit_code_by_key": codes}))
    (root / rel).write_text(mutated)


def tsv(path: Path, *rows: str) -> Path:
    path.write_text("\n".join(["function\toccurrence\tline\tmutated\treason", *rows]) + "\n")
    return path


def test_exit_codes_are_classed_per_module_and_equivalents_leave_the_score(tmp_path):
    codes = {1: 1, 2: 0, 3: 36, 4: 33, 5: 0}
    meta(tmp_path, "src/a.py", {f"a.x_f__mutmut_{n}": code for n, code in codes.items()}, A)
    meta(tmp_path, "bench/b.py", {"b.x_g__mutmut_1": 3, "b.x_g__mutmut_2": None})
    meta(tmp_path, "src/empty.py", {})
    equivalent = {RETURN_3: "same function"}
    rows = tally(tmp_path, equivalent)
    assert set(rows) == {"src/a.py", "bench/b.py"}
    a = rows["src/a.py"]
    # 1 (a test failed) and 36 (timeout) are kills; 0 survived; 33 no tests; _5 equivalent
    assert (a["killed"], a["survived"], a["no tests"], a["equivalent"]) == (2, 1, 1, 1)
    assert score(a) == 2 / 4  # equivalent out of the denominator, no tests in it
    b = rows["bench/b.py"]
    assert (b["killed"], b["unchecked"]) == (1, 1) and score(b) == 1.0
    text = table(rows, equivalent, "now")
    assert "| `src/a.py` | 5 | 2 | 1 | 1 | 1 | 0 | 50.0 % (below 90 %) |" in text
    assert "| `bench/b.py` | 2 | 1 | 0 | 0 | 0 | 1 | 100.0 % |" in text
    assert "| **all** | 7 | 3 | 1 | 1 | 1 | 1 | 60.0 % |" in text
    assert "1 mutants were not checked" in text
    assert "- `a.f`: `return c * 2` -> `return c * 3`: same function" in text
    # what is left: a.x_f__mutmut_2 survived and _4 has no test; _5 is equivalent, b's are killed or unchecked
    left = survivors(tmp_path, equivalent)
    assert left == {"a.x_f": 2}
    assert "- `a.x_f`: 2" in table(rows, {}, "now", left)


def test_a_key_is_the_changed_line_so_it_outlives_a_renumbering():
    names = [f"a.x_f__mutmut_{n}" for n in range(1, 6)]
    keys = mutant_keys(A, names)
    assert keys["a.x_f__mutmut_5"] == RETURN_3
    assert keys["a.x_f__mutmut_3"] == Key("a.f", 1, "return c * 2", "return c / 2")
    assert keys["a.x_f__mutmut_4"] == Key("a.f", 1, "def f(a, b=1):", "def f(a, b=2):")
    # the function gains a line and two mutants above: the same mutant is now x_f__mutmut_7, its key is
    # unchanged; spacing its line out changes nothing either
    grown = A.replace("    c = a + b\n    c = a + b\n", "    a = abs(a)\n    c = a + b\n    c = a + b\n")
    grown = grown.replace("x_f__mutmut_5", "x_f__mutmut_7").replace("return c * 3", "return  c  *  3")
    grown += "\ndef x_f__mutmut_5(a, b=1):\n    a = abs(None)\n    c = a + b\n    c = a + b\n    return c * 2\n"
    assert mutant_keys(grown, ["a.x_f__mutmut_7"])["a.x_f__mutmut_7"] == RETURN_3


def test_the_same_line_twice_is_told_apart_by_its_occurrence():
    keys = mutant_keys(A, ["a.x_f__mutmut_1", "a.x_f__mutmut_2"])
    assert keys["a.x_f__mutmut_1"] == Key("a.f", 1, "c = a + b", "c = a - b")
    assert keys["a.x_f__mutmut_2"] == Key("a.f", 2, "c = a + b", "c = a - b")


def test_a_method_and_a_mutant_that_drops_a_line():
    source = """
class C:
    def xǁCǁm__mutmut_orig(self):
        return dict(
            a=1,
            b=2,
        )
    def xǁCǁm__mutmut_1(self):
        return dict(
            a=1,
        )
"""
    key = mutant_keys(source, ["pkg.mod.xǁCǁm__mutmut_1"])["pkg.mod.xǁCǁm__mutmut_1"]
    assert key == Key("pkg.mod.C.m", 1, "b=2,", "")


def test_a_listed_key_that_names_no_mutant_is_stale(tmp_path):
    meta(tmp_path, "src/a.py", {f"a.x_f__mutmut_{n}": 0 for n in range(1, 6)}, A)
    gone = Key("a.f", 1, "return c * 4", "return c * 5")
    equivalent = {RETURN_3: "same", gone: "a line that changed since"}
    assert stale(tmp_path, equivalent) == [gone]
    rows = tally(tmp_path, equivalent)
    assert rows["src/a.py"]["equivalent"] == 1
    assert "`a.f`: `return c * 4` -> `return c * 5`" in table(rows, equivalent, "now", gone=[gone])


def test_the_key_option_prints_the_row_to_list_a_mutant(tmp_path, capsys):
    meta(tmp_path, "src/a.py", {f"a.x_f__mutmut_{n}": 0 for n in range(1, 6)}, A)
    assert main(["--mutants", str(tmp_path), "--key", "a.x_f__mutmut_2"]) == 0
    assert capsys.readouterr().out.split("\n")[0].split("\t") == ["a.f", "2", "c = a + b", "c = a - b"]


def test_rows_are_refused_without_a_reason_a_key_of_their_own_or_the_stable_form(tmp_path):
    path = tmp_path / "eq.tsv"
    good = "m.f\t1\treturn x\treturn None\tsame"
    assert equivalents(tsv(path, good)) == {Key("m.f", 1, "return x", "return None"): "same"}
    with refuses(f"{path}:3: ", "m.g", error=SystemExit):
        equivalents(tsv(path, good, "m.g\t1\treturn x\treturn None\t "))
    with refuses(f"{path}:3: ", "m.f", error=SystemExit):
        equivalents(tsv(path, good, "m.f\t1\treturn x\treturn None\tsame, in other words"))
    with refuses(f"{path}:2: ", error=SystemExit):  # the old form: mutmut's name and a reason
        equivalents(tsv(path, "m.x_f__mutmut_1\tsame"))
    with refuses(f"{path}:2: ", "m.f", error=SystemExit):
        equivalents(tsv(path, "m.f\t1\treturn  x\treturn None\tsame"))
    with refuses(f"{path}:2: ", "m.f", error=SystemExit):
        equivalents(tsv(path, "m.f\t0\treturn x\treturn None\tsame"))
    path.write_text("mutant\treason\nm.x_f__mutmut_1\tsame\n")
    with refuses(f"{path}:1: ", error=SystemExit):
        equivalents(path)


def test_the_equivalent_list_holds_one_row_per_key_in_the_stable_form():
    lines = EQUIVALENT.read_text().splitlines()
    assert lines[0].split("\t") == ["function", "occurrence", "line", "mutated", "reason"]
    rows = [line.split("\t") for line in lines[1:]]
    assert rows and all(len(row) == 5 for row in rows)
    for function, occurrence, line, mutated, reason in rows:
        # pkg.mod.function or pkg.mod.Class.method of the mutated code, not mutmut's mangled name and number
        assert re.fullmatch(r"(emergence|bench|stages)(\.\w+)+", function) and "__mutmut_" not in function
        assert not re.search(r"(^|\.)(x_|xǁ)", function)
        assert int(occurrence) >= 1 and line and line != mutated and reason.strip()
        for text in (line, mutated):
            assert text == " ".join(text.split())
    keys = Counter(tuple(row[:4]) for row in rows)
    assert [key for key, n in keys.items() if n > 1] == []
    assert len(equivalents()) == len(rows)


def test_the_table_replaces_only_what_lies_between_the_markers(tmp_path):
    doc = tmp_path / "testing.md"
    doc.write_text("head\n<!-- mutation table: begin -->\nold\n<!-- mutation table: end -->\ntail\n")
    write_into(doc, "new")
    assert doc.read_text() == "head\n<!-- mutation table: begin -->\nnew\n<!-- mutation table: end -->\ntail\n"
    doc.write_text("no markers")
    with refuses(doc, "mutation table: begin", error=SystemExit):  # the marker it looks for
        write_into(doc, "new")


def test_verdicts_restored_into_a_file_the_last_run_left_unmutated_hold_only_while_their_function_does(tmp_path):
    """A scoped run leaves other files as plain copies with the ledger's verdicts: the table mutates such a
    copy again (as mutmut would), keeps a verdict where the function hashes as recorded, and counts the
    mutants of an edited function, and of a new one, as not checked."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    source = "def f(a):\n    return a + 1\n\n\ndef g(a):\n    return a * 2\n\n\ndef h(a):\n    return a - 3\n"
    now = mutate_file_contents("a.py", source)
    names = sorted(now.mutant_names)
    f_names, g_names = [n for n in names if n.startswith("x_f__")], [n for n in names if n.startswith("x_g__")]
    assert f_names and g_names
    path = tmp_path / "src/a.py.meta"
    path.parent.mkdir(parents=True)
    codes = {f"a.{n}": 1 for n in f_names + g_names} | {"a.x_gone__mutmut_1": 0}  # gone: a deleted function
    hashes = {"x_f": now.hash_by_function_name["x_f"], "x_g": "edited since", "x_gone": "x"}
    path.write_text(json.dumps({"exit_code_by_key": codes, "hash_by_function_name": hashes}))
    (tmp_path / "src/a.py").write_text(source)  # the plain copy: the checkout's source
    a = tally(tmp_path, {})["src/a.py"]
    h_names = [n for n in names if n.startswith("x_h__")]
    assert (a["killed"], a["unchecked"], a["survived"]) == (len(f_names), len(g_names) + len(h_names), 0)

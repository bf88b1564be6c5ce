"""tests/mutation_ledger.py: mutmut's verdicts survive a fresh checkout, for the functions whose hash holds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import ROOT
from refusals import assert_names, refuses

sys.path.insert(0, str(ROOT / "tests"))
from mutation_ledger import main, read, restore, save  # noqa: E402


def meta(root: Path, rel: str, codes: dict[str, int | None], hashes: dict[str, str]) -> Path:
    path = root / f"{rel}.meta"
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"exit_code_by_key": codes, "hash_by_function_name": hashes, "type_check_error_by_key": {}}
    path.write_text(json.dumps(body | {"durations_by_key": {"a": 1.5}, "estimated_durations_by_key": {}}))
    return path


def campaign(root: Path) -> None:
    """Two files; f's mutants listed out of order, one not checked; a class method's mangled name."""
    codes = {"a.x_f__mutmut_2": 0, "a.x_f__mutmut_1": 1, "a.x_f__mutmut_3": None, "a.xǁCǁm__mutmut_1": 36}
    meta(root, "src/a.py", codes, {"x_f": "h1", "xǁCǁm": "h2", "x_unmutated": "h3"})
    meta(root, "bench/b.py", {"b.x_g__mutmut_1": -24}, {"x_g": "h4"})


def test_saved_verdicts_come_back_as_mutmut_reads_them(tmp_path):
    campaign(tmp_path / "old")
    ledger = tmp_path / "ledger.tsv"
    assert save(tmp_path / "old", ledger, "3.8.1") == 5
    assert ledger.read_text().splitlines() == [
        "# mutmut 3.8.1: file, function, hash, exit codes of mutants 1..n (- = not checked)",
        "bench/b.py\tb.x_g\th4\t-24",
        "src/a.py\ta.x_f\th1\t1,0,-",
        "src/a.py\ta.xǁCǁm\th2\t36",
    ]
    assert restore(ledger, tmp_path / "new", "3.8.1") == (2, 4)  # the unchecked one is not a verdict
    a = json.loads((tmp_path / "new" / "src/a.py.meta").read_text())
    assert a["exit_code_by_key"] == {
        "a.x_f__mutmut_1": 1,
        "a.x_f__mutmut_2": 0,
        "a.x_f__mutmut_3": None,
        "a.xǁCǁm__mutmut_1": 36,
    }
    # mutmut compares these hashes to keep a verdict; a function without mutants needs none
    assert a["hash_by_function_name"] == {"x_f": "h1", "xǁCǁm": "h2"}
    assert set(a) == {
        "exit_code_by_key",
        "hash_by_function_name",
        "type_check_error_by_key",
        "durations_by_key",
        "estimated_durations_by_key",
    }
    b = json.loads((tmp_path / "new" / "bench/b.py.meta").read_text())
    assert b["exit_code_by_key"] == {"b.x_g__mutmut_1": -24} and b["hash_by_function_name"] == {"x_g": "h4"}


def test_a_meta_already_in_mutants_is_newer_and_kept(tmp_path):
    campaign(tmp_path / "old")
    ledger = tmp_path / "ledger.tsv"
    save(tmp_path / "old", ledger, "3.8.1")
    kept = meta(tmp_path / "new", "src/a.py", {"a.x_f__mutmut_1": 0}, {"x_f": "other"})
    before = kept.read_text()
    assert restore(ledger, tmp_path / "new", "3.8.1") == (1, 1)  # b.py only
    assert kept.read_text() == before


def test_another_mutmut_or_a_bad_line_is_refused_with_its_line(tmp_path):
    campaign(tmp_path / "old")
    ledger = tmp_path / "ledger.tsv"
    save(tmp_path / "old", ledger, "3.8.1")
    with refuses(f"{ledger}:1: ", "'# mutmut 3.8.1", "'# mutmut 3.9.0", error=SystemExit):  # found, expected
        read(ledger, "3.9.0")
    assert not (tmp_path / "new").exists()
    lines = ledger.read_text().splitlines()
    ledger.write_text("\n".join([*lines[:2], "src/a.py\ta.x_f\th1\t1,x,-"]) + "\n")
    with refuses(f"{ledger}:3: ", "a.x_f", "exit codes", "'1,x,-'", error=SystemExit):
        restore(ledger, tmp_path / "new", "3.8.1")
    ledger.write_text("\n".join([*lines[:2], "src/a.py\ta.x_f\t1,0"]) + "\n")
    with refuses(f"{ledger}:3: ", "4 tab-separated", "found 3", error=SystemExit):
        read(ledger, "3.8.1")
    ledger.write_text("")
    with refuses(f"{ledger}:1: ", "'an empty file'", error=SystemExit):
        read(ledger, "3.8.1")
    assert not (tmp_path / "new").exists()  # nothing half-restored


def test_numbers_that_do_not_run_from_one_are_refused_and_nothing_is_written(tmp_path):
    meta(tmp_path / "old", "src/a.py", {"a.x_f__mutmut_1": 1, "a.x_f__mutmut_3": 0}, {"x_f": "h"})
    ledger = tmp_path / "ledger.tsv"
    with refuses("a.py.meta", "a.x_f", "1..2", error=SystemExit):
        save(tmp_path / "old", ledger, "3.8.1")
    with refuses(tmp_path / "none", "make mutation", error=SystemExit):  # what to run first
        save(tmp_path / "none", ledger, "3.8.1")
    assert not ledger.exists()


def test_the_command_line_says_what_it_did(tmp_path, capsys):
    campaign(tmp_path / "old")
    ledger = tmp_path / "ledger.tsv"
    assert main(["save", "--mutants", str(tmp_path / "old"), "--ledger", str(ledger)]) == 0
    assert_names(capsys.readouterr().out.strip(), ledger, "5 mutants saved")
    assert main(["restore", "--mutants", str(tmp_path / "new"), "--ledger", str(ledger)]) == 0
    assert_names(capsys.readouterr().out.strip(), tmp_path / "new", "4 verdicts", "2 files", ledger)
    assert main(["restore", "--mutants", str(tmp_path / "new"), "--ledger", str(tmp_path / "none.tsv")]) == 0
    assert_names(capsys.readouterr().err.strip(), tmp_path / "none.tsv", "no ledger")

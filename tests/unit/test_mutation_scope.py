"""tests/mutation_scope.py: mutmut on a few files, against the test files that run them."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

from conftest import ROOT
from coverage import CoverageData
from refusals import refuses

sys.path.insert(0, str(ROOT / "tests"))
import mutation_scope as S  # noqa: E402


def test_the_selection_splits_into_test_paths_and_options_markers_kept_whole():
    config = SimpleNamespace(
        pytest_add_cli_args_test_selection=["tests/unit", "-m", "not pipeline", "--ignore=tests/unit/a.py", "x.py"]
    )
    assert S.selection(config) == (["tests/unit", "x.py"], ["-m", "not pipeline", "--ignore=tests/unit/a.py"])


def test_test_files_leave_out_the_ignored_ones():
    files = S.test_files(["tests/unit"], ["--ignore=tests/unit/test_lint.py"])
    assert "tests/unit/test_mutation_scope.py" in files and "tests/unit/test_lint.py" not in files
    assert all(f.startswith("tests/unit/") and f.rsplit("/", 1)[1].startswith("test_") for f in files)
    assert S.test_files(["tests/unit/test_lint.py"], []) == ["tests/unit/test_lint.py"]


def test_shards_hold_every_file_once_and_balance_their_bytes():
    files = S.test_files(["tests/unit"], [])[:7]  # 7 files over 3 shards: sizes that do not divide
    parts = S.shards(files, 3)
    assert sorted(f for p in parts for f in p) == sorted(files) and len(parts) == 3
    size = [sum((ROOT / f).stat().st_size for f in p) for p in parts]
    largest = max((ROOT / f).stat().st_size for f in files)
    assert max(size) - min(size) <= largest  # greedy: no shard exceeds another by more than one file
    assert S.shards(files[:2], 3) == [[f] for f in sorted(files[:2], key=lambda f: -(ROOT / f).stat().st_size)]


def test_the_scope_names_each_source_file_with_the_test_files_that_ran_it(tmp_path):
    a, b, outside = tmp_path / "src" / "a.py", tmp_path / "src" / "b.py", tmp_path.parent / "elsewhere.py"
    data = CoverageData(basename=str(tmp_path / ".coverage"))
    for context, lines in [
        ("tests/unit/test_x.py::test_one", {a: [1, 2]}),
        ("tests/unit/test_x.py::test_two[3]", {a: [3], b: [1]}),
        ("tests/unit/test_y.py::test_three", {a: [2], outside: [1]}),
        ("", {b: [5]}),  # before the first test: no test ran it
    ]:
        data.set_context(context)
        data.add_lines({str(path): set(nums) for path, nums in lines.items()})
    assert S.scope_from(data, tmp_path) == {
        "src/a.py": ["tests/unit/test_x.py", "tests/unit/test_y.py"],
        "src/b.py": ["tests/unit/test_x.py"],
    }


def test_each_test_gets_its_own_coverage_context_from_its_setup_on(monkeypatch):
    import coverage

    switched = []
    monkeypatch.setattr(coverage.Coverage, "current", lambda: SimpleNamespace(switch_context=switched.append))
    assert S.pytest_runtest_protocol(SimpleNamespace(nodeid="tests/unit/test_x.py::test_one"), None) is None
    assert switched == ["tests/unit/test_x.py::test_one"]  # None: pytest's own protocol still runs the test
    monkeypatch.setattr(coverage.Coverage, "current", lambda: None)
    assert S.pytest_runtest_protocol(SimpleNamespace(nodeid="t"), None) is None  # not under coverage: nothing


def test_the_tests_of_several_files_are_their_union_and_an_unmapped_file_is_refused():
    scope = {"src/a.py": ["t1.py", "t2.py"], "src/b.py": ["t2.py", "t3.py"], "src/c.py": ["t4.py"]}
    assert S.tests_for(["src/a.py", "src/b.py"], scope) == ["t1.py", "t2.py", "t3.py"]
    with refuses("src/d.py", error=SystemExit):
        S.tests_for(["src/a.py", "src/d.py"], scope)


def test_forgetting_survivors_unsets_every_verdict_but_the_kills(tmp_path):
    meta = tmp_path / "a.py.meta"
    codes = {"a.x_f__mutmut_1": 1, "a.x_f__mutmut_2": 0, "a.x_f__mutmut_3": 33, "a.x_f__mutmut_4": 36}
    meta.write_text(json.dumps({"exit_code_by_key": codes | {"a.x_f__mutmut_5": None}, "hash_by_function_name": {}}))
    assert S.forget_survivors(meta) == 2  # survived (0) and no tests (33); a timeout (36) counts as killed
    data = json.loads(meta.read_text())
    assert data["exit_code_by_key"] == {
        "a.x_f__mutmut_1": 1, "a.x_f__mutmut_2": None, "a.x_f__mutmut_3": None, "a.x_f__mutmut_4": 36,
        "a.x_f__mutmut_5": None,
    }  # fmt: skip
    assert data["hash_by_function_name"] == {}  # the rest of the meta as it was


def test_a_functions_tests_widen_to_every_test_of_their_files_and_no_other():
    """A module fixture calls the code in its file's first test: the file's other tests must run too."""
    run = ["tests/unit/test_a.py::test_1", "tests/unit/test_a.py::test_2[x]", "tests/unit/test_b.py::test_1",
           "tests/unit/test_c.py::test_1"]  # fmt: skip
    tests = {"m.x_f": {"tests/unit/test_a.py::test_1"}, "m.x_g": {"tests/unit/test_c.py::test_1"}, "m.x_h": set()}
    S.widen_to_files(tests, run)
    assert tests == {
        "m.x_f": {"tests/unit/test_a.py::test_1", "tests/unit/test_a.py::test_2[x]"},
        "m.x_g": {"tests/unit/test_c.py::test_1"},
        "m.x_h": set(),
    }

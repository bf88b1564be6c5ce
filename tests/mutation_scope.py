"""mutmut on a few files at a time, against only the tests that run their code, so that a campaign
resumes on a fresh machine in minutes instead of remapping the whole suite first:

    python tests/mutation_scope.py map               # which test files run each source file (coverage)
    python tests/mutation_scope.py run FILE...       # mutmut on FILEs (src/emergence/core/io.py ...)

(`make mutation FILES="..."` runs the second, making the map first when mutants/ has none; remake it
after adding a test file.)

mutmut's own map of tests to functions (mutants/mutmut-stats.json) comes from one run of its whole
test selection in one process: ~50 min here. `map` runs the same selection under coverage on WORKERS
processes and writes, per source file, the test files that executed a line of it (mutants/scope.json).
`run` then gives mutmut those test files as its selection, with `only_mutate` narrowed to FILEs, and
starts from no stats: mutmut maps just those tests, runs each mutant that has no verdict yet (the
ledger's are restored first) and the ledger is saved after. A mutant's tests are a subset of what
mutmut's whole-suite map would give it (coverage sees the same in-process calls), so a verdict can only
err towards survived. mutmut's map is widened to whole test files (`widen_to_files`): a module fixture
runs the code for its file's first test only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCOPE = ROOT / "mutants" / "scope.json"


def selection(config) -> tuple[list[str], list[str]]:
    """mutmut's test selection split into (test paths, everything else: markers, ignores, deselects)."""
    args = list(config.pytest_add_cli_args_test_selection)
    paths = [a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] != "-m")]
    return paths, [a for a in args if a not in paths]


def test_files(paths: list[str], options: list[str]) -> list[str]:
    """The test files under `paths`, less the --ignore'd ones, relative to the root."""
    ignored = {a.removeprefix("--ignore=") for a in options if a.startswith("--ignore=")}
    found = []
    for p in paths:
        base = ROOT / p
        files = [base] if base.is_file() else sorted(base.rglob("test_*.py"))
        found += [str(f.relative_to(ROOT)) for f in files if str(f.relative_to(ROOT)) not in ignored]
    return found


def shards(files: list[str], n: int) -> list[list[str]]:
    """n lists of test files of about equal size (bytes stand in for time), largest first."""
    out: list[list[str]] = [[] for _ in range(n)]
    load = [0] * n
    for f in sorted(files, key=lambda f: -(ROOT / f).stat().st_size):
        i = load.index(min(load))
        out[i].append(f)
        load[i] += (ROOT / f).stat().st_size
    return [s for s in out if s]


def pytest_runtest_protocol(item, nextitem):
    """(A pytest hook, when `map` loads this file as a plugin.) One coverage context per test, its setup
    included: what a module fixture runs counts for the first test of its file, as in mutmut's map."""
    import coverage

    if cov := coverage.Coverage.current():
        cov.switch_context(item.nodeid)


def scope_from(data, root: Path) -> dict[str, list[str]]:
    """Source file (relative) -> sorted test files whose tests executed a line of it, from coverage data
    with one context per test, named by its node id (`tests/unit/test_x.py::test_y`)."""
    out: dict[str, list[str]] = {}
    for measured in data.measured_files():
        rel = os.path.relpath(measured, root)
        if rel.startswith(".."):
            continue
        contexts = set()
        for names in data.contexts_by_lineno(measured).values():
            contexts.update(names)
        files = sorted({c.split("::", 1)[0] for c in contexts if "::" in c})
        if files:
            out[rel] = files
    return out


def make_map(workers: int) -> Path:
    """Run mutmut's test selection under coverage on `workers` processes; write SCOPE."""
    from coverage import CoverageData
    from mutmut.configuration import config

    paths, options = selection(config())
    SCOPE.parent.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        rc = Path(tmp) / "coveragerc"
        sources = ",".join(str(ROOT / p) for p in config().source_paths)
        rc.write_text(f"[run]\nsource = {sources}\nparallel = True\ndata_file = {tmp}/.coverage\n")
        env = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": str(ROOT / "tests"),
            "EMERGENCE_SHARED": os.environ.get("EMERGENCE_SHARED", str(ROOT.parent / "shared")),
        }
        pytest = ["-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-p", "mutation_scope"]
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "coverage",
                    "run",
                    f"--rcfile={rc}",
                    *pytest,
                    f"--basetemp={tmp}/{i}",
                    *shard,
                    *options,
                ],
                cwd=ROOT,
                env=env,
            )
            for i, shard in enumerate(shards(test_files(paths, options), workers))
        ]
        failed = [p.args for p in procs if p.wait() != 0]
        if failed:
            raise SystemExit(f"{len(failed)} shard(s) failed; the map needs a passing suite")
        subprocess.run([sys.executable, "-m", "coverage", "combine", f"--rcfile={rc}", "-q"], cwd=ROOT, check=True)
        data = CoverageData(basename=f"{tmp}/.coverage")
        data.read()
        scope = scope_from(data, ROOT)
    tmp_out = SCOPE.with_suffix(".tmp")
    tmp_out.write_text(json.dumps(scope, indent=1, sort_keys=True))
    tmp_out.replace(SCOPE)
    return SCOPE


def tests_for(files: list[str], scope: dict[str, list[str]]) -> list[str]:
    """The test files that run any of `files`; refuses a file outside the map (not mutated, or no test)."""
    missing = [f for f in files if f not in scope]
    if missing:
        raise SystemExit(f"{SCOPE}: no test runs {', '.join(missing)} (or the map is older than the file)")
    return sorted({t for f in files for t in scope[f]})


def forget_survivors(meta: Path) -> int:
    """Unset the verdict of each mutant of a meta that no test killed (survived, no tests), so that mutmut
    runs it again: after tests were added for that file. Returns how many."""
    from mutation_table import KILLED

    data = json.loads(meta.read_text())
    again = [name for name, code in data["exit_code_by_key"].items() if code is not None and code not in KILLED]
    data["exit_code_by_key"].update(dict.fromkeys(again))
    meta.write_text(json.dumps(data, indent=4))
    return len(again)


def widen_to_files(tests_by_function: dict[str, set[str]], tests_run: list[str]) -> None:
    """Each function's tests widened, in place, to every test of the files holding one. mutmut maps a test
    to the functions it calls; a module fixture calls the code once, in its file's first test, so the
    file's other tests, which read what the fixture built, would never run against a mutant of it."""
    by_file: dict[str, set[str]] = {}
    for test in tests_run:
        by_file.setdefault(test.split("::", 1)[0], set()).add(test)
    for tests in tests_by_function.values():
        tests |= set().union(*(by_file.get(t.split("::", 1)[0], set()) for t in list(tests)))


def run(files: list[str], max_children: int, again: bool = False) -> None:
    """mutmut on `files` against their tests, from the ledger's verdicts, saving the ledger after; `again`:
    the mutants of `files` that no test killed are run again (new tests)."""
    import mutmut.__main__ as M
    from mutation_ledger import main as ledger
    from mutmut.configuration import config

    if not SCOPE.exists():
        print(f"{SCOPE}: no map yet; making it (`python tests/mutation_scope.py map` remakes it)")
        make_map(max(max_children, 2))
    scope = json.loads(SCOPE.read_text())
    _, options = selection(config())
    config().only_mutate = files
    config().pytest_add_cli_args_test_selection = [*tests_for(files, scope), *options]
    (ROOT / "mutants" / ".dvc").mkdir(parents=True, exist_ok=True)  # mutmut copies .dvc/config, not its folder
    for file in files:
        # a run that did not mutate the file left a plain copy, newer than the source, which mutmut would take
        # as mutated already: without it, mutmut copies the file afresh and mutates it
        copy = ROOT / "mutants" / file
        if copy.exists() and "__mutmut_" not in copy.read_text():
            copy.unlink()
    (ROOT / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)  # no stats: mutmut maps these tests afresh
    ledger(["restore"])
    if again:
        metas = [ROOT / "mutants" / f"{file}.meta" for file in files]
        print(f"{sum(forget_survivors(m) for m in metas if m.is_file())} mutants that no test killed run again")
    collect = M.run_stats_collection

    def collect_widened(runner, tests=None) -> None:
        collect(runner, tests)
        widen_to_files(M.state().tests_by_mangled_function_name, list(M.state().duration_by_test))
        M.save_stats()

    M.run_stats_collection = collect_widened
    try:
        M._run((), max_children)
    finally:
        ledger(["save"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    m = sub.add_parser("map", help="which test files run each source file")
    m.add_argument("--workers", type=int, default=2)
    r = sub.add_parser("run", help="mutmut on FILEs against their tests")
    r.add_argument("files", nargs="+", help="source files, relative to the root (src/emergence/core/io.py)")
    r.add_argument("--max-children", type=int, default=1)
    r.add_argument("--again", action="store_true", help="run the FILEs' survivors again (after adding tests)")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    if args.action == "map":
        print(f"{make_map(args.workers)}: written")
    else:
        run(args.files, args.max_children, args.again)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

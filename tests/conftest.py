"""Shared fixtures: the project root, the real data beside it, a tiny pipeline copy."""

from __future__ import annotations

import fcntl
import json
import locale
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The sources the code-digest tests digest: the checkout's. In mutants/ every function is there many times
# over behind mutmut's trampolines, and digesting that copy takes minutes a test, so there they digest the
# unmutated checkout above it; the digest functions they call are still the mutated ones.
SOURCES = ROOT.parent if ROOT.name == "mutants" and (ROOT.parent / "pyproject.toml").is_file() else ROOT
# ../shared beside the checkout (beside the one above mutants/ in a mutation run); EMERGENCE_SHARED names
# it where the tests run from a copy elsewhere.
SHARED = Path(os.environ.get("EMERGENCE_SHARED") or SOURCES.parent / "shared")
SHARED_DATA = SHARED / "data"
BIN = Path(sys.executable).parent  # the venv's dvc / snakemake / python


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data: a test that needs it fails (never skips) when it is missing."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"{SHARED_DATA} is missing: the real data samples must sit beside the project")
    return SHARED_DATA


# Fixed commit dates: two copies of the same tree get the same git revision, which the reports
# record as provenance. Git's internal form (2026-01-01T00:00:00Z): DVC's experiments commit through
# dulwich, which reads no ISO date.
GIT_DATES = {"GIT_AUTHOR_DATE": "1767225600 +0000", "GIT_COMMITTER_DATE": "1767225600 +0000"}


@pytest.fixture(scope="module")
def one_thread():
    """Tiny matmuls: a second thread only adds contention on the 2-core machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def run(cmd: list[str], cwd: Path, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    """`cmd` with the venv's tools first on PATH; `env` adds or overrides variables (e.g. HOME)."""
    env = {**os.environ, **GIT_DATES, **(env or {}), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def project_copy(dest: Path, profile: str | None = "tiny") -> Path:
    """A git repo holding the project's tracked and untracked-but-not-ignored files; under a `profile`,
    without the committed dvc.lock, whose entries are the default's instances (DVC keeps every entry it
    has and rewrites the whole file after each stage: ~30 % more to rewrite in a tiny run)."""
    files = run(["git", "ls-files", "-co", "--exclude-standard"], ROOT).stdout.split("\n")
    for rel in filter(None, files):
        if profile and rel == "dvc.lock":
            continue
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    run(["git", "init", "-q"], dest)
    run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A"], dest)
    run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "copy"], dest)
    if profile:
        run([sys.executable, "-m", "emergence.core.profile", profile], dest)
    return dest


def copy_run(src: Path, dest: Path) -> Path:
    """A copy of a finished run (git repo, DVC cache, artifacts, timestamps) that a test may edit."""
    shutil.copytree(src, dest, symlinks=True)
    return dest


@pytest.fixture
def threads(monkeypatch) -> list:
    """torch.set_num_threads recorded, not applied: what a bench's main asked for."""
    import torch

    seen: list = []
    monkeypatch.setattr(torch, "set_num_threads", seen.append)
    return seen


def help_text(call, capsys) -> str:
    """What `call()` (a CLI given `--help`) prints, whitespace-normalised; it must exit 0."""
    with pytest.raises(SystemExit) as e:
        call()
    assert e.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def summary_line(module) -> str:
    """The first line of `module`'s docstring, whitespace-normalised: what a bench's --help opens with."""
    return " ".join(module.__doc__.splitlines()[0].split())


def help_words(help: str, head: str) -> set[str]:
    """The words a --help (whitespace-normalised, as `help_text` gives it) says after `head` (an option and its
    metavar, or a command), up to the next option; brackets, colons and commas stripped."""
    text = re.search(rf"(?<![\[{{]){re.escape(head)} (.*?)(?= -{{1,2}}[a-z]|$)", help)[1]
    return {w.strip("():") for w in re.split(r"[\s,]+", text)}


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """One `dvc repro` of the tiny profile for the whole session (every stage; ~20 min on CI's 2 cores).

    Under pytest-xdist the workers share it: the first to ask builds it under a file lock, the others
    wait and reuse it; a failed build is recorded and reported by every worker, not retried.
    Read-only by convention: a test that edits params or reruns stages works on `copy_run(tiny_run, ...)`.
    EMERGENCE_TINY_RUN names a finished one to reuse instead (a copy's stages still run this checkout's code).
    """
    if prebuilt := os.environ.get("EMERGENCE_TINY_RUN"):  # a finished tiny run reused while developing
        return Path(prebuilt)
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the session's folder, above each worker's own
    home = base / "tiny-run"
    home.mkdir(exist_ok=True)
    record, root = home / "built.json", home / "run"
    with open(home / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            error = None
            try:
                run(["dvc", "repro"], project_copy(root))
            except AssertionError as exc:
                error = str(exc)
            record.write_text(json.dumps({"error": error}))
        error = json.loads(record.read_text())["error"]
    if error:
        pytest.fail(f"the session's tiny `dvc repro` failed:\n{error}")
    return root


FACTS = pytest.StashKey[str]()  # a mutant run's code-facts folder


def pytest_configure(config):
    """Test files share module fixtures and edit them in file order, so a file must run whole on one
    worker: `--dist loadfile` (what `make test` uses). In workers torch takes one thread (two workers
    on two cores). Under a mutation run, see below."""
    if "MUTANT_UNDER_TEST" in os.environ:
        from emergence.core.code_facts import ENV

        # The code facts are kept by the bytes of core/code_facts.py, which mutmut's trampolines make the
        # same for every mutant: each mutant's run keeps its own, or one mutant would read another's.
        config.stash[FACTS] = os.environ[ENV] = tempfile.mkdtemp(prefix="code-facts-")
    if os.environ.get("MUTANT_UNDER_TEST") == "stats":
        # `make mutation`, while mutmut maps tests to functions: record calls in this process only. A
        # child process (a stage run as a program) would look for mutmut's config in its own working
        # directory and fail; it runs the original code instead. Each mutant's run keeps the variable,
        # so children run the mutant too.
        from mutmut.mutation import trampoline

        trampoline._mutant_under_test = os.environ.pop("MUTANT_UNDER_TEST")
    dist = config.getoption("dist", "no")
    if dist not in ("no", "loadfile"):
        raise pytest.UsageError(f"--dist {dist}: use --dist loadfile (each test file runs whole on one worker)")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)


def pytest_unconfigure(config):
    """A mutant's own code facts go with its run (thousands of runs would leave as many folders)."""
    if FACTS in config.stash:
        shutil.rmtree(config.stash[FACTS], ignore_errors=True)


BUILDER = "test_pipeline.py"  # the tiny run's first user
SNAKEMAKE = "test_snakemake_run.py"  # the tiny profile through Snakemake, the DVC run asked for at its end


def pytest_collection_modifyitems(items):
    """tests/pipeline/ runs stages, engines or whole profiles: `pytest -m "not pipeline"` skips them.

    Files run in this order (`make test` hands them to its workers so, with --no-loadscope-reorder,
    the first file to the first worker, the second to the second): BUILDER, whose first test builds the
    session's tiny run with DVC; SNAKEMAKE, which builds it with Snakemake; then the files that never ask
    for the DVC run; then those that do (a `late_tiny_run` file asks for it only at its end). So the two
    engines build side by side, and then the files that do not wait on the DVC run (in xdist's own order,
    by test count, a worker sat on the tiny run's lock)."""
    for item in items:
        if "pipeline" in item.path.parent.name:
            item.add_marker(pytest.mark.pipeline)
    waits = {
        i.path for i in items if "tiny_run" in getattr(i, "fixturenames", ()) or i.get_closest_marker("late_tiny_run")
    }
    order = {BUILDER: 0, SNAKEMAKE: 1}
    items.sort(key=lambda i: order.get(i.path.name, 3 if i.path in waits else 2))  # stable: file order kept


@pytest.fixture
def figures(monkeypatch) -> list:
    """The (matplotlib figure, alt text) pairs the code under test embeds, kept instead of rendered
    (tests/figures.py describes them)."""
    from emergence.core.report import html as H

    kept = []

    def keep(fig, alt, dpi=100):
        kept.append((fig, alt))
        return f'<img alt="{H.esc(alt)}" src="data:image/png;base64,">'

    monkeypatch.setattr(H, "figure", keep)
    return kept


@pytest.fixture
def ascii_locale():
    """The locale's encoding is ASCII (LANG=C without Python's UTF-8 coercion): what the project writes and reads
    is UTF-8 whatever it is."""
    saved = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        if locale.getpreferredencoding(False).lower() not in ("ascii", "ansi_x3.4-1968"):
            pytest.skip("this interpreter reads files as UTF-8 in any locale (UTF-8 mode)")
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)

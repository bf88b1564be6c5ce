"""Atomic writes, what a stage run may write and publish, and schema-checked Parquet reads."""

from __future__ import annotations

import errno
import json
import os
import signal
import tempfile
import threading
from pathlib import Path

import pandas as pd
import pytest
from refusals import refuses

from emergence.core.io import (
    PipelineError,
    Refused,
    atomic_path,
    read_parquet,
    read_parquets,
    remove_tree,
    stage_writes,
    write_json,
    write_parquet,
    write_text,
)


def test_atomic_path_keeps_old_file_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_atomic_path_replaces_directories_and_clears_stale_temps(tmp_path):
    target = tmp_path / "run"
    (target / "old").mkdir(parents=True)
    (tmp_path / ".run.abc.tmp").mkdir()  # what a SIGKILL mid-write leaves behind
    with atomic_path(target) as tmp:
        (tmp / "new").mkdir(parents=True)
    assert [p.name for p in target.iterdir()] == ["new"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


@pytest.fixture
def ctrl_c_during(monkeypatch):
    """Patch `os.<name>` to send this process a SIGINT right after its first call, with another thread
    alive (as torch's are): the kernel may hand the signal to it, and Python still raises it here.
    SIGINT gets Python's default handler for the test: a host process (a mutation tester) may have its own."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    idle = threading.Event()
    helper = threading.Thread(target=idle.wait, daemon=True)
    helper.start()

    def patch(name: str) -> None:
        real, sent = getattr(os, name), []

        def call(*args, **kwargs):
            out = real(*args, **kwargs)
            if not sent:
                sent.append(name)
                os.kill(os.getpid(), signal.SIGINT)
            return out

        monkeypatch.setattr(os, name, call)

    yield patch
    idle.set()
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_while_a_folder_is_replaced_leaves_the_old_or_the_new_one_whole(tmp_path, ctrl_c_during):
    # A resume state is a folder replaced every few steps; a Ctrl-C while the old one was being removed
    # used to leave neither: training started over.
    target = tmp_path / "resume"
    target.mkdir()
    for name in ("state.json", "state.safetensors"):
        (target / name).write_text("old")
    ctrl_c_during("unlink")
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(target) as tmp:
            tmp.mkdir()
            for name in ("state.json", "state.safetensors"):
                (tmp / name).write_text("new")
    assert {p.name: p.read_text() for p in target.iterdir()} == {"state.json": "new", "state.safetensors": "new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["resume"]


def test_ctrl_c_while_a_folder_is_removed_is_an_interrupt_once_it_is_gone(tmp_path, ctrl_c_during):
    # CPython's rmtree, interrupted right after closing a folder, closes it again and raises EBADF in
    # place of the interrupt: the CLI then reported a failed write, not a Ctrl-C (exit 1, not 130).
    (tmp_path / "tree" / "a" / "b").mkdir(parents=True)
    (tmp_path / "tree" / "a" / "b" / "f").write_text("x")
    ctrl_c_during("close")
    with pytest.raises(KeyboardInterrupt):
        remove_tree(tmp_path / "tree")
    assert not (tmp_path / "tree").exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is back


def test_write_parquet_is_byte_deterministic(tmp_path):
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"], "c": [[1], [2, 3]]})
    write_parquet(df, tmp_path / "1.parquet")
    write_parquet(df, tmp_path / "2.parquet")
    assert (tmp_path / "1.parquet").read_bytes() == (tmp_path / "2.parquet").read_bytes()


def test_read_parquet_names_file_and_column(tmp_path):
    path = tmp_path / "t.parquet"
    write_parquet(pd.DataFrame({"a": ["1"]}), path)
    with refuses(path, "'b'", "missing"):
        read_parquet(path, {"b": "i"})
    with refuses(path, "'a'", "dtype"):
        read_parquet(path, {"a": "i"})
    assert read_parquet(path, {"a": "U"})["a"].tolist() == ["1"]  # 'U' asks for strings, however pandas holds them
    (tmp_path / "x.parquet").write_text("not parquet")
    with refuses(tmp_path / "x.parquet", "Parquet"):
        read_parquet(tmp_path / "x.parquet")


# ---- an output that cannot be written: one line naming it, nothing half-written ---------------------


def fail_as_read_only(monkeypatch, name: str, when) -> None:
    """os.<name> raising EROFS, as on a read-only mount, for the calls `when(*args)` picks (the tests run as
    root, whom chmod 0o500 does not stop)."""
    real = getattr(os, name)

    def call(*args, **kwargs):
        if when(*args):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, call)


def one_line_naming(error: pytest.ExceptionInfo, path: Path, cause: str) -> None:
    message = str(error.value)
    assert message.startswith(f"{path}: ") and cause in message and "\n" not in message, message


def test_a_read_only_folder_is_one_line_naming_the_output_and_nothing_changes(tmp_path, monkeypatch):
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "index.html").write_text("old")
    fail_as_read_only(monkeypatch, "mkdir", lambda path, *rest: str(path).startswith(str(reports)))
    for path in (reports / "index.html", reports / "plots" / "binding.csv"):  # a temporary, a folder to make
        with pytest.raises(PipelineError) as error:
            write_text("new", path)
        one_line_naming(error, path, "Read-only file system")
    assert tree(tmp_path) == {"reports/index.html": "old"} and list(reports.iterdir()) == [reports / "index.html"]


def write_version(path: Path, kind: str, text: str) -> None:
    if kind == "folder":
        path.mkdir()
        (path / "a").write_text(text)
    else:
        path.write_text(text)


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_an_output_that_cannot_be_published_keeps_the_old_one(tmp_path, monkeypatch, kind):
    out = tmp_path / "out"
    write_version(out, kind, "old")
    before = tree(tmp_path)
    # the new version refused at its rename onto `out` (a folder's old version was moved aside just before)
    fail_as_read_only(monkeypatch, "replace", lambda src, dst, *rest: Path(src).name == "out" and Path(dst) == out)
    with pytest.raises(PipelineError) as error:
        with atomic_path(out) as tmp:
            write_version(tmp, kind, "new")
    one_line_naming(error, out, "Read-only file system")
    assert tree(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_full_disk_mid_write_names_the_output_and_leaves_no_folder_it_made(tmp_path):
    path = tmp_path / "new" / "deep" / "x.parquet"
    with pytest.raises(PipelineError) as error:
        with atomic_path(path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    one_line_naming(error, path, "No space left on device")
    assert list(tmp_path.iterdir()) == []


# ---- writers inside a stage run: only declared outputs, published only if the run succeeds ----------


def tree(root) -> dict[str, str]:
    """Every file under `root` (relative path -> text): what a run may or may not have changed."""
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_file_never_replaces_a_folder_even_outside_a_stage(tmp_path):
    (tmp_path / "reports" / "metrics").mkdir(parents=True)
    (tmp_path / "reports" / "bench.json").write_text("{}")
    before = tree(tmp_path)
    with refuses(tmp_path / "reports", "a folder", error=Refused):
        write_text("<html>", tmp_path / "reports")
    assert tree(tmp_path) == before and (tmp_path / "reports" / "metrics").is_dir()


@pytest.fixture
def declared(tmp_path, monkeypatch):
    """A stage run in tmp_path declaring out/ (a folder), one.txt and scratch/; foreign/ is another stage's."""
    monkeypatch.chdir(tmp_path)
    with stage_writes() as run:
        run.declare("s@0", {"out": "${paths.out}", "one.txt": "one.txt"}, ["scratch"], {"reports/page.html": "report"})
        yield run


def test_no_artifacts_read_as_an_empty_table_of_the_required_kinds():
    empty = read_parquets([], {"n": "if", "x": "f", "ok": "b", "word": "O"})
    assert empty.empty and {c: str(t) for c, t in empty.dtypes.items()} == {
        "n": "int64",  # the first kind a column may have
        "x": "float64",
        "ok": "bool",
        "word": "object",
    }


def test_a_stage_writes_only_its_declared_outputs(declared):
    write_json({"a": 1}, "out/new/m.json")  # each writer, its folder made
    write_parquet(pd.DataFrame({"a": [1]}), "out/t.parquet")
    for write in (lambda p: write_json({}, p), lambda p: write_parquet(pd.DataFrame({"a": [1]}), p)):
        with refuses("two.json", "s@0", error=Refused):
            write("two.json")
        assert not Path("two.json").exists()
    write_text("1", "one.txt")
    write_text("x", "out/a/b.txt")  # inside a declared folder
    write_text("s", "scratch/state")
    with refuses("two.txt", "s@0", "(out, one.txt)", error=Refused) as caught:
        write_text("2", "two.txt")
    assert str(caught.value).startswith("two.txt: ")
    assert not Path("two.txt").exists()


def test_a_folder_holding_another_stages_output_is_not_replaced(declared):
    declared.declare("s@0", {"reports": "${paths.reports}"}, [], {"reports/page.html": "report"})
    Path("reports").mkdir()
    Path("reports/page.html").write_text("page")
    with refuses("reports/page.html", "stage report", "s@0", "${paths.reports}", error=Refused) as caught:
        with atomic_path("reports") as tmp:
            tmp.mkdir()
    assert str(caught.value).startswith("reports: ")
    assert tree(Path("reports")) == {"page.html": "page"}


def test_a_declared_folder_is_replaced_by_a_folder_and_read_back_in_the_same_run(declared):
    write_text("old", "out/run/model")
    with atomic_path("out/run") as tmp:
        tmp.mkdir()
        write_text("new", tmp / "model")  # inside the write's temporary: part of it
    assert Path("out/run/model").read_text() == "new"  # a later step of the run reads it (grounding_marking)


def test_a_failed_run_puts_back_what_it_replaced_and_removes_what_it_added(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_text("old", "one.txt")
    write_text("old", "out/run/model")
    before = tree(tmp_path)
    with pytest.raises(PipelineError, match="late failure"):
        with stage_writes() as run:
            run.declare("s@0", dict.fromkeys(["out", "one.txt", "new/deep/x.txt"], ""), ["scratch"], {})
            write_text("new", "one.txt")
            write_text("newer", "one.txt")  # twice in one run: the version before the run comes back
            with atomic_path("out/run") as tmp:
                (tmp / "other").mkdir(parents=True)
            write_text("new", "new/deep/x.txt")
            write_text("kept", "scratch/state")  # resume state survives a failed run
            assert Path("out/run/other").is_dir() and Path("one.txt").read_text() == "newer"
            raise PipelineError("late failure")
    assert tree(tmp_path) == {**before, "scratch/state": "kept"}
    assert not Path("new").exists()  # the folders made for a new output go too
    assert list(tmp_path.rglob("*.tmp")) == []


def test_a_failing_end_of_run_check_undoes_the_run_and_a_passing_one_publishes_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_text("old", "one.txt")

    def run_with(check):
        with stage_writes() as run:
            run.declare("s@0", {"one.txt": ""}, [], {})
            run.checks.append(check)
            write_text("new", "one.txt")

    def fail():
        raise PipelineError("params.yaml: changed")

    with pytest.raises(PipelineError, match="params.yaml: changed"):
        run_with(fail)
    assert tree(tmp_path) == {"one.txt": "old"}
    run_with(lambda: None)
    assert tree(tmp_path) == {"one.txt": "new"}


def test_a_temporary_directory_outside_the_checkout_is_no_output(declared):
    with tempfile.TemporaryDirectory() as work:  # assoc_order trains its short runs in one
        write_text("x", Path(work) / "run" / "step0")
        assert (Path(work) / "run" / "step0").read_text() == "x"
    with refuses("elsewhere.txt", "s@0", error=Refused):  # the checkout itself may be in /tmp
        write_text("x", Path.cwd() / "elsewhere.txt")


def test_metrics_json_lists_keys_sorted_at_every_level_whatever_order_they_were_built_in(tmp_path):
    """Two runs that build the same metrics in another order write the same bytes (`dvc metrics diff`)."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_json({"seed1": {"z": 1, "G": 0.5}, "seed0": {"p": 0.1}}, a)
    write_json({"seed0": {"p": 0.1}, "seed1": {"G": 0.5, "z": 1}}, b)
    assert a.read_bytes() == b.read_bytes()
    assert json.loads(a.read_text()) == {"seed0": {"p": 0.1}, "seed1": {"G": 0.5, "z": 1}}
    keys = [line.strip().split(":")[0] for line in a.read_text().splitlines() if ":" in line]
    assert keys == ['"seed0"', '"p"', '"seed1"', '"G"', '"z"']

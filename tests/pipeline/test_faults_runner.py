"""Fault cases of the stage runner and its writers: a stage run by hand (`python -m stages.X`, outside
both engines) writes only its declared outputs, runs only instances params.yaml lists, and publishes
nothing when params.yaml changes under it. Each case runs the real command in a copy of the tiny run."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from faults import ENV, assert_only_changed, assert_outcome, fault_copy, run_command, set_params, snapshot
from refusals import assert_names


def error_naming(proc: subprocess.CompletedProcess, says: str) -> str:
    """The first error line of `proc` that names `says`."""
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:") and says in line]
    assert lines, f"no error line names {says!r}:\n{proc.stderr[-3000:]}"
    return lines[0]


@pytest.fixture
def root(tiny_run, tmp_path) -> Path:
    return fault_copy(tiny_run, tmp_path / "run")


# ---- a writer replaces only the stage's own outputs ------------------------------------------------


def test_the_index_page_pointed_at_the_reports_folder_deletes_nothing(root):
    """paths.index_report: reports used to replace the whole reports/ folder (every study page, the
    metrics, the committed bench.json) with one HTML file."""
    set_params(root, paths__index_report="reports")  # a folder of files git tracks: refused at the start
    before = snapshot(root)
    proc = run_command(root, "python", "-m", "stages.index_report")
    assert_outcome(proc, "error", "paths.index_report: 'reports'")
    assert_only_changed(root, before)
    set_params(root, paths__index_report="data/binding")  # other stages' outputs: refused at the start too
    proc = run_command(root, "python", "-m", "stages.index_report")
    # the key, its value, and another stage's output it would hold (paths_rules.py; the writer guard
    # behind it, core/io.py, refuses the same when a stage is started without its params check)
    assert_outcome(proc, "error", "paths.index_report: 'data/binding'")
    assert_names(error_naming(proc, "paths.index_report: "), "holds paths.binding_", "data/binding/")
    assert "re-run" not in proc.stderr
    assert_only_changed(root, before, ("params.yaml",))
    assert not list((root / "data").glob(".*.tmp"))


def test_a_folder_output_pointed_at_a_folder_of_other_outputs_deletes_nothing(root):
    set_params(root, paths__visual_scenes="data/binding")
    before = snapshot(root)
    proc = run_command(root, "python", "-m", "stages.grounding.visual_scenes")
    # the key, its value, and the other stage's output it holds
    assert_outcome(proc, "error", "paths.visual_scenes: 'data/binding'")
    assert_names(error_naming(proc, "paths.visual_scenes: "), "holds paths.binding_", "data/binding/")
    assert_only_changed(root, before)


def test_the_index_page_at_its_own_path_is_still_written(root):
    before = snapshot(root)
    proc = run_command(root, "python", "-m", "stages.index_report")
    assert_outcome(proc, "ok")
    assert_only_changed(root, before, ("reports/index.html",))


# ---- only the instances params.yaml lists ----------------------------------------------------------


@pytest.mark.parametrize(
    "module, argv, flag, named",  # the option and its value; the params list it is not in, and its file
    [
        ("stages.binding.train", ["--seed", "7"], "--seed 7", ["base.seeds [0, 1]", "params.yaml"]),
        ("stages.assoc.train", ["--layers", "5", "--seed", "0"], "--layers 5", ["assoc_runs.layers [1, 2]"]),
        (
            "stages.grounding.gain",
            ["--setting", "childes", "--model", "gpt9", "--seed", "0"],
            "--model gpt9",
            ["grounding_runs.models [transformer4, mamba4, lstm4]", "params.yaml"],
        ),
        (
            "stages.grounding.train",
            ["--setting", "audio", "--model", "transformer4", "--seed", "0"],
            "--setting audio",
            ["visual_runs.settings [caption, image]", "params.yaml"],
        ),
    ],
)
def test_a_matrix_value_params_does_not_list_is_refused(root, module, argv, flag, named):
    """Such a run would write an output no engine tracks, unchecked against any declaration."""
    before = snapshot(root)
    proc = run_command(root, "python", "-m", module, *argv)
    assert_outcome(proc, "error", f"error: {flag}: ")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert_names(proc.stderr.strip(), *named)
    assert_only_changed(root, before)


# ---- params edited while a stage runs --------------------------------------------------------------

NOUNS = "resources/grounding/nouns.tsv"


def run_editing_params_midway(root: Path, edit) -> subprocess.CompletedProcess:
    """`python -m stages.grounding.childes_synth` with `edit(root)` applied after the stage has read its
    params and before it writes anything: its noun list is a named pipe, which the stage opens after
    start_stage and reads only once the test has edited params.yaml and written the list into it."""
    nouns = (root / NOUNS).read_text()
    (root / NOUNS).unlink()
    os.mkfifo(root / NOUNS)
    proc = subprocess.Popen(
        [sys.executable, "-m", "stages.grounding.childes_synth"],
        cwd=root,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while True:  # a non-blocking open for writing succeeds once the stage has opened the pipe to read
        try:
            fd = os.open(root / NOUNS, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as e:
            assert e.errno == errno.ENXIO, e
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the stage never opened its noun list"
            time.sleep(0.01)
    edit(root)
    os.set_blocking(fd, True)
    with os.fdopen(fd, "w") as pipe:
        pipe.write(nouns)
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_params_edited_while_a_stage_runs_fail_it_and_keep_its_outputs(root):
    """DVC reads params.yaml when it saves dvc.lock: the lock would record the edited value for a
    transcript folder built with the old one, and `dvc status` would call it up to date."""
    before = snapshot(root)
    proc = run_editing_params_midway(root, lambda r: set_params(r, childes_synth__turns_per_file=151))
    # the file, the key edited, and the stage that ran
    assert_outcome(proc, "error", "params.yaml: childes_synth.turns_per_file")
    assert_names(error_naming(proc, "childes_synth.turns_per_file"), "changed", "stage childes_synth")
    assert_only_changed(root, before, ("params.yaml",))  # data/grounding/chat as it was
    assert not list((root / "data/grounding").glob(".*.tmp"))


def test_a_stage_whose_params_stay_put_publishes_through_the_same_pipe(root):
    """The same run with an unrelated section edited: it publishes, identical transcripts."""
    before = snapshot(root)
    proc = run_editing_params_midway(root, lambda r: set_params(r, binding_train__steps=31))
    assert_outcome(proc, "ok")
    assert_only_changed(root, before, ("params.yaml",))
    assert (root / "data/grounding/chat").is_dir()

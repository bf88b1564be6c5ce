"""Fault cases of training: a diverging run, huge step counts, seeds beyond numpy's range and a full
disk, each through the real command in a copy of the tiny run (binding, seed 0: 30 steps)."""

from __future__ import annotations

import importlib
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from faults import assert_only_changed, assert_outcome, fault_copy, run_command, set_params, snapshot
from refusals import assert_names, key_of

RUN0, SCRATCH0, LLC0 = "data/binding/runs/seed0", "data/scratch/binding/seed0", "data/binding/llc/seed0.parquet"
DISK_FULL = 'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'


def line_naming(stderr: str, start: str, says: str) -> str:
    """The first line of `stderr` that holds `start` (error:, warning: ...) and names `says`."""
    lines = [line for line in stderr.splitlines() if start in line and says in line]
    assert lines, f"no {start!r} line names {says!r}:\n{stderr[-3000:]}"
    return lines[0]


@pytest.fixture
def root(tiny_run, tmp_path) -> Path:
    return fault_copy(tiny_run, tmp_path / "run")


def train_seed0(root: Path) -> subprocess.CompletedProcess:
    return run_command(root, "python", "-m", "stages.binding.train", "--seed", "0", timeout=300)


# ---- a loss that goes nan -------------------------------------------------------------------------


def test_a_diverging_run_stops_naming_the_step_and_publishes_nothing(root):
    set_params(root, binding_train__lr=1e6)
    before = snapshot(root)
    proc = train_seed0(root)
    # the section, the loss and its step, and the keys that would change it
    assert_outcome(proc, "error", "binding_train: ")
    line = line_naming(proc.stderr, "error: ", "binding_train: ")
    assert_names(line, "nan", "binding_train.lr", "binding_train.on_nonfinite: continue")
    assert_only_changed(root, before, (SCRATCH0,))  # the published run is the finite one of before
    step = int(re.search(r"step (\d+)", line).group(1))  # the first step named: the one that diverged
    state = root / SCRATCH0 / "resume" / "state.json"
    assert not state.exists() or json.loads(state.read_text())["step"] < step  # never the diverged state


def test_continue_records_the_diverged_step_in_the_run_and_the_binding_report(root):
    set_params(root, binding_train__lr=1e6, binding_train__on_nonfinite="continue")
    before = snapshot(root)
    proc = train_seed0(root)
    assert_outcome(proc, "warning", "binding_train: ")
    losses = pd.read_parquet(root / RUN0 / "metrics.parquet").set_index("step")["loss"].iloc[:-1]  # last: no update
    step = next(s for s, loss in losses.items() if not math.isfinite(loss))  # derived from the logged losses
    line = line_naming(proc.stderr, "warning: ", "binding_train: ")
    assert_names(line, "nan", "on_nonfinite: continue")
    assert int(re.search(r"step (\d+)", line).group(1)) == step
    final = json.loads((root / RUN0 / "step30" / "config.json").read_text())
    assert final["meta"]["diverged_at"] == step
    for cmd in (
        ("stages.binding.trajectory", "--seed", "0"),
        ("stages.binding.llc", "--seed", "0"),
        ("stages.binding.report",),
    ):
        assert_outcome(run_command(root, "python", "-m", *cmd, timeout=300), "ok")
    # the LLC of the checkpoints saved before the divergence only (SGLD on nan weights diverges at once)
    llc_steps = set(pd.read_parquet(root / LLC0)["step"])
    saved = {int(p.name.removeprefix("step")) for p in (root / RUN0).glob("step*")}
    assert llc_steps and llc_steps <= {s for s in saved if s < step}
    assert json.loads((root / "reports/metrics/binding.json").read_text())["diverged_at"] == {"0": step}
    assert (
        f"Seed 0: training diverged at step {step} (the loss was nan or inf"
        in (root / "reports/binding.html").read_text()
    )
    outputs = ("trajectory", "phases", "predictions")
    assert_only_changed(
        root,
        before,
        (RUN0, SCRATCH0, LLC0, "reports/binding.html", "reports/metrics/binding.json")
        + ("reports/plots/binding_trajectory.csv",)
        + tuple(f"data/binding/{name}/seed0.parquet" for name in outputs),
    )


# ---- steps and seeds, up front --------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, key, named",
    [
        (  # tiny: every 10th step, 4 log-spaced (1, 10^4, 10^8, 10^12): 10^11 multiples of 10, step 0, step 1
            dict(binding_train__steps=10**12),
            "binding_train.steps",
            ["1000000000000 steps", "100000000002 checkpoints", "1000000 steps", "10000 checkpoints"],  # and limits
        ),
        (dict(base__seeds=[1, 2**32]), "base.seeds", ["[1, 4294967296]", "4294967295"]),  # the seeds, the limit
    ],
    ids=["steps 10^12", "seed 2^32"],
)
def test_check_refuses_before_the_run(root, changes, key, named):
    set_params(root, **changes)
    before = snapshot(root)
    proc = run_command(root, "python", "-m", "emergence", "check", timeout=120)
    assert_outcome(proc, "error", f"{key}: ")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert key_of(errors[0]) == key
    assert_names(errors[0], *named)
    assert_only_changed(root, before)


def test_a_seed_beyond_numpys_range_stops_the_training_stage_in_one_line(root):
    # listed in params.yaml (an unlisted seed is refused before, as no matrix value): the stage run
    # directly, without `check`, refuses it at its start, by the rule check runs
    set_params(root, base__seeds=[0, 1, 2**32])
    before = snapshot(root)
    proc = run_command(root, "python", "-m", "stages.binding.train", "--seed", str(2**32), timeout=300)
    assert_outcome(proc, "error", "base.seeds: ")
    assert_names(line_naming(proc.stderr, "error: ", "base.seeds: "), "[0, 1, 4294967296]", "4294967295")
    assert_only_changed(root, before)


# ---- a full disk while saving the resume state ----------------------------------------------------


def test_a_full_disk_keeps_the_last_resume_state_and_the_rerun_resumes_from_it(root, monkeypatch, capsys):
    """In process (no seam to fill a disk from outside): the writer fails on the second resume state."""
    import safetensors.torch
    from safetensors import SafetensorError

    real, states = safetensors.torch.save_file, []

    def fill_disk(tensors, filename, *args, **kwargs):
        if filename.endswith("state.safetensors"):
            states.append(filename)
            if len(states) == 2:
                Path(filename).write_bytes(b"half a state")
                raise SafetensorError(DISK_FULL)
        return real(tensors, filename, *args, **kwargs)

    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root))
    for name in [m for m in sys.modules if m == "stages" or m.startswith("stages.")]:
        monkeypatch.delitem(sys.modules, name)  # the copy's stage scripts, as `python -m` would import
    stage = importlib.import_module("stages.binding.train")
    before = snapshot(root)
    monkeypatch.setattr(safetensors.torch, "save_file", fill_disk)
    code = stage.main(["--seed", "0"])
    out, err = capsys.readouterr()
    # the folder, what could not be written and why, the bytes it needs, and that the last state is kept
    assert_outcome(subprocess.CompletedProcess([], code, out, err), "error", f"{SCRATCH0}/resume: ")
    line = line_naming(err, "error: ", f"{SCRATCH0}/resume: ")
    assert line.startswith(f"error: {SCRATCH0}/resume: "), line
    assert_names(line, "resume state", "no space", "needs ", "kept")
    kept = json.loads((root / SCRATCH0 / "resume" / "state.json").read_text())["step"]
    assert_only_changed(root, before, (SCRATCH0,))

    monkeypatch.setattr(safetensors.torch, "save_file", real)  # space freed
    code = stage.main(["--seed", "0"])
    out, err = capsys.readouterr()
    assert_outcome(subprocess.CompletedProcess([], code, out, err), "ok")
    assert f"resuming from step {kept}" in err
    assert_only_changed(root, before)  # the same bits as the uninterrupted run, scratch cleared

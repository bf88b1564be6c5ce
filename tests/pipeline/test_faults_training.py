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

RUN0, SCRATCH0, LLC0 = "data/binding/runs/seed0", "data/scratch/binding/seed0", "data/binding/llc/seed0.parquet"
DISK_FULL = 'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'


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
    assert_outcome(proc, "error", "binding_train: loss is nan at step ")
    assert "binding_train.on_nonfinite: continue" in proc.stderr
    assert_only_changed(root, before, (SCRATCH0,))  # the published run is the finite one of before
    step = int(re.search(r"loss is nan at step (\d+)", proc.stderr).group(1))
    state = root / SCRATCH0 / "resume" / "state.json"
    assert not state.exists() or json.loads(state.read_text())["step"] < step  # never the diverged state


def test_continue_records_the_diverged_step_in_the_run_and_the_binding_report(root):
    set_params(root, binding_train__lr=1e6, binding_train__on_nonfinite="continue")
    before = snapshot(root)
    proc = train_seed0(root)
    assert_outcome(proc, "warning", "binding_train: loss is nan at step ")
    losses = pd.read_parquet(root / RUN0 / "metrics.parquet").set_index("step")["loss"].iloc[:-1]  # last: no update
    step = next(s for s, loss in losses.items() if not math.isfinite(loss))  # derived from the logged losses
    assert f"loss is nan at step {step};" in proc.stderr
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
    "changes, says",
    [
        (  # tiny: every 10th step, 4 log-spaced (1, 10^4, 10^8, 10^12): 10^11 multiples of 10, step 0, step 1
            dict(binding_train__steps=10**12),
            "binding_train.steps: 1000000000000 steps would save 100000000002 checkpoints; "
            "the limits are 1000000 steps and 10000 checkpoints per run",
        ),
        (dict(base__seeds=[1, 2**32]), "base.seeds: seeds are at most 4294967295 (2**32 - 1, numpy's range)"),
    ],
    ids=["steps 10^12", "seed 2^32"],
)
def test_check_refuses_before_the_run(root, changes, says):
    set_params(root, **changes)
    before = snapshot(root)
    proc = run_command(root, "python", "-m", "emergence", "check", timeout=120)
    assert_outcome(proc, "error", says)
    assert len([line for line in proc.stderr.splitlines() if line.startswith("error:")]) == 1
    assert_only_changed(root, before)


def test_a_seed_beyond_numpys_range_stops_the_training_stage_in_one_line(root):
    # listed in params.yaml (an unlisted seed is refused before, as no matrix value): the stage run
    # directly, without `check`, refuses it at its start, by the rule check runs
    set_params(root, base__seeds=[0, 1, 2**32])
    before = snapshot(root)
    proc = run_command(root, "python", "-m", "stages.binding.train", "--seed", str(2**32), timeout=300)
    assert_outcome(proc, "error", "base.seeds: seeds are at most 4294967295 (2**32 - 1, numpy's range)")
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
    assert_outcome(subprocess.CompletedProcess([], code, out, err), "error", "cannot write the resume state: no space")
    assert f"error: {SCRATCH0}/resume: cannot write the resume state: no space left on device (needs " in err
    assert "the previous resume state is kept" in err
    kept = json.loads((root / SCRATCH0 / "resume" / "state.json").read_text())["step"]
    assert_only_changed(root, before, (SCRATCH0,))

    monkeypatch.setattr(safetensors.torch, "save_file", real)  # space freed
    code = stage.main(["--seed", "0"])
    out, err = capsys.readouterr()
    assert_outcome(subprocess.CompletedProcess([], code, out, err), "ok")
    assert f"resuming from step {kept}" in err
    assert_only_changed(root, before)  # the same bits as the uninterrupted run, scratch cleared

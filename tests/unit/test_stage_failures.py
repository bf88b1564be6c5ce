"""How every stage fails: unknown params sections refused up front, the stage that wrote a bad artifact
named in the error, SIGTERM unwinding like Ctrl-C (no temporary left behind)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import read_params
from emergence.core.declared import producer_of
from emergence.core.io import PipelineError, atomic_path

ROOT = Path(__file__).parents[2]
SHIPPED = read_params(ROOT / "params.yaml")


@pytest.mark.parametrize(
    "path, stage",
    [
        ("data/binding/programs.parquet", "binding_data"),  # an out as declared
        ("data/binding/runs/seed1/step30/model.safetensors", "binding_train@1"),  # inside a matrix out
        ("data/grounding/gain/mamba4_seed0.parquet", "grounding_gain@mamba4-0"),
        ("reports/metrics/binding.json", "binding_report"),  # a metrics file
        ("data/grounding/chat/session001.cha", "childes_synth"),  # the embedded default corpus
        ("data/user/mine.cha", None),  # the user's input: no stage wrote it
        ("data/binding/runs/seed7/step30", None),  # no such seed in params
    ],
)
def test_the_stage_that_wrote_a_path_is_found_from_the_declaration(path, stage):
    assert producer_of(path, ROOT, SHIPPED) == stage


def _stage(message: str):
    @stage_main
    def main(argv=None):
        start_stage("a test stage", argv)
        raise PipelineError(message)

    return main


def test_an_unreadable_artifact_names_its_stage_and_the_command(capsys):
    assert _stage("data/binding/programs.parquet: wrong schema, missing column 'hops'")([]) == 1
    assert capsys.readouterr().err.strip() == (
        "error: data/binding/programs.parquet: wrong schema, missing column 'hops' "
        "(written by stage binding_data: re-run it with `dvc repro -f -s binding_data`)"
    )
    assert _stage("binding_train.steps: must be >= 1, got 0")([]) == 1  # not a path: no hint
    assert capsys.readouterr().err.strip() == "error: binding_train.steps: must be >= 1, got 0"


def test_a_misspelt_section_stops_a_stage_run_directly(tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text() + "binding_trainn:\n  steps: 3\n")
    assert _stage("never reached")(["--params", str(params)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {params}: binding_trainn: unknown section (did you mean binding_train? known: base")
    assert "never reached" not in err and len(err.splitlines()) == 1


def test_sigterm_unwinds_like_ctrl_c_and_leaves_no_temporary(tmp_path, capsys):
    out = tmp_path / "artifact.txt"

    @stage_main
    def main(argv=None):
        with atomic_path(out) as tmp:
            tmp.write_text("half")
            os.kill(os.getpid(), signal.SIGTERM)  # a scheduler's cancel, mid-write

    before = signal.getsignal(signal.SIGTERM)
    assert main([]) == 130
    assert capsys.readouterr().err.strip() == "error: interrupted; no partial artifact was written"
    assert list(tmp_path.iterdir()) == []  # neither the artifact nor its temporary sibling
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is the stage's only


def test_a_stage_instance_runs_once_per_checkout_and_kill_9_frees_it(tmp_path):
    import subprocess
    import sys
    import time

    from emergence.core.cli import LOCKS, hold_stage_lock

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from emergence.core.cli import hold_stage_lock; "
            f"hold_stage_lock(Path({str(tmp_path)!r}), 'stages.binding.train', ['--seed', '0']); "
            "print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(
            PipelineError,
            match=rf"stages.binding.train --seed 0: already running in this checkout \(pid {holder.pid}\)",
        ):
            hold_stage_lock(tmp_path, "stages.binding.train", ["--params", "other.yaml", "--seed", "0"])
        hold_stage_lock(tmp_path, "stages.binding.train", ["--seed", "1"])  # another instance: free
    finally:
        holder.kill()  # SIGKILL: no cleanup runs, the OS frees the lock
        holder.wait()
    time.sleep(0.1)
    hold_stage_lock(tmp_path, "stages.binding.train", ["--seed", "0"])
    assert (tmp_path / LOCKS).is_dir()

"""logs/stages/<key>.json: written by a stage run as a program, never failing the stage."""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
from types import SimpleNamespace

from conftest import ROOT
from refusals import assert_names

from emergence.core import stage_record
from emergence.core.stage_record import begin, engine_of, finish, record_key

SIX = ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
SIX += ("VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def test_engine_from_environment():
    assert engine_of({"DVC_ROOT": "/x", "DVC_STAGE": "binding_train@0"}) == ("dvc", "binding_train@0")
    assert engine_of(dict.fromkeys(SIX, "2")) == ("snakemake", None)
    assert engine_of({**dict.fromkeys(SIX, "2"), "MKL_NUM_THREADS": "1"}) == ("direct", None)  # a user's own
    assert engine_of({"OMP_NUM_THREADS": "2"}) == ("direct", None)
    assert engine_of({}) == ("direct", None)


def test_key_keeps_only_safe_characters():
    assert record_key("python -m stages.binding.train --seed 0") == "python_-m_stages.binding.train_--seed_0"
    assert record_key("a/b c=d@1") == "a_b_c_d@1"


def test_wall_time_and_fields(tmp_path, monkeypatch):
    record = begin("stages.x", ["--seed", "0"], env={"DVC_STAGE": "x@0"})
    record["_start"] = 1000.0  # the process started at 1000 s; the stage ends at 1002.25 s by a stand-in clock
    monkeypatch.setattr(stage_record, "time", SimpleNamespace(time=lambda: 1002.25))
    path = finish(record, 0, tmp_path)
    assert path == tmp_path / "python_-m_stages.x_--seed_0.json"
    saved = json.loads(path.read_text())
    assert set(saved) == {"command", "stage", "started", "wall_s", "max_rss_mb", "engine", "host", "exit"}
    assert saved["command"] == "python -m stages.x --seed 0" and saved["stage"] == "x@0"
    assert saved["engine"] == "dvc" and saved["exit"] == 0
    assert saved["wall_s"] == 2.25
    # this process's peak plus its largest finished child's (other tests may have run some), KiB -> MiB
    peak_mib = sum(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 1024
    assert abs(saved["max_rss_mb"] - peak_mib) < 5


def test_peak_memory_adds_the_largest_finished_child(tmp_path):
    """A stage that runs a child (a tokenizer, a compiler) peaks at its own memory plus the child's."""
    child = "b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096])"  # 300 MiB, every page touched
    subprocess.run([sys.executable, "-c", child], check=True)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    saved = json.loads(finish(begin("stages.x", [], env={}), 0, tmp_path).read_text())
    assert saved["max_rss_mb"] >= own + 300


def stage_as_program(cwd, *argv: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in SIX and not k.startswith("DVC_")}
    env = {**clean, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", **env}
    return subprocess.run(
        [sys.executable, "-m", "stages.binding.train", *argv], cwd=cwd, env=env, capture_output=True, text=True
    )


def test_failed_stage_records_its_exit(tmp_path):
    proc = stage_as_program(tmp_path, "--seed", "0", "--params", "missing.yaml", DVC_STAGE="binding_train@0")
    assert proc.returncode == 1
    saved = json.loads(
        (tmp_path / "logs/stages/python_-m_stages.binding.train_--seed_0_--params_missing.yaml.json").read_text()
    )
    assert saved["exit"] == 1 and saved["engine"] == "dvc" and saved["stage"] == "binding_train@0"
    assert saved["command"] == "python -m stages.binding.train --seed 0 --params missing.yaml"
    assert math.isfinite(saved["wall_s"])  # measured here: a number (test_wall_time_and_fields checks the sum)
    child_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # >= the stage process's peak
    assert 50 < saved["max_rss_mb"] <= child_peak + 0.1  # torch imported: tens of MiB at least


def test_help_is_a_clean_exit_under_snakemake(tmp_path):
    proc = stage_as_program(tmp_path, "--help", **dict.fromkeys(SIX, "2"))
    assert proc.returncode == 0
    (path,) = (tmp_path / "logs/stages").iterdir()
    saved = json.loads(path.read_text())
    assert saved["exit"] == 0 and saved["engine"] == "snakemake" and saved["stage"] is None


def test_unwritable_log_folder_warns_and_keeps_the_exit_code(tmp_path):
    (tmp_path / "logs").write_text("a file where the folder should be\n")
    proc = stage_as_program(tmp_path, "--help")
    assert proc.returncode == 0
    (said,) = [line for line in proc.stderr.splitlines() if line.startswith("warning: ")]
    assert_names(said, "stage record", "logs/stages/python_-m_stages.binding.train_--help.json")


def test_params_not_utf8_is_one_error_line_with_no_traceback_from_the_exit_hook(tmp_path):
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")  # a declaration for the exit hook to read params against
    (tmp_path / "params.yaml").write_bytes(b"base:\n  seeds: [0]  # caf\xe9\n")  # Latin-1
    proc = stage_as_program(tmp_path, "--seed", "0")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: params.yaml: "), proc.stderr
    assert_names(errors[0], "UTF-8")
    saved = json.loads((tmp_path / "logs/stages/python_-m_stages.binding.train_--seed_0.json").read_text())
    assert saved["exit"] == 1 and saved["undeclared_reads"] is None  # nothing to hold the reads against


def test_in_process_main_writes_no_record(tmp_path, monkeypatch):
    from stages.binding.train import main

    monkeypatch.chdir(tmp_path)
    assert main(["--seed", "0", "--params", "missing.yaml"]) == 1
    assert not (tmp_path / "logs").exists()


def test_process_start_counts_time_before_the_import():
    code = "import time; time.sleep(3); from emergence.core.stage_record import process_start as s; "
    code += "print(time.time() - s())"
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert age >= 3.0  # the three seconds slept before the module existed (and whatever the imports took)

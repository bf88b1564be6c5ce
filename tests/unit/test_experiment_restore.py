"""After `dvc exp run -S key=bad` is refused, params.yaml is put back as the user had it, and only when that
can be told for sure (core/experiment.py); otherwise the keys are named and the file is left alone."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from emergence.core.config import read_params
from emergence.core.experiment import after_refused, replayed, set_params

BASELINE = """\
binding_train:
  steps: 30                  # a comment DVC keeps
  lr: 0.002
  modes: [zero, mean]        # a flow list DVC rewrites as a block
base:
  threads: 2
"""
DVC = ["/venv/bin/python3", "/venv/bin/dvc"]
SET_LR = [[*DVC, "exp", "run", "-S", "binding_train.lr=-1"]]  # the command line of the run, as this stage sees it


def test_the_nearest_dvc_exp_run_gives_the_overrides_by_file():
    argvs = [
        ["/bin/sh", "-c", "python -m stages.params_check"],
        [*DVC, "exp", "run", "-S", "binding_train.lr=-1", "--set-param=base.threads=9", "-Sother.yaml:a.b=1"],
        [*DVC, "exp", "run", "-S", "binding_train.steps=5"],  # further up: not the one running
    ]
    assert set_params(argvs) == {"params.yaml": ["binding_train.lr=-1", "base.threads=9"], "other.yaml": ["a.b=1"]}


@pytest.mark.parametrize("argv", [[*DVC, "repro"], ["python", "-m", "stages.params_check"], [*DVC, "exp", "show"]])
def test_no_overrides_outside_dvc_exp_run(argv):
    assert set_params([argv]) is None


def test_the_replay_is_dvcs_own_rewrite():
    text = replayed(BASELINE, ["binding_train.lr=-1"])
    assert "lr: -1" in text and "# a comment DVC keeps" in text and "- zero" in text
    assert replayed(BASELINE, ["binding_train.lr=-1"]) == text
    assert replayed(BASELINE, ["no.such.key=1"]) is None  # DVC refuses it too


@pytest.fixture
def repo(tmp_path, monkeypatch) -> tuple[Path, str]:
    (tmp_path / "params.yaml").write_text(BASELINE)
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "params.yaml"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "params"], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    return tmp_path, rev


def env_of(root: Path, rev: str) -> dict[str, str]:
    return {"DVC_EXP_BASELINE_REV": rev, "DVC_ROOT": str(root)}


def test_a_clean_file_is_put_back_byte_for_byte(repo):
    root, rev = repo
    (root / "params.yaml").write_text(replayed(BASELINE, ["binding_train.lr=-1"]))
    put_back, line = after_refused(
        "params.yaml", env_of(root, rev), [[*DVC, "exp", "run", "-S", "binding_train.lr=-1"]]
    )
    assert put_back and (root / "params.yaml").read_text() == BASELINE
    assert "binding_train.lr" in line and rev[:7] in line


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (lambda t: t.replace("threads: 2", "threads: 2   # mine"), "edits besides"),  # a comment of the user's
        (lambda t: t.replace("steps: 30", "steps: 31"), "edits besides"),  # a value of the user's
    ],
)
def test_a_file_with_other_edits_is_left_and_the_keys_named(repo, edit, why):
    root, rev = repo
    (root / "params.yaml").write_text(replayed(edit(BASELINE), ["binding_train.lr=-1"]))
    before = (root / "params.yaml").read_text()
    put_back, line = after_refused(
        "params.yaml", env_of(root, rev), [[*DVC, "exp", "run", "-S", "binding_train.lr=-1"]]
    )
    assert not put_back and (root / "params.yaml").read_text() == before
    assert "binding_train.lr" in line and "binding_train.steps" not in line and why in line and rev[:7] in line


def test_the_users_own_bad_edit_is_theirs_to_keep(repo):
    root, rev = repo
    (root / "params.yaml").write_text(BASELINE.replace("lr: 0.002", "lr: -2"))
    assert after_refused("params.yaml", env_of(root, rev), [[*DVC, "exp", "run"]]) == (False, "")
    assert "lr: -2" in (root / "params.yaml").read_text()


def test_a_run_in_dvcs_own_copy_or_without_its_command_line_is_only_named(repo, tmp_path):
    root, rev = repo
    (root / "params.yaml").write_text(replayed(BASELINE, ["binding_train.lr=-1"]))
    argv = [[*DVC, "exp", "run", "-S", "binding_train.lr=-1"]]
    elsewhere = {**env_of(root, rev), "DVC_ROOT": str(tmp_path / "elsewhere")}
    for env, argvs in ((elsewhere, argv), (env_of(root, rev), [])):
        put_back, line = after_refused("params.yaml", env, argvs)
        assert not put_back and "binding_train.lr" in line and "lr: -1" in (root / "params.yaml").read_text()


def test_nothing_is_said_outside_an_experiment(repo):
    root, _ = repo
    (root / "params.yaml").write_text(BASELINE.replace("lr: 0.002", "lr: -2"))
    assert after_refused("params.yaml", {}, [[*DVC, "exp", "run"]]) == (False, "")


@pytest.mark.parametrize("value", ["0.00001", "-0.000001", "3e-4", "1.5E+3"])
def test_a_float_dvc_writes_with_an_exponent_reads_back_as_that_number(tmp_path, value):
    """DVC's -S writes 0.00001 as `1e-05` (YAML 1.2, as DVC reads it); PyYAML alone would read a string."""
    path = tmp_path / "params.yaml"
    path.write_text(replayed(BASELINE, [f"binding_train.lr={value}"]))
    assert read_params(path)["binding_train"]["lr"] == float(value)
    assert read_params(path)["binding_train"]["steps"] == 30 and isinstance(read_params(path)["base"]["threads"], int)

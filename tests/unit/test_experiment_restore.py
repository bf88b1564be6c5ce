"""After `dvc exp run -S key=bad` is refused, params.yaml is put back as the user had it, and only when that
can be told for sure (core/experiment.py); otherwise the keys are named and the file is left alone."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from emergence.core.config import read_params
from emergence.core.experiment import after_refused, baseline_text, replayed, restore, set_params

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


@pytest.mark.parametrize("program", [["dvc"], ["/venv/bin/dvc"], ["python3", "/venv/bin/dvc"], ["python", "-m", "dvc"]])
def test_dvc_is_found_however_it_was_started(program):
    assert set_params([[*program, "exp", "run", "-S", "base.threads=9"]]) == {"params.yaml": ["base.threads=9"]}


@pytest.mark.parametrize(
    "argv",
    [
        [*DVC, "repro"],
        ["python", "-m", "stages.params_check"],
        [*DVC, "exp", "show"],
        ["grep", "-rn", "-e", "dvc", "exp", "run", "-S", "base.threads=9"],  # dvc only an argument of another program
    ],
)
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


def run_with(*overrides: str) -> list[list[str]]:
    """The command lines this stage sees under `dvc exp run -S o1 -S o2 ...`."""
    return [[*DVC, "exp", "run", *(w for o in overrides for w in ("-S", o))]]


def says(line: str, *phrases: str) -> None:
    """`line` is one line holding each of `phrases` as written (its case) and as whole words, not inside longer
    ones (`base.threads` is not said by `base.threadsX`)."""
    assert len(line.strip().splitlines()) == 1, f"not one line: {line!r}"
    unsaid = [p for p in phrases if not re.search(rf"(?<!\w){re.escape(p)}(?!\w)", line)]
    assert not unsaid, f"{unsaid} not said in {line!r}"


def test_the_baseline_is_the_file_as_committed_or_none(repo):
    root, rev = repo
    (root / "params.yaml").write_text("base: {threads: 9}\n")  # the workspace's copy is not the baseline
    assert baseline_text(rev, "params.yaml") == BASELINE
    assert baseline_text(rev, "absent.yaml") is None
    assert baseline_text("0" * 40, "params.yaml") is None


def test_restore_writes_the_text_over_the_file_and_leaves_nothing_beside_it(tmp_path):
    (tmp_path / "params.yaml").write_text("base: {threads: 9}\n")
    restore(BASELINE, tmp_path / "params.yaml")
    assert (tmp_path / "params.yaml").read_text() == BASELINE
    assert [p.name for p in tmp_path.iterdir()] == ["params.yaml"]


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


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("++binding_train.lr=-1", "binding_train.lr"),  # Hydra's prefixes are not part of the key
        ("~base.threads", "base.threads"),
        ("~base", "base"),  # a whole section removed: absent from the file now, still a change
        ("+Xavier_init=true", "Xavier_init"),  # a key's own first letters are
        ("+base.tag='lr=1e-3'", "base.tag"),  # the key ends at the first `=`
    ],
)
def test_each_override_form_is_put_back_by_its_key(repo, override, key):
    root, rev = repo
    (root / "params.yaml").write_text(replayed(BASELINE, [override]))
    put_back, line = after_refused("params.yaml", env_of(root, rev), run_with(override))
    assert put_back and (root / "params.yaml").read_text() == BASELINE
    says(line, key)


def test_without_dvc_root_the_run_is_taken_as_in_the_working_directory(repo):
    root, rev = repo
    (root / "params.yaml").write_text(replayed(BASELINE, ["binding_train.lr=-1"]))
    put_back, _ = after_refused("params.yaml", {"DVC_EXP_BASELINE_REV": rev}, SET_LR)
    assert put_back and (root / "params.yaml").read_text() == BASELINE


def test_the_put_back_line_names_each_key_and_the_short_baseline(repo):
    root, rev = repo
    overrides = ("binding_train.lr=-1", "base.threads=0")
    (root / "params.yaml").write_text(replayed(BASELINE, list(overrides)))
    put_back, line = after_refused("params.yaml", env_of(root, rev), run_with(*overrides))
    assert put_back
    says(line, "params.yaml", "binding_train.lr", "base.threads", rev[:7], "no output was removed")


def test_the_left_line_names_each_key_the_reason_and_the_checkout_to_undo_it(repo):
    root, rev = repo
    overrides = ("binding_train.lr=-1", "base.threads=0")
    (root / "params.yaml").write_text(replayed(BASELINE.replace("steps: 30", "steps: 31"), list(overrides)))
    put_back, line = after_refused("params.yaml", env_of(root, rev), run_with(*overrides))
    assert not put_back
    says(line, "binding_train.lr", "base.threads", "the file held edits", "-S values")
    says(line, f"git checkout {rev[:7]} -- params.yaml", "if you had no other edits", "no output was removed")


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


def test_the_reason_a_run_in_dvcs_own_copy_is_only_named(repo, tmp_path):
    root, rev = repo
    (root / "params.yaml").write_text(replayed(BASELINE, ["binding_train.lr=-1"]))
    _, line = after_refused("params.yaml", {**env_of(root, rev), "DVC_ROOT": str(tmp_path / "elsewhere")}, SET_LR)
    says(line, "binding_train.lr", "this run", "DVC's own copy", "workspace")


def test_the_reason_a_run_without_its_command_line_is_only_named(repo):
    root, rev = repo
    (root / "params.yaml").write_text(replayed(BASELINE, ["binding_train.lr=-1"]))
    _, line = after_refused("params.yaml", env_of(root, rev), [])
    says(line, "binding_train.lr", "the `dvc exp run` command line", "could not be read")


def test_nothing_is_said_outside_an_experiment(repo):
    root, _ = repo
    (root / "params.yaml").write_text(BASELINE.replace("lr: 0.002", "lr: -2"))
    assert after_refused("params.yaml", {}, [[*DVC, "exp", "run"]]) == (False, "")


def test_an_empty_baseline_revision_is_no_experiment(repo):
    root, _ = repo
    (root / "params.yaml").write_text(replayed(BASELINE, ["binding_train.lr=-1"]))
    assert after_refused("params.yaml", {"DVC_EXP_BASELINE_REV": "", "DVC_ROOT": str(root)}, SET_LR) == (False, "")
    assert "lr: -1" in (root / "params.yaml").read_text()


@pytest.mark.parametrize(
    "now",
    [
        b"binding_train: {lr: -1\n",  # not YAML
        b"- binding_train.lr=-1\n",  # YAML, not a mapping
        b"binding_train:\n  lr: -1  # \xe9\n",  # not UTF-8
        BASELINE.encode() + b"# a note of the user's: the same values\n",  # nothing differs from the baseline
    ],
)
def test_nothing_is_said_of_a_file_that_cannot_be_compared_or_did_not_change(repo, now):
    root, rev = repo
    (root / "params.yaml").write_bytes(now)
    assert after_refused("params.yaml", env_of(root, rev), SET_LR) == (False, "")
    assert (root / "params.yaml").read_bytes() == now


def test_nothing_is_said_of_a_missing_file(repo):
    root, rev = repo
    (root / "params.yaml").unlink()
    assert after_refused("params.yaml", env_of(root, rev), SET_LR) == (False, "")
    assert not (root / "params.yaml").exists()


def test_files_are_utf_8_whatever_the_locale(tmp_path, ascii_locale):
    text = "name: caf\u00e9\nlr: 1\n"
    assert replayed(text, ["lr=2"]) == text.replace("lr: 1", "lr: 2")
    restore(text, tmp_path / "params.yaml")
    assert (tmp_path / "params.yaml").read_text(encoding="utf-8") == text


def test_a_non_ascii_baseline_is_read_whatever_the_locale(repo, ascii_locale):
    root, _ = repo
    (root / "params.yaml").write_text(BASELINE + "# caf\u00e9\n", encoding="utf-8")
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "caf"], cwd=root, check=True)
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    assert baseline_text(rev, "params.yaml") == BASELINE + "# caf\u00e9\n"


def test_a_users_non_ascii_edit_is_read_whatever_the_locale(repo, ascii_locale):
    root, rev = repo
    mine = BASELINE.replace("threads: 2", "threads: 2  # caf\u00e9")
    (root / "params.yaml").write_text(replayed(mine, ["binding_train.lr=-1"]), encoding="utf-8")
    put_back, line = after_refused("params.yaml", env_of(root, rev), SET_LR)
    assert not put_back
    says(line, "binding_train.lr", "the file held edits")


@pytest.mark.parametrize("value", ["0.00001", "-0.000001", "3e-4", "1.5E+3"])
def test_a_float_dvc_writes_with_an_exponent_reads_back_as_that_number(tmp_path, value):
    """DVC's -S writes 0.00001 as `1e-05` (YAML 1.2, as DVC reads it); PyYAML alone would read a string."""
    path = tmp_path / "params.yaml"
    path.write_text(replayed(BASELINE, [f"binding_train.lr={value}"]))
    assert read_params(path)["binding_train"]["lr"] == float(value)
    assert read_params(path)["binding_train"]["steps"] == 30 and isinstance(read_params(path)["base"]["threads"], int)

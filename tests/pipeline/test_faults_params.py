"""A bad params value at every door: `emergence check`, the stage run by hand, `dvc repro`, `dvc exp run
-S` and Snakemake each refuse it in one line naming the key, with nothing under data/ or reports/ (nor
dvc.lock) changed, on a copy of the tiny run (binding val split: 20 programs)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from faults import ENV, assert_only_changed, assert_outcome, fault_copy, run_command, snapshot
from forked import run_modules
from params_edits import batches_outside, declared_rules
from refusals import assert_names, assert_refused

from emergence.core.declared import GUARD, instances, interpolate, read_stages

pytestmark = pytest.mark.pipeline

OUTSIDE = "/tmp/emergence-outside-the-checkout/heuristics.json"
# (key, a value just outside its rule, the stage reading it); every entry point below for each
BOUNDS = [
    ("binding_train.steps", 10**12, "binding_train"),  # would train for ever, filling the disk with checkpoints
    ("binding_train.eval_programs", 5000, "binding_train"),  # more than the 20 validation programs
    ("binding_train.lr", -1.0, "binding_train"),
    ("base.threads", 10_000, "binding_data"),  # every stage reads it
    ("dino_features.image_size", 5000, "dino_features"),  # one batch beyond this machine's memory
    ("paths.binding_heuristics", OUTSIDE, "binding_data"),  # an output DVC could not track
    ("binding_model.n_layers", 0, "binding_train"),
]
# the params_check stage's outputs, its stamp and the code digests: DVC runs that stage first, removing them
GUARD_OUTS = ("data/params_checked.txt", "data/code")
ENGINES = ("base.threads", "paths.binding_heuristics")  # also through DVC and Snakemake (the rest: edit0 below)


def set_value(root: Path, key: str, value) -> None:
    params = yaml.safe_load((root / "params.yaml").read_text())
    section, name = key.split(".")
    params[section][name] = value
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def first_instance(root: Path, stage: str) -> tuple[str, list[str], str]:
    """(DVC instance name, its command, its first output) of the first instance of `stage`."""
    params = yaml.safe_load((root / "params.yaml").read_text())
    entry = yaml.safe_load((root / "dvc.yaml").read_text())["stages"][stage]
    name, item = instances(stage, entry, params)[0]
    context = {**params, "item": item}
    outs = interpolate([*entry.get("outs", []), *entry.get("metrics", [])], context, name)
    return name, interpolate(entry["cmd"], context, name).split(), outs[0]


def refused(proc: subprocess.CompletedProcess, key: str) -> None:
    assert_outcome(proc, "error")
    assert_refused([line for line in proc.stderr.splitlines() if line.startswith("error:")], key)


@pytest.fixture
def root(tiny_run, tmp_path) -> Path:
    root = fault_copy(tiny_run, tmp_path / "run")
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "code"], cwd=root, check=True)
    return root


@pytest.mark.parametrize(("key", "value", "stage"), BOUNDS, ids=[k for k, _, _ in BOUNDS])
def test_a_bad_value_is_refused_at_every_door_and_nothing_changes(root, key, value, stage):
    instance, cmd, output = first_instance(root, stage)
    before = snapshot(root)
    if key in ENGINES:  # set by DVC itself: refused before DVC removes the stage's last good outputs
        proc = run_command(root, "dvc", "exp", "run", "-S", f"{key}={value}", instance, timeout=300)
        refused(proc, key)
        assert_only_changed(root, before)  # params.yaml put back as it was, the guard's outputs too
    set_value(root, key, value)
    before = snapshot(root)
    doors = [("python", "-m", "emergence", "check"), tuple(cmd)]
    if key in ENGINES:
        doors += [("dvc", "repro", instance), ("snakemake", "--cores", "1", output)]
    for door in doors:
        refused(run_command(root, *door, timeout=300), key)
    assert_only_changed(root, before, GUARD_OUTS)
    assert not Path(OUTSIDE).exists()


def test_a_gpu_that_is_not_there_is_a_warning_in_check_and_an_error_in_the_stage(root):
    set_value(root, "base.device", "cuda")
    before = snapshot(root)
    proc = run_command(root, "python", "-m", "emergence", "check", timeout=120)
    assert_outcome(proc, "warning", "base.device: cuda, but torch")
    assert "h of training" in proc.stdout  # where the jobs run and the hours, before anything runs
    refused(run_command(root, "python", "-m", "stages.binding.train", "--seed", "0", timeout=300), "base.device")
    assert_only_changed(root, before)


def test_yaml_aliases_are_refused_by_check_and_the_stages(root):
    text = (root / "params.yaml").read_text().replace("binding_train:\n", "binding_train: &train\n", 1)
    (root / "params.yaml").write_text(text + "other: *train\n")
    before = snapshot(root)
    for door in (("python", "-m", "emergence", "check"), ("python", "-m", "stages.binding.data")):
        proc = run_command(root, *door, timeout=120)
        assert_outcome(proc, "error", "anchor &train")
    assert_only_changed(root, before)


def test_a_misspelt_profile_key_is_listed_with_the_profiles_other_problems(root):
    (root / "profiles" / "mine.yaml").write_text("binding_model:\n  n_layerz: 2\nbinding_train:\n  lr: -1.0\n")
    before = snapshot(root)
    proc = run_command(root, "python", "-m", "emergence", "profile", "mine", timeout=120)
    assert_outcome(proc, "error", "profiles/mine.yaml: binding_model.n_layerz: unknown key")
    assert_refused([line for line in proc.stderr.splitlines() if line.startswith("error:")], "binding_train.lr")
    assert_only_changed(root, before)


def test_a_non_utf8_byte_in_params_is_one_line_from_a_stage_run_by_hand(root):
    (root / "params.yaml").write_bytes((root / "params.yaml").read_bytes() + b"# caf\xe9\n")
    before = snapshot(root)
    assert_outcome(run_command(root, "python", "-m", "stages.binding.data", timeout=120), "error", "not UTF-8")
    assert_only_changed(root, before)


EDITS = batches_outside(declared_rules())  # every declared bound, just outside, in two edits


def reader(root: Path, section: str) -> str:
    """The first stage but the guard declaring a key of `section` (base: binding_data, reading base.threads)."""
    stages = read_stages(root).items()
    return next(n for n, s in stages if n != GUARD and section in {str(p).split(".")[0] for p in s.get("params", [])})


@pytest.mark.parametrize("edit", EDITS, ids=[f"edit{i}" for i in range(len(EDITS))])
def test_every_declared_bound_is_refused_at_every_door_with_nothing_changed(root, edit):
    """The table of tests/unit/test_params_guard.py through the engines: each value just outside its bound
    is named by `dvc exp run -S` (params.yaml put back), and once written in params.yaml, by `emergence
    check`, `dvc repro`, Snakemake and the start of the stage reading it, run by hand."""
    before = snapshot(root)
    overrides = [arg for key, value in edit.items() for arg in ("-S", f"++{key}={hydra(value)}")]
    named(run_command(root, "dvc", "exp", "run", *overrides, timeout=600), set(edit))
    assert_only_changed(root, before)
    for key, value in edit.items():
        set_value(root, key, value)
    before = snapshot(root)
    for door in (("python", "-m", "emergence", "check"), ("dvc", "repro"), ("snakemake", "--cores", "1")):
        named(run_command(root, *door, timeout=600), set(edit))
    stages: dict[tuple[str, ...], set[str]] = {}
    for key in edit:  # each stage once, for the keys it reads
        stages.setdefault(tuple(first_instance(root, reader(root, key.split(".")[0]))[1]), set()).add(key)
    assert all(cmd[:2] == ("python", "-m") for cmd in stages)
    procs = run_modules([(root, list(cmd[2:])) for cmd in stages], ENV)  # one interpreter start (tests/forked.py)
    for proc, keys in zip(procs, stages.values()):
        named(proc, keys)
    assert_only_changed(root, before, GUARD_OUTS)


def hydra(value: object) -> str:
    """`value` as DVC's -S (Hydra's grammar) reads it back: a float with its decimal point (-1e-06 is a string)."""
    if not isinstance(value, float):
        return str(value)
    text = f"{value:.9f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def named(proc: subprocess.CompletedProcess, keys: set[str]) -> None:
    assert_outcome(proc, "error")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    for key in sorted(keys):
        assert_refused(errors, key)


def test_dvc_repro_single_item_names_what_dvc_removed_and_checkout_puts_it_back(root):
    """`dvc repro -s` skips the params check that runs first, and with it the refresh of the stage's code
    digest, which holds its params values: a params edit alone leaves the stage as it was (nothing run,
    nothing removed). Forced, DVC removes the stage's outputs before it starts it: the stage still refuses
    at its start, names the outputs gone and the command that restores them from DVC's cache, and that
    command leaves everything as it was."""
    instance, _, output = first_instance(root, "binding_train")
    set_value(root, "binding_train.lr", -1.0)
    before = snapshot(root)
    assert_outcome(run_command(root, "dvc", "repro", "-s", instance, timeout=300), "ok")
    assert_only_changed(root, before)
    proc = run_command(root, "dvc", "repro", "-f", "-s", instance, timeout=300)
    refused(proc, "binding_train.lr")
    assert_names(next(line for line in proc.stderr.splitlines() if "dvc checkout" in line), output, instance)
    assert not (root / output).exists()
    run_command(root, "dvc", "checkout", instance, timeout=300).check_returncode()
    assert_only_changed(root, before)


NAMELESS = [("reprot:\n  n_examples: 5\n", "reprot"), ("? [a, b]\n: 1\n", "params.yaml")]  # a section, a key


@pytest.mark.parametrize(("text", "named"), NAMELESS, ids=["section", "key"])
def test_dvc_repro_refuses_what_no_schema_names_before_removing_anything(root, text, named):
    """A misspelt section changes no value the params check tracks, and a list as a key is no name: the
    check still runs first (it depends on the file whole), and stops DVC before any stage reading the
    file whole removes its outputs."""
    (root / "params.yaml").write_text((root / "params.yaml").read_text() + text)
    before = snapshot(root)
    proc = run_command(root, "dvc", "repro", timeout=600)
    assert_outcome(proc, "error", named)
    assert_only_changed(root, before, GUARD_OUTS)

"""How every stage fails: unknown params sections refused up front, the stage that wrote a bad artifact
named in the error, SIGTERM unwinding like Ctrl-C (no temporary left behind)."""

from __future__ import annotations

import copy
import errno
import importlib
import os
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from refusals import assert_names, assert_refused, refuses

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import read_params
from emergence.core.declared import instance_of_module, producer_of
from emergence.core.io import PipelineError, atomic_path, write_text
from emergence.core.profile import merge_into

ROOT = Path(__file__).parents[2]
SHIPPED = read_params(ROOT / "params.yaml")


@pytest.mark.parametrize(
    "path, stage",
    [
        ("data/binding/programs.parquet", "binding_data"),  # an out as declared
        ("data/binding/runs/seed0/step30/model.safetensors", "binding_train@0"),  # inside a matrix out
        ("data/grounding/gain/mamba4_seed0.parquet", "grounding_gain@mamba4-0"),
        ("reports/metrics/binding.json", "binding_report"),  # a metrics file
        ("reports/metrics/headlines.json", "index_report"),  # declared under metrics:, not outs:
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
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: data/binding/programs.parquet: wrong schema, missing column 'hops'")  # as raised
    assert_names(err, "binding_data", "`dvc repro -f -s binding_data`")  # the stage that wrote it, and how to rerun it
    assert _stage("binding_train.steps: must be >= 1, got 0")([]) == 1  # not a path: no hint
    assert capsys.readouterr().err.strip() == "error: binding_train.steps: must be >= 1, got 0"


def test_the_stage_that_wrote_an_artifact_is_found_in_the_params_file_the_stage_was_given(
    tmp_path, monkeypatch, capsys
):
    """Run with --params mine.yaml (and no params.yaml where it runs), the artifact's producer is found
    from mine.yaml's paths, where the artifact is."""
    params = read_params(ROOT / "params.yaml")
    params["paths"]["binding_programs"] = "data/mine/programs.parquet"
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    assert _stage("data/mine/programs.parquet: wrong schema")(["--params", "mine.yaml"]) == 1
    assert_names(capsys.readouterr().err.strip(), "stage binding_data", "`dvc repro -f -s binding_data`")


def test_a_misspelt_section_stops_a_stage_run_directly(tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text() + "binding_trainn:\n  steps: 3\n")
    assert _stage("never reached")(["--params", str(params)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {params}: ")
    assert_names(err, "binding_trainn", "binding_train?", "base")  # the section, the one it may mean, those known
    assert_refused([err], "binding_trainn", rule="unknown section")
    assert "never reached" not in err


def test_sigterm_unwinds_like_ctrl_c_and_leaves_no_temporary(tmp_path, capsys):
    out = tmp_path / "artifact.txt"

    @stage_main
    def main(argv=None):
        with atomic_path(out) as tmp:
            tmp.write_text("half")
            os.kill(os.getpid(), signal.SIGTERM)  # a scheduler's cancel, mid-write

    before = signal.getsignal(signal.SIGTERM)
    assert main([]) == 130
    assert_names(capsys.readouterr().err.strip(), "error: ", "interrupted")
    assert list(tmp_path.iterdir()) == []  # neither the artifact nor its temporary sibling
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is the stage's only


def test_an_output_on_a_read_only_mount_is_one_error_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text((ROOT / "params.yaml").read_text())  # where the stage that writes it is found
    Path("reports").mkdir()

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(args[0]))

    @stage_main
    def main(argv=None):
        monkeypatch.setattr(os, "mkdir", read_only)  # after the stage's start: its lock folder is elsewhere
        write_text("<html>", "reports/index.html")

    assert main([]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: reports/index.html: "), lines
    assert "Read-only file system" in lines[0] and "dvc repro" not in lines[0]  # no stage to re-run for this
    assert sorted(tmp_path.rglob("*")) == [tmp_path / "params.yaml", tmp_path / "reports"]


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
        with refuses("stages.binding.train --seed 0", "already running", f"(pid {holder.pid})"):
            hold_stage_lock(tmp_path, "stages.binding.train", ["--params", "other.yaml", "--seed", "0"])
        hold_stage_lock(tmp_path, "stages.binding.train", ["--seed", "1"])  # another instance: free
    finally:
        holder.kill()  # SIGKILL: no cleanup runs, the OS frees the lock
        holder.wait()
    time.sleep(0.1)
    hold_stage_lock(tmp_path, "stages.binding.train", ["--seed", "0"])
    assert (tmp_path / LOCKS).is_dir()


@pytest.mark.parametrize("make", [lambda p: p.write_text("x"), lambda p: p.symlink_to(p.parent / "nowhere")])
def test_a_file_where_the_lock_folder_goes_is_one_line_naming_it(make, tmp_path):
    from emergence.core.cli import LOCKS, hold_stage_lock

    make(tmp_path / LOCKS)
    with refuses(tmp_path / LOCKS, "folder"):
        hold_stage_lock(tmp_path, "stages.binding.train", ["--seed", "0"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCKS]  # nothing else made, the file left alone


# ---- the stage instance a command runs, and params edited under it ---------------------------------


@pytest.mark.parametrize(
    "module, argv, says",
    [
        ("stages.binding.train", ["--seed", "7"], "--seed 7: not a value of base.seeds [0] in params.yaml"),
        (
            "stages.binding.aid_train",
            ["--aid", "no_gpu", "--seed", "1"],
            "--aid no_gpu: not a value of binding_aids.aids [] in params.yaml",
        ),
        (
            "stages.binding.aid_eval",
            ["--aid", "plain", "--seed", "0"],  # the default trains no variant (opt-in)
            "--aid plain: not a value of binding_aids.aids [] in params.yaml",
        ),
        (
            "stages.assoc.train",
            ["--layers", "2", "--seed", "0"],
            "--layers 2: not a value of assoc_runs.layers [1, 3] in params.yaml",
        ),
        (  # one script, two stages: the childes setting is grounding_train's, held to its models
            "stages.grounding.train",
            ["--setting", "childes", "--model", "gpt9", "--seed", "0"],
            "--model gpt9: not a value of grounding_runs.models [transformer4, mamba4, lstm4] in params.yaml",
        ),
        (
            "stages.grounding.train",
            ["--setting=audio", "--model", "transformer4", "--seed", "0"],
            "--setting audio: not a value of visual_runs.settings [caption, image] in params.yaml",
        ),
    ],
)
def test_a_stage_run_by_hand_with_a_value_params_does_not_list_is_refused(
    module, argv, says, tmp_path, monkeypatch, capsys
):
    """It would write an output that no engine tracks (nor `dvc status` reports)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    assert importlib.import_module(module).main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {says} (stage ") and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]  # not even its lock


def test_a_stage_is_known_by_its_own_module_through_frames_that_wrap_start_stage(tmp_path, monkeypatch, capsys):
    """`make mutation` wraps each mutated function in a trampoline of mutmut's, a frame of its own between
    the stage and start_stage: the stage is still the caller, not the trampoline's module."""
    from stages.binding import train

    wrapper = {"__name__": "mutmut.trampoline", "start_stage": train.start_stage}
    exec("def wrapped(*args, **kwargs):\n    return start_stage(*args, **kwargs)\n", wrapper)
    monkeypatch.setattr(train, "start_stage", wrapper["wrapped"])
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    assert train.main(["--seed", "7"]) == 1
    assert_names(capsys.readouterr().err, "--seed 7", "base.seeds", "stage binding_train ")


def test_the_instance_of_a_shared_script_is_the_one_its_flags_name():
    caption = instance_of_module(
        "stages.grounding.train", ROOT, ["--setting", "caption", "--model", "transformer4", "--seed", "1"], SHIPPED
    )
    assert caption.name == "visual_train@caption-transformer4-1" and caption.reads.stage == "visual_train"
    run = "${paths.visual_runs}/${item.setting}_${item.model}_seed${item.seed}"  # as pipeline.yaml names it
    assert caption.outs == {"data/visual/runs/caption_transformer4_seed1": run}
    assert caption.untracked == ("data/scratch/visual",)
    assert caption.params == (
        "base.threads",
        "base.device",
        "base.precision",
        "base.compile",
        "base.compile_mode",
        "grounding_models.transformer4",
        "visual_train",
    )
    childes = instance_of_module(
        "stages.grounding.train", ROOT, ["--setting", "childes", "--model", "lstm4", "--seed", "1"], SHIPPED
    )
    assert childes.name == "grounding_train@lstm4-1" and list(childes.outs) == ["data/grounding/runs/lstm4_seed1"]
    assert list(instance_of_module("stages.binding.report", ROOT, [], SHIPPED).outs) == [
        "reports/binding.html",
        "reports/plots/binding_trajectory.csv",
        "reports/metrics/binding.json",
    ]
    index = instance_of_module("stages.index_report", ROOT, [], SHIPPED).outs  # metrics: are its outputs too
    assert index == {
        "reports/index.html": "${paths.index_report}",
        "reports/metrics/headlines.json": "${paths.headline_metrics}",
    }


def test_a_run_two_stages_list_is_one_instance_named_for_the_stage_it_reads_as(tmp_path):
    """One module, two stages whose matrices both list the value run: its name and its reads are those of one
    stage, its outputs those of both (either engine may have written them)."""
    cmd = "python -m stages.s --seed ${item.seed}"
    decl = {
        "stages": {
            "a": {"matrix": {"seed": "${s.seeds}"}, "cmd": cmd, "params": ["s"], "outs": ["a/${item.seed}"]},
            "b": {"matrix": {"seed": [0]}, "cmd": cmd, "params": ["t"], "outs": ["b/${item.seed}"]},
        }
    }
    (tmp_path / "pipeline.yaml").write_text(yaml.safe_dump(decl))
    params = {"s": {"seeds": [0, 1]}, "t": {}}
    both = instance_of_module("stages.s", tmp_path, ["--seed", "0"], params)
    assert both.name.partition("@") == (both.reads.stage, "@", "0")
    assert list(both.outs) == ["a/0", "b/0"] and both.reads.sections == {"base", "s", "t"}
    one = instance_of_module("stages.s", tmp_path, ["--seed", "1"], params)
    assert one.name == "a@1" and list(one.outs) == ["a/1"] and one.reads.sections == {"base", "s"}


def test_a_run_is_an_instance_of_the_stage_whose_fixed_flags_it_gives_as_written(tmp_path):
    decl = {
        "stages": {
            "c": {"cmd": "python -m stages.s --corpus childes", "outs": ["c.txt"]},
            "v": {"cmd": "python -m stages.s --corpus visdial", "outs": ["v.txt"]},
        }
    }
    (tmp_path / "pipeline.yaml").write_text(yaml.safe_dump(decl))
    assert instance_of_module("stages.s", tmp_path, ["--corpus", "visdial"], {}).name == "v"
    assert instance_of_module("stages.s", tmp_path, ["--corpus=childes"], {}).name == "c"
    assert instance_of_module("stages.s", tmp_path, [], {}) is None  # no stage runs it without --corpus
    assert instance_of_module("stages.s", tmp_path, ["--corpus", "audio"], {}) is None


@pytest.fixture
def tiny_workspace(tmp_path, monkeypatch) -> Path:
    """A folder holding only params.yaml at the tiny profile, the working directory."""
    params = read_params(ROOT / "params.yaml")
    merge_into(params, yaml.safe_load((ROOT / "profiles" / "tiny.yaml").read_text()))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def edit_params(path: Path, dotted: str, value) -> None:
    params = yaml.safe_load(path.read_text())
    *parents, key = dotted.split(".")
    node = params
    for name in parents:
        node = node[name]
    node[key] = value
    path.write_text(yaml.safe_dump(params, sort_keys=False))


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for top in ("data", "reports")
        for p in (root / top).rglob("*")
        if p.is_file()
    }


@pytest.mark.parametrize(
    "dotted, value, changed",
    [
        ("binding_data.n_programs", 401, True),  # a key of a section the stage declares
        ("base.threads", 3, True),  # declared for every stage
        ("binding_train.steps", 99, False),  # another stage's section
        ("binding_data.added", 1, True),  # a key added to a declared section: DVC records it too
    ],
)
def test_params_edited_while_a_stage_runs_fail_it_and_publish_nothing(
    tiny_workspace, monkeypatch, capsys, dotted, value, changed
):
    """DVC reads params when it saves dvc.lock: it would record the edited values for outputs built with
    the old ones, and `dvc status` would call them up to date."""
    from stages.binding import data

    assert data.main([]) == 0  # an earlier run: its outputs must stay as they are
    before = files(tiny_workspace)
    capsys.readouterr()
    write_json = data.write_json

    def edit_then_write(obj, path):  # after programs.parquet was written, before the heuristics
        edit_params(tiny_workspace / "params.yaml", dotted, value)
        write_json(obj, path)

    monkeypatch.setattr(data, "write_json", edit_then_write)
    code = data.main([])
    err = capsys.readouterr().err.strip().splitlines()
    if not changed:
        assert code == 0 and files(tiny_workspace) == before  # same params, same bytes
        return
    assert code == 1 and files(tiny_workspace) == before
    assert err[-1] == (
        f"error: params.yaml: {dotted} changed while stage binding_data ran; its outputs were built with the old "
        "values and are not published (the earlier ones are kept): run it again"
    )
    assert not list(tiny_workspace.rglob(".*.tmp"))


def dvc_lock_of(root: Path, stage: str, outs: list[str]) -> None:
    lock = {"schema": "2.0", "stages": {stage: {"cmd": "x", "outs": [{"path": o, "md5": "0"} for o in outs]}}}
    (root / "dvc.lock").write_text(yaml.safe_dump(lock))


def test_outputs_dvc_removed_before_its_own_stage_ran_are_named(tmp_path, monkeypatch):
    """`dvc repro -s` removes a stage's outputs before it runs it: a refusal then names those it removed
    (recorded in dvc.lock, gone now), only when DVC runs that very stage."""
    from emergence.core.cli import removed_by_dvc

    monkeypatch.chdir(tmp_path)
    dvc_lock_of(tmp_path, "binding_data", ["data/gone.parquet", "data/here.json"])
    (tmp_path / "data").mkdir()
    (tmp_path / "data/here.json").write_text("{}")
    stage = SimpleNamespace(name="binding_data")
    (line,) = removed_by_dvc(stage, {"DVC_STAGE": "binding_data"})
    assert line.split(": ", 1)[0] == "data/gone.parquet"  # the one gone, not the one still there
    assert_names(line, "`dvc checkout binding_data`")
    assert removed_by_dvc(stage, {"DVC_STAGE": "binding_train@0"}) == []  # DVC runs another stage
    assert removed_by_dvc(stage, {}) == []  # not DVC


def test_a_stage_dvc_runs_with_good_params_is_not_refused_for_the_outputs_dvc_removed(tmp_path, monkeypatch):
    from emergence.core.cli import refuse_bad_params

    monkeypatch.chdir(tmp_path)
    dvc_lock_of(tmp_path, "binding_data", ["data/binding/programs.parquet"])  # removed, as DVC always does
    monkeypatch.setenv("DVC_STAGE", "binding_data")
    refuse_bad_params(SHIPPED, instance_of_module("stages.binding.data", ROOT, [], SHIPPED))  # no refusal
    bad = copy.deepcopy(SHIPPED)
    bad["binding_data"]["n_programs"] = 0
    with pytest.raises(PipelineError) as caught:
        refuse_bad_params(bad, instance_of_module("stages.binding.data", ROOT, [], bad))
    lines = str(caught.value).split("\nerror: ")
    assert_refused(lines, "binding_data.n_programs", 0)
    assert lines[-1].split(": ", 1)[0] == "data/binding/programs.parquet"  # and what DVC removed


def test_a_stage_run_replaces_its_own_folder_output(tmp_path, monkeypatch):
    """Other instances' outputs keep a folder from being replaced; the stage's own output is no such one."""
    from emergence.core.cli import hold_writes
    from emergence.core.io import stage_writes

    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    instance = instance_of_module("stages.binding.train", ROOT, ["--seed", "0"], SHIPPED)
    out = Path(next(iter(instance.outs)))  # data/binding/runs/seed0, a folder
    out.mkdir(parents=True)
    (out / "old").write_text("old")
    with stage_writes():
        hold_writes(instance, SHIPPED, "params.yaml")
        with atomic_path(out) as tmp:
            tmp.mkdir()
            (tmp / "new").write_text("new")
    assert [p.name for p in out.iterdir()] == ["new"]

"""The params rules at every door: what a stage refuses at start (the sections and paths it reads),
the params_check stage every other stage depends on, and the rules added for them (threads against the
CPUs, a GPU that is not there, outputs outside the checkout, YAML anchors and aliases)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
import torch
import yaml
from conftest import ROOT, SOURCES, project_copy, run
from params_edits import SHIPPED, declared_rules, edited
from refusals import assert_not_refused, assert_refused, refuses

from emergence import check, machine
from emergence.check import problems_of, stage_problems
from emergence.core import config
from emergence.core.config import read_params
from emergence.core.declared import GUARD, completed, digest_dep, read_stages
from emergence.core.io import PipelineError
from emergence.core.pipeline import module_file, read_declaration
from emergence.machine import missing_device, where_it_runs
from emergence.paths_rules import outputs_stay_in_the_checkout

TRAIN_SECTIONS = {"base", "binding_programs", "binding_model", "binding_train"}  # binding_train@0's reads


def train_stage(params: dict) -> list[str]:
    return stage_problems(params, ROOT, TRAIN_SECTIONS, {"binding_programs", "binding_runs", "binding_scratch"})


# ---- what a stage refuses at its start ---------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, key, value",
    [
        (dict(binding_train__eval_programs=5000), "binding_train.eval_programs", 5000),  # spans binding_data's split
        (dict(binding_train__steps=10**12), "binding_train.steps", 10**12),
        (dict(binding_train__lr=-1.0), "binding_train.lr", -1.0),
        (dict(base__seeds=[0, 2**32]), "base.seeds", 2**32),
    ],
    ids=["eval beyond val split", "steps 10^12", "negative lr", "seed beyond numpy"],
)
def test_a_stage_refuses_what_check_refuses_in_the_sections_it_reads(changes, key, value):
    params = edited(**changes)
    assert_refused(problems_of(params, root=ROOT), key, value)
    assert_refused(train_stage(params), key, value)


def test_a_stage_is_not_refused_for_a_section_it_does_not_read():
    params = edited(grounding_train__lr=-1.0, dino_features__image_size=50_000)
    lines = train_stage(params)
    assert lines == []
    assert_refused(problems_of(params, root=ROOT), "grounding_train.lr", -1.0)  # check still lists it


def test_a_stage_checks_only_the_paths_it_uses(tmp_path):
    outside = str(tmp_path / "elsewhere.json")
    params = copy.deepcopy(SHIPPED)
    params["paths"]["assoc_report"] = outside  # not among binding_train's paths
    assert train_stage(params) == []
    params["paths"]["binding_runs"] = str(tmp_path / "runs")
    assert_refused(train_stage(params), "paths.binding_runs", tmp_path / "runs")


def test_the_cross_section_checks_name_the_sections_they_read():
    for cross in check.CROSS_CHECKS:
        assert isinstance(cross.sections, frozenset), cross.__name__
        assert cross.sections <= set(SHIPPED), (cross.__name__, cross.sections - set(SHIPPED))


# ---- rules the stages needed ------------------------------------------------------------------------


def test_threads_are_bounded_by_the_cpus_this_process_may_use(monkeypatch):
    monkeypatch.setattr(config, "usable_cpus", lambda: 3)
    most = config.OVERSUBSCRIBE * 3
    assert_not_refused(problems_of(edited(base__threads=most), root=ROOT), "base.threads")
    assert_refused(problems_of(edited(base__threads=most + 1), root=ROOT), "base.threads", most + 1)
    assert_refused(problems_of(edited(base__threads=10_000), root=ROOT), "base.threads", 10_000)


@pytest.mark.parametrize(
    "text, mark",
    [
        ("base: &b\n  seeds: [0]\nother: *b\n", "&b"),
        ("base:\n  seeds: &s [0]\nbinding_data:\n  seeds: *s\n", "&s"),
        ("a: [1]\nb: *x\n", "*x"),  # an alias without its anchor is refused as one too
    ],
)
def test_anchors_and_aliases_are_refused_where_params_are_read(tmp_path, text, mark):
    path = tmp_path / "params.yaml"
    path.write_text(text)
    with pytest.raises(PipelineError) as refused:
        read_params(path)
    assert str(refused.value).startswith(str(path)) and mark in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_billion_laughs_is_refused_at_its_first_anchor(tmp_path):
    lines = ["a0: &a0 [x, x]"] + [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]" for i in range(1, 30)]
    path = tmp_path / "params.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(PipelineError, match="line 1"):
        read_params(path)


def test_outputs_must_resolve_inside_the_checkout_and_inputs_may_lie_anywhere(tmp_path):
    params = copy.deepcopy(SHIPPED)
    assert outputs_stay_in_the_checkout(params, SOURCES) == []
    params["paths"]["binding_heuristics"] = str(tmp_path / "heuristics.json")  # an output (a metric)
    params["paths"]["binding_scratch"] = "../scratch"  # a stage's untracked state: written too
    params["paths"]["binding_report"] = "data/../reports/binding.html"  # inside, however it is written
    params["paths"]["binding_programs"] = "README.md"  # inside, but the project's own: git tracks it
    params["paths"]["grounding_runs"] = "src/emergence"  # a folder of tracked files
    params["paths"]["visual_runs"] = ".dvc/cache"
    params["paths"]["assoc_report"] = "."  # the checkout itself
    lines = outputs_stay_in_the_checkout(params, SOURCES)
    keys = [
        "binding_heuristics",
        "binding_scratch",
        "binding_programs",
        "grounding_runs",
        "visual_runs",
        "assoc_report",
    ]
    assert sorted(line.split(":")[0] for line in lines) == sorted(f"paths.{k}" for k in keys)
    params = copy.deepcopy(SHIPPED)
    params["dino_features"]["local_dir"] = str(tmp_path)  # an input: anywhere
    assert outputs_stay_in_the_checkout(params, SOURCES) == []


def test_an_output_whose_name_only_begins_a_tracked_files_name_holds_none_of_them():
    """A folder holds what lies below it: `docs/bench` is not `docs/bench.md`, `src/emerg` not `src/emergence/`."""
    params = copy.deepcopy(SHIPPED)
    params["paths"]["binding_heuristics"] = "docs/bench"  # beside the tracked docs/bench.md
    params["paths"]["grounding_runs"] = "src/emerg"  # beside the tracked src/emergence/
    assert outputs_stay_in_the_checkout(params, SOURCES) == []
    params["paths"]["grounding_runs"] = "src"  # the folder holding them
    assert [line.split(":")[0] for line in outputs_stay_in_the_checkout(params, SOURCES)] == ["paths.grounding_runs"]


def test_a_paths_key_no_stage_names_is_a_misspelling_and_one_it_names_is_required():
    params = copy.deepcopy(SHIPPED)
    params["paths"]["childes_sorce"] = "data/user/eve"  # beside the real one: the stage would read the default
    assert_refused(problems_of(params, root=ROOT), "paths.childes_sorce", rule="childes_source?")
    del params["paths"]["childes_source"]
    assert_refused(problems_of(params, root=ROOT), "paths.childes_source", rule="childes_extract")
    assert_refused(stage_problems(params, ROOT, {"childes_extract"}, {"childes_source"}), "paths.childes_source")


@pytest.mark.parametrize(
    ("key", "value", "other", "how"),
    [
        ("binding_heuristics", "reports/metrics/binding.json", "binding_metrics", "is also"),  # two stages' one file
        ("binding_scratch", "data/binding/runs", "binding_runs", "is also"),  # cleared after a run: the runs go
        ("binding_scratch", "data/binding/runs/tmp", "binding_runs", "lies inside"),
        ("binding_scratch", "data/binding", "binding_runs", "holds"),
    ],
)
def test_two_paths_keys_stages_write_name_different_places_neither_inside_the_other(key, value, other, how):
    params = edited(**{f"paths__{key}": value})
    problems = problems_of(params, root=ROOT)
    assert_refused(problems, f"paths.{key}", value, rule=f"{how} paths.{other}")
    assert_refused(problems, f"paths.{other}")  # either stage, started alone, refuses
    assert_refused(stage_problems(params, ROOT, {"binding_train"}, {key}), f"paths.{key}")
    assert problems_of(SHIPPED, root=ROOT) == []


def test_the_params_rules_load_without_torch_at_every_door():
    """`emergence check`, the guard stage's rules and thread count, and the Snakefile's start compute nothing
    with torch: importing it cost each of those processes ~1.3 s. A stage that loads torch later gets the
    thread count params give."""
    snakefile = [line for line in (ROOT / "Snakefile").read_text().splitlines() if line.startswith("from emergence")]
    code = "\n".join(
        [
            "import sys",
            "from emergence.check import main",
            f"assert main([{str(ROOT / 'params.yaml')!r}, '--root', {str(ROOT)!r}, '--estimate', 'none']) == 0",
            "from emergence.core.config import set_threads",
            "set_threads(1)",
            *snakefile,
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))",
            "import torch",
            "print(torch.get_num_threads())",
        ]
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-2:] == ["[]", "1"]


def test_a_gpu_that_is_not_there_is_named(monkeypatch):
    monkeypatch.setattr(machine, "visible_gpu", lambda: None)
    assert missing_device(edited(base__device="cuda")).startswith("base.device: cuda")
    assert missing_device(edited(base__device="auto")) is None
    assert_refused(train_stage(edited(base__device="cuda")), "base.device", "cuda")
    monkeypatch.setattr(machine, "visible_gpu", lambda: torch.cuda)
    assert missing_device(edited(base__device="cuda")) is None


def test_check_says_where_the_jobs_run_and_the_hours_before_anything_runs(monkeypatch):
    monkeypatch.setattr(machine, "visible_gpu", lambda: None)
    paper = copy.deepcopy(SHIPPED)
    from emergence.core.profile import merge_into, profile_path

    assert merge_into(paper, read_params(profile_path("paper"))) == []
    line, warning = where_it_runs(paper, ROOT)
    assert line.startswith("base.device cuda: cuda (no GPU")
    hours = float(line.split("estimates ")[1].split(" h")[0].replace(",", ""))
    default = float(where_it_runs(SHIPPED, ROOT)[0].split("estimates ")[1].split(" h")[0].replace(",", ""))
    assert hours > 10 * default > 0  # the paper's steps and widths, not the default's
    assert warning.startswith("warning: base.device: cuda")


# ---- the params_check stage: first in every DVC run ------------------------------------------------------


def test_the_guard_stage_reads_every_section_and_every_stage_depends_on_its_own_digest_from_it():
    stages = read_stages(ROOT)
    guard = stages[GUARD]
    assert guard["params"] == list(read_declaration(ROOT)["schemas"])
    assert guard["outs"] == ["${paths.params_checked}", "${paths.code_digests}"]
    # DVC tracks params.yaml as its file dep, whose hash covers every section: dvc.lock holds no copy of the values
    rendered = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"][GUARD]
    assert "params" not in rendered and "params.yaml" in rendered["deps"]
    for name, stage in stages.items():
        if name != GUARD:
            assert stage["deps"][0] == digest_dep(name, stage), name
            assert digest_dep(name, stage).startswith(guard["outs"][1] + "/")  # DVC runs the guard first


def test_a_declaration_without_the_guard_stage_is_left_as_written():
    decl = {"stages": {"a": {"cmd": "python -m stages.a", "deps": ["x"]}}, "schemas": {"s": "m:S"}}
    assert completed(decl) == decl


def test_every_module_a_schema_names_lies_in_a_code_folder_the_guard_stage_depends_on():
    deps = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"][GUARD]["deps"]
    for ref in read_declaration(ROOT)["schemas"].values():
        file = module_file(ref.partition(":")[0], ROOT)
        assert file is not None and any(file.is_relative_to(ROOT / d) for d in deps), ref


# ---- every declared bound, just outside, at check and at the start of the stage reading it ----------------


BOUNDED = declared_rules()


def reader_of(section: str) -> set[str]:
    """The sections the first stage declaring `section` reads."""
    stage = next(
        s for s in read_stages(ROOT).values() if section in {str(p).split(".")[0] for p in s.get("params", [])}
    )
    return {str(p).split(".")[0] for p in ["base.threads", *stage.get("params", [])]}


def test_the_table_holds_the_bounds_of_base_and_every_training_section():
    keys = {f"{s}.{k}" for s, k, _ in BOUNDED}
    assert {"base.threads", "binding_train.lr", "grounding_train.steps", "visual_train.batch_size"} <= keys


@pytest.mark.parametrize(("section", "key", "value"), BOUNDED, ids=[f"{s}.{k}={v}" for s, k, v in BOUNDED])
def test_a_value_just_outside_a_declared_bound_is_refused_by_check_and_the_stage(section, key, value):
    params = copy.deepcopy(SHIPPED)
    params[section][key] = value
    assert_refused(problems_of(params, root=ROOT), f"{section}.{key}")
    assert_refused(stage_problems(params, ROOT, reader_of(section), set()), f"{section}.{key}")


def test_a_stage_run_by_hand_refuses_at_its_start_before_reading_any_input(tmp_path):
    """No programs exist in a fresh copy: a stage that did not check its params first would stop on the
    missing file instead; this one names the bound, and writes nothing."""
    root = project_copy(tmp_path / "copy")
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["binding_train"]["steps"] = 10**12
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    proc = run([sys.executable, "-m", "stages.binding.train", "--seed", "0"], root, check=False)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert_refused(errors, "binding_train.steps", 10**12)
    assert not (root / "data/binding/runs/seed0").exists() and not (root / "data/scratch").exists()


# ---- files that are not what a params reader expects ------------------------------------------------


@pytest.mark.parametrize("key", ["[a, b]", "{a: 1}"])
def test_a_key_that_is_not_a_name_is_one_line_naming_the_line(tmp_path, key):
    path = tmp_path / "params.yaml"
    path.write_text(f"base:\n  seeds: [0]\n? {key}\n: 1\n")
    with refuses(str(path), "line 3"):
        read_params(path)


def test_a_folder_where_a_params_or_profile_file_goes_is_one_line(tmp_path):
    from emergence.core.profile import profile_path

    (tmp_path / "d.yaml").mkdir()
    with refuses(str(tmp_path)):
        read_params(tmp_path)
    with refuses(str(tmp_path / "d.yaml"), "not a file"):
        profile_path(str(tmp_path / "d.yaml"))

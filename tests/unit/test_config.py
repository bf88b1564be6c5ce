"""params.yaml validation: every bad value names its key; profiles merge cleanly."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
import yaml
from conftest import ROOT
from refusals import assert_names, assert_refused, key_of, refuses

from emergence.core import profile
from emergence.core.config import BaseParams, from_dict, load_base, read_params
from emergence.core.io import PipelineError
from emergence.core.models.registry import make_config
from emergence.core.profile import apply_profile, check_problems, merge_into
from emergence.studies.grounding.tokens import model_entry


@dataclasses.dataclass
class Example:
    n: int
    lr: float = 0.1
    mode: Literal["a", "b"] = "a"
    pair: tuple[int, int] = (1, 2)
    clip: float | None = None
    width: int | str = 1  # a union without None: null is no value of it


@pytest.mark.parametrize(
    "values, key, value, rule",
    [
        ({"n": 1, "typo": 2}, "sec.typo", None, "unknown"),
        ({"n": "3"}, "sec.n", "'3'", "integer"),
        ({"n": True}, "sec.n", True, "integer"),
        ({"n": 1, "lr": "fast"}, "sec.lr", "'fast'", "number"),
        ({"n": 1, "mode": "c"}, "sec.mode", "'c'", "a, b"),
        ({"n": 1, "pair": [1]}, "sec.pair", None, "2 items"),
        ({"n": 1, "pair": [1, "x"]}, "sec.pair[1]", "'x'", "integer"),
        ({}, "sec.n", None, "missing"),
        ({"n": 1, "width": None}, "sec.width", None, "integer"),
    ],
)
def test_from_dict_names_the_bad_key(values, key, value, rule):
    with refuses(key) as e:
        from_dict(Example, values, "sec")
    assert_refused([str(e.value)], key, value, rule)


def test_every_problem_of_a_section_is_named_in_one_pass():
    with pytest.raises(PipelineError) as e:
        from_dict(Example, {"n": "x", "typo": 2, "zz": 3, "mode": "c"}, "sec")
    assert sorted(map(key_of, str(e.value).splitlines())) == ["sec.mode", "sec.n", "sec.typo", "sec.zz"]


def test_from_dict_coerces_and_keeps_defaults():
    ex = from_dict(Example, {"n": 2, "lr": 1, "pair": [3, 4], "clip": 0.5}, "sec")
    assert ex == Example(n=2, lr=1.0, pair=(3, 4), clip=0.5)
    assert isinstance(ex.lr, float)


def test_base_section_cross_checks():
    with refuses("base.seeds") as e:
        from_dict(BaseParams, {"seeds": [1, 1]}, "base")
    assert_refused([str(e.value)], "base.seeds", [1, 1], rule="duplicate")
    with refuses("base.device") as e:
        from_dict(BaseParams, {"seeds": [0], "device": "tpu"}, "base")
    assert_refused([str(e.value)], "base.device", "'tpu'", rule="auto, cpu, cuda")


def test_project_params_are_valid():
    params = read_params(ROOT / "params.yaml")
    assert load_base(params).seeds
    assert set(params) >= {"base", "paths", "binding_data", "binding_model", "binding_train", "report"}


def test_invalid_yaml_names_file_and_line(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text("base:\n  seeds: [0\npaths: {}\n")
    with refuses(f"{bad} line 3", "YAML"):  # the line of the unclosed list's end
        read_params(bad)


def test_e_notation_is_a_number_with_or_without_a_sign_as_dvc_reads_it(tmp_path):
    """DVC's -S writes small floats as `-1e-06`; PyYAML alone would read them as strings."""
    path = tmp_path / "params.yaml"
    path.write_text("a:\n  lr: 1e-4\n  shift: -1e-06\n  big: +2.5E+3\n  word: e5\n")
    assert read_params(path) == {"a": {"lr": 1e-4, "shift": -1e-06, "big": 2500.0, "word": "e5"}}


def test_profiles_merge_into_params_keeping_comments(tmp_path):
    params = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    apply_profile(str(ROOT / "profiles" / "paper.yaml"), params)
    merged = yaml.safe_load(params.read_text())
    assert merged["binding_model"]["n_layers"] == 12 and merged["binding_model"]["d_model"] == 512
    assert merged["binding_model"]["conv_kernel"] == 0  # the paper's plain GPT-2, not the default's conv
    assert merged["base"]["seeds"] == [0, 1, 2, 3, 4, 5]
    default_paths = yaml.safe_load((ROOT / "params.yaml").read_text())["paths"]
    # artifacts stay where they are; only the corpora become the user's TinyStories, CHILDES and VisDial + COCO
    sources = ("assoc_source", "childes_source", "visdial_source", "visual_images")
    assert {k: v for k, v in merged["paths"].items() if k not in sources} == {
        k: v for k, v in default_paths.items() if k not in sources
    }
    assert merged["paths"]["assoc_source"].endswith("TinyStories-train.txt")
    assert merged["paths"]["childes_source"] == "data/user/childes"
    assert (
        merged["paths"]["visdial_source"] == "data/user/visdial"
        and merged["paths"]["visual_images"] == "data/user/coco"
    )
    assert merged["dino_features"]["allow_random_init"] is False  # a pretrained DINOv2 or a clear stop
    assert merged["assoc_corpus"]["vocab_size"] == 3000 and merged["assoc_train"]["batch_size"] == 2048
    # the association paper's corpus rule: 65,536 stories of >= 201 tokens, truncated; frequency >= 5
    assert {k: merged["assoc_corpus"][k] for k in ("seq_len", "max_sequences", "sequences", "min_count")} == {
        "seq_len": 200,
        "max_sequences": 65536,
        "sequences": "stories",
        "min_count": 5,
    }
    apply_profile(str(ROOT / "profiles" / "paper_bpe.yaml"), params)  # Table 2: BPE of 10,000
    bpe = yaml.safe_load(params.read_text())["assoc_corpus"]
    assert (bpe["tokenizer"], bpe["vocab_size"], bpe["sequences"]) == ("bpe", 10000, "stories")
    assert "# Every artifact path is written once" in params.read_text()


@pytest.mark.parametrize("profile", ["paper", "tiny"])
def test_profile_grounding_models_are_valid_configs(tmp_path, profile):
    params = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    apply_profile(str(ROOT / "profiles" / f"{profile}.yaml"), params)
    merged = yaml.safe_load(params.read_text())
    for name in merged["grounding_runs"]["models"]:
        arch, values = model_entry(merged["grounding_models"], name)
        make_config(
            arch, {**values, "d_vocab": 100, "n_ctx": merged["grounding_train"]["seq_len"]}, f"grounding_models.{name}"
        )
    assert set(merged["grounding_saliency"]["models"]) <= set(merged["grounding_runs"]["models"])


@pytest.mark.parametrize("name", ["mine.yaml", "mine.yml"])
def test_a_profile_given_as_a_yaml_or_yml_path_is_that_file(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no profiles/ folder here: only the path given can be read
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / name).write_text("binding_train:\n  lr: 0.002\n")
    assert profile.profile_path(f"elsewhere/{name}") == Path("elsewhere") / name


def test_a_profile_key_params_lacks_is_named_and_the_known_keys_still_merge():
    base = {"binding_model": {"n_layers": 1, "d_model": 8}}
    unknown = merge_into(base, {"binding_model": {"n_layerz": 2, "d_model": 16}, "bindng_data": {}})
    assert [line.split(":")[0] for line in unknown] == ["binding_model.n_layerz", "bindng_data"]
    assert base == {"binding_model": {"n_layers": 1, "d_model": 16}}


def test_a_misspelt_profile_key_does_not_hide_the_profiles_other_problems(tmp_path):
    """Every problem in one pass: the misspelt key (with the profile's path) and the merged result's own."""
    params = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    profile = tmp_path / "mine.yaml"
    profile.write_text("binding_model:\n  n_layerz: 2\nbinding_train:\n  lr: -1.0\n")
    before = params.read_bytes()
    problems = apply_profile(str(profile), params)
    assert any(line.startswith(f"{profile}: binding_model.n_layerz") for line in problems), problems
    assert any(line.startswith("binding_train.lr") for line in problems), problems
    assert params.read_bytes() == before


def test_a_params_file_with_a_duplicate_key_is_refused_in_one_line_before_any_merge(tmp_path):
    """The params file is read as `check` reads it before the round-trip: a key given twice is one
    line naming the file, the key and its lines, and the file is left as it was."""
    params = tmp_path / "params.yaml"
    params.write_text("binding_train:\n  lr: 0.002\n  steps: 30\n  lr: 0.01\n")
    profile = tmp_path / "mine.yaml"
    profile.write_text("binding_train:\n  steps: 5\n")
    before = params.read_bytes()
    with refuses(params, "'lr'", "line 2"):
        apply_profile(str(profile), params)
    assert params.read_bytes() == before


@pytest.mark.parametrize(
    "section, key, value, named",
    [
        ("binding_programs", "max_hops", 20, ["20", "n_lines"]),
        ("binding_programs", "n_lines", "16", ["integer", "'16'"]),
        ("binding_data", "colour", 1, ["unknown"]),
        ("binding_data", "split", [0.5, 0.5, 0.5], ["[0.5, 0.5, 0.5]"]),
    ],
)
def test_stage_exits_with_one_line_naming_the_key(tmp_path, section, key, value, named):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params[section][key] = value
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    proc = subprocess.run(
        [sys.executable, "-m", "stages.binding.data", "--params", str(tmp_path / "params.yaml")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": str(Path(sys.executable).parent)},
    )
    assert proc.returncode != 0
    assert proc.stderr.startswith("error: "), proc.stderr
    assert_names(proc.stderr, f"{section}.{key}: ", *named)
    assert key_of(proc.stderr) == f"{section}.{key}"
    assert not (tmp_path / "data").exists()


def _instances(params: dict) -> dict[str, int]:
    from emergence.core.declared import instances

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    return {name: len(list(instances(name, stage, params))) for name, stage in stages.items()}


def test_the_full_profile_runs_what_the_default_leaves_out(tmp_path):
    """The default (under an hour on 2 cores) trains one binding seed and no aid variant, and estimates no
    LLC; `make repro PROFILE=full` adds binding's second seed, the three variants and both studies' LLC
    curves, and passes the same check. Nothing else changes."""
    default = _instances(read_params(ROOT / "params.yaml"))
    params = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    assert apply_profile(str(ROOT / "profiles" / "full.yaml"), params) == []
    full = _instances(read_params(params))
    left_out = {"binding_aid_train": 3, "binding_aid_eval": 3, "binding_llc": 2, "grounding_llc": 2}
    assert {s: default[s] for s in left_out} == dict.fromkeys(left_out, 0)
    assert {s: full[s] for s in left_out} == left_out
    per_seed = [s for s in default if s.startswith("binding_") and default[s] == 1 and full[s] == 2]
    assert "binding_train" in per_seed and "binding_stress" in per_seed
    assert {s for s in full if full[s] != default[s]} == set(left_out) | set(per_seed)


def test_a_profiles_lists_stay_on_their_keys_line_so_dvc_can_set_them(tmp_path):
    """`dvc exp run -S binding_llc.seeds=[]` on params a profile wrote: DVC's YAML writer joined the next
    two lines of a block list whose key carries a comment (`num_draws: 12 lr: 0.001`)."""
    from dvc.utils.serialize import modify_yaml

    params = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    assert apply_profile(str(ROOT / "profiles" / "tiny.yaml"), params) == []
    text = params.read_text()
    assert re.search(r"^  seeds: \[0, 1\] +# ", text, re.M)  # base.seeds, with the default's comment
    before = yaml.safe_load(text)
    with modify_yaml(params) as d:
        d["binding_llc"]["seeds"] = []
        d["grounding_llc"]["models"] = []
    after = yaml.safe_load(params.read_text())
    assert after["binding_llc"]["seeds"] == [] and after["grounding_llc"]["models"] == []
    before["binding_llc"]["seeds"], before["grounding_llc"]["models"] = [], []
    assert after == before  # nothing else moved


TOY_BASE = "base:\n  seeds: [0]\n  device: cpu\n"


def _toy_workspace(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace of its own (a pipeline.yaml whose one section, `toy`, has a schema in a module that
    only the caller's PYTHONPATH reaches) and that PYTHONPATH folder, which also holds an `emergence`
    package whose check refuses everything."""
    lib = tmp_path / "lib"
    (lib / "emergence").mkdir(parents=True)
    (lib / "toyschema.py").write_text("import dataclasses\n\n@dataclasses.dataclass\nclass Toy:\n    n: int\n")
    (lib / "emergence" / "__init__.py").write_text("")
    (lib / "emergence" / "__main__.py").write_text(
        "import sys\nprint('error: another emergence', file=sys.stderr)\nsys.exit(1)\n"
    )
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "pipeline.yaml").write_text(
        "stages: {}\nschemas:\n  base: emergence.core.config:BaseParams\n  toy: toyschema:Toy\n"
    )
    return workspace, lib


def test_the_check_runs_this_package_and_the_workspaces_pipeline_with_the_callers_pythonpath(tmp_path, monkeypatch):
    """The merged params are checked by this emergence package (not whichever one the caller's PYTHONPATH
    names first), against the working directory's pipeline.yaml, whose schema modules the caller's
    PYTHONPATH still reaches."""
    workspace, lib = _toy_workspace(tmp_path)
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("PYTHONPATH", str(lib))
    assert check_problems(TOY_BASE + "toy:\n  n: 1\n") == []  # the other emergence would refuse it
    assert [key_of(line) for line in check_problems(TOY_BASE + "toy:\n  n: x\n")] == ["toy.n"]


def test_a_bare_workspace_is_checked_against_this_checkouts_pipeline(tmp_path, monkeypatch):
    """With no pipeline.yaml in the working directory, the schemas are this checkout's: its params pass,
    and a bad value is named by its key."""
    monkeypatch.chdir(tmp_path)
    text = (ROOT / "params.yaml").read_text()
    assert check_problems(text) == []
    bad = yaml.safe_load(text)
    bad["binding_train"]["lr"] = -1.0
    assert "binding_train.lr" in [key_of(line) for line in check_problems(yaml.safe_dump(bad))]


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    """A working directory holding a copy of the project's params.yaml and pipeline.yaml, and two
    profiles: `small` (a valid lr) and `bad` (a negative one, which the check refuses)."""
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    shutil.copy(ROOT / "pipeline.yaml", tmp_path / "pipeline.yaml")
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "small.yaml").write_text("binding_train:\n  lr: 0.0005\n")
    (tmp_path / "profiles" / "bad.yaml").write_text("binding_train:\n  lr: -1.0\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_profile_command_writes_the_default_params_file_and_says_so(workspace, capsys):
    assert profile.main(["small"]) == 0
    assert read_params(workspace / "params.yaml")["binding_train"]["lr"] == 0.0005
    out, err = capsys.readouterr()
    assert_names(out, "params.yaml", "small")
    assert err == ""


def test_the_profile_command_writes_the_params_file_it_is_given(workspace, capsys):
    other = workspace / "other.yaml"
    shutil.copy(workspace / "params.yaml", other)
    before = (workspace / "params.yaml").read_bytes()
    assert profile.main(["small", "--params", str(other)]) == 0
    assert read_params(other)["binding_train"]["lr"] == 0.0005
    assert (workspace / "params.yaml").read_bytes() == before
    assert_names(capsys.readouterr().out, str(other), "small")


def test_a_profile_whose_result_fails_the_check_exits_1_naming_each_problem_and_writes_nothing(workspace, capsys):
    before = (workspace / "params.yaml").read_bytes()
    assert profile.main(["bad", "--params", "params.yaml"]) == 1
    assert (workspace / "params.yaml").read_bytes() == before
    out, err = capsys.readouterr()
    assert out == ""  # problems go to stderr, one `error: ` line each, then the line that says why nothing changed
    *problems, summary = err.splitlines()
    assert problems and all(line.startswith("error: ") for line in problems), err
    assert "binding_train.lr" in [key_of(line) for line in problems]
    assert_names(summary, "params.yaml", "bad", f"{len(problems)} problem")


def test_an_unknown_profile_exits_1_with_one_error_line_naming_its_path(workspace, capsys):
    before = (workspace / "params.yaml").read_bytes()
    assert profile.main(["nosuch"]) == 1
    assert (workspace / "params.yaml").read_bytes() == before
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: ")
    assert_names(err, str(Path("profiles") / "nosuch.yaml"), "small")  # the known profiles are listed

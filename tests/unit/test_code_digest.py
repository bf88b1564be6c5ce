"""A stage instance's code digest: what in the code can change its artifacts' bytes, and nothing else."""

from __future__ import annotations

import ast
import datetime
import json
import os
import re
import shutil
import sys
import textwrap
import types
from pathlib import Path

import pytest
import yaml
from conftest import SOURCES
from refusals import refuses

from emergence.core.cli import code_in_digest
from emergence.core.code_digest import (
    PLUMBING,
    digests,
    instance_files,
    listed_files,
    loaded_outside,
    params_archs,
    plumbing_files,
)
from emergence.core.code_facts import ENV, FOLDER, parse
from emergence.core.config import read_params
from emergence.core.declared import GUARD, digest_dep, read_stages
from emergence.core.pipeline import engine_declaration, read_declaration, render, rules_of

NUMERIC = {"torch", "numpy", "pandas", "pyarrow", "safetensors", "scipy", "sklearn", "PIL", "transformers", "plotly"}


def digest_of(source: str) -> str:
    return parse(textwrap.dedent(source), "m.py").digest


BASE = '''
    """Module doc."""
    import sys

    def f(x, rows):
        """Function doc."""
        if x < 0:
            raise ValueError(f"x must be >= 0, got {x}")
        assert rows, "no rows"
        assert x is not None
        if "count" not in rows:
            raise KeyError("no column " + repr(sorted(rows)))
        if len(rows) > 9:
            raise LookupError("too many columns")
        print(f"scaling {x}", file=sys.stderr)
        log.warning("slow path")
        parser.add_argument("--x", help="the x")
        return x * 2 + rows["count"]  # why: doubled
'''


@pytest.mark.parametrize(
    "edit",
    [
        ('"""Module doc."""', '"""Another doc."""'),
        ('"""Function doc."""', '"""Does f."""'),
        ("x must be >= 0, got {x}", "x: must be at least 0 (got {x!r})"),
        ('"no rows"', '"the table is empty"'),
        ('"no column "', '"missing: "'),
        ('"too many columns"', '"at most 9 columns"'),
        ('f"scaling {x}"', '"scaling"'),
        ('"slow path"', '"falling back"'),
        ('help="the x"', 'help="how many"'),
        ("# why: doubled", "# twice"),
        ("return x * 2", "return  x*2"),
    ],
    ids=["module doc", "docstring", "raise", "assert", "joined", "plain", "print", "log", "help", "comment", "layout"],
)
def test_messages_docstrings_comments_and_layout_leave_the_digest_as_it_is(edit):
    assert digest_of(BASE.replace(*edit)) == digest_of(BASE)


@pytest.mark.parametrize(
    "edit",
    [
        ("x * 2", "x * 3"),
        ("x * 2", "x / 2"),
        ('rows["count"]', 'rows["total"]'),
        ("if x < 0", "if x <= 0"),
        ("file=sys.stderr", "file=handle"),  # printed into a file: may be an artifact's bytes
        ("raise LookupError(", "raise KeyError("),  # what is raised may be caught
    ],
    ids=["constant", "operator", "column", "comparison", "print to a file", "exception"],
)
def test_any_change_to_what_is_computed_changes_the_digest(edit):
    assert digest_of(BASE.replace(*edit)) != digest_of(BASE)


def test_a_print_into_a_file_keeps_its_text():
    into_file = BASE.replace("file=sys.stderr", "file=handle")
    assert digest_of(into_file.replace("scaling", "scaled")) != digest_of(into_file)


# ---- which files: the real declaration -------------------------------------------------------------------


@pytest.fixture(scope="module")
def shipped() -> dict[str, set[str]]:
    files = instance_files(read_declaration(SOURCES), read_params(SOURCES / "params.yaml"), SOURCES)
    return {instance: {str(p) for p in found} for instance, found in files.items()}


def models(files: set[str]) -> set[str]:
    return {Path(f).stem for f in files if f.startswith("src/emergence/core/models/")}


ARCHS = {"attn_only", "lstm", "mamba2", "transformer"}


def arch_of_model(name: str) -> str:
    return read_params(SOURCES / "params.yaml")["grounding_models"][name]["arch"]


def test_an_instance_holds_the_architectures_it_builds_and_no_other(shipped):
    params = read_params(SOURCES / "params.yaml")
    assert models(shipped["binding_train@0"]) & ARCHS == {params["binding_model"]["arch"]}
    assert models(shipped["assoc_train@1-0"]) & ARCHS == {"attn_only"}  # named in the code: build_model("attn_only")
    assert not models(shipped["binding_data"])  # builds no model
    for model in params["grounding_runs"]["models"]:
        arch = arch_of_model(model)
        # lstm.py imports the Transformer's LayerNorm: it holds transformer.py honestly
        allowed = {arch, "transformer"} if arch == "lstm" else {arch}
        for stage in ("grounding_train", "grounding_gain"):  # trains it; loads the run it trained
            assert models(shipped[f"{stage}@{model}-0"]) & ARCHS == allowed, (stage, model)
    assert len({arch_of_model(m) for m in params["grounding_runs"]["models"]}) > 1  # the choice can go wrong


def test_one_instance_alone_holds_what_it_holds_among_all(shipped):
    """What a stage checks at its exit (its own instance, through its producers' archs) is what params_check
    wrote for it; the guard and an unknown name have no code of their own."""
    decl, params = read_declaration(SOURCES), read_params(SOURCES / "params.yaml")
    models_ = params["grounding_runs"]["models"]
    lstm = next(m for m in models_ if arch_of_model(m) == "lstm")
    for instance in (f"grounding_gain@{lstm}-0", "grounding_report", "binding_train@0", "plotly_js"):
        alone = instance_files(decl, params, SOURCES, only=instance)
        assert {k: {str(p) for p in v} for k, v in alone.items()} == {instance: shipped[instance]}
    assert instance_files(decl, params, SOURCES, only=GUARD) == {}
    assert instance_files(decl, params, SOURCES, only="no_such_stage") == {}


def test_every_stage_closure_of_one_walk_looks_each_module_up_once(monkeypatch):
    """The ~90 instances share most of their code (core/, the studies' common modules): one walk finds each
    module's file and imports once and hands them to every later closure."""
    import emergence.core.pipeline as pipeline

    asked: list[str] = []
    lookup = pipeline.module_file
    monkeypatch.setattr(pipeline, "module_file", lambda mod, root: asked.append(mod) or lookup(mod, root))
    files = instance_files(read_declaration(SOURCES), read_params(SOURCES / "params.yaml"), SOURCES)
    assert len(files) > 20 and "emergence.core.io" in asked
    assert sorted(asked) == sorted(set(asked))


def test_no_plumbing_file_is_in_any_digest_and_every_stage_script_is_in_its_own(shipped):
    plumbing = {str(p) for p in plumbing_files(SOURCES)}
    assert len(plumbing) == len(PLUMBING)
    stages = read_stages(SOURCES)
    for instance, files in shipped.items():
        assert not files & plumbing, instance
        module = stages[instance.split("@")[0]]["cmd"].split()[2]
        assert module.replace(".", "/") + ".py" in files, instance


@pytest.mark.parametrize("module", sorted(PLUMBING))
def test_plumbing_imports_no_numerical_library(module):
    """Plumbing refuses, parses, locks and records: it computes nothing an artifact holds."""
    path = SOURCES / "src" / Path(*module.split(".")).with_suffix(".py")
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            imported.add((node.module or "").split(".")[0])
    assert not imported & NUMERIC, module


# ---- edits in a copy of the code: what each reruns ----------------------------------------------------------


@pytest.fixture
def code_copy(tmp_path) -> Path:
    for name in ("src", "stages"):
        shutil.copytree(SOURCES / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pipeline.yaml", "params.yaml"):
        shutil.copy(SOURCES / name, tmp_path / name)
    return tmp_path


def all_digests(root: Path) -> dict[str, str]:
    return digests(read_declaration(root), read_params(root / "params.yaml"), root)


def changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {k for k in before if before[k] != after[k]}


def test_rewording_a_message_in_core_io_changes_no_digest(code_copy):
    before = all_digests(code_copy)
    io = code_copy / "src/emergence/core/io.py"
    text = io.read_text()
    assert "nothing was written" in text
    io.write_text(text.replace("nothing was written", "no output was made"))
    assert changed(before, all_digests(code_copy)) == set()


def test_editing_plumbing_changes_no_digest(code_copy):
    before = all_digests(code_copy)
    cli = code_copy / "src/emergence/core/cli.py"
    cli.write_text(cli.read_text() + "\n\ndef _unused_helper():\n    return 1\n")
    assert changed(before, all_digests(code_copy)) == set()


def test_editing_compute_code_changes_exactly_the_instances_holding_it(code_copy):
    before = all_digests(code_copy)
    rel = "src/emergence/core/models/mamba2.py"
    holders = {i for i, text in before.items() if rel in listed_files(text)}
    (code_copy / rel).write_text((code_copy / rel).read_text() + "\n_SCALE = 2\n")
    after = all_digests(code_copy)
    assert changed(before, after) == holders
    assert holders and holders != set(before)  # some instances hold it, and not all: the check can fail
    assert any(i.startswith("grounding_gain@") for i in holders)
    assert not any(i.startswith(("binding_", "assoc_")) for i in holders)


def test_the_thread_count_is_in_every_digest_and_no_stage_declares_params_to_dvc(code_copy):
    """base.threads changes float reductions, so every stage's bytes: each digest holds it (and reruns with
    it). dvc.yaml declares no params at all: DVC parses params.yaml once, for the guard, whose file dep it is."""
    before = all_digests(code_copy)
    params = code_copy / "params.yaml"
    params.write_text(params.read_text().replace("  threads: 2", "  threads: 3", 1))
    assert read_params(params)["base"]["threads"] == 3
    assert changed(before, all_digests(code_copy)) == set(before)
    stages = yaml.safe_load(render(SOURCES).split("\n", 3)[3])["stages"]
    assert not [name for name, stage in stages.items() if "params" in stage]
    assert "params.yaml" in stages[GUARD]["deps"]


def test_a_params_value_changes_exactly_the_digests_of_the_instances_running_with_it(code_copy):
    """One model's config is read by the instances of that model (grounding_models.${item.model}) and by the
    stages declaring the whole section, not by the other models' instances nor by the other studies."""
    before = all_digests(code_copy)
    params = read_params(code_copy / "params.yaml")
    edited, other = params["grounding_runs"]["models"][1], params["grounding_runs"]["models"][0]
    params["grounding_models"][edited]["d_model"] += 8
    (code_copy / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    after = all_digests(code_copy)
    moved = changed(before, after)
    assert {i for i in moved if i.startswith("grounding_train@")} == {
        i for i in before if i.startswith(f"grounding_train@{edited}-")
    }
    assert {"grounding_report", "visual_report"} <= moved  # they declare the whole grounding_models section
    assert not [i for i in moved if i.startswith(("binding_", "assoc_")) or f"@{other}-" in i]
    line = next(x for x in after[f"grounding_train@{edited}-0"].splitlines() if x.startswith("# grounding_models."))
    assert json.loads(line.split(": ", 1)[1])["d_model"] == params["grounding_models"][edited]["d_model"]


def test_reordering_a_sections_keys_changes_no_digest_and_a_date_is_a_value(code_copy):
    """The values are written as sorted JSON: the order of keys in params.yaml is no value. YAML reads an
    unquoted date as a date, which is written as its text."""
    before = all_digests(code_copy)
    params = read_params(code_copy / "params.yaml")
    params["binding_ablation"] = dict(reversed(params["binding_ablation"].items()))
    (code_copy / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert changed(before, all_digests(code_copy)) == set()
    params["binding_ablation"]["checkpoint"] = datetime.date(2026, 1, 2)
    (code_copy / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    line = next(x for x in all_digests(code_copy)["binding_ablation@0"].splitlines() if "# binding_ablation:" in x)
    assert json.loads(line.split(": ", 1)[1])["checkpoint"] == "2026-01-02"


def test_a_digest_file_names_its_instance_then_lists_its_files_one_a_line(code_copy, monkeypatch):
    """What it parsed is kept in the checkout's own folder (core/code_facts.py) unless told otherwise."""
    monkeypatch.delenv(ENV, raising=False)
    texts = all_digests(code_copy)
    files = instance_files(read_declaration(code_copy), read_params(code_copy / "params.yaml"), code_copy)
    for instance in ("binding_ablation@0", "grounding_gain@mamba4-0"):
        assert texts[instance].splitlines()[0].startswith(f"# stage instance {instance}:")
        assert listed_files(texts[instance]) == [str(p) for p in files[instance]]
        code = [line for line in texts[instance].splitlines() if not line.startswith("#")]
        assert all(re.fullmatch(r"[0-9a-f]{64}  \S+", line) for line in code)  # sha256, two spaces, path
    assert list((code_copy / FOLDER).glob("*.json"))


# ---- the engines: DVC's dep on the digest file, Snakemake's param ----------------------------------------


def test_every_stage_but_the_guard_depends_on_its_own_digest_and_the_guard_on_all_code():
    dvc = yaml.safe_load(render(SOURCES).split("\n", 3)[3])["stages"]
    stages = read_stages(SOURCES)
    for name, stage in dvc.items():
        code = [d for d in stage["deps"] if str(d).startswith(("src", "stages"))]
        if name == GUARD:
            assert code == ["src/emergence", "stages"]
        else:
            assert not code, name
            assert digest_dep(name, stages[name]) in stage["deps"], name


def test_each_snakemake_job_carries_its_instance_digest_and_its_declared_params_values():
    """dvc.yaml lists no params, but the rules come from the stages as declared: a job's params are the
    values of its instance's keys (its own model's config), so Snakemake reruns on the edits DVC does."""
    params = read_params(SOURCES / "params.yaml")
    dvc = engine_declaration(SOURCES)
    code = {i: f"sha-{i}" for i in digests(dvc, params, SOURCES)}
    rules = {r.name: r for r in rules_of(dvc, params, code)}
    fn = rules["grounding_gain"].param_functions(params)["code_digest"]
    models = params["grounding_runs"]["models"]
    assert fn({"model": models[1], "seed": "0"}) == f"sha-grounding_gain@{models[1]}-0"
    assert fn({"model": models[0], "seed": "0"}) == f"sha-grounding_gain@{models[0]}-0"
    train = rules["grounding_train"].param_functions(params)
    assert train["grounding_models_model"]({"model": models[1], "seed": "0"}) == params["grounding_models"][models[1]]
    assert train["grounding_train"]({"model": models[0], "seed": "1"}) == params["grounding_train"]
    assert set(rules[GUARD].params) == set()  # its stamp's bytes never change: params.yaml is its file dep


# ---- at the end of every stage run: what it loaded is in its digest ------------------------------------


def test_a_stage_that_loaded_a_module_outside_its_digest_is_refused():
    params = read_params(SOURCES / "params.yaml")
    import emergence.core.models.lstm  # noqa: F401  (what binding_train@0 never builds)

    started = set(sys.modules) - {"emergence.core.models.lstm"}
    with refuses("src/emergence/core/models/lstm.py", "binding_train@0"):
        code_in_digest("binding_train@0", params, started)
    code_in_digest("binding_train@0", params, set(sys.modules))  # loaded before the body: the rules' own


def test_only_project_code_outside_the_digest_and_the_plumbing_counts_as_loaded_outside(tmp_path):
    """Whatever comes first in the list: a built-in module (no file), a third-party one (outside the
    checkout), a project file that is no code of a stage (bench/), the digest's own files, the plumbing."""

    def module(name: str, rel: str | None) -> types.ModuleType:
        m = types.ModuleType(name)
        if rel is not None:
            m.__file__ = str(tmp_path / rel) if not rel.startswith("/") else rel
        return m

    listed = ["src/emergence/studies/binding/ablation.py"]
    modules = [
        module("builtin", None),
        module("third_party", "/usr/lib/python3/dist-packages/x.py"),
        module("bench.x", "bench/x.py"),
        module("emergence.studies.binding.ablation", listed[0]),
        module("emergence.core.cli", "src/emergence/core/cli.py"),  # plumbing
        module("emergence.core.models.lstm", "src/emergence/core/models/lstm.py"),
        module("stages.binding.extra", "stages/binding/extra.py"),
    ]
    for rel in ("src/emergence/core/cli.py",):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert loaded_outside(modules, listed, tmp_path) == ["src/emergence/core/models/lstm.py", "stages/binding/extra.py"]


def test_architectures_are_found_under_arch_keys_at_any_depth():
    value = [{"arch": "lstm", "d": 4}, {"models": {"m": {"arch": "mamba2"}, "n": [{"arch": "attn_only"}]}}, "arch"]
    assert params_archs(value) == {"lstm", "mamba2", "attn_only"}
    assert params_archs({"arch": 3, "x": {"name": "transformer"}}) == set()


# ---- what the guard stage writes: one digest per instance, and its stamp ---------------------------------


@pytest.fixture
def guard(tmp_path, monkeypatch):
    """stages.params_check against this checkout's code, writing under tmp_path."""
    import stages.params_check as guard

    monkeypatch.setattr(guard, "project_root", lambda: SOURCES)
    params = read_params(SOURCES / "params.yaml")
    params["paths"].update(code_digests=str(tmp_path / "code"), params_checked=str(tmp_path / "checked.txt"))
    return guard, params


def test_the_guard_writes_each_instance_digest_at_its_own_path_and_nothing_else(guard, tmp_path):
    guard, params = guard
    (tmp_path / "code" / "gone").mkdir(parents=True)
    (tmp_path / "code" / "gone" / "0.txt").write_text("an instance no longer declared")
    guard.write_digests(params)
    want = digests(read_declaration(SOURCES), params, SOURCES)
    written = {str(p.relative_to(tmp_path / "code")): p.read_text() for p in (tmp_path / "code").rglob("*.txt")}
    # binding_train@0 -> binding_train/0.txt; an instance without an item -> <stage>.txt; the folder replaced whole
    assert written["binding_train/0.txt"] == want["binding_train@0"]
    assert written["binding_data.txt"] == want["binding_data"]
    assert len(want) > 40 and len(written) == len(want) and "gone/0.txt" not in written
    assert set(written.values()) == set(want.values())


def test_put_back_writes_the_digests_only_where_dvc_removed_them(guard, tmp_path):
    guard, params = guard
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "binding_data.txt").write_text("as it was")
    guard.write_digests(params, put_back=True)  # the folder is there: a put-back leaves it as it is
    assert [p.name for p in (tmp_path / "code").rglob("*")] == ["binding_data.txt"]
    assert (tmp_path / "code" / "binding_data.txt").read_text() == "as it was"
    shutil.rmtree(tmp_path / "code")
    guard.write_digests(params, put_back=True)
    want = digests(read_declaration(SOURCES), params, SOURCES)
    assert (tmp_path / "code" / "binding_data.txt").read_text() == want["binding_data"]
    assert len(list((tmp_path / "code").rglob("*.txt"))) == len(want)
    assert not list(tmp_path.glob(".*"))  # no temporary folder left beside it


@pytest.mark.parametrize("put_back", [False, True])
def test_the_guard_makes_each_stages_folder_whichever_instance_comes_first(put_back, guard, tmp_path, monkeypatch):
    guard, params = guard
    texts = {"binding_train@1": "one", "binding_train@0": "zero", "assoc_runs@L2_seed3": "run", "binding_data": "d"}
    monkeypatch.setattr(guard, "digests", lambda declaration, p, root: texts)  # a matrix instance first
    guard.write_digests(params, put_back=put_back)
    written = {str(p.relative_to(tmp_path / "code")): p.read_text() for p in (tmp_path / "code").rglob("*.txt")}
    assert written == {"binding_train/1.txt": "one", "binding_train/0.txt": "zero", "assoc_runs/L2_seed3.txt": "run",
                       "binding_data.txt": "d"}  # fmt: skip


def test_the_stamp_says_the_params_passed_and_is_left_alone_when_it_already_does(guard, tmp_path):
    guard, params = guard
    stamp = tmp_path / "checked.txt"
    guard.stamp(params)
    assert stamp.read_text() == guard.PASSED
    stamp.touch()
    before = stamp.stat().st_mtime_ns
    os.utime(stamp, ns=(before - 10**9, before - 10**9))  # a second older: a rewrite would move it
    guard.stamp(params)
    assert stamp.stat().st_mtime_ns == before - 10**9  # Snakemake reads its time: unchanged, nothing reruns
    stamp.write_text("stale")
    guard.stamp(params)
    assert stamp.read_text() == guard.PASSED

"""DVC's own reading of dvc.yaml and the Snakefile's agree: same jobs, commands, outputs, inputs, logs."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT, run
from refusals import assert_names

from emergence.core.declared import GUARD


def dvc_stages() -> dict[str, dict]:
    """Resolved DVC stages (templating and matrix expanded) by command."""
    from dvc.repo import Repo

    with Repo(str(ROOT)) as repo:
        return {
            stage.cmd: {
                "name": stage.addressing,
                "outs": sorted(str(o.def_path) for o in stage.outs),
                "deps": sorted(str(d.def_path) for d in stage.deps if not hasattr(d, "params")),
                "params": sorted(key for dep in stage.deps if hasattr(dep, "params") for key in dep.params),
            }
            for stage in repo.index.stages
        }


def snakemake_jobs() -> dict[str, dict]:
    """Jobs of a forced Snakemake dry run, by shell command minus the log redirection."""
    proc = run(["snakemake", "--cores", "1", "--forceall", "--dry-run", "--printshellcmds"], ROOT)
    jobs: dict[str, dict] = {}
    for block in (proc.stdout + proc.stderr).split("\nrule ")[1:]:
        outs = re.search(r"^\s+output: (.*)$", block, re.M)
        inputs = re.search(r"^\s+input: (.*)$", block, re.M)
        shell = re.search(r"^Shell command: (.*)$", block, re.M)
        if outs and shell:  # `rule all` has neither
            cmd = re.sub(r"\s+2>\s*\S+$", "", shell.group(1).strip())
            jobs[cmd] = {
                "rule": block.split(":")[0],
                "outs": sorted(outs.group(1).split(", ")),
                "deps": sorted(inputs.group(1).split(", ")) if inputs else [],
            }
    return jobs


@pytest.fixture(scope="module")
def both():
    return dvc_stages(), snakemake_jobs()


def test_same_commands(both):
    dvc, smk = both
    assert sorted(dvc) == sorted(smk)


def test_one_rule_per_dvc_stage(both):
    """DVC's binding_train@0 is a job of rule binding_train: profiles set cluster resources per stage."""
    dvc, smk = both
    for cmd, stage in dvc.items():
        assert smk[cmd]["rule"] == stage["name"].split("@")[0], stage["name"]


def test_same_outputs(both):
    dvc, smk = both
    for cmd, stage in dvc.items():
        assert stage["outs"] == smk[cmd]["outs"], stage["name"]


def test_same_dependencies(both):
    """Data inputs agree, so both engines rerun a stage on the same edits; but the params check's
    outputs, which every DVC stage waits for and no Snakemake rule does (the Snakefile runs the same
    check when it is parsed): the code digest files in its folder, which Snakemake jobs carry as a
    param instead."""
    dvc, smk = both
    guard = {out for stage in dvc.values() if stage["name"] == GUARD for out in stage["outs"]}
    assert guard == {"data/params_checked.txt", "data/code"}

    def guarded(dep: str) -> bool:
        return any(dep == out or dep.startswith(out + "/") for out in guard)

    for cmd, stage in dvc.items():
        deps = [d for d in stage["deps"] if not guarded(d)]
        assert deps == as_dvc_dirs(smk[cmd]["deps"], stage["deps"]), stage["name"]
        if stage["name"] != GUARD:  # DVC runs the guard first: each stage depends on its own digest
            assert len([d for d in stage["deps"] if d.startswith("data/code/")]) == 1, stage["name"]


def as_dvc_dirs(inputs: list[str], dvc_deps: list[str]) -> list[str]:
    """Snakemake lists per-seed files where DVC depends on their directory: fold them."""

    def fold(path: str) -> str:
        return next((d for d in dvc_deps if path.startswith(d + "/")), path)

    return sorted({fold(p) for p in inputs})


def test_every_job_logs():
    proc = run(["snakemake", "--cores", "1", "--forceall", "--dry-run", "--printshellcmds"], ROOT)
    blocks = [b for b in (proc.stdout + proc.stderr).split("\nrule ")[1:] if not b.startswith("all:")]
    assert blocks and all(re.search(r"^\s+log: logs/\S+\.log$", b, re.M) for b in blocks)


@pytest.mark.parametrize(
    "edit, named",  # what the error line names: the section and the one it may mean; the file, line and key
    [
        (lambda t: t + "binding_trainn:\n  steps: 3\n", ["error: binding_trainn: ", "binding_train?"]),
        (
            lambda t: re.sub(
                r"^  eval_programs: 120.*$", "  eval_programs: 120\n  eval_programs: 3", t, count=1, flags=re.M
            ),
            ["error: ", "params.yaml line ", "duplicate", "'eval_programs'"],
        ),
    ],
    ids=["misspelt_section", "duplicate_key"],
)
def test_snakemake_refuses_bad_params_before_any_job(tmp_path, edit, named):
    # Snakemake's own loader keeps the later of two keys and ignores unknown sections; the Snakefile
    # runs the project's check first
    for name in ("Snakefile", "pipeline.yaml", "dvc.yaml"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    (tmp_path / "params.yaml").write_text(edit((ROOT / "params.yaml").read_text()))
    proc = run(["snakemake", "--cores", "1", "--dry-run"], tmp_path, check=False)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert errors, proc.stderr
    assert_names(errors[0], *named)  # the check's line, first
    assert_names(
        next(line for line in proc.stderr.splitlines() if "problem(s)" in line), "params.yaml: ", "1 problem(s)"
    )
    assert "Job stats" not in proc.stdout + proc.stderr

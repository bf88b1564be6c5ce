"""Every dvc.yaml stage has a Snakemake rule with the same command, outputs and params."""
from __future__ import annotations

import re

import pytest
import yaml

from conftest import ROOT, run


def dvc_stages() -> dict[str, dict]:
    """Resolved DVC stages (templating and matrix expanded) by command."""
    from dvc.repo import Repo

    with Repo(str(ROOT)) as repo:
        return {
            stage.cmd: {
                "name": stage.addressing,
                "outs": sorted(str(o.def_path) for o in stage.outs),
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
        shell = re.search(r"^Shell command: (.*)$", block, re.M)
        if outs and shell:  # `rule all` has neither
            cmd = re.sub(r"\s+2>\s*\S+$", "", shell.group(1).strip())
            jobs[cmd] = {"rule": block.split(":")[0], "outs": sorted(outs.group(1).split(", "))}
    return jobs


@pytest.fixture(scope="module")
def both():
    return dvc_stages(), snakemake_jobs()


def test_same_commands(both):
    dvc, smk = both
    assert sorted(dvc) == sorted(smk)


def test_same_outputs(both):
    dvc, smk = both
    for cmd, stage in dvc.items():
        assert stage["outs"] == smk[cmd]["outs"], stage["name"]


def test_rules_declare_the_params_their_stage_reads():
    """Snakemake reruns on a params edit only through `params:`; DVC through `params:` too."""
    rules = (ROOT / "rules" / "binding.smk").read_text()
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for name, stage in dvc.items():
        body = rules[rules.index(f"rule {name}:"):]
        body = body[: body.find("\nrule ", 1) if "\nrule " in body[1:] else len(body)]
        for key in stage.get("params", []):
            section, _, sub = key.partition(".")
            wanted = f'config["{section}"]["{sub}"]' if sub else f'config["{section}"]'
            assert wanted in body or (key == "base.seeds" and "SEEDS" in body), f"{name}: rule lacks {key}"


def test_every_rule_logs():
    rules = (ROOT / "rules" / "binding.smk").read_text()
    assert rules.count("\nrule ") + rules.startswith("rule ") == rules.count("    log:")

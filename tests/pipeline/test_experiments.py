"""DVC experiments on the tiny profile: `dvc exp run -S key=value` reruns what the param feeds, and
`dvc exp show` lists each experiment with its params and the headline metrics."""

from __future__ import annotations

import csv
import io
import json
import re
import shlex

import pytest
from artifacts import ran_stages
from conftest import ROOT, copy_run, run

from emergence.claims import CLAIMS
from emergence.core.report.claims import headline_key

STUDY_KEYS = {"binding", "associations", "grounding", "grounding_visual"}

pytestmark = pytest.mark.pipeline


def readme_exp_show() -> list[list[str]]:
    """The `dvc exp show` commands the README gives, as argument lists."""
    readme = (ROOT / "README.md").read_text()
    return [shlex.split(line) for line in re.findall(r"^dvc exp show .*$", readme, re.M)]


def test_experiments_rerun_what_their_param_feeds_and_exp_show_lists_them_as_the_readme_gives_it(tiny_run, tmp_path):
    """Two experiments: each reruns what its param feeds; `dvc exp show --json` lists each with its params
    and the headline metrics; the README's commands show their changed params and the headlines, and no
    dependency hash; plain `dvc exp show` lists the headlines, not every metric leaf."""
    root = copy_run(tiny_run, tmp_path / "run")
    # the run as the commit experiments branch from (the copy's commit holds the default's params)
    run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "run", "dvc.lock", "params.yaml"], root)
    out = run(["dvc", "exp", "run", "-n", "abl12", "-S", "binding_ablation.n_programs=12"], root).stdout
    assert sorted(ran_stages(out)) == [
        "binding_ablation@0",
        "binding_ablation@1",
        "binding_report",
        "index_report",
        "params_check",  # first: the whole file checked; its stamp's bytes do not change
    ]
    written = json.loads((root / "reports/metrics/headlines.json").read_text())  # abl12's
    run(["dvc", "exp", "run", "-n", "ex4", "-S", "report.n_examples=4"], root)

    shown = json.loads(run(["dvc", "exp", "show", "--json"], root).stdout)
    experiments = {
        exp["name"]: exp["revs"][0]["data"] for baseline in shown for exp in baseline.get("experiments") or []
    }
    assert set(experiments) == {"abl12", "ex4"}
    data = experiments["abl12"]
    assert data["params"]["params.yaml"]["data"]["binding_ablation"]["n_programs"] == 12
    assert experiments["ex4"]["params"]["params.yaml"]["data"]["report"]["n_examples"] == 4
    baseline = next(b["data"] for b in shown if b.get("experiments"))  # the commit they branched from
    assert baseline["params"]["params.yaml"]["data"]["binding_ablation"]["n_programs"] != 12
    # the only metrics file: each claim's number per study, as the index judges it (DVC leaves out the
    # ones not measured at the tiny profile: null in the file)
    assert set(data["metrics"]) == {"reports/metrics/headlines.json"}
    assert sum(map(len, written.values())) == len(CLAIMS)
    assert data["metrics"]["reports/metrics/headlines.json"]["data"] == {
        s: {k: v for k, v in m.items() if v is not None} for s, m in written.items()
    }

    commands = readme_exp_show()
    assert len(commands) == 2
    changed, every = (
        next(csv.reader(io.StringIO(run([*cmd, "--csv"], root).stdout))) for cmd in commands
    )  # the header row: one name per column
    keys = [headline_key(c) for c in CLAIMS]
    assert [c for c in changed if c not in ("Experiment", "rev", "typ", "Created", "parent", "State", "Executor")] == [
        *[c for c in changed if "." in c and c.split(".", 1)[1] in keys],  # headlines that differ, if any
        "binding_ablation.n_programs",
        "report.n_examples",
    ]
    measured = {f"{s}.{k}" for s, m in written.items() for k, v in m.items() if v is not None}
    assert {c for c in every if c.split(".", 1)[0] in STUDY_KEYS} == measured
    assert not [c for c in every if "/" in c or c.endswith(".yaml")]  # no dependency hashes
    plain = next(csv.reader(io.StringIO(run(["dvc", "exp", "show", "--csv"], root).stdout)))
    assert {c for c in plain if c.split(".", 1)[0] in STUDY_KEYS} == measured  # the headlines, not every leaf


def test_the_opt_in_analyses_turned_off_rerun_only_the_pages_which_say_how_to_turn_them_on(tiny_run, tmp_path):
    """The default's state (no aid variant, no LLC curve) reached from the tiny run, which has them all:
    the reports alone rerun, their metrics hold none, and each page says where they would be."""
    root = copy_run(tiny_run, tmp_path / "run")
    off = ["-S", "binding_aids.aids=[]", "-S", "binding_llc.seeds=[]", "-S", "grounding_llc.models=[]"]
    out = run(["dvc", "exp", "run", "-n", "lean", *off], root).stdout
    assert sorted(ran_stages(out)) == ["binding_report", "grounding_report", "index_report", "params_check"]
    binding = json.loads((root / "reports/metrics/binding.json").read_text())
    grounding = json.loads((root / "reports/metrics/grounding.json").read_text())
    assert binding["aids"] == {} and binding["llc"] == {} and grounding["llc"] == {}
    assert "make repro PROFILE=full" in (root / "reports/binding.html").read_text()
    assert "make repro PROFILE=full" in (root / "reports/grounding.html").read_text()
    assert "not run (opt-in" in (root / "reports/index.html").read_text()

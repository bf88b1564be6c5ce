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


def test_an_experiment_reruns_what_its_param_feeds_and_exp_show_lists_its_metrics(tiny_run, tmp_path):
    root = copy_run(tiny_run, tmp_path / "run")
    out = run(["dvc", "exp", "run", "-n", "abl12", "-S", "binding_ablation.n_programs=12"], root).stdout
    assert sorted(ran_stages(out)) == [
        "binding_ablation@0",
        "binding_ablation@1",
        "binding_report",
        "index_report",
        "params_check",  # first: the whole file checked; its stamp's bytes do not change
    ]
    shown = json.loads(run(["dvc", "exp", "show", "--json"], root).stdout)
    experiments = {
        exp["name"]: exp["revs"][0]["data"] for baseline in shown for exp in baseline.get("experiments") or []
    }
    assert set(experiments) == {"abl12"}
    data = experiments["abl12"]
    assert data["params"]["params.yaml"]["data"]["binding_ablation"]["n_programs"] == 12
    baseline = next(b["data"] for b in shown if b.get("experiments"))  # the commit it branched from
    assert baseline["params"]["params.yaml"]["data"]["binding_ablation"]["n_programs"] != 12
    # the only metrics file: each claim's number per study, as the index judges it
    assert set(data["metrics"]) == {"reports/metrics/headlines.json"}
    headlines = data["metrics"]["reports/metrics/headlines.json"]["data"]
    assert set(headlines) == {"binding", "associations", "grounding", "grounding_visual"}
    assert sum(map(len, headlines.values())) == len(CLAIMS)


def readme_exp_show() -> list[list[str]]:
    """The `dvc exp show` commands the README gives, as argument lists."""
    readme = (ROOT / "README.md").read_text()
    return [shlex.split(line) for line in re.findall(r"^dvc exp show .*$", readme, re.M)]


def test_exp_show_as_the_readme_gives_it_lists_changed_params_and_headlines_not_every_leaf(tiny_run, tmp_path):
    """Two experiments: the README's commands show their changed params and the headline metrics, and no
    dependency hash; plain `dvc exp show` lists the headlines, not every metric leaf."""
    root = copy_run(tiny_run, tmp_path / "run")
    run(["dvc", "exp", "run", "-n", "abl12", "-S", "binding_ablation.n_programs=12"], root)
    run(["dvc", "exp", "run", "-n", "ex4", "-S", "report.n_examples=4"], root)
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
    assert {c.split(".", 1)[1] for c in every if c.split(".", 1)[0] in STUDY_KEYS} == set(keys)
    assert not [c for c in every if "/" in c or c.endswith(".yaml")]  # no dependency hashes
    plain = next(csv.reader(io.StringIO(run(["dvc", "exp", "show", "--csv"], root).stdout)))
    assert {c.split(".", 1)[1] for c in plain if c.split(".", 1)[0] in STUDY_KEYS} == set(keys)
